"""The Anthropic SDK through its instrumentation: real ``anthropic`` clients over real HTTP to
the local scripted Anthropic-compatible server (tests/anthropic_server.py), sync and async,
plain and streamed."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import anthropic
import litellm
import pytest
from anthropic.resources.messages import AsyncMessages, Messages

import agenttrace
from agenttrace import semconv as sc
from agenttrace.instrumentation.anthropic import AnthropicInstrumentor
from agenttrace.instrumentation.anthropic.request import litellm_provider

from .anthropic_server import AnthropicServer, Reply, text, thinking, tool_use
from .conftest import Traced, attrs, outcome
from .helpers import child_env
from .test_zero_code import run_instrumented

KEY = "sk-ant-agenttrace-test-0001"
MODEL = "claude-sonnet-4-5"
HI = [{"role": "user", "content": "hi"}]
USAGE = {  # the scripted server's default
    "input_tokens": 10,
    "cache_creation_input_tokens": 20,
    "cache_read_input_tokens": 30,
    "output_tokens": 5,
}


@pytest.fixture(scope="module")
def server() -> Iterator[AnthropicServer]:
    started = AnthropicServer().start()
    yield started
    started.stop()


@pytest.fixture
def claude(server: AnthropicServer) -> AnthropicServer:
    server.reset()
    return server


def client(server: AnthropicServer, retries: int = 0) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.base_url, api_key=KEY, max_retries=retries)


def aclient(server: AnthropicServer, retries: int = 0) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=server.base_url, api_key=KEY, max_retries=retries)


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
                    if key not in ("message_id", "ts", "trace_id", "span_id", "agent_id", "path")
                }
                by_agent.setdefault(event["agent_id"], []).append(kept)
    return by_agent


def expected_cost(usage: dict[str, int]) -> float:
    prompt, completion = litellm.cost_per_token(
        model=MODEL,
        prompt_tokens=usage["input_tokens"]
        + usage["cache_read_input_tokens"]
        + usage["cache_creation_input_tokens"],
        completion_tokens=usage["output_tokens"],
        cache_read_input_tokens=usage["cache_read_input_tokens"],
        cache_creation_input_tokens=usage["cache_creation_input_tokens"],
    )
    return float(prompt + completion)


def check_genai_attributes(span: Any, stream: bool) -> None:
    chat = attrs(span)
    assert chat[sc.KIND] == "llm"
    assert chat[sc.GEN_AI_OPERATION_NAME] == "chat"
    assert chat[sc.GEN_AI_PROVIDER_NAME] == "anthropic"
    assert chat[sc.GEN_AI_REQUEST_MODEL] == MODEL
    assert chat[sc.GEN_AI_RESPONSE_MODEL] == MODEL
    assert chat.get(sc.GEN_AI_REQUEST_STREAM, False) is stream
    # GenAI input tokens count the cache reads and writes too.
    assert chat[sc.GEN_AI_USAGE_INPUT_TOKENS] == 60
    assert chat[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 5
    assert chat[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 30
    assert chat[sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] == 20
    assert chat[sc.COST_USD] == pytest.approx(expected_cost(USAGE))
    assert chat[sc.ATTEMPT] == 1
    assert outcome(span) == "ok"


# --- plain calls ------------------------------------------------------------------------------


def test_an_internal_failure_is_reported_under_the_anthropic_instrumentation(
    traced: Traced,
    claude: AnthropicServer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A failure of ours where an SDK call's attempt ends is named as the Anthropic SDK's
    instrumentation's, not litellm's; the call still returns and its span still ends."""
    from agenttrace._internal import errors as internal_errors
    from agenttrace.instrumentation.litellm.calls import LogicalCall

    def broken(*args: Any) -> None:
        raise RuntimeError("call bookkeeping broke")

    monkeypatch.setattr(internal_errors, "raise_internal_errors", False)
    internal_errors.reset_reported()
    monkeypatch.setattr(LogicalCall, "attempt_ended", broken)
    claude.reset(Reply(blocks=[text("Hello there")]))
    with caplog.at_level("WARNING", logger="agenttrace"):
        response = client(claude).messages.create(model=MODEL, max_tokens=64, messages=HI)
    assert response.content[0].text == "Hello there"
    assert traced.one(f"chat {MODEL}").end_time is not None
    (report,) = [r for r in caplog.records if "call bookkeeping broke" in r.getMessage()]
    assert "in anthropic instrumentation" in report.getMessage()


@pytest.mark.init(capture_content=True)
def test_create_is_one_llm_span_with_the_genai_attributes(
    traced: Traced, claude: AnthropicServer
) -> None:
    claude.reset(Reply(blocks=[thinking("Let me see."), text("Hello there")]))
    response = client(claude).messages.create(model=MODEL, max_tokens=64, messages=HI)
    assert type(response) is anthropic.types.Message
    assert response.content[1].text == "Hello there"
    assert traced.tree() == [
        "invoke_agent agenttrace [0]",
        "  turn 1 [1]",
        f"    chat {MODEL} [1.1]",
    ]
    span = traced.one(f"chat {MODEL}")
    check_genai_attributes(span, stream=False)
    chat = attrs(span)
    assert chat[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)
    assert json.loads(chat[sc.GEN_AI_INPUT_MESSAGES]) == HI
    assert json.loads(chat[sc.GEN_AI_OUTPUT_MESSAGES])[0]["content"] == "Hello there"
    assert KEY not in json.dumps(chat)


def test_the_provider_is_read_from_the_client() -> None:
    assert litellm_provider(anthropic.Anthropic(api_key=KEY)) == "anthropic"
    assert litellm_provider(anthropic.AnthropicBedrock(aws_region="us-east-1")) == "bedrock"
    vertex = anthropic.AnthropicVertex(region="us-east5", project_id="p", access_token="t")
    assert litellm_provider(vertex) == "vertex_ai"


def test_a_failed_call_fails_its_span_and_the_error_passes_through(
    traced: Traced, claude: AnthropicServer
) -> None:
    claude.reset(Reply(status=400, error_message="bad request"))
    with pytest.raises(anthropic.BadRequestError, match="bad request"):
        client(claude).messages.create(model=MODEL, max_tokens=64, messages=HI)
    (span,) = llm_spans(traced)
    assert outcome(span) == "failed"


def test_thinking_is_reasoning_and_tool_use_a_tool_call_in_the_transcript(
    traced: Traced, claude: AnthropicServer, tmp_path: Path
) -> None:
    """The transcript the SDK path writes for a tool call and its answer is the one the litellm
    path writes for the same conversation; thinking is the reply's reasoning, its signature
    kept in the journal's lines only (a re-entered run sends it back), in no other event."""
    claude.reset(
        Reply(blocks=[thinking("I should pay."), tool_use("charge", {"a": 5}, id="toolu_1")]),
        Reply(blocks=[text("Done.")]),
    )
    sdk = client(claude)

    @agenttrace.agent("ViaSDK")
    def via_sdk() -> None:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Pay 5."}]
        reply = sdk.messages.create(model=MODEL, max_tokens=64, messages=messages)
        messages.append({"role": "assistant", "content": [b.model_dump() for b in reply.content]})
        tool_result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "paid"}
        messages.append({"role": "user", "content": [tool_result]})
        sdk.messages.create(model=MODEL, max_tokens=64, messages=messages)

    via_sdk()
    (entries,) = transcripts(traced, tmp_path).values()
    assert entries == [
        {"event_type": "transcript_entry", "role": "user", "content": "Pay 5."},
        {
            "event_type": "transcript_entry",
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "toolu_1",
                    "function": {"name": "charge", "arguments": '{"a": 5}'},
                }
            ],
        },
        {
            "event_type": "transcript_entry",
            "role": "tool",
            "tool_call_id": "toolu_1",
            "content": "paid",
        },
        {"event_type": "transcript_entry", "role": "assistant", "content": "Done."},
    ]
    first = attrs(llm_spans(traced)[0])
    assert first[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_use",)
    lines = [
        line
        for p in (tmp_path / "sessions").glob("*.events.jsonl")
        for line in p.read_text().splitlines()
    ]
    journal = [line for line in lines if '"event_type":"step"' in line.replace(" ", "")]
    events = "\n".join(line for line in lines if line not in journal)
    assert "I should pay." in "\n".join(lines)  # the reasoning
    assert "c2lnbmF0dXJl" not in events  # the signature: in no event but the journal's
    assert any("c2lnbmF0dXJl" in line for line in journal)


# --- streams ----------------------------------------------------------------------------------


def test_a_streams_thinking_deltas_are_its_reasoning_chunks(
    traced: Traced, claude: AnthropicServer, tmp_path: Path
) -> None:
    thought = "Is it Paris or Lyon? The capital is Paris."
    claude.reset(Reply(blocks=[thinking(thought), text("Paris.")]))
    stream = client(claude).messages.create(model=MODEL, max_tokens=64, messages=HI, stream=True)
    for _ in stream:
        pass
    traced.handle.force_flush()
    (snapshot,) = (tmp_path / "sessions").glob("*.json.gz")
    document = json.loads(gzip.decompress(snapshot.read_bytes()))
    (op,) = [op for run in document["runs"] for turn in run["turns"] for op in turn["ops"]]
    # The server sends the thinking in deltas of 16 characters: one chunk each, as they came.
    chunks = [chunk["text"] for chunk in op["reasoning"]["chunks"]]
    assert chunks == [thought[i : i + 16] for i in range(0, len(thought), 16)]


@pytest.mark.init(capture_content=True)
def test_a_stream_is_one_span_with_its_reply_in_the_transcript(
    traced: Traced, claude: AnthropicServer, tmp_path: Path
) -> None:
    stream = client(claude).messages.create(model=MODEL, max_tokens=64, messages=HI, stream=True)
    assert isinstance(stream, anthropic.Stream)
    assert llm_spans(traced) == []  # open until the stream is read
    said = "".join(
        e.delta.text
        for e in stream
        if e.type == "content_block_delta" and e.delta.type == "text_delta"
    )
    assert said == "Hello!"
    span = traced.one(f"chat {MODEL}")
    check_genai_attributes(span, stream=True)
    chat = attrs(span)
    assert chat[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] > 0
    assert chat[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)
    assert json.loads(chat[sc.GEN_AI_OUTPUT_MESSAGES])[0]["content"] == "Hello!"
    (entries,) = transcripts(traced, tmp_path).values()
    assert entries == [
        {"event_type": "transcript_entry", "role": "user", "content": "hi"},
        {"event_type": "transcript_entry", "role": "assistant", "content": "Hello!"},
    ]


@pytest.mark.init(capture_content=True)
def test_the_stream_helper_is_one_span_sync_and_async(
    traced: Traced, claude: AnthropicServer
) -> None:
    claude.reset(
        Reply(blocks=[tool_use("charge", {"a": 5}, id="toolu_1")]),
        Reply(blocks=[tool_use("charge", {"a": 5}, id="toolu_1")]),
    )
    with client(claude).messages.stream(model=MODEL, max_tokens=64, messages=HI) as stream:
        final = stream.get_final_message()

    async def again() -> Any:
        async with aclient(claude).messages.stream(
            model=MODEL, max_tokens=64, messages=HI
        ) as astream:
            return await astream.get_final_message()

    answer = asyncio.run(again())
    assert final.content[0].input == answer.content[0].input == {"a": 5}
    spans = llm_spans(traced)
    assert len(spans) == 2
    for span in spans:
        check_genai_attributes(span, stream=True)
        chat = attrs(span)
        assert chat[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_use",)
        (message,) = json.loads(chat[sc.GEN_AI_OUTPUT_MESSAGES])
        assert message["tool_calls"][0]["function"] == {"name": "charge", "arguments": '{"a": 5}'}


def test_a_stream_closed_early_ends_its_span_once(traced: Traced, claude: AnthropicServer) -> None:
    stream = client(claude).messages.create(model=MODEL, max_tokens=64, messages=HI, stream=True)
    next(iter(stream))
    stream.close()
    stream.close()
    chat = attrs(traced.one(f"chat {MODEL}"))
    assert chat[sc.STREAM_ABANDONED] is True


# --- async ------------------------------------------------------------------------------------


def test_async_create_and_stream(traced: Traced, claude: AnthropicServer) -> None:
    async def main() -> tuple[str, str]:
        sdk = aclient(claude)
        reply = await sdk.messages.create(model=MODEL, max_tokens=64, messages=HI)
        stream = await sdk.messages.create(
            model=MODEL,
            max_tokens=64,
            messages=[*HI, {"role": "assistant", "content": reply.content[0].text}],
            stream=True,
        )
        assert isinstance(stream, anthropic.AsyncStream)
        said = "".join(
            [
                e.delta.text
                async for e in stream
                if e.type == "content_block_delta" and e.delta.type == "text_delta"
            ]
        )
        return reply.content[0].text, said

    assert asyncio.run(main()) == ("Hello!", "Hello!")
    first, second = llm_spans(traced)
    check_genai_attributes(first, stream=False)
    check_genai_attributes(second, stream=True)
    assert traced.tree() == [
        "invoke_agent agenttrace [0]",
        "  turn 1 [1]",
        f"    chat {MODEL} [1.1]",
        "  turn 2 [2]",
        f"    chat {MODEL} [2.1]",
    ]


# --- on and off, retries ------------------------------------------------------------------------


def test_uninstrument_puts_the_sdk_back(traced: Traced, claude: AnthropicServer) -> None:
    assert AnthropicInstrumentor().is_instrumented
    patched = vars(Messages)["create"], vars(AsyncMessages)["create"]
    AnthropicInstrumentor().uninstrument()
    try:
        assert vars(Messages)["create"] is patched[0].__wrapped__
        assert vars(AsyncMessages)["create"] is patched[1].__wrapped__
        client(claude).messages.create(model=MODEL, max_tokens=64, messages=HI)
        assert llm_spans(traced) == []
    finally:
        AnthropicInstrumentor().instrument(skip_dep_check=True)
    client(claude).messages.create(model=MODEL, max_tokens=64, messages=HI)
    assert len(llm_spans(traced)) == 1


@pytest.mark.init(instrument_anthropic=False)
def test_init_can_leave_the_sdk_alone(traced: Traced, claude: AnthropicServer) -> None:
    assert not AnthropicInstrumentor().is_instrumented
    client(claude).messages.create(model=MODEL, max_tokens=64, messages=HI)
    assert llm_spans(traced) == []


@pytest.mark.parametrize("status", [429, 503])
def test_each_request_the_sdk_retries_is_an_attempt_of_one_call(
    traced: Traced, claude: AnthropicServer, status: int
) -> None:
    fast = {"retry-after-ms": "10"}
    claude.reset(Reply(status=status, headers=fast), Reply(status=status, headers=fast))
    reply = client(claude, retries=2).messages.create(model=MODEL, max_tokens=64, messages=HI)

    async def again() -> Any:
        claude.reset(Reply(status=status, headers=fast))
        return await aclient(claude, retries=1).messages.create(
            model=MODEL, max_tokens=64, messages=HI
        )

    answer = asyncio.run(again())
    assert reply.content[0].text == answer.content[0].text == "Hello!"
    spans = llm_spans(traced)
    assert [(attrs(s)[sc.ATTEMPT], outcome(s)) for s in spans] == [
        (1, "failed"),
        (2, "failed"),
        (3, "ok"),
        (1, "failed"),
        (2, "ok"),
    ]
    assert len({s.parent.span_id for s in spans[:3] if s.parent}) == 1


def test_the_same_conversation_makes_the_same_transcript_as_through_litellm(
    traced: Traced, claude: AnthropicServer, tmp_path: Path
) -> None:
    """A system prompt, a tool call and its answer, asked of the same server through the SDK and
    through litellm's ``anthropic/`` model: the same transcript entries."""
    sdk = client(claude)

    @agenttrace.agent("ViaSDK")
    def via_sdk() -> None:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Pay 5."}]
        reply = sdk.messages.create(
            model=MODEL, max_tokens=64, system="Be brief.", messages=messages
        )
        messages.append({"role": "assistant", "content": [b.model_dump() for b in reply.content]})
        result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "paid"}
        messages.append({"role": "user", "content": [result]})
        sdk.messages.create(model=MODEL, max_tokens=64, system="Be brief.", messages=messages)

    @agenttrace.agent("ViaLiteLLM")
    def via_litellm() -> None:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Pay 5."},
        ]
        ask = {"model": f"anthropic/{MODEL}", "api_base": claude.base_url, "api_key": KEY}
        reply = litellm.completion(messages=messages, max_tokens=64, **ask)
        messages.append(reply.choices[0].message.model_dump(exclude_none=True))
        messages.append({"role": "tool", "tool_call_id": "toolu_1", "content": "paid"})
        litellm.completion(messages=messages, max_tokens=64, **ask)

    for run in (via_sdk, via_litellm):
        claude.reset(
            Reply(blocks=[tool_use("charge", {"a": 5}, id="toolu_1")]),
            Reply(blocks=[text("Done.")]),
        )
        run()
    first, second = transcripts(traced, tmp_path).values()
    assert first == second
    assert [entry["role"] for entry in first] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


ZERO_CODE = """\
import sys

import anthropic

client = anthropic.Anthropic(base_url=sys.argv[1], api_key="sk-ant-zero-code", max_retries=0)
reply = client.messages.create(
    model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "Say hi"}]
)
print(reply.content[0].text)
"""


@pytest.mark.e2e  # runs a whole program as a user does: make test, not make check
def test_opentelemetry_instrument_traces_a_plain_anthropic_script(
    tmp_path: Path, claude: AnthropicServer
) -> None:
    (entry,) = [
        e
        for e in metadata.entry_points(group="opentelemetry_instrumentor")
        if e.name == "agenttrace_anthropic"
    ]
    assert entry.load() is AnthropicInstrumentor
    claude.default = Reply(blocks=[text("hi")])
    script = tmp_path / "app.py"
    script.write_text(ZERO_CODE)
    env = child_env(
        OTEL_SERVICE_NAME="zero-code-app",
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
        AGENTTRACE_SESSIONS_DIR=str(tmp_path / "sessions"),
        AGENTTRACE_BILLING_FILE=str(tmp_path / "ledger.jsonl"),
        AGENTTRACE_RAISE_INTERNAL_ERRORS="1",
    )
    _, spans = run_instrumented([str(script), claude.base_url], env)
    by_name = {span.name: span for span in spans}
    chat = by_name[f"chat {MODEL}"]
    assert chat.attributes[sc.KIND] == sc.KIND_LLM
    assert chat.attributes[sc.GEN_AI_PROVIDER_NAME] == "anthropic"
    assert {"invoke_agent zero-code-app", "turn 1"} <= set(by_name)
    assert len(claude.message_requests()) == 1


def test_a_call_inside_an_llm_function_is_that_function_s_span(
    traced: Traced, claude: AnthropicServer
) -> None:
    """An ``@agenttrace.llm`` function or block is the program's own span of the call it
    makes: one span, never two."""
    sdk = client(claude)

    @agenttrace.llm(model=MODEL)
    def ask() -> anthropic.types.Message:
        return sdk.messages.create(model=MODEL, max_tokens=64, messages=HI)

    ask()
    with agenttrace.llm(model=MODEL) as call:
        call.record_response(sdk.messages.create(model=MODEL, max_tokens=64, messages=HI))
    assert len(claude.message_requests()) == 2
    assert len(llm_spans(traced)) == 2


def test_an_async_stream_closed_early_is_awaited_as_the_sdk_s_and_ends_its_span(
    traced: Traced, claude: AnthropicServer
) -> None:
    async def main() -> None:
        stream = await aclient(claude).messages.create(
            model=MODEL, max_tokens=64, messages=HI, stream=True
        )
        await stream.__anext__()
        await stream.close()  # AsyncStream.close is a coroutine
        assert stream.response.is_closed

    asyncio.run(main())
    chat = attrs(traced.one(f"chat {MODEL}"))
    assert chat[sc.STREAM_ABANDONED] is True


def test_a_stream_dropped_unread_ends_its_span(traced: Traced, claude: AnthropicServer) -> None:
    stream = client(claude).messages.create(model=MODEL, max_tokens=64, messages=HI, stream=True)
    next(iter(stream))
    del stream  # collected: its span ends, as abandoned
    chat = attrs(traced.one(f"chat {MODEL}"))
    assert chat[sc.STREAM_ABANDONED] is True
