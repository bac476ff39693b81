"""An LLM op returns its whole request from the session file alone (issue 21 item 5).

Each loop runs against the local LLM server, which records every request body litellm sent:
``full_request(loaded, op)`` of each LLM op must be exactly that body's messages, read from the
session file (its op nodes and its events), for an append-only loop with tool calls, a sliding
window, a compaction, a framework that rewrites its history, instructions sent beside the
transcript, and a resumed session. The index behind it is checked against the transcripts a
live session had, over random rewrites.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import litellm
import pytest

import agenttrace
from agenttrace.formats.session import requests
from agenttrace.formats.session.files import LoadedFile, read_session_file
from agenttrace.formats.session.optree import hosted_sessions, session_ops
from agenttrace.formats.session.requests import RequestIndex, RequestUnavailable, full_request
from agenttrace.model.events import api_message
from agenttrace.session.state import Session

from .conftest import Traced
from .llm_server import LLMServer, Reply
from .test_transcript_reset import run_rewriter

MODEL = "openai/gpt-4o-mini"


def complete(llm: LLMServer, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
    return litellm.completion(
        model=MODEL, messages=messages, api_base=llm.api_base, api_key="test-key", **kwargs
    )


def loaded_file(traced: Traced, tmp_path: Path) -> LoadedFile:
    traced.handle.force_flush()
    (path,) = (tmp_path / "sessions").glob("*.json.gz")
    return read_session_file(path)


def llm_ops(loaded: LoadedFile) -> list[dict[str, Any]]:
    """Every LLM op of every run, sub-agents included, in start order."""
    found: list[dict[str, Any]] = []

    def walk(session: Any) -> None:
        for op in session_ops(session):
            if op.get("kind") == "llm":
                found.append(op)  # type: ignore[arg-type]
            for child in hosted_sessions(op):
                walk(child)

    for run in loaded.runs:
        walk(run)
    return sorted(found, key=lambda op: op["span"]["startTimeUnixNano"])


def assert_every_request_rebuilt(loaded: LoadedFile, llm: LLMServer) -> None:
    ops = llm_ops(loaded)
    sent = [request.body["messages"] for request in llm.requests]
    assert len(ops) == len(sent)
    for op, messages in zip(ops, sent, strict=True):
        assert "replyMessageId" in op
        assert full_request(loaded, op) == messages, op["path"]


def history_of(length: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    while len(history) < length:
        role = "user" if len(history) % 2 else "assistant"
        history.append({"role": role, "content": f"{role} message {len(history)} " + "x" * 50})
    if history[-1]["role"] != "user":
        history.append({"role": "user", "content": "go on"})
    return history


# --- real loops against the recording server --------------------------------------------------


def test_an_append_only_loop_with_tool_calls(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "look", "arguments": '{"q": 1}'}}
    llm.reset(Reply(content="", tool_calls=[call]), Reply(content="one"), Reply(content="two"))
    history = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]

    @agenttrace.agent("Appender")
    def run() -> None:
        reply = complete(llm, history).choices[0].message
        history.append({"role": "assistant", "content": None, "tool_calls": [call]})
        history.append({"role": "tool", "tool_call_id": "c1", "content": f"looked {reply.role}"})
        history.append(
            {"role": "assistant", "content": complete(llm, history).choices[0].message.content}
        )
        history.append({"role": "user", "content": "and then?"})
        complete(llm, history)

    run()
    loaded = loaded_file(traced, tmp_path)
    assert_every_request_rebuilt(loaded, llm)
    # The op's request payload is a delta; the whole request is not written again per call.
    last = llm_ops(loaded)[-1]
    assert len(json.loads(last["request"]["payload"])) == 1
    assert set(last) >= {"replyMessageId"} and "instructions" not in last
    # What it returns is the caller's: changing it changes nothing in the file's events.
    mine = full_request(loaded, last)
    mine[2]["tool_calls"][0]["function"]["name"] = "changed"
    assert full_request(loaded, last) == llm.requests[-1].body["messages"]


def test_a_sliding_window(traced: Traced, llm: LLMServer, tmp_path: Path) -> None:
    history = history_of(30)

    @agenttrace.agent("Windowed")
    def run() -> None:
        for number in range(8):
            history.append({"role": "user", "content": f"question {number}"})
            reply = complete(llm, history)
            history.append({"role": "assistant", "content": reply.choices[0].message.content})
            del history[1:3]  # the oldest exchange; the system prompt stays

    run()
    loaded = loaded_file(traced, tmp_path)
    assert any(e["event_type"] == "transcript_reset" for e in loaded.events)
    assert_every_request_rebuilt(loaded, llm)


def test_a_compaction(traced: Traced, llm: LLMServer, tmp_path: Path) -> None:
    history = history_of(20)

    @agenttrace.agent("Compactor")
    def run() -> None:
        for number in range(9):
            if number % 3 == 2:  # a summary in place of all but the last exchange
                summary = {"role": "user", "content": f"Summary {number} of what came before."}
                history[1:-2] = [summary]
            history.append({"role": "user", "content": f"question {number}"})
            reply = complete(llm, history)
            history.append({"role": "assistant", "content": reply.choices[0].message.content})

    run()
    loaded = loaded_file(traced, tmp_path)
    resets = [e for e in loaded.events if e["event_type"] == "transcript_reset"]
    assert resets and any("reused" in e for e in resets)
    assert_every_request_rebuilt(loaded, llm)


def test_a_framework_that_rewrites_its_history(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    agent = run_rewriter(llm)
    loaded = loaded_file(traced, tmp_path)
    assert [full_request(loaded, op) for op in llm_ops(loaded)] == agent.sent
    assert_every_request_rebuilt(loaded, llm)


@agenttrace.agent_class
class Listener:
    """An agent that hears before it asks, and sends its instructions beside its transcript."""

    def __init__(self, llm: LLMServer) -> None:
        self.name = "Listener"
        self.llm = llm
        self.transcript: list[dict[str, Any]] = []

    @agenttrace.hears
    def harken(self, text: str) -> None:
        self.transcript.append({"role": "user", "content": text})

    @agenttrace.agent
    def respond(self) -> str:
        system = [{"role": "system", "content": "You listen. Secret: sk-ant-api03-" + "q" * 40}]
        reply = complete(self.llm, [*system, *self.transcript]).choices[0].message.content
        self.transcript.append({"role": "assistant", "content": reply})
        return str(reply)


def test_instructions_sent_beside_the_transcript(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    listener = Listener(llm)
    for text in ("hello", "and again"):
        listener.harken(text)
        listener.respond()
    loaded = loaded_file(traced, tmp_path)
    ops = llm_ops(loaded)
    assert all("instructions" in op for op in ops)
    sent = [request.body["messages"] for request in llm.requests]
    for op, messages in zip(ops, sent, strict=True):
        rebuilt = full_request(loaded, op)
        # The instructions are as recorded: redacted, like every payload.
        assert rebuilt[0]["content"] == "You listen. Secret: [REDACTED]"
        assert "sk-ant-api03" in messages[0]["content"]
        assert rebuilt[1:] == messages[1:]


def test_a_resumed_session(traced: Traced, llm: LLMServer, tmp_path: Path) -> None:
    history = history_of(12)

    @agenttrace.agent("Resumable")
    def run(calls: int) -> None:
        for number in range(calls):
            history.append({"role": "user", "content": f"question {number}"})
            reply = complete(llm, history)
            history.append({"role": "assistant", "content": reply.choices[0].message.content})
            del history[1:3]

    run(3)
    traced.handle.force_flush()
    (path,) = (tmp_path / "sessions").glob("*.json.gz")
    agenttrace.use_session(None)
    agenttrace.resume(path)
    run(3)
    loaded = loaded_file(traced, tmp_path)
    assert len(loaded.runs) == 2
    assert_every_request_rebuilt(loaded, llm)


# --- what the file cannot say -------------------------------------------------------------------


def test_a_failed_attempt_says_it_has_no_request(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    llm.reset(Reply(status=400, error_message="bad request"))

    @agenttrace.agent("Failing")
    def run() -> None:
        with pytest.raises(litellm.BadRequestError):
            complete(llm, [{"role": "user", "content": "hi"}], num_retries=0)

    run()
    loaded = loaded_file(traced, tmp_path)
    (op,) = llm_ops(loaded)
    with pytest.raises(RequestUnavailable, match="it failed, and a request enters"):
        full_request(loaded, op)


def test_older_files_are_read_by_the_events_linkage(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    history = history_of(10)

    @agenttrace.agent("Old")
    def run() -> None:
        for number in range(4):
            history.append({"role": "user", "content": f"question {number}"})
            reply = complete(llm, history)
            history.append({"role": "assistant", "content": reply.choices[0].message.content})
            del history[1:3]

    run()
    loaded = loaded_file(traced, tmp_path)
    old = LoadedFile(loaded.path, loaded.kind, loaded.events, copy.deepcopy(loaded.runs))
    for op in llm_ops(old):
        del op["replyMessageId"]
    sent = [request.body["messages"] for request in llm.requests]
    assert [full_request(old, op) for op in llm_ops(old)] == sent


def test_older_files_say_when_instructions_are_missing(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    listener = Listener(llm)
    listener.harken("hello")
    listener.respond()
    loaded = loaded_file(traced, tmp_path)
    (op,) = llm_ops(loaded)
    del op["replyMessageId"], op["instructions"]
    with pytest.raises(RequestUnavailable, match="sent 2 messages; the file rebuilds 1"):
        full_request(loaded, op)


def test_instructions_cut_by_their_cap_are_said_to_be(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    listener = Listener(llm)
    listener.harken("hello")
    listener.respond()
    loaded = loaded_file(traced, tmp_path)
    (op,) = llm_ops(loaded)
    op["instructions"]["payload"] = op["instructions"]["payload"][:20]
    with pytest.raises(RequestUnavailable, match="cut by the payload cap"):
        full_request(loaded, op)


def test_a_tool_op_is_not_an_llm_attempt() -> None:
    with pytest.raises(RequestUnavailable, match="not an LLM attempt"):
        RequestIndex([]).full_request({"kind": "tool", "path": "1.2"})


# --- the index against live transcripts ---------------------------------------------------------


@pytest.fixture(params=["runs", "lists"])
def index_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each index test twice: transcripts as runs, and (``lists``) every transcript kept as a
    list from its first change on, copied every 5 changes, as one of too many runs is."""
    if request.param == "lists":
        monkeypatch.setattr(requests, "RUNS_LIMIT", 0)
        monkeypatch.setattr(requests, "SNAPSHOT_EVERY", 5)
    return str(request.param)


def rewrites(rng: random.Random, transcript: list[dict[str, Any]]) -> Iterator[list[Any]]:
    """Requests a framework might send next: the transcript as it is, with a message more, a
    window, a compaction (a summary before the recent entries), a dropped or edited message."""
    messages = [api_message(entry) for entry in transcript]
    new = {"role": "user", "content": f"new {rng.random():.6f}"}
    yield [*messages, new]
    yield [*messages[:1], *messages[3:], new]
    yield [*messages[:1], {"role": "user", "content": f"summary {rng.random()}"}, *messages[-2:]]
    if len(messages) > 2:
        dropped = rng.randrange(1, len(messages))
        yield [*messages[:dropped], *messages[dropped + 1 :], new]
        edited = [dict(m) for m in messages]
        edited[rng.randrange(len(edited))]["content"] = "edited"
        yield edited


@pytest.mark.parametrize("seed", range(12))
def test_the_index_rebuilds_what_each_request_was(seed: int, index_mode: str) -> None:
    rng = random.Random(seed)
    session = Session()
    agents = [session.allocate_agent_id() for _ in range(2)]
    for agent in agents:
        session.log_agent_created(agent, initial=[{"role": "system", "content": f"I am {agent}"}])
    expected: dict[str, list[dict[str, Any]]] = {}
    for step in range(60):
        agent = rng.choice(agents)
        record = session.agents[agent]
        request = rng.choice(list(rewrites(rng, record.transcript)))
        # What log_request does with a request, then the reply.
        session.log_transcript_reset(agent, rng.randrange(0, 2), request)
        if rng.random() < 0.3:
            session.log_piece_of_text(agent, "a piece", session.events[-1]["message_id"])
        before = [api_message(entry) for entry in record.transcript]
        reply = session.log_transcript_entry(agent, {"role": "assistant", "content": f"r{step}"})
        expected[reply] = before
        if rng.random() < 0.4:
            session.log_transcript_entry(
                agent, {"role": "tool", "content": "x", "tool_call_id": "t"}
            )
    index = RequestIndex(session.events)
    for reply, before in expected.items():
        agent, transcript = index.transcript_before(reply)
        assert [api_message(entry) for entry in transcript] == before, reply
    # And, at the end, what a replay of the events rebuilds (``Session.restore``).
    restored = Session()
    restored.restore(session.events, raw_lines=None)
    ends = [
        {"message_id": f"end_{a}", "event_type": "piece_of_text", "agent_id": a} for a in agents
    ]
    index = RequestIndex([*session.events, *ends])
    for agent in agents:
        assert index.transcript_before(f"end_{agent}")[1] == restored.agents[agent].transcript


def hand_made_events(rng: random.Random) -> list[dict[str, Any]]:
    """Events as a hand-edited or damaged file may have them: ids out of order or repeated,
    resets that reuse what is not there, keep more than there is, or are cut short, agents
    created twice or never."""
    agents = ["agent_001", "agent_002", 7]
    events: list[dict[str, Any]] = []
    ids: list[Any] = []
    for number in range(rng.randrange(1, 40)):
        message = f"msg_{rng.randrange(1, 60):03d}" if rng.random() < 0.2 else f"msg_{number + 100}"
        if rng.random() < 0.05:
            message = ["not", "an", "id"]  # type: ignore[assignment]
        agent = rng.choice(agents)
        kind = rng.choice(["transcript_entry"] * 5 + ["transcript_reset"] * 3 + ["agent_created"])
        event: dict[str, Any] = {"message_id": message, "event_type": kind, "agent_id": agent}
        if kind == "transcript_entry":
            event["role"] = rng.choice(["user", "assistant"])
            event["content"] = f"c{number}"
        elif kind == "transcript_reset":
            event["kept"] = rng.choice([0, 1, 2, 5, -1, "1"])
            event["entries"] = new = rng.randrange(0, 3)
            if ids and rng.random() < 0.7:
                pairs = [[rng.choice(ids), rng.choice(ids)] for _ in range(rng.randrange(1, 3))]
                event["reused"] = [*pairs, new] if rng.random() < 0.5 else [new, *pairs]
        events.append(event)
        ids.append(message)
    return events


@pytest.mark.parametrize("seed", range(300))
def test_the_index_reads_hand_made_events_as_a_replay_does(seed: int, index_mode: str) -> None:
    events = hand_made_events(random.Random(seed))
    restored = Session()
    restored.restore(list(events), raw_lines=None)
    # An event of no agent ends a reset's write, as the end of the file does for a replay;
    # then one event per agent asks for its transcript.
    closing = {"message_id": "close", "event_type": "piece_of_text", "agent_id": None}
    ends = [
        {"message_id": f"end_{agent}", "event_type": "piece_of_text", "agent_id": agent}
        for agent in restored.agents
    ]
    index = RequestIndex([*events, closing, *ends])
    for agent, record in restored.agents.items():
        assert index.transcript_before(f"end_{agent}")[1] == record.transcript, agent


def test_a_long_history_whose_old_tool_results_are_cleared(monkeypatch: pytest.MonkeyPatch) -> None:
    """Context editing: each call clears the oldest tool result still there (a placeholder in
    its place), so the transcript is made of many runs and shares most of them with the one
    before; past a chain of shared marks one is kept whole (``MARK_CHAIN``)."""
    session = Session()
    agent = session.allocate_agent_id()
    session.log_agent_created(agent, initial=[{"role": "system", "content": "work"}])
    sent: list[dict[str, Any]] = [{"role": "system", "content": "work"}]
    expected: dict[str, list[dict[str, Any]]] = {}
    for step in range(150):
        sent.append({"role": "user", "content": f"do {step}"})
        if step % 2:
            sent[2 * (step // 2) + 1] = {"role": "user", "content": f"[cleared {step}]"}
        session.log_transcript_reset(agent, 1, sent[1:])
        expected[
            session.log_transcript_entry(agent, {"role": "assistant", "content": f"r{step}"})
        ] = [dict(m) for m in sent]
        sent.append({"role": "assistant", "content": f"r{step}"})
    monkeypatch.setattr(requests, "RUNS_LIMIT", 60)  # from about the 120th call on: a list
    index = RequestIndex(session.events)
    track = index._tracks[agent]
    assert track.listed is not None and len(track.listed.copies) > 1
    assert max(len(track.runs_after(p)) for p in range(track.listed.since)) > 50
    for reply, before in expected.items():
        assert [api_message(e) for e in index.transcript_before(reply)[1]] == before, reply
