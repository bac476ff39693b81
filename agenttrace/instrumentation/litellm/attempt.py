"""One LLM attempt: its span, how it ends (once), and what its response records.

Both ways an attempt ends use these: a plain response (:mod:`.patch`) and a stream
(:mod:`.streaming`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace.instrumentation.litellm.utils import WHERE
from agenttrace.tracing.llm_attributes import classify_error, input_content, response_attributes
from agenttrace.tracing.scopes import OpScope, Scope, finish
from agenttrace.tracing.transcripts import log_llm_exchange


class Attempt:
    """The span of one attempt and how to end it (once)."""

    __slots__ = (
        "__weakref__",
        "active",
        "done",
        "input",
        "messages",
        "model",
        "operation",
        "parent",
        "raw_model",
        "scope",
    )

    def __init__(
        self,
        scope: OpScope,
        operation: str,
        model: str,
        raw_model: str,
        messages: Any,
        parent: Scope | None,
    ) -> None:
        self.scope = scope
        self.operation = operation
        self.model = model
        self.raw_model = raw_model  # as the caller wrote it, provider prefix included
        self.messages = messages
        self.parent = parent  # the scope that was current when the attempt started
        self.done = False
        self.active = False  # its scope is current in the context that runs litellm's code
        self.input: Any = None  # the new input messages, serialised when the span ends

    def fail(self, error: BaseException) -> None:
        if self.done:
            return
        self.done = True
        try:
            # What was asked goes into the saved state even when the attempt failed.
            attributes = input_content(self.input, self.scope.payloads)
            attributes[sc.ERROR_TYPE] = classify_error(error)
            finish(self.scope, error, attributes)
        except Exception as exc:
            report_internal_error(WHERE, exc)

    def succeed(self, attributes: Callable[[], dict[str, AttributeValue]]) -> None:
        """End the span as a success, with what ``attributes()`` computes now (the span ends
        even if that fails; the failure is ours, reported, never the caller's)."""
        if self.done:
            return
        self.done = True
        try:
            finish(self.scope, None, attributes)
        except Exception as exc:
            report_internal_error(WHERE, exc)


def offer_tool_calls(attempt: Attempt, response: Any) -> None:
    """Log the response as the agent's transcript entry (now: in order with everything else the
    agent logs), which also offers its tool calls, with that entry's id, to the turn."""
    if attempt.operation == sc.OP_CHAT:
        log_llm_exchange(attempt.scope, attempt.messages, response)


def result_attributes(attempt: Attempt, response: Any) -> dict[str, AttributeValue]:
    """What a response records on the attempt's span: the new input, the response, and the
    price litellm put on it, if any."""
    payloads = attempt.scope.payloads
    attributes = input_content(attempt.input, payloads)
    attributes.update(response_attributes(response, payloads))
    hidden = getattr(response, "_hidden_params", None)
    cost = hidden.get("response_cost") if isinstance(hidden, Mapping) else None
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        attributes[sc.COST_USD] = float(cost)
    return attributes
