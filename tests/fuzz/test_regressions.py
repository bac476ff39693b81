"""Every input the fuzz suite ever found failing, replayed through every reader, view, export and
command: the files in tests/fuzz/regressions/ (each named for what it broke), which are few and
small and run in ``make check`` too, and the large ones tests/fuzz/crafted.py builds.

A new failing input from tests/fuzz/test_mutations.py or test_properties.py is kept under the
test's temporary directory; once fixed, copy it here with a name that says what it broke (the
name must end in ``.json.gz`` or ``.events.jsonl``, as the readers pair files by name).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .crafted import CRAFTED
from .harness import Harness, guarded

REGRESSIONS = Path(__file__).resolve().parent / "regressions"
FILES = sorted(path.name for path in REGRESSIONS.iterdir() if not path.name.startswith("."))


def replay(tmp_path: Path, name: str, data: bytes) -> None:
    harness = Harness(tmp_path)
    with guarded():
        harness.case("regression", name, data, f"regression {name}")
    if harness.found:
        pytest.fail(harness.verdict(), pytrace=False)


@pytest.mark.parametrize("name", FILES)
def test_a_kept_failing_input_is_read_or_refused_in_one_line(name: str, tmp_path: Path) -> None:
    replay(tmp_path, name, (REGRESSIONS / name).read_bytes())


GROWTH_MARGIN = 2.0
"""How much faster than its size a crafted case's cost may grow: at eight times the size, 16
times the CPU. Linear code costs about eight times as much (measured on this machine kind,
2 cores, loaded: 8.5x for open-task-calls, 7x for agent-chain against the floor below); code
whose quadratic part is a sixth of its cost at the small size already costs more than 16x. Both
sizes run on the same CPU, so the verdict is the same on a fast machine and a slow one."""
UNJUDGED_CPU_S = 0.5
"""CPU seconds under which a case's growth is not judged: fixed costs (the commands' own set-up)
dominate there, and the ratio of two small figures is noise."""


@pytest.mark.fuzz  # megabytes each, read a dozen times: with the fuzz suite, not in make check
@pytest.mark.timeout(1800)  # a hang guard: the verdict on time is the growth below
@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_a_crafted_hostile_file_is_read_or_refused_in_one_line(case: str, tmp_path: Path) -> None:
    """At a size at least that which once broke a reader, and at an eighth of it: every target
    returns or refuses in one line, memory stays in proportion (measured at the small size,
    where tracemalloc is affordable), and the cost grows in proportion to the size, not faster."""
    name, build, small, large = CRAFTED[case]
    harness = Harness(tmp_path)
    with guarded():
        first = harness.case(
            "regression", name, build(small), f"{case} at size {small}", deadline=None
        )
        second = harness.case(
            "regression",
            name,
            build(large),
            f"{case} at size {large}",
            measure=False,
            deadline=None,
        )
    if harness.found:
        pytest.fail(harness.verdict(), pytrace=False)
    bound = GROWTH_MARGIN * (large / small) * max(first.cpu, UNJUDGED_CPU_S)
    assert second.cpu <= bound, (
        f"{case}: {second.cpu:.2f} s of CPU at size {large}, {first.cpu:.2f} s at size {small}: "
        f"its cost grows faster than its size (at most {bound:.2f} s allowed)"
    )


def test_the_seeds_are_whole_sessions(tmp_path: Path) -> None:
    """The files every mutation starts from read as sessions and every view shows them: a seed
    that no longer reads (an outdated format) would leave the suite mutating noise."""
    from agenttrace.formats.session.files import read_session_file

    from .corpus import SEEDS

    snapshot = read_session_file(SEEDS / "cafe.json.gz")
    assert len(snapshot.runs) == 2 and snapshot.events
    stream = read_session_file(SEEDS / "cafe.events.jsonl")
    assert [e["message_id"] for e in stream.events] == [e["message_id"] for e in snapshot.events]
    harness = Harness(tmp_path)
    with guarded():
        report = harness.run("cafe.json.gz", (SEEDS / "cafe.json.gz").read_bytes())
    assert report.readable and not report.failures
    # Every command ran to the end on it (a harness whose commands all refused their input,
    # an agent factory it cannot import say, would pass every case and test nothing), but
    # resolve: the demo left no call in doubt to decide. The killed demo left one (its
    # discuss call): resolve decides it, and the resume re-enters the run it interrupted.
    assert len(report.exits) == 17, report.exits
    assert {a: e for a, e in report.exits.items() if e} == {"resolve 3.2 --not-applied": 2}
    report = harness.run("crashed.json.gz", (SEEDS / "crashed.json.gz").read_bytes())
    assert report.readable and not report.failures
    # lint finds the killed demo's defects (exit 1 with its JSON, which the harness accepts).
    assert {a: e for a, e in report.exits.items() if e} == {"lint --json": 1}, report.exits
