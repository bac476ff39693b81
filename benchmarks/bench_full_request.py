"""What an LLM op's whole request costs in the session file, and to read back.

Run with ``python benchmarks/bench_full_request.py`` (``--quick`` for a smoke run). The loop is
bench_history's sliding window (a mocked ``litellm.completion``, messages of about 1 kB, the
oldest exchange dropped each call) at 10 and 1,000 messages. Per call:

- the bytes the session file grows by (gzipped, as written, and decompressed), which must not
  follow the window: an op holds its delta and a reference to its transcript, not the request;
- the time ``agenttrace.formats.session.requests`` takes to read the last op's whole request from
the   file: indexing the events once, then one request; beside it, the time a replay of the same
  events takes (``Session.restore``: what a reader had to do before).

Timings are printed, never asserted in tests; with ``--save`` (``make bench``) the table is saved
for docs/session-file.md (benchmarks/figures.py writes it there).
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import figures  # beside this script
import litellm
from bench_history import MODEL, Loop  # beside this script

import agenttrace
from agenttrace.formats.session.files import read_session_file, snapshot_path
from agenttrace.session.state import Session

LENGTHS = (10, 1000)


def grown(path: Path, before: tuple[int, int], calls: int) -> tuple[float, float]:
    data = path.read_bytes()
    return (
        (len(data) - before[0]) / calls,
        (len(gzip.decompress(data)) - before[1]) / calls,
    )


def sizes(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    return len(data), len(gzip.decompress(data))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="an LLM op's whole request in the session file")
    parser.add_argument("--calls", type=int, help="calls measured per case (default 100)")
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--save", type=Path, help="also save the table for docs/session-file.md")
    args = parser.parse_args(argv)
    calls = args.calls or (10 if args.quick else 100)
    litellm.suppress_debug_info = True
    scratch = Path(tempfile.mkdtemp(prefix="agenttrace-bench-"))
    tracing = agenttrace.init(
        instrument_litellm=True,
        sessions_dir=scratch,
        billing_file=scratch / "accounting.jsonl",
        console="quiet",
        endpoint=None,
    )
    print(f"model {MODEL}, sliding window, {calls} calls measured per case")
    rows: list[list[str]] = []
    for length in LENGTHS:
        session = agenttrace.new_session()
        path = snapshot_path(scratch, session.session_id)
        loop = Loop(length, window=True, seed=length)
        with agenttrace.agent("Looper"):
            loop.call()  # the first call records the whole history: not measured
            agenttrace.force_flush()
            start = sizes(path)
            for _ in range(calls):
                loop.call()
        agenttrace.force_flush()
        gz, raw = grown(path, start, calls)
        line = f"{length:>5} messages: session file +{gz:,.0f} B/call gzipped, +{raw:,.0f} B/call"
        try:
            from agenttrace.formats.session.requests import RequestIndex
        except ImportError:  # the release before full_request
            print(line)
            rows.append([f"{length:,} messages", f"+{gz:,.0f} B (+{raw:,.0f} B)", "", "", ""])
            continue
        loaded = read_session_file(path)
        ops = [op for turn in loaded.runs[0]["turns"] for op in turn["ops"]]
        began = time.perf_counter()
        index = RequestIndex(loaded.events)
        indexed = time.perf_counter() - began
        began = time.perf_counter()
        request = index.full_request(ops[-1])
        read = time.perf_counter() - began
        began = time.perf_counter()
        Session().restore(loaded.events, raw_lines=None)
        replayed = time.perf_counter() - began
        print(
            f"{line}; {len(loaded.events):,} events: index {indexed * 1e3:.1f} ms, last request "
            f"({len(request):,} messages) {read * 1e3:.2f} ms; a replay {replayed * 1e3:.0f} ms"
        )
        rows.append(
            [
                f"{length:,} messages",
                f"+{gz:,.0f} B (+{raw:,.0f} B)",
                f"{len(loaded.events):,} events, {indexed * 1e3:.1f} ms",
                f"{len(request):,} messages, {read * 1e3:.2f} ms",
                f"{replayed * 1e3:.0f} ms",
            ]
        )
    tracing.shutdown()
    shutil.rmtree(scratch, ignore_errors=True)
    if args.save:
        headers = [
            f"sliding window, {calls:,} calls each",
            "session file per call, gzipped (decompressed)",
            "indexing its events",
            "reading the last request",
            "a replay of the events",
        ]
        table = {"headers": headers, "rows": rows}
        figures.save(args.save, "bench_full_request", {"full_request": table}, calls=calls)
    return 0


if __name__ == "__main__":
    sys.exit(main())
