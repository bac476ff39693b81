"""What agenttrace costs, as ratios against a bare OpenTelemetry span measured in the same run.

Run with ``make bench`` (or ``python benchmarks/bench_overhead.py``). Everything shares one
TracerProvider whose pipeline is what ``agenttrace.init()`` builds (our processor) plus a batch
processor feeding an exporter that drops spans, so only the in-process cost is measured.

Measured, each as the best of several repeats of many calls (the least disturbed figure):

1. a bare span: ``start_as_current_span`` with the attributes an agenttrace tool span carries;
2. an agenttrace tool call (``@agenttrace.tool``) inside an agent run and turn;
3. a mocked ``litellm.completion`` without agenttrace and with it, directly in an agent run
   (each call opens a turn: two spans) and inside an explicit turn (one span);
4. one turn of an agent: the mocked LLM call and two tool calls, without and with agenttrace.

agenttrace ends its spans on a background thread. Each traced figure is given twice: *total*,
with that thread running alongside (in these CPU-bound loops it competes for the GIL, so this
is all the CPU agenttrace costs), and *caller*, with the thread held off until the timing ends
(what the agent itself waits for; in a real agent the deferred work runs while it waits on the
network). Timings are printed, never asserted in tests.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import timeit
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agenttrace
from agenttrace import semconv as sc
from agenttrace._internal.runtime import runtime
from agenttrace.instrumentation.litellm import LiteLLMInstrumentor
from agenttrace.sdk.worker import worker


class DroppingExporter(SpanExporter):
    """Accepts every batch and keeps nothing: the export pipeline runs, the network does not."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def total(fn: Callable[[], Any], number: int, repeat: int) -> float:
    """Best seconds per call, the background worker running alongside."""
    fn()
    agenttrace.force_flush()
    gc.collect()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def caller(fn: Callable[[], Any], number: int, repeat: int) -> float:
    """Best seconds per call with the background worker held off until each repeat ends."""
    fn()
    agenttrace.force_flush()
    gc.collect()
    runs = []
    for _ in range(repeat):
        with worker.paused():
            runs.append(timeit.timeit(fn, number=number) / number)
        agenttrace.force_flush()
    return min(runs)


def tool_span_attributes() -> dict[str, Any]:
    """The attributes of a finished agenttrace tool span, captured on a throwaway provider."""
    exporter = InMemorySpanExporter()
    capture = TracerProvider()
    capture.add_span_processor(SimpleSpanProcessor(exporter))
    saved = runtime.tracer
    runtime.tracer = capture.get_tracer("capture")
    try:

        @agenttrace.tool
        def search(query: str) -> str:
            return "result"

        with agenttrace.agent("Bench"), agenttrace.turn():
            search("cats")
        agenttrace.force_flush()
    finally:
        runtime.tracer = saved
    span = next(s for s in exporter.get_finished_spans() if s.name == "execute_tool search")
    attributes = dict(span.attributes or {})
    assert attributes[sc.KIND] == "tool"
    return attributes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="agenttrace overhead, relative to a bare span")
    parser.add_argument("--number", type=int, default=2000, help="calls per repeat (tools)")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    number, repeat = args.number, args.repeat
    llm_number = max(50, number // 8)
    litellm.suppress_debug_info = True

    provider = TracerProvider()
    scratch = Path(tempfile.mkdtemp(prefix="agenttrace-bench-"))  # not ~/.agenttrace
    tracing = agenttrace.init(
        tracer_provider=provider,
        instrument_litellm=False,
        sessions_dir=scratch / "sessions",
        billing_file=scratch / "accounting.jsonl",
    )
    provider.add_span_processor(BatchSpanProcessor(DroppingExporter(), max_queue_size=1 << 16))
    tracer = provider.get_tracer("bench")
    attributes = tool_span_attributes()

    def bare_op() -> str:
        with tracer.start_as_current_span("execute_tool search", attributes=attributes):
            return "result"

    @agenttrace.tool
    def search(query: str) -> str:
        return "result"

    messages = [{"role": "user", "content": "What is the weather in Paris?"}]

    def llm_call() -> None:
        litellm.completion(model="gpt-4o-mini", messages=messages, mock_response="It is sunny.")

    def lookup(city: str) -> str:
        return f"sunny in {city}"

    def convert(celsius: float) -> float:
        return celsius * 9 / 5 + 32

    traced_lookup, traced_convert = agenttrace.tool(lookup), agenttrace.tool(convert)

    def plain_turn() -> None:
        llm_call()
        lookup("Paris")
        convert(21.0)

    def traced_turn() -> None:
        llm_call()
        traced_lookup("Paris")
        traced_convert(21.0)

    r: dict[str, float] = {}
    with trace.get_tracer("bench").start_as_current_span("bench parent"):
        with tracer.start_as_current_span("bare parent"):
            r["bare span"] = total(bare_op, number, repeat)
        with agenttrace.agent("Bench"), agenttrace.turn():
            r["tool call, total"] = total(lambda: search("cats"), number, repeat)
            r["tool call, caller"] = caller(lambda: search("cats"), number, repeat)
        r["llm call, no agenttrace"] = total(llm_call, llm_number, repeat)
        r["turn, no agenttrace"] = total(plain_turn, llm_number, repeat)
        instrumentor = LiteLLMInstrumentor()
        instrumentor.instrument()
        try:
            with agenttrace.agent("Bench"):
                r["llm call in a run, total"] = total(llm_call, llm_number, repeat)
                r["llm call in a run, caller"] = caller(llm_call, llm_number, repeat)
                r["turn, total"] = total(traced_turn, llm_number, repeat)
                r["turn, caller"] = caller(traced_turn, llm_number, repeat)
                with agenttrace.turn():
                    r["llm call in a turn, total"] = total(llm_call, llm_number, repeat)
                    r["llm call in a turn, caller"] = caller(llm_call, llm_number, repeat)
        finally:
            instrumentor.uninstrument()
    tracing.shutdown()
    provider.shutdown()
    report(r)
    return 0


def report(r: dict[str, float]) -> None:
    bare = r["bare span"]
    print(f"{'measurement':32} {'best':>11} {'in bare spans':>14}")
    for name, seconds in r.items():
        print(f"{name:32} {seconds * 1e6:9.1f}us {seconds / bare:13.2f}")
    print("\nagenttrace op vs a bare span with the same attributes (target <= 1.2):")
    tool_total, tool_caller = r["tool call, total"] / bare, r["tool call, caller"] / bare
    print(f"  tool call      total {tool_total:.2f}x   caller {tool_caller:.2f}x")
    print("time added to a mocked litellm call, in bare spans (target <= 3):")
    base = r["llm call, no agenttrace"]
    for where in ("in a run", "in a turn"):
        added_total = r[f"llm call {where}, total"] - base
        added_caller = r[f"llm call {where}, caller"] - base
        print(
            f"  {where:10} total {added_total * 1e6:6.1f}us = {added_total / bare:4.1f}   "
            f"caller {added_caller * 1e6:6.1f}us = {added_caller / bare:4.1f}"
        )
    base_turn = r["turn, no agenttrace"]
    added_total = r["turn, total"] - base_turn
    added_caller = r["turn, caller"] - base_turn
    print("time added to a turn (llm call + 2 tool calls, 4 spans):")
    print(
        f"  total {added_total * 1e6:.1f}us = {added_total / bare:.1f}   "
        f"caller {added_caller * 1e6:.1f}us = {added_caller / bare:.1f}"
    )


if __name__ == "__main__":
    sys.exit(main())
