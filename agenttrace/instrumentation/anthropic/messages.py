"""The wrappers of ``messages.create``, ``.parse`` and ``.stream``, sync and async: one attempt per
call.

Each call is a logical call (:mod:`agenttrace.instrumentation.litellm.calls`: numbered
attempts, one turn, the re-request rule) and its attempt a ``chat {model}`` span opened as
litellm's are (:func:`~agenttrace.instrumentation.litellm.tracking.open_span`), ended once with
what the response says, its reply logged to the agent's transcript and journaled: the
OpenAI SDK's instrumentation does the same (:mod:`agenttrace.instrumentation.openai.chat`).
``messages.stream(...)`` sends its request itself when its manager is entered, not through
``create``: the manager's request is run as a streamed ``create`` call is. A call made while a
litellm attempt runs, inside an ``@agenttrace.llm`` function or block, or asking for the raw
HTTP response (``with_raw_response``, ``with_streaming_response``) passes through untraced.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.runtime import runtime
from agenttrace.instrumentation.anthropic.replay import replayed_response
from agenttrace.instrumentation.anthropic.request import WHERE, chat_view, describe, price, state
from agenttrace.instrumentation.anthropic.streaming import StreamProxy
from agenttrace.instrumentation.litellm.attempt import (
    Attempt,
    Reply,
    offer_tool_calls,
    result_attributes,
)
from agenttrace.instrumentation.litellm.tracking import (
    activate,
    attempt_var,
    call_var,
    deactivate_attempt,
    enter_call,
    leave_call,
    open_span,
)
from agenttrace.model.journal import Step
from agenttrace.tracing.journal.llm_steps import ReplayedFailure, begin_llm_step
from agenttrace.tracing.scopes import OpScope, current_scope

_RAW = "X-Stainless-Raw-Response"
"""The header the SDK's ``with_raw_response``/``with_streaming_response`` add to the call."""

_MANAGERS = ("_MessageStreamManager__api_request", "_AsyncMessageStreamManager__api_request")
"""Where ``messages.stream``'s manager keeps the request it sends when it is entered."""


def _untraced(kwargs: dict[str, Any]) -> bool:
    """Whether a call passes through: tracing off, a litellm attempt's own request, a call
    inside an ``@agenttrace.llm`` function or block (one span, never two), or a raw-response
    call."""
    if runtime.disabled or not state.enabled or attempt_var.get() is not None:
        return True
    scope = current_scope()
    if isinstance(scope, OpScope) and scope.kind == sc.KIND_LLM:
        return True
    headers = kwargs.get("extra_headers")
    return isinstance(headers, dict) and _RAW in headers


def create_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """For ``Messages.create``."""
    if _untraced(kwargs):
        return wrapped(*args, **kwargs)
    call_token = enter_call(args, kwargs, True)
    raised = True
    try:
        attempt = _start(instance, kwargs)
        if attempt is None:
            result = wrapped(*args, **kwargs)
        else:
            recorded = _recorded(attempt, kwargs)
            if recorded is not None:
                parse = _parse_of(wrapped, kwargs)
                result = _replayed(recorded, attempt, instance, False, parse)
            else:
                result = _run(wrapped, args, kwargs, attempt)
        raised = False
        return result
    finally:
        leave_call(call_token, raised)


async def acreate_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """For ``AsyncMessages.create``: the call runs in the caller's task, whose context the
    attempt's scope is current in while it is awaited."""
    if _untraced(kwargs):
        return await wrapped(*args, **kwargs)
    call_token = enter_call(args, kwargs, True)
    raised = True
    try:
        attempt = _start(instance, kwargs)
        if attempt is None:
            result = await wrapped(*args, **kwargs)
        else:
            recorded = _recorded(attempt, kwargs)
            if recorded is not None:
                parse = _parse_of(wrapped, kwargs)
                result = _replayed(recorded, attempt, instance, True, parse)
            else:
                result = await _arun(wrapped, args, kwargs, attempt)
        raised = False
        return result
    finally:
        leave_call(call_token, raised)


def stream_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """For ``Messages.stream`` and ``AsyncMessages.stream``: the manager they return sends its
    request as a streamed ``create`` call (entering the manager starts the attempt)."""
    manager = wrapped(*args, **kwargs)
    try:
        for name in _MANAGERS:
            send = getattr(manager, name, None)
            if send is None:
                continue
            asked = {**kwargs, "stream": True}
            if name.startswith("_Async"):
                setattr(manager, name, _asend(send, instance, asked))
            else:
                setattr(manager, name, functools.partial(_send, send, instance, asked))
    except Exception as exc:  # a manager of another shape: its stream goes untraced
        report_internal_error(WHERE, exc)
    return manager


def _send(send: Callable[[], Any], resource: Any, kwargs: dict[str, Any]) -> Any:
    return create_wrapper(lambda **_: send(), resource, (), kwargs)


async def _asend(request: Awaitable[Any], resource: Any, kwargs: dict[str, Any]) -> Any:
    """The async manager's request (a coroutine it awaits once), sent as an attempt; closed
    unawaited when the journal answers it."""
    sent = False

    async def send(**_: Any) -> Any:
        nonlocal sent
        sent = True
        return await request

    try:
        return await acreate_wrapper(send, resource, (), kwargs)
    finally:
        close = getattr(request, "close", None)
        if not sent and callable(close):
            close()


def _start(resource: Any, kwargs: dict[str, Any]) -> Attempt | None:
    """The attempt's span, started (None: a failure of ours, reported; the call runs
    untraced)."""
    try:
        request = describe(getattr(resource, "_client", None), kwargs)
        call = call_var.get()
        parent = current_scope()
        opened = open_span(request, call)
        if opened is None:
            return None
        attempt = Attempt(opened[0], request, parent, call)
        attempt.input = opened[1]
        return attempt
    except Exception as exc:
        report_internal_error(WHERE, exc)
        return None


def _recorded(attempt: Attempt, kwargs: dict[str, Any]) -> Step | None:
    """Journal the attempt's step; in a re-entered run, the journal's step that answers it
    (failures it recorded end their attempts here, as ``ReplayedFailure``, and the next
    attempt is answered in turn)."""
    recorded = begin_llm_step(attempt.scope, attempt.model, kwargs, failures=True)
    while recorded is not None and recorded.state == "failed":
        attempt.fail(ReplayedFailure(recorded.error or "failed"))
        opened = open_span(attempt.request, attempt.call)
        if opened is None:  # a failure of ours, reported: the call goes on in the failed span
            return None
        attempt.restart(*opened)
        recorded = begin_llm_step(attempt.scope, attempt.model, kwargs, failures=True)
    return recorded


def _run(wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any], attempt: Attempt) -> Any:
    token = attempt_var.set(attempt)
    activation = activate(attempt)
    try:
        result = wrapped(*args, **kwargs)
    except BaseException as error:
        deactivate_attempt(attempt, activation)
        attempt_var.reset(token)
        attempt.fail(error)
        raise
    deactivate_attempt(attempt, activation)
    attempt_var.reset(token)
    return _finish(result, attempt)


async def _arun(
    wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any], attempt: Attempt
) -> Any:
    token = attempt_var.set(attempt)
    activation = activate(attempt)
    try:
        result = await wrapped(*args, **kwargs)
    except BaseException as error:
        deactivate_attempt(attempt, activation)
        attempt_var.reset(token)
        attempt.fail(error)
        raise
    deactivate_attempt(attempt, activation)
    attempt_var.reset(token)
    return _finish(result, attempt)


def _parse_of(wrapped: Any, kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The arguments of a ``parse`` call (its reply is parsed by the SDK), else None."""
    return kwargs if getattr(wrapped, "__name__", None) == "parse" else None


def _replayed(
    recorded: Step,
    attempt: Attempt,
    resource: Any,
    is_async: bool,
    parse: dict[str, Any] | None = None,
) -> Any:
    """The reply the journal recorded for this attempt, ended as a reply from the model is (the
    model is not called)."""
    client = getattr(resource, "_client", None)
    try:
        result = replayed_response(recorded, attempt, client, is_async, parse)
    except Exception as exc:  # a journal this SDK cannot read back: a failure of ours
        report_internal_error(WHERE, exc)
        raise
    if isinstance(result, StreamProxy):  # its span ends when it is read to its end
        return result
    return _finish(result, attempt)


def _finish(result: Any, attempt: Attempt) -> Any:
    """End the attempt with ``result``; a stream gets a proxy that ends it later. The reply
    enters the agent's transcript first (its tool calls offered to the turn), then the span
    ends with what the response says. A failure of ours is reported, never raised."""
    from anthropic import AsyncStream, Stream

    if isinstance(result, (Stream, AsyncStream)):
        return StreamProxy(result, attempt)
    view: Any = None
    try:
        view = chat_view(result)
        offer_tool_calls(attempt, view)
    except Exception as exc:
        try:
            report_internal_error(WHERE, exc)
        finally:  # ends the span even when the test suite re-raises the report
            attempt.succeed(_fallback(attempt, view), Reply(response=result))
        return result
    # billed, then journaled: the journal keeps the Message as it came, signatures included
    attempt.succeed(functools.partial(_completed_attributes, attempt, view), Reply(response=result))
    return result


def _fallback(attempt: Attempt, view: Any) -> Callable[[], dict[str, AttributeValue]]:
    if view is None:
        return dict
    return functools.partial(_completed_attributes, attempt, view)


def _completed_attributes(attempt: Attempt, view: Any) -> dict[str, AttributeValue]:
    attributes = result_attributes(attempt, view)
    outcome = attempt.scope.outcome
    if (attempt.scope.late or {}).get(sc.REPLAYED) is True:
        outcome.set_cost(None)  # answered from the journal: nothing was bought
    elif outcome.cost_usd is None:
        outcome.set_cost(price(attempt.raw_model, outcome.usage))
    return attributes
