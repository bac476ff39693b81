"""agenttrace at scale: memory, file descriptors, throughput, concurrency and exit (issue 8).

Run with ``make bench`` (or ``python benchmarks/bench_scale.py``; ``--quick`` for a smoke run of
a few seconds, ``--json`` for machine-readable results). Only agenttrace's public API is used.

Every measurement runs in a child process of its own (``sys.executable`` running this file with
``--child``): a clean process for memory and file descriptors, and one whose exit can be timed.
Each child gets a temporary HOME, sessions directory and billing file (deleted afterwards unless
``--keep``), the same pipeline as ``bench_overhead.py`` (a TracerProvider with agenttrace's
processor plus a batch processor feeding an exporter that drops spans), and a time cap
(``--cap``): a child still running then is killed and reported as "did not finish in N s", with
how far it got. Children run one after another, so they do not compete for the two cores.

A tool call below is ``@agenttrace.tool def lookup(query) -> str``; tool calls come in explicit
turns of 10 (``with agenttrace.turn()``) inside ``@agenttrace.agent`` runs. Measured:

1. RSS after 100k tool calls against RSS after 10k (target within 10%), (a) in one agent run,
   (b) across 1,000 runs of 100 calls, (c) with a fresh ``agenttrace.new_session()`` and run for
   every 1,000 calls. RSS is read from /proc/self/statm after ``agenttrace.force_flush()`` and
   ``gc.collect()`` (so it is what is retained, not a backlog in flight), every 10k calls.
2. Open file descriptors (``/proc/self/fd``) after 500 sessions made one after another, each
   with one run of 10 tool calls and then dropped, against after the first (target: at most 2
   more; they should be bounded by the sessions in use, here one).
3. Wall and CPU (``time.process_time()``, all threads) of 1,000 runs of 100 calls against one run
   of 100k, each including the ``agenttrace.force_flush()`` at the end (target at most 1.5x);
   from the children of 1(a) and 1(b), minus the time their RSS probes spent in ``gc.collect()``
   and reading /proc (the probes' flushes are work that would be done anyway and stay in).
4. 200 concurrent agents, each 5 LLM calls (an ``@agenttrace.llm`` async function returning an
   OpenAI-shaped dict with usage and 4 tool calls, no network) each followed by the 4 tool
   calls (20 in all), with an ``await asyncio.sleep(0)`` in every call so the agents interleave:
   (a) 200 root runs of one session under ``asyncio.gather``, (b) 200 sub-agents of one root run
   (each an ``@agenttrace.agent`` awaited inside an ``@agenttrace.tool``, the 200 tool calls
   gathered). Reported: the work's wall time, then how long ``agenttrace.force_flush()`` takes
   afterwards (target under 1 s).
5. Time from the end of the work to process exit, after 1,000 sequential root runs of the agent
   of 4 (one session) against after one such run: the child prints ``time.time()`` when its work
   returns and exits without flushing (agenttrace's exit hooks do the rest); the parent takes
   the time when ``wait()`` returns. Issue 8 sets no figure for this: the ratio is reported.

Figures are ratios within one run of this script; absolute times depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import figures  # benchmarks/figures.py, beside this script

TURN = 10  # tool calls per explicit turn in the tool-call scenarios
RSS_TARGET = 1.10
TIME_TARGET = 1.5
FLUSH_TARGET = 1.0  # seconds
FD_SLACK = 2

# ---------------------------------------------------------------------------------------------
# The child side: one scenario per process, reporting JSON lines on stdout.
# ---------------------------------------------------------------------------------------------


def emit(**record: Any) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd")) - 1  # less the one listdir itself holds


def child_setup() -> Any:
    """agenttrace on the pipeline bench_overhead.py measures; outputs under the child's HOME."""
    from collections.abc import Sequence as Seq

    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    import agenttrace

    class DroppingExporter(SpanExporter):
        def export(self, spans: Seq[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

        def shutdown(self) -> None:
            pass

    home = Path(os.environ["HOME"])
    provider = TracerProvider()
    agenttrace.init(
        tracer_provider=provider,
        instrument_litellm=False,
        sessions_dir=home / "sessions",
        billing_file=home / "accounting.jsonl",
    )
    provider.add_span_processor(BatchSpanProcessor(DroppingExporter()))
    return agenttrace


class Clock:
    """Wall and process CPU since start, less what the probes spent measuring."""

    def __init__(self) -> None:
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()
        self.excluded_wall = self.excluded_cpu = 0.0

    def exclude(self, fn: Callable[[], Any]) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return fn()
        finally:
            self.excluded_wall += time.perf_counter() - wall
            self.excluded_cpu += time.process_time() - cpu

    def elapsed(self) -> tuple[float, float]:
        return (
            time.perf_counter() - self.wall0 - self.excluded_wall,
            time.process_time() - self.cpu0 - self.excluded_cpu,
        )


def child_calls(params: dict[str, Any]) -> None:
    """Tool calls: ``shape`` one-run | runs | sessions; a probe every ``probe_every`` calls."""
    agenttrace = child_setup()
    shape, total = params["shape"], params["calls"]
    per_run, probe_every = params["per_run"], params["probe_every"]

    @agenttrace.tool
    def lookup(query: str) -> str:
        return "result for " + query

    done = 0
    last_progress = time.perf_counter()
    clock = Clock()

    def probe() -> None:
        agenttrace.force_flush()  # counted: the work would be done anyway

        def measure() -> None:
            gc.collect()
            wall, cpu = clock.elapsed()
            emit(event="probe", calls=done, rss=rss_bytes(), fds=open_fds(), wall=wall, cpu=cpu)

        clock.exclude(measure)

    def progress() -> None:
        nonlocal last_progress
        now = time.perf_counter()
        if now - last_progress > 0.5:
            last_progress = now
            clock.exclude(lambda: emit(event="progress", calls=done))

    @agenttrace.agent("Worker")
    def run(calls: int, probe_inside: bool) -> str:
        nonlocal done
        for _ in range(calls // TURN):
            with agenttrace.turn():
                for _ in range(TURN):
                    lookup(f"q{done}")
                    done += 1
            if probe_inside and done % probe_every == 0:
                probe()
            progress()
        return "done"

    if shape == "one-run":
        run(total, True)
    else:
        for _ in range(total // per_run):
            if shape == "sessions":
                agenttrace.new_session()
            run(per_run, False)
            if done % probe_every == 0:
                probe()
    agenttrace.force_flush()
    wall, cpu = clock.elapsed()
    emit(event="done", calls=done, wall=wall, cpu=cpu)


def child_fds(params: dict[str, Any]) -> None:
    """Sessions made one after another and dropped: open fds at a few points."""
    agenttrace = child_setup()

    @agenttrace.tool
    def lookup(query: str) -> str:
        return "result for " + query

    @agenttrace.agent("Worker")
    def run() -> str:
        with agenttrace.turn():
            for i in range(TURN):
                lookup(f"q{i}")
        return "done"

    gc.collect()
    emit(event="probe", sessions=0, fds=open_fds(), rss=rss_bytes())
    probes = set(params["probes"])
    for made in range(1, params["sessions"] + 1):
        agenttrace.new_session()  # the previous one is dropped: nothing here keeps it
        run()
        if made in probes:
            agenttrace.force_flush()
            gc.collect()
            emit(event="probe", sessions=made, fds=open_fds(), rss=rss_bytes())
    emit(event="done", sessions=params["sessions"])


def agent_shape(agenttrace: Any, tools_per_llm: int, llm_calls: int) -> Callable[..., Any]:
    """An async agent: ``llm_calls`` LLM calls, each followed by ``tools_per_llm`` tool calls."""
    names = [f"call_{j}" for j in range(tools_per_llm)]

    @agenttrace.llm
    async def chat(*, model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
        await asyncio.sleep(0)
        prompt = sum(len(str(m.get("content") or "")) for m in messages) // 4 + 20
        return {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": "Let me look that up.",
                        "tool_calls": [
                            {
                                "id": f"{name}_{len(messages)}",
                                "type": "function",
                                "function": {
                                    "name": "lookup",
                                    "arguments": json.dumps({"query": f"{name} {len(messages)}"}),
                                },
                            }
                            for name in names
                        ],
                    },
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": 40,
                "total_tokens": prompt + 40,
            },
        }

    @agenttrace.tool
    async def lookup(query: str) -> str:
        await asyncio.sleep(0)
        return "result for " + query

    @agenttrace.agent("Worker")
    async def worker(index: int) -> str:
        messages: list[dict[str, Any]] = [{"role": "user", "content": f"Task {index}: look up."}]
        for _ in range(llm_calls):
            reply = await chat(model="gpt-4o-mini", messages=list(messages))
            message = reply["choices"][0]["message"]
            messages.append(message)
            for call in message["tool_calls"]:
                result = await lookup(json.loads(call["function"]["arguments"])["query"])
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        return "done"

    return worker


def child_concurrent(params: dict[str, Any]) -> None:
    """``agents`` concurrent agents, as root runs of one session or sub-agents of one run."""
    agenttrace = child_setup()
    worker = agent_shape(agenttrace, params["tools_per_llm"], params["llm_calls"])
    agents = params["agents"]

    @agenttrace.tool
    async def delegate(index: int) -> str:
        return await worker(index)  # type: ignore[no-any-return]

    @agenttrace.agent("Root")
    async def root() -> str:
        await asyncio.gather(*(delegate(i) for i in range(agents)))
        return "done"

    async def roots() -> None:
        await asyncio.gather(*(worker(i) for i in range(agents)))

    agenttrace.new_session()
    wall, cpu = time.perf_counter(), time.process_time()
    asyncio.run(roots() if params["mode"] == "roots" else root())
    work_wall, work_cpu = time.perf_counter() - wall, time.process_time() - cpu
    emit(event="work_done", t=time.time(), wall=work_wall, cpu=work_cpu)
    wall, cpu = time.perf_counter(), time.process_time()
    agenttrace.force_flush()
    emit(
        event="flushed",
        t=time.time(),
        wall=time.perf_counter() - wall,
        cpu=time.process_time() - cpu,
    )


def child_exit(params: dict[str, Any]) -> None:
    """``runs`` sequential runs of the agent, then exit without flushing."""
    agenttrace = child_setup()
    worker = agent_shape(agenttrace, params["tools_per_llm"], params["llm_calls"])
    last_progress = time.perf_counter()

    async def work() -> None:
        nonlocal last_progress
        for index in range(params["runs"]):
            await worker(index)
            if time.perf_counter() - last_progress > 0.5:
                last_progress = time.perf_counter()
                emit(event="progress", runs=index + 1)

    agenttrace.new_session()
    wall, cpu = time.perf_counter(), time.process_time()
    asyncio.run(work())
    emit(
        event="work_done",
        t=time.time(),
        wall=time.perf_counter() - wall,
        cpu=time.process_time() - cpu,
    )
    # Falling off the end: agenttrace's exit hooks flush and write what is left.


CHILDREN: dict[str, Callable[[dict[str, Any]], None]] = {
    "calls": child_calls,
    "fds": child_fds,
    "concurrent": child_concurrent,
    "exit": child_exit,
}

# ---------------------------------------------------------------------------------------------
# The parent side: start each child with a cap, collect its lines, compute the ratios.
# ---------------------------------------------------------------------------------------------


@dataclass
class ChildResult:
    name: str
    records: list[dict[str, Any]] = field(default_factory=list)
    returncode: int | None = None
    killed: bool = False
    cap: float = 0.0
    started: float = 0.0
    """time.time() when the child was started."""
    exited: float = 0.0
    """time.time() when wait() returned."""
    stderr_tail: str = ""
    warnings: int = 0

    def last(self, event: str) -> dict[str, Any] | None:
        found = [r for r in self.records if r.get("event") == event]
        return found[-1] if found else None

    def probes(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("event") == "probe"]

    @property
    def ok(self) -> bool:
        return not self.killed and self.returncode == 0

    @property
    def seconds(self) -> float:
        return self.exited - self.started

    def failure(self) -> str:
        if self.killed:
            return f"did not finish in {self.cap:g} s"
        return f"child failed (exit {self.returncode}): {self.stderr_tail.strip()[-300:]}"

    def as_json(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "returncode": self.returncode,
            "killed": self.killed,
            "cap_s": self.cap,
            "seconds": round(self.seconds, 3),
            "agenttrace_warnings": self.warnings,
        }


def child_env(home: Path) -> dict[str, str]:
    import agenttrace

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENTTRACE_"))}
    package_root = str(Path(agenttrace.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p
    )
    env["HOME"] = str(home)
    env["AGENTTRACE_SESSIONS_DIR"] = str(home / "sessions")
    env["AGENTTRACE_BILLING_FILE"] = str(home / "accounting.jsonl")
    env["AGENTTRACE_CONSOLE"] = "quiet"
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_child(name: str, kind: str, params: dict[str, Any], cap: float, keep: bool) -> ChildResult:
    """Run one child to its exit or ``cap`` seconds, whichever is first."""
    home = Path(tempfile.mkdtemp(prefix=f"agenttrace-bench-{name}-"))
    result = ChildResult(name=name, cap=cap)
    command = [sys.executable, str(Path(__file__).resolve()), "--child", kind, json.dumps(params)]
    stderr_path = home / "stderr.txt"
    try:
        with open(stderr_path, "wb") as stderr:
            result.started = time.time()
            proc = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=stderr, env=child_env(home), cwd=home
            )

            def read() -> None:
                assert proc.stdout is not None
                for line in proc.stdout:
                    with contextlib.suppress(ValueError):
                        record = json.loads(line)
                        record["received"] = time.time()
                        result.records.append(record)

            reader = threading.Thread(target=read, daemon=True)
            reader.start()

            def kill() -> None:
                result.killed = True
                proc.kill()  # the child this function started, by its own handle

            timer = threading.Timer(cap, kill)
            timer.start()
            try:
                result.returncode = proc.wait()  # blocking: returns as the child exits
                result.exited = time.time()
            finally:
                timer.cancel()
            reader.join(5)
        text = stderr_path.read_text(errors="replace")
        result.stderr_tail = text[-2000:]
        result.warnings = text.count("agenttrace")
    finally:
        if keep:
            print(f"  kept {home}", file=sys.stderr)
        else:
            shutil.rmtree(home, ignore_errors=True)
    return result


@dataclass
class Row:
    measurement: str
    figure: str
    ratio: float | None = None
    ratio_text: str = ""
    target: str = ""
    met: bool | None = None
    """None: no target, or not decidable (the child did not get far enough)."""
    data: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "measurement": self.measurement,
            "figure": self.figure,
            "ratio": self.ratio,
            "target": self.target,
            "met": self.met,
            **self.data,
        }


def count(n: int) -> str:
    return f"{n // 1000:,}k" if n >= 1000 and n % 1000 == 0 else f"{n:,}"


def mb(value: float) -> str:
    return f"{value / 2**20:.0f} MB"


def seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def rss_row(label: str, child: ChildResult, low: int, high: int) -> Row:
    probes = {p["calls"]: p for p in child.probes()}
    base = probes.get(low)
    top = probes.get(high)
    data = {
        "child": child.name,
        "probes": [(p["calls"], p["rss"], p["fds"]) for p in probes.values()],
    }
    if base is None:
        return Row(label, child.failure() + f" before {low:,} calls", target="<= 1.10", data=data)
    if top is not None:
        ratio = top["rss"] / base["rss"]
        figure = f"{mb(top['rss'])} vs {mb(base['rss'])} at {count(low)}"
        return Row(label, figure, ratio, f"{ratio:.2f}", "<= 1.10", ratio <= RSS_TARGET, data)
    reached = max(probes)
    partial = probes[reached]["rss"] / base["rss"]
    figure = (
        f"{child.failure()}; at {reached:,} calls {mb(probes[reached]['rss'])}"
        f" vs {mb(base['rss'])} at {count(low)}"
    )
    # Already past the target on the way: a failure; otherwise undecided.
    met = False if partial > RSS_TARGET else None
    data["ratio_so_far"] = partial
    return Row(label, figure, None, f"{partial:.2f} so far", "<= 1.10", met, data)


def time_rows(one: ChildResult, many: ChildResult, label: str) -> list[Row]:
    rows = []
    base = one.last("done")
    done = many.last("done")
    for index, what in ((0, "wall"), (1, "CPU")):
        key = "wall" if index == 0 else "cpu"
        name = f"{label}, {what}"
        if base is None:
            rows.append(Row(name, "one run: " + one.failure(), target="<= 1.5x"))
            continue
        if done is not None:
            ratio = done[key] / base[key]
            figure = f"{seconds(done[key])} vs {seconds(base[key])}"
            data = {"seconds": done[key], "base_seconds": base[key]}
            met = ratio <= TIME_TARGET
            rows.append(Row(name, figure, ratio, f"{ratio:.2f}x", "<= 1.5x", met, data))
            continue
        # The many-runs child was stopped: the cap (less its start-up) bounds the ratio below.
        progressed = [r for r in many.records if "calls" in r]
        calls = max((r["calls"] for r in progressed), default=0)
        last_probe = many.probes()[-1] if many.probes() else None
        elapsed = last_probe[key] if last_probe else 0.0
        if key == "wall":
            elapsed = max(elapsed, many.cap - 1.0)
        ratio_low = elapsed / base[key]
        figure = f"{many.failure()} (reached {calls:,} calls) vs {seconds(base[key])}"
        met = False if ratio_low > TIME_TARGET else None
        data = {"ratio_lower_bound": ratio_low, "base_seconds": base[key]}
        rows.append(Row(name, figure, None, f"> {ratio_low:.1f}x", "<= 1.5x", met, data))
    return rows


def fd_row(child: ChildResult, sessions: int) -> Row:
    probes = {p["sessions"]: p for p in child.probes()}
    label = f"open fds after {sessions:,} sessions made and dropped"
    data = {"child": child.name, "fds": {k: v["fds"] for k, v in probes.items()}}
    first, last = probes.get(1), probes.get(sessions)
    target = f"<= after 1 + {FD_SLACK}"
    if first is None:
        return Row(label, child.failure(), target=target, data=data)
    shape = ", ".join(f"{k}: {v['fds']}" for k, v in sorted(probes.items()))
    if last is None:
        reached = max(probes)
        grew = probes[reached]["fds"] - first["fds"]
        figure = f"{child.failure()}; fds by sessions made {shape}"
        data["extra_fds_so_far"] = grew
        return Row(label, figure, None, "", target, False if grew > FD_SLACK else None, data)
    extra = last["fds"] - first["fds"]
    figure = f"{last['fds']} (by sessions made {shape})"
    data["extra_fds"] = extra
    return Row(label, figure, None, f"+{extra}", target, extra <= FD_SLACK, data)


def concurrent_rows(child: ChildResult, label: str) -> list[Row]:
    work, flushed = child.last("work_done"), child.last("flushed")
    data = {"child": child.name}
    if work is None:
        return [Row(f"{label}: run, wall", child.failure(), data=data)]
    rows = [
        Row(
            f"{label}: run, wall",
            f"{seconds(work['wall'])} (CPU {seconds(work['cpu'])})",
            data={**data, "seconds": work["wall"], "cpu_seconds": work["cpu"]},
        )
    ]
    if flushed is None:
        # Killed while flushing: the flush took at least the rest of the cap.
        lower = child.exited - work["t"]
        figure = f"{child.failure()}; flush still running after {seconds(lower)}"
        data["seconds_lower_bound"] = lower
        met = False if lower >= FLUSH_TARGET else None
        rows.append(Row(f"{label}: force_flush after", figure, None, "", "< 1 s", met, data))
    else:
        ok = flushed["wall"] < FLUSH_TARGET
        figure = f"{seconds(flushed['wall'])} (CPU {seconds(flushed['cpu'])})"
        data.update(seconds=flushed["wall"], cpu_seconds=flushed["cpu"])
        rows.append(Row(f"{label}: force_flush after", figure, None, "", "< 1 s", ok, data))
    return rows


def exit_rows(one: ChildResult, many: ChildResult, runs: int) -> list[Row]:
    def exit_time(child: ChildResult) -> tuple[float | None, str]:
        work = child.last("work_done")
        if work is None:
            progressed = [r.get("runs", 0) for r in child.records if r.get("event") == "progress"]
            reached = max(progressed, default=0)
            return None, f"work {child.failure()} (reached {reached:,} runs)"
        took = child.exited - work["t"]
        if child.killed:
            return None, f"exit {child.failure()} (still exiting after {seconds(took)})"
        return took, seconds(took) + f" (work {seconds(work['wall'])})"

    base, base_text = exit_time(one)
    top, top_text = exit_time(many)
    rows = [Row("time to exit after 1 run (work end to exit)", base_text, data={"seconds": base})]
    label = f"time to exit after {runs:,} runs"
    data = {"seconds": top}
    if base is not None and top is not None:
        ratio = top / base
        rows.append(Row(label, top_text, ratio, f"{ratio:.1f}x", "(reported)", data=data))
    else:
        rows.append(Row(label, top_text, None, "", "(reported)", data=data))
    return rows


@dataclass
class Plan:
    calls: int
    probe_every: int
    per_run: int
    per_session: int
    fd_sessions: int
    fd_probes: Sequence[int]
    agents: int
    exit_runs: int
    cap: float


FULL = Plan(100_000, 10_000, 100, 1000, 500, (1, 50, 250, 500), 200, 1000, 30.0)
QUICK = Plan(2_000, 200, 100, 100, 20, (1, 10, 20), 20, 20, 10.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="agenttrace at scale (issue 8)")
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few seconds")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument("--cap", type=float, help="seconds before a child is stopped")
    parser.add_argument("--keep", action="store_true", help="keep the children's directories")
    parser.add_argument("--save", type=Path, help="also save the table for docs/performance.md")
    parser.add_argument(
        "--only",
        default="rss,fds,concurrent,exit",
        help="comma-separated subset of rss,fds,concurrent,exit (rss includes the time ratio)",
    )
    parser.add_argument("--child", nargs=2, metavar=("KIND", "PARAMS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        kind, params = args.child
        CHILDREN[kind](json.loads(params))
        return 0

    plan = QUICK if args.quick else FULL
    cap = args.cap if args.cap is not None else plan.cap
    only = set(args.only.split(","))
    started = time.perf_counter()
    rows: list[Row] = []
    children: list[ChildResult] = []

    def child(name: str, kind: str, **params: Any) -> ChildResult:
        if not args.json:
            print(f"  running {name} ...", file=sys.stderr, flush=True)
        result = run_child(name, kind, params, cap, args.keep)
        children.append(result)
        return result

    low, high = plan.probe_every, plan.calls
    runs = plan.calls // plan.per_run
    if "rss" in only:
        common = {"calls": plan.calls, "probe_every": plan.probe_every}
        one = child("one-run", "calls", shape="one-run", per_run=plan.calls, **common)
        many = child("runs", "calls", shape="runs", per_run=plan.per_run, **common)
        fresh = child("sessions", "calls", shape="sessions", per_run=plan.per_session, **common)
        rows.append(rss_row(f"RSS, {high:,} calls in one run vs {low:,}", one, low, high))
        rows.append(
            rss_row(f"RSS, {runs:,} runs of {plan.per_run} calls vs {low:,}", many, low, high)
        )
        rows.append(
            rss_row(
                f"RSS, {plan.calls // plan.per_session:,} sessions of {plan.per_session:,} vs "
                f"{low // plan.per_session}",
                fresh,
                low,
                high,
            )
        )
        label = f"{runs:,} runs of {plan.per_run} vs one run of {high:,}"
        rows.extend(time_rows(one, many, label))
    if "fds" in only:
        fds = child("fds", "fds", sessions=plan.fd_sessions, probes=list(plan.fd_probes))
        rows.append(fd_row(fds, plan.fd_sessions))
    shape = {"tools_per_llm": 4, "llm_calls": 5}
    if "concurrent" in only:
        for mode, label in (
            ("roots", f"{plan.agents} concurrent root runs"),
            ("subagents", f"{plan.agents} concurrent sub-agents of one run"),
        ):
            result = child(mode, "concurrent", mode=mode, agents=plan.agents, **shape)
            rows.extend(concurrent_rows(result, label))
    if "exit" in only:
        one_exit = child("exit-1", "exit", runs=1, **shape)
        many_exit = child(f"exit-{plan.exit_runs}", "exit", runs=plan.exit_runs, **shape)
        rows.extend(exit_rows(one_exit, many_exit, plan.exit_runs))

    took = time.perf_counter() - started
    if args.json:
        print(
            json.dumps(
                {
                    "benchmark": "bench_scale",
                    "quick": args.quick,
                    "cap_s": cap,
                    "seconds": round(took, 1),
                    "rows": [r.as_json() for r in rows],
                    "children": {c.name: c.as_json() for c in children},
                },
                indent=2,
            )
        )
    else:
        report(rows, children, took, cap)
    if args.save:
        headers, lines = formatted(rows)
        table = {"headers": list(headers), "rows": [list(line) for line in lines]}
        figures.save(args.save, "bench_scale", {"scale": table}, cap_s=cap)
    return 0


def _met(row: Row) -> str:
    if row.met is None:
        return "-" if row.target in ("", "(reported)") else "?"
    return "yes" if row.met else "NO"


def formatted(rows: list[Row]) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """The table's headers and its rows as text, as printed and as the README shows them."""
    headers = ("measurement", "figure", "ratio", "target", "met")
    return headers, [(r.measurement, r.figure, r.ratio_text, r.target, _met(r)) for r in rows]


def report(rows: list[Row], children: list[ChildResult], took: float, cap: float) -> None:
    headers, table = formatted(rows)
    widths = [max(len(h), *(len(line[i]) for line in table)) for i, h in enumerate(headers)]
    widths[1] = min(widths[1], 70)
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    for line in table:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)))
    if any(_met(r) == "?" for r in rows):
        print(f"\n'?': not decided, the child was stopped at the {cap:g} s cap before the end.")
    noisy = [c for c in children if c.warnings]
    for c in noisy:
        print(f"child {c.name}: stderr mentions agenttrace {c.warnings} times; last lines:")
        print("    " + "\n    ".join(c.stderr_tail.strip().splitlines()[-5:]))
    for c in children:
        if not c.ok:
            print(f"child {c.name}: {c.failure()}")
    print(f"bench_scale took {took:.0f} s")


if __name__ == "__main__":
    sys.exit(main())
