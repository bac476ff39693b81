"""``load_session`` starts or resumes in one call: a session that does not exist yet is started
with its root agent, where it will be written, so the same call resumes it next time; a file
that is not a session is an error, in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import agenttrace
from agenttrace.formats.session.files import snapshot_path, stream_path

from .conftest import Traced


class Rebuilt:
    """A user's agent as a factory rebuilds it from its record."""

    def __init__(self, record: agenttrace.AgentRecord) -> None:
        self.agent_id = record.agent_id
        self.transcript = record.messages()
        self.subagents: dict[str, Any] = {}

    @agenttrace.agent("Host")
    def hear(self, text: str) -> None:
        agenttrace.current_session().log_transcript_entry(
            self.agent_id, {"role": "user", "content": text}
        )


def one_line(caught: pytest.ExceptionInfo[agenttrace.SessionFileError]) -> str:
    message = str(caught.value)
    assert message and "\n" not in message, repr(message)
    return message


def in_a_new_process() -> None:
    """What a later process starts with: no current session (the files stay)."""
    agenttrace.force_flush()
    agenttrace.use_session(None)


@pytest.mark.parametrize("written", ["path", "stream path", "id"])
def test_a_missing_session_is_started_then_resumed(traced: Traced, written: str) -> None:
    sessions = traced.handle.settings.sessions_dir
    reference: str | Path = {
        "path": sessions / "chat.json.gz",
        "stream path": sessions / "chat.events.jsonl",
        "id": "chat",
    }[written]
    built: list[agenttrace.AgentRecord] = []

    def factory(record: agenttrace.AgentRecord, session: agenttrace.Session) -> Rebuilt:
        built.append(record)
        return Rebuilt(record)

    root, session = agenttrace.load_session(reference, factory)
    assert session is agenttrace.current_session() and session.session_id == "chat"
    assert session.resumed_from is None
    # A fresh session with its root agent, and nothing else.
    assert [(e["event_type"], e["agent_id"]) for e in session.events] == [
        ("agent_created", "agent_001")
    ]
    assert [r.agent_id for r in built] == ["agent_001"] and built[0].transcript == []
    assert isinstance(root, Rebuilt) and session.root() is session.agents["agent_001"]
    root.hear("Hello.")  # the root's run: no second agent
    assert list(session.agents) == ["agent_001"]

    in_a_new_process()
    assert stream_path(sessions, "chat").is_file() and snapshot_path(sessions, "chat").is_file()
    root, again = agenttrace.load_session(reference, factory)
    assert again is not session and again.session_id == "chat"
    assert again.resumed_from is not None
    assert [r.agent_id for r in built] == ["agent_001", "agent_001"]
    assert root.transcript == [{"role": "user", "content": "Hello."}]
    assert again.allocate_agent_id() == "agent_002"  # no id handed out twice


def test_without_a_factory_the_new_root_is_its_record(traced: Traced) -> None:
    root, session = agenttrace.load_session("solo")
    assert isinstance(root, agenttrace.AgentRecord)
    assert root.agent_id == "agent_001" and root.parent_id is None and root.transcript == []
    assert session.root() is root


def test_a_session_file_missing_beside_its_stream_resumes_the_stream(traced: Traced) -> None:
    sessions = traced.handle.settings.sessions_dir
    started = agenttrace.new_session("kept")
    started.log_agent_created(started.allocate_agent_id(), name="Root")
    in_a_new_process()
    snapshot_path(sessions, "kept").unlink(missing_ok=True)
    root, session = agenttrace.load_session(snapshot_path(sessions, "kept"))
    assert session.resumed_from == str(stream_path(sessions, "kept"))
    assert root.name == "Root" and session.allocate_agent_id() == "agent_002"


def test_a_file_that_is_not_a_session_is_an_error_in_one_line(
    traced: Traced, tmp_path: Path
) -> None:
    sessions = traced.handle.settings.sessions_dir
    sessions.mkdir(parents=True, exist_ok=True)
    for path in (sessions / "notes.json.gz", tmp_path / "notes.events.jsonl"):
        path.write_text("not a session\n")
        with pytest.raises(agenttrace.SessionFileError) as caught:
            agenttrace.load_session(path)
        assert one_line(caught).startswith(f"{path}: ")
        assert path.read_text() == "not a session\n"  # left as it was
    assert sorted(p.name for p in sessions.iterdir()) == ["notes.json.gz"]


@pytest.mark.parametrize(
    "name", ["elsewhere/chat.jsonl", "chat.txt", "sessions/chat.txt", "sessions/.json.gz"]
)
def test_a_missing_file_where_no_session_can_start_is_an_error(
    traced: Traced, tmp_path: Path, name: str
) -> None:
    """Only a name a session's files can have starts a session: its two files find each other
    by their names (``<id>.events.jsonl`` beside ``<id>.json.gz``), and the next call by the
    same path must find what this one wrote."""
    path = tmp_path / name
    with pytest.raises(agenttrace.SessionFileError) as caught:
        agenttrace.load_session(path)
    message = one_line(caught)
    assert message.startswith(f"{path}: no such file, and no session can start there"), message
    assert not (tmp_path / "sessions").exists() and not (tmp_path / "elsewhere").exists()


def rebuild(record: agenttrace.AgentRecord, session: agenttrace.Session) -> Rebuilt:
    return Rebuilt(record)


@pytest.mark.parametrize(
    "name", ["chat.events.jsonl", "chat.json.gz", "runs/2026-12-07/chat.events.jsonl"]
)
def test_a_session_named_by_a_path_is_written_there_and_resumed_from_it(
    traced: Traced, tmp_path: Path, name: str
) -> None:
    """Seed 001: ``load_session(session_file)`` starts the session where the program names it
    (its stream at the path, its session file beside it; missing directories created), and each
    later call with the same path resumes all of it, every run's events there, none in the
    sessions directory."""
    path = tmp_path / "project" / name
    home = path.parent
    sessions = traced.handle.settings.sessions_dir

    root, session = agenttrace.load_session(path, rebuild)
    assert session.session_id == "chat" and session.resumed_from is None
    root.hear("Hello.")
    in_a_new_process()
    stream, snapshot = stream_path(home, "chat"), snapshot_path(home, "chat")
    assert stream.is_file() and snapshot.is_file()
    assert not stream_path(sessions, "chat").exists()
    assert not snapshot_path(sessions, "chat").exists()

    root, again = agenttrace.load_session(path, rebuild)
    assert again.resumed_from is not None and Path(again.resumed_from).parent == home
    assert root.transcript == [{"role": "user", "content": "Hello."}]
    assert again.allocate_agent_id() == "agent_002"  # no id handed out twice
    root.hear("Again.")
    in_a_new_process()

    root, third = agenttrace.load_session(path, rebuild)
    assert root.transcript == [
        {"role": "user", "content": "Hello."},
        {"role": "user", "content": "Again."},
    ]
    assert [e["message_id"] for e in third.events] == ["msg_001", "msg_002", "msg_003"]
    assert not stream_path(sessions, "chat").exists()
    assert sorted(p.name for p in home.iterdir() if not p.name.endswith(".lease")) == [
        "chat.events.jsonl",
        "chat.json.gz",
    ]


def test_a_directory_that_cannot_be_made_for_a_named_session_is_an_error(
    traced: Traced, tmp_path: Path
) -> None:
    """A file where the session's directory would be: one line naming it, at the call."""
    (tmp_path / "runs").write_text("a file, not a directory\n")
    path = tmp_path / "runs" / "day" / "chat.events.jsonl"
    with pytest.raises(agenttrace.SessionFileError) as caught:
        agenttrace.load_session(path)
    message = one_line(caught)
    assert message.startswith(f"{path}: cannot create its directory {path.parent}: "), message
    assert (tmp_path / "runs").read_text() == "a file, not a directory\n"


def test_an_id_that_is_no_plain_name_is_refused(traced: Traced) -> None:
    with pytest.raises(agenttrace.SessionFileError) as caught:
        agenttrace.load_session("-rf")
    assert "not a session id" in one_line(caught)


@pytest.mark.parametrize("name", ["chat.events.jsonl", "chat.json.gz"])
def test_resume_of_a_path_goes_on_writing_beside_it(
    traced: Traced, tmp_path: Path, name: str
) -> None:
    """``resume(path)`` writes where it read, as ``load_session(path)`` and ``agenttrace resume
    FILE`` do: the next resume of the same path finds every run, and the sessions directory is
    left as it was (it held the session's first files, copied away)."""
    sessions = traced.handle.settings.sessions_dir
    # The first object stays alive meanwhile: its stream stays open in this process.
    root, first = agenttrace.load_session("chat", rebuild)
    root.hear("Hello.")
    in_a_new_process()
    copied = tmp_path / "copied"
    copied.mkdir()
    for original in (stream_path(sessions, "chat"), snapshot_path(sessions, "chat")):
        (copied / original.name).write_bytes(original.read_bytes())
    left = {p.name: p.read_bytes() for p in sessions.iterdir() if not p.name.endswith(".lease")}

    resumed = agenttrace.resume(copied / name)
    assert resumed.session_id == "chat" and Path(resumed.resumed_from or "").parent == copied
    resumed.log_transcript_entry("agent_001", {"role": "user", "content": "Again."})
    in_a_new_process()

    again = agenttrace.resume(copied / name)
    assert again.agents["agent_001"].messages() == [
        {"role": "user", "content": "Hello."},
        {"role": "user", "content": "Again."},
    ]
    assert [e["message_id"] for e in again.events] == ["msg_001", "msg_002", "msg_003"]
    now = {p.name: p.read_bytes() for p in sessions.iterdir() if not p.name.endswith(".lease")}
    assert now == left
    assert first.session_id == "chat" and first is not again
