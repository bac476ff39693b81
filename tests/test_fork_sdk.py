"""Fork through the LLM SDKs (docs/design/replay.md, "Fork"): a run whose LLM calls are made with
the real OpenAI SDK (chat completions, the Responses API) or the real Anthropic SDK (messages,
the ``messages.stream`` helper), sync and async, plain and streamed, to the scripted servers on
127.0.0.1, is forked at its last LLM call: the only request sent is at the label, and it names
the fork's model, carries its system prompt where that API puts it and its settings; the span,
the journal and the ledger name the model it was sent to."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import agenttrace
from agenttrace.model.fork import CHAT, MESSAGES, RESPONSES, Fork, check_settings

from .anthropic_server import AnthropicServer, text
from .anthropic_server import Reply as ClaudeReply
from .conftest import Traced
from .llm_server import LLMServer, Reply
from .test_anthropic_sdk import aclient as claude_aclient
from .test_anthropic_sdk import claude, server
from .test_anthropic_sdk import client as claude_client
from .test_fork import journal, last_llm_label
from .test_openai_sdk import aclient, client
from .test_replay import ledger

__all__ = ["claude", "server"]  # the fixtures, used by name

PROMPT = "Answer in five words."
CHARGES: list[int] = []


@agenttrace.tool(effect="effect")
def charge(amount: int) -> str:
    CHARGES.append(amount)
    return f"ch_{len(CHARGES)}"


Ask = Callable[[list[dict[str, Any]]], str]
"""One LLM call of the program: its messages in, the reply's text out."""


def openai_chat(llm: LLMServer, stream: bool, is_async: bool) -> Ask:
    def ask(messages: list[dict[str, Any]]) -> str:
        asked: dict[str, Any] = {"model": "gpt-4o-mini", "messages": [SYSTEM, *messages]}
        if stream:  # the usage the server says, not counted from the text: the same each time
            asked.update(stream=True, stream_options={"include_usage": True})
        if not is_async:
            reply = client(llm).chat.completions.create(**asked)
            if stream:
                return "".join(c.choices[0].delta.content or "" for c in reply if c.choices)
            return str(reply.choices[0].message.content)

        async def go() -> str:
            reply = await aclient(llm).chat.completions.create(**asked)
            if stream:
                return "".join([c.choices[0].delta.content or "" async for c in reply if c.choices])
            return str(reply.choices[0].message.content)

        return asyncio.run(go())

    return ask


def openai_responses(llm: LLMServer, stream: bool, is_async: bool) -> Ask:
    def ask(messages: list[dict[str, Any]]) -> str:
        reply = client(llm).responses.create(
            model="gpt-4o-mini", instructions="Be kind.", input=messages
        )
        return str(reply.output_text)

    return ask


def anthropic_messages(claude: AnthropicServer, stream: bool, is_async: bool) -> Ask:
    def ask(messages: list[dict[str, Any]]) -> str:
        asked = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 64,
            "system": "Be kind.",
            "messages": messages,
        }
        if stream and is_async:

            async def go() -> str:
                async with claude_aclient(claude).messages.stream(**asked) as events:
                    return await events.get_final_text()

            return asyncio.run(go())
        if stream:
            with claude_client(claude).messages.stream(**asked) as events:
                return events.get_final_text()
        if is_async:
            reply = asyncio.run(claude_aclient(claude).messages.create(**asked))
        else:
            reply = claude_client(claude).messages.create(**asked)
        return str(reply.content[0].text)

    return ask


SYSTEM = {"role": "developer", "content": "Be kind."}
"""The chat program's system prompt, as a reasoning model's developer message."""

CASES = {
    # name: (the program's calls, stream, async, the fork's model and settings)
    "chat-sync": (openai_chat, False, False, "gpt-4o", {"temperature": 0.2, "max_tokens": 50}),
    "chat-async-stream": (openai_chat, True, True, "gpt-4o", {"temperature": 0.2}),
    "responses": (openai_responses, False, False, "gpt-4o", {"max_output_tokens": 50}),
    "messages-async": (anthropic_messages, False, True, "claude-haiku-4-5", {"max_tokens": 50}),
    "stream-sync": (anthropic_messages, True, False, "claude-haiku-4-5", {"temperature": 0.2}),
    "stream-async": (anthropic_messages, True, True, "claude-haiku-4-5", {"top_k": 5}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_fork_sends_its_overrides_on_sdk_calls_at_its_label(
    traced: Traced,
    tmp_path: Path,
    llm: LLMServer,
    claude: AnthropicServer,
    case: str,
) -> None:
    calls, stream, is_async, model, settings = CASES[case]
    anthropic = calls is anthropic_messages
    ask = calls(claude if anthropic else llm, stream, is_async)  # type: ignore[operator]

    @agenttrace.agent("Shop")
    def shop(prompt: str) -> str:
        messages = [{"role": "user", "content": prompt}]
        first = ask(messages)
        paid = charge(5)
        messages += [
            {"role": "assistant", "content": first},
            {"role": "user", "content": f"paid {paid}"},
        ]
        return ask(messages)

    def script(*said: str) -> None:
        if anthropic:
            claude.reset(*[ClaudeReply(blocks=[text(s)]) for s in said])
        else:
            llm.reset(*[Reply(content=s) for s in said])

    server = claude if anthropic else llm
    CHARGES.clear()
    script("One tea.", "Here it is.")
    assert shop("a tea, please") == "Here it is."
    source = agenttrace.current_session()
    traced.handle.force_flush()
    at = last_llm_label(tmp_path, source)
    billed = ledger(tmp_path)
    script("A forked tea.")
    with agenttrace.forking(
        source.session_id, at=at, model=model, system_prompt=PROMPT, settings=settings
    ) as fork:
        assert shop("a tea, please") == "A forked tea."
    assert CHARGES == [5] and fork.report.served == 2  # the first call and the charge
    (sent,) = server.requests  # nothing before the label asked the model; one call at it
    body = sent.body
    assert body["model"] == model
    assert {key: body[key] for key in settings} == settings
    if anthropic:
        assert body["system"] == PROMPT
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    elif calls is openai_responses:
        assert body["instructions"] == PROMPT
    else:  # the developer message is the system prompt replaced
        assert body["messages"][0] == {"role": "developer", "content": PROMPT}
        assert [m["role"] for m in body["messages"]] == ["developer", "user", "assistant", "user"]
    # The journal's intent, the span and the ledger name the model the request was sent to.
    (live,) = [
        line
        for line in journal(tmp_path, fork.session.session_id)
        if line["state"] == "intent" and line["kind"] == "llm"
    ]
    assert (live["step"], live["name"]) == (at, model)
    source_span, span = [
        s for s in traced.ours() if (s.attributes or {}).get("agenttrace.path") == at
    ]
    assert source_span.name != span.name == f"chat {model}"
    assert span.attributes is not None and span.attributes["gen_ai.request.model"] == model
    # Billed at the new model's price: the same tokens as the source's call there, another cost.
    (bill,) = ledger(tmp_path)[len(billed) :]
    (was,) = [line for line in billed if line["path"] == at]
    assert (bill["path"], bill["model"], bill["tokens"]) == (at, model, was["tokens"])
    assert 0 < bill["costUsd"] != was["costUsd"], (bill, was)


def test_the_system_prompt_goes_where_each_api_puts_it() -> None:
    fork = Fork("s", "r", "1.1", model="m", system_prompt=PROMPT, settings={"temperature": 0})
    user = {"role": "user", "content": "hi"}
    asked = {"model": "x", "messages": [{"role": "system", "content": "old"}, user]}
    sent = fork.request(asked, CHAT)
    assert sent["messages"] == [{"role": "system", "content": PROMPT}, user]
    assert asked["messages"][0] == {"role": "system", "content": "old"}  # the program's kept
    assert fork.request({"messages": (user,)})["messages"] == [
        {"role": "system", "content": PROMPT},
        user,
    ]
    assert fork.request({"input": "hi"}, RESPONSES) == {
        "input": "hi",
        "instructions": PROMPT,
        "model": "m",
        "temperature": 0,
    }
    blocks = [{"type": "text", "text": "old", "cache_control": {"type": "ephemeral"}}]
    sent = fork.request({"system": blocks, "messages": [user]}, MESSAGES)
    assert sent["system"] == PROMPT and sent["messages"] == [user]
    for key in ("system", "instructions", "input"):
        with pytest.raises(ValueError, match=f"'{key}' cannot be set"):
            check_settings({key: "x"})
