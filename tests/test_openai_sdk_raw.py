"""``with_raw_response`` through the OpenAI SDK's instrumentation: a user's raw call is traced
exactly once (the SDK's ``LegacyAPIResponse`` given back, its ``.parse()`` the traced reply),
journaled and replayed; ``with_streaming_response`` passes through. litellm's own raw calls:
tests/test_openai_sdk_litellm.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import openai
from openai._legacy_response import LegacyAPIResponse
from openai.types.chat import ChatCompletion

import agenttrace
from agenttrace import semconv as sc

from .conftest import Traced, attrs, outcome
from .llm_server import LLMServer, Reply
from .test_llm_steps import llm_lines, rearm
from .test_openai_sdk import HI, aclient, client, llm_spans, transcripts


def test_a_raw_call_is_one_span_and_parse_gives_the_traced_reply(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    raw = client(llm).chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=HI)
    assert isinstance(raw, LegacyAPIResponse)
    assert raw.status_code == 200 and raw.headers["content-type"] == "application/json"
    reply = raw.parse()
    assert type(reply) is ChatCompletion and reply.choices[0].message.content == "Hello!"
    assert raw.parse() is reply
    (span,) = llm_spans(traced)
    assert outcome(span) == "ok"
    assert attrs(span)[sc.GEN_AI_USAGE_INPUT_TOKENS] == 11
    (entries,) = transcripts(traced, tmp_path).values()
    assert [(e["role"], e["content"]) for e in entries] == [("user", "hi"), ("assistant", "Hello!")]


def test_a_raw_stream_is_one_span_ended_when_its_parsed_stream_is_read(
    traced: Traced, llm: LLMServer
) -> None:
    async def ask() -> str:
        raw = await aclient(llm).chat.completions.with_raw_response.create(
            model="gpt-4o-mini",
            messages=HI,
            stream=True,
            stream_options={"include_usage": True},
        )
        stream = raw.parse()
        assert isinstance(stream, openai.AsyncStream)
        assert llm_spans(traced) == []  # open until the stream is read
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    assert asyncio.run(ask()) == "Hello!"
    (span,) = llm_spans(traced)
    assert attrs(span)[sc.GEN_AI_REQUEST_STREAM] is True
    assert attrs(span)[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 7


def test_a_re_entered_raw_call_gets_a_raw_response_without_asking(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    @agenttrace.agent("Asker")
    def ask() -> str:
        raw = client(llm).chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=HI
        )
        assert isinstance(raw, LegacyAPIResponse)
        said = raw.parse().choices[0].message.content
        assert json.loads(raw.text)["choices"][0]["message"]["content"] == said
        return str(said)

    llm.reset(Reply(content="recorded"))
    assert ask() == "recorded"
    traced.handle.force_flush()
    rearm(tmp_path)
    llm.reset(Reply(content="not asked"))
    assert ask() == "recorded"
    assert llm.requests == []
    assert len([s for s in llm_spans(traced) if attrs(s).get(sc.REPLAYED)]) == 1
    assert [line["state"] for line in llm_lines(tmp_path)].count("replayed") == 1


def test_a_streaming_response_call_passes_through(traced: Traced, llm: LLMServer) -> None:
    with client(llm).chat.completions.with_streaming_response.create(
        model="gpt-4o-mini", messages=HI
    ) as response:
        assert response.parse().choices[0].message.content == "Hello!"
    assert llm_spans(traced) == []
