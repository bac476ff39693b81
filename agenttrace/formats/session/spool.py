"""Ready-made pieces of a session file, kept out of memory, and writing a file from pieces.

A session file is one gzip stream of one JSON document, but gzip allows a file to be several
*members* one after the other, read back as the concatenation of their contents (RFC 1952; every
gzip reader, ours included, does so). So the parts of a session that no longer change (a
finished run, a finished op, a block of events) are compressed once into members and put aside
in a :class:`Spool`; each write of the file compresses only what changed since and copies the
rest as it is. A write then costs in proportion to what changed, and the session's finished
parts cost no memory: past a threshold the spool moves to an unnamed temporary file.

A *piece* is either ``bytes`` (JSON text not yet compressed) or a :class:`Ref` to members in the
spool. :func:`write_pieces` writes a list of pieces as one gzip file, atomically.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import sys
import tempfile
import threading
import weakref
import zlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

MEMBER_LEVEL = 3
"""zlib level for members: session JSON compresses ~7.6x at 3, ~8.2x at 4 and ~9.5x at 6, and 3
(zlib's fastest strategy, as 1 and 2) compresses it 1.5 to 4 times as fast as 4."""

TEMP_SUFFIX = ".tmp"
"""The suffix of :func:`atomic_file`'s temporary files."""

SPOOL_PREFIX = ".agenttrace-spool-"
"""The name a spool's temporary file has, where the system cannot make it unnamed (briefly)."""


class Ref:
    """Compressed gzip members at ``offset`` in a spool, ``length`` bytes long."""

    __slots__ = ("length", "offset")

    def __init__(self, offset: int, length: int) -> None:
        self.offset = offset
        self.length = length


Piece = bytes | Ref


def gzip_member(data: bytes, level: int = MEMBER_LEVEL) -> bytes:
    """``data`` as one complete gzip member."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, 31)  # 31: the gzip container
    return compressor.compress(data) + compressor.flush()


class Spool:
    """An append-only store of compressed members: in memory up to ``spill_bytes``, then in an
    unnamed temporary file in ``directory`` (removed by the system when closed).

    Members are added in memory and moved to the file ``spill_bytes`` at a time. If the file
    cannot be written (a full disk), they stay in memory and the move is tried again once twice
    as much has gathered: a spool loses nothing to a full disk, it only costs memory meanwhile.

    The members in memory are kept as they came, a list, not one growing buffer: a buffer
    grown to a few hundred kB, copied and dropped at every move, left the C allocator's heap
    fragmented, and the process grew by megabytes per 1,000 sub-agents with no Python object
    more (``benchmarks/bench_agents.py``).
    """

    def __init__(self, directory: Path, spill_bytes: int = 256 << 10) -> None:
        self.directory = directory
        self.spill_bytes = spill_bytes
        self._chunks: list[bytes] = []
        """The members after the first ``_on_file`` bytes (all of them until the first move)."""
        self._chunk_ends: list[int] = []
        """Where each of ``_chunks`` ends in the spool (ascending: a bisection finds a ref's)."""
        self._file: BinaryIO | None = None
        self._on_file = 0
        self._size = 0
        self._spill_at = spill_bytes
        self._lock = threading.Lock()
        self.closed = False

    @property
    def size(self) -> int:
        """Bytes stored so far."""
        return self._size

    @property
    def on_disk(self) -> bool:
        """True once part of the spool has moved to its temporary file."""
        return self._on_file > 0

    def add(self, members: bytes) -> Ref:
        """Store compressed ``members``; returns where they are."""
        return self._add_all((members,))

    def compress(self, pieces: Iterable[Piece], level: int = MEMBER_LEVEL) -> list[Ref]:
        """``pieces`` with every run of ``bytes`` compressed into the spool: refs only."""
        return _merge_adjacent(
            [
                self.add(gzip_member(run, level)) if isinstance(run, bytes) else run
                for run in _runs(pieces)
            ]
        )

    def pack(self, pieces: Iterable[Piece], level: int = MEMBER_LEVEL) -> Ref:
        """``pieces`` as one ref: runs of ``bytes`` compressed, and members already in the spool
        copied after them (compressed bytes, not compressed again) unless they already follow
        one another. :meth:`compress` leaves a ref per run of pieces, and a node that holds
        them holds them for the session's life; one ref per pack keeps a long session's
        memory flat. The copies' first places stay in the spool unused (it only grows)."""
        runs = list(_runs(pieces))
        refs = [run for run in runs if isinstance(run, Ref)]
        if len(refs) == len(runs):
            refs = _merge_adjacent(refs)
            if len(refs) == 1:
                return refs[0]  # already one: nothing to copy
        parts = [
            gzip_member(run, level) if isinstance(run, bytes) else self.read(run) for run in runs
        ]
        return self._add_all(parts)

    def read(self, ref: Ref) -> bytes:
        """The bytes ``ref`` points at."""
        with self._lock:
            parts = []
            end = ref.offset + ref.length
            if ref.offset < self._on_file and self._file is not None:
                parts.append(
                    _pread(self._file.fileno(), min(end, self._on_file) - ref.offset, ref.offset)
                )
            parts.extend(bytes(view) for view in self._in_memory(ref))
            return b"".join(parts)

    def copy_to(self, target: BinaryIO, ref: Ref) -> None:
        """Write the bytes ``ref`` points at to ``target`` (in the kernel where it can)."""
        with self._lock:
            end = ref.offset + ref.length
            if ref.offset < self._on_file and self._file is not None:
                target.flush()
                length = min(end, self._on_file) - ref.offset
                _copy_range(self._file.fileno(), target.fileno(), ref.offset, length)
            for view in self._in_memory(ref):
                target.write(view)

    def close(self) -> None:
        """Release the memory or the temporary file (its refs are invalid afterwards)."""
        with self._lock:
            self.closed = True
            self._chunks = []
            self._chunk_ends = []
            if self._file is not None:
                with contextlib.suppress(OSError):
                    self._file.close()
                self._file = None

    def _add_all(self, parts: Sequence[bytes]) -> Ref:
        """Store ``parts`` one after the other; returns where they are, together."""
        with self._lock:
            start = self._size
            for members in parts:
                if not members:
                    continue
                self._chunks.append(members)
                self._size += len(members)
                self._chunk_ends.append(self._size)
            if self._size - self._on_file > self._spill_at:
                self._spill()
            return Ref(start, self._size - start)

    def _in_memory(self, ref: Ref) -> Iterator[memoryview]:
        """The parts of ``ref`` that are in memory, in order (under the lock)."""
        start = max(ref.offset, self._on_file)
        end = ref.offset + ref.length
        index = bisect.bisect_right(self._chunk_ends, start)
        while start < end and index < len(self._chunks):
            chunk_end = self._chunk_ends[index]
            chunk = self._chunks[index]
            chunk_start = chunk_end - len(chunk)
            yield memoryview(chunk)[start - chunk_start : min(end, chunk_end) - chunk_start]
            start = chunk_end
            index += 1

    def _spill(self) -> None:
        """Move the members in memory to the end of the temporary file (made on first use)."""
        length = self._size - self._on_file
        try:
            if self._file is None:
                self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
                # Held for the spool's life (closed by close() or the finalizer), unbuffered:
                # what a failed write left is cut off below, and nothing waits in a buffer.
                handle = tempfile.TemporaryFile(  # noqa: SIM115
                    dir=self.directory, prefix=SPOOL_PREFIX, buffering=0
                )
                self._file = handle
                # A spool dropped unclosed closes its file; not at interpreter exit, where
                # agenttrace's own shutdown may still be writing the session file from it.
                # Inline in the collector's thread: closing a descriptor takes no lock of ours.
                weakref.finalize(self, _close_quietly, handle).atexit = False
            _pwrite_all(self._file.fileno(), self._chunks, self._on_file)
        except OSError:
            if self._file is not None:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._file.fileno(), self._on_file)
            self._spill_at = 2 * length  # try again once twice as much has gathered
            return
        self._on_file += length
        self._chunks = []
        self._chunk_ends = []
        self._spill_at = self.spill_bytes


def _pread(fd: int, length: int, offset: int) -> bytes:
    parts = []
    while length > 0:
        chunk = os.pread(fd, length, offset)
        if not chunk:
            raise OSError(f"the spool ended {length} bytes early")
        parts.append(chunk)
        length -= len(chunk)
        offset += len(chunk)
    return b"".join(parts)


def _pwrite_all(fd: int, chunks: Sequence[bytes], offset: int) -> None:
    """Write ``chunks`` one after the other at ``offset``: a system call per
    :data:`_IOV_MAX` chunks, not one buffer joined from them."""
    views = [memoryview(chunk) for chunk in chunks]
    first = 0
    while first < len(views):
        written = os.pwritev(fd, views[first : first + _IOV_MAX], offset)
        if written <= 0:
            raise OSError("the spool's file took no more bytes")
        offset += written
        while first < len(views) and written >= len(views[first]):
            written -= len(views[first])
            first += 1
        if written:
            views[first] = views[first][written:]


_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024


def _runs(pieces: Iterable[Piece]) -> Iterator[Piece]:
    """``pieces`` with each run of consecutive ``bytes`` joined into one (to become one gzip
    member), refs as they are, in order."""
    pending: list[bytes] = []
    for piece in pieces:
        if isinstance(piece, bytes):
            pending.append(piece)
            continue
        if pending:
            yield b"".join(pending)
            pending = []
        yield piece
    if pending:
        yield b"".join(pending)


def _close_quietly(handle: BinaryIO) -> None:
    with contextlib.suppress(OSError):
        handle.close()


def _merge_adjacent(refs: list[Ref]) -> list[Ref]:
    merged: list[Ref] = []
    for ref in refs:
        last = merged[-1] if merged else None
        if last is not None and last.offset + last.length == ref.offset:
            merged[-1] = Ref(last.offset, last.length + ref.length)
        else:
            merged.append(ref)
    return merged


def _copy_range(source: int, target: int, offset: int, length: int) -> None:
    """Append ``length`` bytes at ``offset`` of ``source`` to ``target``'s current position."""
    copy_file_range = getattr(os, "copy_file_range", None)
    done = 0
    if copy_file_range is not None:
        try:
            while done < length:
                copied = copy_file_range(source, target, length - done, offset + done)
                if copied == 0:
                    break
                done += copied
        except OSError:  # another file system, an old kernel: copy through user space
            pass
    while done < length:
        chunk = os.pread(source, min(1 << 20, length - done), offset + done)
        if not chunk:
            raise OSError(f"the spool ended {length - done} bytes early")
        os.write(target, chunk)
        done += len(chunk)


@contextlib.contextmanager
def atomic_file(path: Path) -> Iterator[BinaryIO]:
    """A file that replaces ``path`` only once it is written whole: a temporary file in the
    same directory (``.<name>.<random>.tmp``), fsync, rename; readable by its owner only (0600).
    On any failure the temporary file is removed and ``path`` is left as it was. The temporary
    file is locked (``flock``) while it exists, so a process tidying the directory can tell it
    from one a killed process left (``agenttrace.formats.session.leftovers``)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        lock_exclusively(fd)
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


if sys.platform == "win32":

    def lock_exclusively(fd: int) -> None:
        """No advisory locks here; a file open on Windows cannot be removed anyway."""

else:
    import fcntl

    def lock_exclusively(fd: int) -> None:
        """Hold an exclusive ``flock`` on ``fd`` until it is closed (best effort: a file system
        without locks, NFS for one, goes without)."""
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def write_pieces(path: Path, pieces: Sequence[Piece], spool: Spool | None) -> None:
    """Write ``pieces`` to ``path`` as one gzip file, atomically (:func:`atomic_file`). Runs of
    ``bytes`` are compressed here, refs are copied from ``spool``."""
    with atomic_file(path) as handle:
        for run in _runs(pieces):
            if isinstance(run, bytes):
                handle.write(gzip_member(run))
            elif spool is None:
                raise ValueError("a piece refers to a spool that was not given")
            else:
                spool.copy_to(handle, run)


def gzip_bytes(pieces: Sequence[Piece], spool: Spool | None, level: int = 1) -> bytes:
    """``pieces`` as the gzip data :func:`write_pieces` would write, in memory (runs of
    ``bytes`` compressed at ``level``, refs read from ``spool``)."""
    parts: list[bytes] = []
    for run in _runs(pieces):
        if isinstance(run, bytes):
            parts.append(gzip_member(run, level))
        elif spool is None:
            raise ValueError("a piece refers to a spool that was not given")
        else:
            parts.append(spool.read(run))
    return b"".join(parts)
