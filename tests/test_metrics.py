"""GenAI client metrics through a real MeterProvider: token usage and operation duration."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import litellm
import pytest
from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

import agenttrace
from agenttrace import semconv as sc
from agenttrace.sdk.metrics import DURATION_BUCKETS, TOKEN_BUCKETS

from .llm_server import LLMServer, Reply


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[InMemoryMetricReader]:
    """agenttrace on a provider that samples nothing, and a meter provider of the test's own."""
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    agenttrace.use_session(None)
    handle = agenttrace.init(
        tracer_provider=TracerProvider(sampler=ALWAYS_OFF),
        meter_provider=meters,
        sessions_dir=tmp_path / "sessions",
        billing_file=tmp_path / "ledger.jsonl",
    )
    try:
        yield reader
    finally:
        handle.shutdown()
        meters.shutdown()


def points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    return collect(reader).get(name, [])


def collect(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    """Each metric's points, by name, from one collection (a collection starts the next
    interval's exemplars afresh)."""
    agenttrace.force_flush()
    data = reader.get_metrics_data()
    found: dict[str, list[Any]] = {}
    for resource_metrics in data.resource_metrics if data else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


@agenttrace.llm(model="gpt-4o", provider="openai")
def ask(*, messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant"}}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
    }


@agenttrace.agent("Asker")
def two_questions() -> None:
    ask(messages=[{"role": "user", "content": "one"}])
    ask(messages=[{"role": "user", "content": "two"}])


def test_token_usage_by_type_with_the_conventions_attributes(reader: InMemoryMetricReader) -> None:
    two_questions()  # the sampler keeps no span: the metrics count all the same
    usage = {
        p.attributes[sc.GEN_AI_TOKEN_TYPE]: p for p in points(reader, "gen_ai.client.token.usage")
    }
    assert set(usage) == {"input", "output"}
    assert (usage["input"].count, usage["input"].sum) == (2, 22)
    assert (usage["output"].count, usage["output"].sum) == (2, 6)
    assert dict(usage["input"].attributes) == {
        sc.GEN_AI_OPERATION_NAME: "chat",
        sc.GEN_AI_PROVIDER_NAME: "openai",
        sc.GEN_AI_REQUEST_MODEL: "gpt-4o",
        sc.GEN_AI_RESPONSE_MODEL: "gpt-4o-2024-08-06",
        sc.GEN_AI_TOKEN_TYPE: "input",
    }
    assert tuple(usage["input"].explicit_bounds) == TOKEN_BUCKETS


def test_operation_duration_with_the_error_type_of_a_failed_attempt(
    reader: InMemoryMetricReader,
) -> None:
    @agenttrace.agent("Flaky")
    def flaky() -> None:
        ask(messages=[{"role": "user", "content": "fine"}])
        with pytest.raises(litellm.RateLimitError):
            litellm.completion(
                model="gpt-4o",
                messages=[{"role": "user", "content": "too many"}],
                mock_response=litellm.RateLimitError("slow down", "openai", "gpt-4o"),
            )

    flaky()
    durations = points(reader, "gen_ai.client.operation.duration")
    by_error = {p.attributes.get(sc.ERROR_TYPE): p for p in durations}
    assert set(by_error) == {None, "quota"}
    assert by_error[None].count == 1 and by_error["quota"].count == 1
    assert all(0 < p.sum < 60 for p in durations)  # seconds, not milliseconds
    assert tuple(by_error[None].explicit_bounds) == DURATION_BUCKETS
    # A failed attempt reports no tokens.
    usage = points(reader, "gen_ai.client.token.usage")
    assert sum(p.count for p in usage) == 2


def test_no_metrics_for_tools_or_agent_runs(reader: InMemoryMetricReader) -> None:
    @agenttrace.tool
    def lookup() -> str:
        return "x"

    @agenttrace.agent("Tooly")
    def tooly() -> None:
        lookup()

    tooly()
    assert points(reader, "gen_ai.client.operation.duration") == []


# -- exemplars: each point links to the attempt's span ------------------------------------------


@pytest.fixture
def sampled(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[InMemoryMetricReader, InMemorySpanExporter]]:
    """agenttrace on a provider that samples every span, and a meter provider of the test's own
    (its exemplar filter is OpenTelemetry's default, ``trace_based``, unless the test gives
    another as the fixture's parameter)."""
    reader = InMemoryMetricReader()
    chosen = getattr(request, "param", None)
    meters = MeterProvider(
        metric_readers=[reader], **({"exemplar_filter": chosen} if chosen is not None else {})
    )
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agenttrace.use_session(None)
    handle = agenttrace.init(
        tracer_provider=provider,
        meter_provider=meters,
        sessions_dir=tmp_path / "sessions",
        billing_file=tmp_path / "ledger.jsonl",
    )
    try:
        yield reader, exporter
    finally:
        handle.shutdown()
        provider.shutdown()
        meters.shutdown()


def chat_span(exporter: InMemorySpanExporter) -> ReadableSpan:
    (chat,) = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    return chat


def linked_to(point: Any, span: ReadableSpan) -> list[tuple[float, bool]]:
    """(value, whether it carries ``span``'s trace id and span id) of each of the point's
    exemplars."""
    context = span.get_span_context()
    assert context is not None
    return [
        (e.value, (e.trace_id, e.span_id) == (context.trace_id, context.span_id))
        for e in point.exemplars
    ]


def test_exemplars_carry_the_chat_spans_trace_and_span_ids(
    sampled: tuple[InMemoryMetricReader, InMemorySpanExporter],
) -> None:
    reader, exporter = sampled

    @agenttrace.agent("Asker")
    def one_question() -> None:
        ask(messages=[{"role": "user", "content": "one"}])

    one_question()
    chat = chat_span(exporter)
    collected = collect(reader)
    (duration,) = collected["gen_ai.client.operation.duration"]
    assert duration.count == 1
    assert linked_to(duration, chat) == [(duration.sum, True)]
    usage = {p.attributes[sc.GEN_AI_TOKEN_TYPE]: p for p in collected["gen_ai.client.token.usage"]}
    assert linked_to(usage["input"], chat) == [(11, True)]
    assert linked_to(usage["output"], chat) == [(3, True)]


def test_a_streamed_attempt_ending_where_it_is_read_links_to_its_own_span(
    sampled: tuple[InMemoryMetricReader, InMemorySpanExporter], llm_server: LLMServer
) -> None:
    """The stream is read after the call returned: the agent's span is current then, not the
    chat span, and the exemplars still name the chat span."""
    reader, exporter = sampled
    llm_server.reset(Reply(usage={"prompt_tokens": 40, "completion_tokens": 9}))
    with agenttrace.agent("Streamer"):
        stream = litellm.completion(
            model="openai/gpt-4o-mini",
            messages=[{"role": "user", "content": "hi"}],
            api_base=llm_server.api_base,
            api_key="sk-agenttrace-test-key-0001",
            max_retries=0,
            stream=True,
            stream_options={"include_usage": True},
        )
        for _ in stream:
            pass
    chat = chat_span(exporter)
    collected = collect(reader)
    (duration,) = collected["gen_ai.client.operation.duration"]
    assert linked_to(duration, chat) == [(duration.sum, True)]
    usage = {p.attributes[sc.GEN_AI_TOKEN_TYPE]: p for p in collected["gen_ai.client.token.usage"]}
    assert linked_to(usage["input"], chat) == [(40, True)]
    assert linked_to(usage["output"], chat) == [(9, True)]


def test_an_unsampled_attempt_is_counted_with_no_exemplar(reader: InMemoryMetricReader) -> None:
    """agenttrace's provider samples nothing; the application's own sampled span is current
    around the agent: the points count the attempt and carry no exemplar, not even one naming
    the application's span."""
    application = TracerProvider()
    with application.get_tracer("app").start_as_current_span("request") as outer:
        assert outer.get_span_context().trace_flags.sampled
        two_questions()
    collected = collect(reader)
    durations = collected["gen_ai.client.operation.duration"]
    usage = collected["gen_ai.client.token.usage"]
    assert [p.count for p in durations] == [2]
    assert sorted(p.count for p in usage) == [2, 2]
    assert [p.exemplars for p in (*durations, *usage)] == [[], [], []]
    application.shutdown()


@pytest.mark.parametrize("sampled", [AlwaysOffExemplarFilter()], indirect=True)
def test_the_applications_exemplar_filter_decides(
    sampled: tuple[InMemoryMetricReader, InMemorySpanExporter],
) -> None:
    reader, _ = sampled
    two_questions()  # sampled, but the application wants no exemplars
    collected = collect(reader)
    found = [
        *collected["gen_ai.client.operation.duration"],
        *collected["gen_ai.client.token.usage"],
    ]
    assert sorted(p.count for p in found) == [2, 2, 2]
    assert [p.exemplars for p in found] == [[], [], []]
