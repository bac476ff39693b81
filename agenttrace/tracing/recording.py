"""Where scopes hand their lifecycle records to agenttrace's recorder, and canonical events
become span events.

The recorder (``agenttrace.sdk``'s processor, set by ``init``) gets every record in the caller's
thread; before ``init`` (or after ``shutdown``) records go nowhere. A canonical event logged in a
scope reaches it through the session (``Session`` hands it to the scope's ``event_logged``) and
is added to that scope's span as an ``agenttrace.event`` span event (content capped and
redacted, as on every span) whose time is the event's own ``ts`` and whose attributes are
:func:`span_event_attributes` of the event: everything about it follows from the event, so a
session file does not store it twice and an export rebuilds it exactly.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from opentelemetry import _logs, trace
from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace._internal.capture import Output, captures
from agenttrace._internal.context import Linkable
from agenttrace._internal.redact import recorded_json
from agenttrace._internal.runtime import INSTRUMENTATION_NAME, runtime
from agenttrace._internal.times import ts_nanoseconds
from agenttrace._version import __version__
from agenttrace.model.lifecycle import EventLogged, Record
from agenttrace.session.state import Session
from agenttrace.tracing.outbound import outbound_attributes


def emit(record: Record) -> None:
    """Hand ``record`` to the recorder, if agenttrace is set up."""
    recorder = runtime.recorder
    if recorder is not None:
        recorder.record(record)


def span_event_attributes(
    event: Mapping[str, Any],
    capture_content: bool | None = None,
    max_payload_bytes: int | None = None,
) -> dict[str, AttributeValue]:
    """A canonical event as the attributes of its span event (content recorded: capped and
    redacted; the settings default to the running ones). The ids and names are as the event
    has them: the span event's boundary (``outbound``) scrubs them, an export's
    (``views.public``) did."""
    settings = runtime.settings
    if capture_content is None:
        capture_content = captures(Output.SPAN_EVENT, settings)
    if max_payload_bytes is None:
        max_payload_bytes = settings.max_payload_bytes
    attributes: dict[str, AttributeValue] = {}
    for key, attribute in sc.EVENT_FIELD_ATTRIBUTES:
        value = event.get(key)
        # ids and names (scrubbed where the span event is added), a reset's ``kept``
        if isinstance(value, str) or type(value) is int:
            attributes[attribute] = value
    reused = event.get("reused")
    if isinstance(reused, list):  # a reset's pieces: ids and counts, only JSON keeps them apart
        attributes[sc.EVENT_REUSED] = json.dumps(reused, separators=(",", ":"))
    cause = event.get("cause")
    if isinstance(cause, list):  # a piece of text compiled from several messages
        attributes[sc.EVENT_CAUSE] = [str(c) for c in cause]
    if capture_content:
        content = event.get("content")
        if isinstance(content, str):
            attributes[sc.EVENT_CONTENT] = recorded_json(content, max_payload_bytes)[1]
        calls = event.get("tool_calls")
        if calls:
            attributes[sc.EVENT_TOOL_CALLS] = recorded_json(calls, max_payload_bytes)[1]
    elif isinstance(event.get("content"), str):
        attributes[sc.EVENT_CONTENT_CHARS] = len(event["content"])
    return attributes


def record_canonical_event(
    scope: Linkable, span: Any, session: Session, event: dict[str, Any], line: bytes, more: int
) -> None:
    """A canonical event logged in ``scope``: an ``agenttrace.event`` span event on its
    ``span`` (if it records), and an ``EventLogged`` record for the recorder (if set up). The
    span event is added whether or not agenttrace is set up: canonical events reach the spans
    of an application's own provider without ``init()``."""
    if span is not None and span.is_recording():
        when = ts_nanoseconds(event["ts"]) or time.time_ns()
        attributes = outbound_attributes(
            span_event_attributes(event), runtime.settings.max_payload_bytes
        )
        span.add_event(sc.EVENT_CANONICAL, attributes, timestamp=when)
    emit(EventLogged(session, event, line, scope.origin, scope.label, more))


def emit_inference_details(
    span: Any, attributes: Mapping[str, Any], payloads: Mapping[str, str], when_ns: int
) -> None:
    """The GenAI conventions' ``gen_ai.client.inference.operation.details`` event for one LLM
    attempt: its identity and its input and output messages, as a DEBUG log record parented to
    its span, through the application's logger provider."""
    event: dict[str, AttributeValue] = {
        key: value for key, value in attributes.items() if key in _INFERENCE_ATTRIBUTES
    }
    for key in (sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_OUTPUT_MESSAGES):
        if key in payloads:  # the caller asked captures(Output.LOG): the messages go here
            event[key] = payloads[key]
    _logs.get_logger(INSTRUMENTATION_NAME, __version__).emit(
        _logs.LogRecord(
            timestamp=when_ns,
            context=trace.set_span_in_context(span),
            severity_number=_logs.SeverityNumber.DEBUG,
            event_name=sc.EVENT_INFERENCE_DETAILS,
            attributes=event,
        )
    )


_INFERENCE_ATTRIBUTES = frozenset(
    {
        sc.GEN_AI_OPERATION_NAME,
        sc.GEN_AI_PROVIDER_NAME,
        sc.GEN_AI_REQUEST_MODEL,
        sc.GEN_AI_RESPONSE_MODEL,
        sc.GEN_AI_RESPONSE_ID,
        sc.GEN_AI_RESPONSE_FINISH_REASONS,
        sc.GEN_AI_USAGE_INPUT_TOKENS,
        sc.GEN_AI_USAGE_OUTPUT_TOKENS,
        sc.ERROR_TYPE,
    }
)
