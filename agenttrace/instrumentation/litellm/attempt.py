"""One LLM attempt: its span, how it ends (once), and what its response records.

Both ways an attempt ends use these: a plain response (:mod:`.patch`) and a stream
(:mod:`.streaming`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace.instrumentation.litellm.calls import LogicalCall
from agenttrace.instrumentation.litellm.utils import WHERE, with_cache_writes
from agenttrace.model.outcome import OutcomeBuilder
from agenttrace.tracing.journal.llm_steps import end_llm_step
from agenttrace.tracing.llm_attributes import (
    classify_error,
    field,
    input_content,
    provider_name,
    response_attributes,
)
from agenttrace.tracing.logs import record_reasoning
from agenttrace.tracing.scopes import OpScope, Scope, finish
from agenttrace.tracing.transcripts import log_llm_exchange


class Reply(NamedTuple):
    """What an attempt that succeeded got, for its journal step: a response, or a stream's
    chunks."""

    response: Any = None
    chunks: list[Any] | None = None


class Request:
    """What one litellm call (or SDK call) asks, as its attempts' spans describe it."""

    __slots__ = (
        "attributes",
        "messages",
        "model",
        "name",
        "operation",
        "outcome",
        "raw_model",
        "routed",
        "where",
    )

    def __init__(
        self,
        operation: str,
        name: str,
        attributes: dict[str, AttributeValue],
        model: str,
        raw_model: str,
        messages: Any,
        outcome: OutcomeBuilder,
        routed: bool = False,
        where: str = WHERE,
    ) -> None:
        self.operation = operation
        self.name = name  # the span name
        self.attributes = attributes  # the span's start attributes beside its outcome's
        self.outcome = outcome
        """What every attempt's outcome starts from (the request), but the attempt number."""
        self.model = model
        self.raw_model = raw_model  # as the caller wrote it, provider prefix included
        self.messages = messages
        self.routed = routed
        """A litellm Router chose the deployment this call goes to (its model and provider are
        the deployment's)."""
        self.where = where
        """The instrumentation its attempts report a failure of ours under (an SDK's own, when
        the call was made to the SDK)."""


class Attempt:
    """The span of one attempt and how to end it (once).

    One litellm call is one attempt, unless the OpenAI SDK retries inside it: then the same
    object moves on to the next attempt's span (:meth:`restart`), since litellm's code that
    runs the call, and will end it, only knows this object.
    """

    __slots__ = (
        "__weakref__",
        "active",
        "call",
        "done",
        "input",
        "parent",
        "request",
        "scope",
    )

    def __init__(
        self,
        scope: OpScope,
        request: Request,
        parent: Scope | None,
        call: LogicalCall | None,
    ) -> None:
        self.scope = scope
        self.request = request
        self.parent = parent  # the scope that was current when the attempt started
        self.call = call  # the logical call it is an attempt of
        self.done = False
        self.active = False  # its scope is current in the context that runs litellm's code
        self.input: Any = None  # the new input messages, serialised when the span ends

    @property
    def operation(self) -> str:
        return self.request.operation

    @property
    def model(self) -> str:
        return self.request.model

    @property
    def raw_model(self) -> str:
        return self.request.raw_model

    @property
    def messages(self) -> Any:
        return self.request.messages

    def restart(self, scope: OpScope, new_input: Any) -> None:
        """Go on as the next attempt of the same litellm call, on ``scope``."""
        self.scope = scope
        self.input = new_input
        self.done = False

    def fail(self, error: BaseException) -> None:
        if self.done:
            return
        self.done = True
        end_llm_step(self.scope, self.model, error=error)
        try:
            # What was asked goes into the saved state even when the attempt failed.
            attributes = input_content(self.input, self.scope.payloads)
            self.scope.outcome.set_error(classify_error(error))
            finish(self.scope, error, attributes)
        except Exception as exc:
            report_internal_error(self.request.where, exc)
        self._ended(error)

    def succeed(
        self, attributes: Callable[[], dict[str, AttributeValue]], reply: Reply | None = None
    ) -> None:
        """End the span as a success, with what ``attributes()`` computes now (the span ends
        even if that fails; the failure is ours, reported, never the caller's); then journal
        the ``reply`` as the step's outcome.

        The outcome is journaled after the span ended, whose accounting (the ledger's line) is
        written here, in this thread: the journal's ``done`` is written by the background
        thread, and a kill that came after it and before the ledger's line would leave a reply
        the model was paid for that a re-entry serves from the journal and no one ever bills.
        In this order a kill between the two leaves the attempt in doubt: a re-entry asks the
        model again, and both requests are billed, as the model bills them."""
        if self.done:
            return
        self.done = True
        try:
            finish(self.scope, None, attributes)
        except Exception as exc:
            report_internal_error(self.request.where, exc)
        if reply is not None:
            end_llm_step(self.scope, self.model, response=reply.response, chunks=reply.chunks)
        self._ended(None)

    def _ended(self, error: BaseException | None) -> None:
        """Tell the logical call (and so its implicit run) that this attempt's span ended."""
        _put_back_leaked_context(self)
        if self.call is not None:
            try:
                self.call.attempt_ended(self.scope, error)
            except Exception as exc:
                report_internal_error(self.request.where, exc)


def _put_back_leaked_context(attempt: Attempt) -> None:
    """Make the attempt's parent current again if its ended span is current outside it.

    Another instrumentation of the same SDK, wrapped inside ours, may make its span current
    when a stream starts (while our attempt's scope is current) and detach it when the stream
    ends (OpenTelemetry contrib's openai-v2 does), after our wrapper had put the caller's
    context back: that detach restores the context it saw, ours, in the caller's context, where
    our ended span would parent every span after it. Only that case is touched: our span
    current while the attempt is not active."""
    try:
        span = attempt.scope.span
        if attempt.active or trace.get_current_span() is not span:
            return
        parent = attempt.parent.span if attempt.parent is not None else None
        # No token to detach: the context is set back, as the caller had it before the call.
        otel_context.attach(trace.set_span_in_context(parent or trace.INVALID_SPAN))
    except Exception as exc:
        report_internal_error(WHERE, exc)


def offer_tool_calls(
    attempt: Attempt, response: Any, streamed: Sequence[tuple[str, int]] | None = None
) -> None:
    """Log the response as the agent's transcript entry (now: in order with everything else the
    agent logs), which also offers its tool calls, with that entry's id, to the turn; and the
    reasoning it carries as the attempt's reasoning: ``streamed``, the reasoning deltas of a
    stream as they came (``(text, time in ns)``), else the response's."""
    if attempt.operation == sc.OP_CHAT:
        if streamed:
            record_reasoning(attempt.scope, chunks=streamed)
        else:
            texts, summary = reasoning_of(response)
            if texts or summary:
                now = time.time_ns()
                record_reasoning(
                    attempt.scope, chunks=[(text, now) for text in texts], final=summary
                )
        log_llm_exchange(attempt.scope, attempt.messages, response)


REASONING_SUMMARY = "reasoning_summary"
"""The field of a response's message that holds the provider's summary of its reasoning (the
Responses API's, :func:`agenttrace.instrumentation.openai.responses.chat_view`)."""


def reasoning_of(response: Any) -> tuple[list[str], str | None]:
    """The reasoning a chat response carries, as litellm gives it, and the provider's summary of
    it: each thinking block's text (Anthropic's; their signatures are opaque and not recorded),
    else ``reasoning_content`` (DeepSeek's, OpenAI-compatible servers'); a summary only (the
    Responses API gives no more) is ``([], summary)``. Redacted thinking has no text to
    record."""
    choices = field(response, "choices")
    if not isinstance(choices, Sequence) or not choices:
        return [], None
    message = field(choices[0], "message")
    summary = field(message, REASONING_SUMMARY)
    if isinstance(summary, str) and summary:
        return [], summary
    blocks = field(message, "thinking_blocks")
    if isinstance(blocks, Sequence) and blocks:
        texts = [field(block, "thinking") for block in blocks]
        return [text for text in texts if isinstance(text, str) and text], None
    reasoning = field(message, "reasoning_content")
    return ([reasoning] if isinstance(reasoning, str) and reasoning else []), None


def reasoning_delta(chunk: Any) -> str | None:
    """The reasoning a stream's chunk carries: litellm's and OpenAI-compatible servers'
    ``reasoning_content`` delta, or an Anthropic ``thinking_delta``."""
    choices = field(chunk, "choices")
    if isinstance(choices, Sequence) and choices:
        text = field(field(choices[0], "delta"), "reasoning_content")
    elif field(chunk, "type") == "content_block_delta":
        delta = field(chunk, "delta")
        text = field(delta, "thinking") if field(delta, "type") == "thinking_delta" else None
    else:
        return None
    return text if isinstance(text, str) and text else None


def result_attributes(attempt: Attempt, response: Any) -> dict[str, AttributeValue]:
    """What a response records on the attempt's span: the new input, the response, and the
    price litellm put on it, if any."""
    payloads = attempt.scope.payloads
    attributes = input_content(attempt.input, payloads)
    outcome = attempt.scope.outcome
    attributes.update(response_attributes(response, outcome, payloads))
    outcome.set_usage(with_cache_writes(outcome.usage, field(response, "usage")))
    hidden = getattr(response, "_hidden_params", None)
    if not isinstance(hidden, Mapping):
        hidden = {}
    cost = hidden.get("response_cost")
    if outcome.mocked:
        # litellm prices its made-up reply's made-up tokens at the model's price: nothing
        # was bought.
        outcome.set_cost(0.0)
    elif isinstance(cost, (int, float)) and not isinstance(cost, bool):
        outcome.set_cost(float(cost))
    if attempt.request.routed and outcome.response_provider is None:
        # Behind a Router, the deployment that answered served it: the provider litellm says
        # it used for the call, else the one the deployment's parameters name.
        used = hidden.get("custom_llm_provider")
        served_by = provider_name(used) if isinstance(used, str) else None
        if not served_by:
            served_by = outcome.provider
        if served_by:
            outcome.set_response(provider=served_by)
    return attributes
