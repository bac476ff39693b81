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

from agenttrace.views.exports._spans import (
    AttributeValue,
    Producer,
    Source,
    SpanLink,
    SpanLog,
    SpanRecord,
    load,
    nesting_checked,
    traces_of,
)

SPAN_KINDS = {
    "UNSPECIFIED": 0,
    "INTERNAL": 1,
    "SERVER": 2,
    "CLIENT": 3,
    "PRODUCER": 4,
    "CONSUMER": 5,
}
"""OTLP's ``SpanKind`` enum, by OpenTelemetry's names for the kinds."""
SPAN_KIND_INTERNAL = SPAN_KINDS["INTERNAL"]
STATUS_CODES = {"UNSET": 0, "OK": 1, "ERROR": 2}
"""OTLP's ``Status.StatusCode`` enum."""
STATUS_CODE_UNSET = STATUS_CODES["UNSET"]
STATUS_CODE_OK = STATUS_CODES["OK"]
STATUS_CODE_ERROR = STATUS_CODES["ERROR"]


def to_otlp_json(source: Source, *, service_name: str = "agenttrace") -> dict[str, Any]:
    """The session's runs as one OTLP/JSON ``ExportTraceServiceRequest``: the spans as they went
    over OTLP live.

    ``source``: a :class:`~agenttrace.formats.session.files.LoadedFile` or a session file path (read
    with :func:`~agenttrace.formats.session.files.read_session_file`, which raises
    :class:`~agenttrace.formats.session.files.SessionFileError`). Each run is under the resource
    and scope it recorded (runs of one process share one ``resourceSpans``); a run recorded
    without them (an older file) gets ``service.name`` = ``service_name`` and the scope
    ``agenttrace``. Each run keeps its own trace id. An event stream holds no opTree and gives
    ``{"resourceSpans": []}``.
    """
    loaded = load(source)
    with nesting_checked(loaded):
        return _request([span for trace in traces_of(loaded, service_name) for span in trace.spans])


def _request(spans: list[SpanRecord]) -> dict[str, Any]:
    """``spans`` under their resources and scopes, as an ``ExportTraceServiceRequest``."""
    # OTLP asks senders not to create empty envelopes: no spans, no resourceSpans.
    resources: dict[str, tuple[Producer, dict[str, tuple[Producer, list[SpanRecord]]]]] = {}
    for span in spans:
        producer = span.producer
        resource_key = producer.resource_key
        scopes = resources.setdefault(resource_key, (producer, {}))[1]
        scopes.setdefault(producer.key, (producer, []))[1].append(span)
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes(resource.resource)},
                "scopeSpans": [
                    {"scope": _scope(producer), "spans": [_span(span) for span in scope_spans]}
                    for producer, scope_spans in scopes.values()
                ],
            }
            for resource, scopes in resources.values()
        ]
    }


def _scope(producer: Producer) -> dict[str, Any]:
    scope: dict[str, Any] = {"name": producer.scope_name}
    if producer.scope_version is not None:
        scope["version"] = producer.scope_version
    return scope


def _span(span: SpanRecord) -> dict[str, Any]:
    # OTLP has no "never ended": such a span ends where it starts and says so in an attribute.
    end_ns = span.end_ns if span.end_ns is not None else span.start_ns
    encoded: dict[str, Any] = {
        "traceId": span.trace_id,
        "spanId": span.span_id,
    }
    if span.parent_span_id is not None:
        encoded["parentSpanId"] = span.parent_span_id
    if span.flags is not None:
        encoded["flags"] = span.flags
    encoded.update(
        {
            "name": span.name,
            "kind": SPAN_KINDS.get(span.span_kind, 0),
            "startTimeUnixNano": str(span.start_ns),
            "endTimeUnixNano": str(max(end_ns, span.start_ns)),
            "attributes": _attributes(span.attributes),
            "events": [_event(log) for log in span.logs],
        }
    )
    if span.links:
        encoded["links"] = [_link(link) for link in span.links]
    encoded.update(span.dropped)
    encoded["status"] = _status(span)
    return encoded


def _status(span: SpanRecord) -> dict[str, Any]:
    status: dict[str, Any] = {"code": STATUS_CODES[span.status or "UNSET"]}
    if span.status == "ERROR" and span.status_message:
        status["message"] = span.status_message
    return status


def _event(log: SpanLog) -> dict[str, Any]:
    return {
        "timeUnixNano": str(log.timestamp_ns),
        "name": log.name,
        "attributes": _attributes(log.attributes),
    }


def _link(link: SpanLink) -> dict[str, Any]:
    encoded: dict[str, Any] = {
        "traceId": link.trace_id,
        "spanId": link.span_id,
        "attributes": _attributes(link.attributes),
    }
    # Unless the file recorded them, whether the linked context was remote is unknown: no flags.
    if link.flags is not None:
        encoded["flags"] = link.flags
    return encoded


def _attributes(attributes: dict[str, AttributeValue]) -> list[dict[str, Any]]:
    return [{"key": key, "value": any_value(value)} for key, value in attributes.items()]


def any_value(value: AttributeValue) -> dict[str, Any]:
    """An OTLP ``AnyValue`` in JSON: ``intValue`` as a decimal string (it is an int64)."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        if math.isnan(value):  # proto3's JSON spelling of the values JSON numbers lack
            return {"doubleValue": "NaN"}
        if math.isinf(value):
            return {"doubleValue": "Infinity" if value > 0 else "-Infinity"}
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    return {"arrayValue": {"values": [any_value(item) for item in value]}}
