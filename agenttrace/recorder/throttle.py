"""When to rewrite a document that is made whole from everything so far (the session file, the
live STD-008 document).

Such a document costs more to make the longer the session: rebuilt at every change, a session
of n changes costs the square of n. :class:`WriteThrottle` spaces the writes of each document
instead: after a write, the next waits ``max(min_interval, cost_factor x that write's
duration)``, so writing stays a bounded share of the work however long the session grows. A
change that comes sooner is written once, when that time has come, by a single timer on the
recorder's worker, with whatever else changed meanwhile.

The throttle decides only when. What is due, how it is written and what a failure does are the
owner's: it calls the owner's ``write_now(key)`` for a change that may be written at once and
``write_later(key)`` on the timer, and is told by :meth:`WriteThrottle.wrote` what a write took.
Writing what is due at ``force_flush`` and shutdown is the owner's too: it knows what is due.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from agenttrace.recorder.sink import Scheduler

K = TypeVar("K", bound=Hashable)

KEYS_KEPT = 256
"""Past this many documents' next write times, the ones already past are dropped (a past time
and none mean the same: a write may come at once)."""


class WriteThrottle(Generic[K]):
    """The next write time of each document (by ``key``), and at most one timer pending each.

    Not locked: its owner calls it under its own lock, or from the worker alone (records and
    timers both run there), as it would touch its own state. ``write_now`` and ``write_later``
    are called in the caller's thread, not under any lock of the throttle's; an exception they
    raise reaches the caller (on the timer: the worker, which reports it), and the timer's
    slot is free again before ``write_later`` runs, so a failing write does not stop later
    ones.
    """

    def __init__(
        self,
        write_now: Callable[[K], object],
        write_later: Callable[[K], object],
        min_interval: float = 0.25,
        cost_factor: float = 20.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.write_now = write_now
        self.write_later = write_later
        self.min_interval = min_interval
        """Seconds between two writes of a document, at least."""
        self.cost_factor = cost_factor
        """How many times its last write's duration the next write of a document waits, at
        least (a write of 10 ms and 20: 200 ms)."""
        self.clock = clock
        self._scheduler: Scheduler | None = None
        self._next_allowed: dict[K, float] = {}
        self._pending: set[K] = set()
        """The keys a timer is scheduled for."""

    def attach(self, scheduler: Scheduler) -> None:
        """Where the timers run (the processor's worker). Without one, every write is at once."""
        self._scheduler = scheduler

    def request(self, key: K) -> None:
        """``key``'s document changed: ``write_now(key)`` if its last write is far enough back,
        else one ``write_later(key)`` when it is (nothing more if a timer is already pending:
        that write takes this change too)."""
        if key in self._pending:
            return
        delay = self._next_allowed.get(key, 0.0) - self.clock()
        scheduler = self._scheduler
        if delay <= 0 or scheduler is None:
            self.write_now(key)
            return
        self._schedule(scheduler, key, delay)

    def wrote(self, key: K, took: float) -> None:
        """``key``'s document was just written in ``took`` seconds: the next write waits
        ``max(min_interval, cost_factor * took)``."""
        now = self.clock()
        if len(self._next_allowed) >= KEYS_KEPT:  # forget the documents written long ago
            self._next_allowed = {k: t for k, t in self._next_allowed.items() if t > now}
        self._next_allowed[key] = now + max(self.min_interval, self.cost_factor * took)

    def retry(self, key: K, delay: float) -> None:
        """A write of ``key`` failed: the next one no sooner than ``delay`` from now, and a
        ``write_later(key)`` then (unless a timer is already pending)."""
        self._next_allowed[key] = self.clock() + delay
        scheduler = self._scheduler
        if key not in self._pending and scheduler is not None:
            self._schedule(scheduler, key, delay)

    def pending(self, key: K) -> bool:
        """Whether a timer is scheduled for ``key``."""
        return key in self._pending

    def forget(self, key: K) -> None:
        """Start ``key`` afresh (its document's owner is gone or replaced): its next write may
        come at once, and a timer still pending for it no longer holds back a new one."""
        self._next_allowed.pop(key, None)
        self._pending.discard(key)

    def _schedule(self, scheduler: Scheduler, key: K, delay: float) -> None:
        self._pending.add(key)
        scheduler.schedule(delay, lambda: self._on_timer(key))

    def _on_timer(self, key: K) -> None:
        self._pending.discard(key)  # first: a write that raises leaves the slot free
        self.write_later(key)
