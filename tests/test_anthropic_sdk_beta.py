"""The Anthropic SDK's ``client.beta.messages`` (issue 34 item 2: pydantic-ai's
``AnthropicModel`` calls it): ``create``, ``create(stream=True)``, the ``stream`` helper and
``parse``, sync and async, are one ``chat {model}`` span per call over real HTTP to the local
scripted server, and a re-entered run gets the SDK's own beta objects back (``BetaMessage``,
streams of beta events, ``ParsedBetaMessage``) without calling the model. (``parse`` is
tested beside the plain one, in test_anthropic_sdk_reentry.py.)"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic.resources.beta.messages.messages import AsyncMessages, Messages
from anthropic.types.beta import BetaMessage, BetaRawMessageStartEvent

import agenttrace
from agenttrace import semconv as sc
from agenttrace.instrumentation.anthropic import AnthropicInstrumentor

from .anthropic_server import AnthropicServer, Reply, text, thinking, tool_use
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
)
from .test_llm_steps import llm_lines, rearm

__all__ = ["claude", "server"]  # the fixtures, used by name


def test_beta_create_is_one_llm_span(traced: Traced, claude: AnthropicServer) -> None:
    claude.reset(Reply(blocks=[thinking("Let me see."), text("Hello there")]))
    response = client(claude).beta.messages.create(model=MODEL, max_tokens=64, messages=HI)
    assert type(response) is BetaMessage
    assert response.content[1].text == "Hello there"
    (span,) = llm_spans(traced)
    check_genai_attributes(span, stream=False)


def test_beta_streams_are_one_span_each_sync_and_async(
    traced: Traced, claude: AnthropicServer
) -> None:
    async def ask() -> list[str]:
        said = []
        stream = client(claude).beta.messages.create(
            model=MODEL, max_tokens=64, messages=HI, stream=True
        )
        events = list(stream)
        assert isinstance(events[0], BetaRawMessageStartEvent)
        said.append("".join(e.delta.text for e in events if e.type == "content_block_delta"))
        with client(claude).beta.messages.stream(model=MODEL, max_tokens=64, messages=HI) as s:
            said.append(s.get_final_text())
        async with aclient(claude).beta.messages.stream(
            model=MODEL, max_tokens=64, messages=HI
        ) as astream:
            said.append(await astream.get_final_text())
        answer = await aclient(claude).beta.messages.create(
            model=MODEL, max_tokens=64, messages=HI, stream=True
        )
        said.append(
            "".join([e.delta.text async for e in answer if e.type == "content_block_delta"])
        )
        return said

    claude.reset(*[Reply(blocks=[text(f"answer {n}")]) for n in range(4)])
    assert asyncio.run(ask()) == [f"answer {n}" for n in range(4)]
    spans = llm_spans(traced)
    assert len(spans) == 4 == len(claude.message_requests())
    for span in spans:
        check_genai_attributes(span, stream=True)


def test_async_beta_create(traced: Traced, claude: AnthropicServer) -> None:
    claude.reset(Reply(blocks=[text("async hello")]))
    response = asyncio.run(
        aclient(claude).beta.messages.create(model=MODEL, max_tokens=64, messages=HI)
    )
    assert type(response) is BetaMessage and response.content[0].text == "async hello"
    (span,) = llm_spans(traced)
    check_genai_attributes(span, stream=False)


def test_uninstrument_puts_beta_messages_back(traced: Traced, claude: AnthropicServer) -> None:
    patched = vars(Messages)["create"], vars(AsyncMessages)["stream"]
    AnthropicInstrumentor().uninstrument()
    try:
        assert vars(Messages)["create"] is patched[0].__wrapped__
        assert vars(AsyncMessages)["stream"] is patched[1].__wrapped__
        client(claude).beta.messages.create(model=MODEL, max_tokens=64, messages=HI)
        assert llm_spans(traced) == []
    finally:
        AnthropicInstrumentor().instrument(skip_dep_check=True)


@pytest.mark.parametrize("stream", [False, True])
def test_a_re_entered_run_gets_the_beta_objects_without_asking(
    traced: Traced, tmp_path: Path, claude: AnthropicServer, stream: bool
) -> None:
    seen: list[Any] = []

    @agenttrace.agent("BetaAsker")
    async def ask() -> str:
        sync = client(claude).beta.messages.create(
            model=MODEL, max_tokens=64, messages=HI, stream=stream
        )
        if stream:
            assert isinstance(sync, anthropic.Stream)
            events = list(sync)
            seen.append([type(e) for e in events])
            call_id = next(e for e in events if e.type == "content_block_start").content_block.id
        else:
            seen.append(type(sync))
            call_id = sync.content[0].id
        async with aclient(claude).beta.messages.stream(
            model=MODEL, max_tokens=64, messages=[*HI, {"role": "user", "content": call_id}]
        ) as answer:
            final = await answer.get_final_message()
        seen.append(type(final))
        return f"{call_id}/{final.content[0].text}"

    claude.reset(
        Reply(blocks=[tool_use("charge", {"a": 5}, id="toolu_1")]),
        Reply(blocks=[text("second answer")]),
    )
    assert asyncio.run(ask()) == "toolu_1/second answer"
    first = list(seen)
    assert issubclass(first[-1], BetaMessage)  # the helper's ParsedBetaMessage
    if stream:  # beta events, not the Messages API's
        assert all(kind.__module__.startswith("anthropic.types.beta.") for kind in first[0])
    else:
        assert first[0] is BetaMessage
    traced.handle.force_flush()
    rearm(tmp_path)
    seen.clear()
    claude.reset(Reply(blocks=[text("not asked")]))
    assert asyncio.run(ask()) == "toolu_1/second answer"
    assert claude.message_requests() == []  # neither reply was asked for again
    assert seen == first  # the SDK's own beta types
    replayed = [s for s in llm_spans(traced) if attrs(s).get(sc.REPLAYED)]
    assert len(replayed) == 2
    states = [line["state"] for line in llm_lines(tmp_path)]
    assert states.count("replayed") == 2 and states.count("done") == 2
