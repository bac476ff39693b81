"""Session stores: where sessions live when more than one machine reads and writes them.

:mod:`~agenttrace.formats.stores.base` says what a store is (segments created once, a manifest
swapped by compare-and-swap); :func:`open_store` opens one from its URL:
``file:///path`` (:mod:`~agenttrace.formats.stores.local`), ``s3://bucket/prefix`` and
``postgresql://...`` (their modules, each needing its extra).
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
    """The store at ``url``: ``file:///path`` or a plain path, ``postgresql://...`` (or
    ``postgres://``; psycopg imported only then); other schemes as their modules add them.
    :class:`StoreError` for a URL no store takes, or a store that cannot be reached."""
    try:
        scheme = urlsplit(url).scheme
    except ValueError:  # an unclosed [ of an IPv6 address; the URL may hold a password
        raise StoreError("not a store URL: one that cannot be parsed") from None
    if scheme in ("", "file"):
        from agenttrace.formats.stores.local import LocalStore

        path = urlsplit(url).path if scheme == "file" else url
        if not path:
            raise StoreError(
                f"not a store URL: {url!r} (file:///path, s3://bucket/prefix, postgresql://...)"
            )
        return LocalStore(path)
    if scheme in ("postgresql", "postgres"):
        from agenttrace.formats.stores.postgres import PostgresStore

        return PostgresStore(url)
    raise StoreError(
        f"not a store URL: {url!r} (file:///path, s3://bucket/prefix, postgresql://...)"
    )
