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


@pytest.mark.fuzz  # megabytes each, read a dozen times: with the fuzz suite, not in make check
@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_a_crafted_hostile_file_is_read_or_refused_in_one_line(case: str, tmp_path: Path) -> None:
    name, build = CRAFTED[case]
    replay(tmp_path, name, build())


def test_the_seeds_are_whole_sessions(tmp_path: Path) -> None:
    """The files every mutation starts from read as sessions and every view shows them: a seed
    that no longer reads (an outdated format) would leave the suite mutating noise."""
    from agenttrace.record.session_files import read_session_file

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
    # an agent factory it cannot import say, would pass every case and test nothing).
    assert len(report.exits) == 13 and set(report.exits.values()) == {0}, report.exits
