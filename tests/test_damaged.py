"""A damaged session file beside a readable stream (agenttrace.formats.session.damaged): never
written over, its whole runs recovered, one warning; on a file a release wrote
(tests/data/releases)."""

from __future__ import annotations

import gzip
import json
import logging
import shutil
from pathlib import Path

import pytest

from agenttrace.formats.session.damaged import keep_aside, recover_runs
from agenttrace.formats.session.fullest import load_fullest

from .helpers import ROOT

RESUMED = ROOT / "tests" / "data" / "releases" / "previous-619d4d5" / "cafe-resumed"


@pytest.fixture
def session(tmp_path: Path) -> tuple[Path, Path, list[dict[str, object]]]:
    """(session file cut short in its second run, stream, the runs it held whole)."""
    for path in RESUMED.glob("*.*"):
        shutil.copy(path, tmp_path)
    (snapshot,) = tmp_path.glob("*.json.gz")
    (stream,) = tmp_path.glob("*.events.jsonl")
    text = gzip.decompress(snapshot.read_bytes()).decode()
    runs = json.loads(text)["runs"]
    start = text.index('"runs":[') + len('"runs":[')
    _, end = json.JSONDecoder().raw_decode(text, start)
    snapshot.write_bytes(gzip.compress(text[: end + 500].encode())[:-8])
    return snapshot, stream, runs


def test_a_reader_recovers_the_whole_runs_and_says_so_once(
    session: tuple[Path, Path, list[dict[str, object]]], caplog: pytest.LogCaptureFixture
) -> None:
    snapshot, stream, runs = session
    caplog.set_level(logging.WARNING, logger="agenttrace")
    before = snapshot.read_bytes()
    for path in (stream, snapshot):  # asked for either file: the stream tells the rest
        caplog.clear()
        loaded = load_fullest(path)
        assert loaded.runs == runs[:1]
        assert len(loaded.events) == 33
        (warning,) = caplog.messages
        assert "cannot be read" in warning and "1 run was recovered" in warning
    assert snapshot.read_bytes() == before  # a reader never moves it


def test_a_resume_keeps_it_aside_under_a_free_name(
    session: tuple[Path, Path, list[dict[str, object]]], caplog: pytest.LogCaptureFixture
) -> None:
    snapshot, stream, _ = session
    taken = snapshot.with_name(snapshot.name + ".damaged-1")
    taken.write_bytes(b"an earlier one")
    damaged = snapshot.read_bytes()
    caplog.set_level(logging.WARNING, logger="agenttrace")
    load_fullest(stream, keep_damaged=True)
    assert not snapshot.exists()
    assert taken.read_bytes() == b"an earlier one"
    kept = snapshot.with_name(snapshot.name + ".damaged-2")
    assert kept.read_bytes() == damaged
    (warning,) = caplog.messages
    assert str(kept) in warning


def test_nothing_is_recovered_from_what_is_not_a_session_file(tmp_path: Path) -> None:
    for content in (b"", b"\x1f\x8b", gzip.compress(b'{"runs":[{"id": 1}'), b"not gzip"):
        path = tmp_path / "x.json.gz"
        path.write_bytes(content)
        assert recover_runs(path) == []
    assert keep_aside(path).name == "x.json.gz.damaged-1"


def test_a_run_that_is_not_an_object_is_not_recovered(tmp_path: Path) -> None:
    """A number, text or an array where a run belongs is no run: the whole runs around it are
    recovered, it is passed over (it once raised a TypeError out of every reader)."""
    run = {"not": "a run"}
    for bad in ("1.5", '"run"', "[1.5]", "null"):
        path = tmp_path / "x.json.gz"
        text = f'{{"format":"agenttrace.session","version":1,"runs":[{bad},{json.dumps(run)},'
        path.write_bytes(gzip.compress(text.encode()))
        assert recover_runs(path) == []
