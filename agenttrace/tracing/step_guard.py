"""The body of a decorated tool, guarded for re-entry (docs/journal.md, "Re-entry"): in a
re-entered run, a call the journal decides does not run its body; it returns the recorded
result, asks the tool's verifier, or raises the error that refuses it. Every other call runs
its body as it is, for the cost of one look at the current scope.

The guard runs inside the tool's scope (the decorator's wrapper calls it where it would call
the function), so what it returns or raises is the call's result or exception to the span, the
transcript and the caller alike. A recorded result is given back as the function returned it,
rebuilt from its return annotation (:mod:`.tool_results`); one that cannot be runs the body
again if the call's class allows it, else stops the resume.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncGenerator, Callable, Generator
from typing import Any

from agenttrace.tracing.steps import Pending, answered, pending_step, settle, verified
from agenttrace.tracing.tool_results import Returns


def guard(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (a function, coroutine function, generator or async generator function) guarded:
    a function of the same kind."""
    if inspect.isasyncgenfunction(fn):
        return _guard_async_generator(fn)
    if inspect.iscoroutinefunction(fn):
        return _guard_coroutine(fn)
    if inspect.isgeneratorfunction(fn):
        return _guard_generator(fn)
    return _guard_function(fn)


def _verdict(pending: Pending, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The verifier's verdict (an awaitable for an async verifier); none: the resume stops."""
    if pending.verifier is None:
        settle(pending)  # raises: the policy stops here
    return pending.verifier(*args, **kwargs)  # type: ignore[misc]


def _guard_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    returns = Returns(fn)

    @functools.wraps(fn)
    def body(*args: Any, **kwargs: Any) -> Any:
        pending = pending_step(returns)
        if pending is None:
            return fn(*args, **kwargs)
        if pending.plan.what == "verify":
            verdict = _verdict(pending, args, kwargs)
            if inspect.isawaitable(verdict):
                close = getattr(verdict, "close", None)
                if close is not None:
                    close()
                raise TypeError("a synchronous tool's verifier must be synchronous too")
            served, result = verified(pending, verdict, returns)
            return result if served else fn(*args, **kwargs)
        served, result = answered(pending, returns)
        return result if served else fn(*args, **kwargs)

    return body


def _guard_coroutine(fn: Callable[..., Any]) -> Callable[..., Any]:
    returns = Returns(fn)

    @functools.wraps(fn)
    async def body(*args: Any, **kwargs: Any) -> Any:
        pending = pending_step(returns)
        if pending is None:
            return await fn(*args, **kwargs)
        if pending.plan.what == "verify":
            verdict = _verdict(pending, args, kwargs)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            served, result = verified(pending, verdict, returns)
            return result if served else await fn(*args, **kwargs)
        served, result = answered(pending, returns)
        return result if served else await fn(*args, **kwargs)

    return body


def _guard_generator(fn: Callable[..., Generator[Any, Any, Any]]) -> Callable[..., Any]:
    # A generator tool's items were its results: a replayed one yields none, and returns what
    # the journal recorded (its return value).
    returns = Returns(fn)

    @functools.wraps(fn)
    def body(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        pending = pending_step(returns)
        if pending is None:
            return (yield from fn(*args, **kwargs))
        if pending.plan.what == "verify":
            served, result = verified(pending, _verdict(pending, args, kwargs), returns)
            return result if served else (yield from fn(*args, **kwargs))
        served, result = answered(pending, returns)
        return result if served else (yield from fn(*args, **kwargs))

    return body


def _guard_async_generator(fn: Callable[..., AsyncGenerator[Any, Any]]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def body(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        pending = pending_step()
        if pending is not None:
            if pending.plan.what != "verify":
                settle(pending)
                return
            verdict = _verdict(pending, args, kwargs)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            served, _ = verified(pending, verdict)
            if served:
                return
        async for item in fn(*args, **kwargs):
            yield item

    return body
