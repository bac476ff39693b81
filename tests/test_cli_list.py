"""``agenttrace list``: the sessions of a sessions directory, newest first, one row each.

The session is the cafe demo recorded in this process (real spans, real files); its other
states (running, killed mid-run, written by a process whose pid another process got since,
damaged) are that file rewritten as such a process leaves it. Commands run through click's
``CliRunner``; one runs as a real process, finding the directory by AGENTTRACE_SESSIONS_DIR.
"""

from __future__ import annotations

import copy
import dataclasses
import gzip
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import agenttrace
from agenttrace._internal.processes import process_start_ms
from agenttrace.cli import main
from agenttrace.formats.session import files as session_files
from agenttrace.formats.session.files import snapshot_bytes
from agenttrace.views import listing

from .conftest import Traced
from .helpers import child_env, record_demo_here

HOUR_NS = 3600 * 10**9


@dataclass
class Recorded:
    """The cafe demo's session as this process recorded it."""

    sessions: Path
    """The sessions directory it was recorded in."""
    session_id: str
    document: dict[str, Any]
    stream: bytes

    def write(
        self,
        directory: Path,
        session_id: str,
        *,
        document: dict[str, Any] | None = None,
        stream: bool = True,
        snapshot: bool = True,
        age_ns: int = 0,
    ) -> None:
        """The session's files in ``directory`` under ``session_id`` (``document`` instead of
        the recorded one), both last written ``age_ns`` ago."""
        directory.mkdir(parents=True, exist_ok=True)
        document = self.document if document is None else document
        written = []
        if stream:
            path = directory / f"{session_id}.events.jsonl"
            path.write_bytes(self.stream)
            written.append(path)
        if snapshot:
            path = directory / f"{session_id}.json.gz"
            lines = [json.dumps(event).encode() for event in document["events"]]
            path.write_bytes(snapshot_bytes(session_id, document["runs"], lines, document["meta"]))
            written.append(path)
        when = time.time_ns() - age_ns
        for path in written:
            os.utime(path, ns=(when, when))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """The cafe demo recorded once for the module, in this process."""
    snapshot, stream = record_demo_here(tmp_path_factory.mktemp("list"))
    document = json.loads(gzip.decompress(snapshot.read_bytes()))
    return Recorded(snapshot.parent, document["session_id"], document, stream.read_bytes())


def test_a_program_reads_its_session_id_and_finds_its_files(traced: Traced, tmp_path: Path) -> None:
    @agenttrace.agent("Reader")
    def run() -> None:
        pass

    run()
    session_id = agenttrace.current_session().session_id
    traced.handle.force_flush()
    sessions = tmp_path / "sessions"
    assert (sessions / f"{session_id}.json.gz").is_file()
    (row,) = rows(sessions)
    assert row["session_id"] == session_id and row["runs"] == 1 and row["status"] == "ended"


def cli(*args: str) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def rows(directory: Path, *args: str) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = json.loads(
        cli("list", "--sessions-dir", str(directory), "--json", *args)
    )
    return listed


def test_a_recorded_session_is_one_ended_row_with_the_stats_totals(recorded: Recorded) -> None:
    sessions = recorded.sessions
    (row,) = rows(sessions)
    stats = json.loads(cli("stats", "--json", recorded.session_id, "--sessions-dir", str(sessions)))
    total = stats["total"]
    assert row["session_id"] == recorded.session_id
    assert row["status"] == "ended"
    assert row["agents"] == 3 and row["runs"] == 1  # the root, Jack and Jill; one run
    assert row["input_tokens"] == total["input_tokens"] > 0
    assert row["tokens"] == total["input_tokens"] + total["output_tokens"]
    assert row["cost_usd"] == total["cost_usd"] > 0
    assert row["started_ms"] == recorded.document["meta"]["createdAt"]
    assert row["error"] is None

    table = cli("list", "--sessions-dir", str(sessions))
    (line,) = [line for line in table.splitlines() if recorded.session_id in line]
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(row["started_ms"] // 1000))
    for cell in (started, "3", "1", "ended", str(row["tokens"]), f"${total['cost_usd']:.6f}"):
        assert f" {cell} " in line, (cell, line)


def test_a_run_going_on_in_this_process_is_running_then_ended(
    traced: Traced, tmp_path: Path
) -> None:
    sessions = tmp_path / "sessions"
    seen: list[dict[str, Any]] = []

    @agenttrace.agent("Busy")
    def run() -> None:
        traced.handle.force_flush()  # the session file now holds the run, not ended
        (row,) = rows(sessions)
        seen.append(row)
        # Long unwritten: the pid decides, not how recently the files were written.
        old = time.time_ns() - 5 * HOUR_NS
        for path in sessions.iterdir():
            os.utime(path, ns=(old, old))
        seen.extend(rows(sessions))

    run()
    traced.handle.force_flush()
    assert [row["status"] for row in seen] == ["running", "running"]
    (row,) = rows(sessions)
    assert row["status"] == "ended" and row["runs"] == 1


def unended(document: dict[str, Any], pid: object = None, **run: Any) -> dict[str, Any]:
    """``document`` as the session file of a run still going (or killed): its last run has no
    end, the run's process is ``pid`` (no pid if None), ``run`` sets more of its fields."""
    document = copy.deepcopy(document)
    last = document["runs"][-1]
    for key in ("endedAt", "success", "error", "latencyMs"):
        del last[key]
    last.update(run)
    ingress = last["attributes"]["ingress"]
    if pid is None:
        last["attributes"]["ingress"] = {"source": "api"}
    else:
        ingress["cli"]["pid"] = pid
    document["meta"]["result"] = {"success": None, "error": None}
    return document


def finished_pid() -> int:
    """The pid of a process that has exited."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], text=True,
                           capture_output=True, check=True)  # fmt: skip
    return int(child.stdout)


def status(recorded: Recorded, directory: Path, **files: Any) -> str:
    recorded.write(directory, "s", **files)
    (row,) = rows(directory)
    return str(row["status"])


def test_a_run_whose_process_still_runs_is_running(recorded: Recorded, tmp_path: Path) -> None:
    document = unended(recorded.document, os.getpid())
    assert status(recorded, tmp_path / "l", document=document, age_ns=5 * HOUR_NS) == "running"


def test_a_run_whose_process_is_gone_is_interrupted(recorded: Recorded, tmp_path: Path) -> None:
    document = unended(recorded.document, finished_pid())
    assert status(recorded, tmp_path / "l", document=document) == "interrupted"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_pid_another_process_got_since_is_interrupted(recorded: Recorded, tmp_path: Path) -> None:
    # The run started a day before this process did: this process is not the run's.
    began = process_start_ms(os.getpid())
    assert began is not None
    document = unended(recorded.document, os.getpid(), startedAt=began - 24 * 3600 * 1000)
    assert status(recorded, tmp_path / "l", document=document) == "interrupted"


@pytest.mark.parametrize("pid", [0, -1, True, "123", 1 << 40, None])
def test_without_a_usable_pid_the_stream_written_lately_is_running(
    recorded: Recorded, tmp_path: Path, pid: object
) -> None:
    document = unended(recorded.document, pid)
    # Nor does its journal name one (a release before the run lines' pid).
    recorded = dataclasses.replace(recorded, stream=without_journal_pids(recorded.stream))
    assert status(recorded, tmp_path / "new", document=document) == "running"
    assert status(recorded, tmp_path / "old", document=document, age_ns=HOUR_NS) == "interrupted"


def without_journal_pids(stream: bytes) -> bytes:
    """``stream`` with no pid on its runs' journal lines."""
    lines = [json.loads(line) for line in stream.splitlines()]
    for line in lines:
        line.pop("pid", None)
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def test_a_stream_without_a_session_file_is_running_while_written(
    recorded: Recorded, tmp_path: Path
) -> None:
    # A stream whose journal names no process (a release before the run lines' pid).
    recorded = dataclasses.replace(recorded, stream=without_journal_pids(recorded.stream))
    assert status(recorded, tmp_path / "new", snapshot=False) == "running"
    assert status(recorded, tmp_path / "old", snapshot=False, age_ns=HOUR_NS) == "interrupted"
    (row,) = rows(tmp_path / "old")
    # Its run and totals are rebuilt from its accounting lines: what `stats` says of it.
    stats = json.loads(cli("stats", "--json", str(tmp_path / "old" / "s.events.jsonl")))
    assert row["agents"] == 3 and row["runs"] == stats["runs"] == 1
    assert row["input_tokens"] == stats["total"]["input_tokens"] > 0
    assert row["cost_usd"] == stats["total"]["cost_usd"]
    assert row["started"] == recorded.document["events"][0]["ts"][:19] + "Z"


def test_a_stream_whose_process_is_gone_is_interrupted_at_once(
    recorded: Recorded, tmp_path: Path
) -> None:
    """Its journal names its process: no need to wait for the stream to age."""
    stream = recorded.stream.replace(
        f'"pid": {os.getpid()}'.encode(), f'"pid": {finished_pid()}'.encode()
    )
    assert stream != recorded.stream
    gone = dataclasses.replace(recorded, stream=stream)
    assert status(gone, tmp_path / "gone", snapshot=False) == "interrupted"
    assert status(recorded, tmp_path / "alive", snapshot=False, age_ns=HOUR_NS) == "running"


def test_events_after_the_session_file_mean_a_run_it_does_not_have(
    recorded: Recorded, tmp_path: Path
) -> None:
    # The last run ended, then more was logged (the stream is ahead): whose process is not
    # known unless the last run's still runs.
    behind = copy.deepcopy(recorded.document)
    behind["events"] = behind["events"][:-2]
    behind["runs"][-1]["attributes"]["ingress"]["cli"]["pid"] = finished_pid()
    assert status(recorded, tmp_path / "gone", document=behind, age_ns=HOUR_NS) == "interrupted"
    behind["runs"][-1]["attributes"]["ingress"]["cli"]["pid"] = os.getpid()
    assert status(recorded, tmp_path / "same", document=behind, age_ns=HOUR_NS) == "running"


def hostile_files(recorded: Recorded, directory: Path) -> dict[str, str]:
    """Damaged sessions in ``directory``: id -> what the reason says."""
    directory.mkdir(parents=True, exist_ok=True)
    recorded.write(directory, "swapped", stream=False)
    (directory / "swapped.json.gz").rename(directory / "swapped.events.jsonl")
    (directory / "garbage.json.gz").write_bytes(b"not gzip at all")
    (directory / "cut.json.gz").write_bytes(gzip.compress(b'{"format": "agenttrace.sess')[:20])
    (directory / "empty.json.gz").write_bytes(b"")  # an empty stream recorded nothing: no error
    (directory / "foreign.events.jsonl").write_bytes(b'{"hello": "world"}\n')
    (directory / "dir.json.gz").mkdir()
    os.mkfifo(directory / "fifo.events.jsonl")
    (directory / "zero.events.jsonl").symlink_to("/dev/zero")
    return {
        "garbage": "not an agenttrace session file (neither gzip nor an event stream)",
        "cut": "truncated or damaged gzip",
        "empty": "empty file",
        "foreign": "not a canonical event",
        "swapped": "not the file its name says",
        "dir": "is a directory",
        "fifo": "is a FIFO",
        "zero": "is a character device",
    }


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_damaged_files_are_rows_not_errors(recorded: Recorded, tmp_path: Path) -> None:
    directory = tmp_path / "mixed"
    recorded.write(directory, "good", age_ns=HOUR_NS)  # older than every damaged file
    reasons = hostile_files(recorded, directory)
    listed = rows(directory, "--limit", "0")
    assert listed[-1]["session_id"] == "good" and listed[-1]["status"] == "ended"
    damaged = {row["session_id"]: row for row in listed[:-1]}
    assert set(damaged) == set(reasons)
    for session_id, reason in reasons.items():
        row = damaged[session_id]
        assert row["status"] == "damaged" and row["runs"] is None and row["tokens"] is None
        assert reason in row["error"] and "\n" not in row["error"], row

    result = CliRunner().invoke(main, ["list", "--sessions-dir", str(directory), "--limit", "0"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count("│ damaged ") == len(reasons)  # one table row each
    lines = result.stdout.splitlines()
    for session_id, reason in reasons.items():  # each reason under the table, on one line
        assert any(line.startswith(f"{session_id}: ") and reason in line for line in lines)


def test_newest_first_and_the_limit(recorded: Recorded, tmp_path: Path) -> None:
    directory = tmp_path / "many"
    for age in range(5):
        recorded.write(directory, f"aged{age}", age_ns=age * HOUR_NS)
    (directory / "notes.txt").write_text("not a session")
    (directory / ".aged0.json.gz.x1.tmp").write_bytes(b"a write's temporary file")
    (directory / "bad name.json.gz").write_bytes(b"no session id has a space")
    assert [row["session_id"] for row in rows(directory, "--limit", "2")] == ["aged0", "aged1"]
    assert len(rows(directory, "--limit", "0")) == 5
    assert len(rows(directory)) == 5  # the default, 20
    table = cli("list", "--sessions-dir", str(directory), "--limit", "3")
    assert "aged2" in table and "aged3" not in table
    assert "3 of 5 sessions" in table


def test_only_the_sessions_shown_are_read(
    recorded: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "thousands"
    recorded.write(directory, "newest")
    for number in range(2000):  # a sessions directory of a long-lived machine
        (directory / f"old{number}.events.jsonl").write_bytes(recorded.stream)
    old = time.time_ns() - HOUR_NS
    for number in range(2000):
        os.utime(directory / f"old{number}.events.jsonl", ns=(old, old))
    read: list[Path] = []
    real = session_files.read_session_file

    def counted(path: Any, *args: Any, **kwargs: Any) -> Any:
        read.append(Path(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(listing, "read_session_file", counted)
    found = listing.list_sessions(directory, 3)
    assert found.total == 2001 and len(found.rows) == 3
    assert found.rows[0].session_id == "newest"
    assert len(read) == 4  # the newest session's two files, then one stream each


def test_no_sessions(tmp_path: Path) -> None:
    assert rows(tmp_path / "missing") == []
    assert "no sessions in" in cli("list", "--sessions-dir", str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    assert rows(tmp_path / "empty") == []


def test_a_file_is_not_a_sessions_dir(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    result = CliRunner().invoke(main, ["list", "--sessions-dir", str(tmp_path / "file")])
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("agenttrace: error: ") and "is a file" in line


@pytest.mark.e2e
def test_list_as_a_user_runs_it(recorded: Recorded) -> None:
    """The installed command, the directory from AGENTTRACE_SESSIONS_DIR."""
    result = subprocess.run(
        [sys.executable, "-m", "agenttrace.cli", "list", "--json"],
        env=child_env(AGENTTRACE_SESSIONS_DIR=str(recorded.sessions)),
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)
    assert row["session_id"] == recorded.session_id and row["status"] == "ended"


def test_help_names_the_command_and_its_status_rule() -> None:
    assert "  list " in cli("--help")
    text = " ".join(cli("list", "--help").split())
    for words in ("--sessions-dir", "--json", "--limit", "ended", "running", "interrupted"):
        assert words in text
    assert "damaged (a file of the session cannot be read" in text
