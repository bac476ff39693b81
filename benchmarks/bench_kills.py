"""1,000 random kills, nothing lost or doubled (issue 31 item 4): the kill matrix of
tests/kill_matrix.py (a root and two sub-agents at depth 2, parallel tool calls from threads and
asyncio tasks, streamed and plain LLM calls, a tool of each effect class paying through a
payment server) SIGKILLed at seeded random points, resumed and run to its end, until ``--kills``
kills have landed (default 1,000; ``--quick``: 10).

Run with ``make bench`` (or ``python benchmarks/bench_kills.py``). Prints, and with ``--save``
saves for the README: kills, scenarios, resumes, calls in doubt resolved, duplicate charges,
scenarios that broke an invariant, wall time and time per kill. Every broken scenario is
printed with its seed and kill points (``tests.kill_matrix.replay(seed, index)`` runs it again).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.kill_matrix, the driver the test shares

import figures  # noqa: E402  (benchmarks/figures.py, beside this script)

from tests.kill_matrix import Scenario, run  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="random kills of a multi-agent run, resumed")
    parser.add_argument("--kills", type=int, help="kills to land (default 1,000)")
    parser.add_argument("--seed", type=int, default=31, help="the matrix's seed (default 31)")
    parser.add_argument("--quick", action="store_true", help="a smoke run of 10 kills")
    parser.add_argument("--save", type=Path, help="also save the table for docs/performance.md")
    args = parser.parse_args(argv)
    kills = args.kills or (10 if args.quick else 1000)
    scratch = Path(tempfile.mkdtemp(prefix="agenttrace-kills-"))

    def progress(scenario: Scenario) -> None:
        if scenario.problems:
            print(scenario.describe(), flush=True)
        elif scenario.index % 25 == 0:
            print(f"scenario {scenario.index}: {len(scenario.kills)} kills, ok", flush=True)

    summary = run(scratch, args.seed, kills, progress)
    failed = summary.failed
    if not failed:
        shutil.rmtree(scratch, ignore_errors=True)
    per_kill = summary.seconds / max(summary.kills, 1)
    rows = [
        ["kills (SIGKILL at a random stream write or a random moment)", f"{summary.kills:,}"],
        ["scenarios run to their end (each killed 1 to 3 times)", f"{len(summary.scenarios):,}"],
        ["resumes", f"{summary.resumes:,}"],
        ["calls in doubt resolved (asked the payment server)", f"{summary.doubts:,}"],
        ["duplicate charges", f"{summary.duplicates:,}"],
        [
            "LLM calls a kill cut short, billed once as interrupted (no cost known)",
            f"{summary.unbilled:,} (the model server answered {summary.answered:,})",
        ],
        ["scenarios that broke an invariant", f"{len(failed):,}"],
        ["wall time", f"{summary.seconds / 60:,.1f} min ({per_kill:.1f} s a kill)"],
    ]
    width = max(len(row[0]) for row in rows)
    for name, figure in rows:
        print(f"{name.ljust(width)}  {figure}")
    print(
        f"seed {args.seed}; reference run {summary.reference.seconds:.2f} s, "
        f"{summary.reference.writes} stream writes"
    )
    if args.save:
        figures.save(
            args.save,
            "bench_kills",
            {"kills": {"headers": ["measurement", "figure"], "rows": rows}},
            seed=args.seed,
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
