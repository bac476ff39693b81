"""Carrying the current agent, turn and op into threads.

asyncio tasks copy the context by themselves (``gather`` and ``create_task`` nest correctly), and
so does ``asyncio.to_thread``. Plain threads and ``concurrent.futures`` pools do not: after
``init()`` they do (``agenttrace.instrumentation.threading`` uses :func:`carry_context`); without
it, or with that switched off, wrap the callable with :func:`bind_context`, or use
:class:`ContextThreadPoolExecutor`.

What travels is the whole :mod:`contextvars` context (``copy_context()``, as asyncio does): the
OpenTelemetry span, the agenttrace scope, and every other context variable, as they were when the
work was handed over.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from agenttrace._internal.checks import refuse
from agenttrace._internal.context import current_scope_var, implicit_run_open

P = ParamSpec("P")
R = TypeVar("R")


def bind_context(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` bound to a copy of the current context, to run in another thread.

    ``pool.submit(agenttrace.bind_context(work), item)``: spans ``work`` opens nest under the op
    that submitted it.
    """
    if not callable(fn):
        refuse("agenttrace.bind_context", "fn", fn, "a callable")
    context = contextvars.copy_context()

    @functools.wraps(fn)
    def bound(*args: P.args, **kwargs: P.kwargs) -> R:
        return context.run(fn, *args, **kwargs)

    return bound


def in_traced_scope() -> bool:
    """True inside an agent run, turn or op, or while an implicit run is open in this context:
    work handed to a thread from here carries it.

    Outside one, nothing is carried, so code that agenttrace does not trace sees threads behave
    exactly as Python makes them (and pays nothing)."""
    return current_scope_var.get() is not None or implicit_run_open()


def carry_context(fn: Callable[..., R]) -> Callable[..., R]:
    """``fn`` to run in a copy of the current context if :func:`in_traced_scope`, else ``fn``.

    A fresh copy per call: one ``Context`` cannot be entered by two threads at once, and a task
    must see the context of the code that handed it over, not of an earlier task.
    """
    if not in_traced_scope():
        return fn
    return functools.partial(contextvars.copy_context().run, fn)


class ContextThreadPoolExecutor(ThreadPoolExecutor):
    """A ``ThreadPoolExecutor`` whose tasks run in the context of the code that submitted them."""

    def submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        return super().submit(bind_context(fn), *args, **kwargs)
