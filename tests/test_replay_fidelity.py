"""A re-entered run's LLM replies come from the journal (issue 22): the user's code must not be
able to tell. The same code runs live, then re-entered, and sees the same types (litellm's
``ModelResponse``, its ``CustomStreamWrapper`` of ``ModelResponseStream`` chunks), the same
dumps, the same text, reasoning and tool calls, and litellm's own helpers work on them."""

from __future__ import annotations

import asyncio
from typing import Any

import litellm
import pytest
from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper

import agenttrace

from .conftest import Traced
from .llm_server import LLMServer, Reply
from .test_litellm import http
from .test_llm_steps import rearm

CALL = {
    "id": "call_7",
    "type": "function",
    "function": {"name": "charge", "arguments": '{"amount": 5}'},
}


def replies() -> list[Reply]:
    return [
        Reply(content="I will pay.", tool_calls=[CALL], reasoning="the tea costs 5"),
        Reply(content="Paid, thank you!"),
    ]


def seen_response(response: Any) -> dict[str, Any]:
    """What user code sees of a plain reply."""
    message = response.choices[0].message
    return {
        "type": type(response),
        "dump": response.model_dump(),
        "message type": type(message),
        "text": message.content,
        "reasoning": getattr(message, "reasoning_content", None),
        "tool calls": [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls]
        if message.tool_calls
        else None,
    }


def seen_stream(stream: Any, chunks: list[Any]) -> dict[str, Any]:
    """What user code sees of a stream it has read to its end (``chunks``, as it read them)."""
    built = litellm.stream_chunk_builder(chunks)
    kept = litellm.stream_chunk_builder(stream.chunks)
    return {
        "class": stream.__class__,
        "is litellm's stream": isinstance(stream, CustomStreamWrapper),
        "has a completion stream": hasattr(stream, "completion_stream"),
        "chunk types": {type(chunk) for chunk in chunks},
        "chunks": [chunk.model_dump() for chunk in chunks],
        # litellm's own list: on replay the chunks as given (live, its last chunk is the
        # provider's, without the usage litellm works out on the one it gives)
        "kept": len(stream.chunks),
        "text": "".join(c.choices[0].delta.content or "" for c in chunks if c.choices),
        "built": seen_response(built),
        "built from kept": {k: v for k, v in seen_response(kept).items() if k != "dump"},
    }


def ask_sync(llm: LLMServer, stream: bool) -> list[dict[str, Any]]:
    seen = []
    for temperature in (0.1, 0.2):  # two replies: two steps
        options = {"stream_options": {"include_usage": True}} if stream else {}
        kwargs = http(llm, stream=stream, temperature=temperature, **options)
        reply = litellm.completion(**kwargs)
        seen.append(seen_stream(reply, list(reply)) if stream else seen_response(reply))
    return seen


async def ask_async(llm: LLMServer, stream: bool) -> list[dict[str, Any]]:
    seen = []
    for temperature in (0.1, 0.2):
        options = {"stream_options": {"include_usage": True}} if stream else {}
        kwargs = http(llm, stream=stream, temperature=temperature, **options)
        reply = await litellm.acompletion(**kwargs)
        if stream:
            seen.append(seen_stream(reply, [chunk async for chunk in reply]))
        else:
            seen.append(seen_response(reply))
    return seen


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_the_same_code_sees_the_same_replies_live_and_replayed(
    traced: Traced, tmp_path: Any, llm: LLMServer, stream: bool, is_async: bool
) -> None:
    @agenttrace.agent("Shop")
    def shop() -> list[dict[str, Any]]:
        if is_async:
            return asyncio.run(ask_async(llm, stream))
        return ask_sync(llm, stream)

    llm.reset(*replies())
    live = shop()
    assert len(llm.requests) == 2
    # The live replies are what this test means them to be (else the comparison proves little).
    first = live[0]["built"] if stream else live[0]
    assert first["text"] == "I will pay." and first["reasoning"] == "the tea costs 5"
    assert first["tool calls"] == [("call_7", "charge", '{"amount": 5}')]
    if stream:
        assert live[0]["is litellm's stream"] and live[0]["class"] is CustomStreamWrapper
        assert live[0]["chunks"][-1]["usage"]["total_tokens"] == 18  # the usage-only chunk
    traced.handle.force_flush()

    rearm(tmp_path)
    llm.reset(Reply(content="not asked"))
    replayed = shop()
    assert llm.requests == []  # answered from the journal
    assert replayed == live


def test_a_replayed_stream_closed_early_ends_its_span(
    traced: Traced, tmp_path: Any, llm: LLMServer
) -> None:
    @agenttrace.agent("Shop")
    def shop(read_all: bool) -> str:
        stream = litellm.completion(**http(llm, stream=True))
        if read_all:
            return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        first = next(stream)
        stream.close()
        return str(first.choices[0].delta.content)

    llm.reset(Reply(content="Hello streaming world"))
    assert shop(True) == "Hello streaming world"
    traced.handle.force_flush()
    rearm(tmp_path)
    llm.reset(Reply(content="not asked"))
    assert shop(False) == "Hell"
    assert llm.requests == []
    llm_spans = [s for s in traced.spans() if (s.attributes or {}).get("agenttrace.kind") == "llm"]
    assert len(llm_spans) == 2 and all(s.end_time for s in llm_spans)
    assert (llm_spans[1].attributes or {}).get("agenttrace.replayed") is True
