"""OpenAI's Responses API through the SDK's instrumentation: ``responses.create`` (sync, async,
plain, ``stream=True``) and ``responses.stream()``, real ``openai`` clients over real HTTP to the
local scripted server's ``/v1/responses`` (tests/llm_server.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import litellm
import openai
import pydantic
import pytest
from openai.types.responses import Response

import agenttrace
from agenttrace import semconv as sc

from .conftest import Traced, attrs, outcome
from .llm_server import LLMServer, Reply
from .test_llm_steps import llm_lines, rearm
from .test_openai_sdk import CALL, aclient, client, llm_spans, transcripts

USAGE = {
    "input_tokens": 100,
    "input_tokens_details": {"cached_tokens": 40},
    "output_tokens": 20,
    "output_tokens_details": {"reasoning_tokens": 8},
    "total_tokens": 120,
}
FUNCTIONS = [{"type": "function", "name": "charge", "parameters": {"type": "object"}}]


@pytest.mark.init(capture_content=True)
def test_create_is_one_llm_span_with_the_genai_attributes(traced: Traced, llm: LLMServer) -> None:
    llm.reset(Reply(content="Hello there", usage=USAGE, reasoning="thought about it"))
    response = client(llm).responses.create(model="gpt-4o-mini", input="hi", instructions="Be kind")
    assert type(response) is Response
    assert response.output_text == "Hello there"
    assert traced.tree() == [
        "invoke_agent agenttrace [0]",
        "  turn 1 [1]",
        "    chat gpt-4o-mini [1.1]",
    ]
    chat = attrs(traced.one("chat gpt-4o-mini"))
    assert chat[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert chat[sc.GEN_AI_REQUEST_MODEL] == chat[sc.GEN_AI_RESPONSE_MODEL] == "gpt-4o-mini"
    assert chat[sc.GEN_AI_RESPONSE_ID] == "resp_test"
    assert chat[sc.GEN_AI_USAGE_INPUT_TOKENS] == 100
    assert chat[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 20
    assert chat[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert outcome(traced.one("chat gpt-4o-mini")) == "ok"
    prompt_cost, completion_cost = litellm.cost_per_token(
        model="gpt-4o-mini", prompt_tokens=100, completion_tokens=20, cache_read_input_tokens=40
    )
    assert chat[sc.COST_USD] == pytest.approx(prompt_cost + completion_cost)
    assert json.loads(chat[sc.GEN_AI_INPUT_MESSAGES]) == [
        {"role": "system", "content": "Be kind"},
        {"role": "user", "content": "hi"},
    ]
    assert json.loads(chat[sc.GEN_AI_OUTPUT_MESSAGES])[0]["content"] == "Hello there"


def test_function_calls_are_tool_calls_and_the_exchange_is_the_chat_transcript(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    """A function call and its output, through the Responses API: the transcript entries are
    the ones the same exchange through chat completions makes."""
    sdk = client(llm)

    @agenttrace.agent("ViaResponses")
    def via_responses() -> None:
        asked: list[Any] = [{"role": "user", "content": "Pay 5."}]
        first = sdk.responses.create(model="gpt-4o-mini", input=asked, tools=FUNCTIONS)
        (call,) = [item for item in first.output if item.type == "function_call"]
        assert (call.call_id, call.name) == ("call_1", "charge")
        asked += [call, {"type": "function_call_output", "call_id": "call_1", "output": "paid"}]
        sdk.responses.create(model="gpt-4o-mini", input=asked, tools=FUNCTIONS)

    @agenttrace.agent("ViaChat")
    def via_chat() -> None:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Pay 5."}]
        reply = sdk.chat.completions.create(model="gpt-4o-mini", messages=messages)
        messages.append(reply.choices[0].message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": "call_1", "content": "paid"})
        sdk.chat.completions.create(model="gpt-4o-mini", messages=messages)

    for run in (via_responses, via_chat):
        llm.reset(Reply(tool_calls=[CALL], content=""), Reply(content="Done."))
        run()
    first_span = attrs(llm_spans(traced)[0])
    assert first_span[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_calls",)
    responses_entries, chat_entries = transcripts(traced, tmp_path).values()
    assert [e["role"] for e in responses_entries] == ["user", "assistant", "tool", "assistant"]
    assert responses_entries[1]["tool_calls"][0]["id"] == "call_1"
    # The chat reply's empty content is "", the Responses reply has no text at all.
    assert responses_entries[2:] == chat_entries[2:]
    assert [e["role"] for e in chat_entries] == [e["role"] for e in responses_entries]


@pytest.mark.init(capture_content=True)
@pytest.mark.parametrize("how", ["create", "stream", "async stream"])
def test_a_stream_is_one_span_with_its_usage_and_its_reply_in_the_transcript(
    traced: Traced, llm: LLMServer, tmp_path: Path, how: str
) -> None:
    llm.reset(Reply(content="Hello there", usage=USAGE))
    sdk = client(llm)

    async def astream() -> str:
        async with aclient(llm).responses.stream(model="gpt-4o-mini", input="hi") as events:
            said = "".join(
                [e.delta async for e in events if e.type == "response.output_text.delta"]
            )
            assert (await events.get_final_response()).output_text == "Hello there"
        return said

    if how == "stream":
        with sdk.responses.stream(model="gpt-4o-mini", input="hi") as stream:
            said = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
            assert stream.get_final_response().output_text == "Hello there"
    elif how == "async stream":
        said = asyncio.run(astream())
    else:
        events = sdk.responses.create(model="gpt-4o-mini", input="hi", stream=True)
        assert isinstance(events, openai.Stream)
        assert llm_spans(traced) == []  # open until the stream is read
        said = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert said == "Hello there"
    chat = attrs(traced.one("chat gpt-4o-mini"))
    assert chat[sc.GEN_AI_REQUEST_STREAM] is True
    assert chat[sc.GEN_AI_USAGE_INPUT_TOKENS] == 100
    assert chat[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 20
    assert sc.USAGE_ESTIMATED not in chat
    assert chat[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] > 0
    assert chat[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert chat[sc.COST_USD] > 0
    (entries,) = transcripts(traced, tmp_path).values()
    assert [(e["role"], e["content"]) for e in entries] == [
        ("user", "hi"),
        ("assistant", "Hello there"),
    ]


def test_a_failed_call_fails_its_span_and_the_error_passes_through(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(Reply(status=400, error_message="bad request"))
    with pytest.raises(openai.BadRequestError, match="bad request"):
        client(llm).responses.create(model="gpt-4o-mini", input="hi")
    (span,) = llm_spans(traced)
    assert outcome(span) == "failed"


def test_the_sdk_s_retries_are_attempts_of_one_call(traced: Traced, llm: LLMServer) -> None:
    llm.reset(Reply(status=429, headers={"retry-after-ms": "1"}), Reply(content="at last"))
    sdk = openai.OpenAI(base_url=llm.api_base, api_key="sk-x", max_retries=1)
    assert sdk.responses.create(model="gpt-4o-mini", input="hi").output_text == "at last"
    first, second = llm_spans(traced)
    assert (attrs(first)[sc.ATTEMPT], outcome(first)) == (1, "failed")
    assert (attrs(second)[sc.ATTEMPT], outcome(second)) == (2, "ok")


@pytest.mark.parametrize("stream", [False, True])
def test_a_re_entered_run_gets_the_sdk_s_objects_without_asking_sync_and_async(
    traced: Traced, tmp_path: Path, llm: LLMServer, stream: bool
) -> None:
    sdk, asdk = client(llm), aclient(llm)
    seen: list[str] = []

    @agenttrace.agent("Asker")
    async def ask() -> str:
        first = sdk.responses.create(model="gpt-4o-mini", input="hi", stream=stream)
        if stream:
            events = list(first)
            seen.extend(type(e).__name__ for e in events)
            first = events[-1].response
        seen.append(type(first).__name__)
        (call,) = [item for item in first.output if item.type == "function_call"]
        second = await asdk.responses.create(
            model="gpt-4o-mini", input=call.arguments, stream=stream
        )
        if stream:
            said = "".join(
                [e.delta async for e in second if e.type == "response.output_text.delta"]
            )
        else:
            said = second.output_text
        return f"{call.call_id}/{said}"

    llm.reset(Reply(content="", tool_calls=[CALL]), Reply(content="second answer"))
    assert asyncio.run(ask()) == "call_1/second answer"
    first_types = list(seen)
    traced.handle.force_flush()
    rearm(tmp_path)
    seen.clear()
    llm.reset(Reply(content="not asked"))
    assert asyncio.run(ask()) == "call_1/second answer"
    assert llm.requests == []  # neither reply was asked for again
    assert seen == first_types  # the SDK's own types, as the first time
    assert "Response" in seen
    if stream:
        assert "ResponseCompletedEvent" in seen
    replayed = [s for s in llm_spans(traced) if attrs(s).get(sc.REPLAYED)]
    assert len(replayed) == 2
    assert all(sc.COST_USD not in attrs(s) for s in replayed)
    states = [line["state"] for line in llm_lines(tmp_path)]
    assert states.count("replayed") == 2 and states.count("done") == 2


def test_a_stream_closed_early_ends_its_span_as_abandoned_and_journals_no_reply(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    llm.reset(Reply(content="Hello there, and more"))
    events = client(llm).responses.create(model="gpt-4o-mini", input="hi", stream=True)
    first = next(iter(events))
    assert first.type == "response.created"
    events.close()
    (span,) = llm_spans(traced)
    assert attrs(span)[sc.STREAM_ABANDONED] is True
    traced.handle.force_flush()
    assert [line["state"] for line in llm_lines(tmp_path)] == ["intent", "failed"]


class Answer(pydantic.BaseModel):
    """What the ``parse`` test asks for."""

    city: str


def test_parse_is_traced_and_its_parsed_reply_comes_back_on_re_entry(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    @agenttrace.agent("Parser")
    async def ask() -> tuple[Any, Any]:
        sync = client(llm).responses.parse(model="gpt-4o-mini", input="hi", text_format=Answer)
        later = await aclient(llm).responses.parse(
            model="gpt-4o-mini", input="again", text_format=Answer
        )
        return sync, later

    llm.reset(Reply(content='{"city": "Paris"}'), Reply(content='{"city": "Rome"}'))
    first = asyncio.run(ask())
    assert [reply.output_parsed for reply in first] == [Answer(city="Paris"), Answer(city="Rome")]
    assert len(llm_spans(traced)) == 2
    traced.handle.force_flush()
    rearm(tmp_path)
    llm.reset(Reply(content="not asked"))
    again = asyncio.run(ask())
    assert llm.requests == []
    for was, now in zip(first, again, strict=True):
        assert type(now) is type(was)  # the SDK's ParsedResponse[Answer]
        assert now.output_parsed == was.output_parsed
    assert len([s for s in llm_spans(traced) if attrs(s).get(sc.REPLAYED)]) == 2


@pytest.mark.init(capture_content=True)
def test_a_conversation_the_server_keeps_continues_the_transcript(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    """A request with ``previous_response_id`` sends only what is new: the transcript goes on
    from the earlier turns (the server's), it is not reset to the new input."""
    llm.reset(Reply(content="Hello there"), Reply(content="Second."))
    sdk = client(llm)

    @agenttrace.agent("Chatter")
    def chat() -> str:
        first = sdk.responses.create(model="gpt-4o-mini", instructions="Be brief.", input="hi")
        again = sdk.responses.create(
            model="gpt-4o-mini",
            instructions="Be brief.",
            input=[{"role": "user", "content": "and again"}],
            previous_response_id=first.id,
        )
        return str(again.output_text)

    assert chat() == "Second."
    # The span says what was sent: this request's own instructions and input.
    second = json.loads(attrs(llm_spans(traced)[1])[sc.GEN_AI_INPUT_MESSAGES])
    assert [m["content"] for m in second] == ["Be brief.", "and again"]
    (entries,) = transcripts(traced, tmp_path).values()
    assert [(e["event_type"], e["role"], e["content"]) for e in entries] == [
        ("transcript_entry", "system", "Be brief."),
        ("transcript_entry", "user", "hi"),
        ("transcript_entry", "assistant", "Hello there"),
        ("transcript_entry", "user", "and again"),
        ("transcript_entry", "assistant", "Second."),
    ]
