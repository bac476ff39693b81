"""Exports are faithful: what ``agenttrace export`` writes from a session file is what went over
OTLP live, field for field.

The cafe demo runs as a user runs it (``examples/cafe.py`` in a subprocess), then is continued
with ``agenttrace resume`` (a second run, from another process with another resource, whose root
links to the first run's), both exporting to a real OTLP receiver (``tests/otlp_receiver.py``,
which decodes the protobuf the OpenTelemetry exporter sent). ``agenttrace export SESSION
--format otlp-json`` of the session file is then read back into the same protobuf messages and
compared with what arrived: resource, scope, and every span's ids, parent, flags, name, kind,
times, status, attributes (with their types), events and links. The Jaeger export is checked
against the same spans as Jaeger's own OTLP translation would show them.

Three differences cannot be made up by the export because the session file does not record
them; each has a strict xfail test below that shows it (see their reasons):

- the order of a span's attributes when one was set again before the span ended (an OTLP
  attribute list is a map with unique keys, so the spans are compared as maps);
- a link's flags (whether the linked context was remote);
- OpenTelemetry's span limits: a span with more than 128 events sends the last 128 and a count
  of the ones it dropped; the file keeps them all.
"""

from __future__ import annotations

import base64
import copy
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from .helpers import child_env, run_demo
from .otlp_receiver import OTLPReceiver, ReceivedSpan

ROOT = Path(__file__).resolve().parent.parent
DEMO_SPANS = 18
RESUMED_SPANS = 12
SMALL_CAP = "48"
"""A payload cap small enough that the demo's payloads and messages are cut on the spans."""

pytestmark = pytest.mark.e2e  # runs whole programs as a user does: make test, not make check


@dataclass
class Session:
    """A session recorded live: its file, and the spans that went over OTLP while it ran."""

    snapshot: Path
    live: list[ReceivedSpan]
    env: dict[str, str]
    """The environment the session ran in (and is exported in)."""


def _record(directory: Path, resume: bool, cwd: Path | None = None, **env: str) -> Session:
    sessions = directory / "sessions"
    receiver = OTLPReceiver().start()
    try:
        settings = dict(
            AGENTTRACE_RAISE_INTERNAL_ERRORS="1",
            AGENTTRACE_BILLING_FILE=str(directory / "accounting.jsonl"),
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.http_endpoint,
            **env,
        )
        run_demo(sessions, cwd, **settings)
        # The demo flushes and shuts down before it exits: everything has arrived.
        assert len(receiver.wait_for(DEMO_SPANS)) == DEMO_SPANS
        (snapshot,) = sessions.glob("*.json.gz")
        expected = DEMO_SPANS
        if resume:
            result = subprocess.run(
                [
                    *(sys.executable, "-m", "agenttrace.cli", "resume", str(snapshot)),
                    *("--agent", "examples.cafe:rebuild", "--prompt", "What will you order?"),
                ],
                env=child_env(**settings),
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=480,
            )
            assert result.returncode == 0, result.stderr
            expected += RESUMED_SPANS
        live = receiver.wait_for(expected)
        assert len(live) == expected
    finally:
        receiver.stop()
    return Session(snapshot, live, settings)


LIMITS_SCRIPT = """
import sys
import agenttrace

agenttrace.init(service_name="limits", sessions_dir=sys.argv[1])


@agenttrace.tool
def busy() -> str:
    for step in range(130):  # OpenTelemetry keeps 128 events on a span by default
        agenttrace.log("VRB", f"step {step}")
    return "done"


@agenttrace.agent
def run() -> str:
    return busy()


run()
agenttrace.shutdown()
"""


def _record_limits(directory: Path) -> Session:
    script = directory / "limits.py"
    script.write_text(LIMITS_SCRIPT, encoding="utf-8")
    sessions = directory / "sessions"
    receiver = OTLPReceiver().start()
    try:
        settings = dict(
            AGENTTRACE_RAISE_INTERNAL_ERRORS="1",
            AGENTTRACE_BILLING_FILE=str(directory / "accounting.jsonl"),
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.http_endpoint,
        )
        result = subprocess.run(
            [sys.executable, str(script), str(sessions)],
            env=child_env(**settings),
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=480,
        )
        assert result.returncode == 0, result.stderr
        live = receiver.wait_for(3)
        assert len(live) == 3  # the run, its turn, the tool call
    finally:
        receiver.stop()
    (snapshot,) = sessions.glob("*.json.gz")
    return Session(snapshot, live, settings)


@pytest.fixture(scope="module")
def resumed(tmp_path_factory: pytest.TempPathFactory) -> Session:
    """The demo and one resumed run of it, recorded live."""
    return _record(tmp_path_factory.mktemp("faithful"), resume=True)


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Session:
    """The demo with a payload cap that cuts its payloads and messages on the spans, run from
    a working directory far longer than the cap (the run's ingress records it), so the test
    does not pass only where the clone's path happens to be short."""
    directory = tmp_path_factory.mktemp("faithful-capped")
    long_cwd = directory / ("a-deliberately-long-working-directory-" * 3) / ("and-deeper-" * 8)
    long_cwd.mkdir(parents=True)
    assert len(str(long_cwd)) > 3 * int(SMALL_CAP)
    return _record(directory, resume=False, cwd=long_cwd, AGENTTRACE_MAX_PAYLOAD_BYTES=SMALL_CAP)


def _export(session: Session, format_: str) -> dict[str, Any]:
    """``agenttrace export`` of the session file, run as a user runs it, in the session's
    environment (the same redaction policy and payload cap)."""
    result = subprocess.run(
        [
            *(sys.executable, "-m", "agenttrace.cli", "export", str(session.snapshot)),
            *("--format", format_),
        ],
        env=child_env(**session.env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


# --- OTLP/JSON back into OTLP's protobuf ----------------------------------------------------------


def _base64(hex_id: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_id)).decode("ascii")


def _parse_otlp_json(document: dict[str, Any]) -> ExportTraceServiceRequest:
    """The OTLP/JSON document as the protobuf message it encodes.

    OTLP/JSON is proto3's JSON mapping but for ids, which are hex where proto3 has base64
    (opentelemetry-proto ``docs/specification.md``, "JSON Protobuf Encoding"): they are
    converted, the rest is parsed by protobuf itself, which refuses any field OTLP does not have.
    """
    converted = copy.deepcopy(document)
    for resource_spans in converted["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = _base64(span[key])
                for link in span.get("links", []):
                    link["traceId"] = _base64(link["traceId"])
                    link["spanId"] = _base64(link["spanId"])
    return json_format.ParseDict(converted, ExportTraceServiceRequest())


@dataclass
class Exported:
    span: Any
    resource: Any
    scope: Any


def _exported_spans(request: ExportTraceServiceRequest) -> dict[str, Exported]:
    spans: dict[str, Exported] = {}
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                assert span.span_id.hex() not in spans
                spans[span.span_id.hex()] = Exported(
                    span, resource_spans.resource, scope_spans.scope
                )
    return spans


def _fields(message: Any) -> dict[str, Any]:
    fields: dict[str, Any] = json_format.MessageToDict(message)
    return fields


def _as_map(span: Any) -> dict[str, Any]:
    """Every field of a protobuf ``Span``, its attributes as a map (OTLP's attribute list has
    unique keys; the file does not keep the order of keys set again, see the xfail below)."""
    fields = _fields(span)
    attributes = fields.pop("attributes", [])
    fields["attributes"] = {item["key"]: item["value"] for item in attributes}
    assert len(fields["attributes"]) == len(attributes)
    return fields


def _without_link_flags(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` without the links' flags, which the file does not record (see the xfail)."""
    for link in fields.get("links", []):
        link.pop("flags", None)
    return fields


def _compare(session: Session) -> Iterator[tuple[ReceivedSpan, Exported]]:
    """Each span that went over OTLP with its exported counterpart; both sets of ids equal."""
    exported = _exported_spans(_parse_otlp_json(_export(session, "otlp-json")))
    live = {span.span_id: span for span in session.live}
    assert len(live) == len(session.live)
    assert exported.keys() == live.keys()
    for span_id, span in live.items():
        yield span, exported[span_id]


def test_otlp_json_export_is_what_went_over_otlp(resumed: Session) -> None:
    services = set()
    for live, exported in _compare(resumed):
        resource_spans, scope_spans = live.envelope or (None, None)
        assert resource_spans is not None and scope_spans is not None
        # The process and the instrumentation that sent it, every field.
        assert _fields(exported.resource) == _fields(resource_spans.resource)
        assert _fields(exported.scope) == _fields(scope_spans.scope)
        services.add(live.resource["service.name"])
        # The span: ids, parent, flags, name, kind, times, status, attributes, events, links.
        assert _without_link_flags(_as_map(exported.span)) == _without_link_flags(
            _as_map(live.proto)
        ), live.name
    # The demo names its service; the resumed run, from the CLI, has agenttrace's default.
    assert services == {"agenttrace-demo", "agenttrace"}


def test_what_the_comparison_covers(resumed: Session) -> None:
    """The demo exercises every kind of field compared above (no field is compared empty)."""
    spans = [live.proto for live in resumed.live]
    assert {span.kind for span in spans} == {1, 3}  # INTERNAL, and CLIENT for the LLM calls
    assert all(span.flags for span in spans)
    assert all(span.end_time_unix_nano > span.start_time_unix_nano for span in spans)
    assert sum(len(span.events) for span in spans) > 20
    assert sum(len(span.links) for span in spans) == 1
    assert sum(1 for span in spans if not span.parent_span_id) == 2  # one root per run
    assert {len(span.trace_id) for span in spans} == {16}
    assert len({span.trace_id for span in spans}) == 2
    values = {
        item.value.WhichOneof("value")
        for span in spans
        for item in [*span.attributes, *(kv for event in span.events for kv in event.attributes)]
    }
    assert values == {"string_value", "int_value", "double_value", "bool_value", "array_value"}
    names = {span.name for span in spans}
    assert {"invoke_agent Agent", "turn 3", "execute_tool discuss", "invoke_agent Jill"} <= names
    # OpenInference's copies are an option (AGENTTRACE_OPENINFERENCE, tests/test_phoenix.py),
    # not on every span; the conventions' names are.
    assert not any("openinference.span.kind" in live.attributes for live in resumed.live)
    assert all("agenttrace.kind" in live.attributes for live in resumed.live)


def test_capped_payloads_are_exported_as_they_were_sent(capped: Session) -> None:
    """With a cap that cuts payloads on the spans, the export cuts nothing further."""
    cut = 0
    for live, exported in _compare(capped):
        assert _as_map(exported.span) == _as_map(live.proto), live.name
        texts = [str(value) for value in live.attributes.values()] + [
            str(value) for _, attributes in live.events for value in attributes.values()
        ]
        cut += sum("…[" in text for text in texts)
    assert cut >= 5  # the cap did cut the demo's payloads, live


# --- what the session file does not record ----------------------------------------------------


def test_recorded_attributes_keep_the_order_they_were_sent_in(resumed: Session) -> None:
    for live, exported in _compare(resumed):
        assert [kv.key for kv in exported.span.attributes] == [
            kv.key for kv in live.proto.attributes
        ], live.name


def test_recorded_links_keep_their_flags(resumed: Session) -> None:
    linked = 0
    for live, exported in _compare(resumed):
        for sent, written in zip(live.proto.links, exported.span.links, strict=True):
            linked += 1
            assert written.flags == sent.flags, live.name
    assert linked == 1


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Session:
    """A tool call that logs 130 lines: more span events than OpenTelemetry sends."""
    return _record_limits(tmp_path_factory.mktemp("faithful-limits"))


def test_spans_within_the_limits_are_exported_as_sent(limited: Session) -> None:
    compared = 0
    for live, exported in _compare(limited):
        if live.name != "execute_tool busy":
            compared += 1
            assert _as_map(exported.span) == _as_map(live.proto), live.name
    assert compared == 2


@pytest.mark.xfail(
    strict=True,
    reason=(
        "the span sent the last 128 of its 130 events with droppedEventsCount 2 (the SDK's "
        "default SpanLimits, OTEL_SPAN_EVENT_COUNT_LIMIT; the same holds for attributes, links "
        "and attribute value lengths), but agenttrace/recorder/optree_builder.py _add_span_event "
        "and _complete record every event and attribute the scope reported, with no limit and no "
        "dropped counts"
    ),
)
def test_recorded_spans_keep_the_span_limits(limited: Session) -> None:
    (busy,) = [live for live in limited.live if live.name == "execute_tool busy"]
    assert (len(busy.events), busy.dropped) == (128, (0, 2, 0))
    for live, exported in _compare(limited):
        if live is busy:
            assert _as_map(exported.span) == _as_map(live.proto)


# --- Jaeger -----------------------------------------------------------------------------------


def _jaeger_tag(key: str, value: Any) -> dict[str, Any]:
    """A tag as Jaeger's OTLP translation writes an attribute (arrays as compact JSON)."""
    if isinstance(value, tuple):
        text = json.dumps(list(value), ensure_ascii=False, separators=(",", ":"))
        return {"key": key, "type": "string", "value": text}
    kind = {bool: "bool", int: "int64", float: "float64", str: "string"}[type(value)]
    return {"key": key, "type": kind, "value": value}


def test_jaeger_export_shows_what_went_over_otlp(resumed: Session) -> None:
    document = _export(resumed, "jaeger")
    traces = {trace["traceID"]: trace for trace in document["data"]}
    assert traces.keys() == {span.trace_id for span in resumed.live}
    jaeger = {
        span["spanID"]: (span, trace) for trace in document["data"] for span in trace["spans"]
    }
    assert jaeger.keys() == {span.span_id for span in resumed.live}
    for live in resumed.live:
        span, trace = jaeger[live.span_id]
        assert span["traceID"] == live.trace_id
        assert span["operationName"] == live.name
        # Microseconds, as Jaeger's translation truncates them.
        assert span["startTime"] == live.start_ns // 1000
        assert span["duration"] == (live.end_ns - live.start_ns) // 1000
        references = []
        if live.parent_span_id:
            references.append(
                {"refType": "CHILD_OF", "traceID": live.trace_id, "spanID": live.parent_span_id}
            )
        references.extend(
            {"refType": "FOLLOWS_FROM", "traceID": trace_id, "spanID": span_id}
            for trace_id, span_id, _ in live.links
        )
        assert span["references"] == references
        # The service Jaeger lists is the resource's service.name; the rest are process tags.
        process = trace["processes"][span["processID"]]
        assert process["serviceName"] == live.resource["service.name"]
        assert process["tags"] == [
            _jaeger_tag(key, value) for key, value in live.resource.items() if key != "service.name"
        ]
        # Tags: the scope, the attributes with their types, the kind; no status when unset.
        name, version = live.scope
        expected = [
            _jaeger_tag("otel.scope.name", name),
            _jaeger_tag("otel.scope.version", version),
        ]
        expected.extend(
            sorted(
                (_jaeger_tag(key, value) for key, value in live.attributes.items()),
                key=lambda tag: str(tag["key"]),
            )
        )
        # The span's kind as sent (OTLP: INTERNAL 1, CLIENT 3), in Jaeger's words.
        expected.append(_jaeger_tag("span.kind", {1: "internal", 3: "client"}[live.proto.kind]))
        assert live.status_code == 0
        tags = span["tags"]
        attributes = sorted(tags[2:-1], key=lambda tag: str(tag["key"]))
        assert [*tags[:2], *attributes, tags[-1]] == expected, live.name
        logs = [
            {
                "timestamp": time_ns // 1000,
                "fields": [
                    _jaeger_tag("event", event_name),
                    *(_jaeger_tag(key, value) for key, value in attributes_.items()),
                ],
            }
            for event_name, time_ns, attributes_ in live.timed_events
        ]
        assert span["logs"] == logs, live.name
    services = {
        process["serviceName"]
        for trace in document["data"]
        for process in trace["processes"].values()
    }
    assert services == {"agenttrace-demo", "agenttrace"}
