"""Seed 001's four examples are conformance cases: run through agenttrace, agent code in the
seed's style gives the seed's event streams field for field, up to the linkage fields DESIGN §3
allows (ts, trace_id, span_id, path) and agent ids allocated as agent_001, agent_002, ...

The examples are copied from the seed into tests/data/seed001_examples.json. Examples 2-4 are
fragments that start at msg_030, msg_100 and msg_200: their sessions are resumed from a stream
that holds what came before (Example 1's opening, or a stand-in), so the ids line up exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agenttrace
from examples.cafe import JILL_PROMPT, SCRIPTS, Agent, run_first
from examples.scripted_model import ScriptedModel

from .conftest import Traced
from .helpers import canonical_events

EXAMPLES = json.loads((Path(__file__).parent / "data" / "seed001_examples.json").read_text())[
    "examples"
]
LINKAGE = ("ts", "trace_id", "span_id", "path")
OPTIONS = {"api_key": "offline-test-key"}


def seed(number: int, agents: dict[str, str]) -> list[dict[str, Any]]:
    """Example ``number`` with the seed's agent ids replaced by the ones agenttrace allocates."""
    text = json.dumps(EXAMPLES[str(number)]["events"])
    for theirs in sorted(agents, key=len, reverse=True):  # agent_jill_inner before agent_jill
        text = text.replace(theirs, agents[theirs])
    return json.loads(text)


def written(sessions: Path, session: agenttrace.Session) -> list[dict[str, Any]]:
    return canonical_events(sessions / f"{session.session_id}.events.jsonl")


def without_linkage(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for event in events:
        assert "ts" in event, event  # events logged outside any span have no trace linkage
    return [{k: v for k, v in e.items() if k not in LINKAGE} for e in events]


def stand_in(first: int, last: int, agent: str) -> list[dict[str, Any]]:
    """Events msg_{first}..msg_{last} of an unrelated agent, so the next id is msg_{last + 1}."""
    events: list[dict[str, Any]] = [
        {
            "message_id": f"msg_{first:03d}",
            "event_type": "agent_created",
            "agent_id": agent,
            "name": "Bystander",
        }
    ]
    for number in range(first + 1, last + 1):
        events.append(
            {
                "message_id": f"msg_{number:03d}",
                "event_type": "transcript_entry",
                "agent_id": agent,
                "role": "user",
                "content": f"filler {number}",
            }
        )
    return events


def write_stream(directory: Path, name: str, events: list[dict[str, Any]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


class SeedAgent(Agent):
    """The cafe agent, with tools for every agent (the scenarios give them to sub-agents too)."""

    def tools_enabled(self) -> bool:
        return True


def revive(options: dict[str, Any]) -> Any:
    def build(record: agenttrace.AgentRecord, session: agenttrace.Session) -> SeedAgent:
        return SeedAgent.revive(record, options)  # type: ignore[return-value]

    return build


async def test_example_1_jack_and_jill(traced: Traced, tmp_path: Path) -> None:
    with ScriptedModel(SCRIPTS) as model:
        answer = await run_first({**OPTIONS, "api_base": model.api_base})
    traced.handle.force_flush()
    session = agenttrace.current_session()
    events = written(tmp_path / "sessions", session)
    expected = seed(
        1, {"agent_root": "agent_001", "agent_jack": "agent_002", "agent_jill": "agent_003"}
    )
    assert without_linkage(events[:20]) == expected
    # After the seed's excerpt, the root's last request: the cafe sends discuss's two results
    # as one tool message (api_messages), so its transcript is reset to what it sent...
    assert without_linkage(events[20:22]) == [
        {
            "message_id": "msg_021",
            "event_type": "transcript_reset",
            "agent_id": "agent_001",
            "kept": 6,
            "entries": 1,
        },
        {
            "message_id": "msg_022",
            "event_type": "transcript_entry",
            "agent_id": "agent_001",
            "role": "tool",
            "content": "Hi, I'm Jack. *extends hand*\n*smiles* Hello Jack, I'm Jill.",
            "tool_call_id": "c3",
        },
    ]
    # ... and then its final answer: what its run returned.
    assert answer == "Jack and Jill have met in the cafe and introduced themselves."
    # It is the text the model said, as the plain str the run returned; the session knows the
    # entry that said it (what an agent hearing it links to).
    assert type(answer) is str
    assert events[22]["message_id"] == session.reply_saying(answer) == "msg_023"
    assert len(events) == 23
    # Never both substance and cause on one event.
    assert not [e for e in events if "substance" in e and "cause" in e]
    # Linkage: every event names the span and path it was logged in.
    discuss = [e for e in events if e["message_id"] in ("msg_012", "msg_013")]
    assert {e["path"] for e in discuss} == {"3.2"}
    assert events[14]["path"] == "3.2.1.1"  # Jack's reply, in his LLM call
    # Created and prompted before the run started, the root's first events have no span.
    assert "trace_id" not in events[0] and "trace_id" not in events[1]
    assert len({e["trace_id"] for e in events[2:]}) == 1


async def test_example_2_inner_monologue(traced: Traced, tmp_path: Path) -> None:
    inner_prompt = "You are Jill's inner voice..."
    agents = {"agent_root": "agent_001", "agent_jack": "agent_002", "agent_jill": "agent_003"}
    opening = seed(1, agents)[:16]  # up to Jack's introduction reaching the root
    sessions = tmp_path / "sessions"
    path = write_stream(sessions, "example2", opening + stand_in(17, 29, "agent_004"))

    class Jill(SeedAgent):
        @agenttrace.tool
        async def task(self, name: str, system_prompt: str | None = None) -> None:
            # This scenario's task creates silently: the seed logs no result for it.
            self.subagents[name] = SeedAgent(name, system_prompt, self.language_model, self.options)

    scripts = {
        JILL_PROMPT: [
            {"tool": "task", "id": "c4", "input": {"name": "Inner", "system_prompt": inner_prompt}},
            {
                "tool": "discuss",
                "id": "c5",
                "input": {
                    "speakers": ["Inner"],
                    "prompt": "Jack just introduced himself. What should I say?",
                },
            },
            {"text": "*smiles* Hello Jack, I'm Jill."},
        ],
        inner_prompt: [{"text": "Be friendly but not over-eager. A simple greeting with a smile."}],
    }
    with ScriptedModel(scripts) as model:
        options = {**OPTIONS, "api_base": model.api_base}
        root, session = agenttrace.load_session(path, revive(options))
        jack = root.subagents["Jack"]
        jill = Jill.revive(session.revivify("agent_003"), options)
        await jill.response(max_turns=1)  # Jill creates her inner voice
        utterance = agenttrace.LoggedString(jack.transcript[-1]["content"], "msg_015")
        jack.inform(jill, "[Jack]: " + utterance)
        answer = await jill.response()
    traced.handle.force_flush()
    events = written(sessions, session)
    expected = seed(2, {**agents, "agent_jill_inner": "agent_005"})
    assert without_linkage(events[29:]) == expected
    assert answer == "*smiles* Hello Jack, I'm Jill." and session.reply_saying(answer) == "msg_039"


async def test_example_3_hook_denies_a_fifth_sub_agent(traced: Traced, tmp_path: Path) -> None:
    hook_prompt = "Monitor resource usage..."
    opening: list[dict[str, Any]] = [
        {"message_id": "msg_001", "event_type": "agent_created", "agent_id": "agent_001"},
        {
            "message_id": "msg_002",
            "event_type": "transcript_entry",
            "agent_id": "agent_001",
            "role": "user",
            "content": "Search three archives",
        },
        {
            "message_id": "msg_003",
            "event_type": "transcript_entry",
            "agent_id": "agent_001",
            "role": "assistant",
            "tool_calls": [
                {
                    "id": f"s{i}",
                    "function": {"name": "task", "arguments": f'{{"name": "Searcher{i}"}}'},
                }
                for i in (1, 2, 3)
            ],
        },
        *[
            {
                "message_id": f"msg_{3 + i:03d}",
                "event_type": "agent_created",
                "agent_id": f"agent_{1 + i:03d}",
                "cause": "msg_003",
                "name": f"Searcher{i}",
            }
            for i in (1, 2, 3)
        ],
        *[
            {
                "message_id": f"msg_{6 + i:03d}",
                "event_type": "transcript_entry",
                "agent_id": "agent_001",
                "role": "tool",
                "tool_call_id": f"s{i}",
                "content": f"Created subagent: Searcher{i}",
            }
            for i in (1, 2, 3)
        ],
    ]
    sessions = tmp_path / "sessions"
    path = write_stream(sessions, "example3", opening + stand_in(10, 99, "agent_005"))

    class HookAgent(SeedAgent):
        """A hook: its instructions are not part of its transcript."""

        def __init__(self, name: str, instructions: str, model: str, options: dict[str, Any]):
            super().__init__(name, None, model, options)
            self.instructions = instructions

        async def response(self, max_turns: int | None = None) -> Any:
            self.transcript = [
                {"role": "system", "content": self.instructions},
                *self.transcript,
            ]
            try:
                return await super().response(max_turns)
            finally:
                self.transcript = self.transcript[1:]  # the instructions stay out of it

    class Root(SeedAgent):
        hook: HookAgent | None = None

        @agenttrace.tool
        async def task(self, name: str, system_prompt: str | None = None) -> str | None:
            if name == "ResourceMonitor":
                self.hook = HookAgent(name, system_prompt or "", self.language_model, self.options)
                return None
            assert self.hook is not None
            count = len(self.subagents)
            self.hook.harken(
                f"Agent '{self.agent_id}' is attempting to create subagent '{name}'. "
                f"Current subagent count: {count}. Approve?"
            )
            verdict = await self.hook.response()
            if verdict and verdict.startswith("DENY"):
                reason = verdict.split(".", 1)[1].strip()
                return f"Error: Action blocked by hook '{self.hook.name}': {reason}"
            return await super().task(name, system_prompt)

    scripts = {
        "": [
            None,  # the opening's call that created the three searchers
            {
                "tool": "task",
                "id": "c9",
                "input": {"name": "ResourceMonitor", "system_prompt": hook_prompt},
            },
            {"tool": "task", "id": "c10", "input": {"name": "Searcher4"}},
        ],
        hook_prompt: [{"text": "DENY. Maximum subagents (3) already reached."}],
    }
    with ScriptedModel(scripts) as model:  # type: ignore[arg-type]
        options = {**OPTIONS, "api_base": model.api_base}

        def build(record: agenttrace.AgentRecord, session: agenttrace.Session) -> Any:
            return (Root if record.agent_id == "agent_001" else SeedAgent).revive(record, options)

        root, session = agenttrace.load_session(path, build)
        assert sorted(root.subagents) == ["Searcher1", "Searcher2", "Searcher3"]
        await root.response(max_turns=1)  # the root sets up the resource hook
        await root.response(max_turns=1)  # and asks for a fourth searcher
    traced.handle.force_flush()
    events = written(sessions, session)
    expected = seed(3, {"agent_root": "agent_001", "agent_resource_hook": "agent_006"})
    assert without_linkage(events[99:]) == expected
    assert "Searcher4" not in session.list_agents().values()


async def test_example_4_external_trigger(traced: Traced, tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    opening = [
        {
            "message_id": "msg_001",
            "event_type": "agent_created",
            "agent_id": "agent_001",
            "name": "Watcher",
        }
    ]
    path = write_stream(sessions, "example4", opening + stand_in(2, 199, "agent_002"))
    scripts = {"": [{"text": "I'll reload the data and notify the main agent."}]}
    with ScriptedModel(scripts) as model:
        options = {**OPTIONS, "api_base": model.api_base}
        session = agenttrace.resume(path)
        watcher = SeedAgent.revive(session.revivify("agent_001"), options)
        watcher.harken("File changed: data.json")  # an external event, heard as a user message
        answer = await watcher.response()
    traced.handle.force_flush()
    events = written(sessions, session)
    assert without_linkage(events[199:]) == seed(4, {"agent_watcher": "agent_001"})
    assert session.reply_saying(answer) == "msg_201"


@pytest.mark.parametrize("number", ["1", "2", "3", "4"])
def test_the_copied_examples_match_the_seed(number: str) -> None:
    """The test data is the seed's text, not a retelling (checked where the seeds are present)."""
    seed_file = (
        Path(__file__).resolve().parents[2] / "shared" / "seeds" / "001_4a106809fcaa50b4.txt"
    )
    if not seed_file.exists():
        pytest.skip(f"the seed documents are not beside this checkout ({seed_file})")
    text = seed_file.read_text()
    for event in EXAMPLES[number]["events"]:
        assert json.dumps(event, ensure_ascii=False) in text
