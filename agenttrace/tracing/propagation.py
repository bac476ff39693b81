"""Carrying the current agent, turn and op into threads.

asyncio tasks copy the context by themselves (``gather`` and ``create_task`` nest correctly), and
so does ``asyncio.to_thread``. Plain threads and ``concurrent.futures`` pools do not: wrap the
callable with :func:`bind_context`, or use :class:`ContextThreadPoolExecutor`.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def bind_context(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` bound to a copy of the current context, to run in another thread.

    ``pool.submit(agenttrace.bind_context(work), item)``: spans ``work`` opens nest under the op
    that submitted it.
    """
    context = contextvars.copy_context()

    @functools.wraps(fn)
    def bound(*args: P.args, **kwargs: P.kwargs) -> R:
        return context.run(fn, *args, **kwargs)

    return bound


class ContextThreadPoolExecutor(ThreadPoolExecutor):
    """A ``ThreadPoolExecutor`` whose tasks run in the context of the code that submitted them."""

    def submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        return super().submit(bind_context(fn), *args, **kwargs)
