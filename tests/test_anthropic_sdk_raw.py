"""``with_raw_response`` and ``with_streaming_response`` through the Anthropic SDK's
instrumentation: each call is one span as the plain call is (the SDK's ``APIResponse`` /
``AsyncAPIResponse`` given back, its ``.parse()`` the traced reply or stream, its body still
the caller's to read), for ``messages`` and ``beta.messages``, sync and async, streamed and not,
and a re-entered run gets the same response object over the journaled reply without asking."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic._response import APIResponse, AsyncAPIResponse
from anthropic.types import Message
from anthropic.types.beta import BetaMessage

import agenttrace
from agenttrace import semconv as sc

from .anthropic_server import AnthropicServer, Reply, text
from .conftest import Traced, attrs
from .test_anthropic_sdk import (
    HI,
    MODEL,
    aclient,
    check_genai_attributes,
    claude,
    client,
    llm_spans,
    server,
    transcripts,
)
from .test_llm_steps import llm_lines, rearm

__all__ = ["claude", "server"]  # the fixtures, used by name


def _said(reply: Any, stream: bool) -> str:
    if not stream:
        return str(reply.content[0].text)
    return "".join(
        e.delta.text
        for e in reply
        if e.type == "content_block_delta" and e.delta.type == "text_delta"
    )


async def _asaid(reply: Any, stream: bool) -> str:
    if not stream:
        return str(reply.content[0].text)
    return "".join(
        [
            e.delta.text
            async for e in reply
            if e.type == "content_block_delta" and e.delta.type == "text_delta"
        ]
    )


@pytest.mark.init(capture_content=True)
def test_a_raw_response_call_is_one_span_as_the_plain_call(
    traced: Traced, claude: AnthropicServer, tmp_path: Path
) -> None:
    raw = client(claude).messages.with_raw_response.create(model=MODEL, max_tokens=64, messages=HI)
    assert isinstance(raw, APIResponse)
    reply = raw.parse()
    assert type(reply) is Message and reply.content[0].text == "Hello!"
    assert raw.parse() is reply
    assert json.loads(raw.text())["content"][0]["text"] == "Hello!"  # the body, still there
    (span,) = llm_spans(traced)
    check_genai_attributes(span, stream=False)
    (entries,) = transcripts(traced, tmp_path).values()
    assert [(e["role"], e["content"]) for e in entries] == [("user", "hi"), ("assistant", "Hello!")]


@pytest.mark.parametrize("beta", [False, True], ids=["messages", "beta"])
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("accessor", ["with_raw_response", "with_streaming_response"])
def test_each_accessor_is_one_span_sync_and_async(
    traced: Traced, claude: AnthropicServer, accessor: str, stream: bool, beta: bool
) -> None:
    def messages(sdk: Any) -> Any:
        return getattr(sdk.beta.messages if beta else sdk.messages, accessor)

    asked: dict[str, Any] = {"model": MODEL, "max_tokens": 64, "messages": HI, "stream": stream}

    def sync() -> str:
        if accessor == "with_raw_response":
            return _said(messages(client(claude)).create(**asked).parse(), stream)
        with messages(client(claude)).create(**asked) as response:
            assert isinstance(response, APIResponse)
            parsed = response.parse()
            if stream:
                assert isinstance(parsed, anthropic.Stream)
                assert llm_spans(traced) == []  # open until the stream is read
            return _said(parsed, stream)

    async def asynchronous() -> str:
        if accessor == "with_raw_response":
            raw = await messages(aclient(claude)).create(**asked)
            return await _asaid(await raw.parse(), stream)
        async with messages(aclient(claude)).create(**asked) as response:
            assert isinstance(response, AsyncAPIResponse)
            return await _asaid(await response.parse(), stream)

    claude.reset(Reply(blocks=[text("one")]), Reply(blocks=[text("two")]))
    assert sync() == "one"
    assert asyncio.run(asynchronous()) == "two"
    spans = llm_spans(traced)
    assert len(spans) == len(claude.message_requests()) == 2
    for span in spans:
        check_genai_attributes(span, stream=stream)


@pytest.mark.parametrize("beta", [False, True], ids=["messages", "beta"])
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("accessor", ["with_raw_response", "with_streaming_response"])
def test_a_re_entered_raw_call_gets_the_accessor_s_response_without_asking(
    traced: Traced,
    claude: AnthropicServer,
    tmp_path: Path,
    accessor: str,
    stream: bool,
    beta: bool,
) -> None:
    seen: list[str] = []
    asked: dict[str, Any] = {"model": MODEL, "max_tokens": 64, "messages": HI, "stream": stream}

    def messages(sdk: Any) -> Any:
        return getattr(sdk.beta.messages if beta else sdk.messages, accessor)

    @agenttrace.agent("Asker")
    async def ask() -> str:
        if accessor == "with_raw_response":
            raw = messages(client(claude)).create(**asked)
            araw = await messages(aclient(claude)).create(**asked)
            seen.extend(type(r).__name__ for r in (raw, araw))
            first = raw.parse()
            second = await araw.parse()
            seen.extend(type(r).__name__ for r in (first, second))
            return f"{_said(first, stream)}/{await _asaid(second, stream)}"
        with messages(client(claude)).create(**asked) as response:
            first = response.parse()
            seen.extend([type(response).__name__, type(first).__name__])
            said = _said(first, stream)
        async with messages(aclient(claude)).create(**asked) as aresponse:
            second = await aresponse.parse()
            seen.extend([type(aresponse).__name__, type(second).__name__])
            return f"{said}/{await _asaid(second, stream)}"

    claude.reset(Reply(blocks=[text("one")]), Reply(blocks=[text("two")]))
    assert asyncio.run(ask()) == "one/two"
    first_types = list(seen)
    if not stream:
        assert first_types[-1] == (BetaMessage if beta else Message).__name__
    traced.handle.force_flush()
    rearm(tmp_path)
    seen.clear()
    claude.reset(Reply(blocks=[text("not asked")]))
    assert asyncio.run(ask()) == "one/two"
    assert claude.message_requests() == []
    assert seen == first_types  # the SDK's own types, as the first time
    replayed = [s for s in llm_spans(traced) if attrs(s).get(sc.REPLAYED)]
    assert len(replayed) == 2
    assert [line["state"] for line in llm_lines(tmp_path)].count("replayed") == 2
