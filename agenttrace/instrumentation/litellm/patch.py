"""The wrappers patched onto litellm, and the bookkeeping of attempts and logical calls.

Which wrapper goes where, and why, is told in the package's docstring.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import sys
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import Any

from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.runtime import runtime
from agenttrace.instrumentation.litellm.attempt import Attempt, offer_tool_calls, result_attributes
from agenttrace.instrumentation.litellm.streaming import StreamProxy
from agenttrace.instrumentation.litellm.utils import (
    WHERE,
    cost_from_tokens,
    is_fallback_orchestration,
    is_stream,
    provider_and_model,
    remember_secrets,
    state,
)
from agenttrace.tracing.llm_attributes import input_summary, request_attributes
from agenttrace.tracing.scopes import (
    SessionScope,
    Tokens,
    current_scope,
    deactivate,
    make_current,
    start_op,
)


class _Call:
    """One logical LLM call: the attempts litellm makes for it (retries, fallbacks)."""

    __slots__ = ("attempts",)

    def __init__(self) -> None:
        self.attempts = itertools.count(1)


_call: ContextVar[_Call | None] = ContextVar("agenttrace_litellm_call", default=None)
_attempt: ContextVar[Attempt | None] = ContextVar("agenttrace_litellm_attempt", default=None)


# --- the wrappers ---------------------------------------------------------------------------------


def _enter_call() -> Token[_Call | None] | None:
    """Mark a logical call unless one is open; the token resets it."""
    if _call.get() is None:
        return _call.set(_Call())
    return None


def _attempt_wrapper(operation: str) -> Callable[..., Any]:
    """The wrapper for ``completion`` (``operation="chat"``) and ``embedding``."""
    async_flag = "acompletion" if operation == sc.OP_CHAT else "aembedding"

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if runtime.disabled or not state.enabled or _attempt.get() is not None:
            return wrapped(*args, **kwargs)
        call_token = _enter_call()
        try:
            if operation == sc.OP_CHAT and is_fallback_orchestration(kwargs):
                # The attempts arrive as their own litellm.acompletion calls, inside this one.
                return wrapped(*args, **kwargs)
            attempt = _start_attempt(operation, args, kwargs)
            if attempt is None:
                return wrapped(*args, **kwargs)
            token = _attempt.set(attempt)
            tokens = _activate(attempt)
            try:
                result = wrapped(*args, **kwargs)
            except BaseException as error:
                _deactivate(attempt, tokens)
                _attempt.reset(token)
                attempt.fail(error)
                raise
            _deactivate(attempt, tokens)
            _attempt.reset(token)
            if kwargs.get(async_flag) and inspect.isawaitable(result):
                return _finish_awaited(result, attempt)
            return _finish(result, attempt)
        finally:
            if call_token is not None:
                _call.reset(call_token)

    return wrapper


async def _finish_awaited(awaitable: Any, attempt: Attempt) -> Any:
    """Await the coroutine litellm's async path returned, inside the attempt's span."""
    tokens = _activate(attempt)
    try:
        result = await awaitable
    except BaseException as error:
        _deactivate(attempt, tokens)
        attempt.fail(error)
        raise
    _deactivate(attempt, tokens)
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
            attempt.succeed(completed)
        return result
    attempt.succeed(completed)
    return result


def _completed_attributes(
    attempt: Attempt, result: Any, price_it: bool
) -> dict[str, AttributeValue]:
    attributes = result_attributes(attempt, result)
    if price_it and sc.COST_USD not in attributes:
        litellm = sys.modules.get("litellm")
        cost = cost_from_tokens(litellm, attempt.raw_model, attributes) if litellm else None
        if cost is not None:
            attributes[sc.COST_USD] = cost
    return attributes


def _logical_call_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """For sync entry points that may make several attempts (``Router.completion``)."""
    token = _enter_call()
    try:
        return wrapped(*args, **kwargs)
    finally:
        if token is not None:
            _call.reset(token)


async def _async_logical_call_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """For ``acompletion``, ``Router.acompletion``: attempts run in executors and coroutines."""
    token = _enter_call()
    try:
        return await wrapped(*args, **kwargs)
    finally:
        if token is not None:
            _call.reset(token)


def _retry_loop_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``completion_with_retries``: runs inside the failed first attempt; make retries siblings."""
    attempt = _attempt.get()
    if attempt is None:
        return wrapped(*args, **kwargs)
    error = sys.exc_info()[1]
    attempt.fail(error if error is not None else RuntimeError("litellm retried the call"))
    token = _attempt.set(None)
    restored = _restore_parent(attempt)
    try:
        return wrapped(*args, **kwargs)
    finally:
        if restored is not None:
            restored()
        _attempt.reset(token)


def _restore_parent(attempt: Attempt) -> Callable[[], None] | None:
    """Make the attempt's parent scope current again (if the attempt was active); the undo."""
    if not attempt.active:
        return None
    return make_current(attempt.parent)


# --- attempt bookkeeping ---------------------------------------------------------------------


def _start_attempt(operation: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Attempt | None:
    try:
        call = _call.get()
        number = next(call.attempts) if call is not None else 1
        raw_model = kwargs.get("model", args[0] if args else None) or "unknown"
        provider, model = provider_and_model(str(raw_model), kwargs.get("custom_llm_provider"))
        remember_secrets(kwargs)
        parent = current_scope()
        if operation == sc.OP_CHAT:
            name = sc.SPAN_LLM.format(model=model)
            messages = kwargs.get("messages", args[1] if len(args) > 1 else None)
        else:
            name = sc.SPAN_EMBEDDING.format(model=model)
            messages = None
        start = request_attributes(model, provider, number, bool(kwargs.get("stream")))
        if operation != sc.OP_CHAT:
            start[sc.GEN_AI_OPERATION_NAME] = operation
            if runtime.settings.openinference:
                start[sc.OPENINFERENCE_SPAN_KIND] = sc.OI_EMBEDDING
        new_input: list[Any] = []

        def summarise_input(session: SessionScope) -> dict[str, AttributeValue]:
            attributes, new = input_summary(session, messages)
            new_input.append(new)
            return attributes

        scope = start_op(
            sc.KIND_LLM,
            name,
            start,
            new_turn=number == 1 and operation == sc.OP_CHAT,
            more=summarise_input if messages else None,
        )
        attempt = Attempt(scope, operation, model, str(raw_model), messages, parent)
        if new_input:
            attempt.input = new_input[0]
        return attempt
    except Exception as exc:
        report_internal_error(WHERE, exc)
        return None


def _activate(attempt: Attempt) -> Tokens | None:
    try:
        tokens = attempt.scope.activate()
    except Exception as exc:
        report_internal_error(WHERE, exc)
        return None
    attempt.active = True
    return tokens


def _deactivate(attempt: Attempt, tokens: Tokens | None) -> None:
    if tokens is not None:
        attempt.active = False
        try:
            deactivate(tokens)
        except Exception as exc:
            report_internal_error(WHERE, exc)


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
        (litellm, "acompletion_with_retries", _retry_loop_wrapper),
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
    return [(owner, name, wrapper) for owner, name, wrapper in targets if hasattr(owner, name)]
