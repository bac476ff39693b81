"""One comparison of a request with the copies an agent keeps, shared by its alignment with its
transcript and its fingerprint's digests (agenttrace.model.message_copies): what either takes
from the other is exactly what a comparison of its own would find."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import litellm

import agenttrace
from agenttrace.model import events as ev
from agenttrace.model import journal as j
from agenttrace.model.message_copies import ALIGNMENT, DIGESTS, vouched_copies
from agenttrace.model.request_digests import MessageDigests, llm_request_fingerprint

from .conftest import Traced
from .llm_server import LLMServer
from .test_journal_fingerprint import history, reference, request, said
from .test_litellm import http
from .test_llm_steps import llm_lines


def entries_of(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        ev.transcript_entry(ev.message_id(i + 1), "agent_001", ev.message_fields(m))
        for i, m in enumerate(messages)
    ]


def calling(arguments: str) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def test_the_alignment_sees_a_tool_call_edited_in_place() -> None:
    # Its copies are deep: a list inside a message, edited in place, no longer equals its copy.
    messages = [*history(3), calling('{"a":1}')]
    entries = entries_of(messages)
    memory = ev.Alignment()
    assert ev.alignment(list(messages), entries, memory) == (0, 5)
    messages[-1]["tool_calls"][0]["function"]["arguments"] = '{"a":2}'
    assert ev.alignment(list(messages), entries, memory) == (0, 4)


def test_the_digests_take_the_alignments_copies_and_leave_theirs_for_the_reset() -> None:
    messages = history(6)
    entries = entries_of(messages)
    memory, digests = ev.Alignment(), MessageDigests()
    ev.alignment(messages, entries, memory)
    first = llm_request_fingerprint(request(messages), digests, memory)
    assert first == reference(request(messages))
    kept = digests.state[0]
    assert all(a is b for a, b in zip(memory.state[0], kept, strict=True))  # the same objects
    vouched = vouched_copies(memory.vouched, messages, DIGESTS)
    assert vouched is not None and all(a is b for a, b in zip(vouched, kept, strict=True))
    assert vouched_copies(memory.vouched, messages, ALIGNMENT) is None  # not its own again


def test_a_retry_of_the_same_list_edited_in_place_is_compared_again(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    # The same list sent twice, a message in it edited in place between the two calls (same
    # length, same last message): what the first call's comparisons found is not taken for the
    # second. Then a window and an append, through the shared comparison.
    messages = history(6)
    sent: list[dict[str, Any]] = []

    @agenttrace.agent("Looper")
    def loop() -> None:
        for call in range(6):
            kwargs = http(llm, messages=messages, temperature=0)
            sent.append(j.llm_request({**kwargs, "messages": copy.deepcopy(messages)}))
            reply = litellm.completion(**kwargs)
            if call == 0:
                messages[2]["content"] = "edited in place"
                continue
            if call == 1:
                messages[3] = {"role": "user", "content": [{"type": "text", "text": "one"}]}
                continue
            if call == 2:
                messages[3]["content"][0]["text"] = "two"  # nested, in place
                continue
            messages.append({"role": "assistant", "content": reply.choices[0].message.content})
            messages.append(said(100 + call))
            if call == 4:
                del messages[1:3]

    loop()
    traced.handle.force_flush()
    intents = [line for line in llm_lines(tmp_path) if line["state"] == "intent"]
    assert [line["fingerprint"] for line in intents] == [reference(asked) for asked in sent]
    assert len({line["fingerprint"] for line in intents}) == 6
    # The transcript is what the last call sent, then its reply.
    transcript = agenttrace.current_session().revivify("agent_001").messages()
    assert transcript[:-1] == sent[-1]["messages"]


def test_a_window_loop_with_edits_in_place_logs_what_was_sent(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    # A window: the reset finds its runs by the copies the fingerprint's comparison vouched for;
    # a message edited in place inside the window (its text, then a nested part) is new.
    messages = history(9)
    nested = {"role": "user", "content": [{"type": "text", "text": "nested"}]}
    messages[8] = nested
    sent: list[dict[str, Any]] = []
    transcripts: list[list[Any]] = []

    @agenttrace.agent("Windowed")
    def loop() -> None:
        for call in range(6):
            kwargs = http(llm, messages=messages, temperature=0)
            sent.append(j.llm_request({**kwargs, "messages": copy.deepcopy(messages)}))
            reply = litellm.completion(**kwargs)
            now = agenttrace.current_session().revivify("agent_001").messages()
            transcripts.append(copy.deepcopy(now))
            messages.append({"role": "assistant", "content": reply.choices[0].message.content})
            messages.append(said(100 + call))
            del messages[1:3]
            if call == 1:
                messages[3]["content"] = "edited in place"
            if call == 2:
                assert nested in messages
                nested["content"][0]["text"] = "edited, nested"

    loop()
    traced.handle.force_flush()
    intents = [line for line in llm_lines(tmp_path) if line["state"] == "intent"]
    assert [line["fingerprint"] for line in intents] == [reference(asked) for asked in sent]
    for asked, transcript in zip(sent, transcripts, strict=True):
        assert transcript[:-1] == asked["messages"]
