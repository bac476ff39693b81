"""The Anthropic SDK's cloud clients over real HTTP (issue 34 item 2): ``AnthropicVertex``
(plain and streamed, sync and async) and ``AnthropicBedrock`` (plain; its requests signed with
SigV4 by botocore, offline) pointed at the local scripted server, which answers the paths each
cloud's client builds. Each call is one LLM span named by the cloud's provider, with the model,
tokens and transcript an ``anthropic.Anthropic`` call gets."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import anthropic
import pytest

from agenttrace import semconv as sc

from .anthropic_server import AnthropicServer, Reply, text
from .conftest import Traced, attrs, outcome
from .test_anthropic_sdk import HI, MODEL, llm_spans, transcripts


@pytest.fixture(scope="module")
def server() -> Iterator[AnthropicServer]:
    started = AnthropicServer().start()
    yield started
    started.stop()


@pytest.fixture
def claude(server: AnthropicServer) -> AnthropicServer:
    server.reset()
    return server


def vertex(server: AnthropicServer) -> anthropic.AnthropicVertex:
    return anthropic.AnthropicVertex(
        region="us-east5",
        project_id="agenttrace-test",
        access_token="ya29.agenttrace-test-token",
        base_url=server.base_url,
        max_retries=0,
    )


def avertex(server: AnthropicServer) -> anthropic.AsyncAnthropicVertex:
    return anthropic.AsyncAnthropicVertex(
        region="us-east5",
        project_id="agenttrace-test",
        access_token="ya29.agenttrace-test-token",
        base_url=server.base_url,
        max_retries=0,
    )


def bedrock(server: AnthropicServer) -> anthropic.AnthropicBedrock:
    return anthropic.AnthropicBedrock(
        aws_access_key="AKIAAGENTTRACETEST01",
        aws_secret_key="agenttrace-test-secret-key-0001",
        aws_region="us-east-1",
        base_url=server.base_url,
        max_retries=0,
    )


def check_span(traced: Traced, provider: str) -> None:
    (span,) = llm_spans(traced)
    chat = attrs(span)
    assert chat[sc.GEN_AI_PROVIDER_NAME] == provider
    assert chat[sc.GEN_AI_REQUEST_MODEL] == MODEL
    assert chat[sc.GEN_AI_RESPONSE_MODEL] == MODEL
    assert chat[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 5
    assert chat[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 30
    assert outcome(span) == "ok"


def test_a_vertex_call_is_one_span_with_the_transcript(
    traced: Traced, claude: AnthropicServer, tmp_path: Path
) -> None:
    claude.reset(Reply(blocks=[text("From Vertex.")]))
    reply = vertex(claude).messages.create(model=MODEL, max_tokens=64, messages=HI)
    assert isinstance(reply, anthropic.types.Message) and reply.content[0].text == "From Vertex."
    (request,) = claude.message_requests()
    assert request.path.endswith(f"/models/{MODEL}:rawPredict")  # the path Vertex's client built
    check_span(traced, "gcp.vertex_ai")
    (entries,) = transcripts(traced, tmp_path).values()
    assert [e["role"] for e in entries] == ["user", "assistant"]
    assert entries[-1]["content"] == "From Vertex."


def test_a_streamed_vertex_call_sync_and_async(traced: Traced, claude: AnthropicServer) -> None:
    claude.reset(Reply(blocks=[text("one")]), Reply(blocks=[text("two")]))
    with vertex(claude).messages.stream(model=MODEL, max_tokens=64, messages=HI) as stream:
        first = "".join(stream.text_stream)

    async def ask() -> str:
        async with avertex(claude).messages.stream(
            model=MODEL, max_tokens=64, messages=HI
        ) as astream:
            return "".join([piece async for piece in astream.text_stream])

    assert (first, asyncio.run(ask())) == ("one", "two")
    assert all(r.path.endswith(":streamRawPredict") for r in claude.message_requests())
    spans = llm_spans(traced)
    assert len(spans) == 2
    for span in spans:
        chat = attrs(span)
        assert chat[sc.GEN_AI_PROVIDER_NAME] == "gcp.vertex_ai"
        assert chat[sc.GEN_AI_REQUEST_STREAM] is True
        assert chat[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 5


def test_a_bedrock_call_is_signed_and_one_span(traced: Traced, claude: AnthropicServer) -> None:
    claude.reset(Reply(blocks=[text("From Bedrock.")]))
    reply = bedrock(claude).messages.create(model=MODEL, max_tokens=64, messages=HI)
    assert reply.content[0].text == "From Bedrock."
    (request,) = claude.message_requests()
    assert request.path == f"/model/{MODEL}/invoke"
    assert request.headers["Authorization"].startswith("AWS4-HMAC-SHA256 ")  # botocore signed it
    check_span(traced, "aws.bedrock")
    chat = attrs(llm_spans(traced)[0])
    assert "agenttrace-test-secret-key-0001" not in str(chat)
