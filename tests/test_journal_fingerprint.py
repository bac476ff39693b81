"""An LLM request's fingerprint hashes each message on its own, and an agent's memory of the
messages its last request sent (``agenttrace.model.request_digests``) spares hashing them
again: the fingerprint must be the one a computation from scratch gives, whatever the loop
does with its history, and a message edited in place must change it."""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import litellm
import pytest
from msgspec import to_builtins

import agenttrace
from agenttrace.model import journal as j
from agenttrace.model import journal_lines as jl
from agenttrace.model.reentry import Reentry, check_policy
from agenttrace.model.request_digests import (
    REACH,
    MessageDigests,
    llm_request_fingerprint,
)

from .conftest import Traced
from .helpers import ROOT
from .llm_server import LLMServer
from .test_litellm import http
from .test_llm_steps import llm_lines


def reference(request: dict[str, Any]) -> str:
    """The definition, computed without any memory or fast path: sha256 of the version, the
    canonical JSON of all but the messages, and each message's digest (the stdlib's JSON of
    the message with its volatile keys left out at any depth)."""

    def stable(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: stable(v) for k, v in value.items() if k not in j.VOLATILE_KEYS}
        if isinstance(value, list):
            return [stable(v) for v in value]
        return value

    def encoded(value: Any) -> bytes:
        text = json.dumps(stable(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return text.encode()

    rest = {k: v for k, v in request.items() if k != "messages"}
    digests = b"".join(hashlib.sha256(encoded(m)).digest() for m in request["messages"])
    return "sha256:" + hashlib.sha256(j.LLM_FINGERPRINT + encoded(rest) + digests).hexdigest()


def request(messages: list[Any], **params: Any) -> dict[str, Any]:
    return j.llm_request({"model": "gpt-4o-mini", "messages": messages, **params})


def said(index: int) -> dict[str, Any]:
    role = "user" if index % 2 else "assistant"
    return {"role": role, "content": f"message {index}: what to change next, é ✓"}


def history(length: int) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You are careful."}] + [said(i) for i in range(length)]


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The messages hashed (the real digest, each call noted)."""
    noted: list[Any] = []
    digest = j.message_digest

    def noting(message: Any) -> bytes:
        noted.append(message)
        return digest(message)

    monkeypatch.setattr(j, "message_digest", noting)
    return noted


def test_the_definition_is_the_reference_computation() -> None:
    asked = request(history(5), temperature=0.2, tools=[{"type": "function", "name": "f"}])
    assert j.llm_fingerprint(asked) == reference(asked)
    assert llm_request_fingerprint(asked, MessageDigests()) == reference(asked)
    assert j.llm_fingerprint(asked).startswith("sha256:")


@pytest.mark.parametrize("window", [False, True], ids=["append", "window"])
def test_a_loop_gets_the_fingerprints_a_computation_from_scratch_gives(
    window: bool, hashed: list[Any]
) -> None:
    memory = MessageDigests()
    messages = history(40)
    for call in range(30):
        asked = request(messages, temperature=0)
        hashed.clear()
        assert llm_request_fingerprint(asked, memory) == reference(asked), call
        # Only what is new since the last request is hashed: the reply and the next question.
        assert hashed == (messages if call == 0 else messages[-2:]), call
        sent = len(messages)
        messages.append({"role": "assistant", "content": f"reply {call}"})
        messages.append(said(1000 + call))
        if window:
            del messages[1:3]  # the oldest exchange; the system prompt stays
    copies, digests = memory.state
    assert len(copies) == len(digests) // 32 == sent


def test_a_framework_that_rebuilds_its_messages_each_call_is_served_from_the_memory(
    hashed: list[Any],
) -> None:
    memory = MessageDigests()
    messages = history(20)
    llm_request_fingerprint(request([dict(m) for m in messages]), memory)
    hashed.clear()
    rebuilt = request([*(dict(m) for m in messages), said(99)])  # equal messages, new dicts
    assert llm_request_fingerprint(rebuilt, memory) == reference(rebuilt)
    assert hashed == [said(99)]


def test_a_message_edited_in_place_changes_the_fingerprint() -> None:
    memory = MessageDigests()
    messages = history(10)
    before = llm_request_fingerprint(request(messages), memory)
    messages[4]["content"] = "something else entirely"  # the same dict, new content
    after = llm_request_fingerprint(request(messages), memory)
    assert after != before and after == reference(request(messages))
    # Nested content edited in place: a part of a message's content list.
    messages[2] = {"role": "user", "content": [{"type": "text", "text": "first"}]}
    first = llm_request_fingerprint(request(messages), memory)
    messages[2]["content"][0]["text"] = "second"
    second = llm_request_fingerprint(request(messages), memory)
    assert first != second and second == reference(request(messages))
    # A tool call's arguments edited in place.
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": '{"a":1}'}}],
        }
    )
    third = llm_request_fingerprint(request(messages), memory)
    messages[-1]["tool_calls"][0]["function"]["arguments"] = '{"a":2}'
    fourth = llm_request_fingerprint(request(messages), memory)
    assert third != fourth and fourth == reference(request(messages))


def test_a_number_changed_to_its_equal_of_another_type_changes_the_fingerprint() -> None:
    # 1 == True == 1.0 in Python, not in JSON: such a message is hashed every time.
    memory = MessageDigests()
    messages = [*history(3), {"role": "user", "content": "x", "weight": 1}]
    one = llm_request_fingerprint(request(messages), memory)
    messages[-1]["weight"] = True
    assert llm_request_fingerprint(request(messages), memory) != one
    messages[-1]["weight"] = 1.0
    assert llm_request_fingerprint(request(messages), memory) == reference(request(messages))


def test_volatile_keys_are_left_out_at_any_depth() -> None:
    memory = MessageDigests()
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "hi", "id": "m1", "timestamp": 1},
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    first = llm_request_fingerprint(request(messages, metadata={"run": 1}), memory)
    messages[0]["id"] = "m2"
    messages[0]["timestamp"] = 2
    call["id"] = "call_9"
    again = request(messages, api_key="sk-2", metadata={"run": 2})
    assert llm_request_fingerprint(again, memory) == first
    assert j.llm_fingerprint(again) == first == reference(again)
    # Text that only mentions a volatile key is the question itself.
    quoting = request([{"role": "user", "content": 'say {"id": 1}'}])
    quoting_2 = request([{"role": "user", "content": 'say {"id": 2}'}])
    assert j.llm_fingerprint(quoting) != j.llm_fingerprint(quoting_2)


def test_order_tools_and_parameters_count() -> None:
    memory = MessageDigests()
    messages = history(6)
    base = llm_request_fingerprint(request(messages), memory)
    swapped = [*messages[:2], messages[3], messages[2], *messages[4:]]
    assert llm_request_fingerprint(request(swapped), memory) != base
    assert llm_request_fingerprint(request(swapped), memory) == reference(request(swapped))
    tools = [{"type": "function", "function": {"name": "search"}}]
    assert llm_request_fingerprint(request(messages, tools=tools), memory) != base
    assert llm_request_fingerprint(request(messages, temperature=1), memory) != base
    assert llm_request_fingerprint(request(messages[:-1]), memory) != base
    # Messages never run into the parameters: a message moved out of the list is not a
    # parameter's text.
    assert j.llm_fingerprint(request([])) != j.llm_fingerprint(request([{}]))


def test_a_window_dropping_more_than_the_reach_is_still_right() -> None:
    memory = MessageDigests()
    messages = history(3 * REACH)
    llm_request_fingerprint(request(messages), memory)
    compacted = messages[:1] + messages[2 * REACH :] + [said(5000)]
    assert llm_request_fingerprint(request(compacted), memory) == reference(request(compacted))
    assert llm_request_fingerprint(request(compacted), memory) == reference(request(compacted))


def test_messages_that_are_not_plain_data_are_hashed_each_time() -> None:
    class Message:
        def __init__(self, content: str) -> None:
            self.content = content

        def model_dump(self, exclude_none: bool = False) -> dict[str, Any]:
            return {"role": "user", "content": self.content}

    memory = MessageDigests()
    message = Message("first")
    messages: list[Any] = [*history(2), message]
    first = llm_request_fingerprint(request(messages), memory)
    message.content = "second"
    second = llm_request_fingerprint(request(messages), memory)
    assert first != second
    plain = request([*history(2), {"role": "user", "content": "second"}])
    assert second == reference(plain)


def test_the_same_request_has_the_same_fingerprint_in_another_process() -> None:
    asked = request(history(8), temperature=0.5, tools=[{"type": "function", "name": "f"}])
    memory = MessageDigests()
    llm_request_fingerprint(request(history(6)), memory)  # a memory made by earlier requests
    here = llm_request_fingerprint(asked, memory)
    code = (
        "import json, sys\n"
        "from agenttrace.model import journal as j\n"
        "print(j.llm_fingerprint(json.loads(sys.stdin.read())))\n"
    )
    there = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(asked),
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout.strip()
    assert there == here == reference(asked)


@pytest.mark.parametrize("size", [0, 1, 1983, 1984, 1985, 2048, 3 * 1984, 100_000])
def test_a_request_hashed_in_pieces_has_the_digest_of_the_whole(size: int) -> None:
    # Hashed in pieces under 2,048 bytes so that hashlib keeps the GIL: the digest is the same.
    arguments = {"text": "x" * size}
    whole = json.dumps(j.tool_request("write", arguments), sort_keys=True, separators=(",", ":"))
    assert j.tool_fingerprint("write", arguments) == (
        "sha256:" + hashlib.sha256(whole.encode()).hexdigest()
    )


def test_a_journal_written_under_the_old_definition_is_read_and_its_llm_step_asked_again() -> None:
    asked = request(history(3), temperature=0)
    old = "sha256:" + hashlib.sha256(j.canonical(asked)).hexdigest()  # the whole request's JSON
    key = ("run-1", "1.1", 1)
    lines = [
        to_builtins(jl.intent_line(key, agent_id="agent_001", name="gpt-4o-mini", effect=None,
                      request_fingerprint=old, kind="llm")),
        to_builtins(jl.done_line(key, agent_id="agent_001", kind="llm", name="gpt-4o-mini",
                    result={"choices": []})),
    ]  # fmt: skip
    journal = j.Journal(lines)
    step = journal.step("run-1", "1.1")
    assert step is not None and (step.state, step.fingerprint) == ("done", old)
    reentry = Reentry("run-1", 2, journal, check_policy(None))
    assert old != j.llm_fingerprint(asked)
    plan = reentry.plan_llm("1.1", j.llm_fingerprint(asked))
    assert (plan.what, plan.attempt) == ("run", 2)
    # Under the new definition the same journal answers it.
    lines[0]["fingerprint"] = j.llm_fingerprint(asked)
    again = Reentry("run-1", 2, j.Journal(lines), check_policy(None))
    assert again.plan_llm("1.1", j.llm_fingerprint(asked)).what == "replay"


def test_an_agents_calls_journal_the_fingerprints_of_what_each_one_asked(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    # A real loop through litellm: a window, then a message edited in place; each intent's
    # fingerprint is the reference one of the request as it was sent.
    messages = history(6)
    sent: list[dict[str, Any]] = []

    @agenttrace.agent("Looper")
    def loop() -> None:
        for call in range(5):
            kwargs = http(llm, messages=messages, temperature=0)
            sent.append(j.llm_request({**kwargs, "messages": copy.deepcopy(messages)}))
            reply = litellm.completion(**kwargs)
            messages.append({"role": "assistant", "content": reply.choices[0].message.content})
            messages.append(said(100 + call))
            if call % 2:
                del messages[1:3]
            if call == 2:
                messages[3]["content"] = "edited in place"

    loop()
    traced.handle.force_flush()
    intents = [line for line in llm_lines(tmp_path) if line["state"] == "intent"]
    assert [line["fingerprint"] for line in intents] == [reference(asked) for asked in sent]
    assert len(set(line["fingerprint"] for line in intents)) == 5


def test_a_message_whose_equality_raises_is_hashed_as_it_is() -> None:
    class Ambiguous:  # like an array: == gives no truth value
        def __eq__(self, other: object) -> bool:
            raise ValueError("truth value ambiguous")

        __hash__ = object.__hash__

        def __str__(self) -> str:
            return "ambiguous"

    memory = MessageDigests()
    messages: list[Any] = [*history(3), {"role": "user", "content": Ambiguous()}]
    for _ in range(2):
        asked = request(messages)
        assert llm_request_fingerprint(asked, memory) == j.llm_fingerprint(asked)
        messages.append(said(7))
