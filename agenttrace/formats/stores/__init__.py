"""Session stores: where sessions live when more than one machine reads and writes them.

:mod:`~agenttrace.formats.stores.base` says what a store is (segments created once, a manifest
swapped by compare-and-swap); :func:`open_store` opens one from its URL
(``AGENTTRACE_SESSIONS_URL``): ``file:///path`` (:mod:`~agenttrace.formats.stores.local`),
``s3://bucket/prefix`` and ``postgresql://...`` (their modules, each needing its extra).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from agenttrace.formats.stores.base import (
    Manifest,
    ManifestConflict,
    SegmentExists,
    SegmentInfo,
    SegmentTooLarge,
    SessionStore,
    StoreError,
)

__all__ = [
    "Manifest",
    "ManifestConflict",
    "SegmentExists",
    "SegmentInfo",
    "SegmentTooLarge",
    "SessionStore",
    "StoreError",
    "open_store",
]


def open_store(url: str) -> SessionStore:
    """The store at ``url``: ``file:///path`` or a plain path, ``s3://bucket/prefix``; other
    schemes as their modules add them. :class:`StoreError` for a URL no store takes."""
    scheme = urlsplit(url).scheme
    if scheme in ("", "file"):
        from agenttrace.formats.stores.local import LocalStore

        path = urlsplit(url).path if scheme == "file" else url
        if not path:
            raise StoreError(
                f"not a store URL: {url!r} (file:///path, s3://bucket/prefix, postgresql://...)"
            )
        return LocalStore(path)
    if scheme == "s3":
        # Imported here: s3fs (the [s3] extra) is loaded only by those who use S3.
        from agenttrace.formats.stores.s3 import open_s3_store

        return open_s3_store(url)
    raise StoreError(
        f"not a store URL: {url!r} (file:///path, s3://bucket/prefix, postgresql://...)"
    )
