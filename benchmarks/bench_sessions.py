"""Event stream, session file and resume: throughput, sizes and load times.

Run with ``make bench`` (or ``python benchmarks/bench_sessions.py``). Measured in one process:

1. canonical events logged per second into the stream, inside an agent run (spans on);
2. the session file written at a run's end for a session of N events (default 100,000);
3. resuming that session (counters, registry, every transcript) from the stream and from the
   session file, as a ratio to merely parsing the same JSON;
4. the session file's size against the stream's;
5. a chain of nested sub-agents (agent -> tool -> sub-agent -> tool -> ..., 1 to ``--depth``
   deep, default 12, one session each): the session file's size, gunzipped and on disk, the
   time from the start of the run to the file written (``force_flush()`` after the run), and
   how many times the deepest run is in the file.

Targets: resume within 2x of parsing, the run-end snapshot under a second for 100,000 events,
the gz file at least 5x smaller than the stream, and the file growing linearly with sub-agent
depth (the deepest run in it once). Timings are printed, never asserted in tests.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import figures  # benchmarks/figures.py, beside this script
from opentelemetry.sdk.trace import TracerProvider

import agenttrace
from agenttrace.formats.session.files import read_session_file, snapshot_path, stream_path

TEXT = (
    "the agent reads the file and asks the model what to change next while Jack and Jill "
    "talk about the cafe the weather the novel and the meeting at noon"
)
WORDS = TEXT.split()


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 60)))


def best(fn, repeat: int = 3) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def nested_chain(directory: Path, depth: int) -> figures.Table:
    """Section 5: per depth, one session whose run hosts a chain of ``depth`` sub-agents."""
    note_text = sentence(random.Random(depth))

    @agenttrace.tool
    def note(text: str) -> str:
        return text.upper()

    @agenttrace.tool
    def delegate(level: int) -> str:
        return level_run(level)

    def level_run(level: int) -> str:
        name = "Deepest" if level == 0 else f"Level{level}"

        @agenttrace.agent(name)
        def run() -> str:
            said = note(note_text)
            return delegate(level - 1) if level else said

        return run()

    print(
        "sub-agent depth   session file: JSON / on disk   run + file written   read back"
        "   deepest run in it"
    )
    rows: list[list[str]] = []
    for level in range(1, depth + 1):
        session_id = f"depth{level}"
        agenttrace.new_session(session_id)
        started = time.perf_counter()
        level_run(level)
        agenttrace.force_flush()
        written = time.perf_counter() - started
        snapshot = snapshot_path(directory, session_id)
        started = time.perf_counter()
        read_session_file(snapshot)  # parsed and validated, as every reader does
        read = time.perf_counter() - started
        with gzip.open(snapshot) as file:  # gzip.decompress is quadratic in the members
            text = file.read()
        copies = len(re.findall(rb'"agentName": ?"Deepest"', text))
        json_kb, disk_kb = len(text) / 1e3, snapshot.stat().st_size / 1e3
        print(
            f"{level:>15}   {json_kb:>12,.0f} kB / {disk_kb:>7,.0f} kB"
            f"   {written * 1000:>15,.0f} ms   {read * 1000:>6,.0f} ms   {copies:>17,}"
        )
        if level in (1, depth // 2, depth):
            rows.append(
                [
                    str(level),
                    f"{json_kb:,.0f} kB / {disk_kb:,.0f} kB",
                    f"{written * 1000:,.0f} ms",
                    f"{read * 1000:,.0f} ms",
                    f"{copies:,}",
                ]
            )
    headers = [
        "sub-agents nested",
        "session file: JSON / on disk",
        "run + file written",
        "file read back",
        "deepest run in the file",
    ]
    return {"headers": headers, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="event stream, session file and resume")
    parser.add_argument("--events", type=int, default=100_000, help="0: skip sections 1-4")
    parser.add_argument("--depth", type=int, default=12, help="0: skip section 5")
    parser.add_argument("--save", type=Path, help="also save the tables for docs/performance.md")
    args = parser.parse_args(argv)
    directory = Path(tempfile.mkdtemp(prefix="agenttrace-bench-"))
    provider = TracerProvider()
    tracing = agenttrace.init(
        tracer_provider=provider,
        sessions_dir=directory,
        billing_file=directory / "accounting.jsonl",
        instrument_litellm=False,
    )
    tables: dict[str, figures.Table] = {}
    if args.events:
        tables["events"] = events_and_resume(tracing, directory, args.events)
    if args.depth:
        tables["depth"] = nested_chain(directory, args.depth)
    tracing.shutdown()
    shutil.rmtree(directory, ignore_errors=True)  # about 45 MB of stream and session file
    if args.save:
        figures.save(args.save, "bench_sessions", tables, events=args.events, depth=args.depth)
    return 0


def events_and_resume(tracing: agenttrace.Tracing, directory: Path, count: int) -> figures.Table:
    """Sections 1 to 4: ``count`` events logged in a run, the session file, resume, sizes."""
    rng = random.Random(7)
    session = agenttrace.new_session("bench")
    agents = [session.allocate_agent_id() for _ in range(10)]
    for number, agent in enumerate(agents):
        session.log_agent_created(agent, name=f"Agent{number}", language_model="m")
    texts = [sentence(rng) for _ in range(1000)]

    # -- 1 and 2: log the events inside a run; the run's end writes the session file ---------
    timings: dict[str, float] = {}

    @agenttrace.agent("Logger")
    def run() -> None:
        roles = ("user", "assistant")
        started = time.perf_counter()
        for index in range(count - len(agents)):
            session.log_transcript_entry(
                agents[index % len(agents)],
                {"role": roles[index % 2], "content": texts[index % len(texts)]},
            )
        timings["logging"] = time.perf_counter() - started

    run()
    started = time.perf_counter()
    tracing.force_flush()  # what is left of the bookkeeping, and the run-end session file
    timings["snapshot"] = time.perf_counter() - started
    # One more event, then a write: the cost of a session-file write once 100k events are in.
    session.log_transcript_entry(agents[0], {"role": "user", "content": "one more"})
    started = time.perf_counter()
    tracing.force_flush()
    timings["rewrite"] = time.perf_counter() - started
    stream = stream_path(directory, "bench")
    snapshot = snapshot_path(directory, "bench")
    logged = count - len(agents)

    # -- 3: resume vs parse -----------------------------------------------------------------
    lines = stream.read_bytes().splitlines()

    def parse_stream() -> None:
        [json.loads(line) for line in lines]

    def parse_snapshot() -> None:
        json.loads(gzip.decompress(snapshot.read_bytes()))

    def resume_stream() -> None:
        agenttrace.Session.load(stream)

    def resume_snapshot() -> None:
        agenttrace.Session.load(snapshot)

    parse_s, resume_s = best(parse_stream), best(resume_stream)
    parse_g, resume_g = best(parse_snapshot), best(resume_snapshot)
    restored = agenttrace.Session.load(snapshot)
    # The stream's events (not its journal lines: the run's own start and end); the run's own
    # agent_created and the entry logged after it are more than the loop logged.
    count = len(read_session_file(stream).events)
    assert restored.message_counter == count and len(restored.events) == count

    stream_size, snapshot_size = stream.stat().st_size, snapshot.stat().st_size
    print(f"events in the session:               {count}")
    print(f"events logged per second (spans on):  {logged / timings['logging']:,.0f}")
    print(f"flush after the run (file written):   {timings['snapshot'] * 1000:.0f} ms")
    print(f"one more event, session file again:   {timings['rewrite'] * 1000:.0f} ms")
    print(
        f"resume from the stream:               {resume_s * 1000:.0f} ms = "
        f"{resume_s / parse_s:.2f}x parsing its JSON lines ({parse_s * 1000:.0f} ms)"
    )
    print(
        f"resume from the session file:         {resume_g * 1000:.0f} ms = "
        f"{resume_g / parse_g:.2f}x gunzip+parse ({parse_g * 1000:.0f} ms)"
    )
    print(
        f"sizes: stream {stream_size / 1e6:.1f} MB, session file {snapshot_size / 1e6:.1f} MB "
        f"({stream_size / snapshot_size:.1f}x smaller)"
    )
    rows = [
        [
            f"events logged per second, spans on ({count:,} events)",
            f"{logged / timings['logging']:,.0f}",
            "",
        ],
        [
            "`force_flush()` after the run (the session file written)",
            f"{timings['snapshot'] * 1000:.0f} ms",
            "under 1 s",
        ],
        [
            "one more event, then the session file written again",
            f"{timings['rewrite'] * 1000:.0f} ms",
            "in proportion to what changed",
        ],
        [
            "resume from the stream, every line validated against the schema",
            f"{resume_s * 1000:.0f} ms = {resume_s / parse_s:.2f}x parsing its JSON lines",
            "within 2x",
        ],
        [
            "resume from the session file, validated against the schema",
            f"{resume_g * 1000:.0f} ms = {resume_g / parse_g:.2f}x gunzip + parse",
            "within 2x",
        ],
        [
            "session file size",
            f"{snapshot_size / 1e6:.1f} MB, {stream_size / snapshot_size:.1f}x smaller than the "
            f"stream ({stream_size / 1e6:.0f} MB)",
            "at least 5x",
        ],
    ]
    return {"headers": ["measurement", "figure", "target"], "rows": rows}


if __name__ == "__main__":
    sys.exit(main())
