"""One background thread that does agenttrace's bookkeeping off the caller's hot path.

Ending a span is most of what a span costs: turning results into attributes (tokens, content
JSON, redaction), ``set_attributes``, ``end()`` and every processor's ``on_end``. Done in the
agent's own thread, between litellm's ~1 ms of work, all of it runs with cold caches. Queued here
instead, the caller only records the end time and moves on; the worker ends spans in batches,
in the order they were queued (so children still end before parents, and console lines keep
their order), mostly while the agent waits on the network.

``flush`` waits until everything queued so far is done. In a forked child the queue starts
empty and a new thread starts on demand. Work that fails is reported like any internal error;
under the test suite the first such error is re-raised by the next ``flush``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from agenttrace._internal import errors as _internal_errors
from agenttrace._internal.errors import report_internal_error


class Worker:
    """A FIFO of callables run by one daemon thread."""

    def __init__(self, name: str = "agenttrace-worker") -> None:
        self._name = name
        self._queue: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self._wakeup = threading.Event()
        self._idle = True
        self._running_lock = threading.RLock()  # held while a batch runs; re-entered by flush
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._stopped = False
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._after_fork)

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queue ``fn(*args)``. Cheap: an append, and a wake-up only if the worker sleeps."""
        if self._stopped:
            self._call(fn, args)
            return
        self._queue.append((fn, args))
        if self._thread is None:
            self._start()
        if self._idle:
            self._idle = False
            self._wakeup.set()

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Run or wait for everything queued so far; False if ``timeout`` passed first."""
        if threading.current_thread() is self._thread or self._thread is None or self._stopped:
            self._drain()
        else:
            done = threading.Event()
            self.submit(done.set)
            if not done.wait(timeout):
                return False
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure
        return True

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Hold the worker off while the block runs (benchmarks time the caller's own path)."""
        with self._running_lock:
            yield

    def stop(self) -> None:
        """Finish the queue and run later submissions inline (interpreter shutdown)."""
        try:
            self.flush()
        finally:
            self._stopped = True

    # -- the thread -----------------------------------------------------------------------------

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None:
                thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread = thread
                thread.start()
                # At exit, end what is queued before OpenTelemetry's own exit hook (registered
                # earlier, so run later) flushes the exporters.
                atexit.register(self.stop)

    def _loop(self) -> None:
        queue, wakeup = self._queue, self._wakeup
        while True:
            self._idle = True
            if not queue:
                wakeup.wait()
                wakeup.clear()
            self._idle = False
            self._drain()

    def _drain(self) -> None:
        queue = self._queue
        with self._running_lock:
            while queue:
                try:
                    fn, args = queue.popleft()
                except IndexError:
                    return
                self._call(fn, args)

    def _call(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        try:
            fn(*args)
        except Exception as exc:
            try:
                report_internal_error("background bookkeeping", exc)
            except Exception as raised:  # the test suite's re-raise: keep it for flush()
                if self._failure is None and _internal_errors.raise_internal_errors:
                    self._failure = raised

    def _after_fork(self) -> None:
        self._queue = deque()
        self._wakeup = threading.Event()
        self._idle = True
        self._running_lock = threading.RLock()
        self._start_lock = threading.Lock()
        self._thread = None


worker = Worker()
