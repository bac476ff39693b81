"""What an LLM call costs as an agent's history grows: append-only, and a sliding window.

Run with ``make bench`` (or ``python benchmarks/bench_history.py``; ``--quick`` for a smoke run).
Long agents send hundreds to thousands of messages per request, and many rewrite that history
every call (a sliding window, a compaction, a framework rebuilding its message list). What
agenttrace adds to a call should follow what is *new* in the request, not its length.

An agent loop around a mocked ``litellm.completion`` (``mock_response=``), inside an
``@agenttrace.agent`` run, with messages of about 1 kB; after each call the model's reply and a
new user message are appended, and in the window loop the oldest exchange is dropped so the
request keeps its length. For each loop and each history length (10 and 1,000 messages), per
call:

- the CPU agenttrace adds: the traced loop's CPU (the calling thread's, and agenttrace's
  background thread's, a final ``force_flush()`` included) less the same loop's with the litellm
  patch switched off, rounds of the two alternating (the median of the rounds' differences),
  in bare spans (a bare OpenTelemetry span measured in the same process);
- the bytes it adds to the event stream.

The figure that matters is the ratio of the two lengths: 1.0 means a call costs the same
whatever the history. Timings are printed, never asserted in tests.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import figures  # benchmarks/figures.py, beside this script
import litellm
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import agenttrace
from agenttrace._internal.runtime import runtime
from agenttrace.formats.session.files import stream_path
from agenttrace.instrumentation.litellm.utils import state as litellm_patch

MODEL = "gpt-4o-mini"
LENGTHS = (10, 1000)
TARGET = 1.5
"""At 1,000 messages, at most this many times what a call adds at 10 (CPU, and stream bytes)."""
TEXT = (
    "the agent reads the file and asks the model what to change next while the tests run "
    "and the build waits for the linter to finish its pass over the module"
)
WORDS = TEXT.split()


class Dropping(SpanExporter):
    def export(self, spans: Any) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def text(rng: random.Random, size: int = 1000) -> str:
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


class Loop:
    """An agent's history and the calls it makes; ``window``: drop the oldest exchange each
    call so the request keeps its length."""

    def __init__(self, length: int, window: bool, seed: int) -> None:
        self.rng = random.Random(seed)
        self.window = window
        self.history: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a careful coding agent."}
        ]
        while len(self.history) < length:
            role = "user" if len(self.history) % 2 else "assistant"
            self.history.append({"role": role, "content": text(self.rng)})
        if self.history[-1]["role"] != "user":
            self.history.append({"role": "user", "content": text(self.rng)})

    def call(self) -> None:
        reply = litellm.completion(
            model=MODEL, messages=self.history, mock_response=text(self.rng, 400)
        )
        self.history.append({"role": "assistant", "content": reply.choices[0].message.content})
        self.history.append({"role": "user", "content": text(self.rng)})
        if self.window:
            del self.history[1:3]  # the oldest exchange; the system prompt stays


def cpu_per_call(fn: Callable[[], None], number: int) -> float:
    """The calling thread's CPU per call, plus what agenttrace's background thread spent meanwhile
    (a final flush included). litellm's own background threads are left out: their CPU swings
    by milliseconds a call at 1,000 messages, more than what is measured here. (Timed here, as
    bench_overhead's ``measure`` times: bench_overhead imports this module for its long-history
    rows, so this one does not import it back.)"""
    worker = _worker_clock()
    before = time.clock_gettime(worker) if worker is not None else 0.0
    gc.collect()
    gc.disable()
    try:
        caller = time.thread_time()
        for _ in range(number):
            fn()
        caller = (time.thread_time() - caller) / number
        agenttrace.force_flush()
    finally:
        gc.enable()
    spent = time.clock_gettime(worker) - before if worker is not None else 0.0
    return caller + spent / number


def alternating(scratch: Path, length: int, window: bool, calls: int) -> tuple[float, float, float]:
    """One round: ``calls`` untraced and traced calls in turn; (the untraced call's CPU, what
    agenttrace adds to a call, stream bytes a call adds)."""
    plain, traced_loop = Loop(length, window, seed=length), Loop(length, window, seed=length)
    session = agenttrace.new_session()
    stream = stream_path(scratch, session.session_id)
    plain_cpu = traced_cpu = 0.0
    with agenttrace.agent("Looper"):
        litellm_patch.enabled = False
        plain.call()
        litellm_patch.enabled = True
        traced_loop.call()  # the first call records the whole history: not measured
        agenttrace.force_flush()
        size = stream.stat().st_size
        worker = _worker_clock()
        background = time.clock_gettime(worker) if worker is not None else 0.0
        gc.collect()
        gc.disable()
        try:
            for _ in range(calls):
                litellm_patch.enabled = False
                started = time.thread_time()
                plain.call()
                plain_cpu += time.thread_time() - started
                litellm_patch.enabled = True
                started = time.thread_time()
                traced_loop.call()
                traced_cpu += time.thread_time() - started
            started = time.thread_time()
            agenttrace.force_flush()
            traced_cpu += time.thread_time() - started
        finally:
            gc.enable()
            litellm_patch.enabled = True
        if worker is not None:
            traced_cpu += time.clock_gettime(worker) - background
        grown = (stream.stat().st_size - size) / calls
    return plain_cpu / calls, (traced_cpu - plain_cpu) / calls, grown


def _worker_clock() -> int | None:
    """The CPU clock of agenttrace's background thread, if it runs."""
    recorder = runtime.recorder
    thread = getattr(getattr(recorder, "worker", None), "_thread", None)
    if thread is None or thread.ident is None:
        return None
    return time.pthread_getcpuclockid(thread.ident)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the cost of a call as the history grows")
    parser.add_argument("--calls", type=int, help="calls measured per round (default 40)")
    parser.add_argument("--repeat", type=int, help="rounds; the median is kept (default 5)")
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few seconds")
    parser.add_argument("--save", type=Path, help="also save the table for docs/performance.md")
    args = parser.parse_args(argv)
    calls = args.calls or (5 if args.quick else 40)
    repeat = args.repeat or (1 if args.quick else 5)
    litellm.suppress_debug_info = True
    cases = [(window, length) for window in (False, True) for length in LENGTHS]

    scratch = Path(tempfile.mkdtemp(prefix="agenttrace-bench-"))
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropping(), max_queue_size=1 << 16))
    tracing = agenttrace.init(
        tracer_provider=provider,
        instrument_litellm=True,
        sessions_dir=scratch,
        billing_file=scratch / "accounting.jsonl",
        console="quiet",
    )
    tracer = provider.get_tracer("bench")

    def bare() -> None:
        with tracer.start_as_current_span("bare"):
            pass

    bare_span = min(cpu_per_call(bare, 5000) for _ in range(repeat))
    # A call at 1,000 messages costs litellm some 3-5 ms of the caller's CPU, which drifts with
    # the machine by more than what agenttrace adds; so the untraced and the traced call
    # alternate (the litellm patch switched off for the untraced one, each on a loop of its
    # own), and what agenttrace adds is the difference of the two sums, plus its background
    # thread's CPU meanwhile. litellm's own background threads are left out.
    untraced: dict[tuple[bool, int], float] = {}
    traced: dict[tuple[bool, int], tuple[float, float]] = {}
    for window, length in cases:
        rounds: list[tuple[float, float, float]] = []
        for _ in range(repeat):  # fresh loops each round: an append-only one grows as it runs
            rounds.append(alternating(scratch, length, window, calls))
        plain, added, grown = (statistics.median(r[i] for r in rounds) for i in range(3))
        untraced[(window, length)] = plain
        traced[(window, length)] = (plain + added, grown)
    tracing.shutdown()
    provider.shutdown()
    shutil.rmtree(scratch, ignore_errors=True)

    rows: list[list[str]] = []
    for window in (False, True):
        loop_name = "sliding window" if window else "append-only"
        added = {
            length: (traced[(window, length)][0] - untraced[(window, length)]) for length in LENGTHS
        }
        grown = {length: traced[(window, length)][1] for length in LENGTHS}
        small, large = LENGTHS
        for length in LENGTHS:
            rows.append(
                [
                    f"{loop_name}, {length:,} messages",
                    f"{added[length] * 1e6:,.0f} µs = {added[length] / bare_span:,.1f} bare spans",
                    f"{grown[length] / 1e3:,.1f} kB",
                    f"untraced call {untraced[(window, length)] * 1e6:,.0f} µs",
                ]
            )
        cpu_ratio = added[large] / max(added[small], bare_span)
        bytes_ratio = grown[large] / max(grown[small], 1.0)
        met = "yes" if max(cpu_ratio, bytes_ratio) <= TARGET else "NO"
        rows.append(
            [
                f"{loop_name}, {large:,} vs {small} messages (target <= {TARGET}x, met: {met})",
                f"{cpu_ratio:.2f}x",
                f"{bytes_ratio:.2f}x",
                "",
            ]
        )
    headers = ["history", "CPU agenttrace adds per call", "stream bytes per call", "note"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    print(f"\nbare span: {bare_span * 1e6:.1f} µs; median of {repeat} rounds of {calls} calls")
    if args.save:
        figures.save(
            args.save,
            "bench_history",
            {"history": {"headers": headers, "rows": rows}},
            bare_span_us=round(bare_span * 1e6, 2),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
