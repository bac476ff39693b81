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
import re
import sys
from collections.abc import Callable
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


SCAN_BLOCK = 1 << 20
"""How much of the ledger's end :func:`find_lines` reads at a time."""
SCAN_LIMIT = 32 << 20
"""The most of the ledger's end :func:`find_lines` reads: past it a line is taken as absent."""


def find_lines(path: Path, wanted: Callable[[bytes], bool], since_ms: int) -> list[bytes]:
    """The lines of the ledger at ``path`` that ``wanted`` takes, looked for back from its end
    as far as lines appended since ``since_ms`` can be: a line's ``timestamp`` is never later
    than when it was appended, so the search stops at a block whose lines all ended before
    ``since_ms`` (less a minute), or after :data:`SCAN_LIMIT` bytes. Lines appended late by
    design (a decision of ``agenttrace resolve``, an interrupted LLM call's: their timestamp is
    the call's) do not stop it. A ledger that cannot be read holds none."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return []
    found: list[bytes] = []
    cutoff = since_ms - 60_000
    try:
        end = os.fstat(fd).st_size
        carry = b""
        read = 0
        while end > 0 and read < SCAN_LIMIT:
            start = max(0, end - SCAN_BLOCK)
            block = _read_at(fd, start, end - start) + carry
            read += end - start
            end = start
            lines = block.split(b"\n")
            carry = lines.pop(0) if start > 0 else b""  # a line's start is in the block before
            latest = None
            for line in lines:
                if wanted(line):
                    found.append(line)
                stamp = entry_timestamp(line)
                if stamp is not None and (latest is None or stamp > latest):
                    latest = stamp
            if latest is not None and latest < cutoff:
                break
        if carry and end == 0 and wanted(carry):
            found.append(carry)
    except OSError:
        return found
    finally:
        os.close(fd)
    return found


def entry_timestamp(line: bytes) -> int | None:
    """The ``timestamp`` of a ledger line appended as its op ended (``None`` for one appended
    late by design, or one that is not an entry), read without decoding the line."""
    if b'"decision":' in line or b'"providerMayHaveBilled":' in line:
        return None
    stamp = _TIMESTAMP.search(line)  # no decoding: the scan may read megabytes
    return int(stamp.group(1)) if stamp is not None else None


_TIMESTAMP = re.compile(rb'^\{"timestamp":\s*(\d+)')
