"""A turn describes itself (issue 21, item 5): its node in the opTree carries the prompts its
first LLM attempt added (system, user) and its latest attempt's assistant text, capped and
redacted as the attempts recorded them, so a consumer of the opTree needs no event stream."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import litellm
import pytest

import agenttrace
from examples.cafe import FIRST_PROMPT

from .conftest import Traced
from .helpers import record_demo_here
from .llm_server import LLMServer, Reply


def turns_of(tmp_path: Path) -> list[dict[str, Any]]:
    (snapshot,) = (tmp_path / "sessions").glob("*.json.gz")
    document = json.loads(gzip.decompress(snapshot.read_bytes()))
    return [turn for run in document["runs"] for turn in run["turns"]]


def test_each_turn_carries_its_prompts_and_its_reply(traced: Traced, tmp_path: Path) -> None:
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]

    @agenttrace.agent("Asker")
    def run() -> None:
        for question, answer in (("Capital of France?", "Paris."), ("And Italy?", "Rome.")):
            history.append({"role": "user", "content": question})
            with agenttrace.turn():
                reply = litellm.completion(
                    model="gpt-4o-mini", messages=history, mock_response=answer
                )
            history.append({"role": "assistant", "content": reply.choices[0].message.content})

    run()
    traced.handle.force_flush()
    first, second = turns_of(tmp_path)
    assert first["prompts"] == [
        {"role": "system", "text": "You are terse.", "size": 14},
        {"role": "user", "text": "Capital of France?", "size": 18},
    ]
    assert first["reply"] == {"text": "Paris.", "size": 6}
    # The second turn's prompts are those its request used, not only what it added.
    assert second["prompts"] == [
        {"role": "system", "text": "You are terse.", "size": 14},
        {"role": "user", "text": "Capital of France?", "size": 18},
        {"role": "user", "text": "And Italy?", "size": 10},
    ]
    assert second["reply"]["text"] == "Rome."


CALL = {"id": "call_1", "type": "function", "function": {"name": "charge", "arguments": '{"n": 5}'}}
TOOLS = [{"type": "function", "function": {"name": "charge", "parameters": {"type": "object"}}}]


def test_a_turn_that_adds_only_a_tool_result_says_what_it_was_asked_and_which_calls_it_made(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    llm.reset(Reply(content="I will charge.", tool_calls=[CALL]), Reply(content="Charged 5."))
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You run a till."},
        {"role": "user", "content": "Charge 5."},
    ]

    @agenttrace.agent("Till")
    def run() -> None:
        for tools in (TOOLS, None):
            with agenttrace.turn():
                reply = litellm.completion(
                    model="openai/gpt-4o-mini",
                    api_base=llm.api_base,
                    api_key="test-key",
                    messages=history,
                    **({"tools": tools} if tools else {}),
                )
            message = reply.choices[0].message
            history.append(message.model_dump(exclude_none=True))
            if message.tool_calls:
                history.append({"role": "tool", "tool_call_id": "call_1", "content": "paid"})

    run()
    traced.handle.force_flush()
    first, second = turns_of(tmp_path)
    asked = [
        {"role": "system", "text": "You run a till.", "size": 15},
        {"role": "user", "text": "Charge 5.", "size": 9},
    ]
    assert first["prompts"] == second["prompts"] == asked  # the second added a tool result
    assert first["reply"] == {
        "text": "I will charge.",
        "size": 14,
        "toolCalls": [{"id": "call_1", "name": "charge", "arguments": '{"n": 5}'}],
    }
    assert second["reply"] == {"text": "Charged 5.", "size": 10}
    # The first request offered a tool and got a call; the second offered none: the model could
    # only answer, and did.
    (first_op,) = first["ops"]
    (second_op,) = second["ops"]
    assert first_op["request"]["isFinalTurn"] is False
    assert first_op["response"]["isFinalAnswer"] is False
    assert second_op["request"]["isFinalTurn"] is True
    assert second_op["response"]["isFinalAnswer"] is True


def test_the_demos_later_turns_say_what_they_were_asked(tmp_path: Path) -> None:
    snapshot, _ = record_demo_here(tmp_path)
    document = json.loads(gzip.decompress(snapshot.read_bytes()))
    (run,) = [run for run in document["runs"] if run.get("agentName") == "Agent"]
    turns = run["turns"]
    assert len(turns) >= 3
    # Turns 2 and 3 added only tool results: they were asked what turn 1 was.
    asked = [{"role": "user", "text": FIRST_PROMPT, "size": len(FIRST_PROMPT)}]
    assert [turn["prompts"] for turn in turns[:3]] == [asked] * 3
    # The root's first reply calls the task tool (to create Jack).
    assert [call["name"] for call in turns[0]["reply"]["toolCalls"]] == ["task"]


@pytest.mark.init(max_payload_bytes=4096)
def test_a_turns_texts_are_redacted_as_its_attempt_recorded_them(
    traced: Traced, tmp_path: Path
) -> None:
    @agenttrace.agent("Asker")
    def run() -> None:
        litellm.completion(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": '{"password": "hunter2-canary"} log me in'}],
            mock_response="Done.",
        )

    run()
    traced.handle.force_flush()
    (turn,) = turns_of(tmp_path)
    (prompt,) = turn["prompts"]
    assert "hunter2-canary" not in prompt["text"] and "[REDACTED]" in prompt["text"]
    assert turn["reply"]["text"] == "Done."
