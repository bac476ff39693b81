"""Mutations of real session files and streams through every reader, view, export and command.

``BATCHES`` x ``CASES_PER_BATCH`` cases, each drawn from a random generator seeded with its
batch's number: every run of the suite fuzzes the very same files. Every case goes through the
readers, ``resume``/``load_session``, ``SessionViewer``, stats, tree, the six exports and the
sixteen commands (tests/fuzz/harness.py says what passes). A failing input is kept under the test's
temporary directory; fixed, it belongs in tests/fuzz/regressions/.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from .corpus import corpus
from .harness import Harness, guarded
from .mutate import Mutator

# Hundreds of cases in one test: each has its own CPU deadline (tests/fuzz/harness.py), so the
# wall-time guard of the whole test is only for a hang, wide enough for a slow, busy machine.
pytestmark = [pytest.mark.fuzz, pytest.mark.timeout(1800)]

BATCHES = 40
CASES_PER_BATCH = 100
MEASURED_EVERY = 20
"""tracemalloc follows every twentieth case (it makes a case five times slower)."""

SEEDS, WEIGHTS, SIBLINGS = corpus()


@pytest.mark.parametrize("batch", range(BATCHES))
def test_mutated_sessions_are_read_or_refused_in_one_line(batch: int, tmp_path: Path) -> None:
    rng = random.Random(f"agenttrace fuzz batch {batch}")
    mutator = Mutator(rng)
    harness = Harness(tmp_path)
    with guarded():
        for number in range(CASES_PER_BATCH):
            (seed,) = rng.choices(SEEDS, WEIGHTS)
            mutant = mutator.mutant(seed, SIBLINGS)
            harness.case(
                "mutated",
                mutant.name,
                mutant.data,
                f"batch {batch} case {number}: {seed.name}: {mutant.how}",
                mutant.sibling,
                measure=number % MEASURED_EVERY == 0,
            )
    if harness.found:
        pytest.fail(harness.verdict(), pytrace=False)
