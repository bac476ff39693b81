"""Work to do when an object is collected, done on one thread of ours, never in the collector's.

A ``weakref.finalize`` callback (or a ``__del__``) runs in whatever thread's allocation started
the collection, at that point of its code: possibly inside one of agenttrace's own
non-reentrant locks. A finalizer that ends a span, journals, bills or lets a lease go takes
such locks, and would then wait for its own thread for ever (an exception raised in a
finalizer is only printed, so not even a test's timeout frees it). :func:`on_collect` makes a
finalizer that does nothing there but put the work on a ``queue.SimpleQueue`` (whose ``put``
is documented as safe from a weakref callback or ``__del__``: it takes no lock); one daemon
thread, started at the first :func:`on_collect`, does the work in the order it was queued.

- A failure is reported as every internal error is (under the test suite the first one is
  re-raised by the next :func:`drain`); the thread goes on.
- :func:`drain` waits until what was queued before it has run: ``force_flush`` and
  ``shutdown`` call it, so an abandoned stream's span is recorded before they return.
- At the interpreter's exit, the finalizers left whose ``atexit`` is true (the default; a site
  sets it false when the process's end does the work anyway) queue their work and it is drained,
  after agenttrace's own exit hook (see ``_FINALIZERS_AFTER_EXIT`` in ``agenttrace.sdk.setup``).
- In a forked child the queue starts empty (the parent's work is the parent's) and the thread
  starts again on demand.
"""

from __future__ import annotations

import contextvars
import os
import queue
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from agenttrace._internal import errors as _internal_errors
from agenttrace._internal.errors import report_internal_error

AT_EXIT_TIMEOUT = 5.0
"""Seconds the interpreter's exit waits for the work finalizers queued."""

_queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
_thread: threading.Thread | None = None
_start_lock = threading.Lock()
_failure: BaseException | None = None


def on_collect(obj: object, fn: Callable[..., Any], *args: Any) -> weakref.finalize[..., Any]:
    """A finalizer that, once ``obj`` is collected, has ``fn(*args)`` run on agenttrace's
    finalizer thread. As any ``weakref.finalize``: ``fn`` and ``args`` must not refer to
    ``obj``; ``detach()`` cancels it; ``.atexit = False`` leaves it undone at exit."""
    _start()  # here, in ordinary code: a finalizer cannot start a thread (that takes locks)
    return weakref.finalize(obj, _put, fn, args)


def drain(timeout: float | None = 30.0) -> bool:
    """Wait until the work queued before this call has run; False if ``timeout`` passed first.
    Under the test suite, the first failure of that work is raised here.

    Never call it holding a lock the queued work may take: it would wait for the timeout.
    On the finalizer thread itself (queued work that flushes) it returns at once."""
    if threading.current_thread() is _thread:
        return False
    if _start():
        done = threading.Event()
        _queue.put(done)
        if not done.wait(timeout):
            return False
    else:  # no thread can start (the interpreter is exiting): run it here
        _run_queued()
    _raise_failure()
    return True


def _put(fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """The finalizer: only a put (see the module's docstring)."""
    _queue.put((fn, args))


def _start() -> bool:
    """Start the thread if it is not running; whether it runs."""
    global _thread
    if _thread is not None:
        return True
    with _start_lock:
        if _thread is None:
            thread = threading.Thread(
                target=_loop, args=(_queue,), name="agenttrace-finalizers", daemon=True
            )
            try:
                # From an empty context: it may start inside an agent run, whose scope it
                # must not keep for its life.
                contextvars.Context().run(thread.start)
            except RuntimeError:  # "can't create new thread at interpreter shutdown"
                return False
            _thread = thread
    return True


def _loop(work: queue.SimpleQueue[Any]) -> None:
    while True:
        _run(work.get())


def _run_queued() -> None:
    while True:
        try:
            item = _queue.get_nowait()
        except queue.Empty:
            return
        _run(item)


def _run(item: Any) -> None:
    global _failure
    if type(item) is threading.Event:  # a drain waits for it
        item.set()
        return
    fn, args = item
    try:
        fn(*args)
    except BaseException as exc:  # nothing may end the thread
        where = f"a finalizer ({getattr(fn, '__qualname__', type(fn).__name__)})"
        try:
            report_internal_error(where, exc)
        except BaseException as raised:  # the test suite's re-raise: for drain()
            if _failure is None and _internal_errors.raise_internal_errors:
                _failure = raised


def _raise_failure() -> None:
    global _failure
    failure, _failure = _failure, None
    if failure is not None:
        raise failure


def _drain_at_exit() -> None:
    """Run what finalizers queued, before the interpreter goes (at most
    :data:`AT_EXIT_TIMEOUT` seconds): work that frees objects may queue more."""
    deadline = time.monotonic() + AT_EXIT_TIMEOUT
    try:
        while drain(max(0.0, deadline - time.monotonic())) and not _queue.empty():
            pass
    except BaseException:  # the suite's re-raise: nothing to raise it to
        return


def _after_fork_in_child() -> None:
    global _queue, _thread, _start_lock, _failure
    _queue = queue.SimpleQueue()
    _thread = None
    _start_lock = threading.Lock()
    _failure = None


class _ExitAnchor:
    """What :data:`_AT_EXIT` watches: it lives as long as the module."""


_anchor = _ExitAnchor()
# Finalizers left at exit are called newest first, all after agenttrace's own exit hook (see
# _FINALIZERS_AFTER_EXIT in agenttrace.sdk.setup). This one is made at import, before any of
# on_collect's: it runs after each of them has queued its work, and drains it.
_AT_EXIT = weakref.finalize(_anchor, _drain_at_exit)

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
