"""OpenTelemetry's promises, kept: spans end in the call that ends them, the application's
provider and sampler stay in charge, and what agenttrace records does not depend on sampling."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, Sampler, TraceIdRatioBased

import agenttrace
from agenttrace import semconv as sc
from agenttrace.formats.session.files import read_session_file, snapshot_path, stream_path

from .conftest import Traced, attrs


@pytest.fixture
def own_provider(tmp_path: Path) -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """An application's provider with its own batch processor, set up *before* agenttrace."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=60_000))
    agenttrace.use_session(None)
    handle = agenttrace.init(
        tracer_provider=provider,
        sessions_dir=tmp_path / "sessions",
        billing_file=tmp_path / "accounting.jsonl",
    )
    try:
        yield provider, exporter
    finally:
        handle.shutdown()


@agenttrace.tool
def lookup(query: str) -> dict[str, Any]:
    return {"query": query, "hits": [1, 2, 3]}


@agenttrace.llm(model="gpt-4o", provider="openai")
def ask(*, messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "r1",
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "Paris"},
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
    }


@agenttrace.agent("Researcher")
def research() -> str:
    for query in ("a", "b"):
        lookup(query)
    ask(messages=[{"role": "user", "content": "Capital of France?"}])
    return "Paris"


def test_provider_shutdown_exports_every_span_whatever_the_order(
    own_provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """A batch processor added before init(), then the application's own provider.shutdown():
    every agenttrace span is exported (they ended in the caller, so the batch processor has
    them), without any agenttrace.force_flush()."""
    provider, exporter = own_provider
    research()
    provider.shutdown()
    names = sorted(s.name for s in exporter.get_finished_spans())
    assert names == sorted(
        [
            "invoke_agent Researcher",
            "turn 1",
            "turn 2",
            "execute_tool lookup",
            "execute_tool lookup",
            "chat gpt-4o",
        ]
    )


def test_provider_force_flush_exports_and_flushes_our_outputs(
    own_provider: tuple[TracerProvider, InMemorySpanExporter], tmp_path: Path
) -> None:
    provider, exporter = own_provider
    session = agenttrace.new_session("flushed")
    research()
    assert provider.force_flush() is True
    assert len(exporter.get_finished_spans()) == 6
    # Our processor is on the provider: its force_flush wrote the session file and the ledger.
    loaded = read_session_file(snapshot_path(tmp_path / "sessions", session.session_id))
    assert loaded.runs[0]["success"] is True
    ledger = (tmp_path / "accounting.jsonl").read_text().splitlines()
    assert len(ledger) == 3


def test_spans_end_in_the_caller_before_it_returns(traced: Traced) -> None:
    """No flush needed: a decorated call's span is with the exporter when the call returns."""
    lookup("x")
    names = [s.name for s in traced.exporter.get_finished_spans()]
    assert "execute_tool lookup" in names


def _outputs(tmp_path: Path, sampler: Sampler) -> dict[str, Any]:
    """Run the same agent under ``sampler``; what the stream, session file and ledger hold."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sessions = tmp_path / "sessions"
    agenttrace.use_session(None)
    handle = agenttrace.init(
        tracer_provider=provider, sessions_dir=sessions, billing_file=tmp_path / "ledger.jsonl"
    )
    try:
        session = agenttrace.new_session("sampled")
        research()
        research()
        handle.force_flush()
    finally:
        handle.shutdown()
    loaded = read_session_file(snapshot_path(sessions, session.session_id))
    stream = stream_path(sessions, session.session_id).read_text().splitlines()
    ledger = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    return {"spans": exporter.get_finished_spans(), "runs": loaded.runs, "stream": stream,
            "ledger": ledger}  # fmt: skip


def _shape(ledger: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["type"], r["status"], r["path"], r.get("tokens"), r.get("providerLabel"))
            for r in ledger]  # fmt: skip


@pytest.mark.parametrize("sampler", [ALWAYS_OFF, TraceIdRatioBased(0.0)], ids=["off", "ratio0"])
def test_what_is_recorded_does_not_depend_on_the_sampler(tmp_path: Path, sampler: Sampler) -> None:
    sampled = _outputs(tmp_path / "on", ALWAYS_ON)
    dropped = _outputs(tmp_path / "off", sampler)
    assert len(sampled["spans"]) == 12 and dropped["spans"] == ()
    # The ledger, the stream and the session file are complete all the same.
    assert len(dropped["ledger"]) == len(sampled["ledger"]) == 6
    assert _shape(dropped["ledger"]) == _shape(sampled["ledger"])
    assert len(dropped["stream"]) == len(sampled["stream"]) > 0
    assert len(dropped["runs"]) == len(sampled["runs"]) == 2
    for run in dropped["runs"]:
        assert run["success"] is True and run["endedAt"] >= run["startedAt"]
        assert [len(turn["ops"]) for turn in run["turns"]] == [2, 1]  # tools, then the LLM
        assert run["traceId"]  # ids exist even for spans nobody samples


@pytest.mark.init(capture_content=True)
def test_a_result_mutated_after_return_is_recorded_as_returned(traced: Traced) -> None:
    @agenttrace.agent("Mutator")
    def run() -> None:
        result = lookup("q")
        result["hits"].append("changed after return")
        response = ask(messages=[{"role": "user", "content": "hi"}])
        response["choices"][0]["message"]["content"] = "changed after return"
        response["usage"]["completion_tokens"] = 999

    run()
    tool = traced.one("execute_tool lookup")
    assert json.loads(str(attrs(tool)[sc.GEN_AI_TOOL_CALL_RESULT])) == {
        "query": "q",
        "hits": [1, 2, 3],
    }
    chat = traced.one("chat gpt-4o")
    assert "changed" not in str(attrs(chat)[sc.GEN_AI_OUTPUT_MESSAGES])
    assert attrs(chat)[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 3


@pytest.mark.init(capture_content=True)
async def test_one_context_manager_object_shared_by_50_tasks(
    traced: Traced, caplog: pytest.LogCaptureFixture
) -> None:
    shared = agenttrace.tool("fetch")

    async def task(i: int) -> None:
        async with shared as call:
            await asyncio.sleep(0.001 * (i % 5))
            call.set_result(f"page {i}")

    @agenttrace.agent("Crawler")
    async def crawl() -> None:
        with agenttrace.turn():
            await asyncio.gather(*(task(i) for i in range(50)))

    with caplog.at_level(logging.ERROR):
        await crawl()
    assert "Failed to detach context" not in caplog.text
    fetches = traced.by_name("execute_tool fetch")
    assert len(fetches) == 50
    assert all(s.end_time is not None for s in fetches)
    turn = traced.one("turn 1")
    assert {s.parent.span_id for s in fetches if s.parent} == {turn.context.span_id}
    results = sorted(str(attrs(s)[sc.GEN_AI_TOOL_CALL_RESULT]) for s in fetches)
    assert results == sorted(f"page {i}" for i in range(50))
    assert sorted(attrs(s)[sc.PATH] for s in fetches) == sorted(f"1.{i}" for i in range(1, 51))


def test_one_context_manager_object_shared_by_threads(traced: Traced) -> None:
    import threading

    shared = agenttrace.tool("work")
    barrier = threading.Barrier(8)

    def worker() -> None:
        with shared:
            barrier.wait(timeout=30)  # all eight inside the same object's with-block at once

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=480)
    spans: list[ReadableSpan] = traced.by_name("execute_tool work")
    assert len(spans) == 8 and all(s.end_time for s in spans)
    # Each thread had no agenttrace scope around it: each got a run of its own.
    assert len({s.context.trace_id for s in spans}) == 8


def test_llm_attempts_are_client_spans_agents_and_tools_internal(traced: Traced) -> None:
    """GenAI conventions: a model call leaves the process (CLIENT); agent runs, turns and tool
    calls run in it (INTERNAL)."""
    from opentelemetry.trace import SpanKind

    research()
    kinds = {span.name: span.kind for span in traced.spans()}
    assert kinds["chat gpt-4o"] == SpanKind.CLIENT
    assert kinds["execute_tool lookup"] == SpanKind.INTERNAL
    assert kinds["invoke_agent Researcher"] == SpanKind.INTERNAL
    assert kinds["turn 1"] == SpanKind.INTERNAL


def test_openinference_attributes_only_when_asked(traced: Traced) -> None:
    research()
    for span in traced.ours():
        names = set(attrs(span))
        assert not any(n.startswith(("openinference.", "llm.")) or n == "tool.name" for n in names)
        assert sc.STATUS not in names and sc.LATENCY_MS not in names


@pytest.mark.init(openinference=True)
def test_openinference_attributes_for_phoenix_users(traced: Traced) -> None:
    research()
    kinds = {s.name: attrs(s).get("openinference.span.kind") for s in traced.ours()}
    assert kinds["invoke_agent Researcher"] == "AGENT"
    assert kinds["execute_tool lookup"] == "TOOL"
    assert kinds["chat gpt-4o"] == "LLM"
    chat = attrs(traced.one("chat gpt-4o"))
    assert (chat["llm.token_count.prompt"], chat["llm.token_count.completion"]) == (11, 3)


def test_content_stays_off_spans_by_default_but_the_saved_state_keeps_it(
    traced: Traced, tmp_path: Path
) -> None:
    """The GenAI conventions' default: no message, argument or result content on spans. The
    session file is the full-fidelity record: its ops keep their request and response."""
    session = agenttrace.new_session("content")
    research()
    traced.handle.force_flush()
    for span in traced.ours():
        names = set(attrs(span))
        assert not names & {
            sc.GEN_AI_INPUT_MESSAGES,
            sc.GEN_AI_OUTPUT_MESSAGES,
            sc.GEN_AI_TOOL_CALL_ARGUMENTS,
            sc.GEN_AI_TOOL_CALL_RESULT,
        }
    (run,) = read_session_file(snapshot_path(tmp_path / "sessions", session.session_id)).runs
    tool, chat = run["turns"][0]["ops"][0], run["turns"][1]["ops"][0]
    assert json.loads(tool["request"]["payload"]) == {"query": "a"}
    assert json.loads(tool["response"]["payload"]) == {"query": "a", "hits": [1, 2, 3]}
    assert json.loads(chat["request"]["payload"])[0]["content"] == "Capital of France?"
    assert json.loads(chat["response"]["payload"])[0]["content"] == "Paris"


def test_content_as_the_conventions_log_event(tmp_path: Path) -> None:
    """EVENT_ONLY under gen_ai_latest_experimental: the content goes to a
    gen_ai.client.inference.operation.details log record parented to the LLM span."""
    from agenttrace._internal.config import Settings

    from .helpers import log_records

    logs = log_records()
    settings = Settings.resolve(
        {
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY",
            "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        }
    )
    assert (settings.capture_content, settings.content_events) == (False, True)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agenttrace.use_session(None)
    handle = agenttrace.init(
        tracer_provider=provider,
        sessions_dir=tmp_path / "sessions",
        billing_file=tmp_path / "ledger.jsonl",
    )
    from agenttrace._internal.runtime import runtime

    previous, runtime.settings = runtime.settings, settings
    try:
        research()
    finally:
        runtime.settings = previous
        handle.shutdown()
    (record,) = [r.log_record for r in logs.get_finished_logs()]
    assert record.event_name == "gen_ai.client.inference.operation.details"
    chat = next(s for s in exporter.get_finished_spans() if s.name == "chat gpt-4o")
    assert (record.trace_id, record.span_id) == (chat.context.trace_id, chat.context.span_id)
    attributes = dict(record.attributes or {})
    assert json.loads(str(attributes[sc.GEN_AI_OUTPUT_MESSAGES]))[0]["content"] == "Paris"
    assert attributes[sc.GEN_AI_OPERATION_NAME] == "chat"
    assert sc.GEN_AI_OUTPUT_MESSAGES not in (chat.attributes or {})  # EVENT_ONLY: not on the span
