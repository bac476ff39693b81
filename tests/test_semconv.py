"""Every ``gen_ai.*`` name agenttrace emits is one the GenAI semantic conventions define.

Checked against OpenTelemetry's own semantic-conventions package (its incubating GenAI
attributes and metrics), not a list of our own: a misspelt or invented name fails here.
"""

from __future__ import annotations

from typing import Any

import litellm
import opentelemetry.semconv._incubating.attributes.gen_ai_attributes as gen_ai_attributes
import opentelemetry.semconv._incubating.metrics.gen_ai_metrics as gen_ai_metrics
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import agenttrace
from agenttrace import semconv as sc
from agenttrace.tracing.llm_attributes import _PROVIDER_NAMES

from .conftest import Traced


def _names(module: Any) -> set[str]:
    return {v for k, v in vars(module).items() if k.startswith("GEN_AI_") and isinstance(v, str)}


ATTRIBUTES = _names(gen_ai_attributes)
METRICS = _names(gen_ai_metrics)


def test_every_gen_ai_name_in_semconv_py_is_defined_by_the_conventions() -> None:
    ours = {v for v in vars(sc).values() if isinstance(v, str) and v.startswith("gen_ai.")}
    # The event's name is not in the Python package (it has no GenAI events module yet).
    ours.discard(sc.EVENT_INFERENCE_DETAILS)
    metrics = {sc.METRIC_TOKEN_USAGE, sc.METRIC_OPERATION_DURATION}
    assert metrics <= METRICS
    assert ours - metrics <= ATTRIBUTES, sorted(ours - metrics - ATTRIBUTES)


def test_operation_names_and_token_types_are_the_conventions_values() -> None:
    operations = {member.value for member in gen_ai_attributes.GenAiOperationNameValues}
    assert {sc.OP_CHAT, sc.OP_EMBEDDINGS, sc.OP_INVOKE_AGENT, sc.OP_EXECUTE_TOOL} <= operations
    token_types = {member.value for member in gen_ai_attributes.GenAiTokenTypeValues}
    assert {"input", "output"} <= token_types


def test_well_known_providers_use_the_conventions_names() -> None:
    known = {member.value for member in gen_ai_attributes.GenAiProviderNameValues}
    assert set(_PROVIDER_NAMES.values()) <= known, sorted(set(_PROVIDER_NAMES.values()) - known)


@pytest.mark.init(meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()]))
def test_every_gen_ai_name_on_real_spans_is_defined(traced: Traced) -> None:
    """What actually goes out: an agent run with a tool call, a litellm call with tools and a
    stream, an embedding, and a failed attempt."""

    @agenttrace.tool
    def lookup(query: str) -> str:
        return "found"

    @agenttrace.agent("Checker")
    def run() -> None:
        lookup("x")
        litellm.completion(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], mock_response="y"
        )
        stream = litellm.completion(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "hi"}],
            mock_response="streamed",
            stream=True,
        )
        for _ in stream:
            pass
        litellm.embedding(model="text-embedding-3-small", input=["hi"], mock_response=[0.1])
        with pytest.raises(litellm.RateLimitError):
            litellm.completion(
                model="gpt-4o-mini",
                messages=[{"role": "user", "content": "no"}],
                mock_response=litellm.RateLimitError("slow", "openai", "gpt-4o-mini"),
            )

    run()
    emitted = {
        key
        for span in traced.spans()
        for key in [*(span.attributes or {}), *(k for e in span.events for k in e.attributes or {})]
        if key.startswith("gen_ai.")
    }
    assert {sc.GEN_AI_USAGE_INPUT_TOKENS, sc.GEN_AI_TOOL_NAME, sc.GEN_AI_PROVIDER_NAME} <= emitted
    assert emitted <= ATTRIBUTES, sorted(emitted - ATTRIBUTES)
