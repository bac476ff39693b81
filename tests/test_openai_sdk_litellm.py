"""One span, never two (issue 34 item 4): litellm sends its OpenAI-compatible requests through
the OpenAI SDK, which is instrumented too; a litellm call is still exactly one LLM span and one
transcript. Real litellm and the real SDK, over HTTP to the local server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import litellm
import openai
import pytest

import agenttrace
from agenttrace.instrumentation.litellm import LiteLLMInstrumentor
from agenttrace.instrumentation.openai import OpenAIInstrumentor

from .conftest import Traced
from .llm_server import LLMServer
from .test_litellm import http
from .test_openai_sdk import HI, client, llm_spans, transcripts

AGAIN = {"role": "user", "content": "again"}


@pytest.mark.parametrize("stream", [False, True])
def test_a_litellm_call_is_one_span_and_one_transcript(
    traced: Traced, llm: LLMServer, tmp_path: Path, stream: bool
) -> None:
    assert LiteLLMInstrumentor().is_instrumented and OpenAIInstrumentor().is_instrumented

    @agenttrace.agent("Asker")
    async def ask() -> None:
        reply = litellm.completion(**http(llm, stream=stream))
        if stream:
            list(reply)
        answer = await litellm.acompletion(
            **http(
                llm,
                stream=stream,
                messages=[*HI, {"role": "assistant", "content": "Hello!"}, AGAIN],
            )
        )
        if stream:
            [chunk async for chunk in answer]

    asyncio.run(ask())
    assert len(llm.requests) == 2  # both went through the SDK to the server
    assert traced.tree() == [
        "invoke_agent Asker [0]",
        "  turn 1 [1]",
        "    chat gpt-4o-mini [1.1]",
        "  turn 2 [2]",
        "    chat gpt-4o-mini [2.1]",
    ]
    (entries,) = transcripts(traced, tmp_path).values()
    assert [(e["event_type"], e["role"], e["path"]) for e in entries] == [
        ("transcript_entry", "user", "1.1"),
        ("transcript_entry", "assistant", "1.1"),
        ("transcript_entry", "user", "2.1"),
        ("transcript_entry", "assistant", "2.1"),
    ]


def test_with_litellm_off_its_calls_are_not_traced_through_the_sdk(
    traced: Traced, llm: LLMServer
) -> None:
    """litellm asks the SDK for the raw HTTP response (``with_raw_response``): a raw call made
    by litellm's code is left alone (a user's is traced: tests/test_openai_sdk_raw.py), so
    turning litellm's instrumentation off is not undone by the SDK's."""
    LiteLLMInstrumentor().uninstrument()
    try:
        litellm.completion(**http(llm))
        assert len(llm.requests) == 1 and llm_spans(traced) == []
    finally:
        LiteLLMInstrumentor().instrument(skip_dep_check=True)


def test_a_call_inside_an_llm_function_is_that_function_s_span(
    traced: Traced, llm: LLMServer
) -> None:
    """An ``@agenttrace.llm`` function is the program's own span of the call it makes."""
    sdk = client(llm)

    @agenttrace.llm(model="gpt-4o-mini")
    def ask() -> openai.types.chat.ChatCompletion:
        return sdk.chat.completions.create(model="gpt-4o-mini", messages=HI)

    ask()
    with agenttrace.llm(model="gpt-4o-mini") as call:
        call.record_response(sdk.chat.completions.create(model="gpt-4o-mini", messages=HI))
    assert len(llm.requests) == 2
    assert len(llm_spans(traced)) == 2
