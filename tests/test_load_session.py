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
    "name", ["elsewhere/chat.json.gz", "chat.json.gz", "sessions/chat.txt", "sessions/.json.gz"]
)
def test_a_missing_file_where_no_session_can_start_is_an_error(
    traced: Traced, tmp_path: Path, name: str
) -> None:
    """Only a name a session's files can have, in the sessions directory, starts a session
    there: anywhere else the next call could not find it, and would start another."""
    path = tmp_path / name
    with pytest.raises(agenttrace.SessionFileError) as caught:
        agenttrace.load_session(path)
    message = one_line(caught)
    assert message.startswith(f"{path}: no such file, and no session can start there"), message
    assert not (tmp_path / "sessions").exists()


def test_an_id_that_is_no_plain_name_is_refused(traced: Traced) -> None:
    with pytest.raises(agenttrace.SessionFileError) as caught:
        agenttrace.load_session("-rf")
    assert "not a session id" in one_line(caught)
