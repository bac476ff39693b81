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

from typing import Any

from agenttrace import semconv as sc
from agenttrace.views.exports._spans import (
    AttributeValue,
    Source,
    SpanLog,
    SpanRecord,
    json_text,
    load,
    resource_attributes,
    traces_of,
)

PROCESS_ID = "p1"
"""Every span comes from one process: the one that recorded the session."""


def to_jaeger(source: Source, *, service_name: str = "agenttrace") -> dict[str, Any]:
    """The session's runs as a Jaeger JSON document, one trace per run.

    ``source``: a :class:`~agenttrace.record.session_files.LoadedFile` or a session file path (read
    with :func:`~agenttrace.record.session_files.read_session_file`, which raises
    :class:`~agenttrace.record.session_files.SessionFileError`). An event stream holds no opTree and
    gives ``{"data": []}``. ``service_name`` names the process in Jaeger's service list.
    """
    loaded = load(source)
    process = {
        "serviceName": service_name,
        "tags": [
            _tag(key, value)
            for key, value in resource_attributes(loaded, service_name).items()
            if key != "service.name"
        ],
    }
    data = []
    for trace in traces_of(loaded):
        data.append(
            {
                "traceID": trace.trace_id,
                "spans": [_span(span) for span in trace.spans],
                "processes": {PROCESS_ID: process},
            }
        )
    return {"data": data}


def _span(span: SpanRecord) -> dict[str, Any]:
    start_us = span.start_ns // 1000
    duration_us = 0 if span.end_ns is None else max(0, span.end_ns // 1000 - start_us)
    tags = [_tag(key, value) for key, value in span.attributes.items()]
    # Jaeger's own spelling of an OTel span status, as its OTLP receiver writes it.
    if span.status == sc.STATUS_OK:
        tags.append(_tag("otel.status_code", "OK"))
    elif span.status == sc.STATUS_FAILED:
        tags.append(_tag("otel.status_code", "ERROR"))
        tags.append(_tag("error", True))
        if span.status_message:
            tags.append(_tag("otel.status_description", span.status_message))
    tags.append(_tag("span.kind", "internal"))
    references = []
    if span.parent_span_id is not None:
        references.append(
            {"refType": "CHILD_OF", "traceID": span.trace_id, "spanID": span.parent_span_id}
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
        "processID": PROCESS_ID,
        "warnings": span.warnings or None,
    }


def _log(log: SpanLog) -> dict[str, Any]:
    # An OTel span event's name is the log's ``event`` field in Jaeger.
    fields = [_tag("event", log.name)]
    fields.extend(_tag(key, value) for key, value in log.attributes.items())
    return {"timestamp": log.timestamp_ns // 1000, "fields": fields}


def _tag(key: str, value: AttributeValue) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "type": "bool", "value": value}
    if isinstance(value, int):
        return {"key": key, "type": "int64", "value": value}
    if isinstance(value, float):
        return {"key": key, "type": "float64", "value": value}
    if isinstance(value, str):
        return {"key": key, "type": "string", "value": value}
    # Jaeger tags have no arrays: Jaeger's own OTLP translation writes them as JSON.
    return {"key": key, "type": "string", "value": json_text(value)}
