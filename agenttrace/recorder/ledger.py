"""The billing ledger (docs/session-file.md): one JSON line per LLM attempt and tool call.

When an op ends (success or failure), its accounting entry is appended to the ledger file
(``~/.agenttrace/accounting.jsonl`` by default); for an op that can carry a cost, in the op's own
thread, before its caller goes on: a run killed half-way has billed everything paid that ended
(``agenttrace.formats.ledger`` makes the entry, and says when a free op's is written; the
opTree node and the stream's ``op_accounted`` line hold the same). Each
line is one ``write`` to an ``O_APPEND`` file under an exclusive ``flock``, so two processes
appending at once never interleave; error texts were scrubbed of secrets when the failure was
recorded (``agenttrace.formats.ledger_file``).

A torn last line (a process killed in the middle of its write) is cut off, under the lock, before
the next append, so no line ever merges into it. A write that fails half-way (a full disk) takes
back what it wrote. Records that could not be written wait in memory (up to ``max_waiting``
bytes) and are written as soon as writing works again (see ``agenttrace.recorder.outage``).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agenttrace._internal.errors import concerning, note_on_node
from agenttrace.formats.ledger_file import _append_to, _open
from agenttrace.formats.ledger_file import append_lines as append_lines
from agenttrace.model.lifecycle import Ended, Record
from agenttrace.recorder.outage import RETRY_INTERVAL, OutageBuffer, count
from agenttrace.recorder.sink import Scheduler, Sink

logger = logging.getLogger("agenttrace")


REOPEN_AFTER = 1.0
"""Seconds an open ledger is written to before it is opened again by name (so a ledger moved
away, a rotation, gets no more than a second of lines after it moved)."""


class _LedgerFile:
    """The ledger, kept open between appends (one per op, in the op's thread: opening it each
    time cost more than the append), opened again by name every :data:`REOPEN_AFTER` seconds
    and after a failed write.

    An append takes :func:`_quick_append` when it can: the usual case (the lock free, the file
    ending in a newline, the write whole) in four system calls made *without* releasing the GIL.
    Each call that releases it costs a thread switch when agenttrace's worker is busy (about 150
    us, measured: more than the rest of an op's bookkeeping). Anything else goes the careful way,
    :func:`_append_to`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1
        self._opened = 0.0
        if hasattr(os, "register_at_fork"):
            # A forked child opens its own: flock locks an open file, which a copied
            # descriptor shares, so parent and child would not keep each other out.
            forget = weakref.WeakMethod(self._forget)
            os.register_at_fork(after_in_child=lambda: (method := forget()) and method())

    def _forget(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)  # the child's copy: the parent's stays open
        self._fd = -1

    def append(self, data: bytes) -> None:
        """Append ``data`` (whole lines) under the lock: all of it or, raising OSError, none."""
        try:
            now = time.monotonic()
            if self._fd < 0 or now - self._opened > REOPEN_AFTER:
                self.close()
                self._fd = _open(self.path)
                self._opened = now
            if not _quick_append(self._fd, data):
                _append_to(self._fd, self.path, data)
        except OSError:
            self.close()
            raise

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1


def _gil_holding_libc() -> Any:
    """The C library, its functions called without releasing the GIL (``ctypes.PyDLL``), or
    ``None`` (Windows, or no C library to load)."""
    if os.name != "posix":
        return None
    try:
        libc = ctypes.PyDLL(None, use_errno=True)
        libc.flock.argtypes = (ctypes.c_int, ctypes.c_int)
        libc.lseek.argtypes = (ctypes.c_int, ctypes.c_longlong, ctypes.c_int)
        libc.lseek.restype = ctypes.c_longlong
        libc.pread.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_longlong)
        libc.pread.restype = ctypes.c_ssize_t
        libc.write.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
        libc.write.restype = ctypes.c_ssize_t
    except (OSError, AttributeError, TypeError):
        return None
    return libc


_libc = _gil_holding_libc()
_LOCK_EX_NB = 2 | 4  # LOCK_EX | LOCK_NB
_LOCK_UN = 8


def _quick_append(fd: int, data: bytes) -> bool:
    """Append ``data`` the usual way, GIL held: True if done. False, having written nothing
    (a part written is taken back), if the lock is taken, the file ends in a torn line, the
    write fell short or anything failed: :func:`_append_to` then does it carefully."""
    libc = _libc
    if libc is None or libc.flock(fd, _LOCK_EX_NB) != 0:
        return False
    try:
        size = libc.lseek(fd, 0, os.SEEK_END)
        if size < 0:
            return False
        if size:
            last = ctypes.create_string_buffer(1)
            if libc.pread(fd, last, 1, size - 1) != 1 or last.raw != b"\n":
                return False  # a torn line to cut off first
        written = libc.write(fd, data, len(data))
        if written == len(data):
            return True
        if written > 0:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
        return False
    finally:
        libc.flock(fd, _LOCK_UN)


class LedgerSink(Sink):
    """Appends each op's accounting entry to the billing ledger as the op ends.

    A durable sink: a paid op's line is written in the op's own thread (its ``Ended`` is
    ``BEFORE_CALL_GOES_ON``), before its caller goes on, so a run killed half-way has billed
    every LLM attempt that ended. Lines that could not be written wait in memory (up to
    ``max_waiting`` bytes) and are written, in order, as soon as writing works again (see
    ``agenttrace.recorder.outage``).
    """

    def __init__(
        self,
        path: Path,
        max_waiting: int = 32 << 20,
        retry_interval: float = RETRY_INTERVAL,
    ) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._waiting = OutageBuffer(self._lock, self._recovered, retry_interval, max_waiting)
        """Records that could not be written yet, in order."""
        self._file = _LedgerFile(path)

    @property
    def max_waiting(self) -> int:
        """Bytes of records kept while the ledger cannot be written; past it, further records
        are dropped (and counted in the warning at exit)."""
        return self._waiting.max_bytes or 0

    @max_waiting.setter
    def max_waiting(self, value: int) -> None:
        self._waiting.max_bytes = value

    def attach(self, scheduler: Scheduler) -> None:
        self._waiting.attach(scheduler)

    durable = True
    takes = frozenset({Ended})

    def consume(self, records: Sequence[Record]) -> None:
        """The ops' ledger lines, in one write (a paid op's in its caller's thread)."""
        billed = [r for r in records if isinstance(r, Ended) and r.accounted is not None]
        if not billed:
            return
        lines = b"".join(r.accounted.ledger_line() for r in billed if r.accounted is not None)
        # A warning about the write is about the (first) op whose line it holds: on its node.
        with concerning(billed[0].origin, billed[0].label):
            self.bill(lines)  # one write

    def bill(self, line: bytes) -> None:
        """Append one record (a whole line), or keep it until the ledger can be written."""
        with self._lock:
            if self._waiting.put(None, line, line.count(b"\n"), self._file.append):
                waiting = sum(self._waiting.counts.values())
                message = (
                    f"agenttrace: cannot write the billing ledger {self.path} "
                    f"({self._waiting.outage.reason}): {count(waiting, 'accounting record')} "
                    f"{'waits' if waiting == 1 else 'wait'} in memory and will be written as "
                    "soon as writing works again. The agent keeps running."
                )
                logger.warning("%s", message)
                note_on_node("WRN", message)  # the op whose line waits (see consume)

    def _recovered(self, written: int) -> None:
        logger.warning(
            "agenttrace: writing works again: the %s that waited %s in the billing ledger %s",
            count(written, "accounting record"),
            "is" if written == 1 else "are",
            self.path,
        )

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        with self._lock:
            return self._waiting.flush()

    def shutdown(self) -> None:
        with self._lock:
            self._waiting.flush()
            reason = self._waiting.outage.reason
            lost = sum(self._waiting.give_up().values()) + self._waiting.dropped
            if lost:
                logger.warning(
                    "agenttrace: could not write the billing ledger %s before exit (%s): %s "
                    "%s not in it",
                    self.path,
                    reason,
                    count(lost, "accounting record"),
                    "is" if lost == 1 else "are",
                )
            self._waiting.dropped = 0
            self._file.close()
