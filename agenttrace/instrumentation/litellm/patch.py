"""The wrappers patched onto litellm (and the OpenAI SDK's retry), and what they patch.

Which wrapper goes where, and why, is told in the package's docstring; the logical calls and
attempts they keep are in :mod:`.calls` and :mod:`.tracking`.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any

from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.runtime import runtime
from agenttrace.instrumentation.litellm.attempt import (
    Attempt,
    Reply,
    offer_tool_calls,
    result_attributes,
)
from agenttrace.instrumentation.litellm.fork import forked
from agenttrace.instrumentation.litellm.replay import ready, replayed_response
from agenttrace.instrumentation.litellm.sdk_retries import RETRY_METHOD, retry_wrapper
from agenttrace.instrumentation.litellm.streaming import StreamProxy
from agenttrace.instrumentation.litellm.tracking import (
    activate,
    attempt_var,
    deactivate_attempt,
    enter_call,
    leave_call,
    live_var,
    open_span,
    restore_parent,
    run_attempt,
    start_attempt,
)
from agenttrace.instrumentation.litellm.utils import (
    WHERE,
    cost_from_tokens,
    is_fallback_orchestration,
    is_stream,
    state,
)
from agenttrace.model.journal import Step
from agenttrace.model.replay import ReplayDivergence
from agenttrace.tracing.journal.llm_steps import ReplayedFailure, begin_llm_step

# --- the wrappers ---------------------------------------------------------------------------------


def _attempt_wrapper(operation: str) -> Callable[..., Any]:
    """The wrapper for ``completion`` (``operation="chat"``) and ``embedding``."""
    async_flag = "acompletion" if operation == sc.OP_CHAT else "aembedding"

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if runtime.disabled or not state.enabled or attempt_var.get() is not None:
            return wrapped(*args, **kwargs)
        call_token = enter_call(args, kwargs, operation == sc.OP_CHAT)
        raised = True
        try:
            if operation == sc.OP_CHAT and is_fallback_orchestration(kwargs):
                # The attempts arrive as their own litellm.acompletion calls, inside this one.
                result = wrapped(*args, **kwargs)
                raised = False
                return result
            result = _attempt(operation, wrapped, args, kwargs, async_flag)
            raised = False
            return result
        finally:
            leave_call(call_token, raised)

    return wrapper


def _attempt(
    operation: str, wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any], async_flag: str
) -> Any:
    """Run one litellm call as an attempt (more, if the OpenAI SDK retries inside it)."""
    attempt = start_attempt(operation, args, kwargs)
    if attempt is None:
        return wrapped(*args, **kwargs)
    if operation == sc.OP_CHAT:
        args, kwargs = forked(attempt, args, kwargs)  # a fork's live call: its overrides
        try:
            recorded = begin_llm_step(attempt.scope, attempt.model, kwargs, failures=True)
        except ReplayDivergence as error:  # a strict replay: nothing is sent
            attempt.fail(error)
            raise
        while recorded is not None and recorded.state == "failed":
            # A re-entered run: this attempt failed and was retried; its failure is answered
            # from the journal, as is the next attempt, at the place it had.
            recorded = _replayed_failure(recorded, attempt, kwargs)
        if recorded is not None:  # a re-entered run: the journal holds this reply
            return _replayed(recorded, attempt, bool(kwargs.get(async_flag)))
    finish = _finish_async if kwargs.get(async_flag) else _finish
    return run_attempt(wrapped, args, kwargs, attempt, finish)


def _finish_async(result: Any, attempt: Attempt) -> Any:
    """End the attempt with the result of a call made with litellm's async flag: a coroutine
    (``acompletion``'s), ended when it is awaited."""
    if inspect.isawaitable(result):
        return _finish_awaited(result, attempt)
    return _finish(result, attempt)


def _replayed(recorded: Step, attempt: Attempt, is_async: bool) -> Any:
    """The reply the journal recorded for this attempt, ended as a reply from the model is (the
    model is not called)."""
    try:
        result = replayed_response(recorded, attempt, is_async)
    except Exception as exc:  # a journal this litellm cannot read back: a failure of ours
        report_internal_error(WHERE, exc)
        raise
    if isinstance(result, StreamProxy):  # a stream: its span ends when it is read to its end
        return ready(result) if is_async else result
    # Not priced from its tokens, as an awaited reply is: nothing was bought.
    return ready(_finish(result, attempt)) if is_async else _finish(result, attempt)


def _replayed_failure(recorded: Step, attempt: Attempt, kwargs: dict[str, Any]) -> Step | None:
    """End the attempt as the failure the journal recorded, and start the call's next attempt
    (its step begun: the journal's step that answers it, if any). Nothing is sent."""
    attempt.fail(ReplayedFailure(recorded.error or "failed"))
    opened = open_span(attempt.request, attempt.call)
    if opened is None:  # a failure of ours, reported: the call goes on in the failed span
        return None
    attempt.restart(*opened)
    return begin_llm_step(attempt.scope, attempt.model, kwargs, failures=True)


async def _finish_awaited(awaitable: Any, attempt: Attempt) -> Any:
    """Await the coroutine litellm's async path returned, inside the attempt's span."""
    activation = activate(attempt)
    try:
        result = await awaitable
    except BaseException as error:
        deactivate_attempt(attempt, activation)
        attempt.fail(error)
        raise
    deactivate_attempt(attempt, activation)
    return _finish(result, attempt, price_it=True)


def _finish(result: Any, attempt: Attempt, price_it: bool = False) -> Any:
    """End the attempt with ``result``; a stream gets a proxy that ends it later.

    The reply enters the agent's transcript first (its tool calls are offered to the turn, so
    the tool spans that follow find their call ids), then the span ends with what the response
    says, read now. ``price_it``: on litellm's async path the price is added to the response only
    after the attempt returns, so agenttrace prices it from the tokens itself. Whatever fails in
    here, the span ends (a failure of ours is reported, never raised into the caller).
    """
    completed = functools.partial(_completed_attributes, attempt, result, price_it)
    try:
        if is_stream(result):
            return StreamProxy(result, attempt)
        offer_tool_calls(attempt, result)
    except Exception as exc:
        try:
            report_internal_error(WHERE, exc)
        finally:  # ends the span even when the test suite re-raises the report
            attempt.succeed(completed, Reply(response=result))
        return result
    attempt.succeed(completed, Reply(response=result))  # billed, then journaled done
    return result


def _completed_attributes(
    attempt: Attempt, result: Any, price_it: bool
) -> dict[str, AttributeValue]:
    attributes = result_attributes(attempt, result)
    outcome = attempt.scope.outcome
    if (attempt.scope.late or {}).get(sc.REPLAYED) is True:
        outcome.set_cost(None)  # answered from the journal: nothing was bought
    elif price_it and outcome.cost_usd is None:
        litellm = sys.modules.get("litellm")
        usage = outcome.usage
        outcome.set_cost(cost_from_tokens(litellm, attempt.raw_model, usage) if litellm else None)
    return attributes


def _logical_call_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """For sync entry points that may make several attempts (``Router.completion``)."""
    token = enter_call(args, kwargs, _is_chat(wrapped))
    raised = True
    try:
        result = wrapped(*args, **kwargs)
        raised = False
        return result
    finally:
        leave_call(token, raised)


async def _async_logical_call_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """For ``acompletion``, ``Router.acompletion``: attempts run in executors and coroutines."""
    token = enter_call(args, kwargs, _is_chat(wrapped))
    raised = True
    try:
        result = await wrapped(*args, **kwargs)
        raised = False
        return result
    finally:
        leave_call(token, raised)


def _is_chat(wrapped: Any) -> bool:
    """Not an embedding entry point (``embedding``, ``aembedding``)."""
    return not str(getattr(wrapped, "__name__", "")).endswith("embedding")


def _retry_loop_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``completion_with_retries``: called by the program, one logical call; called by
    litellm's sync retry loop, inside the failed first attempt: end it, make retries siblings."""
    attempt = attempt_var.get()
    if attempt is None:
        return _logical_call_wrapper(wrapped, instance, args, kwargs)
    error = sys.exc_info()[1]
    attempt.fail(error if error is not None else RuntimeError("litellm retried the call"))
    token = attempt_var.set(None)
    live = live_var.set(None)
    restored = restore_parent(attempt)
    try:
        return wrapped(*args, **kwargs)
    finally:
        if restored is not None:
            restored()
        live_var.reset(live)
        attempt_var.reset(token)


# --- what is patched ------------------------------------------------------------------------------


def patch_targets(litellm: Any) -> list[tuple[Any, str, Callable[..., Any]]]:
    """``(owner, attribute, wrapper)`` for each entry point this litellm version has."""
    import litellm.main as litellm_main

    chat = _attempt_wrapper(sc.OP_CHAT)
    embeddings = _attempt_wrapper(sc.OP_EMBEDDINGS)
    targets: list[tuple[Any, str, Callable[..., Any]]] = [
        (litellm_main, "completion", chat),
        (litellm, "completion", chat),
        (litellm, "acompletion", _async_logical_call_wrapper),
        (litellm_main, "embedding", embeddings),
        (litellm, "embedding", embeddings),
        (litellm, "aembedding", _async_logical_call_wrapper),
        (litellm, "completion_with_retries", _retry_loop_wrapper),
        (litellm, "acompletion_with_retries", _async_logical_call_wrapper),
    ]
    router = getattr(litellm, "Router", None)
    if router is not None:
        for method, wrapper in (
            ("completion", _logical_call_wrapper),
            ("acompletion", _async_logical_call_wrapper),
            ("embedding", _logical_call_wrapper),
            ("aembedding", _async_logical_call_wrapper),
        ):
            targets.append((router, method, wrapper))
    targets.extend(_sdk_targets())
    found = []
    for owner, name, wrapper in targets:
        home = defining_class(owner, name) if isinstance(owner, type) else owner
        if home is not None and hasattr(home, name):
            found.append((home, name, wrapper))
    return found


def defining_class(cls: type, name: str) -> type | None:
    """The class whose own namespace holds ``cls.name``, where a patch of it must go (and be
    undone): ``cls`` itself, a base class, or the class a metaclass reads it from. litellm 1.110's
    ``Router`` keeps no endpoint in its MRO: its metaclass serves ``Router.completion`` from the
    core class (``RustCore``), and so do the router's instances. None when no class holds it."""
    for base in cls.__mro__:
        if name in vars(base):
            return base
    value = getattr(cls, name, None)
    holder: Any = sys.modules.get(str(getattr(value, "__module__", None)))
    for part in str(getattr(value, "__qualname__", "")).split(".")[:-1]:
        holder = getattr(holder, part, None)
    if isinstance(holder, type) and vars(holder).get(name) is value:
        return holder
    return None


def _sdk_targets() -> list[tuple[Any, str, Callable[..., Any]]]:
    """The OpenAI SDK's retry, where litellm's OpenAI-compatible providers retry inside a call."""
    try:
        from openai import _base_client
    except ImportError:  # litellm without the OpenAI SDK: nothing retries inside a call
        return []
    return [
        (client, RETRY_METHOD, retry_wrapper)
        for client in (_base_client.SyncAPIClient, _base_client.AsyncAPIClient)
        if RETRY_METHOD in vars(client)
    ]
