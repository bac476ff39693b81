"""Session files and streams are validated against the format's structs
(agenttrace/formats/session/schema.py) before any view sees them.

What agenttrace writes passes, and is handed on exactly as written; every kind of malformation,
in the session file and in the stream alike, is a ``SessionFileError`` whose one line says where
and what; the nesting limit is configurable; and the published JSON Schema refuses what the
decoder refuses (nesting aside, which JSON Schema cannot state).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import gzip
import io
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest
from opentelemetry.sdk.trace import TracerProvider

import agenttrace
from agenttrace import SessionFileError
from agenttrace.formats.session import schema
from agenttrace.formats.session.files import read_session_file, snapshot_path, stream_path
from agenttrace.formats.session.schema_file import published_schema
from examples.cafe import SCRIPTS, run_first
from examples.scripted_model import ScriptedModel

from .conftest import Traced
from .helpers import subtrees


@dataclass
class Cafe:
    """A real session: the cafe scenario, then a run that logs, thinks and has a tool fail."""

    document: dict[str, Any]
    lines: list[bytes]
    snapshot: Path
    stream: Path


@pytest.fixture(scope="module")
def cafe(tmp_path_factory: pytest.TempPathFactory) -> Cafe:
    directory = tmp_path_factory.mktemp("schema")
    sessions = directory / "sessions"
    provider = TracerProvider()
    agenttrace.use_session(None)
    handle = agenttrace.init(
        tracer_provider=provider,
        sessions_dir=sessions,
        billing_file=directory / "accounting.jsonl",
        console_stream=io.StringIO(),
    )
    try:
        session = agenttrace.new_session()
        with ScriptedModel(SCRIPTS) as model:
            asyncio.run(run_first({"api_key": "offline-test-key", "api_base": model.api_base}))
        extras()
        handle.force_flush()
    finally:
        handle.shutdown()
        provider.shutdown()
        agenttrace.use_session(None)
    snapshot = snapshot_path(sessions, session.session_id)
    stream = stream_path(sessions, session.session_id)
    return Cafe(
        json.loads(gzip.decompress(snapshot.read_bytes())),
        stream.read_bytes().splitlines(),
        snapshot,
        stream,
    )


@agenttrace.tool
def fails(reason: str) -> str:
    raise ValueError(reason)


@agenttrace.agent("Extras", ingress={"source": "api", "api": {"route": "/ask", "retries": 2}})
def extras() -> None:
    agenttrace.log("WRN", "disk almost full", free_mb=12)
    agenttrace.thinking("the tool will fail")
    with contextlib.suppress(ValueError):
        fails("on purpose")


# --- what agenttrace writes -------------------------------------------------------------------


def test_what_agenttrace_writes_passes_and_is_handed_on_as_written(cafe: Cafe) -> None:
    loaded = read_session_file(cafe.snapshot)
    assert loaded.runs == cafe.document["runs"]  # not a key added, dropped or retyped
    assert loaded.meta == cafe.document["meta"]
    lines = [json.loads(x) for x in cafe.lines]
    others = ("op_accounted", "step", "step_decision")
    events = [line for line in lines if line["event_type"] not in others]
    assert loaded.events == cafe.document["events"] == events
    from_stream = read_session_file(cafe.stream)
    assert from_stream.events == loaded.events
    # The stream's op_accounted lines hold the accounting of every op of the opTrees, and its
    # step lines are the journal of its tool calls.
    assert from_stream.accounted == [x for x in lines if x["event_type"] == "op_accounted"]
    assert from_stream.journal == [x for x in lines if x["event_type"] == "step"]
    assert from_stream.journal  # the cafe's tool calls are journaled
    assert sorted(json.dumps(line["accounting"]) for line in from_stream.accounted) == sorted(
        json.dumps(entry) for entry in _entries(loaded.runs)
    )
    extras_run = loaded.runs[1]
    (op,) = extras_run["turns"][0]["ops"]
    assert op["status"] == "failed" and op["accounting"][0]["errorType"] == "ValueError"
    assert extras_run["logs"][0]["level"] == "WRN" and extras_run["reasoning"]["chunks"]
    assert extras_run["attributes"]["ingress"]["api"] == {"route": "/ask", "retries": 2}


def _entries(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every accounting entry of the opTrees under ``nodes``."""
    found: list[dict[str, Any]] = []
    pending = list(nodes)
    while pending:
        node = pending.pop()
        found.extend(node.get("accounting") or [])
        pending.extend(subtrees(node))
    return found


def test_what_agenttrace_writes_passes_the_published_schema(cafe: Cafe) -> None:
    validator = jsonschema.Draft202012Validator(published_schema())
    assert [e.message for e in validator.iter_errors(cafe.document)] == []
    event = jsonschema.Draft202012Validator(
        {"$defs": published_schema()["$defs"], "$ref": "#/$defs/StreamLine"}
    )
    for line in cafe.lines:
        assert [e.message for e in event.iter_errors(json.loads(line))] == []


def test_a_non_finite_ingress_number_is_written_as_text(traced: Traced, tmp_path: Path) -> None:
    """JSON has no infinity or NaN, so the reader refuses them; ingress is the application's,
    and agenttrace writes such a number as text, so its own file still reads back."""
    session = agenttrace.new_session()

    @agenttrace.agent("Scored", ingress={"source": "api", "score": float("nan"), "cap": math.inf})
    def scored() -> None:
        pass

    scored()
    traced.handle.force_flush()
    (run,) = read_session_file(snapshot_path(tmp_path / "sessions", session.session_id)).runs
    assert run["attributes"]["ingress"] == {"source": "api", "score": "nan", "cap": "inf"}


def test_a_message_logged_by_hand_is_written_so_it_reads_back(traced: Traced) -> None:
    """The format's tool call arguments are JSON text (as models write them) and its ids are
    strings: a message logged by hand with an object or a number there is written as text."""
    session = agenttrace.new_session()
    agent = session.allocate_agent_id()
    session.log_agent_created(agent, name="Hand")
    call = {"id": "c1", "function": {"name": "task", "arguments": {"name": "Jack"}}}
    session.log_transcript_entry(agent, {"role": "assistant", "tool_calls": [call]})
    session.log_transcript_entry(agent, {"role": "tool", "tool_call_id": 5, "content": "ok"})
    traced.handle.force_flush()
    stream = stream_path(traced.handle.settings.sessions_dir, session.session_id)
    events = read_session_file(stream).events
    (read,) = events[1]["tool_calls"]
    assert read["function"] == {"name": "task", "arguments": '{"name": "Jack"}'}
    assert events[2]["tool_call_id"] == "5"


# --- malformations --------------------------------------------------------------------------

HUGE = "__a number no float holds__"
"""Written as ``1e999`` in the file: valid JSON, out of any float's range."""


def _op(document: dict[str, Any]) -> dict[str, Any]:
    """The cafe's ``discuss`` tool call: op 3.2, which ran Jack and Jill."""
    op: dict[str, Any] = document["runs"][0]["turns"][2]["ops"][1]
    assert op["path"] == "3.2"
    return op


def _nested(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = [value]
    return value


def _set(target: Callable[[dict[str, Any]], dict[str, Any]], key: str, value: Any) -> Any:
    return lambda d: target(d).__setitem__(key, value)


def _run(d: dict[str, Any]) -> dict[str, Any]:
    run: dict[str, Any] = d["runs"][0]
    return run


def _event(index: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda d: d["events"][index]


LABEL = "Expected a path label (docs/path-labels.md)"
# (id, change to the document, where, what): the change is made to a copy of the cafe's session
# file; changes to events are also made to the same line of its stream.
SESSION_FILE_DAMAGE = [
    ("huge timestamp", _set(_run, "startedAt", HUGE), "$.runs[0].startedAt",
     "Number out of range"),
    ("float timestamp", _set(_run, "startedAt", 1.5), "$.runs[0].startedAt",
     "Expected `int`, got `float`"),
    ("negative timestamp", _set(_run, "startedAt", -1), "$.runs[0].startedAt",
     "Expected `int` >= 0"),
    ("timestamp past 2262", _set(_run, "startedAt", 10**13), "$.runs[0].startedAt",
     "Expected `int` <= 9223372036854"),
    ("span time a string", lambda d: _op(d)["span"].__setitem__("startTimeUnixNano", "1"),
     "$.runs[0].turns[2].ops[1].span.startTimeUnixNano", "Expected `int`, got `str`"),
    ("turns not a list", _set(_run, "turns", 5), "$.runs[0].turns", "Expected `array`, got `int`"),
    ("accounting a string", lambda d: _op(d).__setitem__("accounting", "x"),
     "$.runs[0].turns[2].ops[1].accounting", "Expected `array`, got `str`"),
    ("op id a list", lambda d: _op(d).__setitem__("opId", ["x"]),
     "$.runs[0].turns[2].ops[1].opId", "Expected `str | null`, got `array`"),
    ("agent id an object", _set(_run, "agentId", {}), "$.runs[0].agentId",
     "Expected `str`, got `object`"),
    ("bad label", lambda d: _op(d).__setitem__("path", "3.2:1.1"),
     "$.runs[0].turns[2].ops[1].path", LABEL),
    ("label with a newline", lambda d: _op(d).__setitem__("path", "3.2\n"),
     "$.runs[0].turns[2].ops[1].path", LABEL),
    ("unknown key in an op", lambda d: _op(d).__setitem__("undocumented", 1),
     "$.runs[0].turns[2].ops[1]", "Object contains unknown field `undocumented`"),
    ("no sub-agent run in childSessions", lambda d: _op(d).__setitem__("childSessions", []),
     "$.runs[0].turns[2].ops[1].childSessions", "Expected `array` of length >= 1"),
    ("ended op without status", lambda d: _op(d).pop("status"),
     "$.runs[0].turns[2].ops[1]", "`endedAt` without `status`"),
    ("root without resource", lambda d: _run(d).pop("resource"), "$.runs[0]",
     "`span` without `resource`"),
    ("root with a resource, without its span", lambda d: _run(d).pop("span"), "$.runs[0]",
     "`resource` without `span`"),
    ("callPath a number", lambda d: _op(d)["accounting"][0].__setitem__("callPath", 1),
     "$.runs[0].turns[2].ops[1].accounting[0].callPath", "Expected `str | null`, got `int`"),
    ("tool entry with a cost", lambda d: _op(d)["accounting"][0].__setitem__("costUsd", 0.1),
     "$.runs[0].turns[2].ops[1].accounting[0]",
     "Object contains field `costUsd`, not for a tool entry"),
    ("null in ingress", lambda d: _run(d)["attributes"]["ingress"].__setitem__("cli", None),
     "$.runs[0].attributes",
     "ingress holds null: leaves are strings, booleans or numbers"),
    ("session id that leaves the directory", lambda d: d.__setitem__("session_id", "../x"),
     "$.session_id", "Expected a session or txn id (a plain file-name stem)"),
    ("meta without updatedAt", lambda d: d["meta"].pop("updatedAt"), "$.meta",
     "Object missing required field `updatedAt`"),
    ("message id a list", _set(_event(3), "message_id", ["msg_004"]), "$.events[3].message_id",
     "Expected `str`, got `array`"),
    ("message id in other digits", _set(_event(3), "message_id", "msg_٣"),
     "$.events[3].message_id", "Expected a message id (msg_001)"),
    ("message id of 200 digits", _set(_event(3), "message_id", "msg_" + "9" * 200),
     "$.events[3].message_id", "Expected a message id (msg_001)"),
    ("unknown event type", _set(_event(3), "event_type", "span_started"),
     "$.events[3].event_type", "Invalid value 'span_started'"),
    ("cause on a transcript entry", _set(_event(12), "cause", "msg_011"), "$.events[12]",
     "Object contains unknown field `cause`"),
    ("both spellings of substance", _set(_event(12), "content_id", "msg_012"), "$.events[12]",
     "`substance` and `content_id` together"),
    ("cause that is not an id", _set(_event(3), "cause", "msg 3"), "$.events[3]",
     "`cause` is not a message id"),
    ("trace id without span id", lambda d: d["events"][3].pop("span_id"), "$.events[3]",
     "`trace_id` without `span_id`"),
    ("event time a number", _set(_event(3), "ts", 1795393954351), "$.events[3].ts",
     "Expected `str`, got `int`"),
    ("tool call without function", lambda d: d["events"][2]["tool_calls"][0].pop("function"),
     "$.events[2].tool_calls[0]", "Object missing required field `function`"),
    # A scalar where an array's item or an object belongs: every array and map of the file.
    ("a number in the journal", lambda d: d["journal"].insert(1, 1.5), "$.journal[1]",
     "Expected `object`, got `float`"),
    ("text in the journal", lambda d: d["journal"].insert(0, "step"), "$.journal[0]",
     "Expected `object`, got `str`"),
    ("an array in the journal", lambda d: d["journal"].insert(2, [1.5]), "$.journal[2]",
     "Expected `object`, got `array`"),
    ("the journal a number", lambda d: d.__setitem__("journal", 1.5), "$.journal",
     "Expected `array`, got `float`"),
    ("a journal line's chunks a number", _set(lambda d: d["journal"][1], "chunks", 1.5),
     "$.journal[1].chunks", "Expected `array`, got `float`"),
    ("a number in runs", lambda d: d["runs"].insert(0, 1.5), "$.runs[0]",
     "Expected `object`, got `float`"),
    ("a number in turns", lambda d: _run(d)["turns"].insert(0, 1.5), "$.runs[0].turns[0]",
     "Expected `object`, got `float`"),
    ("meta a number", lambda d: d.__setitem__("meta", 1.5), "$.meta",
     "Expected `object`, got `float`"),
    ("a number in trace_ids", lambda d: d["meta"]["trace_ids"].insert(0, 1.5),
     "$.meta.trace_ids[0]", "Expected `str`, got `float`"),
    ("ingress a number", lambda d: d["meta"].__setitem__("ingress", 1.5), "$.meta.ingress",
     "Expected `object`, got `float`"),
    ("a number among the events", lambda d: d["events"].insert(1, 1.5), "$.events[1]",
     "Expected `object`, got `float`"),
    ("tool calls a number", _set(_event(2), "tool_calls", 1.5), "$.events[2].tool_calls",
     "Expected `array`, got `float`"),
]  # fmt: skip


def _damaged(document: dict[str, Any], change: Callable[[dict[str, Any]], Any]) -> bytes:
    damaged = copy.deepcopy(document)
    change(damaged)
    return json.dumps(damaged).replace(json.dumps(HUGE), "1e999").encode()


def refused(path: Path) -> str:
    with pytest.raises(SessionFileError) as caught:
        read_session_file(path)
    message = str(caught.value)
    assert message and "\n" not in message, repr(message)
    return message


@pytest.mark.parametrize(
    ("change", "where", "what"),
    [pytest.param(*case[1:], id=case[0]) for case in SESSION_FILE_DAMAGE],
)
def test_a_damaged_session_file_is_refused_saying_where_and_what(
    cafe: Cafe, tmp_path: Path, change: Any, where: str, what: str
) -> None:
    path = tmp_path / "damaged.json.gz"
    path.write_bytes(gzip.compress(_damaged(cafe.document, change)))
    assert refused(path) == f"{path}: {where}: {what}"


EVENT_DAMAGE = [case for case in SESSION_FILE_DAMAGE if case[2].startswith("$.events[")]


@pytest.mark.parametrize(
    ("change", "where", "what"),
    [pytest.param(*case[1:], id=case[0]) for case in EVENT_DAMAGE],
)
def test_a_damaged_stream_line_is_refused_saying_where_and_what(
    cafe: Cafe, tmp_path: Path, change: Any, where: str, what: str
) -> None:
    events = json.loads(_damaged(cafe.document, change))["events"]
    index = int(where[len("$.events[") :].partition("]")[0])
    path = tmp_path / "damaged.events.jsonl"
    path.write_bytes(b"".join(json.dumps(e).encode() + b"\n" for e in events))
    inside = where.partition("]")[2]
    assert refused(path) == (
        f"{path}: line {index + 1} is not a canonical event: {what} at ${inside}"
    )


@pytest.mark.parametrize(
    ("change", "where"),
    [
        pytest.param(case[1], case[2], id=case[0])
        for case in SESSION_FILE_DAMAGE
        if case[0] not in ("huge timestamp",)  # not a number Python's json module can write
    ],
)
def test_the_published_schema_refuses_the_same(cafe: Cafe, change: Any, where: str) -> None:
    document = json.loads(_damaged(cafe.document, change))
    validator = jsonschema.Draft202012Validator(published_schema())
    errors = list(validator.iter_errors(document))
    assert errors, where


def test_non_finite_numbers_are_not_json(cafe: Cafe, tmp_path: Path) -> None:
    """NaN and Infinity (which Python's json module would read) are not JSON: refused."""
    text = json.dumps(cafe.document)
    path = tmp_path / "nan.json.gz"
    path.write_bytes(
        gzip.compress(text.replace('"latencyMs": ', '"latencyMs": NaN, "x": ', 1).encode())
    )
    assert refused(path) == f"{path}: gzip does not hold JSON; not an agenttrace session"
    line = cafe.lines[3].decode().replace('"ts": ', '"ts": Infinity, "x": ')
    stream = tmp_path / "nan.events.jsonl"
    stream.write_bytes(b"\n".join([*cafe.lines[:3], line.encode(), *cafe.lines[4:]]) + b"\n")
    assert refused(stream) == f"{stream}: line 4 is not JSON"


# --- nesting -------------------------------------------------------------------------------------


def test_content_nested_past_the_limit_is_refused(cafe: Cafe, tmp_path: Path) -> None:
    document = copy.deepcopy(cafe.document)
    document["events"][1]["content"] = _nested(200)  # level 2 of its event: 201 in all
    snapshot = tmp_path / "deep.json.gz"
    snapshot.write_bytes(gzip.compress(json.dumps(document).encode()))
    message = refused(snapshot)
    assert message.startswith(f"{snapshot}: $.events[1].content[0][0]")
    assert message.endswith(": nested more than 200 levels deep (AGENTTRACE_MAX_NESTING_DEPTH)")
    stream = tmp_path / "deep.events.jsonl"
    stream.write_bytes(b"".join(json.dumps(e).encode() + b"\n" for e in document["events"]))
    message = refused(stream)
    assert message.startswith(f"{stream}: line 2 is not a canonical event: nested more than 200")
    assert "at $.content[0][0]" in message

    document["events"][1]["content"] = _nested(199)  # at the limit: read
    snapshot.write_bytes(gzip.compress(json.dumps(document).encode()))
    assert read_session_file(snapshot).events[1]["content"] == _nested(199)


def test_meta_and_runs_nested_past_the_limit_are_refused(cafe: Cafe, tmp_path: Path) -> None:
    document = copy.deepcopy(cafe.document)
    document["meta"]["earlier"] = {"x": _nested(300)}
    path = tmp_path / "deep.json.gz"
    path.write_bytes(gzip.compress(json.dumps(document).encode()))
    assert refused(path).startswith(f"{path}: $.meta.earlier.x[0][0]")


def test_the_limit_is_configurable(
    cafe: Cafe, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cafe's deepest point is a sub-agent's span attribute array, 16 levels down."""
    monkeypatch.setenv("AGENTTRACE_MAX_NESTING_DEPTH", "12")
    message = refused(cafe.snapshot)
    assert message.startswith(f"{cafe.snapshot}: $.runs[0].turns[2].ops[1].childSessions[")
    assert message.endswith("nested more than 12 levels deep (AGENTTRACE_MAX_NESTING_DEPTH)")
    monkeypatch.setenv("AGENTTRACE_MAX_NESTING_DEPTH", "16")
    assert read_session_file(cafe.snapshot).runs == cafe.document["runs"]


def test_nesting_no_parser_can_follow_is_one_line_too(cafe: Cafe, tmp_path: Path) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    text = json.dumps(cafe.document).encode()
    path = tmp_path / "abyss.json.gz"
    path.write_bytes(gzip.compress(text.replace(b'"cli": {', b'"cli": ' + deep + b', "x": {', 1)))
    assert refused(path) == f"{path}: nested too deeply to read (AGENTTRACE_MAX_NESTING_DEPTH)"
    stream = tmp_path / "abyss.events.jsonl"
    stream.write_bytes(b"\n".join([*cafe.lines[:2], deep, *cafe.lines[2:]]) + b"\n")
    assert refused(stream) == (
        f"{stream}: line 3: nested too deeply to read (AGENTTRACE_MAX_NESTING_DEPTH)"
    )


# --- ids and counters ------------------------------------------------------------------------


def test_an_agent_id_in_other_digits_is_kept_and_moves_no_counter(tmp_path: Path) -> None:
    """Agent ids can be the application's own (any printable text); ``agent_²`` is one, not
    agent number 2 (``int`` refuses that digit, and counters are ASCII)."""
    path = tmp_path / "s.events.jsonl"
    events = [
        {"message_id": "msg_001", "event_type": "agent_created", "agent_id": "agent_²"},
        {"message_id": "msg_002", "event_type": "agent_created", "agent_id": "agent_٣"},
    ]
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    session = agenttrace.Session.load(path)
    assert list(session.agents) == ["agent_²", "agent_٣"]
    assert (session.message_counter, session.agent_counter) == (2, 0)
    assert session.allocate_agent_id() == "agent_001"


def test_an_agent_id_with_a_control_character_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.events.jsonl"
    event = {"message_id": "msg_001", "event_type": "agent_created", "agent_id": "a\x1b[2Jb"}
    path.write_text(json.dumps(event) + "\n")
    assert refused(path) == (
        f"{path}: line 1 is not a canonical event: Expected an agent id (printable, at most 256 "
        "characters) at $.agent_id"
    )


def test_an_unknown_key_with_a_line_break_stays_on_one_line(tmp_path: Path) -> None:
    path = tmp_path / "s.events.jsonl"
    event = {"message_id": "msg_001", "event_type": "agent_created", "agent_id": "a", "x\ny": 1}
    path.write_text(json.dumps(event) + "\n")
    assert refused(path) == (
        f"{path}: line 1 is not a canonical event: Object contains unknown field `x\\ny` at $"
    )


# --- the structs themselves ---------------------------------------------------------------------


def test_no_union_mixes_a_pattern_with_an_array_or_object() -> None:
    """msgspec 0.22 frees the compiled pattern of such a union as if it were a type (memory
    corruption: a crash at exit, one run in four); schema.Cause works around it."""
    seen: set[int] = set()
    pending: list[Any] = list(msgspec.inspect.multi_type_info([schema.SessionFile, schema.Event]))
    offending, patterned_unions = [], 0
    while pending:
        info = pending.pop()
        if id(info) in seen:
            continue
        seen.add(id(info))
        if isinstance(info, msgspec.inspect.UnionType):
            members = [t.type if isinstance(t, msgspec.inspect.Metadata) else t for t in info.types]
            patterned = any(isinstance(t, msgspec.inspect.StrType) and t.pattern for t in members)
            containers = (msgspec.inspect.ListType, msgspec.inspect.DictType)
            patterned_unions += patterned
            if patterned and any(isinstance(t, containers) for t in members):
                offending.append(info)
        for name in ("type", "types", "fields", "item_type", "key_type", "value_type"):
            value = getattr(info, name, None)
            if isinstance(value, tuple):
                pending.extend(getattr(v, "type", v) for v in value)
            elif isinstance(value, msgspec.inspect.Type):
                pending.append(value)
    assert offending == []
    assert patterned_unions > 5  # the walk reached them: TraceId | None, Label | UnsetType, ...


def test_a_lone_surrogate_passes_in_free_text_and_fails_where_a_pattern_applies() -> None:
    """Text with no UTF-8 is written as its escape and must read back in content; in an id
    (a pattern) it is an error like any other character the pattern refuses, in one line."""
    from agenttrace.formats.session import schema

    event = {
        "message_id": "msg_001",
        "event_type": "transcript_entry",
        "agent_id": "agent_001",
        "role": "user",
        "content": "report\udc80.txt",
        "ts": "2025-01-01T00:00:00.000Z",
    }
    schema.check_events([event], 200)
    with pytest.raises(schema.FormatError) as caught:
        schema.check_events([{**event, "message_id": "msg_\udc80"}], 200)
    assert caught.value.where == "[0].message_id"


@pytest.mark.parametrize(
    ("change", "what", "where"),
    [
        (lambda line: 1.5, "Expected `object`, got `float`", "$"),
        (lambda line: [line], "Expected `object`, got `array`", "$"),
        (lambda line: {**line, "chunks": 1.5}, "Expected `array`, got `float`", "$.chunks"),
        (lambda line: {**line, "run": {}}, "Expected `str`, got `object`", "$.run"),
        (lambda line: {**line, "step": 1.5}, "Expected `str`, got `float`", "$.step"),
    ],
)
def test_a_damaged_journal_line_of_the_stream_is_refused_saying_where_and_what(
    cafe: Cafe, tmp_path: Path, change: Any, what: str, where: str
) -> None:
    """The stream's journal lines are read as untrusted as its events: a number, or a number
    where an array or text belongs, is one line naming the line (a journal line as such)."""
    lines = [json.loads(line) for line in cafe.lines]
    index = next(i for i, line in enumerate(lines) if line.get("event_type") == "step")
    lines[index] = change(lines[index])
    path = tmp_path / "damaged.events.jsonl"
    path.write_bytes(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    kind = "a step-journal line" if where != "$" else "a canonical event"
    assert refused(path) == f"{path}: line {index + 1} is not {kind}: {what} at {where}"
