"""The heartbeat of a lease's holder (docs/journal.md, "Leases"): how a hung holder is told from
a live one.

A live holder keeps its lease's file locked, so a taker knows it is alive; whether it still
runs is another matter (stopped with SIGSTOP, or stuck for good). So while a process holds a
lease, one daemon thread of it touches the lease file's modification time every
:data:`INTERVAL` seconds (``futimens`` on the descriptor it holds: never another file, never a
file someone else renamed in since). A taker that finds the file locked and its time more than
:data:`STALE_AFTER` seconds old says the holder looks hung; it still refuses (only ``--force``
takes a lease from a live process), but it says how long the holder has been silent.

The thread runs only while the process holds a lease, and a forked child starts none of its
own for the leases it does not hold (``agenttrace.formats.session.lease`` forgets them there).
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
from collections.abc import Callable

INTERVAL = 2.0
"""Seconds between two touches of a held lease's file."""
STALE_AFTER = 30.0
"""Seconds without a touch after which a live holder is said to look hung: many intervals, so
a busy machine (a holder's thread waiting for a core, or for the GIL) does not look hung."""


def touch(fd: int) -> None:
    """Set the file open at ``fd``'s modification time to now (the heartbeat itself)."""
    os.utime(fd)


def silent_for(fd: int, now: float | None = None) -> float:
    """How many seconds since the file open at ``fd`` was last touched (or written)."""
    return max(0.0, (time.time() if now is None else now) - os.fstat(fd).st_mtime)


class Heartbeat:
    """One daemon thread calling ``beat`` every :data:`INTERVAL` seconds for as long as it
    returns True (something is still held); :meth:`start` starts it again when it has
    stopped, or in a forked child (the parent's thread is not there)."""

    def __init__(self, beat: Callable[[], bool], interval: float = INTERVAL) -> None:
        self._beat = beat
        self._interval = interval
        # Never held while ``beat`` runs: a lease dropped as it ends may let go of its file,
        # which waits for the directory's lock, which a taker holds while it calls start().
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._started = False
        """A lease was taken since the thread last looked: it must not stop."""
        if hasattr(os, "register_at_fork"):
            # A lock the parent's thread held at the fork would stay held in the child forever.
            os.register_at_fork(after_in_child=self._forked)

    def start(self) -> None:
        """Make sure the thread runs (a lease was just taken)."""
        with self._lock:
            self._started = True
            if self._thread is not None and self._thread.is_alive():
                return
            thread = threading.Thread(
                target=self._run, name="agenttrace-lease-heartbeat", daemon=True
            )
            self._thread = thread
            # In an empty context: the thread outlives whatever run took the lease, and must
            # not carry (and keep alive) its context (agenttrace.instrumentation.threading).
            contextvars.Context().run(thread.start)

    def _run(self) -> None:
        while True:
            with self._lock:
                self._started = False
            # A daemon thread's pace, not a wait for something to happen: nothing to wake.
            time.sleep(self._interval)
            held = self._beat()
            with self._lock:
                if not held and not self._started:
                    self._thread = None  # nothing held: the next lease starts a new one
                    return

    def _forked(self) -> None:
        self._lock = threading.Lock()
        self._thread = None
        self._started = False
