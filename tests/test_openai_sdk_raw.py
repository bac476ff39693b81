"""``with_raw_response`` and ``with_streaming_response`` through the OpenAI SDK's
instrumentation: a user's raw call is traced exactly once (the SDK's ``LegacyAPIResponse`` /
``APIResponse`` given back, its ``.parse()`` the traced reply or stream, its body still the
caller's to read), journaled and replayed, for chat completions and the Responses API, sync and
async, streamed and not. litellm's own raw calls: tests/test_openai_sdk_litellm.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import openai
import pydantic
import pytest
from openai._legacy_response import LegacyAPIResponse
from openai._response import APIResponse, AsyncAPIResponse
from openai.types.chat import ChatCompletion

import agenttrace
from agenttrace import semconv as sc

from .conftest import Traced, attrs, outcome
from .llm_server import LLMServer, Reply
from .test_llm_steps import llm_lines, rearm
from .test_openai_sdk import HI, aclient, client, llm_spans, transcripts


def check_one_hello_span(traced: Traced, tmp_path: Path) -> None:
    """One call answered "Hello!" to "hi": its one LLM span, ok, with its tokens, and the two
    transcript entries."""
    (span,) = llm_spans(traced)
    assert outcome(span) == "ok"
    assert attrs(span)[sc.GEN_AI_USAGE_INPUT_TOKENS] == 11
    (entries,) = transcripts(traced, tmp_path).values()
    assert [(e["role"], e["content"]) for e in entries] == [("user", "hi"), ("assistant", "Hello!")]


def test_a_raw_call_is_one_span_and_parse_gives_the_traced_reply(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    raw = client(llm).chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=HI)
    assert isinstance(raw, LegacyAPIResponse)
    assert raw.status_code == 200 and raw.headers["content-type"] == "application/json"
    reply = raw.parse()
    assert type(reply) is ChatCompletion and reply.choices[0].message.content == "Hello!"
    assert raw.parse() is reply
    check_one_hello_span(traced, tmp_path)


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


@pytest.mark.init(capture_content=True)
def test_a_streaming_response_call_is_one_span_and_its_body_stays_the_caller_s(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    with client(llm).chat.completions.with_streaming_response.create(
        model="gpt-4o-mini", messages=HI
    ) as response:
        assert isinstance(response, APIResponse)
        assert response.parse().choices[0].message.content == "Hello!"
        body = json.loads(b"".join(response.iter_bytes()))  # read by us, still all there
        assert body["choices"][0]["message"]["content"] == "Hello!"
        assert response.json() == body
    check_one_hello_span(traced, tmp_path)


def test_a_streamed_streaming_response_is_one_span_ended_when_its_stream_is_read(
    traced: Traced, llm: LLMServer
) -> None:
    async def ask() -> str:
        async with aclient(llm).chat.completions.with_streaming_response.create(
            model="gpt-4o-mini",
            messages=HI,
            stream=True,
            stream_options={"include_usage": True},
        ) as response:
            assert isinstance(response, AsyncAPIResponse)
            stream = await response.parse()
            assert isinstance(stream, openai.AsyncStream)
            assert llm_spans(traced) == []  # open until the stream is read
            return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    assert asyncio.run(ask()) == "Hello!"
    (span,) = llm_spans(traced)
    assert attrs(span)[sc.GEN_AI_REQUEST_STREAM] is True
    assert attrs(span)[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 7


def test_a_streamed_streaming_response_s_lines_are_the_caller_s(
    traced: Traced, llm: LLMServer
) -> None:
    """A caller who reads the server-sent events themselves gets every line: the stream made
    for ``.parse()`` reads nothing until it is iterated; its span ends, with no reply, when the
    response is dropped."""
    with client(llm).chat.completions.with_streaming_response.create(
        model="gpt-4o-mini", messages=HI, stream=True
    ) as response:
        lines = [line for line in response.iter_lines() if line.startswith("data: {")]
    assert llm_spans(traced) == []
    del response
    (span,) = llm_spans(traced)
    assert attrs(span)[sc.STREAM_ABANDONED] is True
    assert sc.GEN_AI_USAGE_OUTPUT_TOKENS not in attrs(span)
    said = "".join(
        c["choices"][0]["delta"].get("content") or ""
        for c in (json.loads(line[len("data: ") :]) for line in lines)
        if c["choices"]
    )
    assert said == "Hello!"
    assert len(llm.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("accessor", ["with_raw_response", "with_streaming_response"])
def test_responses_raw_calls_are_one_span_each_sync_and_async(
    traced: Traced, llm: LLMServer, accessor: str, stream: bool
) -> None:
    def said(reply: Any) -> str:
        if stream:
            return "".join(e.delta for e in reply if e.type == "response.output_text.delta")
        return str(reply.output_text)

    async def asaid(reply: Any) -> str:
        if stream:
            return "".join([e.delta async for e in reply if e.type == "response.output_text.delta"])
        return str(reply.output_text)

    def sync() -> str:
        calls = getattr(client(llm).responses, accessor)
        if accessor == "with_raw_response":
            return said(calls.create(model="gpt-4o-mini", input="hi", stream=stream).parse())
        with calls.create(model="gpt-4o-mini", input="hi", stream=stream) as response:
            return said(response.parse())

    async def asynchronous() -> str:
        calls = getattr(aclient(llm).responses, accessor)
        if accessor == "with_raw_response":
            raw = await calls.create(model="gpt-4o-mini", input="hi", stream=stream)
            return await asaid(raw.parse())
        async with calls.create(model="gpt-4o-mini", input="hi", stream=stream) as response:
            return await asaid(await response.parse())

    llm.reset(Reply(content="one"), Reply(content="two"))
    assert sync() == "one"
    assert asyncio.run(asynchronous()) == "two"
    spans = llm_spans(traced)
    assert len(spans) == len(llm.requests) == 2
    for span in spans:
        assert attrs(span).get(sc.GEN_AI_REQUEST_STREAM, False) is stream
        assert attrs(span)[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
        assert attrs(span)[sc.GEN_AI_USAGE_INPUT_TOKENS] > 0


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("accessor", ["with_raw_response", "with_streaming_response"])
def test_a_re_entered_raw_call_gets_the_accessor_s_response_sync_and_async(
    traced: Traced, llm: LLMServer, tmp_path: Path, accessor: str, stream: bool
) -> None:
    """Chat completions and the Responses API, each accessor, sync and async, streamed and
    not: a re-entered run gets the SDK's response object whose ``.parse()`` gives the SDK's
    reply or stream, without asking."""
    expected = (LegacyAPIResponse,) if accessor == "with_raw_response" else (APIResponse,)
    aexpected = (LegacyAPIResponse,) if accessor == "with_raw_response" else (AsyncAPIResponse,)
    seen: list[str] = []

    def read(reply: Any) -> str:  # a chat completion, or its chunks
        seen.append(type(reply).__name__)
        if not stream:
            return str(reply.choices[0].message.content)
        return "".join(c.choices[0].delta.content or "" for c in reply if c.choices)

    async def aread(reply: Any) -> str:  # a Response, or its events
        seen.append(type(reply).__name__)
        if not stream:
            return str(reply.output_text)
        return "".join([e.delta async for e in reply if e.type == "response.output_text.delta"])

    @agenttrace.agent("Asker")
    async def ask() -> str:
        sdk, asdk = client(llm), aclient(llm)
        chat = getattr(sdk.chat.completions, accessor)
        responses = getattr(asdk.responses, accessor)
        kwargs: dict[str, Any] = {"model": "gpt-4o-mini", "stream": stream}
        if accessor == "with_raw_response":
            raw = chat.create(messages=HI, **kwargs)
            assert isinstance(raw, expected)
            first = read(raw.parse())
            araw = await responses.create(input="hi", **kwargs)
            assert isinstance(araw, aexpected)
            second = await aread(araw.parse())
        else:
            with chat.create(messages=HI, **kwargs) as response:
                assert isinstance(response, expected)
                first = read(response.parse())
            async with responses.create(input="hi", **kwargs) as aresponse:
                assert isinstance(aresponse, aexpected)
                second = await aread(await aresponse.parse())
        return f"{first}/{second}"

    llm.reset(Reply(content="one"), Reply(content="two"))
    assert asyncio.run(ask()) == "one/two"
    first_types = list(seen)
    traced.handle.force_flush()
    rearm(tmp_path)
    seen.clear()
    llm.reset(Reply(content="not asked"))
    assert asyncio.run(ask()) == "one/two"
    assert llm.requests == []
    assert seen == first_types  # the SDK's own types, as the first time
    assert len([s for s in llm_spans(traced) if attrs(s).get(sc.REPLAYED)]) == 2
    assert [line["state"] for line in llm_lines(tmp_path)].count("replayed") == 2


class Answer(pydantic.BaseModel):
    city: str


def test_raw_parse_calls_are_traced_and_parsed_again_on_re_entry(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    """``responses.parse`` through ``with_raw_response`` and ``chat.completions.parse`` through
    ``with_streaming_response``: the raw response's ``.parse()`` gives the SDK's parsed reply,
    the first time and on re-entry."""

    @agenttrace.agent("Parser")
    def ask() -> list[Any]:
        sdk = client(llm)
        raw = sdk.responses.with_raw_response.parse(
            model="gpt-4o-mini", input="hi", text_format=Answer
        )
        with sdk.chat.completions.with_streaming_response.parse(
            model="gpt-4o-mini", messages=HI, response_format=Answer
        ) as response:
            later = response.parse()
        parsed = raw.parse()
        return [parsed.output_parsed, later.choices[0].message.parsed, type(parsed), type(later)]

    llm.reset(Reply(content='{"city": "Paris"}'), Reply(content='{"city": "Rome"}'))
    first = ask()
    assert first[:2] == [Answer(city="Paris"), Answer(city="Rome")]
    assert len(llm_spans(traced)) == 2
    traced.handle.force_flush()
    rearm(tmp_path)
    llm.reset(Reply(content="not asked"))
    assert ask() == first
    assert llm.requests == []
    assert len([s for s in llm_spans(traced) if attrs(s).get(sc.REPLAYED)]) == 2
