"""Process pools whose tasks run in the trace and session of the op that submitted them.

:class:`ProcessPoolExecutor` wraps each submitted call with a carrier of the context it was
submitted in (``agenttrace.tracing.travel.inject``: trace context and agenttrace's identity), so
the context travels with every task, not once per worker, and a worker that ran a task for one
op runs the next for another. In the worker the call runs in a fresh ``contextvars`` context
(a forked worker inherits the submitting thread's variables, a spawned one none: a fresh one is
the same under spawn, forkserver and fork) with the extracted context attached; root agent runs
it starts join the submitting op (``agenttrace.tracing.travel.joined_in``).

The worker records as a writer of the submitter's session when it writes sessions to the same
directory (its own segment, ``<session_id>.w/<writer_id>.*``: see
``agenttrace.tracing.joined_writer``), else into a session of its own: a forked worker first
drops the session it inherited, which is the parent's object and whose files must not be
written by two processes. Before the result goes back, the
worker's agenttrace outputs and exporters are flushed: a pool's worker exits without running
``atexit`` handlers, so what is not written by then would be lost.

In a spawned or forkserver worker, agenttrace is set up only if the pool's ``initializer``
calls ``agenttrace.init()`` (with the worker's tracer provider); a forked one inherits the
parent's set-up.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import os
from collections.abc import Callable
from typing import Any, TypeVar

from opentelemetry import context as otel_context

from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.runtime import runtime
from agenttrace.sdk.setup import force_flush
from agenttrace.session.state import Session, session_here, session_if_any, use_session
from agenttrace.tracing.joined_writer import SESSIONS_URL_KEY, carry_sessions_dir, writer_session
from agenttrace.tracing.travel import Joined, extract, inject, joined_in, joined_or_warn

R = TypeVar("R")

_inherited_session: Session | None = None
"""In a forked child, the session it inherited from its parent, until its first carried task
drops it (if it is still current: an initializer may have made another one since)."""


def _forked() -> None:
    global _inherited_session
    _inherited_session = session_if_any()


if hasattr(os, "register_at_fork"):  # not on Windows, where nothing forks
    os.register_at_fork(after_in_child=_forked)


class CarriedCall:
    """``fn`` and the carrier of the context it was handed over in; picklable if ``fn`` is."""

    __slots__ = ("carrier", "fn")

    def __init__(self, fn: Callable[..., Any], carrier: dict[str, str]) -> None:
        self.fn = fn
        self.carrier = carrier

    @classmethod
    def here(cls, fn: Callable[..., Any]) -> CarriedCall:
        """``fn`` with a carrier of the current context (this machine: baggage allowed)."""
        carrier: dict[str, str] = {}
        try:
            inject(carrier)
            carry_sessions_dir(carrier, carrying="traceparent" in carrier)
        except Exception as exc:  # the task still runs, untraced across the boundary
            report_internal_error("ProcessPoolExecutor.submit", exc)
        return cls(fn, carrier)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return contextvars.Context().run(self._run, args, kwargs)

    def _run(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        joined = _joined(self.carrier)
        if joined is None:
            return self.fn(*args, **kwargs)
        token = otel_context.attach(joined[1])
        try:
            with joined_in(joined[0]), session_here(_writer_session(joined[0], self.carrier)):
                return self.fn(*args, **kwargs)
        finally:
            otel_context.detach(token)
            _flush()


def _joined(carrier: dict[str, str]) -> tuple[Joined, otel_context.Context] | None:
    """The remote parent a carrier names, and its context; ``None`` if it names none."""
    global _inherited_session
    try:
        context = extract(carrier)
        joined = joined_or_warn(context, "a process pool task's baggage")
        if joined is None:
            return None
        if _inherited_session is not None:
            if session_if_any() is _inherited_session:  # the parent's: this process writes its own
                use_session(None)
            _inherited_session = None
        return joined, context
    except Exception as exc:
        report_internal_error("a process pool task", exc)
        return None


def _writer_session(joined: Joined, carrier: dict[str, str]) -> Session | None:
    """The session the task records into as a writer of the submitter's session (its segment),
    if the worker records sessions where the submitter does and has no session of its own."""
    try:
        if session_if_any() is not None:  # one the worker's initializer made: its choice
            return None
        return writer_session(joined, carrier)
    except Exception as exc:
        report_internal_error("a process pool task's session", exc)
        return None


def _flush() -> None:
    try:
        force_flush()
    except Exception as exc:
        report_internal_error("a process pool task's flush", exc)


class ProcessPoolExecutor(concurrent.futures.ProcessPoolExecutor):
    """A ``concurrent.futures.ProcessPoolExecutor`` whose tasks run in the trace and session of
    the op that submitted them, under spawn, forkserver and fork alike.

    ``fn`` and its arguments are pickled as the standard pool pickles them. In a spawned or
    forkserver worker, pass an ``initializer`` that sets up a tracer provider and calls
    ``agenttrace.init()``: a worker without it runs the task untraced.
    """

    def __init__(
        self,
        max_workers: int | None = None,
        mp_context: Any = None,
        initializer: Callable[..., object] | None = None,
        initargs: tuple[Any, ...] = (),
        **kwargs: Any,
    ) -> None:
        environment = _worker_environment()
        if environment:
            initargs = (initializer, tuple(initargs), environment)
            initializer = _initialize_with
        super().__init__(max_workers, mp_context, initializer, initargs, **kwargs)

    def submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Any:
        """Schedule ``fn(*args, **kwargs)`` with the current context carried to the worker."""
        return super().submit(CarriedCall.here(fn), *args, **kwargs)


def _worker_environment() -> dict[str, str]:
    """What a worker's environment must add to the one it inherits: the store this process
    ships its sessions to when ``init(sessions_url=...)`` named it (the environment names it
    otherwise, and a spawned worker inherits that), so a worker that joins as a writer ships
    its segment there too. Read as the pool is made: a worker's ``init()`` runs before any task."""
    try:
        url = runtime.settings.sessions_url if runtime.recorder is not None else None
    except Exception as exc:
        report_internal_error("ProcessPoolExecutor", exc)
        return {}
    if url and not os.environ.get(SESSIONS_URL_KEY):
        return {SESSIONS_URL_KEY: url}
    return {}


def _initialize_with(
    initializer: Callable[..., object] | None,
    initargs: tuple[Any, ...],
    environment: dict[str, str],
) -> None:
    """In the worker: the environment first, then the pool's own initializer (module-level, so
    a spawned worker unpickles it)."""
    for name, value in environment.items():
        os.environ.setdefault(name, value)
    if initializer is not None:
        initializer(*initargs)
