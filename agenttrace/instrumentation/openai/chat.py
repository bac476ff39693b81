"""The wrappers of ``chat.completions.create``, sync and async: one attempt per call.

Each call is a logical call (:mod:`agenttrace.instrumentation.litellm.calls`: numbered
attempts, one turn, the re-request rule) and its attempt a ``chat {model}`` span opened as
litellm's are (:func:`~agenttrace.instrumentation.litellm.tracking.open_span`), ended once with
what the response says, its reply logged to the agent's transcript and journaled. A call made
while a litellm attempt runs is litellm's own request to the model: that attempt is its span,
so it passes through (one span, never two), as does a call inside an ``@agenttrace.llm``
function or block, whose span is the program's own record of it. A ``with_raw_response`` call
is traced (:mod:`.raw`); a ``with_streaming_response`` one passes through untraced.
"""

from __future__ import annotations

import functools
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
from agenttrace.instrumentation.litellm.tracking import (
    activate,
    attempt_var,
    call_var,
    deactivate_attempt,
    enter_call,
    leave_call,
    open_span,
)
from agenttrace.instrumentation.openai.raw import (
    finish_raw,
    made_by_litellm,
    raw_kind,
    replayed_raw,
)
from agenttrace.instrumentation.openai.replay import replayed_response
from agenttrace.instrumentation.openai.request import WHERE, describe, price, state
from agenttrace.instrumentation.openai.streaming import StreamProxy
from agenttrace.model.journal import Step
from agenttrace.tracing.journal.llm_steps import ReplayedFailure, begin_llm_step
from agenttrace.tracing.scopes import OpScope, current_scope


def untraced(kwargs: dict[str, Any]) -> bool:
    """Whether a call passes through: tracing off, a litellm attempt's own request, a call
    inside an ``@agenttrace.llm`` function or block (the program's own span of this call
    records it: one span, never two), a ``with_streaming_response`` call, or litellm's raw call
    (:mod:`.raw`)."""
    if runtime.disabled or not state.enabled or attempt_var.get() is not None:
        return True
    scope = current_scope()
    if isinstance(scope, OpScope) and scope.kind == sc.KIND_LLM:
        return True
    raw = raw_kind(kwargs)
    # with_streaming_response leaves the body to the caller; litellm's raw calls are litellm's.
    return raw is not None and (raw != "true" or made_by_litellm())


def create_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """For ``Completions.create``."""
    if untraced(kwargs):
        return wrapped(*args, **kwargs)
    call_token = enter_call(args, kwargs, True)
    raised = True
    try:
        attempt = start_attempt(instance, kwargs)
        if attempt is None:
            result = wrapped(*args, **kwargs)
        else:
            recorded = recorded_step(attempt, kwargs)
            if recorded is not None:
                result = _replayed(recorded, attempt, instance, False, _parse_of(wrapped, kwargs))
                if raw_kind(kwargs) is not None:
                    result = replayed_raw(result, getattr(instance, "_client", None), False)
            else:
                result = run(wrapped, args, kwargs, attempt, _finish)
        raised = False
        return result
    finally:
        leave_call(call_token, raised)


async def acreate_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """For ``AsyncCompletions.create`` and ``.parse``: the call runs in the caller's task, whose
    context the attempt's scope is current in while it is awaited."""
    if untraced(kwargs):
        return await wrapped(*args, **kwargs)
    call_token = enter_call(args, kwargs, True)
    raised = True
    try:
        attempt = start_attempt(instance, kwargs)
        if attempt is None:
            result = await wrapped(*args, **kwargs)
        else:
            recorded = recorded_step(attempt, kwargs)
            if recorded is not None:
                result = _replayed(recorded, attempt, instance, True, _parse_of(wrapped, kwargs))
                if raw_kind(kwargs) is not None:
                    result = replayed_raw(result, getattr(instance, "_client", None), True)
            else:
                result = await arun(wrapped, args, kwargs, attempt, _finish)
        raised = False
        return result
    finally:
        leave_call(call_token, raised)


def start_attempt(resource: Any, kwargs: dict[str, Any]) -> Attempt | None:
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


def recorded_step(attempt: Attempt, kwargs: Any) -> Step | None:
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


def run(
    wrapped: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    attempt: Attempt,
    finish: Callable[[Any, Attempt], Any],
) -> Any:
    """Send the call as ``attempt`` (its scope current; the SDK's retries see it); a failure
    ends it failed and passes through, a result is given to ``finish``."""
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
    return finish(result, attempt)


async def arun(
    wrapped: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    attempt: Attempt,
    finish: Callable[[Any, Attempt], Any],
) -> Any:
    """Async :func:`run`."""
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
    return finish(result, attempt)


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
    from openai import AsyncStream, Stream
    from openai._legacy_response import LegacyAPIResponse

    if isinstance(result, LegacyAPIResponse):  # with_raw_response: the reply it holds
        return finish_raw(result, attempt, _finish)
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
