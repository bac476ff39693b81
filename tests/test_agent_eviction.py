"""Done agents evicted from memory and revived from the event stream (issue 38 item 9; seed 001,
Justification 5; docs/how-to/long-agents.md): a session of many short-lived sub-agents holds a
bounded number of agents, an evicted agent reads back as it was, and the files still hold
everything."""

from __future__ import annotations

import gc
import gzip
import json
import logging
from pathlib import Path
from typing import Any

import pytest

import agenttrace
from agenttrace._internal.config import Settings
from agenttrace.formats.session.files import read_session_file, snapshot_path, stream_path
from agenttrace.formats.session.spool import Ref
from agenttrace.session.state import DONE_AGENTS_KEPT
from agenttrace.testing.scripted_model import completion_body

from .conftest import Traced


@agenttrace.llm
def _chat(*, model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """An LLM call answered in process, as the scripted model answers (benchmarks/bench_agents.py
    makes the same one)."""
    reply = {"text": f"done: {messages[-1]['content']}"}
    return completion_body(reply, {"model": model, "messages": messages})


class _Worker:
    """One sub-agent per object; ``talks``: whether its run makes an LLM call."""

    def __init__(self, talks: bool = True) -> None:
        self.talks = talks

    @agenttrace.agent("Worker")
    def run(self, index: int) -> str:
        if not self.talks:
            return f"done {index}"
        messages = [{"role": "user", "content": f"task {index}"}]
        reply = _chat(model="gpt-4o-mini", messages=messages)
        return str(reply["choices"][0]["message"]["content"])


def _root_spawning(count: int, talks: bool = True, seen: dict[str, Any] | None = None) -> Any:
    """A root run whose tool runs ``count`` sub-agents one after another; ``seen`` gets each
    sub-agent's transcript as it was when its run ended."""

    @agenttrace.tool
    def delegate(index: int) -> str:
        worker = _Worker(talks)
        said = worker.run(index)
        if seen is not None:
            record = agenttrace.current_session().agents[worker.agent_id]  # type: ignore[attr-defined]
            seen[worker.agent_id] = _record_state(record)  # type: ignore[attr-defined]
        return said

    @agenttrace.agent("Root")
    def root() -> str:
        for index in range(count):
            delegate(index)
        return "done"

    return root


def _record_state(record: Any) -> tuple[Any, ...]:
    """An agent record's state: name, model, cause, parent, creation and transcript."""
    transcript = [dict(entry) for entry in record.transcript]
    return (record.name, record.language_model, record.cause, record.parent_id, transcript)


def _state(session: agenttrace.Session) -> dict[str, Any]:
    """What a resumed session restores, less times and trace ids (which differ by run)."""
    agents = {}
    for agent_id, record in session.agents.items():
        transcript = [
            {k: v for k, v in e.items() if k not in ("ts", "trace_id", "span_id")}
            for e in record.transcript
        ]
        agents[agent_id] = (record.name, record.parent_id, record.cause, transcript)
    return {
        "agents": agents,
        "messages": session.message_counter,
        "agent_counter": session.agent_counter,
    }


def test_an_evicted_agents_transcript_is_revived_as_it_was(traced: Traced) -> None:
    session = agenttrace.new_session("evicting")
    session.done_agents_kept = 2
    seen: dict[str, Any] = {}
    _root_spawning(12, seen=seen)()
    traced.handle.force_flush()
    evicted = [agent_id for agent_id in seen if session.agents.is_evicted(agent_id)]
    assert evicted, "no sub-agent was evicted"
    assert session.agents_in_memory() < len(seen) + 1
    first = evicted[0]
    assert first not in {e.get("agent_id") for e in session.events}  # its events left memory
    revived = session.agent(first)
    assert _record_state(revived) == seen[first]
    assert revived.name == "Worker" and len(revived.transcript) == 2  # its request and reply
    # Every sub-agent, held or evicted, reads as it was when its run ended.
    for agent_id, state in seen.items():
        assert _record_state(session.agents[agent_id]) == state


def test_a_session_resumed_after_eviction_equals_one_without(
    traced: Traced, tmp_path: Path
) -> None:
    states = []
    for name, kept in (("evicting", 1), ("keeping", 10_000)):
        session = agenttrace.new_session(name)
        session.done_agents_kept = kept
        _root_spawning(10)()
        traced.handle.force_flush()
        sessions = tmp_path / "sessions"
        evicted = session.agents.evicted()
        live = _state(session)  # every agent revived: read back from the stream
        resumed = agenttrace.Session.load(stream_path(sessions, name))
        from_file = agenttrace.Session.load(snapshot_path(sessions, name))
        assert _state(resumed) == live == _state(from_file)
        # The session file holds every event, evicted agents' too.
        assert len(read_session_file(snapshot_path(sessions, name)).events) == (
            session.message_counter
        )
        states.append((live, evicted))
    (evicting, evicted), (keeping, kept) = states
    assert evicted > 0 and kept == 0
    assert evicting == keeping


def test_agents_held_in_memory_stay_bounded_over_2000_sub_agents(traced: Traced) -> None:
    session = agenttrace.new_session("many")
    session.done_agents_kept = 50
    _root_spawning(2000, talks=False)()
    assert session.agent_counter == 2001
    assert len(session.agents) == 2001  # every agent is still known ...
    assert session.agents_in_memory() <= 2 * 50 + 1  # ... and at most 101 are in memory
    assert len(session.events) <= 2 * 50 + 1  # their agent_created events, and the root's
    # An evicted one is revived on demand.
    assert session.agents.is_evicted("agent_002")
    assert session.agent("agent_002").name == "Worker"
    assert not session.agents.is_evicted("agent_002")


def test_an_evicted_agent_that_runs_again_keeps_its_id_and_transcript(
    traced: Traced, tmp_path: Path
) -> None:
    session = agenttrace.new_session("again")
    session.done_agents_kept = 1
    first = _Worker()
    _root_spawning(0)()  # the root agent, done

    @agenttrace.agent("Root")
    def root() -> None:
        first.run(0)
        for index in range(1, 6):  # enough done agents to evict ``first``
            _Worker().run(index)

    root()
    agent_id = first.agent_id  # type: ignore[attr-defined]
    assert session.agents.is_evicted(agent_id)
    created = session.agent_counter

    @agenttrace.agent("Root")
    def again() -> None:
        first.run(99)  # revived: its transcript goes on, no second agent_created

    again()
    assert session.agent_counter == created  # no new agent for it
    record = session.agent(agent_id)
    # Its new request restarted the conversation (a transcript_reset), as without eviction:
    # what the session holds is what the stream, replayed whole, says.
    assert [entry["content"] for entry in record.transcript] == ["task 99", "done: task 99"]
    resumed = agenttrace.Session.load(stream_path(tmp_path / "sessions", "again"))
    assert _record_state(resumed.agents[agent_id]) == _record_state(record)
    created_events = [e for e in resumed.events if e["event_type"] == "agent_created"]
    assert [e["agent_id"] for e in created_events].count(agent_id) == 1


def _root_fanning_out(count: int) -> Any:
    """A root run whose one tool call runs ``count`` sub-agents: one op hosts them all."""

    @agenttrace.tool
    def fan_out(count: int) -> int:
        for index in range(count):
            _Worker().run(index)
        return count

    @agenttrace.agent("Root")
    def root() -> str:
        fan_out(count)
        return "done"

    return root


def _hosted_runs(node: Any) -> int:
    """How many sub-agent runs the ops under ``node`` hosted, at every depth."""
    count = 0
    for turn_or_op in (*node.get("turns", ()), *node.get("ops", ())):
        count += _hosted_runs(turn_or_op)
    hosted = node.get("childSessions") or ([node["childSession"]] if "childSession" in node else [])
    return count + len(hosted) + sum(_hosted_runs(run) for run in hosted)


def _refs_held() -> int:
    gc.collect()
    return sum(1 for held in gc.get_objects() if type(held) is Ref)


@pytest.mark.parametrize("shape", ["a tool call each", "one tool call for all"])
def test_a_long_session_holds_spool_refs_per_merge_not_per_sub_agent(
    traced: Traced, tmp_path: Path, shape: str
) -> None:
    """A finished sub-agent run is compressed into the session's spool; the run's tree keeps
    where. Merged with its siblings, those places become one ref per merge, so the refs a long
    session holds do not grow by one or two per sub-agent it ever had, whether each sub-agent
    has its own tool call or one call hosts them all."""
    session = agenttrace.new_session("refs")
    spawn = _root_spawning if shape == "a tool call each" else _root_fanning_out
    spawn(100)()
    traced.handle.force_flush()
    before = _refs_held()
    spawn(300)()  # a second root run of the session: 300 more sub-agents
    traced.handle.force_flush()
    grown = _refs_held() - before
    assert grown < 100, f"{grown} spool refs more after 300 more sub-agents"
    # ... and the session file still holds every sub-agent's run, each once, its reply in it.
    path = snapshot_path(tmp_path / "sessions", "refs")
    text = gzip.decompress(path.read_bytes()).decode()
    assert session.agent_counter == 401
    missing = [i for i in range(300) if f'"done: task {i}"' not in text]
    assert not missing, f"sub-agent runs missing from the session file: {missing[:5]}"
    document = json.loads(text)
    assert sum(_hosted_runs(run) for run in document["runs"]) == 400
    assert len(read_session_file(path).events) == session.message_counter


@pytest.mark.init(done_agents_kept=3)
def test_how_many_done_agents_stay_is_a_setting(traced: Traced) -> None:
    session = agenttrace.new_session("setting")
    assert session.done_agents_kept == 3
    _root_spawning(20, talks=False)()
    assert session.agents_in_memory() <= 2 * 3 + 1
    assert session.agents.evicted() > 0


def test_the_setting_comes_from_agenttrace_done_agents_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert Settings.resolve({}).done_agents_kept == DONE_AGENTS_KEPT == 256
    assert Settings.resolve({"AGENTTRACE_DONE_AGENTS_KEPT": "8"}).done_agents_kept == 8
    assert (
        Settings.resolve({"AGENTTRACE_DONE_AGENTS_KEPT": "8"}, done_agents_kept=2).done_agents_kept
        == 2
    )
    with caplog.at_level(logging.WARNING, logger="agenttrace"):
        assert Settings.resolve({"AGENTTRACE_DONE_AGENTS_KEPT": "many"}).done_agents_kept == 256
    assert "AGENTTRACE_DONE_AGENTS_KEPT='many' is not a count" in caplog.text
