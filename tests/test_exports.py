"""``agenttrace.views.exports``: a real session (the cafe demo, run as a user runs it) exported to
Jaeger JSON, OTLP/JSON and a self-contained HTML page, the page checked in headless Chromium."""

from __future__ import annotations

import base64
import copy
import hashlib
import html
import json
import re
import struct
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

import pytest

import agenttrace
from agenttrace.formats.session.files import LoadedFile, read_session_file, snapshot_path
from agenttrace.views.exports import to_html, to_jaeger, to_otlp_json
from agenttrace.views.exports.html import (
    DATA_ELEMENT_ID,
    PAGE_DIRECTORY,
    SCRIPT_FILE,
    STYLE_FILE,
    TEMPLATE_FILE,
)

from .chromium import CHROMIUM, HEADLESS, MISSING
from .conftest import Traced
from .helpers import child_env, record_demo_here, run_chain, subtrees

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = "</script><script>document.documentElement.setAttribute('data-pwned','1')</script><!--"
HOSTILE_TAG = "<img src=x onerror=\"document.documentElement.setAttribute('data-pwned','2')\">"


@dataclass
class Demo:
    snapshot: Path
    stream: Path
    loaded: LoadedFile


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    """The cafe demo's session, recorded once for the module."""
    directory = tmp_path_factory.mktemp("exports")
    snapshot, stream = record_demo_here(directory)
    return Demo(snapshot, stream, read_session_file(snapshot))


@pytest.fixture
def broken(demo: Demo) -> LoadedFile:
    """The demo's session with a failed tool call (1.2), a failed run, and a last turn that
    never ended (the process stopped during 4.1), each recorded in the tree and on the node's
    span as agenttrace records them."""
    loaded = copy.deepcopy(demo.loaded)
    run = loaded.runs[0]
    _fail(run, "RuntimeError: the cafe closed")
    run["success"] = False
    op = run["turns"][0]["ops"][1]
    _fail(op, "ValueError: no such agent")
    op["status"] = "failed"
    op["attributes"]["errorType"] = "ValueError"
    op["span"]["attributes"]["error.type"] = "ValueError"
    last_turn = run["turns"][3]
    del last_turn["endedAt"]
    for key in ("endedAt", "status", "latencyMs"):
        del last_turn["ops"][0][key]
    for node in (last_turn, last_turn["ops"][0]):
        span = node["span"]
        for key in ("endTimeUnixNano", "status"):
            del span[key]
        for key in ("agenttrace.status", "agenttrace.latency_ms"):  # set as a span ends
            span["attributes"].pop(key, None)
    return loaded


def _fail(node: dict[str, Any], error: str) -> None:
    node["error"] = error
    node["span"]["status"] = {"code": "ERROR", "message": error}
    node["span"]["attributes"]["agenttrace.status"] = "failed"


def _without_spans(loaded: LoadedFile) -> LoadedFile:
    """``loaded`` as a session file written before nodes kept their span (and runs their
    resource and scope)."""
    old = copy.deepcopy(loaded)

    def strip(node: dict[str, Any]) -> None:
        for key in ("span", "resource", "scope"):
            node.pop(key, None)
        for child in subtrees(node):
            strip(child)

    for run in old.runs:
        strip(run)
    return old


@pytest.fixture
def hostile(demo: Demo) -> LoadedFile:
    """The demo's session with markup where text belongs: in names, errors, logs, dialog."""
    loaded = copy.deepcopy(demo.loaded)
    run = loaded.runs[0]
    run["agentName"] = HOSTILE
    run["error"] = HOSTILE_TAG
    op = run["turns"][0]["ops"][1]
    op["name"] = HOSTILE
    op["logs"] = [{"ts": op["startedAt"], "level": "WRN", "message": HOSTILE_TAG, "path": "1.2"}]
    for event in loaded.events:
        if event.get("content") == "Hi, I'm Jack. *extends hand*":
            event["content"] = f"Hi, I'm Jack. {HOSTILE} {HOSTILE_TAG}"
    return loaded


def _spans_by_name(spans: list[dict[str, Any]], key: str) -> dict[str, dict[str, Any]]:
    named: dict[str, dict[str, Any]] = {}
    for span in spans:
        named.setdefault(span[key], span)
    return named


# --- Jaeger ---------------------------------------------------------------------------------------


def _jaeger_tags(span: dict[str, Any]) -> dict[str, Any]:
    return {tag["key"]: tag["value"] for tag in span["tags"]}


def _check_jaeger_document(document: dict[str, Any]) -> None:
    """What Jaeger UI's upload needs (utils/readJsonFile.tsx, model/transform-trace-data.ts):
    a ``data`` list of traces, spans with a non-zero start, a process for each processID, and
    parents (a first CHILD_OF reference) in the same trace; links are FOLLOWS_FROM after it."""
    json.dumps(document, allow_nan=False)
    assert "resourceSpans" not in document  # that would be read as OTLP
    for trace in document["data"]:
        spans = trace["spans"]
        ids = [span["spanID"] for span in spans]
        assert len(set(ids)) == len(ids)
        roots = 0
        for span in spans:
            assert span["traceID"] == trace["traceID"]
            assert re.fullmatch(r"[0-9a-f]{16}", span["spanID"])
            assert isinstance(span["startTime"], int) and span["startTime"] > 0
            assert isinstance(span["duration"], int) and span["duration"] >= 0
            assert span["processID"] in trace["processes"]
            assert trace["processes"][span["processID"]]["serviceName"]
            for tag in span["tags"]:
                assert tag["type"] in {"string", "bool", "int64", "float64"}
                expected = {"string": str, "bool": bool, "int64": int, "float64": float}
                assert isinstance(tag["value"], expected[tag["type"]]), tag
            for log in span["logs"]:
                assert isinstance(log["timestamp"], int) and log["timestamp"] > 0
                assert log["fields"][0]["key"] == "event"
            references = span["references"]
            if not references or references[0]["refType"] != "CHILD_OF":
                roots += 1
            for index, reference in enumerate(references):
                if reference["refType"] == "CHILD_OF":
                    assert index == 0
                    assert reference["traceID"] == trace["traceID"]
                    assert reference["spanID"] in ids
                else:
                    assert reference["refType"] == "FOLLOWS_FROM"
                    assert re.fullmatch(r"[0-9a-f]{16}", reference["spanID"])
        assert roots == 1


def test_jaeger_one_trace_per_run_with_the_demo_nesting(demo: Demo) -> None:
    document = to_jaeger(demo.loaded)
    _check_jaeger_document(document)
    assert len(document["data"]) == len(demo.loaded.runs) == 1
    (trace,) = document["data"]
    assert trace["traceID"] == demo.loaded.runs[0]["traceId"]
    # Jaeger lists the spans under the service they were sent as (the old export: agenttrace).
    assert trace["processes"]["p1"]["serviceName"] == "agenttrace-demo"
    spans = trace["spans"]
    assert len(spans) == 18
    by_id = {span["spanID"]: span for span in spans}
    by_name = _spans_by_name(spans, "operationName")

    def parent(span: dict[str, Any]) -> dict[str, Any] | None:
        references = span["references"]
        return by_id[references[0]["spanID"]] if references else None

    jill = by_name["invoke_agent Jill"]
    chain = [jill]
    while (up := parent(chain[-1])) is not None:
        chain.append(up)
    assert [span["operationName"] for span in chain] == [
        "invoke_agent Jill",
        "execute_tool discuss",
        "turn 3",
        "invoke_agent Agent",
    ]
    assert [_jaeger_tags(span)["agenttrace.path"] for span in chain] == ["3.2:2", "3.2", "3", "0"]
    assert all("agenttrace.path" in _jaeger_tags(span) for span in spans)
    # The root span is the run's root session node; turns and ops keep their tree ids.
    assert chain[-1]["spanID"] == demo.loaded.runs[0]["spanId"]
    assert chain[2]["spanID"] == demo.loaded.runs[0]["turns"][2]["id"]
    assert chain[1]["spanID"] == demo.loaded.runs[0]["turns"][2]["ops"][1]["opId"]
    names = {span["operationName"] for span in spans}
    assert {"chat claude-sonnet-4-5-20250929", "execute_tool task", "turn 4"} <= names

    llm = next(s for s in spans if _jaeger_tags(s)["agenttrace.path"] == "1.1")
    tags = _jaeger_tags(llm)
    assert tags["agenttrace.kind"] == "llm"
    assert tags["gen_ai.usage.input_tokens"] == 162
    assert tags["gen_ai.usage.output_tokens"] == 28
    assert tags["agenttrace.cost.usd"] == pytest.approx(0.000906)
    assert "agenttrace.status" not in tags  # the span's status says it (no error tag)
    assert tags["agenttrace.txn.id"] == demo.loaded.runs[0]["txnId"]
    assert "error" not in tags
    # Sub-millisecond tools keep their duration (from the latency, not whole milliseconds).
    task = next(s for s in spans if _jaeger_tags(s)["agenttrace.path"] == "1.2")
    latency_us = demo.loaded.runs[0]["turns"][0]["ops"][1]["latencyMs"] * 1000
    assert abs(task["duration"] - latency_us) <= 1  # whole microseconds
    assert task["duration"] > 0
    # The children of a span lie within it (to the millisecond the tree keeps).
    for span in spans:
        up = parent(span)
        if up is not None:
            assert span["startTime"] >= up["startTime"]
            assert span["startTime"] + span["duration"] <= up["startTime"] + up["duration"] + 1000

    # What was said is on the span that said it.
    jack_llm = next(s for s in spans if _jaeger_tags(s)["agenttrace.path"] == "3.2.1.1")
    said = [{f["key"]: f["value"] for f in log["fields"]} for log in jack_llm["logs"]]
    assert any(
        f["event"] == "agenttrace.event"
        and f.get("agenttrace.event.content") == "Hi, I'm Jack. *extends hand*"
        for f in said
    )


RECORDED_OR_REBUILT = pytest.mark.parametrize(
    "recorded", [True, False], ids=["recorded spans", "spans rebuilt from an older file"]
)


@RECORDED_OR_REBUILT
def test_jaeger_failures_and_unfinished_spans(broken: LoadedFile, recorded: bool) -> None:
    document = to_jaeger(broken if recorded else _without_spans(broken))
    _check_jaeger_document(document)
    spans = document["data"][0]["spans"]
    by_path = {_jaeger_tags(span)["agenttrace.path"]: span for span in spans}
    failed = _jaeger_tags(by_path["1.2"])
    assert failed["error"] is True
    assert failed["agenttrace.status"] == "failed"
    assert failed["otel.status_code"] == "ERROR"
    assert failed["otel.status_description"] == "ValueError: no such agent"
    assert failed["error.type"] == "ValueError"
    assert _jaeger_tags(by_path["0"])["error"] is True
    for path in ("4", "4.1"):
        span = by_path[path]
        assert span["duration"] == 0
        assert any("unfinished" in warning for warning in span["warnings"])
        assert "error" not in _jaeger_tags(span)
    assert by_path["3.2"]["warnings"] is None


def test_runs_with_their_own_trace_ids_are_separate_traces(demo: Demo) -> None:
    loaded = copy.deepcopy(demo.loaded)
    second = copy.deepcopy(loaded.runs[0])
    _retrace(second, "0123456789abcdef0123456789abcdef")
    loaded.runs.append(second)
    jaeger = to_jaeger(loaded)
    _check_jaeger_document(jaeger)
    assert [t["traceID"] for t in jaeger["data"]] == [
        demo.loaded.runs[0]["traceId"],
        "0123456789abcdef0123456789abcdef",
    ]
    assert [len(t["spans"]) for t in jaeger["data"]] == [18, 18]
    otlp = to_otlp_json(loaded)
    spans = otlp["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert len({span["traceId"] for span in spans}) == 2


def _retrace(node: dict[str, Any], trace_id: str) -> None:
    """Put ``node`` and every node under it in the trace ``trace_id``, as another run is."""
    if "traceId" in node:
        node["traceId"] = trace_id
    node["span"]["traceId"] = trace_id
    for child in subtrees(node):
        _retrace(child, trace_id)


def test_an_event_stream_has_no_spans_to_export(demo: Demo) -> None:
    assert to_jaeger(demo.stream) == {"data": []}
    assert to_otlp_json(demo.stream) == {"resourceSpans": []}
    data = json.loads(_data_script(to_html(demo.stream)))
    assert data["runs"] == []
    assert data["fileKind"] == "stream"
    assert "Hi, I'm Jack. *extends hand*" in [message["content"] for message in data["dialog"]]


def test_exports_take_a_path_too(demo: Demo) -> None:
    assert to_jaeger(demo.snapshot) == to_jaeger(demo.loaded)
    assert to_otlp_json(str(demo.snapshot)) == to_otlp_json(demo.loaded)


# --- OTLP/JSON ------------------------------------------------------------------------------------


_VALUE_KEYS = {"stringValue", "intValue", "doubleValue", "boolValue", "arrayValue"}


def _otlp_attributes(items: list[dict[str, Any]]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for item in items:
        (kind,) = item["value"].keys()
        assert kind in _VALUE_KEYS
        value = item["value"][kind]
        if kind == "intValue":
            assert isinstance(value, str) and re.fullmatch(r"-?\d+", value), item
            value = int(value)
        elif kind == "doubleValue":
            # proto3's JSON writes the doubles JSON has no number for as these strings.
            assert isinstance(value, float) or value in ("NaN", "Infinity", "-Infinity"), item
        elif kind == "boolValue":
            assert isinstance(value, bool)
        elif kind == "stringValue":
            assert isinstance(value, str)
        values[item["key"]] = value
    return values


def _otlp_spans(
    document: dict[str, Any], service_name: str = "agenttrace-demo"
) -> list[dict[str, Any]]:
    json.dumps(document, allow_nan=False)
    (resource_spans,) = document["resourceSpans"]
    resource = _otlp_attributes(resource_spans["resource"]["attributes"])
    # The resource the demo's spans were sent with (files without it: the exporter's default).
    assert resource["service.name"] == service_name
    (scope_spans,) = resource_spans["scopeSpans"]
    assert scope_spans["scope"]["name"] == "agenttrace"
    spans: list[dict[str, Any]] = scope_spans["spans"]
    for span in spans:
        assert re.fullmatch(r"[0-9a-f]{32}", span["traceId"]), span["traceId"]
        assert re.fullmatch(r"[0-9a-f]{16}", span["spanId"]), span["spanId"]
        if "parentSpanId" in span:
            assert re.fullmatch(r"[0-9a-f]{16}", span["parentSpanId"])
        assert span["kind"] in range(6)  # SPAN_KIND_UNSPECIFIED .. SPAN_KIND_CONSUMER
        assert re.fullmatch(r"\d+", span["startTimeUnixNano"])
        assert re.fullmatch(r"\d+", span["endTimeUnixNano"])
        assert int(span["endTimeUnixNano"]) >= int(span["startTimeUnixNano"]) > 0
        assert span["status"]["code"] in (0, 1, 2)
        _otlp_attributes(span["attributes"])
        for event in span["events"]:
            assert re.fullmatch(r"\d+", event["timeUnixNano"])
            _otlp_attributes(event["attributes"])
    return spans


def test_otlp_json_structure_ids_and_nesting(demo: Demo) -> None:
    spans = _otlp_spans(to_otlp_json(demo.loaded))
    assert len(spans) == 18
    # As sent: LLM attempts are CLIENT (3), agents, turns and tools INTERNAL (1).
    assert all(span["kind"] == (3 if span["name"].startswith("chat ") else 1) for span in spans)
    assert {span["traceId"] for span in spans} == {demo.loaded.runs[0]["traceId"]}
    by_id = {span["spanId"]: span for span in spans}
    assert len(by_id) == 18
    roots = [span for span in spans if "parentSpanId" not in span]
    assert [root["name"] for root in roots] == ["invoke_agent Agent"]
    assert all(span["parentSpanId"] in by_id for span in spans if "parentSpanId" in span)

    chain = [next(span for span in spans if span["name"] == "invoke_agent Jill")]
    while "parentSpanId" in chain[-1]:
        chain.append(by_id[chain[-1]["parentSpanId"]])
    assert [span["name"] for span in chain] == [
        "invoke_agent Jill",
        "execute_tool discuss",
        "turn 3",
        "invoke_agent Agent",
    ]
    paths = [_otlp_attributes(span["attributes"])["agenttrace.path"] for span in chain]
    assert paths == ["3.2:2", "3.2", "3", "0"]

    llm = next(s for s in spans if _otlp_attributes(s["attributes"])["agenttrace.path"] == "1.1")
    attributes = _otlp_attributes(llm["attributes"])
    assert attributes["gen_ai.usage.input_tokens"] == 162
    assert attributes["agenttrace.cost.usd"] == pytest.approx(0.000906)
    # As sent: agenttrace leaves a span that succeeded UNSET (the old export said OK).
    assert llm["status"] == {"code": 0}
    turn = next(s for s in spans if s["name"] == "turn 1")
    assert turn["status"] == {"code": 0}

    # The same spans and parents as the Jaeger export.
    jaeger = to_jaeger(demo.loaded)["data"][0]["spans"]
    assert {
        (s["spanID"], s["references"][0]["spanID"] if s["references"] else None, s["operationName"])
        for s in jaeger
    } == {(s["spanId"], s.get("parentSpanId"), s["name"]) for s in spans}


@RECORDED_OR_REBUILT
def test_otlp_json_failures_and_unfinished_spans(broken: LoadedFile, recorded: bool) -> None:
    loaded = broken if recorded else _without_spans(broken)
    spans = _otlp_spans(to_otlp_json(loaded), "agenttrace-demo" if recorded else "agenttrace")
    by_path = {_otlp_attributes(s["attributes"])["agenttrace.path"]: s for s in spans}
    assert by_path["1.2"]["status"] == {"code": 2, "message": "ValueError: no such agent"}
    assert by_path["0"]["status"] == {"code": 2, "message": "RuntimeError: the cafe closed"}
    unfinished = by_path["4.1"]
    assert unfinished["endTimeUnixNano"] == unfinished["startTimeUnixNano"]
    assert unfinished["status"] == {"code": 0}
    assert _otlp_attributes(unfinished["attributes"])["agenttrace.unfinished"] is True


def _span_tree(document: dict[str, Any]) -> set[tuple[str, str | None, str]]:
    return {
        (span["spanId"], span.get("parentSpanId"), span["name"])
        for resource_spans in document["resourceSpans"]
        for scope_spans in resource_spans["scopeSpans"]
        for span in scope_spans["spans"]
    }


def test_files_without_recorded_spans_are_rebuilt_from_the_tree(demo: Demo) -> None:
    """A session file written before nodes kept their span: the spans come from the tree,
    with the same ids, names and nesting, under a resource the exporter names."""
    old = _without_spans(demo.loaded)
    document = to_otlp_json(old, service_name="cafe")
    spans = _otlp_spans(document, "cafe")
    resource = _otlp_attributes(document["resourceSpans"][0]["resource"]["attributes"])
    assert resource == {"service.name": "cafe", "agenttrace.session.id": old.session_id}
    assert _span_tree(document) == _span_tree(to_otlp_json(demo.loaded))
    assert all(span["status"] == {"code": 0} for span in spans)
    llm = next(s for s in spans if _otlp_attributes(s["attributes"])["agenttrace.path"] == "1.1")
    assert _otlp_attributes(llm["attributes"])["gen_ai.usage.input_tokens"] == 162
    jaeger = to_jaeger(old, service_name="cafe")
    _check_jaeger_document(jaeger)
    (trace,) = jaeger["data"]
    assert trace["processes"] == {
        "p1": {
            "serviceName": "cafe",
            "tags": [{"key": "agenttrace.session.id", "type": "string", "value": old.session_id}],
        }
    }


@pytest.fixture
def chain(traced: Traced, tmp_path: Path) -> LoadedFile:
    """A session whose run hosts sub-agents nested three deep, one per op: each under its op's
    ``childSession`` (no ``childSessions``)."""
    agenttrace.new_session("chain")
    run_chain(3)
    traced.handle.force_flush()
    return read_session_file(tmp_path / "sessions" / "chain.json.gz")


def _parents(node: dict[str, Any], parent: str | None = None) -> Iterator[tuple[str, str | None]]:
    """(the node's path, its parent's) for ``node`` and every node under it."""
    yield node["path"], parent
    for child in subtrees(node):
        yield from _parents(child, node["path"])


def test_a_lone_sub_agent_run_is_exported_under_its_op(chain: LoadedFile) -> None:
    """Every node of a chain of ``childSession``s becomes a span under its parent's, as
    recorded and as rebuilt from the tree for a file without spans."""
    (run,) = chain.runs
    parents = dict(_parents(run))
    expected, session, turn = {"0": None}, "0", "1"
    for level in range(4):  # each agent: a turn with its note, and (but the deepest) delegate
        expected[turn], expected[f"{turn}.1"] = session, turn
        if level < 3:
            op = f"{turn}.2"
            session = f"{op}:1"
            expected[op], expected[session], turn = turn, op, f"{op}.1"
    assert parents == expected
    assert "childSessions" not in json.dumps(chain.runs)
    for loaded in (chain, _without_spans(chain)):
        by_id = {
            span["spanId"]: span
            for resource_spans in to_otlp_json(loaded)["resourceSpans"]
            for scope_spans in resource_spans["scopeSpans"]
            for span in scope_spans["spans"]
        }
        assert len(by_id) == len(parents)
        path_of = {
            span_id: _otlp_attributes(span["attributes"])["agenttrace.path"]
            for span_id, span in by_id.items()
        }
        exported = {
            path_of[span_id]: path_of.get(span.get("parentSpanId", ""))
            for span_id, span in by_id.items()
        }
        assert exported == parents
        jaeger = to_jaeger(loaded)
        _check_jaeger_document(jaeger)
        assert len(jaeger["data"][0]["spans"]) == len(parents)


def test_recorded_span_fields_are_exported_as_they_are(demo: Demo) -> None:
    """Whatever a span recorded goes out as it is: its kind, status, typed attributes, events
    in their order, links (with their flags when recorded)."""
    loaded = copy.deepcopy(demo.loaded)
    run = loaded.runs[0]
    op = run["turns"][0]["ops"][0]
    span = op["span"]
    span["kind"] = "CLIENT"
    span["status"] = {"code": "OK"}
    span["droppedEventsCount"] = 2  # what the SDK's span limits dropped, if recorded
    span["attributes"].update(
        {"x.ints": [1, 2], "x.floats": [0.5], "x.flags": [True], "x.nan": float("nan")}
    )
    span["events"] = [
        {"name": "second", "timeUnixNano": span["startTimeUnixNano"] + 2, "attributes": {}},
        {"name": "first", "timeUnixNano": span["startTimeUnixNano"] + 1, "attributes": {"n": 1}},
    ]
    previous = "0123456789abcdef0123456789abcdef"
    run["span"]["links"] = [{"traceId": previous, "spanId": "0123456789abcdef", "flags": 768}]
    run["span"]["flags"] = 257

    otlp = {s["spanId"]: s for s in _otlp_spans(to_otlp_json(loaded))}
    chat = otlp[span["spanId"]]
    assert chat["kind"] == 3  # SPAN_KIND_CLIENT
    assert chat["droppedEventsCount"] == 2 and "droppedAttributesCount" not in chat
    assert chat["status"] == {"code": 1}
    attributes = {a["key"]: a["value"] for a in chat["attributes"]}
    assert attributes["x.ints"] == {
        "arrayValue": {"values": [{"intValue": "1"}, {"intValue": "2"}]}
    }
    assert attributes["x.floats"] == {"arrayValue": {"values": [{"doubleValue": 0.5}]}}
    assert attributes["x.flags"] == {"arrayValue": {"values": [{"boolValue": True}]}}
    assert attributes["x.nan"] == {"doubleValue": "NaN"}  # proto3 JSON's spelling
    # The recorded events in their order; the op's canonical event (the reply), which follows
    # from the session's events, merged in by its time.
    names = [e["name"] for e in chat["events"]]
    assert [n for n in names if n != "agenttrace.event"] == ["second", "first"]
    assert names.count("agenttrace.event") == 1
    assert chat["flags"] == 0x100  # a parent in the file: not remote
    root = otlp[run["spanId"]]
    assert root["flags"] == 257
    assert root["links"] == [
        {"traceId": previous, "spanId": "0123456789abcdef", "attributes": [], "flags": 768}
    ]

    jaeger = to_jaeger(loaded)
    _check_jaeger_document(jaeger)
    by_id = {s["spanID"]: s for s in jaeger["data"][0]["spans"]}
    tags = _jaeger_tags(by_id[span["spanId"]])
    assert tags["span.kind"] == "client"
    assert tags["otel.status_code"] == "OK"
    assert tags["x.ints"] == "[1,2]"  # arrays as Jaeger's OTLP translation writes them
    assert tags["x.nan"] == "nan"
    assert tags["otel.scope.name"] == "agenttrace"
    logged = [log["fields"][0]["value"] for log in by_id[span["spanId"]]["logs"]]
    assert [n for n in logged if n != "agenttrace.event"] == ["second", "first"]
    assert by_id[run["spanId"]]["references"] == [
        {"refType": "FOLLOWS_FROM", "traceID": previous, "spanID": "0123456789abcdef"}
    ]


def test_runs_from_other_processes_keep_their_resources(demo: Demo) -> None:
    loaded = copy.deepcopy(demo.loaded)
    second = copy.deepcopy(loaded.runs[0])
    _retrace(second, "0123456789abcdef0123456789abcdef")
    second["resource"]["attributes"]["service.name"] = "elsewhere"
    loaded.runs.append(second)
    otlp = to_otlp_json(loaded)
    services = [
        _otlp_attributes(resource_spans["resource"]["attributes"])["service.name"]
        for resource_spans in otlp["resourceSpans"]
    ]
    assert services == ["agenttrace-demo", "elsewhere"]
    assert [len(r["scopeSpans"][0]["spans"]) for r in otlp["resourceSpans"]] == [18, 18]
    jaeger = to_jaeger(loaded)
    _check_jaeger_document(jaeger)
    assert [t["processes"]["p1"]["serviceName"] for t in jaeger["data"]] == [
        "agenttrace-demo",
        "elsewhere",
    ]
    process_tags = {tag["key"] for tag in jaeger["data"][0]["processes"]["p1"]["tags"]}
    assert {"telemetry.sdk.name", "service.instance.id"} <= process_tags


# --- HTML -----------------------------------------------------------------------------------------

_REMOTE = re.compile(
    r"""(?:\b(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:[a-z][a-z0-9+.-]*:)?//)"""
    r"""|url\(\s*["']?\s*(?:[a-z][a-z0-9+.-]*:)?//|@import""",
    re.IGNORECASE,
)


def _data_script(page: str) -> str:
    match = re.search(
        rf'<script type="application/json" id="{DATA_ELEMENT_ID}">(.*?)</script>', page, re.S
    )
    assert match is not None
    return match.group(1)


def test_html_is_self_contained(demo: Demo) -> None:
    page = to_html(demo.loaded)
    assert page.startswith("<!DOCTYPE html>")
    assert f"<title>agenttrace session {demo.loaded.session_id}</title>" in page
    assert "http://" not in page and "https://" not in page
    assert not _REMOTE.search(page)
    assert "default-src 'none'" in page
    assert page.count("<script") == 2  # the data and the code, nothing else
    data = json.loads(_data_script(page))
    assert data["sessionId"] == demo.loaded.session_id
    assert data["runs"] == demo.loaded.runs
    assert [m["speaker"] for m in data["dialog"]][-2:] == ["Jack", "Jill"]
    assert {agent["name"] for agent in data["agents"]} >= {"Jack", "Jill"}


def test_the_root_agent_has_one_name_in_every_view(demo: Demo) -> None:
    """The cafe's root agent is created without a name; its runs carry ``Agent`` (the class's
    name), which the tree and ``stats`` show. The HTML page, ``perspective`` and ``dialog``
    name it so too, not by its id."""
    from click.testing import CliRunner

    from agenttrace.cli import main
    from agenttrace.formats.session.totals import session_stats
    from agenttrace.views.tree import render_optree

    run = demo.loaded.runs[0]
    root, name = run["agentId"], run["agentName"]
    assert (root, name) == ("agent_001", "Agent")
    assert any(f"session Agent [{root}]" in line for line in render_optree(demo.loaded.runs))
    by_agent = session_stats(demo.loaded.runs)["by_agent"]
    assert {row["agent_id"]: row["name"] for row in by_agent}[root] == "Agent"
    data = json.loads(_data_script(to_html(demo.loaded)))
    assert {agent["id"]: agent["name"] for agent in data["agents"]}[root] == "Agent"
    assert agenttrace.SessionViewer(demo.snapshot).list_agents()[root] == "Agent"
    runner = CliRunner()
    by_name = runner.invoke(main, ["perspective", str(demo.snapshot), "Agent"])
    by_id = runner.invoke(main, ["perspective", str(demo.snapshot), root])
    assert by_name.exit_code == 0, by_name.output
    assert by_name.output == by_id.output and "[Heard]:" in by_name.output
    unknown = runner.invoke(main, ["perspective", str(demo.snapshot), "Nobody"])
    assert f"Agent ({root})" in unknown.output
    # An event stream alone has no runs: its root agent is known by its id only.
    assert agenttrace.SessionViewer(demo.stream).list_agents()[root] == root


def test_a_session_viewer_takes_a_session_id_as_the_command_line_does(
    demo: Demo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``SessionViewer("<id>")`` finds the session in the sessions directory by the command
    line's rules (``find_session``) and reads it as ``agenttrace dialog <id>`` does: both its
    files, so the root agent has its runs' name; a path stays a path, an unknown id is refused
    with the command line's one line."""
    from click.testing import CliRunner

    from agenttrace.cli import main
    from agenttrace.formats.session.files import SessionFileError
    from agenttrace.views.viewer import format_dialog

    session_id = demo.snapshot.name.removesuffix(".json.gz")
    monkeypatch.setenv("AGENTTRACE_SESSIONS_DIR", str(demo.snapshot.parent))
    monkeypatch.chdir(tmp_path)  # no file of that name here: an id
    viewer = agenttrace.SessionViewer(session_id)
    root = demo.loaded.runs[0]["agentId"]
    assert viewer.list_agents()[root] == "Agent"  # the session file's runs were read too
    shown = CliRunner().invoke(main, ["dialog", session_id])
    assert shown.exit_code == 0, shown.output
    assert format_dialog(viewer.extract_dialog(viewer.list_agents())) + "\n" == shown.output
    assert "(Agent's tool task returned) Created subagent: Jack" in shown.output.splitlines()
    # A string written as a path is that file, read alone, as before.
    assert agenttrace.SessionViewer(str(demo.stream)).list_agents()[root] == root
    unknown = CliRunner().invoke(main, ["dialog", "nosuchsession"])
    with pytest.raises(SessionFileError) as refused:
        agenttrace.SessionViewer("nosuchsession")
    assert str(refused.value) == f"no session 'nosuchsession' in {demo.snapshot.parent}"
    assert unknown.output == f"agenttrace: error: {refused.value}\n"


def test_html_data_survives_hostile_content(hostile: LoadedFile) -> None:
    page = to_html(hostile)
    text = _data_script(page)
    assert "</script" not in text.lower()
    assert "<!--" not in text
    assert "<" not in text and ">" not in text
    assert page.lower().count("<script") == 2
    assert page.lower().count("</script") == 2
    data = json.loads(text)
    assert data["runs"][0]["agentName"] == HOSTILE
    assert data["runs"][0]["turns"][0]["ops"][1]["name"] == HOSTILE
    assert any(HOSTILE in (message["content"] or "") for message in data["dialog"])


# --- the page's files (package data) --------------------------------------------------------------

PLACEHOLDERS = {"policy", "title", "style", "data_id", "data", "script"}


def _page_file(name: str) -> str:
    """One of the page's files, as the package ships it."""
    files = resources.files("agenttrace.views.exports")
    return (files / PAGE_DIRECTORY / name).read_text(encoding="utf-8")


def _csp_hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def _policy_attribute(page: str) -> str:
    match = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', page)
    assert match is not None
    return match.group(1)


def test_html_page_files_are_safe_to_inline() -> None:
    names: set[str] = set()
    for match in Template.pattern.finditer(_page_file(TEMPLATE_FILE)):
        assert match.group("invalid") is None, match.group()  # a stray "$" in the markup
        names.add(match.group("named") or match.group("braced") or "$")
    assert names == PLACEHOLDERS
    # Nothing in the code can end its element early (or start a comment that hides the end).
    assert "</style" not in _page_file(STYLE_FILE).lower()
    script = _page_file(SCRIPT_FILE)
    assert "</script" not in script.lower()
    assert "<!--" not in script


def test_html_page_is_the_template_with_every_placeholder_filled(demo: Demo) -> None:
    page = to_html(demo.loaded)
    # The CSS and the script are the files as they are, each on a line after its tag.
    style = "\n" + _page_file(STYLE_FILE)
    script = "\n" + _page_file(SCRIPT_FILE)
    assert page.count(f"<style>{style}</style>") == 1
    assert page.count(f"<script>{script}</script>") == 1
    # The policy allows exactly those two texts, by their hashes, and nothing from anywhere.
    policy = _policy_attribute(page)
    directives = dict(
        part.strip().split(" ", 1) for part in html.unescape(policy).split(";") if part.strip()
    )
    assert directives == {
        "default-src": "'none'",
        "script-src": _csp_hash(script),
        "style-src": _csp_hash(style),
        "img-src": "'none'",
        "base-uri": "'none'",
        "form-action": "'none'",
    }
    # The rest is page.html unchanged: filling it in with those values gives the page back.
    filled = Template(_page_file(TEMPLATE_FILE)).substitute(
        policy=policy,
        title=f"agenttrace session {html.escape(demo.loaded.session_id or '')}",
        style=style,
        data_id=DATA_ELEMENT_ID,
        data=_data_script(page),
        script=script,
    )
    assert page == filled


def test_placeholders_in_a_session_stay_text(demo: Demo) -> None:
    loaded = copy.deepcopy(demo.loaded)
    sneaky = "${script} $style $$ {title} ${ $"
    loaded.session_id = sneaky + "</title><script>"
    loaded.runs[0]["agentName"] = sneaky
    page = to_html(loaded)
    assert f"<title>agenttrace session {html.escape(loaded.session_id)}</title>" in page
    assert page.count(_page_file(SCRIPT_FILE)) == 1
    assert page.count(_page_file(STYLE_FILE)) == 1
    assert page.lower().count("<script") == 2
    data = json.loads(_data_script(page))
    assert data["sessionId"] == loaded.session_id
    assert data["runs"][0]["agentName"] == sneaky


def test_html_page_files_load_from_a_zip(demo: Demo, tmp_path: Path) -> None:
    """From a zipped package (zipimport) the files are no paths on a disk; the page is the same."""
    package = Path(agenttrace.__file__).parent
    archive = tmp_path / "agenttrace.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in sorted(package.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zipped.write(path, path.relative_to(package.parent).as_posix())
    written = tmp_path / "session.html"
    code = (
        "import sys\n"
        "from agenttrace.views.exports import html\n"
        "print(html.__file__)\n"
        "open(sys.argv[2], 'wb').write(html.to_html(sys.argv[1]).encode('utf-8'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(demo.snapshot), str(written)],
        env=child_env(PYTHONPATH=str(archive)),
        cwd=tmp_path,  # not the checkout, which -c would put first on sys.path
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(archive / "agenttrace/views/exports/html.py")
    assert written.read_bytes() == to_html(demo.snapshot).encode("utf-8")


# --- in a browser ---------------------------------------------------------------------------------


class _Browser:
    def __init__(self, directory: Path) -> None:
        if not CHROMIUM.exists():
            pytest.fail(MISSING)
        self.directory = directory
        self.runs = 0

    def run(self, *arguments: str) -> subprocess.CompletedProcess[str]:
        self.runs += 1
        profile = self.directory / f"profile-{self.runs}"
        command = [
            str(CHROMIUM),
            *HEADLESS,
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            *arguments,
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=480)
        assert result.returncode == 0, result.stderr[-3000:]
        # Uncaught exceptions and Content-Security-Policy refusals are logged as console lines.
        console = [line for line in result.stderr.splitlines() if ":CONSOLE" in line]
        bad = [line for line in console if re.search(r"Uncaught|Refused|Error", line)]
        assert not bad, "\n".join(bad)
        return result

    def dom(self, page: Path, fragment: str = "") -> str:
        return self.run("--dump-dom", page.as_uri() + fragment).stdout


@pytest.fixture
def browser(tmp_path: Path) -> _Browser:
    return _Browser(tmp_path)


class _Tree(HTMLParser):
    """For each ``li`` with a ``data-path``: the paths of the ``li`` elements around it; and
    whether each tree node's ``details`` element is open."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str | None] = []
        self.ancestors: dict[str, list[str]] = {}
        self.open: list[bool] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "li":
            path = attributes.get("data-path")
            if path is not None:
                self.ancestors[path] = [p for p in reversed(self.stack) if p is not None]
            self.stack.append(path)
        elif tag == "details" and "node" in (attributes.get("class") or "").split():
            self.open.append("open" in attributes)

    def handle_endtag(self, tag: str) -> None:
        if tag == "li" and self.stack:
            self.stack.pop()


def _parse(dom: str) -> _Tree:
    tree = _Tree()
    tree.feed(dom)
    return tree


def _without_scripts(dom: str) -> str:
    return re.sub(r"<script\b[^>]*>.*?</script>", "", dom, flags=re.S | re.I)


def _root_attributes(dom: str) -> dict[str, str]:
    match = re.search(r"<html\b([^>]*)>", dom)
    assert match is not None
    return dict(re.findall(r'([a-z-]+)="([^"]*)"', match.group(1)))


@pytest.mark.e2e
def test_html_renders_in_headless_chromium(demo: Demo, browser: _Browser, tmp_path: Path) -> None:
    page = tmp_path / "session.html"
    page.write_text(to_html(demo.loaded), encoding="utf-8")

    dom = browser.dom(page)
    root = _root_attributes(dom)
    assert root.get("data-ready") == "1", root
    assert root.get("data-errors") == ""
    shown = _without_scripts(dom)
    assert '<span class="path">3.2:2</span>' in shown
    assert '<span class="name" title="Jill">Jill</span>' in shown
    tree = _parse(dom)
    assert tree.ancestors["3.2:2"] == ["3.2", "3", "0"]  # Jill under the tool call that ran her
    assert tree.ancestors["3.2:2.1.1"] == ["3.2:2.1", "3.2:2", "3.2", "3", "0"]
    assert len(tree.open) == 18
    # The dialog: each message once, with its speaker, in order.
    dialog = shown[shown.index('id="dialog-list"') : shown.index('id="perspective"')]
    jack = dialog.index("Hi, I'm Jack. *extends hand*")
    assert dialog.index("*smiles* Hello Jack, I'm Jill.") > jack
    assert dialog.count("Hi, I'm Jack. *extends hand*") == 1
    assert '<div class="who">Jack</div>' in dialog
    # The first agent's perspective is shown; another one is picked with #agent=.
    assert "Create Jack and Jill for a cafe discussion" in shown
    jill = _without_scripts(browser.dom(page, "#agent=Jill"))
    assert 'data-agent="agent_003"' in jill
    assert "You are an aspiring author..." in jill[jill.index('id="perspective-list"') :]

    # Expand and collapse: the fragment opens or closes every node of the tree.
    default_open = sum(tree.open)
    assert 0 < default_open < 18
    assert _parse(browser.dom(page, "#expand=all")).open == [True] * 18
    assert _parse(browser.dom(page, "#collapse=all")).open == [False] * 18

    # A screenshot that has something on it (looked at by eye when this test was written).
    shot = tmp_path / "session.png"
    browser.run("--screenshot=" + str(shot), "--window-size=1200,900", page.as_uri())
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (1200, 900)
    assert len(png) > 40_000, len(png)  # an empty page of that size is a few kilobytes


@pytest.mark.e2e
def test_hostile_content_stays_text_in_chromium(
    hostile: LoadedFile, browser: _Browser, tmp_path: Path
) -> None:
    page = tmp_path / "hostile.html"
    page.write_text(to_html(hostile), encoding="utf-8")
    dom = browser.dom(page, "#expand=all")
    root = _root_attributes(dom)
    assert root.get("data-ready") == "1", root
    assert root.get("data-errors") == ""
    assert "data-pwned" not in root
    shown = _without_scripts(dom)
    assert "&lt;/script&gt;&lt;script&gt;" in shown  # shown as text, in the tree and dialog
    assert "&lt;img src=x onerror=" in shown
    assert "<img" not in shown
    assert "Hi, I'm Jack. &lt;/script&gt;" in shown


@pytest.mark.e2e
def test_failed_and_unfinished_nodes_in_chromium(
    broken: LoadedFile, browser: _Browser, tmp_path: Path
) -> None:
    page = tmp_path / "broken.html"
    page.write_text(to_html(broken), encoding="utf-8")
    shown = _without_scripts(browser.dom(page))
    assert _root_attributes(shown).get("data-ready") == "1"
    assert shown.count('<span class="status status-failed">failed</span>') == 2  # run and 1.2
    assert shown.count('<span class="status status-unfinished">unfinished</span>') == 2  # 4, 4.1
    assert '<div class="error">ValueError: no such agent</div>' in shown
    assert '<div class="error">RuntimeError: the cafe closed</div>' in shown


@pytest.mark.e2e
def test_lone_sub_agent_runs_render_under_their_op_in_chromium(
    chain: LoadedFile, browser: _Browser, tmp_path: Path
) -> None:
    page = tmp_path / "chain.html"
    page.write_text(to_html(chain), encoding="utf-8")
    dom = browser.dom(page, "#expand=all")
    assert _root_attributes(dom).get("data-ready") == "1"
    assert _without_scripts(dom).count('<span class="name" title="Deepest">Deepest</span>') == 1
    ancestors = _parse(dom).ancestors["1.2.1.2.1.2:1"]  # the deepest run
    assert ancestors == [
        "1.2.1.2.1.2", "1.2.1.2.1", "1.2.1.2:1", "1.2.1.2", "1.2.1", "1.2:1", "1.2", "1", "0",
    ]  # fmt: skip


@pytest.mark.e2e
def test_nested_ops_and_cache_writes_in_chromium(
    traced: Traced, browser: _Browser, tmp_path: Path
) -> None:
    """A tool a tool called is under it, as in ``tree``; cache reads and writes are both shown."""
    session = agenttrace.new_session()

    @agenttrace.tool
    def inner() -> str:
        return "in"

    @agenttrace.tool
    def outer() -> str:
        return inner()

    with agenttrace.agent("Nesting"), agenttrace.turn():
        outer()
        with agenttrace.llm("anthropic/claude-x") as attempt:
            attempt.record_response(
                {
                    "model": "claude-x",
                    "role": "assistant",
                    "content": [{"type": "text", "text": "ok"}],
                    "usage": {
                        "input_tokens": 10,
                        "output_tokens": 5,
                        "cache_read_input_tokens": 30,
                        "cache_creation_input_tokens": 20,
                    },
                }
            )
    traced.handle.force_flush()
    loaded = read_session_file(snapshot_path(tmp_path / "sessions", session.session_id))
    page = tmp_path / "nested.html"
    page.write_text(to_html(loaded), encoding="utf-8")
    dom = browser.dom(page, "#expand=all")
    assert _root_attributes(dom).get("data-ready") == "1"
    ancestors = _parse(dom).ancestors
    assert ancestors["1.2"] == ["1.1", "1", "0"]  # inner, under outer
    assert ancestors["1.3"] == ["1", "0"]  # the LLM call, after outer returned
    assert "cache r 30 w 20" in _without_scripts(dom)


def _iter_tags(dom: str) -> Iterator[str]:
    yield from re.findall(r"<([a-z0-9]+)\b", dom)


def test_page_has_no_elements_that_load_anything(
    demo: Demo, browser: _Browser, tmp_path: Path
) -> None:
    page = tmp_path / "session.html"
    page.write_text(to_html(demo.loaded), encoding="utf-8")
    dom = _without_scripts(browser.dom(page, "#expand=all"))
    loaders = {"img", "iframe", "link", "object", "embed", "audio", "video", "source", "base"}
    assert not loaders & set(_iter_tags(dom))
    assert not _REMOTE.search(dom)
