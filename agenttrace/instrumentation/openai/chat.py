"""The wrappers of ``chat.completions.create``, sync and async: one attempt per call.

Each call is a logical call (:mod:`agenttrace.instrumentation.litellm.calls`: numbered
attempts, one turn, the re-request rule) and its attempt a ``chat {model}`` span opened as
litellm's are (:func:`~agenttrace.instrumentation.litellm.tracking.open_span`), ended once with
what the response says, its reply logged to the agent's transcript and journaled. A call made
while a litellm attempt runs is litellm's own request to the model: that attempt is its span,
so it passes through (one span, never two), as does a call inside an ``@agenttrace.llm``
function or block, whose span is the program's own record of it. A ``with_raw_response`` or
``with_streaming_response`` call is traced as the plain one
(:mod:`~agenttrace.instrumentation.litellm.sdk_raw`), but litellm's own raw calls (:mod:`.raw`).
"""

from __future__ import annotations

import functools
from typing import Any

from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace.instrumentation.litellm.attempt import (
    Attempt,
    Reply,
    offer_tool_calls,
    result_attributes,
)
from agenttrace.instrumentation.litellm.sdk_attempt import (
    SDKCalls,
    atraced_call,
    passes_through,
    traced_call,
)
from agenttrace.instrumentation.litellm.sdk_raw import raw_kind
from agenttrace.instrumentation.openai.raw import made_by_litellm
from agenttrace.instrumentation.openai.replay import replayed_response
from agenttrace.instrumentation.openai.request import WHERE, describe, price, state
from agenttrace.instrumentation.openai.streaming import StreamProxy
from agenttrace.model.fork import CHAT


def untraced(kwargs: dict[str, Any]) -> bool:
    """Whether a call passes through: as any SDK call does (:func:`passes_through`: tracing
    off, a litellm attempt's own request, a call inside an ``@agenttrace.llm`` function or
    block), or litellm's raw call (:mod:`.raw`)."""
    if passes_through(state.enabled):
        return True
    return raw_kind(kwargs) is not None and made_by_litellm()


def create_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """For ``Completions.create``."""
    return traced_call(_CHAT, wrapped, instance, args, kwargs)


async def acreate_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """For ``AsyncCompletions.create`` and ``.parse``: the call runs in the caller's task, whose
    context the attempt's scope is current in while it is awaited."""
    return await atraced_call(_CHAT, wrapped, instance, args, kwargs)


def _finish(result: Any, attempt: Attempt) -> Any:
    """End the attempt with ``result``; a stream gets a proxy that ends it later. The reply
    enters the agent's transcript first (its tool calls offered to the turn), then the span
    ends with what the response says. A failure of ours is reported, never raised."""
    from openai import AsyncStream, Stream

    completed = functools.partial(completed_attributes, attempt, result)
    try:
        # Another instrumentation inside ours may hand back its own wrapper of the SDK's
        # stream, no Stream (contrib's openai-v2 does): an iterator is a stream all the same.
        if isinstance(result, (Stream, AsyncStream)) or _iterates(result):
            return StreamProxy(result, attempt)
        offer_tool_calls(attempt, result)
    except Exception as exc:
        try:
            report_internal_error(WHERE, exc)
        finally:  # ends the span even when the test suite re-raises the report
            attempt.succeed(completed, Reply(response=_journaled(result)))
        return result
    attempt.succeed(completed, Reply(response=_journaled(result)))  # billed, then journaled
    return result


def _iterates(result: Any) -> bool:
    """Whether ``result`` is an iterator (a reply is a pydantic model, iterable but no
    iterator)."""
    kind = type(result)
    return hasattr(kind, "__next__") or hasattr(kind, "__anext__")


def _journaled(result: Any) -> Any:
    """What the journal keeps of a reply: the reply, or a ``parse`` call's
    ``ParsedChatCompletion`` as its data, dumped here without pydantic's warnings (its generic
    type warns that ``parsed`` is not ``None``, in the program's output); a replay parses the
    content again."""
    from openai.types.chat import ParsedChatCompletion

    if isinstance(result, ParsedChatCompletion):
        return result.model_dump(mode="json", warnings=False)
    return result


def completed_attributes(attempt: Attempt, result: Any) -> dict[str, AttributeValue]:
    """What a chat completion `result` records on the attempt's span, its price included."""
    attributes = result_attributes(attempt, result)
    outcome = attempt.scope.outcome
    if (attempt.scope.late or {}).get(sc.REPLAYED) is True:
        outcome.set_cost(None)  # answered from the journal: nothing was bought
    elif outcome.cost_usd is None:
        outcome.set_cost(price(attempt.raw_model, outcome.usage))
    return attributes


_CHAT = SDKCalls(
    WHERE, untraced, describe, replayed_response, _finish, "openai", "/chat/completions", CHAT
)
"""What a chat completions call does its own way."""
