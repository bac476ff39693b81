"""A session store in a directory (``file:///path``): one machine, or a directory several share
(NFS), with the same promises as the remote stores.

Layout, under the store's root::

    <session_id>/segments/<name>     each segment, created once (its name's ``/`` are folders)
    <session_id>/manifest            "<version>\\n" then the manifest's bytes
    <session_id>/manifest.lock       held (flock) while the manifest is swapped

A segment is written to a temporary file and linked to its name (``link`` fails if the name
exists, so the first writer wins and a reader never sees half a segment). The manifest is
swapped under an exclusive ``flock`` on its lock file: read the version, compare, write a
temporary file and rename it over, so a reader without the lock still sees one whole version.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

from agenttrace.formats.safe_open import UnsafeFile, open_regular
from agenttrace.formats.session.files import SessionFileError
from agenttrace.formats.stores.base import (
    MANIFEST_BYTES,
    Manifest,
    ManifestConflict,
    SegmentExists,
    SegmentInfo,
    SegmentTooLarge,
    StoreError,
    check_segment_name,
    check_session_id,
)

_SEGMENTS = "segments"
_MANIFEST = "manifest"
_LOCK = "manifest.lock"
_TEMP_PREFIX = ".tmp-"


class LocalStore:
    """Sessions in a directory; see the module docstring for the layout and how it keeps the
    store's promises."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).absolute()
        self.url = self.root.as_uri()

    def _session(self, session_id: str) -> Path:
        return self.root / check_session_id(session_id)

    def _segment(self, session_id: str, name: str) -> Path:
        return self._session(session_id) / _SEGMENTS / check_segment_name(name)

    def append(self, session_id: str, name: str, data: bytes) -> None:
        """Create a segment, only if absent (see ``SessionStore.append``)."""
        path = self._segment(session_id, name)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temp = path.parent / f"{_TEMP_PREFIX}{secrets.token_hex(8)}"
            with open(temp, "xb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            try:
                os.link(temp, path)
            finally:
                temp.unlink()
        except FileExistsError:
            raise SegmentExists(
                f"{self.url}: session {session_id} has a segment {name} already"
            ) from None
        except OSError as error:
            raise StoreError(
                f"{self.url}: cannot write segment {name}: {error.strerror or error}"
            ) from None

    def segments(self, session_id: str) -> list[SegmentInfo]:
        """The session's segments, sorted by name."""
        top = self._session(session_id) / _SEGMENTS
        found: list[SegmentInfo] = []
        for folder, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
            for file in files:
                if file.startswith(_TEMP_PREFIX):
                    continue
                path = Path(folder, file)
                with contextlib.suppress(OSError):
                    info = path.lstat()
                    if os.path.isfile(path) and not path.is_symlink():
                        found.append(SegmentInfo(path.relative_to(top).as_posix(), info.st_size))
        return sorted(found, key=lambda segment: segment.name)

    def read(self, session_id: str, name: str, limit: int) -> bytes:
        """A segment's bytes, refused past ``limit``."""
        path = self._segment(session_id, name)
        try:
            with os.fdopen(open_regular(path), "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if size > limit:
                    raise SegmentTooLarge(
                        f"{self.url}: segment {name} is {size} bytes, over the {limit}-byte limit"
                    )
                data = handle.read(limit + 1)
        except FileNotFoundError:
            raise StoreError(f"{self.url}: session {session_id} has no segment {name}") from None
        except UnsafeFile as error:
            raise StoreError(f"{self.url}: segment {name}: {error.strerror}") from None
        except OSError as error:
            raise StoreError(
                f"{self.url}: cannot read segment {name}: {error.strerror or error}"
            ) from None
        if len(data) > limit:
            raise SegmentTooLarge(f"{self.url}: segment {name} grew past the {limit}-byte limit")
        return data

    def manifest(self, session_id: str) -> Manifest | None:
        """The session's manifest, or None."""
        path = self._session(session_id) / _MANIFEST
        try:
            with os.fdopen(open_regular(path), "rb") as handle:
                raw = handle.read(MANIFEST_BYTES + 64)
        except FileNotFoundError:
            return None
        except OSError as error:
            raise StoreError(
                f"{self.url}: cannot read the manifest of {session_id}: {error.strerror or error}"
            ) from None
        version, newline, data = raw.partition(b"\n")
        if not newline or not version.isdigit() or len(data) > MANIFEST_BYTES:
            raise StoreError(f"{self.url}: the manifest of {session_id} is damaged")
        return Manifest(data, version.decode())

    def swap_manifest(self, session_id: str, data: bytes, expected: str | None) -> str:
        """Compare-and-swap the manifest under its lock file."""
        if len(data) > MANIFEST_BYTES:
            raise StoreError(
                f"{self.url}: a manifest of {len(data)} bytes is over the limit ({MANIFEST_BYTES})"
            )
        folder = self._session(session_id)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with self._locked(folder):
                current = self.manifest(session_id)
                found = None if current is None else current.version
                if found != expected:
                    raise ManifestConflict(
                        f"{self.url}: manifest of {session_id} is version {found}, not {expected}"
                    )
                version = str(int(found or 0) + 1)
                temp = folder / f"{_TEMP_PREFIX}{secrets.token_hex(8)}"
                with open(temp, "xb") as handle:
                    handle.write(version.encode() + b"\n" + data)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(temp, folder / _MANIFEST)
                return version
        except StoreError:
            raise
        except OSError as error:
            raise StoreError(
                f"{self.url}: cannot write the manifest of {session_id}: {error.strerror or error}"
            ) from None

    @contextlib.contextmanager
    def _locked(self, folder: Path) -> Iterator[None]:
        fd = os.open(
            folder / _LOCK,
            os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC,
            0o644,
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing lets go of the flock

    def sessions(self) -> list[str]:
        """The session ids under the root."""
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return []
        except OSError as error:
            if error.errno == errno.ENOTDIR:
                raise StoreError(f"{self.url}: not a directory") from None
            raise StoreError(f"{self.url}: cannot list: {error.strerror or error}") from None
        found = []
        for name in names:
            folder = self.root / name
            if folder.is_dir() and not folder.is_symlink():
                with contextlib.suppress(SessionFileError):
                    check_session_id(name)
                    if (folder / _MANIFEST).exists() or (folder / _SEGMENTS).is_dir():
                        found.append(name)
        return sorted(found)

    def close(self) -> None:
        """Nothing to let go of."""
