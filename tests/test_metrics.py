"""GenAI client metrics through a real MeterProvider: token usage and operation duration."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import litellm
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

import agenttrace
from agenttrace import semconv as sc
from agenttrace.sdk.metrics import DURATION_BUCKETS, TOKEN_BUCKETS


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
    agenttrace.force_flush()
    data = reader.get_metrics_data()
    found = []
    for resource_metrics in data.resource_metrics if data else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                if metric.name == name:
                    found.extend(metric.data.data_points)
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
