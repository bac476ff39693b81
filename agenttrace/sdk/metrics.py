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

They are recorded in the caller's thread as the attempt ends, in the context of the attempt's
span, as OpenTelemetry's own GenAI instrumentations do: the meter provider's exemplar filter
(``trace_based`` unless the application says otherwise) then keeps exemplars that link a slow
or expensive point to the trace of a sampled attempt. The context is built from the span's
identity rather than taken from whatever is current when the attempt ends, which may be another
span (a streamed reply ends where it is consumed) or none.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context
from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace.model.lifecycle import Ended, Record
from agenttrace.model.outcome import OpOutcome
from agenttrace.recorder.sink import Sink

TOKEN_BUCKETS = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)  # fmt: skip
"""The conventions' explicit bucket boundaries for ``gen_ai.client.token.usage``."""

DURATION_BUCKETS = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
"""The conventions' explicit bucket boundaries for ``gen_ai.client.operation.duration``."""


class MetricsSink(Sink):
    """Records each LLM attempt's tokens and duration on the GenAI client histograms, from its
    outcome, in the caller's thread as the attempt ends (a durable sink: an attempt's
    ``Ended`` is ``BEFORE_CALL_GOES_ON``), with its span as the context."""

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

    durable = True
    takes = frozenset({Ended})

    def consume(self, records: Sequence[Record]) -> None:
        """An LLM attempt's points, as durable as its accounting: a paid attempt's in its
        caller's thread, in its span's context."""
        for record in records:
            accounted = record.accounted  # type: ignore[union-attr]
            if accounted is not None and record.started is not None:  # type: ignore[union-attr]
                self.measure(accounted.op)

    def measure(self, op: OpOutcome) -> None:
        """Record an LLM attempt's duration and tokens from its outcome, in its span's
        context (a tool call has no GenAI client metrics)."""
        if not op.is_llm:
            return
        # The attributes every measurement of the attempt shares, made once.
        attributes: dict[str, AttributeValue] = {}
        for key, value in (
            (sc.GEN_AI_OPERATION_NAME, op.operation),
            (sc.GEN_AI_PROVIDER_NAME, op.provider),
            (sc.GEN_AI_REQUEST_MODEL, op.request_model),
            (sc.GEN_AI_RESPONSE_MODEL, op.response_model),
        ):
            if value is not None:
                attributes[key] = value
        context = span_context(op.trace_id, op.span_id, op.trace_flags)
        if op.error is None:
            timing = attributes
        else:
            timing = {**attributes, sc.ERROR_TYPE: str(op.error_type or "_OTHER")}
        self.duration.record(max(0, op.ended_ns - op.started_ns) / 1e9, timing, context)
        usage = op.usage
        if usage is None:
            return
        for token_type, tokens in (("input", usage.input), ("output", usage.output)):
            if isinstance(tokens, int) and not isinstance(tokens, bool):
                self.token_usage.record(
                    tokens, {**attributes, sc.GEN_AI_TOKEN_TYPE: token_type}, context
                )


_NO_SPAN = Context()
"""The context of a measurement whose scope had no span (the no-op tracer): none, rather than
whatever is current."""


def span_context(trace_id: int, span_id: int, trace_flags: int) -> Context:
    """A context holding the span of these ids, as the exemplar filter and reservoir read it:
    its trace id, span id, and the sampler's trace flags."""
    if not trace_id:
        return _NO_SPAN
    return set_span_in_context(
        NonRecordingSpan(
            SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(trace_flags))
        )
    )
