"""Random kills, nothing lost or doubled (issue 31 item 4): the multi-agent scenario of
tests/kill_scenario.py SIGKILLed at seeded random points, resumed, and run to its end, again
and again (tests/kill_matrix.py says how and what is checked). ``make test`` lands
``KILL_MATRIX_KILLS`` kills (default below, a few minutes on a 2-core machine); ``make bench``
lands 1,000 (benchmarks/bench_kills.py). ``KILL_MATRIX_SEED`` picks another seed; a failure
names the seed, the scenario and its kill points, and ``tests.kill_matrix.replay`` runs it
again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .kill_matrix import run

KILLS = int(os.environ.get("KILL_MATRIX_KILLS", "24"))
SEED = int(os.environ.get("KILL_MATRIX_SEED", "31"))


@pytest.mark.e2e
@pytest.mark.slow
def test_random_kills_lose_nothing_and_double_nothing(tmp_path: Path) -> None:
    summary = run(tmp_path, SEED, KILLS)
    print(
        f"kill matrix: {summary.kills} kills in {len(summary.scenarios)} scenarios, "
        f"{summary.resumes} resumes, {summary.doubts} calls in doubt resolved, "
        f"{summary.duplicates} duplicate charges, {summary.unbilled} of {summary.answered} "
        f"LLM replies answered to a process killed before it billed them, "
        f"{summary.seconds:.0f} s ({summary.seconds / max(summary.kills, 1):.1f} s a kill)"
    )
    assert summary.kills >= KILLS
    assert summary.duplicates == 0, [s.describe() for s in summary.failed]
    assert not summary.failed, "\n".join(s.describe() for s in summary.failed)
