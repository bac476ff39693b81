"""The Anthropic SDK's cloud clients over real HTTP (issue 34 item 2): ``AnthropicVertex``
and ``AnthropicBedrock`` (its requests signed with SigV4 by botocore, offline), plain and
streamed, sync and async, pointed at the local scripted server, which answers the paths each
cloud's client builds (Bedrock's stream in AWS event-stream frames). Each call is one LLM span
named by the cloud's provider, with the model, tokens and transcript an ``anthropic.Anthropic``
call gets, and a re-entered run gets a cloud client's stream back from the journal."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

import agenttrace
from agenttrace import semconv as sc

from . import aws_eventstream
from .anthropic_server import AnthropicServer, Reply, text, thinking, tool_use
from .conftest import Traced, attrs, outcome
from .test_anthropic_sdk import HI, MODEL, llm_spans, transcripts
from .test_llm_steps import llm_lines, rearm


@pytest.fixture(scope="module")
def server() -> Iterator[AnthropicServer]:
    started = AnthropicServer().start()
    yield started
    started.stop()


@pytest.fixture
def claude(server: AnthropicServer) -> AnthropicServer:
    server.reset()
    return server


VERTEX = {
    "region": "us-east5",
    "project_id": "agenttrace-test",
    "access_token": "ya29.agenttrace-test-token",
    "max_retries": 0,
}
BEDROCK = {
    "aws_access_key": "AKIAAGENTTRACETEST01",
    "aws_secret_key": "agenttrace-test-secret-key-0001",
    "aws_region": "us-east-1",
    "max_retries": 0,
}
"""The clients' settings (test credentials), the server's URL aside."""


def vertex(server: AnthropicServer) -> anthropic.AnthropicVertex:
    return anthropic.AnthropicVertex(base_url=server.base_url, **VERTEX)


def avertex(server: AnthropicServer) -> anthropic.AsyncAnthropicVertex:
    return anthropic.AsyncAnthropicVertex(base_url=server.base_url, **VERTEX)


def bedrock(server: AnthropicServer) -> anthropic.AnthropicBedrock:
    return anthropic.AnthropicBedrock(base_url=server.base_url, **BEDROCK)


def abedrock(server: AnthropicServer) -> anthropic.AsyncAnthropicBedrock:
    return anthropic.AsyncAnthropicBedrock(base_url=server.base_url, **BEDROCK)


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


def test_the_scripted_frames_are_what_botocore_decodes() -> None:
    """The test server's frames, read by the decoder the SDK reads Bedrock's stream with."""
    from botocore.eventstream import ChecksumMismatch, EventStreamBuffer

    event = {"type": "message_stop"}
    frames = aws_eventstream.chunk(event) * 2
    buffer = EventStreamBuffer()
    buffer.add_data(frames[:7])  # a frame split across reads
    assert list(buffer) == []
    buffer.add_data(frames[7:])
    messages = list(buffer)
    assert len(messages) == 2
    assert messages[0].headers[":event-type"] == "chunk"
    broken = bytearray(aws_eventstream.chunk(event))
    broken[-6] ^= 1  # a payload byte: the message's CRC no longer holds
    with pytest.raises(ChecksumMismatch):
        buffer.add_data(bytes(broken))
        list(buffer)


def _said(events: Any) -> str:
    return "".join(
        e.delta.text
        for e in events
        if e.type == "content_block_delta" and e.delta.type == "text_delta"
    )


async def _asaid(events: Any) -> str:
    return _said([e async for e in events])


def _bedrock_streams(server: AnthropicServer) -> Callable[[], list[str]]:
    """An agent that reads four Bedrock streams, ``create(stream=True)`` and ``stream()``,
    sync and async; what each said."""

    @agenttrace.agent("Streamer")
    async def read() -> list[str]:
        said = [_said(bedrock(server).messages.create(**_ASK, stream=True))]
        with bedrock(server).messages.stream(**_ASK) as stream:
            said.append("".join(stream.text_stream))
        said.append(await _asaid(await abedrock(server).messages.create(**_ASK, stream=True)))
        async with abedrock(server).messages.stream(**_ASK) as astream:
            said.append("".join([piece async for piece in astream.text_stream]))
        return said

    return lambda: asyncio.run(read())


_ASK: dict[str, Any] = {"model": MODEL, "max_tokens": 64, "messages": HI}
_SAID = ["first of four", "second", "third", "fourth and last, longer than one delta"]


def test_a_streamed_bedrock_call_sync_and_async(
    traced: Traced, claude: AnthropicServer, tmp_path: Path
) -> None:
    claude.reset(*(Reply(blocks=[text(said)]) for said in _SAID))
    assert _bedrock_streams(claude)() == _SAID
    requests = claude.message_requests()
    assert all(r.path == f"/model/{MODEL}/invoke-with-response-stream" for r in requests)
    assert all(r.headers["Authorization"].startswith("AWS4-HMAC-SHA256 ") for r in requests)
    spans = llm_spans(traced)
    assert len(spans) == 4
    for span in spans:
        chat = attrs(span)
        assert chat[sc.GEN_AI_PROVIDER_NAME] == "aws.bedrock"
        assert chat[sc.GEN_AI_REQUEST_STREAM] is True
        assert chat[sc.GEN_AI_RESPONSE_MODEL] == MODEL
        assert chat[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 5
        assert chat[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 30
        assert chat[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] > 0
        assert outcome(span) == "ok"
    (entries,) = transcripts(traced, tmp_path).values()
    assert [e["content"] for e in entries if e.get("role") == "assistant"] == _SAID
    done = [line for line in llm_lines(tmp_path) if line["state"] == "done"]
    assert [_said(_events(line["chunks"])) for line in done] == _SAID


def _events(chunks: list[dict[str, Any]]) -> list[Any]:
    from anthropic.types import RawMessageStreamEvent
    from pydantic import TypeAdapter

    return [TypeAdapter(RawMessageStreamEvent).validate_python(c) for c in chunks]


def test_a_re_entered_run_gets_bedrock_streams_back_without_asking(
    traced: Traced, claude: AnthropicServer, tmp_path: Path
) -> None:
    """Replayed on a Bedrock client, whose own streams are event-stream frames: the journaled
    events are read as the SDK reads any stream."""
    claude.reset(*(Reply(blocks=[text(said)]) for said in _SAID))
    read = _bedrock_streams(claude)
    assert read() == _SAID
    traced.handle.force_flush()
    rearm(tmp_path)
    claude.reset(Reply(blocks=[text("not asked")]))
    assert read() == _SAID
    assert claude.message_requests() == []
    assert len([s for s in llm_spans(traced) if attrs(s).get(sc.REPLAYED)]) == 4


def test_a_re_entered_run_gets_a_vertex_stream_back_whole(
    traced: Traced, claude: AnthropicServer, tmp_path: Path
) -> None:
    @agenttrace.agent("Vertex")
    def ask() -> Any:
        with vertex(claude).messages.stream(**_ASK) as stream:
            return stream.get_final_message()

    claude.reset(Reply(blocks=[thinking("hmm"), tool_use("charge", {"a": 5})]))
    first = ask()
    traced.handle.force_flush()
    rearm(tmp_path)
    claude.reset(Reply(blocks=[text("not asked")]))
    assert ask().model_dump() == first.model_dump()  # the thinking signature too
    assert claude.message_requests() == []


@pytest.mark.parametrize(
    ("frame", "category"),
    [
        ("throttlingException", "quota"),
        ("modelStreamErrorException", "model"),
        ("validationException", "invalid"),
        ("modelTimeoutException", "timeout"),
    ],
)
def test_an_exception_frame_mid_stream_fails_the_bedrock_attempt(
    traced: Traced, claude: AnthropicServer, tmp_path: Path, frame: str, category: str
) -> None:
    """Bedrock reports throttling inside the stream (an exception frame): the SDK raises it to
    the reader, unchanged, and the attempt ends failed, with nothing journaled as its answer."""
    claude.reset(Reply(blocks=[text("cut short")], stream_exception=frame))
    with pytest.raises(anthropic.APIStatusError) as raised:
        list(bedrock(claude).messages.create(**_ASK, stream=True))
    assert frame in str(raised.value)
    (span,) = llm_spans(traced)
    assert outcome(span) != "ok"
    # The SDK raises a plain APIStatusError for any error event: its body names what it was.
    assert attrs(span)[sc.ERROR_TYPE] == category
    traced.handle.force_flush()
    assert [line["state"] for line in llm_lines(tmp_path)] == ["intent", "failed"]
