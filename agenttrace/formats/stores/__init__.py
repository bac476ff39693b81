"""Session stores: where sessions live when more than one machine reads and writes them.

:mod:`~agenttrace.formats.stores.base` says what a store is (segments created once, a manifest
swapped by compare-and-swap); :func:`open_store` opens one from its URL:
``file:///path`` (:mod:`~agenttrace.formats.stores.local`), ``s3://bucket/prefix`` and
``postgresql://...`` (their modules, each needing its extra).
"""

from __future__ import annotations

import os
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
    "store_identity",
]


def open_store(url: str) -> SessionStore:
    """The store at ``url``: ``file:///path`` or a plain path, ``s3://bucket/prefix`` (s3fs
    imported only then), ``postgresql://...`` (or ``postgres://``; psycopg imported only then).
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
    if scheme == "s3":
        # Imported here: s3fs (the [s3] extra) is loaded only by those who use S3.
        from agenttrace.formats.stores.s3 import open_s3_store

        return open_s3_store(url)
    # The scheme only: the rest of a URL may hold a password.
    raise StoreError(
        f"not a store URL: no store takes {scheme}:// (file:///path, s3://bucket/prefix,"
        " postgresql://...)"
    )


def store_identity(url: str) -> str | None:
    """What names the store at ``url`` to another process without giving anything away: its
    scheme, host, port and path, no credentials and no query (``postgresql://db:5432/traces``,
    ``s3://bucket/prefix``, ``file:///srv/sessions``); None for a URL that cannot be parsed.
    Two processes whose URLs have one identity write one store (two PostgreSQL stores in one
    database told apart only by the query's ``search_path`` share one: name the schema in the
    database instead, or give them different databases)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme or "file"
    if scheme == "postgres":
        scheme = "postgresql"
    if scheme == "file":
        path = parts.path if parts.scheme else url
        return "file://" + os.path.abspath(path) if path else None
    host = (parts.hostname or "").lower()
    netloc = f"{host}:{port}" if port is not None else host
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"
