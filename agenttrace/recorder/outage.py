"""An output that cannot be written for now (a full disk, a read-only or vanished directory, an
I/O error), and trying again.

The sinks that persist a session (the event stream, the session file, the billing ledger) keep
what they could not write, in order, and try again: at their next write once ``retry_interval``
has passed since the last failure, on a timer on the background worker, at ``force_flush`` and
at exit. Each says three things, once each: when its writes start failing (how much waits),
when everything that waited is written, and at exit what could not be written.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from typing import Any

from agenttrace.recorder.sink import Scheduler

RETRY_INTERVAL = 1.0
"""Seconds between two attempts while writes fail (a failed attempt costs a system call)."""


class Outage:
    """The state of one output's failing writes: why, and when to try again."""

    def __init__(self, retry_interval: float = RETRY_INTERVAL) -> None:
        self.retry_interval = retry_interval
        self.reason: str | None = None
        """Why the last write failed (``None`` while writes work)."""
        self.next_try = 0.0
        self._timer = False

    @property
    def active(self) -> bool:
        """True while something waits to be written."""
        return self.reason is not None

    def failed(self, exc: OSError) -> bool:
        """Note a failed write; True if it starts the outage (the caller warns, once)."""
        started = self.reason is None
        self.reason = exc.strerror or str(exc)
        self.next_try = time.monotonic() + self.retry_interval
        return started

    def due(self) -> bool:
        """True once the retry interval has passed since the last failure."""
        return time.monotonic() >= self.next_try

    def ended(self) -> bool:
        """Everything that waited is written; True if there was an outage (the caller says so)."""
        started = self.reason is not None
        self.reason = None
        return started

    def schedule(self, scheduler: Scheduler | None, retry: Callable[[], None]) -> None:
        """Run ``retry`` on the worker after the retry interval (one timer at a time)."""
        if scheduler is None or self._timer:
            return
        self._timer = True

        def fire() -> None:
            self._timer = False
            retry()

        scheduler.schedule(self.retry_interval, fire)

    @staticmethod
    def write_waiting(waiting: Collection[Any], retry: Callable[[], None]) -> bool:
        """What an output does on its retry timer, at ``force_flush`` and at exit, under its
        lock: ``retry`` (write what waits) if anything is in ``waiting`` (the output's own
        container of what waits, which ``retry`` empties as it writes); True once it is empty."""
        if waiting:
            retry()
        return not waiting


def count(number: int, noun: str) -> str:
    """``1 event``, ``2 events``."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
