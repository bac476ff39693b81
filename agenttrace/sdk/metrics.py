"""GenAI client metrics, as the semantic conventions define them (release v1.41).

- ``gen_ai.client.token.usage``: a histogram of tokens per LLM attempt, one measurement per
  ``gen_ai.token.type`` (``input``, ``output``), in ``{token}``.
- ``gen_ai.client.operation.duration``: a histogram of each LLM attempt's duration, in ``s``,
  with ``error.type`` when it failed.

Both carry ``gen_ai.operation.name``, ``gen_ai.provider.name``, ``gen_ai.request.model`` and
``gen_ai.response.model``, and use the conventions' explicit bucket boundaries. They are
projections of lifecycle records like every other output, so they count every attempt whatever
the sampler keeps; they go to the meter provider the application set (or the one ``init`` made
for an OTLP endpoint).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.metrics import MeterProvider
from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace.record.lifecycle import Ended, Started
from agenttrace.sdk.processor import Sink

TOKEN_BUCKETS = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)  # fmt: skip
"""The conventions' explicit bucket boundaries for ``gen_ai.client.token.usage``."""

DURATION_BUCKETS = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
"""The conventions' explicit bucket boundaries for ``gen_ai.client.operation.duration``."""

_IDENTITY = (
    sc.GEN_AI_OPERATION_NAME,
    sc.GEN_AI_PROVIDER_NAME,
    sc.GEN_AI_REQUEST_MODEL,
)


class MetricsSink(Sink):
    """Records each LLM attempt's tokens and duration on the GenAI client histograms."""

    def __init__(self, meter_provider: MeterProvider, version: str) -> None:
        meter = meter_provider.get_meter("agenttrace", version)
        self.token_usage = meter.create_histogram(
            sc.METRIC_TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.duration = meter.create_histogram(
            sc.METRIC_OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        # The attempts running now: (origin, label) -> (start time, start attributes).
        self._open: dict[tuple[str, str], tuple[int, Mapping[str, Any]]] = {}

    def started(self, record: Started) -> None:
        if record.kind == sc.KIND_LLM:
            self._open[(record.origin, record.label)] = (record.started_ns, record.attributes)

    def ended(self, record: Ended) -> None:
        opened = self._open.pop((record.origin, record.label), None)
        if opened is None:
            return
        started_ns, started = opened
        ended = record.attributes
        attributes: dict[str, AttributeValue] = {}
        for key in _IDENTITY:
            value = started.get(key)
            if value is not None:
                attributes[key] = value
        response_model = ended.get(sc.GEN_AI_RESPONSE_MODEL)
        if response_model is not None:
            attributes[sc.GEN_AI_RESPONSE_MODEL] = response_model
        timing = dict(attributes)
        if record.error is not None:
            timing[sc.ERROR_TYPE] = str(ended.get(sc.ERROR_TYPE) or "_OTHER")
        self.duration.record(max(0, record.ended_ns - started_ns) / 1e9, timing)
        for token_type, key in (
            ("input", sc.GEN_AI_USAGE_INPUT_TOKENS),
            ("output", sc.GEN_AI_USAGE_OUTPUT_TOKENS),
        ):
            tokens = ended.get(key)
            if isinstance(tokens, int) and not isinstance(tokens, bool):
                self.token_usage.record(tokens, {**attributes, sc.GEN_AI_TOKEN_TYPE: token_type})
