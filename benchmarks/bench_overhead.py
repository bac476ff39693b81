"""What agenttrace costs, as ratios against a bare OpenTelemetry span measured in the same run.

Run with ``make bench`` (or ``python benchmarks/bench_overhead.py``). Everything shares one
TracerProvider whose pipeline is what ``agenttrace.init()`` builds (our processor) plus a batch
processor feeding an exporter that drops spans, so only the in-process cost is measured.

Measured, each as the best of several repeats of many calls (the least disturbed figure):

1. a bare span: ``start_as_current_span`` with the attributes an agenttrace tool span carries;
2. an agenttrace tool call (``@agenttrace.tool``) inside an agent run and turn;
3. one turn of an agent: a mocked ``litellm.completion`` and two tool calls, without
   agenttrace (litellm not patched, plain functions) and with it (patched, decorated).

Ratios: (2) / (1), target <= 1.2; and the time agenttrace adds to the turn of (3) in units of
(1), target <= 3 bare spans for the LLM call. Timings are never asserted in tests; this prints.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import timeit
from collections.abc import Callable, Sequence
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import agenttrace
from agenttrace import semconv as sc
from agenttrace.instrumentation.litellm import LiteLLMInstrumentor


class DroppingExporter(SpanExporter):
    """Accepts every batch and keeps nothing: the export pipeline runs, the network does not."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def best(fn: Callable[[], Any], number: int, repeat: int) -> tuple[float, float]:
    """(best, median) seconds per call over ``repeat`` runs of ``number`` calls."""
    gc.collect()
    runs = [t / number for t in timeit.repeat(fn, number=number, repeat=repeat)]
    return min(runs), statistics.median(runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="agenttrace overhead, relative to a bare span")
    parser.add_argument("--number", type=int, default=2000, help="calls per repeat")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    number, repeat = args.number, args.repeat
    litellm.suppress_debug_info = True

    provider = TracerProvider()
    tracing = agenttrace.init(tracer_provider=provider, instrument_litellm=False)
    provider.add_span_processor(BatchSpanProcessor(DroppingExporter(), max_queue_size=1 << 16))
    tracer = provider.get_tracer("bench")

    # -- 1. a bare span with the attributes of an agenttrace tool span ---------------------------
    attributes_of_a_tool_span: dict[str, Any] = {}

    @agenttrace.tool
    def search(query: str) -> str:
        return "result"

    with agenttrace.agent("Bench"), agenttrace.turn():
        search("cats")
    tracing.force_flush()
    sample = _last_tool_span(provider)
    attributes_of_a_tool_span.update(sample)

    def bare_op() -> str:
        with tracer.start_as_current_span(
            "execute_tool search", attributes=attributes_of_a_tool_span
        ):
            return "result"

    # -- 2. the agenttrace tool call ---------------------------------------------------------------
    def agenttrace_op() -> str:
        return search("cats")

    # -- 3. a turn: one mocked LLM call and two tool calls ----------------------------------------
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]

    def lookup(city: str) -> str:
        return f"sunny in {city}"

    def convert(celsius: float) -> float:
        return celsius * 9 / 5 + 32

    traced_lookup, traced_convert = agenttrace.tool(lookup), agenttrace.tool(convert)

    def plain_turn() -> None:
        litellm.completion(model="gpt-4o-mini", messages=messages, mock_response="It is sunny.")
        lookup("Paris")
        convert(21.0)

    def traced_turn() -> None:
        litellm.completion(model="gpt-4o-mini", messages=messages, mock_response="It is sunny.")
        traced_lookup("Paris")
        traced_convert(21.0)

    def plain_llm() -> None:
        litellm.completion(model="gpt-4o-mini", messages=messages, mock_response="It is sunny.")

    results: dict[str, tuple[float, float]] = {}
    with trace.get_tracer("bench").start_as_current_span("bench parent"):
        with tracer.start_as_current_span("bare parent"):
            results["bare span"] = best(bare_op, number, repeat)
        with agenttrace.agent("Bench"), agenttrace.turn():
            results["agenttrace tool call"] = best(agenttrace_op, number, repeat)
        llm_number = max(50, number // 10)
        results["turn, no agenttrace"] = best(plain_turn, llm_number, repeat)
        results["llm call, no agenttrace"] = best(plain_llm, llm_number, repeat)
        instrumentor = LiteLLMInstrumentor()
        instrumentor.instrument()
        try:
            with agenttrace.agent("Bench"):
                results["turn, agenttrace"] = best(traced_turn, llm_number, repeat)
                results["llm call, agenttrace"] = best(plain_llm, llm_number, repeat)
        finally:
            instrumentor.uninstrument()
    tracing.shutdown()
    provider.shutdown()
    report(results)
    return 0


def _last_tool_span(provider: TracerProvider) -> dict[str, Any]:
    """The attributes of one finished agenttrace tool span (captured by a throwaway exporter)."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    capture = TracerProvider()
    capture.add_span_processor(SimpleSpanProcessor(exporter))
    from agenttrace._runtime import runtime

    saved = runtime.tracer
    runtime.tracer = capture.get_tracer("capture")
    try:

        @agenttrace.tool
        def search(query: str) -> str:
            return "result"

        with agenttrace.agent("Bench"), agenttrace.turn():
            search("cats")
    finally:
        runtime.tracer = saved
    span = next(s for s in exporter.get_finished_spans() if s.name == "execute_tool search")
    attributes = dict(span.attributes or {})
    assert attributes[sc.KIND] == "tool"
    return attributes


def report(results: dict[str, tuple[float, float]]) -> None:
    bare = results["bare span"][0]
    print(f"{'measurement':34} {'best':>10} {'median':>10} {'/ bare span':>12}")
    for name, (low, median) in results.items():
        print(f"{name:34} {low * 1e6:8.2f}us {median * 1e6:8.2f}us {low / bare:11.2f}x")
    op_ratio = results["agenttrace tool call"][0] / bare
    added_turn = results["turn, agenttrace"][0] - results["turn, no agenttrace"][0]
    added_llm = results["llm call, agenttrace"][0] - results["llm call, no agenttrace"][0]
    print()
    print(f"agenttrace tool call vs bare span:          {op_ratio:.2f}x   (target <= 1.2x)")
    print(
        f"added to a mocked litellm call:             {added_llm * 1e6:.1f}us "
        f"= {added_llm / bare:.1f} bare spans   (target <= 3; a session-level call opens a turn)"
    )
    print(
        f"added to a turn (llm call + 2 tool calls):  {added_turn * 1e6:.1f}us "
        f"= {added_turn / bare:.1f} bare spans"
    )


if __name__ == "__main__":
    sys.exit(main())
