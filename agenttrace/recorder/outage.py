"""An output that cannot be written for now (a full disk, a read-only or vanished directory, an
I/O error), and trying again.

The sinks that persist a session (the event stream, the session file, the billing ledger) keep
what they could not write, in order, and try again: at their next write once ``retry_interval``
has passed since the last failure, on a timer on the background worker, at ``force_flush`` and
at exit. Each says three things, once each: when its writes start failing (how much waits),
when everything that waited is written, and at exit what could not be written.

:class:`OutageBuffer` is that keeping and retrying, once, for the sinks that append lines (the
stream, the ledger); the session file, which rewrites a whole file from what it keeps anyway,
uses its :class:`Outage` (when to try again, what to say once) alone.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Hashable
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


class OutageBuffer:
    """What an appending output could not write, kept in order per target (a session's
    stream, the ledger), and written again.

    :meth:`put` writes at once unless something of the same target waits (it then goes
    behind it, in order) or the write fails (it then waits). What waits is written again at
    the next ``put`` once the retry interval has passed, on a timer on the worker, at
    :meth:`flush` (``force_flush``) and at exit. The owning sink says what happened: ``put``
    returns True when its write starts an outage, ``on_recovered(written)`` is called once
    everything waiting is written, and :meth:`give_up` hands over what is left at exit.
    Calls come under the sink's ``lock``, which the timer takes too.
    """

    def __init__(
        self,
        lock: threading.Lock | threading.RLock,
        on_recovered: Callable[[int], None],
        retry_interval: float = RETRY_INTERVAL,
        max_bytes: int | None = None,
    ) -> None:
        self.outage = Outage(retry_interval)
        self._lock = lock
        self._on_recovered = on_recovered
        self.max_bytes = max_bytes
        """Bytes kept at most; past it, data is dropped (and counted in :attr:`dropped`)."""
        self._units: dict[Hashable, deque[tuple[bytes, int]]] = {}
        """Per target, in the order targets started waiting: (the bytes of one write, how many
        items they hold)."""
        self._writers: dict[Hashable, Callable[[bytes], None]] = {}
        self.counts: dict[Hashable, int] = {}
        """Per target, how many items wait."""
        self.bytes = 0
        self.dropped = 0
        """Items dropped past ``max_bytes``."""
        self._written = 0
        self._scheduler: Scheduler | None = None

    def attach(self, scheduler: Scheduler) -> None:
        """Where the retry timer runs (the processor's worker)."""
        self._scheduler = scheduler

    def __bool__(self) -> bool:
        return bool(self._units)

    def waits(self, target: Hashable) -> bool:
        """Whether something of ``target`` waits."""
        return target in self._units

    def put(
        self, target: Hashable, data: bytes, items: int, write: Callable[[bytes], None]
    ) -> bool:
        """Write ``data`` (``items`` items) to ``target`` with ``write``, or keep it, in order,
        behind what waits; True if its failure starts an outage (under the lock)."""
        if target in self._units:  # behind what waits: in order, after it
            self._keep(target, data, items, write)
            if self.outage.due():
                self._retry()
            return False
        try:
            write(data)
        except OSError as exc:
            return self.refused(target, data, items, write, exc)
        return False

    def refused(
        self,
        target: Hashable,
        data: bytes,
        items: int,
        write: Callable[[bytes], None],
        exc: OSError,
    ) -> bool:
        """Keep ``data``, whose write to ``target`` (nothing of it waiting) just failed with
        ``exc``, to be written again with ``write``; True if it starts an outage (under the
        lock). :meth:`put` ends so; a sink that writes without it on its success path (the
        stream's intent line) calls it on the failure path."""
        self._keep(target, data, items, write)
        started = self.outage.failed(exc)
        self.outage.schedule(self._scheduler, self._on_timer)
        return started

    def _keep(
        self, target: Hashable, data: bytes, items: int, write: Callable[[bytes], None]
    ) -> None:
        if self.max_bytes is not None and self.bytes + len(data) > self.max_bytes:
            self.dropped += items
            return
        self._units.setdefault(target, deque()).append((data, items))
        self._writers[target] = write
        self.counts[target] = self.counts.get(target, 0) + items
        self.bytes += len(data)

    def _retry(self) -> None:
        """Write what waits, each target's in order (under the lock); say so once it is all
        written."""
        for target, units in list(self._units.items()):
            write = self._writers[target]
            try:
                while units:
                    data, items = units[0]
                    write(data)
                    units.popleft()
                    self.counts[target] -= items
                    self.bytes -= len(data)
                    self._written += items
            except OSError as exc:
                self.outage.failed(exc)
                continue
            del self._units[target], self._writers[target], self.counts[target]
        if self._units:
            self.outage.schedule(self._scheduler, self._on_timer)
        elif self.outage.ended():
            written, self._written = self._written, 0
            self._on_recovered(written)

    def _on_timer(self) -> None:
        with self._lock:
            self.flush()

    def flush(self) -> bool:
        """Write what waits (under the lock); True once nothing does."""
        return self.outage.write_waiting(self._units, self._retry)

    def give_up(self) -> dict[Hashable, int]:
        """At exit, after a last :meth:`flush`: how many items of each target could not be
        written (forgotten now)."""
        lost = {target: self.counts[target] for target in self._units}
        self._units.clear()
        self._writers.clear()
        self.counts.clear()
        self.bytes = 0
        return lost


def count(number: int, noun: str) -> str:
    """``1 event``, ``2 events``."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
