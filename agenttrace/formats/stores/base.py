"""What a session store is: the few operations agenttrace needs from the place sessions live.

A store holds sessions; a session is a set of **segments** and one small **manifest**.

- A segment is immutable bytes under a name. It is created once (``append``: only if no
  segment of that name exists, so two writers racing for one name cannot both win) and then
  only read. A writer's growing event stream is a series of segments, never a file rewritten.
- The manifest is a small document (a few KB: the session's lease, its writers) replaced only
  by compare-and-swap (``swap_manifest``): the caller names the version it read, and the swap
  fails if someone else replaced it since. That is all a lease across hosts needs.

Every store keeps these two promises with its engine's own guarantees, never a check-then-write
in Python: the local directory with ``O_EXCL`` and a lock file, S3 with conditional writes
(``If-None-Match: *``, ``If-Match``), PostgreSQL with a primary key and a version column. One
conformance suite (tests/test_session_stores.py) runs the same tests against each.

Names are checked before any store sees them (:func:`check_segment_name`,
:func:`~agenttrace.formats.session.files.check_session_id`): a name never leaves its session,
whatever a file or a caller hands us.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agenttrace.formats.session.files import SessionFileError, check_session_id

__all__ = [
    "Manifest",
    "ManifestConflict",
    "SegmentExists",
    "SegmentInfo",
    "SegmentTooLarge",
    "SessionStore",
    "StoreError",
    "check_segment_name",
    "check_session_id",
]

MANIFEST_BYTES = 1024 * 1024
"""The largest manifest a store takes or gives back: it holds a lease and a list of writers."""

_SEGMENT_NAME = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}(/[A-Za-z0-9][A-Za-z0-9_.-]{0,127}){0,3}$"
)


class StoreError(SessionFileError):
    """A store that cannot do what was asked: the message says which store and why, in one line."""


class SegmentExists(StoreError):
    """``append`` found a segment of that name already there: someone else created it first."""


class ManifestConflict(StoreError):
    """``swap_manifest`` found another version than the one named: someone swapped it first."""


class SegmentTooLarge(StoreError):
    """A segment larger than the reader's limit: refused before it is read whole."""


@dataclass(frozen=True)
class SegmentInfo:
    """One segment of a session, as listed."""

    name: str
    size: int


@dataclass(frozen=True)
class Manifest:
    """A session's manifest as read: its bytes and the version a swap must name."""

    data: bytes
    version: str
    """Opaque to callers: the store's own (an mtime and counter, an ETag, a row version)."""


def check_segment_name(name: str) -> str:
    """Return ``name`` if it is a segment name a store may hold, else raise :class:`StoreError`.

    A name is up to four ``/``-separated parts, each a letter or digit followed by at most 127
    letters, digits, ``_``, ``.`` and ``-``: no ``..``, no absolute path, nothing that would
    leave the session's place in any store.
    """
    if not isinstance(name, str) or not _SEGMENT_NAME.fullmatch(name) or ".." in name:
        raise StoreError(f"not a segment name: {name!r}")
    return name


@runtime_checkable
class SessionStore(Protocol):
    """Where sessions live: the local directory, an S3 bucket, a PostgreSQL database.

    Every method may raise :class:`StoreError` (a store that cannot be reached, a name that is
    not allowed); a caller never sees the engine's own exception types.
    """

    url: str
    """The store's URL with no secret in it (``file:///...``, ``s3://bucket/prefix``,
    ``postgresql://host/db``): what messages and ``agenttrace list`` show."""

    def append(self, session_id: str, name: str, data: bytes) -> None:
        """Create segment ``name`` of the session holding ``data``, only if there is none of that
        name: :class:`SegmentExists` otherwise, the existing segment untouched. A reader sees
        the segment whole or not at all."""
        ...

    def segments(self, session_id: str) -> list[SegmentInfo]:
        """The session's segments, sorted by name (``[]`` for a session the store lacks)."""
        ...

    def read(self, session_id: str, name: str, limit: int) -> bytes:
        """A segment's bytes: :class:`StoreError` if there is none of that name,
        :class:`SegmentTooLarge` if it is larger than ``limit`` (nothing read past it)."""
        ...

    def manifest(self, session_id: str) -> Manifest | None:
        """The session's manifest, or None if none was ever written."""
        ...

    def swap_manifest(self, session_id: str, data: bytes, expected: str | None) -> str:
        """Replace the manifest with ``data`` if its version is still ``expected`` (None: only
        if there is no manifest yet) and return the new version; :class:`ManifestConflict`
        otherwise, the manifest untouched."""
        ...

    def sessions(self) -> list[str]:
        """The ids of the sessions the store holds (a segment or a manifest), sorted."""
        ...

    def close(self) -> None:
        """Let go of connections and clients; the store is not used after."""
        ...
