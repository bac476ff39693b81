"""A session file as Jaeger's own JSON: the document Jaeger UI opens with "Upload JSON".

The shape is the one Jaeger's query API returns, ``{"data": [trace, ...]}``, each trace
``{"traceID", "spans", "processes"}`` and each span ``{"traceID", "spanID", "operationName",
"references", "startTime", "duration", "tags", "logs", "processID", "warnings"}`` with times in
microseconds and typed tags ``{"key", "type", "value"}`` (types ``string``, ``bool``, ``int64``,
``float64``). Sources:

- the structs of that JSON: ``model/json/model.go`` in github.com/jaegertracing/jaeger;
- the UI's upload: ``packages/jaeger-ui/src/utils/readJsonFile.tsx`` (a document without
  ``resourceSpans`` is taken as this format) and ``reducers/trace.ts`` (``loadJsonDone`` maps
  ``payload.data`` through ``model/transform-trace-data.ts``, which drops spans whose
  ``startTime`` is 0 and looks every span's ``processID`` up in ``processes``) in
  github.com/jaegertracing/jaeger-ui.
"""

from __future__ import annotations

import json
import math
from typing import Any

from agenttrace.views.exports._spans import (
    AttributeValue,
    Source,
    SpanLog,
    SpanRecord,
    TraceRecord,
    load,
    nesting_checked,
    traces_of,
)

PROCESS_ID = "p1"
"""The process of a trace's first resource (``p2``, ... for others in the same trace)."""
NO_SERVICE_NAME = "OTLPResourceNoServiceName"
"""Jaeger's service name for a resource without ``service.name``."""


def to_jaeger(source: Source, *, service_name: str = "agenttrace") -> dict[str, Any]:
    """The session's runs as a Jaeger JSON document, one trace per trace id: the spans as Jaeger
    shows them when they arrive over OTLP (Jaeger's own OTLP translation, ``otel.scope.*``,
    ``span.kind``, ``otel.status_*`` and ``error`` tags included).

    ``source``: a :class:`~agenttrace.formats.session.files.LoadedFile` or a session file path (read
    with :func:`~agenttrace.formats.session.files.read_session_file`, which raises
    :class:`~agenttrace.formats.session.files.SessionFileError`). An event stream holds no opTree
    and gives ``{"data": []}``. Each process is the resource its spans recorded (``serviceName``
    from its ``service.name``, the other attributes as tags); ``service_name`` names the process of
    runs recorded without one (older files).
    """
    loaded = load(source)
    with nesting_checked(loaded):
        return {"data": [_trace(trace) for trace in traces_of(loaded, service_name)]}


def _trace(trace: TraceRecord) -> dict[str, Any]:
    """One trace: its spans, and the processes (resources) they came from."""
    processes: dict[str, dict[str, Any]] = {}
    ids: dict[str, str] = {}
    spans = []
    for span in trace.spans:
        key = span.producer.resource_key
        if key not in ids:
            ids[key] = f"p{len(ids) + 1}"
            processes[ids[key]] = _process(span.producer.resource)
        spans.append(_span(span, ids[key]))
    return {"traceID": trace.trace_id, "spans": spans, "processes": processes}


def _process(resource: dict[str, AttributeValue]) -> dict[str, Any]:
    name = resource.get("service.name")
    return {
        "serviceName": name if isinstance(name, str) else NO_SERVICE_NAME,
        "tags": [_tag(key, value) for key, value in resource.items() if key != "service.name"],
    }


def _span(span: SpanRecord, process_id: str) -> dict[str, Any]:
    start_us = span.start_ns // 1000
    duration_us = 0 if span.end_ns is None else max(0, span.end_ns - span.start_ns) // 1000
    # Jaeger's tags for an OTel span, in the order its OTLP translation writes them.
    tags = []
    if span.producer.scope_name:
        tags.append(_tag("otel.scope.name", span.producer.scope_name))
    if span.producer.scope_version:
        tags.append(_tag("otel.scope.version", span.producer.scope_version))
    tags.extend(_tag(key, value) for key, value in span.attributes.items())
    if span.span_kind in ("INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"):
        tags.append(_tag("span.kind", span.span_kind.lower()))
    if span.status == "OK":
        tags.append(_tag("otel.status_code", "OK"))
    elif span.status == "ERROR":
        tags.append(_tag("otel.status_code", "ERROR"))
        tags.append(_tag("error", True))
    if span.status_message:
        tags.append(_tag("otel.status_description", span.status_message))
    references = []
    if span.parent_span_id is not None:
        references.append(
            {"refType": "CHILD_OF", "traceID": span.trace_id, "spanID": span.parent_span_id}
        )
    references.extend(
        {"refType": "FOLLOWS_FROM", "traceID": link.trace_id, "spanID": link.span_id}
        for link in span.links
    )
    return {
        "traceID": span.trace_id,
        "spanID": span.span_id,
        "flags": 1,
        "operationName": span.name,
        "references": references,
        "startTime": start_us,
        "duration": duration_us,
        "tags": tags,
        "logs": [_log(log) for log in span.logs],
        "processID": process_id,
        "warnings": span.warnings or None,
    }


def _log(log: SpanLog) -> dict[str, Any]:
    # An OTel span event's name is the log's ``event`` field in Jaeger, unless an attribute
    # of that name says otherwise.
    fields = [] if "event" in log.attributes else [_tag("event", log.name)]
    fields.extend(_tag(key, value) for key, value in log.attributes.items())
    return {"timestamp": log.timestamp_ns // 1000, "fields": fields}


def _tag(key: str, value: AttributeValue) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "type": "bool", "value": value}
    if isinstance(value, int):
        return {"key": key, "type": "int64", "value": value}
    if isinstance(value, float):
        if not math.isfinite(value):  # JSON has no number for it
            return {"key": key, "type": "string", "value": str(value)}
        return {"key": key, "type": "float64", "value": value}
    if isinstance(value, str):
        return {"key": key, "type": "string", "value": value}
    # Jaeger tags have no arrays: Jaeger's own OTLP translation writes them as compact JSON.
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return {"key": key, "type": "string", "value": text}
