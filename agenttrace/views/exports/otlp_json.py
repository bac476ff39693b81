"""A session file as OTLP/JSON: an ``ExportTraceServiceRequest`` in the JSON Protobuf encoding.

That encoding is proto3's JSON mapping with OTLP's deviations (``docs/specification.md``,
"JSON Protobuf Encoding", in github.com/open-telemetry/opentelemetry-proto): ``traceId`` and
``spanId`` are hex strings, not base64; enums are integers; keys are lowerCamelCase; and, from
proto3, 64-bit integers (``startTimeUnixNano``, ``intValue``) are decimal strings. The document
can be POSTed to an OTLP/HTTP receiver's ``/v1/traces`` with ``Content-Type: application/json``,
read by the collector's ``otlpjsonfile`` receiver, or uploaded to Jaeger UI (which converts OTLP
through its query service's ``/api/transform``).
"""

from __future__ import annotations

import math
from typing import Any

from agenttrace import semconv as sc
from agenttrace._version import __version__
from agenttrace.views.exports._spans import (
    AttributeValue,
    Source,
    SpanLog,
    SpanRecord,
    load,
    resource_attributes,
    traces_of,
)

SPAN_KIND_INTERNAL = 1
"""Every agenttrace span is internal: agent work inside one process, not a call across one."""
STATUS_CODE_UNSET = 0
STATUS_CODE_OK = 1
STATUS_CODE_ERROR = 2


def to_otlp_json(source: Source, *, service_name: str = "agenttrace") -> dict[str, Any]:
    """The session's runs as one OTLP/JSON ``ExportTraceServiceRequest``.

    ``source``: a :class:`~agenttrace.record.session_files.LoadedFile` or a session file path (read
    with :func:`~agenttrace.record.session_files.read_session_file`, which raises
    :class:`~agenttrace.record.session_files.SessionFileError`). All runs share one resource (the
    process that recorded them, ``service.name`` = ``service_name``) and one scope
    (``agenttrace``); each run keeps its own trace id. An event stream holds no opTree and gives
    ``{"resourceSpans": []}``.
    """
    loaded = load(source)
    spans = [span for trace in traces_of(loaded) for span in trace.spans]
    if not spans:
        # OTLP asks senders not to create empty envelopes.
        return {"resourceSpans": []}
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes(resource_attributes(loaded, service_name))},
                "scopeSpans": [
                    {
                        "scope": {"name": "agenttrace", "version": __version__},
                        "spans": [_span(span) for span in spans],
                    }
                ],
            }
        ]
    }


def _span(span: SpanRecord) -> dict[str, Any]:
    # OTLP has no "never ended": such a span ends where it starts and says so in an attribute.
    end_ns = span.end_ns if span.end_ns is not None else span.start_ns
    encoded: dict[str, Any] = {
        "traceId": span.trace_id,
        "spanId": span.span_id,
    }
    if span.parent_span_id is not None:
        encoded["parentSpanId"] = span.parent_span_id
    encoded.update(
        {
            "name": span.name,
            "kind": SPAN_KIND_INTERNAL,
            "startTimeUnixNano": str(span.start_ns),
            "endTimeUnixNano": str(max(end_ns, span.start_ns)),
            "attributes": _attributes(span.attributes),
            "events": [_event(log) for log in span.logs],
            "status": _status(span),
        }
    )
    return encoded


def _status(span: SpanRecord) -> dict[str, Any]:
    if span.status == sc.STATUS_FAILED:
        status: dict[str, Any] = {"code": STATUS_CODE_ERROR}
        if span.status_message:
            status["message"] = span.status_message
        return status
    if span.status == sc.STATUS_OK:
        return {"code": STATUS_CODE_OK}
    return {"code": STATUS_CODE_UNSET}


def _event(log: SpanLog) -> dict[str, Any]:
    return {
        "timeUnixNano": str(log.timestamp_ns),
        "name": log.name,
        "attributes": _attributes(log.attributes),
    }


def _attributes(attributes: dict[str, AttributeValue]) -> list[dict[str, Any]]:
    return [{"key": key, "value": any_value(value)} for key, value in attributes.items()]


def any_value(value: AttributeValue) -> dict[str, Any]:
    """An OTLP ``AnyValue`` in JSON: ``intValue`` as a decimal string (it is an int64)."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        if math.isfinite(value):
            return {"doubleValue": value}
        return {"stringValue": str(value)}  # JSON has no NaN or infinity
    if isinstance(value, str):
        return {"stringValue": value}
    return {"arrayValue": {"values": [any_value(item) for item in value]}}
