"""A background thread that feeds lifecycle records to the sinks that do not need to run at once.

Spans are never ended here: they end in the caller, in the call that ends them. What is deferred
is only the bookkeeping that reads immutable records (the opTree, the session file, the ledger,
console lines), so the agent's own thread does not wait for it. Items are consumed in the order
they were put, so sinks see every scope start before its end and children before parents.

The queue is bounded: past ``max_pending`` items, ``put`` waits until the thread has consumed
half of them. Records cannot be dropped the way a batch span processor drops spans (they are
the saved state), so a caller that outpaces the bookkeeping is slowed to its pace instead of
letting memory grow without bound.

Waking the thread costs the caller a lock and a notify, and the thread a switch, so it is not
woken for each item: once the queue is empty the thread lingers (:data:`LINGER` seconds) and
takes what arrived meanwhile; only after a linger with nothing new does it sleep until the next
``put`` wakes it. An agent that makes calls back to back thus wakes it about once per
:data:`LINGER`, not once per call.

``flush`` waits until everything put so far is consumed (or a timeout passes). ``stop`` consumes
what is left and ends the thread; later items are consumed in the caller. In a forked child the
queue starts empty and a new thread starts on demand. A consumer failure is reported like any
internal error; under the test suite the first one is re-raised by the next ``flush``.
"""

from __future__ import annotations

import contextvars
import heapq
import itertools
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from agenttrace._internal import errors as _internal_errors
from agenttrace._internal.errors import report_internal_error

_STOP = object()

LINGER = 0.01
"""Seconds the thread waits for more items once the queue is empty, before it sleeps."""


class Worker:
    """A FIFO of items consumed by ``consume(item)`` on one daemon thread."""

    def __init__(
        self,
        consume: Callable[[Any], None],
        name: str = "agenttrace-worker",
        max_pending: int = 2048,
    ) -> None:
        self._consume = consume
        self._name = name
        self.max_pending = max_pending
        self._reset()
        self._stopped = False
        if hasattr(os, "register_at_fork"):
            this = weakref.ref(self)
            os.register_at_fork(after_in_child=lambda: _after_fork(this))

    def _reset(self) -> None:
        self._queue: deque[Any] = deque()
        self._wakeup = threading.Event()
        self._idle = True
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._failure: BaseException | None = None
        self._room = threading.Event()  # set by the thread when a full queue has room again
        self._waiting = False
        self._timers: list[tuple[float, int, Any]] = []  # heap of (due, sequence, item)
        self._timer_lock = threading.Lock()
        self._sequence = itertools.count()

    def put(self, item: Any) -> None:
        """Queue ``item``. Cheap: an append, and a wake-up only if the thread sleeps (not while
        it lingers: it takes the item within :data:`LINGER` seconds)."""
        if self._stopped:
            self._call(item)
            return
        queue = self._queue
        queue.append(item)
        if self._thread is None:
            self._start()
        if self._idle:
            self._idle = False
            self._wakeup.set()
        if len(queue) > self.max_pending and threading.current_thread() is not self._thread:
            self._wait_for_room()

    def _wait_for_room(self) -> None:
        """Block the caller until the thread has consumed half the queue (or 10 s passed)."""
        self._room.clear()
        self._waiting = True
        self._wakeup.set()
        self._room.wait(10.0)

    def schedule(self, delay: float, item: Any) -> None:
        """Consume ``item`` after ``delay`` seconds (in order with what is put by then).

        Scheduled items are not waited for by :meth:`flush` and are dropped by :meth:`stop`:
        they are for work that a flush or a shutdown does anyway (a throttled snapshot).
        """
        if self._stopped:
            return
        with self._timer_lock:
            heapq.heappush(self._timers, (time.monotonic() + delay, next(self._sequence), item))
        if self._thread is None:
            self._start()
        self._wakeup.set()

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until everything put so far is consumed; False if ``timeout`` passed first.

        Called on the worker's own thread (a sink flushing), or after ``stop``, it consumes the
        queue in the caller instead of waiting for itself.
        """
        if self._stopped or self._thread is None or threading.current_thread() is self._thread:
            self._drain()
        else:
            done = threading.Event()
            self.put(done)
            self._wakeup.set()  # a lingering thread takes it now, not at the end of its linger
            if not done.wait(timeout):
                return False
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure
        return True

    def stop(self, timeout: float | None = 30.0) -> bool:
        """Consume what is queued, end the thread; items put later are consumed in the caller.

        Scheduled items are dropped first, and the thread is joined, so nothing is consumed on
        it once ``stop`` returns (the sinks' own shutdown runs after, alone).
        """
        with self._timer_lock:
            self._timers.clear()
        try:
            ok = self.flush(timeout)
        finally:
            self._stopped = True
            thread = self._thread
            if thread is not None and thread is not threading.current_thread():
                self._queue.append(_STOP)
                self._wakeup.set()
                thread.join(timeout)
        return ok

    @property
    def pending(self) -> int:
        """How many items are waiting (for tests and diagnostics)."""
        return len(self._queue)

    # -- the thread -----------------------------------------------------------------------------

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None:
                thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread = thread
                # Started from an empty context: it often starts inside an agent run, and must
                # not keep that run's scope (thread propagation would carry it) for its life.
                contextvars.Context().run(thread.start)

    def _loop(self) -> None:
        queue, wakeup = self._queue, self._wakeup
        while True:
            if not queue:
                # Linger: items put now need no wake-up (``_idle`` is False).
                wakeup.wait(self._until_next_timer(LINGER))
                wakeup.clear()
                if not queue:
                    self._idle = True  # from here on a put wakes the thread
                    if not queue:  # (checked again: a put before _idle was set woke no one)
                        wakeup.wait(self._until_next_timer())
                    wakeup.clear()
                    self._idle = False
            self._release_due_timers()
            if not self._drain():
                return

    def _until_next_timer(self, at_most: float | None = None) -> float | None:
        """Seconds until the next scheduled item is due (at most ``at_most``; None: no limit)."""
        with self._timer_lock:
            if not self._timers:
                return at_most
            due = max(0.0, self._timers[0][0] - time.monotonic())
        return due if at_most is None else min(due, at_most)

    def _release_due_timers(self) -> None:
        if not self._timers:
            return
        now = time.monotonic()
        with self._timer_lock:
            while self._timers and self._timers[0][0] <= now:
                self._queue.append(heapq.heappop(self._timers)[2])

    def _drain(self) -> bool:
        """Consume queued items; False once the stop marker is reached."""
        queue = self._queue
        room = self.max_pending // 2
        while queue:
            try:
                item = queue.popleft()
            except IndexError:
                break
            if self._waiting and len(queue) <= room:
                self._waiting = False
                self._room.set()
            if item is _STOP:
                return False
            if type(item) is threading.Event:
                item.set()
                continue
            self._call(item)
        if self._waiting:
            self._waiting = False
            self._room.set()
        return True

    def _call(self, item: Any) -> None:
        try:
            self._consume(item)
        except Exception as exc:
            try:
                report_internal_error("background bookkeeping", exc)
            except Exception as raised:  # the test suite's re-raise: keep it for flush()
                if self._failure is None and _internal_errors.raise_internal_errors:
                    self._failure = raised


def _after_fork(reference: weakref.ref[Worker]) -> None:
    worker = reference()
    if worker is not None:
        worker._reset()
