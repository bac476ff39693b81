"""A session killed before the first line of its event stream was whole (issue 31, "every view
opens the session"): its ``<id>.events.jsonl`` is empty, or holds only a torn first line, and
no session file is beside it. It reads as a session that recorded nothing (as a torn last line
is skipped): every view opens it and says so, exit 0; ``load_session`` and ``resume`` start it
anew under its id, and the torn bytes never prefix the next line. Any other empty file is still
refused in one line (tests/test_session_files.py, tests/test_cli.py).

Real files in a real sessions directory; the commands run through click as a user runs them,
``serve`` through its HTTP API.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from starlette.testclient import TestClient

import agenttrace
from agenttrace._internal.times import event_ts
from agenttrace.cli import FORMATS, main
from agenttrace.formats.session.files import (
    SessionFileError,
    read_session_file,
    snapshot_path,
    stream_path,
)
from agenttrace.formats.session.fullest import load_pair
from agenttrace.model import events as ev
from agenttrace.views.account import INTERRUPTED_STATE, RUNNING
from agenttrace.views.serve.app import create_app

from .conftest import Traced
from .test_load_session import Rebuilt, in_a_new_process

TOKEN = "test-token-of-this-server"
HOUR_S = 3600


def _first_line() -> bytes:
    """The first line agenttrace writes for a session ``load_session`` starts: its root's
    ``agent_created``, serialised as the stream's lines are (restored, so nothing is written
    anywhere)."""
    event = {**ev.agent_created("msg_001", "agent_001"), "ts": event_ts(time.time_ns())}
    session = agenttrace.Session("scratch")
    session.restore([event], raw_lines=None)
    (line,) = session.event_lines()
    return bytes(line)


@pytest.fixture(params=["empty", "torn"])
def left(request: pytest.FixtureRequest) -> bytes:
    """What the kill left in the stream: nothing, or the first line cut off half-way."""
    if request.param == "empty":
        return b""
    line = _first_line()
    assert line.endswith(b"\n")
    return line[: len(line) // 2]


def killed_stream(sessions: Path, session_id: str, data: bytes, *, age_s: float = 0) -> Path:
    """``<sessions>/<session_id>.events.jsonl`` as a kill left it, last written ``age_s`` ago."""
    sessions.mkdir(parents=True, exist_ok=True)
    path = stream_path(sessions, session_id)
    path.write_bytes(data)
    if age_s:
        then = time.time() - age_s
        os.utime(path, (then, then))
    return path


def agenttrace_command(*args: str) -> Result:
    """The ``agenttrace`` command, through click; a traceback fails the test."""
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def succeeded(result: Result) -> str:
    assert result.exit_code == 0, (result.exit_code, result.stderr)
    assert "Traceback" not in result.stderr
    return result.stdout


# --- reading ------------------------------------------------------------------------------------


def test_it_reads_as_a_session_that_recorded_nothing(tmp_path: Path, left: bytes) -> None:
    path = killed_stream(tmp_path, "chat", left)
    loaded = read_session_file(path)
    assert (loaded.kind, loaded.session_id, loaded.events, loaded.runs) == (
        "stream",
        "chat",
        [],
        [],
    )
    assert loaded.recorded_nothing
    # A torn first line is reported as a torn last line is: skipped, and nothing else lost.
    assert loaded.torn == (left.decode() if left else None)
    fullest, up_to_date = load_pair(path)
    assert fullest.recorded_nothing and fullest.session_id == "chat" and not up_to_date


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("chat.json.gz", b"", "empty file, no events"),  # an empty session file
        ("chat.jsonl", b"", "empty file, no events"),  # not named as a session's stream
        ("-chat.events.jsonl", b"", "empty file, no events"),  # no session id names it
        ("chat.jsonl", b'{"message_id": "msg_0', "no complete event in the stream"),
        ("chat.events.jsonl", b"hello", "no complete event in the stream"),  # no line cut short
    ],
)
def test_only_a_sessions_own_stream_reads_so(
    tmp_path: Path, name: str, data: bytes, message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(SessionFileError) as caught:
        read_session_file(path)
    assert str(caught.value) == f"{path}: {message}"
    result = agenttrace_command("tree", str(path))
    assert result.exit_code == 2 and result.stderr == f"agenttrace: error: {path}: {message}\n"


# --- the views ----------------------------------------------------------------------------------


def test_list_shows_it_interrupted_once_nothing_writes_it(tmp_path: Path, left: bytes) -> None:
    """No run names a process to ask, so its state is the stream's age (views/account.py):
    running while written in the last ten minutes, interrupted after."""
    sessions = tmp_path / "sessions"
    killed_stream(sessions, "old", left, age_s=HOUR_S)
    killed_stream(sessions, "new", left)
    rows = json.loads(
        succeeded(agenttrace_command("list", "--json", "--sessions-dir", str(sessions)))
    )
    assert [(r["session_id"], r["status"]) for r in rows] == [
        ("new", RUNNING),
        ("old", INTERRUPTED_STATE),
    ]
    for row in rows:
        assert (row["agents"], row["runs"], row["tokens"], row["error"]) == (0, 0, None, None)
    table = succeeded(agenttrace_command("list", "--sessions-dir", str(sessions)))
    assert "old" in table and INTERRUPTED_STATE in table and "damaged" not in table

    client = TestClient(create_app(sessions, TOKEN), base_url="http://127.0.0.1")
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    served = client.get("/api/runs", headers=bearer).json()["runs"]
    assert [(r["session_id"], r["status"]) for r in served] == [
        ("new", RUNNING),
        ("old", INTERRUPTED_STATE),
    ]
    page = client.get("/api/runs/old/tree", headers=bearer)
    assert page.status_code == 200, page.text
    document = page.json()
    assert (document["sessionId"], document["status"], document["tree"]) == (
        "old",
        INTERRUPTED_STATE,
        [],
    )


def test_each_view_opens_it_and_says_it_recorded_nothing(tmp_path: Path, left: bytes) -> None:
    sessions = tmp_path / "sessions"
    stream = killed_stream(sessions, "chat", left, age_s=HOUR_S)
    said = "session chat recorded nothing: no event, no run (its event stream holds no whole line)"
    for reference in (["chat", "--sessions-dir", str(sessions)], [str(stream)]):
        assert succeeded(agenttrace_command("tree", *reference)) == said + "\n"
        assert succeeded(agenttrace_command("stats", *reference)) == said + "\n"
        totals = json.loads(succeeded(agenttrace_command("stats", "--json", *reference)))
        assert (
            totals["runs"] == 0 and totals["by_agent"] == [] and totals["total"]["tool_calls"] == 0
        )
        doubts = succeeded(agenttrace_command("doubts", *reference))
        assert doubts == f"no call in doubt ({said})\n"
        assert json.loads(succeeded(agenttrace_command("doubts", "--json", *reference))) == []
        for format_ in FORMATS:
            output = tmp_path / f"export.{format_}"
            result = agenttrace_command(
                "export", *reference, "--format", format_, "-o", str(output)
            )
            assert succeeded(result) == ""  # stdout may be piped to a file: nothing lands there
            assert f"{said}; nothing to export, none written" in result.stderr
            assert not output.exists()
    assert stream.read_bytes() == left  # reading changes nothing


# --- continuing it ------------------------------------------------------------------------------


def _lines(path: Path) -> Iterator[bytes]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    yield from data.splitlines(keepends=True)


def test_load_session_starts_it_anew_and_it_reads_back_whole(traced: Traced, left: bytes) -> None:
    sessions = traced.handle.settings.sessions_dir
    stream = killed_stream(sessions, "chat", left)
    built: list[agenttrace.AgentRecord] = []

    def factory(record: agenttrace.AgentRecord, session: agenttrace.Session) -> Rebuilt:
        built.append(record)
        return Rebuilt(record)

    root, session = agenttrace.load_session("chat", factory)
    assert session is agenttrace.current_session() and session.session_id == "chat"
    assert session.resumed_from is None  # a new session, as load_session starts one
    assert [(e["event_type"], e["agent_id"]) for e in session.events] == [
        ("agent_created", "agent_001")
    ]
    assert [r.agent_id for r in built] == ["agent_001"]
    root.hear("Hello.")  # a run that records
    in_a_new_process()

    # The stream reads back whole: the torn bytes were cut off before the first line.
    lines = list(_lines(stream))
    assert lines[0].startswith(b'{"message_id": "msg_001", "event_type": "agent_created"')
    assert all(json.loads(line) for line in lines)
    loaded = read_session_file(stream)
    assert loaded.torn is None
    assert loaded.events == session.events
    assert snapshot_path(sessions, "chat").is_file()
    assert len(read_session_file(snapshot_path(sessions, "chat")).runs) == 1
    tree = succeeded(agenttrace_command("tree", str(stream)))
    assert "Host" in tree and "recorded nothing" not in tree

    # And the next call resumes it like any other.
    root, again = agenttrace.load_session("chat", factory)
    assert again.resumed_from is not None and again.session_id == "chat"
    assert root.transcript == [{"role": "user", "content": "Hello."}]
    assert again.allocate_agent_id() == "agent_002"  # no id handed out twice


def test_resume_starts_it_anew(traced: Traced, left: bytes) -> None:
    sessions = traced.handle.settings.sessions_dir
    stream = killed_stream(sessions, "chat", left)
    session = agenttrace.resume(stream)
    assert session is agenttrace.current_session()
    assert session.session_id == "chat" and session.resumed_from is None
    assert session.events == [] and session.runs == [] and session.root() is None
    # What is logged now is the session's first line, whole.
    session.log_agent_created(session.allocate_agent_id(), name="Root")
    in_a_new_process()
    (line,) = _lines(stream)
    assert json.loads(line)["message_id"] == "msg_001"
    loaded = read_session_file(stream)
    assert loaded.torn is None and [e["agent_id"] for e in loaded.events] == ["agent_001"]
    resumed = agenttrace.resume("chat")
    root = resumed.root()
    assert root is not None and root.name == "Root" and resumed.resumed_from is not None
