"""Appending whole lines to the billing ledger (docs/session-file.md) from any process: one
``write`` to an ``O_APPEND`` file under an exclusive lock, so two processes appending at once
never interleave. A torn last line (a process killed in the middle of its write) is cut off,
under the lock, before the next append, so no line ever merges into it; a write that fails
half-way (a full disk) takes back what it wrote.

The recorder's ledger (``agenttrace.recorder.ledger``) appends each op's line through this as
the op ends; ``resume`` (``agenttrace.session.interrupted_calls``) and ``agenttrace resolve``
append the lines they owe a session's calls a kill cut short.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path

logger = logging.getLogger("agenttrace")


def append_lines(path: Path, lines: list[str]) -> None:
    """Append ``lines`` to ``path`` in one write, under an exclusive lock."""
    if lines:
        _append_locked(
            path, "".join(line + "\n" for line in lines).encode("utf-8", "backslashreplace")
        )


def _append_locked(path: Path, data: bytes) -> None:
    """Append ``data`` (whole lines) under the lock: all of it or, raising OSError, none."""
    fd = _open(path)
    try:
        _append_to(fd, path, data)
    finally:
        os.close(fd)


def _open(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    return os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)


def _append_to(fd: int, path: Path, data: bytes) -> None:
    """:func:`_append_locked` to the ledger open at ``fd``."""
    _lock(fd)
    try:
        size = _cut_torn_line(fd, path)
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view) :]
        except OSError:
            if len(view) < len(data):  # take back the part that was written
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
            raise
    finally:
        _unlock(fd)


_TAIL_BLOCK = 64 << 10


def _cut_torn_line(fd: int, path: Path) -> int:
    """If the file does not end in a newline (a write cut off by a crash), cut the torn line
    off; returns the file's size after. Under the lock, so no append is under way."""
    size = os.fstat(fd).st_size
    if not size or _read_at(fd, size - 1, 1) == b"\n":
        return size
    keep = 0
    end = size
    while end > 0:  # back, a block at a time, to the last newline
        start = max(0, end - _TAIL_BLOCK)
        newline = _read_at(fd, start, end - start).rfind(b"\n")
        if newline >= 0:
            keep = start + newline + 1
            break
        end = start
    os.ftruncate(fd, keep)
    logger.warning(
        "agenttrace: the billing ledger %s ended in a torn line (%d bytes, a write cut off by a "
        "crash); it was cut off before appending",
        path,
        size - keep,
    )
    return keep


def _read_at(fd: int, offset: int, length: int) -> bytes:
    """``length`` bytes at ``offset`` (seek and read: there is no pread on Windows; appends
    go to the end of an O_APPEND file wherever the position is)."""
    os.lseek(fd, offset, os.SEEK_SET)
    parts = []
    while length > 0 and (chunk := os.read(fd, length)):
        parts.append(chunk)
        length -= len(chunk)
    return b"".join(parts)


# An exclusive lock on the whole ledger, so two processes appending never interleave: flock on
# POSIX; on Windows, msvcrt's lock on the file's first byte (O_APPEND still writes at the end).
if sys.platform == "win32":
    import msvcrt

    def _lock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_LOCK, 1)

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _lock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)
