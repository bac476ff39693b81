"""The OpenAI SDK through its instrumentation: real ``openai`` clients over real HTTP to the
local scripted server (tests/llm_server.py), sync and async, plain and streamed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import litellm
import openai
import pytest
from openai.resources.chat.completions.completions import AsyncCompletions, Completions

import agenttrace
from agenttrace import semconv as sc
from agenttrace.instrumentation.openai import OpenAIInstrumentor
from agenttrace.instrumentation.openai.request import litellm_provider

from .conftest import Traced, attrs, outcome
from .llm_server import LLMServer, Reply

KEY = "sk-agenttrace-openai-test-0001"
HI = [{"role": "user", "content": "hi"}]
CALL = {"id": "call_1", "type": "function", "function": {"name": "charge", "arguments": '{"a":5}'}}
TOOLS = [
    {
        "type": "function",
        "function": {"name": "charge", "parameters": {"type": "object", "properties": {}}},
    }
]


def client(llm: LLMServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=llm.api_base, api_key=KEY, max_retries=0)


def aclient(llm: LLMServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=llm.api_base, api_key=KEY, max_retries=0)


def llm_spans(traced: Traced) -> list[Any]:
    return [s for s in traced.spans() if attrs(s).get(sc.KIND) == "llm"]


def transcripts(traced: Traced, tmp_path: Path) -> dict[str, list[dict[str, Any]]]:
    """Each agent's transcript entries in the event stream, without their ids and times."""
    traced.handle.force_flush()
    by_agent: dict[str, list[dict[str, Any]]] = {}
    for stream in (tmp_path / "sessions").glob("*.events.jsonl"):
        for line in stream.read_text().splitlines():
            event = json.loads(line)
            if event.get("event_type") in ("transcript_entry", "transcript_reset"):
                kept = {
                    key: value
                    for key, value in event.items()
                    if key not in ("message_id", "ts", "trace_id", "span_id", "agent_id")
                }
                by_agent.setdefault(event["agent_id"], []).append(kept)
    return by_agent


# --- plain calls ------------------------------------------------------------------------------


@pytest.mark.init(capture_content=True)
def test_create_is_one_llm_span_with_the_genai_attributes(traced: Traced, llm: LLMServer) -> None:
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "total_tokens": 120,
        "prompt_tokens_details": {"cached_tokens": 40},
        "completion_tokens_details": {"reasoning_tokens": 8},
    }
    llm.reset(Reply(content="Hello there", usage=usage))
    response = client(llm).chat.completions.create(model="gpt-4o-mini", messages=HI)
    assert type(response) is openai.types.chat.ChatCompletion
    assert response.choices[0].message.content == "Hello there"
    assert traced.tree() == [
        "invoke_agent agenttrace [0]",
        "  turn 1 [1]",
        "    chat gpt-4o-mini [1.1]",
    ]
    chat = attrs(traced.one("chat gpt-4o-mini"))
    assert chat[sc.KIND] == "llm"
    assert chat[sc.GEN_AI_OPERATION_NAME] == "chat"
    assert chat[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert chat[sc.GEN_AI_REQUEST_MODEL] == "gpt-4o-mini"
    assert chat[sc.GEN_AI_RESPONSE_MODEL] == "gpt-4o-mini"
    assert chat[sc.GEN_AI_USAGE_INPUT_TOKENS] == 100
    assert chat[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 20
    assert chat[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert chat[sc.ATTEMPT] == 1
    assert outcome(traced.one("chat gpt-4o-mini")) == "ok"
    prompt_cost, completion_cost = litellm.cost_per_token(
        model="gpt-4o-mini", prompt_tokens=100, completion_tokens=20, cache_read_input_tokens=40
    )
    assert chat[sc.COST_USD] == pytest.approx(prompt_cost + completion_cost)
    assert json.loads(chat[sc.GEN_AI_INPUT_MESSAGES]) == HI
    assert json.loads(chat[sc.GEN_AI_OUTPUT_MESSAGES])[0]["content"] == "Hello there"
    assert KEY not in json.dumps(chat)


def test_an_internal_failure_is_reported_under_the_openai_instrumentation(
    traced: Traced,
    llm: LLMServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A failure of ours where an SDK call's attempt ends is named as the OpenAI SDK's
    instrumentation's, not litellm's; the call still returns and its span still ends."""
    from agenttrace._internal import errors as internal_errors
    from agenttrace.instrumentation.litellm.calls import LogicalCall

    def broken(*args: Any) -> None:
        raise RuntimeError("call bookkeeping broke")

    monkeypatch.setattr(internal_errors, "raise_internal_errors", False)
    internal_errors.reset_reported()
    monkeypatch.setattr(LogicalCall, "attempt_ended", broken)
    llm.reset(Reply(content="Hello there"))
    with caplog.at_level("WARNING", logger="agenttrace"):
        response = client(llm).chat.completions.create(model="gpt-4o-mini", messages=HI)
    assert response.choices[0].message.content == "Hello there"
    assert traced.one("chat gpt-4o-mini").end_time is not None
    (report,) = [r for r in caplog.records if "call bookkeeping broke" in r.getMessage()]
    assert "in openai instrumentation" in report.getMessage()


def test_the_provider_is_read_from_the_client() -> None:
    azure = openai.AzureOpenAI(
        azure_endpoint="https://x.openai.azure.com", api_key=KEY, api_version="2024-06-01"
    )
    openrouter = openai.OpenAI(base_url="https://openrouter.ai/api/v1", api_key=KEY)
    assert litellm_provider(openrouter) == "openrouter"
    assert litellm_provider(azure) == "azure"
    assert litellm_provider(openai.OpenAI(api_key=KEY)) == "openai"
    # An OpenAI-compatible server anywhere else (vLLM, a local one): as litellm reports it.
    assert litellm_provider(openai.OpenAI(base_url="http://127.0.0.1:1/v1", api_key=KEY)) == (
        "openai"
    )


def test_a_failed_call_fails_its_span_and_the_error_passes_through(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(Reply(status=400, error_message="bad request"))
    with pytest.raises(openai.BadRequestError, match="bad request"):
        client(llm).chat.completions.create(model="gpt-4o-mini", messages=HI)
    (span,) = llm_spans(traced)
    assert outcome(span) == "failed"


def test_the_same_conversation_makes_the_same_transcript_as_through_litellm(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    """A tool call and its answer: the transcript entries the SDK path writes are the ones the
    litellm path writes for the same requests and replies."""

    def converse(ask: Any) -> None:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Pay 5."}]
        reply = ask(messages, tools=TOOLS)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": "call_1", "content": "paid"})
        ask(messages)

    sdk = client(llm)

    @agenttrace.agent("ViaSDK")
    def via_sdk() -> None:
        converse(lambda m, **kw: sdk.chat.completions.create(model="gpt-4o-mini", messages=m, **kw))

    @agenttrace.agent("ViaLiteLLM")
    def via_litellm() -> None:
        converse(
            lambda m, **kw: litellm.completion(
                model="openai/gpt-4o-mini",
                messages=m,
                api_base=llm.api_base,
                api_key=KEY,
                max_retries=0,
                **kw,
            )
        )

    for run in (via_sdk, via_litellm):
        llm.reset(Reply(tool_calls=[CALL], content=""), Reply(content="Done."))
        run()
    first, second = transcripts(traced, tmp_path).values()
    assert first == second
    assert [entry["role"] for entry in first] == ["user", "assistant", "tool", "assistant"]
    assert first[1]["tool_calls"][0]["id"] == "call_1"


# --- streams ----------------------------------------------------------------------------------


def test_a_stream_cut_mid_way_is_failed_and_still_says_when_its_first_chunk_came(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(Reply(cut_after=2))
    stream = client(llm).chat.completions.create(model="gpt-4o-mini", messages=HI, stream=True)
    read = []
    with pytest.raises(Exception) as raised:
        for chunk in stream:
            read.append(chunk)
    assert read  # the cut came after the first chunk, in the SDK's read
    chat = traced.one("chat gpt-4o-mini")
    assert outcome(chat) == "failed"
    assert attrs(chat)[sc.ERROR_TYPE] == "network", raised.value
    assert (
        0
        < attrs(chat)[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] * 1e9
        < (chat.end_time - chat.start_time)
    )


@pytest.mark.init(capture_content=True)
def test_a_stream_is_one_span_with_usage_when_asked_and_its_reply_in_the_transcript(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    stream = client(llm).chat.completions.create(
        model="gpt-4o-mini", messages=HI, stream=True, stream_options={"include_usage": True}
    )
    assert isinstance(stream, openai.Stream)
    assert llm_spans(traced) == []  # open until the stream is read
    said = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert said == "Hello!"
    chat = attrs(traced.one("chat gpt-4o-mini"))
    assert chat[sc.GEN_AI_REQUEST_STREAM] is True
    assert chat[sc.GEN_AI_USAGE_INPUT_TOKENS] == 11
    assert chat[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 7
    assert sc.USAGE_ESTIMATED not in chat
    assert chat[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] > 0
    assert chat[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert chat[sc.COST_USD] > 0
    assert json.loads(chat[sc.GEN_AI_OUTPUT_MESSAGES])[0]["content"] == "Hello!"
    (entries,) = transcripts(traced, tmp_path).values()
    assert entries == [
        {"event_type": "transcript_entry", "role": "user", "content": "hi", "path": "1.1"},
        {"event_type": "transcript_entry", "role": "assistant", "content": "Hello!", "path": "1.1"},
    ]


def test_a_stream_without_include_usage_is_not_made_to_ask_for_it(
    traced: Traced, llm: LLMServer
) -> None:
    stream = client(llm).chat.completions.create(model="gpt-4o-mini", messages=HI, stream=True)
    chunks = list(stream)
    assert all(c.usage is None for c in chunks)
    assert "stream_options" not in llm.requests[0].body
    chat = attrs(traced.one("chat gpt-4o-mini"))
    # Counted with litellm's tokenizer (litellm is loaded here), as the litellm path does.
    assert chat[sc.USAGE_ESTIMATED] is True
    assert chat[sc.GEN_AI_USAGE_INPUT_TOKENS] == litellm.token_counter(
        model="gpt-4o-mini", messages=HI
    )
    assert chat[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == litellm.token_counter(
        model="gpt-4o-mini", text="Hello!"
    )
    assert chat[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)


@pytest.mark.init(capture_content=True)
def test_a_streamed_tool_call_is_assembled_as_the_reply(traced: Traced, llm: LLMServer) -> None:
    llm.reset(Reply(content="", tool_calls=[CALL]))
    with client(llm).chat.completions.create(
        model="gpt-4o-mini", messages=HI, tools=TOOLS, stream=True
    ) as stream:
        for _ in stream:
            pass
    chat = attrs(traced.one("chat gpt-4o-mini"))
    assert chat[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_calls",)
    (message,) = json.loads(chat[sc.GEN_AI_OUTPUT_MESSAGES])
    assert message["tool_calls"][0]["id"] == "call_1"
    assert message["tool_calls"][0]["function"] == CALL["function"]


def test_a_stream_closed_early_ends_its_span_once(traced: Traced, llm: LLMServer) -> None:
    stream = client(llm).chat.completions.create(model="gpt-4o-mini", messages=HI, stream=True)
    next(iter(stream))
    stream.close()
    stream.close()
    chat = attrs(traced.one("chat gpt-4o-mini"))
    assert chat[sc.STREAM_ABANDONED] is True


# --- async ------------------------------------------------------------------------------------


def test_async_create_and_stream(traced: Traced, llm: LLMServer) -> None:
    async def main() -> tuple[str, str]:
        sdk = aclient(llm)
        reply = await sdk.chat.completions.create(model="gpt-4o-mini", messages=HI)
        stream = await sdk.chat.completions.create(
            model="gpt-4o-mini",
            messages=[*HI, reply.choices[0].message.model_dump(exclude_none=True)],
            stream=True,
            stream_options={"include_usage": True},
        )
        assert isinstance(stream, openai.AsyncStream)
        said = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        return str(reply.choices[0].message.content), said

    assert asyncio.run(main()) == ("Hello!", "Hello!")
    first, second = llm_spans(traced)
    assert attrs(first)[sc.GEN_AI_USAGE_INPUT_TOKENS] == 11
    assert attrs(second)[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 7
    assert attrs(second)[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] > 0
    assert traced.tree() == [
        "invoke_agent agenttrace [0]",
        "  turn 1 [1]",
        "    chat gpt-4o-mini [1.1]",
        "  turn 2 [2]",
        "    chat gpt-4o-mini [2.1]",
    ]


# --- on and off -------------------------------------------------------------------------------


def test_uninstrument_puts_the_sdk_back(traced: Traced, llm: LLMServer) -> None:
    assert OpenAIInstrumentor().is_instrumented
    patched = vars(Completions)["create"], vars(AsyncCompletions)["create"]
    OpenAIInstrumentor().uninstrument()
    try:
        assert vars(Completions)["create"] is patched[0].__wrapped__
        assert vars(AsyncCompletions)["create"] is patched[1].__wrapped__
        client(llm).chat.completions.create(model="gpt-4o-mini", messages=HI)
        assert llm_spans(traced) == []
    finally:
        OpenAIInstrumentor().instrument(skip_dep_check=True)
    client(llm).chat.completions.create(model="gpt-4o-mini", messages=HI)
    assert len(llm_spans(traced)) == 1


@pytest.mark.init(instrument_openai=False)
def test_init_can_leave_the_sdk_alone(traced: Traced, llm: LLMServer) -> None:
    assert not OpenAIInstrumentor().is_instrumented
    client(llm).chat.completions.create(model="gpt-4o-mini", messages=HI)
    assert llm_spans(traced) == []


# --- the SDK's own retries ----------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 503])
def test_each_request_the_sdk_retries_is_an_attempt_of_one_call(
    traced: Traced, llm: LLMServer, status: int
) -> None:
    fast = {"retry-after-ms": "10"}
    llm.reset(Reply(status=status, headers=fast), Reply(status=status, headers=fast))
    sdk = openai.OpenAI(base_url=llm.api_base, api_key=KEY, max_retries=2)
    reply = sdk.chat.completions.create(model="gpt-4o-mini", messages=HI)

    async def again() -> Any:
        llm.reset(Reply(status=status, headers=fast))
        asdk = openai.AsyncOpenAI(base_url=llm.api_base, api_key=KEY, max_retries=1)
        return await asdk.chat.completions.create(model="gpt-4o-mini", messages=HI)

    answer = asyncio.run(again())
    assert reply.choices[0].message.content == answer.choices[0].message.content == "Hello!"
    assert len(llm.requests) == 2
    spans = llm_spans(traced)
    assert [(attrs(s)[sc.ATTEMPT], outcome(s)) for s in spans] == [
        (1, "failed"),
        (2, "failed"),
        (3, "ok"),
        (1, "failed"),
        (2, "ok"),
    ]
    # One call, one turn: its attempts are siblings.
    assert len({s.parent.span_id for s in spans[:3] if s.parent}) == 1


@pytest.mark.init(capture_content=True)
def test_the_stream_helper_is_one_span_sync_and_async(traced: Traced, llm: LLMServer) -> None:
    with client(llm).chat.completions.stream(model="gpt-4o-mini", messages=HI) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()

    async def again() -> Any:
        async with aclient(llm).chat.completions.stream(
            model="gpt-4o-mini", messages=HI
        ) as astream:
            async for _ in astream:
                pass
            return await astream.get_final_completion()

    answer = asyncio.run(again())
    assert final.choices[0].message.content == answer.choices[0].message.content == "Hello!"
    spans = llm_spans(traced)
    assert len(spans) == 2
    for span in spans:
        assert attrs(span)[sc.GEN_AI_REQUEST_STREAM] is True
        assert json.loads(attrs(span)[sc.GEN_AI_OUTPUT_MESSAGES])[0]["content"] == "Hello!"


def test_an_async_stream_closed_early_is_awaited_as_the_sdk_s_and_ends_its_span(
    traced: Traced, llm: LLMServer
) -> None:
    async def main() -> None:
        stream = await aclient(llm).chat.completions.create(
            model="gpt-4o-mini", messages=HI, stream=True
        )
        await stream.__anext__()
        await stream.close()  # AsyncStream.close is a coroutine
        assert stream.response.is_closed

    asyncio.run(main())
    chat = attrs(traced.one("chat gpt-4o-mini"))
    assert chat[sc.STREAM_ABANDONED] is True
