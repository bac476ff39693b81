"""Where scopes hand their lifecycle records to agenttrace's recorder, and canonical events
become span events.

The recorder (``agenttrace.sdk``'s processor, set by ``init``) gets every record in the caller's
thread; before ``init`` (or after ``shutdown``) records go nowhere. A canonical event logged in a
scope reaches it through the session (``Session`` hands it to the scope's ``event_logged``) and
is added to that scope's span as an ``agenttrace.event`` span event (content capped and
redacted, as on every span) whose time is the event's own ``ts`` and whose attributes are
:func:`~agenttrace.formats.session.span_events.span_event_attributes` of the event: everything
about it follows from the event, so a session file does not store it twice and an export
rebuilds it exactly.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from opentelemetry import _logs, trace
from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace._internal.capture import Output, captures
from agenttrace._internal.context import Linkable
from agenttrace._internal.runtime import INSTRUMENTATION_NAME, runtime
from agenttrace._internal.times import ts_nanoseconds
from agenttrace._version import __version__
from agenttrace.formats.session.span_events import span_event_attributes
from agenttrace.model.lifecycle import EventLogged, Record
from agenttrace.session.state import Session
from agenttrace.tracing.outbound import outbound_attributes


def emit(record: Record) -> None:
    """Hand ``record`` to the recorder, if agenttrace is set up."""
    recorder = runtime.recorder
    if recorder is not None:
        recorder.record(record)


def record_canonical_event(
    scope: Linkable, span: Any, session: Session, event: dict[str, Any], line: bytes, more: int
) -> None:
    """A canonical event logged in ``scope``: an ``agenttrace.event`` span event on its
    ``span`` (if it records), and an ``EventLogged`` record for the recorder (if set up). The
    span event is added whether or not agenttrace is set up: canonical events reach the spans
    of an application's own provider without ``init()``."""
    if span is not None and span.is_recording():
        when = ts_nanoseconds(event["ts"]) or time.time_ns()
        settings = runtime.settings
        limit = settings.max_payload_bytes
        attributes = outbound_attributes(
            span_event_attributes(event, captures(Output.SPAN_EVENT, settings), limit), limit
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
