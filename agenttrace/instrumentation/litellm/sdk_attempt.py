"""One call of an LLM client SDK traced as a litellm attempt: the wrappers' steps, once.

The OpenAI SDK's chat completions and Responses API and the Anthropic SDK's messages wrap
their calls alike: each call is a logical call (:mod:`.calls`: numbered attempts, one turn, the
re-request rule) and its attempt a ``chat {model}`` span opened as litellm's are
(:func:`~.tracking.open_span`), answered from the journal in a re-entered run, else sent with
the attempt current (the SDK's retries see it) and ended once with what the reply says. What
differs, each API gives as an :class:`SDKCalls`: whether a call passes through, what it asks,
how a reply (or the journal's) ends its attempt, where its request puts the system prompt a
fork overrides (:mod:`.fork`: a fork's live call is sent with them). A raw-response call
(``with_raw_response``, ``with_streaming_response``) is the same attempt, its response object
parsed in it (:mod:`.sdk_raw`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.runtime import runtime
from agenttrace.instrumentation.litellm.attempt import Attempt, Request
from agenttrace.instrumentation.litellm.fork import sdk_forked
from agenttrace.instrumentation.litellm.sdk_raw import (
    aparsing,
    finish_raw,
    parsing,
    raw_kind,
    replayed_raw,
)
from agenttrace.instrumentation.litellm.stream_proxy import ChunkProxy
from agenttrace.instrumentation.litellm.tracking import (
    arun_attempt,
    attempt_var,
    begin_attempt,
    enter_call,
    leave_call,
    open_span,
    run_attempt,
)
from agenttrace.model.fork import RequestShape
from agenttrace.model.journal import Step
from agenttrace.model.replay import ReplayDivergence
from agenttrace.tracing.journal.llm_steps import ReplayedFailure, begin_llm_step
from agenttrace.tracing.scopes import OpScope, current_scope


class SDKCalls(NamedTuple):
    """What one SDK API's calls do their own way."""

    where: str
    """The instrumentation a failure of ours is reported under."""
    untraced: Callable[[dict[str, Any]], bool]
    """Whether a call with these arguments passes through untraced."""
    describe: Callable[[Any, dict[str, Any]], Request]
    """What a call on this client, with these arguments, asks."""
    replay: Callable[[Step, Attempt, Any, bool, dict[str, Any] | None], Any]
    """The reply the journal recorded for the attempt (a stream: behind its proxy), as the SDK
    gives it: given the step, the attempt, the client called, whether the call is async and,
    for a ``parse`` call, the arguments its reply is parsed with (else None)."""
    finish: Callable[[Any, Attempt], Any]
    """End the attempt with the reply the SDK gave; what the caller gets."""
    package: str
    """The SDK's package (``openai``, ``anthropic``), whose raw responses' classes a re-entered
    raw call gets (:mod:`.sdk_raw`)."""
    path: str
    """The endpoint the calls go to (a replayed raw response's URL)."""
    shape: RequestShape
    """Where a request puts the system prompt a fork overrides."""


def passes_through(enabled: bool) -> bool:
    """Whether any SDK call passes through: tracing off (or the instrumentation not
    ``enabled``), a litellm attempt's own request, or a call inside an ``@agenttrace.llm``
    function or block (the program's own span of this call records it: one span, never two)."""
    if runtime.disabled or not enabled or attempt_var.get() is not None:
        return True
    scope = current_scope()
    return isinstance(scope, OpScope) and scope.kind == sc.KIND_LLM


def traced_call(
    api: SDKCalls, wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """A sync call of ``api``, as its attempt (see the module docstring)."""
    if api.untraced(kwargs):
        return wrapped(*args, **kwargs)
    call_token = enter_call(args, kwargs, True)
    raised = True
    try:
        attempt = start_attempt(api, instance, kwargs)
        if attempt is None:
            result = wrapped(*args, **kwargs)
        else:
            kwargs = fork_request(api, attempt, instance, kwargs, wrapped)
            recorded = recorded_step(attempt, kwargs)
            if recorded is not None:
                result = replayed(api, recorded, attempt, instance, False, wrapped, kwargs)
            elif raw_kind(kwargs) is not None:  # with_raw_response, with_streaming_response
                finish = functools.partial(_finish_raw, api)
                result = run_attempt(parsing(wrapped), args, kwargs, attempt, finish)
            else:
                result = run_attempt(wrapped, args, kwargs, attempt, api.finish)
        raised = False
        return result
    finally:
        leave_call(call_token, raised)


async def atraced_call(
    api: SDKCalls, wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """An async call of ``api``, as its attempt: the call runs in the caller's task, whose
    context the attempt's scope is current in while it is awaited."""
    if api.untraced(kwargs):
        return await wrapped(*args, **kwargs)
    call_token = enter_call(args, kwargs, True)
    raised = True
    try:
        attempt = start_attempt(api, instance, kwargs)
        if attempt is None:
            result = await wrapped(*args, **kwargs)
        else:
            kwargs = fork_request(api, attempt, instance, kwargs, wrapped)
            recorded = recorded_step(attempt, kwargs)
            if recorded is not None:
                result = replayed(api, recorded, attempt, instance, True, wrapped, kwargs)
            elif raw_kind(kwargs) is not None:
                finish = functools.partial(_finish_raw, api)
                result = await arun_attempt(aparsing(wrapped), args, kwargs, attempt, finish)
            else:
                result = await arun_attempt(wrapped, args, kwargs, attempt, api.finish)
        raised = False
        return result
    finally:
        leave_call(call_token, raised)


def start_attempt(api: SDKCalls, resource: Any, kwargs: dict[str, Any]) -> Attempt | None:
    """The attempt's span, started (None: a failure of ours, reported; the call runs
    untraced)."""
    return begin_attempt(
        lambda: api.describe(getattr(resource, "_client", None), kwargs), api.where
    )


def fork_request(
    api: SDKCalls, attempt: Attempt, resource: Any, kwargs: dict[str, Any], wrapped: Any
) -> dict[str, Any]:
    """The keywords the attempt is sent with (by ``wrapped``, the SDK's method): in a fork, at
    or after its label, with the fork's overrides (:mod:`.fork`), else the program's."""
    client = getattr(resource, "_client", None)
    described = functools.partial(api.describe, client)
    return sdk_forked(attempt, kwargs, api.shape, described, wrapped)


def recorded_step(attempt: Attempt, kwargs: Any) -> Step | None:
    """Journal the attempt's step; in a re-entered run, the journal's step that answers it
    (failures it recorded end their attempts here, as ``ReplayedFailure``, and the next
    attempt is answered in turn)."""
    try:
        recorded = begin_llm_step(attempt.scope, attempt.model, kwargs, failures=True)
    except ReplayDivergence as error:  # a strict replay: nothing is sent
        attempt.fail(error)
        raise
    while recorded is not None and recorded.state == "failed":
        attempt.fail(ReplayedFailure(recorded.error or "failed"))
        opened = open_span(attempt.request, attempt.call)
        if opened is None:  # a failure of ours, reported: the call goes on in the failed span
            return None
        attempt.restart(*opened)
        recorded = begin_llm_step(attempt.scope, attempt.model, kwargs, failures=True)
    return recorded


def replayed(
    api: SDKCalls,
    recorded: Step,
    attempt: Attempt,
    resource: Any,
    is_async: bool,
    wrapped: Any,
    kwargs: dict[str, Any],
) -> Any:
    """The reply the journal recorded for this attempt, ended as a reply from the model is (the
    model is not called; a stream's span ends when it is read to its end)."""
    client = getattr(resource, "_client", None)
    try:
        result = api.replay(recorded, attempt, client, is_async, parse_of(wrapped, kwargs))
    except Exception as exc:  # a journal this SDK cannot read back: a failure of ours
        report_internal_error(api.where, exc)
        raise
    if not isinstance(result, ChunkProxy):
        result = api.finish(result, attempt)
    kind = raw_kind(kwargs)
    if kind is not None:  # the response object the raw call gets, over the reply
        result = replayed_raw(api.package, kind, result, client, is_async, api.path)
    return result


def _finish_raw(api: SDKCalls, raw: Any, attempt: Attempt) -> Any:
    return finish_raw(raw, attempt, api.finish, api.where)


def parse_of(wrapped: Any, kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The arguments of a ``parse`` call (its reply is parsed by the SDK), else None."""
    return kwargs if getattr(wrapped, "__name__", None) == "parse" else None
