"""Session, LoggedString, the session file, onOpTree, and resume (from either file)."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import stat
from pathlib import Path
from typing import Any

import pytest

import agenttrace
from agenttrace import semconv as sc
from agenttrace.formats.session.files import read_session_file, snapshot_path, stream_path
from examples.cafe import SCRIPTS, Agent, run_first, run_resumed
from examples.scripted_model import ScriptedModel

from .conftest import Traced, attrs
from .helpers import canonical_events, run_chain

OPTIONS = {"api_key": "offline-test-key"}


def stream_events(sessions: Path, session_id: str) -> list[dict[str, Any]]:
    return canonical_events(stream_path(sessions, session_id))


async def first_run(traced: Traced, tmp_path: Path) -> agenttrace.Session:
    session = agenttrace.new_session()
    with ScriptedModel(SCRIPTS) as model:
        await run_first({**OPTIONS, "api_base": model.api_base})
    traced.handle.force_flush()
    return session


# --- LoggedString ------------------------------------------------------------------------------


def test_logged_string_keeps_its_id_through_formatting() -> None:
    said = agenttrace.LoggedString("Hello", "msg_007")
    assert said == "Hello" and isinstance(said, str)
    for copy in (
        "[Jack]: " + said,
        said + "!",
        said.derive(f"[Jack]: {said}"),
        agenttrace.LoggedString("[{}]: {}").format("Jack", said),
        said.replace("Hello", "Hi"),
        said.strip(),
    ):
        assert isinstance(copy, agenttrace.LoggedString)
    assert ("[Jack]: " + said).message_id == "msg_007"
    assert said.derive("x").message_id == "msg_007"
    assert pickle.loads(pickle.dumps(said)).message_id == "msg_007"
    assert f"{said}" == "Hello"  # an f-string is a plain str: derive() keeps the id
    assert getattr(f"{said}", "message_id", None) is None


# --- the Session API (seed 001) ----------------------------------------------------------------


def test_session_api_allocates_ids_and_keeps_the_registry(traced: Traced, tmp_path: Path) -> None:
    session = agenttrace.new_session("api-test")
    root = session.allocate_agent_id()
    assert root == "agent_001"
    created = session.log_agent_created(root, language_model="m")
    heard = session.log_transcript_entry(root, {"role": "user", "content": "Go"})
    child = session.allocate_agent_id()
    session.log_agent_created(child, cause=heard, name="Child")
    piece = session.log_piece_of_text(root, "Shared text", cause=heard)
    session.log_transcript_entry(child, {"role": "user", "content": "Shared text"}, substance=piece)
    assert (created, heard, piece) == ("msg_001", "msg_002", "msg_004")
    assert session.list_agents() == {"agent_001": None, "agent_002": "Child"}
    assert session.revivify("agent_002").parent_id == "agent_001"
    assert session.revivify("agent_002").messages() == [{"role": "user", "content": "Shared text"}]
    with pytest.raises(KeyError):
        session.revivify("agent_999")
    # Everything went to the stream at once, in message-id order, outside any span.
    traced.handle.force_flush()
    events = stream_events(tmp_path / "sessions", "api-test")
    assert [e["message_id"] for e in events] == [f"msg_{i:03d}" for i in range(1, 6)]
    assert events[4]["substance"] == "msg_004" and "cause" not in events[4]
    loaded = agenttrace.Session.load(stream_path(tmp_path / "sessions", "api-test"))
    assert (loaded.message_counter, loaded.agent_counter) == (5, 2)


@pytest.mark.init(capture_content=True)
def test_events_are_span_events_too_with_capped_content(traced: Traced) -> None:
    session = agenttrace.new_session()

    @agenttrace.llm("openai/gpt-x")
    def chat(messages: list[Any]) -> dict[str, Any]:
        return {"choices": [{"message": {"role": "assistant", "content": "x" * 50000}}]}

    @agenttrace.agent("Speaker")
    def speak() -> str:
        return str(chat(messages=[])["choices"][0]["message"]["content"])

    said = speak()
    # The run returns the model's text as it is; the session knows which entry said it.
    assert type(said) is str and session.reply_saying(said) == "msg_002"
    span = traced.one("chat gpt-x")
    events = [dict(e.attributes or {}) for e in span.events if e.name == sc.EVENT_CANONICAL]
    assert [e[sc.EVENT_TYPE] for e in events] == ["transcript_entry"]
    assert events[0][sc.EVENT_MESSAGE_ID] == "msg_002"
    assert len(events[0][sc.EVENT_CONTENT]) < 17000  # capped on the span ...
    assert len(session.events[1]["content"]) == 50000  # ... whole in the stream


# --- the session file ---------------------------------------------------------------------------


async def test_session_file_holds_runs_events_and_meta(traced: Traced, tmp_path: Path) -> None:
    session = await first_run(traced, tmp_path)
    sessions = tmp_path / "sessions"
    path = snapshot_path(sessions, session.session_id)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    payload = json.loads(gzip.decompress(path.read_bytes()))
    assert (payload["format"], payload["version"]) == ("agenttrace.session", 1)
    assert payload["session_id"] == session.session_id
    assert payload["events"] == stream_events(sessions, session.session_id)
    (run,) = payload["runs"]
    assert run["path"] == "0" and run["success"] is True and run["endedAt"] >= run["startedAt"]
    assert run["txnId"] == session.session_id  # the first run's txn id names the files
    discuss = run["turns"][2]["ops"][1]
    assert discuss["kind"] == "session" and discuss["name"] == "discuss"
    jack, jill = discuss["childSessions"]  # two runs: each once, no childSession beside them
    assert "childSession" not in discuss and jack["agentName"] == "Jack"
    assert (jack["path"], jill["path"]) == ("3.2:1", "3.2:2")
    llm = jill["turns"][0]["ops"][0]
    (accounting,) = llm["accounting"]
    assert accounting["type"] == "llm" and accounting["tokens"]["inputTokens"] > 0
    assert accounting["costUsd"] > 0 and accounting["agentId"] == "agent_003"
    assert payload["meta"]["result"] == {"success": True, "error": None}
    assert payload["meta"]["trace_ids"] == [run["traceId"]]
    assert payload["meta"]["ingress"]["source"] == "cli"
    assert not [p for p in sessions.iterdir() if p.name.endswith(".tmp")]


def test_a_snapshot_mid_run_keeps_unfinished_nodes_with_their_start_only(
    traced: Traced, tmp_path: Path
) -> None:
    session = agenttrace.new_session("midrun")
    seen: dict[str, Any] = {}

    @agenttrace.agent("Child")
    def child() -> str:
        return "done"

    @agenttrace.tool
    def delegate() -> str:
        child()  # a sub-agent finishes: the session file is written, this tool still running
        agenttrace.force_flush()
        seen.update(read_session_file(snapshot_path(tmp_path / "sessions", "midrun")).runs[0])
        return "ok"

    @agenttrace.agent("Parent")
    def parent() -> None:
        delegate()

    parent()
    assert "endedAt" not in seen and seen["startedAt"] > 0  # the parent run: in progress
    op = seen["turns"][0]["ops"][0]
    assert "endedAt" not in op and op["kind"] == "session"
    assert "childSessions" not in op  # one run: seed 002's childSession
    assert op["childSession"]["endedAt"] >= op["childSession"]["startedAt"]
    assert session.session_id == "midrun"


def test_snapshots_are_coalesced_not_one_per_sub_agent(traced: Traced, tmp_path: Path) -> None:
    """50 sub-agents finish and then the run: the first finish writes the session file at once,
    the rest wait for one coalesced write (here never due: the interval is an hour), which
    force_flush does. Two writes, and the file has everything."""
    from agenttrace.recorder.store import SessionFileSink

    sink = next(s for s in traced.handle.processor.sinks if isinstance(s, SessionFileSink))
    sink.throttle.min_interval = 3600
    writes: list[bool] = []
    original = sink.write

    def counting(session_id: str) -> bool:
        written = original(session_id)
        writes.append(written)
        return written

    sink.write = counting  # type: ignore[method-assign]
    session = agenttrace.new_session()

    @agenttrace.agent("Leaf")
    def leaf() -> None:
        pass

    @agenttrace.tool
    def fan_out() -> None:
        for _ in range(50):
            leaf()

    @agenttrace.agent("Trunk")
    def trunk() -> None:
        fan_out()

    trunk()
    traced.handle.force_flush()
    assert writes == [True, True]
    (run,) = read_session_file(snapshot_path(tmp_path / "sessions", session.session_id)).runs
    assert run["success"] is True
    assert len(run["turns"][0]["ops"][0]["childSessions"]) == 50


def test_an_event_logged_while_a_snapshot_is_built_reaches_the_session_file(
    traced: Traced, tmp_path: Path
) -> None:
    """The run-end snapshot is built on the background worker while the agent goes on logging:
    an event logged after the snapshot read the events must leave the session marked as
    changed, so that the snapshot at exit has it (it was lost when the stream could not be
    written: a full disk)."""
    from agenttrace.recorder.store import SessionFileSink

    sink = next(s for s in traced.handle.processor.sinks if isinstance(s, SessionFileSink))
    session = agenttrace.new_session("late")
    helper = session.allocate_agent_id()
    session.log_agent_created(helper, name="Helper")
    late: list[str] = []
    original = sink.pieces

    def pieces_then_an_event(state: Any) -> list[Any]:
        data = original(state)
        if not late:  # the agent logs one more event right after the events were read
            late.append(session.log_transcript_entry(helper, {"role": "user", "content": "bye"}))
        return data

    sink.pieces = pieces_then_an_event  # type: ignore[method-assign]

    @agenttrace.agent("Worker")
    def work() -> None:
        pass

    work()
    traced.handle.force_flush()
    assert late == ["msg_003"]
    sink.shutdown()  # a clean exit: sessions changed since their last snapshot are written
    loaded = read_session_file(snapshot_path(tmp_path / "sessions", "late"))
    assert [e["message_id"] for e in loaded.events] == ["msg_001", "msg_002", "msg_003"]


def test_on_optree_gets_the_live_tree_throttled_and_the_final_one(traced: Traced) -> None:
    trees: list[dict[str, Any]] = []

    def remember(root: dict[str, Any]) -> None:
        trees.append(json.loads(json.dumps(root)))  # a copy: the tree goes on changing

    unsubscribe = agenttrace.on_optree(remember, min_interval=3600)

    @agenttrace.agent("Live")
    def live() -> None:
        with agenttrace.tool("step"):
            pass

    live()
    traced.handle.force_flush()
    unsubscribe()
    assert len(trees) == 2  # the first change, then (throttled) only the run's end
    assert "endedAt" not in trees[0]
    assert trees[-1]["success"] is True and trees[-1]["turns"][0]["ops"][0]["name"] == "step"
    live()
    traced.handle.force_flush()
    assert len(trees) == 2


# --- sub-agent runs: each in the tree once ------------------------------------------------------


def agent_runs(value: Any) -> list[str]:
    """The ``agentName`` of every SessionNode in ``value`` (a document), every copy counted."""
    found: list[str] = []
    if isinstance(value, dict):
        if "turns" in value and "agentName" in value:
            found.append(value["agentName"])
        for item in value.values():
            found.extend(agent_runs(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(agent_runs(item))
    return found


def session_text(tmp_path: Path, session_id: str) -> bytes:
    """The session file's JSON text, after reading it as every reader does (validated)."""
    path = snapshot_path(tmp_path / "sessions", session_id)
    read_session_file(path)
    with gzip.open(path) as file:
        return file.read()


def test_nested_sub_agents_are_written_once_each(traced: Traced, tmp_path: Path) -> None:
    """A chain of 12 nested sub-agents: each run is in the session file once, under its op's
    ``childSession`` (seed 002's form, the op hosted one run), and the file grows by about the
    same amount per level (it doubled per level when ``childSessions`` repeated the run:
    the deepest run was written 4,096 times)."""
    sizes = {}
    for depth in (4, 8, 12):
        agenttrace.new_session(f"chain{depth}")
        run_chain(depth)
        traced.handle.force_flush()
        sizes[depth] = len(session_text(tmp_path, f"chain{depth}"))
    document = json.loads(session_text(tmp_path, "chain12"))
    assert sorted(agent_runs(document)) == sorted(["Deepest", *(f"A{n}" for n in range(1, 13))])
    node, names = document["runs"][0], []
    while True:
        (op,) = (op for turn in node["turns"] for op in turn["ops"] if op["name"] == "delegate")
        assert "childSessions" not in op and op["kind"] == "session"
        node = op["childSession"]
        names.append(node["agentName"])
        if node["agentName"] == "Deepest":
            break
    assert names == [*(f"A{n}" for n in range(11, 0, -1)), "Deepest"]
    assert sizes[12] - sizes[8] < 1.5 * (sizes[8] - sizes[4]), sizes  # linear, not 16x


def test_several_runs_of_one_op_are_written_once_each(traced: Traced, tmp_path: Path) -> None:
    """A discussion of three sub-agents under one tool call: while only the first has run, the
    op holds it as ``childSession``; then ``childSessions`` holds all three, each once."""
    session = agenttrace.new_session("discussion")
    seen: list[dict[str, Any]] = []

    @agenttrace.agent("Speaker")
    def speaker(name: str) -> str:
        with agenttrace.tool("say"):
            return name

    @agenttrace.tool
    def discuss() -> None:
        speaker("Ann")
        agenttrace.force_flush()  # the file, with Ann's run ended and this op still running
        seen.append(json.loads(session_text(tmp_path, "discussion")))
        speaker("Bob")
        speaker("Cy")

    @agenttrace.agent("Host")
    def host() -> None:
        discuss()

    host()
    traced.handle.force_flush()
    op = seen[0]["runs"][0]["turns"][0]["ops"][0]
    assert "childSessions" not in op and op["childSession"]["endedAt"] > 0
    assert agent_runs(seen[0]) == ["Host", "Speaker"]
    document = json.loads(session_text(tmp_path, session.session_id))
    op = document["runs"][0]["turns"][0]["ops"][0]
    assert "childSession" not in op and op["kind"] == "session"
    assert [run["path"] for run in op["childSessions"]] == ["1.1:1", "1.1:2", "1.1:3"]
    assert agent_runs(document) == ["Host", "Speaker", "Speaker", "Speaker"]


def test_on_optree_hands_each_sub_agent_run_once(traced: Traced) -> None:
    """The live tree has the file's form: a subscriber that serialises it gets each run once."""
    trees: list[dict[str, Any]] = []
    unsubscribe = agenttrace.on_optree(lambda root: trees.append(json.loads(json.dumps(root))))
    run_chain(12)
    traced.handle.force_flush()
    unsubscribe()
    assert sorted(agent_runs(trees[-1])) == sorted(["Deepest", *(f"A{n}" for n in range(1, 13))])


# --- resume -----------------------------------------------------------------------------------


@pytest.mark.parametrize("keep", ["both", "stream", "snapshot"])
async def test_resume_from_either_file_restores_everything(
    traced: Traced, tmp_path: Path, keep: str
) -> None:
    first = await first_run(traced, tmp_path)
    sessions = tmp_path / "sessions"
    before = stream_events(sessions, first.session_id)
    if keep == "stream":
        snapshot_path(sessions, first.session_id).unlink()
    if keep == "snapshot":
        stream_path(sessions, first.session_id).unlink()
    path = (
        stream_path(sessions, first.session_id)
        if keep == "stream"
        else snapshot_path(sessions, first.session_id)
    )
    agenttrace.use_session(None)
    with ScriptedModel(SCRIPTS) as model:
        answer, session = await run_resumed(
            str(path), "What will you order?", {**OPTIONS, "api_base": model.api_base}
        )
    traced.handle.force_flush()
    assert session.session_id == first.session_id
    assert answer == "Jack and Jill have answered."
    after = session.events
    assert after[: len(before)] == before
    new = after[len(before) :]
    # The first run's 23 events (the seed's 20, the root's reset to the merged discuss result
    # it sent, its answer), then the new prompt.
    assert new[0]["message_id"] == "msg_024" and new[0]["content"] == "What will you order?"
    ids = [e["message_id"] for e in after]
    assert ids == sorted(set(ids)) == [f"msg_{i:03d}" for i in range(1, len(ids) + 1)]
    assert sorted(session.agents) == ["agent_001", "agent_002", "agent_003"]
    assert session.agent_counter == 3
    # Jack and Jill kept their transcripts: their new requests carried the old conversation.
    jack = session.revivify("agent_002")
    assert jack.transcript[0]["content"] == "You work in HR..."
    assert [e["role"] for e in jack.transcript] == [
        "system", "user", "assistant", "user",  # the first run
        "user", "assistant", "user",  # the resumed run: the prompt, his answer, Jill's
    ]  # fmt: skip
    # The new run's root span links to the previous run's trace.
    roots = [s for s in traced.spans() if attrs(s).get(sc.PATH) == "0"]
    previous, resumed = roots[0], roots[-1]
    assert resumed.links and resumed.links[0].context.trace_id == previous.context.trace_id
    assert attrs(resumed)[sc.RESUMED_FROM] == format(previous.context.trace_id, "032x")
    # The session file has both runs. When the first run's file was lost, its tree is
    # rebuilt from the stream's op_accounted lines: every op, no span, no end (the stream
    # cannot say the run ended: it is marked interrupted).
    runs = read_session_file(snapshot_path(sessions, first.session_id)).runs
    assert len(runs) == 2
    assert runs[-1]["traceId"] == format(resumed.context.trace_id, "032x")
    if keep == "stream":
        assert "span" not in runs[0] and runs[0]["attributes"]["agenttrace.interrupted"]
        ops = [op for turn in runs[0]["turns"] for op in turn["ops"]]
        assert [op["path"] for op in ops] == ["1.1", "1.2", "2.1", "2.2", "3.1", "3.2", "4.1"]


async def test_resuming_a_resumed_session(traced: Traced, tmp_path: Path) -> None:
    first = await first_run(traced, tmp_path)
    path = str(stream_path(tmp_path / "sessions", first.session_id))
    with ScriptedModel(SCRIPTS) as model:
        options = {**OPTIONS, "api_base": model.api_base}
        for prompt in ("One?", "Two?"):
            agenttrace.use_session(None)
            _, session = await run_resumed(path, prompt, options)
            traced.handle.force_flush()
    ids = [e["message_id"] for e in session.events]
    assert len(ids) == len(set(ids)) == 23 + 2 * 14  # each run ends in the root's reset
    assert len(read_session_file(snapshot_path(tmp_path / "sessions", first.session_id)).runs) == 3
    root_heard = [
        e["content"] for e in session.revivify("agent_001").transcript if e["role"] == "user"
    ]
    assert root_heard == ["Create Jack and Jill for a cafe discussion", "One?", "Two?"]


def test_resume_refuses_what_is_not_a_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("hello\n")
    with pytest.raises(agenttrace.SessionFileError, match="not an agenttrace event stream"):
        agenttrace.resume(bad)
    working = tmp_path / "a" / "b"
    working.mkdir(parents=True)
    monkeypatch.chdir(working)
    # A path from the working directory (here tmp_path/etc/passwd), never from the sessions dir.
    with pytest.raises(agenttrace.SessionFileError, match=r"^\.\./\.\./etc/passwd: no such file$"):
        agenttrace.resume("../../etc/passwd", sessions_dir=tmp_path)
    with pytest.raises(agenttrace.SessionFileError, match="not a session id"):
        agenttrace.resume("..escape", sessions_dir=tmp_path)
    with pytest.raises(agenttrace.SessionFileError, match="no session"):
        agenttrace.resume("nosuchsession", sessions_dir=tmp_path)


def test_agents_created_outside_a_run_and_by_name(traced: Traced) -> None:
    session = agenttrace.new_session()
    helper = Agent(name="Helper")
    assert helper.agent_id == "agent_001"

    @agenttrace.agent("Planner")
    def plan() -> None:
        pass

    plan()
    plan()  # the same function agent: registered once
    assert session.list_agents() == {"agent_001": "Helper", "agent_002": "Planner"}
    assert os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP") == "True"


def test_an_agent_id_given_from_outside_is_never_handed_out_again() -> None:
    """An agent registered under an id the session did not allocate (an object that carries its
    own agent_id) still moves the counter: no two agents ever share an id."""
    session = agenttrace.Session("ids")
    session.log_agent_created("agent_005", name="Given")
    assert session.allocate_agent_id() == "agent_006"
    session.log_agent_created("agent_003", name="Older")  # below the counter: it stays
    assert session.allocate_agent_id() == "agent_007"


def test_load_session_rebuilds_sub_agents_of_any_depth_root_first(tmp_path: Path) -> None:
    """Agents nested far deeper than Python's stack (each created by the one before) are rebuilt
    root first, each before its sub-agents, and each goes into its parent's ``.subagents``."""
    from .fuzz.crafted import agent_chain

    path = tmp_path / "chain.events.jsonl"
    path.write_bytes(agent_chain(2000))
    order: list[str] = []

    class Rebuilt:
        def __init__(self, record: agenttrace.AgentRecord) -> None:
            self.subagents: dict[str, Any] = {}
            order.append(record.agent_id)

    root, _ = agenttrace.load_session(path, lambda record, session: Rebuilt(record))
    assert order == [f"agent_{n:03d}" for n in range(1, 2001)]
    agent, depth = root, 0
    while agent.subagents:
        (agent,) = agent.subagents.values()
        depth += 1
    assert depth == 1999


def test_a_lone_surrogate_is_written_as_its_escape_and_reads_back(traced: Traced) -> None:
    """Text with a lone surrogate (a file name decoded with surrogateescape, "\\udc80" read
    from a file) has no UTF-8: the stream holds its JSON escape, and reading gives it back."""
    session = agenttrace.new_session()
    session.log_agent_created("agent_001", name="Lister")
    session.log_transcript_entry("agent_001", {"role": "tool", "content": "report\udc80.txt"})
    traced.handle.force_flush()
    stream = stream_path(traced.handle.settings.sessions_dir, session.session_id)
    data = stream.read_bytes()
    data.decode("utf-8")  # valid UTF-8 throughout
    assert b"report\\udc80.txt" in data
    assert read_session_file(stream).events[-1]["content"] == "report\udc80.txt"


def test_a_lone_surrogate_in_a_tool_call_reaches_every_file(traced: Traced) -> None:
    """A tool named after, called with and returning text that has no UTF-8 (a file name decoded
    with surrogateescape): the session file and the ledger are written all the same (as the
    text's JSON escape) and read back; nothing is lost to an encoding error."""
    name = "report\udc80.txt"

    @agenttrace.tool
    def open_file(path: str) -> str:
        return f"contents of {path}"

    session = agenttrace.new_session()
    with agenttrace.agent("Lister"):
        open_file(name)
    assert traced.handle.force_flush()
    settings = traced.handle.settings
    saved = read_session_file(snapshot_path(settings.sessions_dir, session.session_id))
    [op] = saved.runs[0]["turns"][0]["ops"]
    assert name in json.dumps(op, ensure_ascii=False)
    rows = [json.loads(line) for line in settings.billing_file.read_bytes().splitlines()]
    assert [row["providerLabel"] for row in rows] == ["open_file"]
