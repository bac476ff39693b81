"""The body of a decorated tool or LLM function, guarded for re-entry (docs/journal.md,
"Re-entry"): in a re-entered run, a tool call the journal decides does not run its body; it
returns the recorded result, asks the tool's verifier, or raises the error that refuses it. An
LLM function's call the journal answers returns its recorded response instead of calling it.
Every other call runs its body as it is, for the cost of one look at the current scope.

The guard runs inside the call's scope (the decorator's wrapper calls it where it would call
the function), so what it returns or raises is the call's result or exception to the span, the
transcript and the caller alike. Which kind of function it is (plain, coroutine, generator,
async generator) is decided once, at decoration, by :func:`_by_kind`. A tool's recorded result
is given back as the function returned it, rebuilt from its return annotation
(:mod:`.tool_results`); one that cannot be runs the body again if the call's class allows it,
else stops the resume.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncGenerator, Callable, Generator
from typing import Any

from agenttrace.tracing.journal.llm_steps import ask_again, replayed_step
from agenttrace.tracing.journal.steps import (
    Pending,
    answered_stream,
    pending_step,
    settle,
    verified,
)
from agenttrace.tracing.journal.steps import answered as tool_answer
from agenttrace.tracing.journal.tool_results import NotRebuilt, Returns

Guard = Callable[[Callable[..., Any]], Callable[..., Any]]


def _by_kind(
    fn: Callable[..., Any], function: Guard, coroutine: Guard, generator: Guard, agenerator: Guard
) -> Callable[..., Any]:
    """``fn`` given to the guard for its kind (plain, coroutine, generator or async generator
    function): the one place that tells them apart."""
    if inspect.isasyncgenfunction(fn):
        return agenerator(fn)
    if inspect.iscoroutinefunction(fn):
        return coroutine(fn)
    if inspect.isgeneratorfunction(fn):
        return generator(fn)
    return function(fn)


def guard(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (a tool: a function, coroutine function, generator or async generator function)
    guarded: a function of the same kind."""
    return _by_kind(fn, _guard_function, _guard_coroutine, _guard_generator, _guard_async_generator)


def answered(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (an ``@agenttrace.llm`` function) answered from the journal in a re-entered run
    that recorded its response, without being called: its recorded return value, or the
    chunks of its recorded stream yielded in order.

    A function or coroutine function gives one of the same kind. A generator function gives a
    plain function that returns its generator, or one of the recorded chunks (the decorator
    wraps it as the generator function it stands for: ``wrap(..., like=fn)``), so a call that
    is not answered iterates ``fn``'s own generator, ``send`` and ``throw`` included."""
    return _by_kind(
        fn, _answered_function, _answered_coroutine, _answered_stream, _answered_astream
    )


def _answered_function(fn: Callable[..., Any]) -> Callable[..., Any]:
    returns = Returns(fn)

    @functools.wraps(fn)
    def body(*args: Any, **kwargs: Any) -> Any:
        step = replayed_step()
        if step is None:
            return fn(*args, **kwargs)
        if step.chunks is not None:  # a function that returned a stream: the same chunks
            return (chunk for chunk in step.chunks)
        served, result = _recorded_response(step.result, returns)
        return result if served else fn(*args, **kwargs)

    return body


def _answered_coroutine(fn: Callable[..., Any]) -> Callable[..., Any]:
    returns = Returns(fn)

    @functools.wraps(fn)
    async def body(*args: Any, **kwargs: Any) -> Any:
        step = replayed_step()
        if step is None:
            return await fn(*args, **kwargs)
        if step.chunks is not None:
            return _chunks(step.chunks)
        served, result = _recorded_response(step.result, returns)
        return result if served else await fn(*args, **kwargs)

    return body


def _recorded_response(recorded: Any, returns: Returns) -> tuple[bool, Any]:
    """(True, the recorded response as the function returned it: rebuilt from its return
    annotation, a ``litellm.ModelResponse`` for ``-> ModelResponse``), or (False, None) when the
    annotation does not take it: the model is asked again (:func:`ask_again`)."""
    try:
        return True, returns.rebuild(recorded)
    except NotRebuilt:
        ask_again()
        return False, None


def _answered_stream(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def body(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        step = replayed_step()
        if step is None:
            return fn(*args, **kwargs)  # type: ignore[no-any-return]
        return (chunk for chunk in step.chunks or ())

    return body


def _answered_astream(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def body(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        step = replayed_step()
        if step is None:
            return fn(*args, **kwargs)  # type: ignore[no-any-return]
        return _chunks(step.chunks or [])

    return body


async def _chunks(chunks: list[Any]) -> AsyncGenerator[Any, Any]:
    """A recorded stream's chunks, as an async generator."""
    for chunk in chunks:
        yield chunk


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
        served, result = tool_answer(pending, returns)
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
        served, result = tool_answer(pending, returns)
        return result if served else await fn(*args, **kwargs)

    return body


def _guard_generator(fn: Callable[..., Generator[Any, Any, Any]]) -> Callable[..., Any]:
    # A generator tool's items were its results: a replayed one yields the recorded items and
    # returns the recorded return value.
    returns = Returns(fn)

    @functools.wraps(fn)
    def body(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        pending = pending_step(returns)
        if pending is None:
            return (yield from fn(*args, **kwargs))
        if pending.plan.what == "verify":
            served, result = verified(pending, _verdict(pending, args, kwargs), returns)
            return result if served else (yield from fn(*args, **kwargs))
        served, items, result = answered_stream(pending, returns)
        if served:
            yield from items
            return result
        return (yield from fn(*args, **kwargs))

    return body


def _guard_async_generator(fn: Callable[..., AsyncGenerator[Any, Any]]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def body(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        pending = pending_step()
        if pending is not None:
            if pending.plan.what != "verify":
                served, items, _ = answered_stream(pending)
                for item in items:
                    yield item
                if served:
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
