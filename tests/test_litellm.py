"""litellm through the patch: real HTTP to the local server, and litellm's mock_response."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import socket
import threading
from typing import Any

import litellm
import litellm.main
import openai
import pytest
from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper
from openai import _base_client as openai_client
from opentelemetry.sdk.trace import TracerProvider

import agenttrace
from agenttrace import semconv as sc
from agenttrace._internal import finalizers
from agenttrace.instrumentation.litellm import LiteLLMInstrumentor
from agenttrace.recorder.store import EventStreamSink

from .conftest import Traced, attrs, duration_ms, outcome
from .llm_server import LLMServer, Reply

MODEL = "openai/gpt-4o-mini"
KEY = "sk-agenttrace-test-key-0001"


def http(llm: LLMServer, **kwargs: Any) -> dict[str, Any]:
    """Keyword arguments for a litellm call to the local server (no SDK-internal retries)."""
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hi"}],
        "api_base": llm.api_base,
        "api_key": KEY,
        "max_retries": 0,
        **kwargs,
    }


def llm_spans(traced: Traced) -> list[Any]:
    return [s for s in traced.spans() if attrs(s).get(sc.KIND) == "llm"]


# --- plain calls ------------------------------------------------------------------------------


@pytest.mark.init(capture_content=True)
def test_mock_response_gives_session_turn_op_with_tokens_marked_mocked(traced: Traced) -> None:
    response = litellm.completion(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], mock_response="hello"
    )
    assert response.choices[0].message.content == "hello"
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
    assert chat[sc.GEN_AI_USAGE_INPUT_TOKENS] == 10
    assert chat[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 20
    # litellm made the reply up: no model answered, nothing is billed at gpt-4o-mini's price.
    assert chat[sc.MOCKED] is True and chat[sc.COST_USD] == 0.0
    assert chat[sc.ATTEMPT] == 1
    assert outcome(traced.one("chat gpt-4o-mini")) == "ok"
    assert chat[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert json.loads(chat[sc.GEN_AI_INPUT_MESSAGES]) == [{"role": "user", "content": "hi"}]
    assert json.loads(chat[sc.GEN_AI_OUTPUT_MESSAGES])[0]["content"] == "hello"


def test_http_call_reports_openai_style_cached_and_reasoning_tokens(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(
        Reply(
            usage={
                "prompt_tokens": 100,
                "completion_tokens": 30,
                "total_tokens": 130,
                "prompt_tokens_details": {"cached_tokens": 60},
                "completion_tokens_details": {"reasoning_tokens": 12},
            }
        )
    )

    @agenttrace.agent("Solo")
    def run() -> Any:
        return litellm.completion(**http(llm))

    assert run().choices[0].message.content == "Hello!"
    chat = attrs(traced.one("chat gpt-4o-mini"))
    # OpenAI style: the cached tokens are already inside the 100 input tokens.
    assert chat[sc.GEN_AI_USAGE_INPUT_TOKENS] == 100
    assert chat[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 60
    assert chat[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 30
    assert chat[sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] == 12
    assert chat[sc.COST_USD] > 0
    assert chat[sc.GEN_AI_RESPONSE_MODEL] == "gpt-4o-mini"
    assert len(llm.requests) == 1


def test_anthropic_style_cache_tokens_count_on_top_of_input(traced: Traced, llm: LLMServer) -> None:
    response = litellm.completion(
        model="anthropic/claude-haiku-4-5",
        messages=[{"role": "user", "content": "hi"}],
        api_base=llm.base_url,
        api_key=KEY,
    )
    assert llm.requests[-1].path.endswith("/v1/messages")
    assert response.choices[0].message.content == "Hello!"
    chat = attrs(llm_spans(traced)[0])
    # The server said input 10, cache read 30, cache write 20: 60 input tokens in all.
    assert chat[sc.GEN_AI_USAGE_INPUT_TOKENS] == 60
    assert chat[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 30
    assert chat[sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] == 20
    assert chat[sc.GEN_AI_PROVIDER_NAME] == "anthropic"
    price = litellm.model_cost.get("claude-haiku-4-5")
    if price is None:  # litellm 1.75's price map predates the model: nothing to price it by
        assert sc.COST_USD not in chat
        return
    assert chat[sc.COST_USD] == pytest.approx(_cache_priced(price, 10, 30, 20, 5))


def _cache_priced(price: dict[str, Any], fresh: int, read: int, written: int, out: int) -> float:
    """What Anthropic charges for the tokens, by litellm's price map entry ``price``."""
    return (
        fresh * price["input_cost_per_token"]
        + read * price["cache_read_input_token_cost"]
        + written * price["cache_creation_input_token_cost"]
        + out * price["output_cost_per_token"]
    )


def test_tokens_are_priced_with_the_cache_writes_once() -> None:
    # Usage.input counts the writes; litellm before 1.77.3 prices them on top of prompt_tokens,
    # later releases inside it: either way they are paid once.
    from agenttrace.instrumentation.litellm.utils import cost_from_tokens
    from agenttrace.model.outcome import Usage

    model = next(
        name
        for name, price in litellm.model_cost.items()
        if price.get("litellm_provider") == "anthropic"
        and "/" not in name
        and price.get("cache_creation_input_token_cost")
    )
    price = litellm.model_cost[model]
    cost = cost_from_tokens(litellm, model, Usage(60, 5, cache_read=30, cache_write=20))
    assert cost == pytest.approx(_cache_priced(price, 10, 30, 20, 5))


async def test_acompletion_is_one_span_per_attempt(traced: Traced, llm: LLMServer) -> None:
    @agenttrace.agent("Async")
    async def run() -> Any:
        return await litellm.acompletion(**http(llm))

    response = await run()
    assert response.choices[0].message.content == "Hello!"
    assert traced.tree() == [
        "invoke_agent Async [0]",
        "  turn 1 [1]",
        "    chat gpt-4o-mini [1.1]",
    ]
    assert attrs(traced.one("chat gpt-4o-mini"))[sc.GEN_AI_USAGE_INPUT_TOKENS] == 11


async def test_concurrent_acompletions_under_gather(traced: Traced, llm: LLMServer) -> None:
    @agenttrace.agent
    async def worker(i: int) -> Any:
        return await litellm.acompletion(
            **http(llm, messages=[{"role": "user", "content": str(i)}])
        )

    @agenttrace.tool
    async def fan_out() -> list[Any]:
        return list(await asyncio.gather(*(worker(i) for i in range(4))))

    @agenttrace.agent("Boss")
    async def boss() -> None:
        await fan_out()

    await boss()
    sessions = {s.context.span_id: s for s in traced.by_name("invoke_agent worker")}
    turns = {s.context.span_id: s for s in traced.spans() if s.name == "turn 1"}
    chats = traced.by_name("chat gpt-4o-mini")
    assert len(sessions) == 4 and len(chats) == 4
    for chat in chats:
        turn = turns[chat.parent.span_id]
        session = sessions[turn.parent.span_id]
        assert attrs(chat)[sc.PATH] == attrs(session)[sc.PATH].replace(":1", "") + ".1.1"


# --- streams ------------------------------------------------------------------------------------


def test_sync_stream_keeps_its_type_and_ends_once(traced: Traced, llm: LLMServer) -> None:
    llm.reset(Reply(content="Hello streaming world", chunk_delay=0.01))
    stream = litellm.completion(**http(llm, stream=True))
    assert isinstance(stream, CustomStreamWrapper)
    assert llm_spans(traced) == []  # open until the stream ends
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream)
    assert text == "Hello streaming world"
    spans = llm_spans(traced)
    assert len(spans) == 1
    chat = attrs(spans[0])
    assert chat[sc.GEN_AI_REQUEST_STREAM] is True
    assert chat[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] > 0
    assert chat[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] * 1000 < duration_ms(spans[0])
    # No usage streamed: litellm counted the tokens.
    assert chat[sc.GEN_AI_USAGE_INPUT_TOKENS] > 0
    assert chat[sc.GEN_AI_USAGE_OUTPUT_TOKENS] > 0
    assert chat[sc.USAGE_ESTIMATED] is True
    assert chat[sc.COST_USD] > 0
    list(stream)  # iterating again after the end does not end the span twice
    assert len(llm_spans(traced)) == 1


def test_sync_stream_with_usage_reports_the_providers_tokens(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(Reply(usage={"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}))
    stream = litellm.completion(**http(llm, stream=True, stream_options={"include_usage": True}))
    for _ in stream:
        pass
    chat = attrs(llm_spans(traced)[0])
    assert chat[sc.GEN_AI_USAGE_INPUT_TOKENS] == 40
    assert chat[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 9
    assert sc.USAGE_ESTIMATED not in chat
    assert chat[sc.COST_USD] == pytest.approx(
        sum(litellm.cost_per_token(model="gpt-4o-mini", prompt_tokens=40, completion_tokens=9))
    )


async def test_async_stream_keeps_its_type_and_ends_once(traced: Traced, llm: LLMServer) -> None:
    llm.reset(Reply(content="async words here"))

    @agenttrace.agent("Streamer")
    async def run() -> str:
        stream = await litellm.acompletion(**http(llm, stream=True))
        assert isinstance(stream, CustomStreamWrapper)
        return "".join([c.choices[0].delta.content or "" async for c in stream])

    assert await run() == "async words here"
    spans = llm_spans(traced)
    assert len(spans) == 1
    chat = attrs(spans[0])
    assert chat[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] > 0
    assert chat[sc.GEN_AI_USAGE_OUTPUT_TOKENS] > 0
    assert chat[sc.PATH] == "1.1"


def test_abandoned_and_closed_streams_end_their_spans(traced: Traced, llm: LLMServer) -> None:
    llm.reset(Reply(content="a long answer in many chunks"), Reply(content="another long answer"))
    stream = litellm.completion(**http(llm, stream=True))
    next(iter(stream))
    del stream
    gc.collect()
    spans = llm_spans(traced)
    assert len(spans) == 1
    assert attrs(spans[0])[sc.STREAM_ABANDONED] is True

    with litellm.completion(**http(llm, stream=True)) as stream2:
        next(iter(stream2))
    spans = llm_spans(traced)
    assert len(spans) == 2
    assert attrs(spans[1])[sc.STREAM_ABANDONED] is True


# A hang guard: before the finalizer thread, the abandoned stream's end ran in the collecting
# thread and waited for ever for the event stream's lock, which that thread held.
@pytest.mark.timeout(120)
def test_a_stream_collected_while_its_thread_holds_the_lock_its_end_takes_does_not_hang(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(Reply(content="a long answer in many chunks"))
    streams = [litellm.completion(**http(llm, stream=True))]
    next(iter(streams[0]))
    processor = traced.handle.processor
    assert processor is not None
    (sink,) = [s for s in processor._sinks if isinstance(s, EventStreamSink)]

    def collect_under_the_lock() -> None:
        # A collection can start at any allocation, also on a thread writing a line under
        # the sink's lock: the abandoned stream's finalizer then runs there.
        sink._lock.acquire()
        try:
            streams.clear()
            gc.collect()
        finally:
            with contextlib.suppress(RuntimeError):  # released by the test below if it hung
                sink._lock.release()

    thread = threading.Thread(target=collect_under_the_lock, daemon=True)
    thread.start()
    thread.join(60)
    hung = thread.is_alive()
    if hung:  # free it (any thread may release a plain Lock): the test fails, the suite goes on
        sink._lock.release()
        thread.join(60)
    assert not hung, "the collecting thread waited for a lock it held"
    assert finalizers.drain(60) is True
    # The span ended on the finalizer thread, before any flush.
    (chat,) = [s for s in traced.exporter.get_finished_spans() if attrs(s).get(sc.KIND) == "llm"]
    assert attrs(chat)[sc.STREAM_ABANDONED] is True


def test_mock_stream(traced: Traced) -> None:
    stream = litellm.completion(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "hi"}],
        mock_response="streamed mock",
        stream=True,
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream) == "streamed mock"
    chat = attrs(llm_spans(traced)[0])
    assert chat[sc.GEN_AI_USAGE_OUTPUT_TOKENS] > 0
    assert outcome(llm_spans(traced)[0]) == "ok"


# --- failures ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "exception", "category"),
    [
        (401, litellm.AuthenticationError, "auth"),
        (429, litellm.RateLimitError, "quota"),
        (500, litellm.InternalServerError, "model"),
        (400, litellm.BadRequestError, "invalid"),
    ],
)
def test_http_failures_are_classified_and_pass_through(
    traced: Traced, llm: LLMServer, status: int, exception: type[Exception], category: str
) -> None:
    llm.reset(Reply(status=status))
    with pytest.raises(exception):
        litellm.completion(**http(llm))
    chat = llm_spans(traced)[0]
    assert attrs(chat)[sc.ERROR_TYPE] == category
    assert outcome(chat) == "failed"
    assert duration_ms(chat) > 0
    assert chat.status.status_code.name == "ERROR"
    assert f"attempt 1 failed ({category})" in traced.output()


@pytest.mark.parametrize("status,category", [(429, "quota"), (401, "auth"), (503, "model")])
async def test_async_http_failures_are_classified(
    traced: Traced, llm: LLMServer, status: int, category: str
) -> None:
    llm.reset(Reply(status=status))
    with pytest.raises(openai.APIError):
        await litellm.acompletion(**http(llm))
    assert attrs(llm_spans(traced)[0])[sc.ERROR_TYPE] == category


def test_timeout_is_classified(traced: Traced, llm: LLMServer) -> None:
    llm.reset(Reply(delay=2.0))
    with pytest.raises(litellm.Timeout):
        litellm.completion(**http(llm, timeout=0.3))
    assert attrs(llm_spans(traced)[0])[sc.ERROR_TYPE] == "timeout"


def test_refused_connection_is_a_network_failure(traced: Traced) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(litellm.InternalServerError):  # litellm's mapping of "Connection error"
        litellm.completion(
            model=MODEL,
            messages=[{"role": "user", "content": "hi"}],
            api_base=f"http://127.0.0.1:{port}/v1",
            api_key=KEY,
            max_retries=0,
        )
    assert attrs(llm_spans(traced)[0])[sc.ERROR_TYPE] == "network"


def test_mid_stream_failure_ends_the_span_failed(traced: Traced) -> None:
    stream = litellm.completion(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "hi"}],
        mock_response="Exception: mock_streaming_error",
        stream=True,
    )
    # What litellm raises is its own: 1.75 raises APIError from a sync stream (its
    # MidStreamFallbackError only from an async one), later releases MidStreamFallbackError.
    raised = (litellm.exceptions.MidStreamFallbackError, litellm.exceptions.APIError)
    with pytest.raises(raised):
        for _ in stream:
            pass
    assert outcome(llm_spans(traced)[0]) == "failed"


# --- content, secrets ---------------------------------------------------------------------------


@pytest.mark.init(capture_content=True)
def test_only_new_messages_are_recorded(traced: Traced) -> None:
    history: list[dict[str, str]] = [{"role": "system", "content": "be brief"}]

    @agenttrace.agent("Chatty")
    def run() -> None:
        for question in ("one", "two"):
            history.append({"role": "user", "content": question})
            reply = litellm.completion(model="gpt-4o-mini", messages=history, mock_response="ok")
            history.append({"role": "assistant", "content": reply.choices[0].message.content})

    run()
    first, second = (attrs(s) for s in traced.by_name("chat gpt-4o-mini"))
    assert json.loads(first[sc.GEN_AI_INPUT_MESSAGES]) == history[:2]
    assert first[sc.INPUT_MESSAGES_SKIPPED] == 0
    # What follows the agent's previous reply (the reply itself is the first span's output).
    assert json.loads(second[sc.GEN_AI_INPUT_MESSAGES]) == history[3:4]
    assert second[sc.INPUT_MESSAGES_SKIPPED] == 3
    reply = agenttrace.current_session().events[-3]
    assert reply["role"] == "assistant" and second[sc.INPUT_AFTER] == reply["message_id"]
    assert second[sc.REQUEST_MESSAGES] == 4


@pytest.mark.init(max_payload_bytes=300, capture_content=True)
def test_content_is_capped(traced: Traced) -> None:
    big = "x" * 5000
    litellm.completion(
        model="gpt-4o-mini", messages=[{"role": "user", "content": big}], mock_response="ok"
    )
    recorded = attrs(traced.one("chat gpt-4o-mini"))[sc.GEN_AI_INPUT_MESSAGES]
    assert len(recorded.encode()) <= 300
    assert json.loads(recorded)[0]["content"].startswith("xxxx")


@pytest.mark.init(capture_content=False)
def test_content_capture_can_be_switched_off(traced: Traced) -> None:
    litellm.completion(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "private"}], mock_response="ok"
    )
    chat = attrs(traced.one("chat gpt-4o-mini"))
    assert sc.GEN_AI_INPUT_MESSAGES not in chat
    assert sc.GEN_AI_OUTPUT_MESSAGES not in chat
    assert chat[sc.GEN_AI_USAGE_INPUT_TOKENS] == 10


@pytest.mark.console("trace")
@pytest.mark.init(capture_content=True)
def test_no_secret_reaches_spans_or_console(traced: Traced, llm: LLMServer) -> None:
    key = "sk-canary-api-key-7f3a9c"
    header_secret = "canary-header-secret-51be"
    bearer = "canary-bearer-token-99ad"
    llm.reset(Reply(), Reply(status=401, error_message=f"Incorrect API key provided: {key}"))
    kwargs = http(
        llm, extra_headers={"x-api-key": header_secret, "Authorization": f"Bearer {bearer}"}
    )
    kwargs["api_key"] = key
    litellm.completion(**kwargs)
    with pytest.raises(litellm.AuthenticationError):
        litellm.completion(**kwargs)
    assert llm.requests[0].headers.get("x-api-key") == header_secret  # it did go to the server
    recorded = traced.output() + "".join(
        json.dumps(
            {
                "attributes": attrs(span),
                "events": [[e.name, dict(e.attributes or {})] for e in span.events],
                "status": span.status.description,
            },
            default=str,
        )
        for span in traced.spans()
    )
    assert "TRC request" in recorded  # the trace console printed bodies, and still no secret
    for secret in (key, header_secret, bearer):
        assert secret not in recorded


def test_embeddings(traced: Traced, llm: LLMServer) -> None:
    response = litellm.embedding(
        model="openai/text-embedding-3-small",
        input=["a", "b"],
        api_base=llm.api_base,
        api_key=KEY,
    )
    assert len(response.data) == 2
    span = attrs(traced.one("embeddings text-embedding-3-small"))
    assert span[sc.KIND] == "llm"
    assert span[sc.GEN_AI_OPERATION_NAME] == "embeddings"
    assert span[sc.GEN_AI_USAGE_INPUT_TOKENS] == 5


# --- instrument / uninstrument -------------------------------------------------------------------


def _originals() -> dict[str, Any]:
    return {
        "litellm.completion": litellm.completion,
        "litellm.acompletion": litellm.acompletion,
        "litellm.main.completion": litellm.main.completion,
        "litellm.embedding": litellm.embedding,
        # Read through the class: litellm 1.110's Router serves them from its core class.
        "Router.completion": litellm.Router.completion,
        "Router.acompletion": litellm.Router.acompletion,
        "litellm.completion_with_retries": litellm.completion_with_retries,
        # Where the OpenAI SDK decides to retry: each of its retries is an attempt.
        "SyncAPIClient._sleep_for_retry": vars(openai_client.SyncAPIClient)["_sleep_for_retry"],
        "AsyncAPIClient._sleep_for_retry": vars(openai_client.AsyncAPIClient)["_sleep_for_retry"],
    }


def test_uninstrument_restores_litellm_exactly(tmp_path: Any) -> None:
    before = _originals()
    instrumentor = LiteLLMInstrumentor()
    provider = TracerProvider()
    try:
        # Not set up yet: instrument() sets agenttrace up on the provider it is given.
        instrumentor.instrument(tracer_provider=provider)
        patched = _originals()
        assert all(patched[name] is not before[name] for name in before)
        instrumentor.uninstrument()
        assert _originals() == before
        assert all(_originals()[name] is before[name] for name in before)
    finally:
        agenttrace.shutdown()


class _Core:
    """Where the endpoints live, as in litellm 1.110's router core."""

    def completion(self) -> str:
        return "core"


class _ServedByCore(type):
    """A metaclass that reads class attributes from ``_Core``, as litellm 1.110's Router's does."""

    def __getattr__(cls, name: str) -> Any:
        return getattr(_Core, name)


class _Facade(metaclass=_ServedByCore):
    """A class whose MRO holds no ``completion``: only its metaclass finds one."""


class _Sub(_Core):
    pass


def test_a_patch_goes_where_the_attribute_lives() -> None:
    from agenttrace.instrumentation.litellm.patch import defining_class

    assert defining_class(_Core, "completion") is _Core
    assert defining_class(_Sub, "completion") is _Core  # a base class's, patched there
    assert defining_class(_Facade, "completion") is _Core  # served by the metaclass
    assert defining_class(_Facade, "missing") is None
    # Every Router entry point the installed litellm has is found in a class's own namespace.
    for name in ("completion", "acompletion", "embedding", "aembedding"):
        home = defining_class(litellm.Router, name)
        assert home is not None and vars(home)[name] is getattr(litellm.Router, name)


def test_instrumenting_twice_warns_and_does_not_double_wrap(
    traced: Traced, caplog: pytest.LogCaptureFixture
) -> None:
    wrapped = litellm.completion
    LiteLLMInstrumentor().instrument()
    assert "already instrumented" in caplog.text
    assert litellm.completion is wrapped
    litellm.completion(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}], mock_response="y"
    )
    assert len(llm_spans(traced)) == 1


def test_other_instrumentations_stacked_on_litellm(traced: Traced) -> None:
    """An OpenInference-style setattr patch and an OpenLLMetry-style wrapt patch, on top of ours."""
    import wrapt

    seen: list[str] = []
    ours = litellm.completion

    def setattr_style(*args: Any, **kwargs: Any) -> Any:  # like OpenInference's
        seen.append("setattr")
        return ours(*args, **kwargs)

    litellm.completion = setattr_style
    wrapt.wrap_function_wrapper(
        litellm, "completion", lambda w, i, a, k: seen.append("wrapt") or w(*a, **k)
    )
    try:
        litellm.completion(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}], mock_response="y"
        )
    finally:
        litellm.completion = ours
    assert seen == ["wrapt", "setattr"]
    assert len(llm_spans(traced)) == 1


async def test_async_embeddings_one_span(traced: Traced, llm: LLMServer) -> None:
    response = await litellm.aembedding(
        model="openai/text-embedding-3-small", input=["a"], api_base=llm.api_base, api_key=KEY
    )
    assert len(response.data) == 1
    spans = traced.by_name("embeddings text-embedding-3-small")
    assert len(spans) == 1
    assert attrs(spans[0])[sc.GEN_AI_OPERATION_NAME] == "embeddings"


def test_an_internal_failure_logging_the_reply_still_ends_the_span(
    traced: Traced, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The reply could not enter the transcript (a bug of ours): the call still returns its
    response, the attempt's span still ends with its tokens, one warning says what failed."""
    from agenttrace._internal import errors as internal_errors
    from agenttrace.instrumentation.litellm import attempt

    monkeypatch.setattr(internal_errors, "raise_internal_errors", False)
    internal_errors.reset_reported()

    def broken(*args: Any) -> None:
        raise RuntimeError("transcript bookkeeping broke")

    monkeypatch.setattr(attempt, "log_llm_exchange", broken)
    with caplog.at_level("WARNING", logger="agenttrace"):
        response = litellm.completion(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}], mock_response="hello"
        )
    assert response.choices[0].message.content == "hello"
    (chat,) = traced.by_name("chat gpt-4o")
    assert chat.end_time is not None
    assert attrs(chat)[sc.GEN_AI_USAGE_OUTPUT_TOKENS] > 0
    assert [r for r in caplog.records if "transcript bookkeeping broke" in r.getMessage()]


@pytest.mark.console("trace")
def test_trace_console_prints_the_bodies_even_with_content_off_spans(traced: Traced) -> None:
    litellm.completion(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "what time"}],
        mock_response="noon",
    )
    out = traced.output()
    assert "TRC request" in out and "what time" in out
    assert "TRC response" in out and "noon" in out
    assert sc.GEN_AI_INPUT_MESSAGES not in attrs(traced.one("chat gpt-4o-mini"))


def test_a_failed_attempt_keeps_its_request_in_the_session_file(
    traced: Traced, tmp_path: Any
) -> None:
    from agenttrace.formats.session.files import read_session_file, snapshot_path

    session = agenttrace.new_session("failed-attempt")
    with pytest.raises(litellm.RateLimitError):
        litellm.completion(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "please"}],
            mock_response=litellm.RateLimitError("slow", "openai", "gpt-4o-mini"),
        )
    traced.handle.force_flush()
    (run,) = read_session_file(snapshot_path(tmp_path / "sessions", session.session_id)).runs
    (op,) = run["turns"][0]["ops"]
    assert op["status"] == "failed"
    assert json.loads(op["request"]["payload"])[0]["content"] == "please"
