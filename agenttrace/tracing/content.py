"""An op's content, recorded once for every output that carries it.

An LLM attempt's input and output messages (:func:`recorded_content`) and a tool call's
arguments and result (:func:`tool_payload`, for ``@tool`` and the Claude Agent SDK's tool calls
alike) are serialised, capped and redacted here (``recorded_json``): the text goes into the op's
payloads (the opTree's, and so the session file's and the console's) and, where content goes
on spans (:func:`agenttrace._internal.capture.captures`), on the span.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace._internal.capture import Output, captures, content_attributes
from agenttrace._internal.later import RecordedLater, json_length
from agenttrace._internal.redact import recorded_json
from agenttrace._internal.runtime import runtime
from agenttrace.model.outcome import OutcomeBuilder


def recorded_content(
    payloads: dict[str, Any] | None, key: str, value: Any
) -> dict[str, AttributeValue]:
    """Record ``value`` as ``payloads[key]`` (when ``payloads`` is given: the saved state), and
    return it as the span attribute ``key`` where content goes on spans (else nothing)."""
    settings = runtime.settings
    text = recorded_json(value, settings.max_payload_bytes)[1]
    if payloads is not None:
        payloads[key] = text
    return content_attributes(Output.SPAN, {key: text}, settings)


def tool_payload(
    payloads: dict[str, Any],
    key: str,
    value: Any,
    outcome: OutcomeBuilder,
    *,
    later: bool = False,
) -> dict[str, AttributeValue]:
    """Record ``value`` (a tool call's arguments, ``key`` ``gen_ai.tool.call.arguments``, or
    its result, ``gen_ai.tool.call.result``) as ``payloads[key]``, set its size in characters
    (a string's length, anything else's JSON length) as the call's input or output size on
    ``outcome``, and return the span attributes it gives: where content goes on spans, the
    recorded text under ``key``.

    ``later``: nothing can change ``value`` (it is agenttrace's own, or a result that cannot
    change), so when the span does not carry the text it is recorded later, off the caller's
    path (:class:`~agenttrace._internal.later.RecordedLater`).
    """
    settings = runtime.settings
    on_span = captures(Output.SPAN, settings)
    arguments = key == sc.GEN_AI_TOOL_CALL_ARGUMENTS
    if later and not on_span:
        length = len(value) if type(value) is str else json_length(value)
        if length is not None:
            payloads[key] = RecordedLater(value, settings.max_payload_bytes)
            _sized(outcome, arguments, length)
            return {}
    length, recorded = recorded_json(value, settings.max_payload_bytes)
    payloads[key] = recorded
    _sized(outcome, arguments, length)
    return {key: recorded} if on_span else {}


def _sized(outcome: OutcomeBuilder, arguments: bool, length: int) -> None:
    if arguments:
        outcome.chars_in = length
    else:
        outcome.chars_out = length
