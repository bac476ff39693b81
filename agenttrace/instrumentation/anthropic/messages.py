"""The wrappers of ``messages.create``, ``.parse`` and ``.stream``, sync and async, and of
``beta.messages``' (whose replies from the journal are the beta types): one attempt per call.

Each call is a logical call (:mod:`agenttrace.instrumentation.litellm.calls`: numbered
attempts, one turn, the re-request rule) and its attempt a ``chat {model}`` span opened as
litellm's are (:func:`~agenttrace.instrumentation.litellm.tracking.open_span`), ended once with
what the response says, its reply logged to the agent's transcript and journaled: the
OpenAI SDK's instrumentation does the same (:mod:`agenttrace.instrumentation.openai.chat`).
``messages.stream(...)`` sends its request itself when its manager is entered, not through
``create``: the manager's request is run as a streamed ``create`` call is. A call made while a
litellm attempt runs or inside an ``@agenttrace.llm`` function or block passes through
untraced. A call asking for the raw HTTP response (``with_raw_response``,
``with_streaming_response``) is traced as the plain one
(:mod:`~agenttrace.instrumentation.litellm.sdk_raw`).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace.instrumentation.anthropic.replay import replayed_response
from agenttrace.instrumentation.anthropic.request import WHERE, chat_view, describe, price, state
from agenttrace.instrumentation.anthropic.streaming import StreamProxy
from agenttrace.instrumentation.litellm.attempt import (
    Attempt,
    Reply,
    offer_tool_calls,
    result_attributes,
)
from agenttrace.instrumentation.litellm.fork import in_body
from agenttrace.instrumentation.litellm.sdk_attempt import (
    SDKCalls,
    atraced_call,
    passes_through,
    traced_call,
)
from agenttrace.model.fork import MESSAGES

_MANAGERS = (
    "_MessageStreamManager__api_request",
    "_AsyncMessageStreamManager__api_request",
    "_BetaMessageStreamManager__api_request",
    "_BetaAsyncMessageStreamManager__api_request",
)
"""Where ``messages.stream``'s (and ``beta.messages.stream``'s) manager keeps the request it
sends when it is entered."""


def _untraced(kwargs: dict[str, Any]) -> bool:
    """Whether a call passes through: as any SDK call does (:func:`passes_through`: tracing
    off, a litellm attempt's own request, a call inside an ``@agenttrace.llm`` function or
    block)."""
    return passes_through(state.enabled)


def create_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """For ``Messages.create``."""
    return traced_call(_MESSAGES, wrapped, instance, args, kwargs)


async def acreate_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """For ``AsyncMessages.create``: the call runs in the caller's task, whose context the
    attempt's scope is current in while it is awaited."""
    return await atraced_call(_MESSAGES, wrapped, instance, args, kwargs)


def beta_create_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """For ``beta.messages``' ``Messages.create``."""
    return traced_call(_BETA_MESSAGES, wrapped, instance, args, kwargs)


async def beta_acreate_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """For ``beta.messages``' ``AsyncMessages.create``."""
    return await atraced_call(_BETA_MESSAGES, wrapped, instance, args, kwargs)


def stream_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """For ``Messages.stream`` and ``AsyncMessages.stream``: the manager they return sends its
    request as a streamed ``create`` call (entering the manager starts the attempt)."""
    return _streamed(_MESSAGES, wrapped, instance, args, kwargs)


def beta_stream_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """For ``beta.messages``' ``stream``, as :func:`stream_wrapper`."""
    return _streamed(_BETA_MESSAGES, wrapped, instance, args, kwargs)


def _streamed(
    api: SDKCalls, wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    manager = wrapped(*args, **kwargs)
    try:
        for name in _MANAGERS:
            send = getattr(manager, name, None)
            if send is None:
                continue
            asked = {**kwargs, "stream": True}
            rebuilt = functools.partial(_rebuilt, wrapped, args, name)
            if "AsyncMessageStreamManager" in name:
                setattr(manager, name, _asend(api, send, instance, asked, rebuilt))
            else:
                send = functools.partial(_send, api, send, instance, asked, rebuilt)
                setattr(manager, name, send)
    except Exception as exc:  # a manager of another shape: its stream goes untraced
        report_internal_error(WHERE, exc)
    return manager


def _rebuilt(stream: Callable[..., Any], args: tuple[Any, ...], name: str, sent: Any) -> Any:
    """The request a manager of ``stream`` (the SDK's own method) makes of the keywords
    ``sent``: a fork's, when they are not the ones the program's manager was made with (a
    setting ``stream`` does not name goes in the request's body, :func:`in_body`)."""
    asked = {key: value for key, value in sent.items() if key != "stream"}
    return getattr(stream(*args, **in_body(stream, asked)), name)


def _as_asked(sent: dict[str, Any], asked: dict[str, Any]) -> bool:
    """Whether the attempt sends the keywords the program asked (a fork's live call has
    others: its manager's request is made again of them)."""
    return sent.keys() == asked.keys() and all(sent[key] is asked[key] for key in asked)


def _send(
    api: SDKCalls,
    send: Callable[[], Any],
    resource: Any,
    kwargs: dict[str, Any],
    rebuilt: Callable[[dict[str, Any]], Callable[[], Any]],
) -> Any:
    def sending(**sent: Any) -> Any:
        return send() if _as_asked(sent, kwargs) else rebuilt(sent)()

    return traced_call(api, sending, resource, (), kwargs)


async def _asend(
    api: SDKCalls,
    request: Awaitable[Any],
    resource: Any,
    kwargs: dict[str, Any],
    rebuilt: Callable[[dict[str, Any]], Awaitable[Any]],
) -> Any:
    """The async manager's request (a coroutine it awaits once), sent as an attempt; closed
    unawaited when the journal answers it, or when a fork's request is sent instead."""
    sent = False

    async def send(**given: Any) -> Any:
        nonlocal sent
        if not _as_asked(given, kwargs):
            return await rebuilt(given)
        sent = True
        return await request

    try:
        return await atraced_call(api, send, resource, (), kwargs)
    finally:
        close = getattr(request, "close", None)
        if not sent and callable(close):
            close()


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
        outcome.set_cost(price(attempt.raw_model, outcome.usage, view))
    return attributes


_MESSAGES = SDKCalls(
    WHERE, _untraced, describe, replayed_response, _finish, "anthropic", "/v1/messages", MESSAGES
)
"""What a ``messages`` call does its own way."""

_BETA_MESSAGES = _MESSAGES._replace(replay=functools.partial(replayed_response, beta=True))
"""What a ``beta.messages`` call does its own way: its replies from the journal are the beta
types."""
