"""Memory over a long session of short-lived sub-agents (issue 38 item 9; seed 001,
Justification 5): does what a session holds grow with the agents it ever had, or only with the
agents alive?

Run with ``make bench`` (or ``python benchmarks/bench_agents.py``; ``--agents 3000`` for a
smoke run). One root run (``@agenttrace.agent("Root")``) calls a tool that runs a new
sub-agent ``--agents`` times (default 10,000), one after another. Each sub-agent (a new
``Worker`` object whose ``@agenttrace.agent("Worker")`` method runs once) makes one LLM call
(an ``@agenttrace.llm`` function returning an OpenAI-shaped answer with usage, no network: the
shape ``bench_scale.py`` uses) and returns its text. Every 1,000 sub-agents the script calls
``agenttrace.force_flush()`` and ``gc.collect()`` and reads RSS (/proc/self/statm) and
tracemalloc's current size, so what is measured is what is retained, not a backlog in flight.

Reported: the growth per 1,000 sub-agents from the second probe (2,000) to the last, as Python
memory (tracemalloc: Python allocations only, so the allocator's own slack is not in it) and as
RSS (which tracemalloc's own tables inflate: compare runs of this script, not other RSS
figures); the first 2,000 fill what is bounded (the redaction's memory of 4,096 short texts,
the replies remembered for linking), so the same growth from the first probe (1,000) is a row
of its own, without the target. Then the peak RSS, how many agents the session holds in memory
at the end (``Session.agents_in_memory()``), and with ``--top N`` the N source lines whose
allocations grew most since the first probe (tracemalloc's top statistics): where memory goes.

Eviction works in batches (``Session.done_agents_kept``, default 256: past twice that many done
agents, the oldest are evicted down to that many), a batch every ``done_agents_kept + 1`` done
agents. The script keeps 249 so that a batch comes every 250 sub-agents and every probe falls
at the same point of the cycle: with 256 the agents held at a probe went from 263 to 492, and
the figure measured where the probes fell rather than what the session keeps.

Target: what a finished sub-agent leaves behind is in the session's stream and session file,
not in the process: growth under 50 kB of Python memory per 1,000 sub-agents. Figures depend on
the machine; they are printed, never asserted in tests (tests/test_agent_eviction.py asserts
the bound as a count of agents held).
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import figures  # benchmarks/figures.py, beside this script
from opentelemetry.sdk.trace import TracerProvider

import agenttrace
from agenttrace.testing.scripted_model import completion_body

PROBE_EVERY = 1000
DONE_AGENTS_KEPT = 249
"""An eviction batch every 250 done agents: four to a probe (see above)."""
GROWTH_TARGET_KB = 50.0


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def workload(agents: int, probe: Any) -> Any:
    """The root run: ``agents`` sub-agents of one LLM call each, ``probe(done)`` every 1,000."""

    @agenttrace.llm
    def chat(*, model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
        reply = {"text": f"done: {messages[-1]['content']}"}
        return completion_body(reply, {"model": model, "messages": messages})

    class Worker:
        """One sub-agent per object (a function agent of one name is one agent for all its
        runs: docs/responsibility.md)."""

        @agenttrace.agent("Worker")
        def run(self, index: int) -> str:
            messages = [{"role": "user", "content": f"task {index}"}]
            reply = chat(model="gpt-4o-mini", messages=messages)
            return str(reply["choices"][0]["message"]["content"])

    @agenttrace.tool
    def delegate(index: int) -> str:
        return Worker().run(index)

    @agenttrace.agent("Root")
    def root() -> str:
        for index in range(agents):
            delegate(index)
            if (index + 1) % PROBE_EVERY == 0:
                probe(index + 1)
        return "done"

    return root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="memory over 10,000 short-lived sub-agents")
    parser.add_argument("--agents", type=int, default=10_000, help="sub-agents (default 10,000)")
    parser.add_argument("--top", type=int, default=0, help="print the N largest holders")
    parser.add_argument("--save", type=Path, help="also save the table for docs/performance.md")
    args = parser.parse_args(argv)
    directory = Path(tempfile.mkdtemp(prefix="agenttrace-agents-"))
    tracing = agenttrace.init(
        tracer_provider=TracerProvider(),
        sessions_dir=directory,
        billing_file=directory / "accounting.jsonl",
        instrument_litellm=False,
    )
    session = agenttrace.new_session("agents")
    session.done_agents_kept = DONE_AGENTS_KEPT
    tracemalloc.start()
    probes: list[tuple[int, int, int]] = []
    snapshots: list[Any] = []  # at the first probe and the last, inside the root run

    def probe(done: int) -> None:
        tracing.force_flush()
        gc.collect()
        if args.top and not probes:
            # A snapshot is Python objects, traced: the baseline is read after it is taken.
            snapshots.append(tracemalloc.take_snapshot())
        probes.append((done, rss_bytes(), tracemalloc.get_traced_memory()[0]))
        if args.top and done == args.agents:  # after the figures: it would be in them
            snapshots.append(tracemalloc.take_snapshot())
        print(
            f"{done:>7,} sub-agents: RSS {probes[-1][1] / 1e6:7.1f} MB, "
            f"traced {probes[-1][2] / 1e6:7.1f} MB, agents held "
            f"{session.agents_in_memory():,}",
            flush=True,
        )

    workload(args.agents, probe)()
    tracing.force_flush()
    held = session.agents_in_memory()
    kept = session.done_agents_kept
    if len(snapshots) == 2:
        stats = snapshots[1].compare_to(snapshots[0], "lineno")
        print(f"largest growth from the first {PROBE_EVERY:,} sub-agents to the last:")
        for stat in stats[: args.top]:
            print(f"  {stat}")
    tracemalloc.stop()
    peak = peak_rss_bytes()
    tracing.shutdown()
    shutil.rmtree(directory, ignore_errors=True)
    if len(probes) < 3:
        print("too few sub-agents to measure growth (at least 3,000)", file=sys.stderr)
        return 2

    def growth(first: int) -> tuple[str, float, float]:
        """(the span, Python memory and RSS growth per 1,000 in kB) from probe ``first``."""
        (n0, rss0, traced0), (n1, rss1, traced1) = probes[first], probes[-1]
        thousands = (n1 - n0) / PROBE_EVERY
        span = f"{n0:,} to {n1:,}"
        return span, (traced1 - traced0) / thousands / 1e3, (rss1 - rss0) / thousands / 1e3

    span, traced_growth, rss_growth = growth(1)
    warm_span, warm_traced, _ = growth(0)
    rows = [
        [
            f"Python memory (tracemalloc) per 1,000 sub-agents, {span}",
            f"{traced_growth:,.1f} kB",
            f"under {GROWTH_TARGET_KB:.0f} kB",
            "yes" if traced_growth < GROWTH_TARGET_KB else "no",
        ],
        [
            f"the same, {warm_span} (bounded memories still filling)",
            f"{warm_traced:,.1f} kB",
            "",
            "",
        ],
        [f"RSS per 1,000 sub-agents, {span}", f"{rss_growth:,.1f} kB", "", ""],
        [f"peak RSS ({args.agents:,} sub-agents)", f"{peak / 1e6:,.1f} MB", "", ""],
        [
            f"agents held in memory after {args.agents:,} sub-agents",
            f"{held:,}",
            f"at most {2 * kept + 1:,}: the root and 2 x {kept:,} done",
            "yes" if held <= 2 * kept + 1 else "no",
        ],
    ]
    for row in rows:
        print(f"{row[0]:<62} {row[1]:>12}  {row[2]}")
    if args.save:
        table = {"headers": ["measurement", "figure", "target", "met"], "rows": rows}
        figures.save(args.save, "bench_agents", {"agents": table}, agents=args.agents)
    return 0


if __name__ == "__main__":
    sys.exit(main())
