"""Nothing is written outside the sessions directory, whatever a file or a command line says.

A session id names files, so every id that comes from outside (a session file's ``session_id``,
its ``meta.session_id``, a stream's file name, a SESSION reference, ``new_session``'s argument)
is checked before it becomes a path; and a name in the sessions directory that is a symlink out
of it is never written through. Each case snapshots the filesystem around the sessions directory
before and after, and compares.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

import agenttrace
from agenttrace import SessionFileError
from agenttrace.formats.session.files import (
    check_session_files,
    read_session_file,
    snapshot_path,
    stream_path,
)

from .conftest import Traced
from .test_session_files import EXAMPLE_1, jsonl

ESCAPES = [
    "../escaped",
    "../../escaped",
    "../../../escaped/deeper/x",  # once made the directories on the way
    "..",
    ".",
    "a/b",
    "a/../../escaped",
    "/abs-escaped",  # at the filesystem's root: checked there, not in the snapshot
    "..\\escaped",  # Windows' separator
    "escaped\n",  # "$" in a regular expression matches before a final newline
    "x\x00y",
    "x" * 129,
    "x" * 5000,  # longer than any file name may be
    "a\u2215b",  # DIVISION SLASH
    "a\uff0fb",  # FULLWIDTH SOLIDUS
    "a\u2044b",  # FRACTION SLASH
    "\u2025escaped",  # TWO DOT LEADER
    "~/escaped",
    "-rf",
    " x",
    "",  # no id at all is no escape: a fresh id is made (checked separately)
]
"""Ids that must never name a file (the empty one aside: it means "make one")."""

REFUSED = [e for e in ESCAPES if e]


def short(value: object) -> str:
    """A test id: the repr, long ones cut."""
    text = repr(value)
    return text if len(text) < 40 else f"{text[:20]}...({len(text)} chars)"


def state(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every path under ``root`` (links not followed): kind, and content or link target."""
    found: dict[str, tuple[Any, ...]] = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory) / name
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                found[str(path)] = ("link", os.readlink(path))
            elif stat.S_ISREG(mode):
                found[str(path)] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
            else:
                found[str(path)] = ("other", stat.S_IFMT(mode))
    return found


def at_root(session_id: str) -> list[Path]:
    """Where an absolute id would have put the session's files."""
    if not session_id.startswith("/") or "\x00" in session_id:
        return []
    return [Path(session_id + ".events.jsonl"), Path(session_id + ".json.gz")]


class Watch:
    """The filesystem around a sessions directory: ``changed()`` lists what changed outside
    it, and anything in it that is not a regular file directly in it."""

    def __init__(self, root: Path, sessions: Path, session_id: str = "") -> None:
        self.root, self.sessions = root, sessions
        self.absolute = at_root(session_id)
        self.before = state(root)
        self.absolute_before = [p.exists() for p in self.absolute]

    def changed(self) -> list[str]:
        after = state(self.root)
        changes = [
            path
            for path in sorted(set(self.before) | set(after))
            if self.before.get(path) != after.get(path)
        ]
        bad = [
            path
            for path in changes
            if Path(path).parent != self.sessions or after.get(path, ("gone",))[0] != "file"
        ]
        if [p.exists() for p in self.absolute] != self.absolute_before:
            bad += [str(p) for p in self.absolute]
        return bad


@pytest.fixture
def sessions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """agenttrace recording into tmp_path/a/b/sessions (three levels deep, so every ``..``
    escape lands inside tmp_path, where the snapshot sees it); the working directory beside."""
    directory = tmp_path / "a" / "b" / "sessions"
    directory.mkdir(parents=True)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    agenttrace.use_session(None)
    provider = TracerProvider()
    handle = agenttrace.init(
        tracer_provider=provider,
        console_stream=io.StringIO(),
        sessions_dir=directory,
        billing_file=directory / "accounting.jsonl",
        instrument_litellm=False,
    )
    try:
        yield directory
    finally:
        handle.shutdown()
        provider.shutdown()


def snapshot_bytes_with(**payload: Any) -> bytes:
    document: dict[str, Any] = {
        "format": "agenttrace.session",
        "version": 1,
        "runs": [],
        "meta": {"createdAt": 1795393954000, "updatedAt": 1795393955000},
        "events": EXAMPLE_1,
    }
    meta = payload.pop("meta", {})
    document.update(payload)
    document["meta"].update(meta)
    return gzip.compress(json.dumps(document).encode())


def planted(sessions: Path, field: str, session_id: str) -> Path:
    """A session file in ``sessions`` whose ``field`` holds ``session_id``."""
    path = sessions / "planted.json.gz"
    if field == "session_id":
        path.write_bytes(
            snapshot_bytes_with(session_id=session_id, meta={"session_id": session_id})
        )
    else:  # meta.session_id, the session_id field absent
        path.write_bytes(snapshot_bytes_with(meta={"session_id": session_id}))
    return path


def one_line(caught: pytest.ExceptionInfo[SessionFileError]) -> str:
    message = str(caught.value)
    assert message and "\n" not in message and len(message) < 1000, repr(message)
    return message


def log_one_more() -> None:
    """What a run after a resume does: log an event to the current session, flush it out."""
    session = agenttrace.current_session()
    session.log_transcript_entry("agent_root", {"role": "user", "content": "one more"})
    agenttrace.force_flush()


# --- ids inside files -----------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["session_id", "meta.session_id"])
@pytest.mark.parametrize("session_id", REFUSED, ids=short)
def test_resume_refuses_a_planted_session_id(
    tmp_path: Path, sessions: Path, field: str, session_id: str
) -> None:
    path = planted(sessions, field, session_id)
    watch = Watch(tmp_path, sessions, session_id)
    for load in (
        lambda: agenttrace.resume(path),
        lambda: agenttrace.load_session(path),
        lambda: agenttrace.Session.load(path),
    ):
        with pytest.raises(SessionFileError) as caught:
            load()
        message = one_line(caught)
        # Refused by the schema's pattern for ids, or by the check before an id names a file.
        assert message.startswith(f"{path}: "), message
        assert "session id" in message or "session_id" in message, message
    log_one_more()  # into a fresh session, in the fixture's own sessions directory
    assert watch.changed() == []


@pytest.mark.parametrize(
    "name",
    ["..", "x..y", "a\u2215b", "a\uff0fb", "escaped\n", " x", "-rf", "x" * 200],
    ids=short,
)
def test_resume_refuses_a_stream_named_with_no_session_id(
    tmp_path: Path, sessions: Path, name: str
) -> None:
    """A stream's session id is its file name's stem: one that is not a plain name is refused
    (the name itself cannot hold a separator, but the id must be checked all the same)."""
    path = sessions / f"{name}.events.jsonl"
    path.write_text(jsonl(EXAMPLE_1))
    watch = Watch(tmp_path, sessions)
    with pytest.raises(SessionFileError) as caught:
        agenttrace.resume(path)
    assert "its session id is refused: not a session id" in one_line(caught)
    log_one_more()
    assert watch.changed() == []


def test_a_plain_planted_id_is_resumed_inside_the_directory(tmp_path: Path, sessions: Path) -> None:
    """The counterpart: a file whose session_id is a plain name resumes, and the next event
    goes to that id's files in the sessions directory, nowhere else."""
    path = planted(sessions, "session_id", "plain-id")
    watch = Watch(tmp_path, sessions)
    session = agenttrace.resume(path)
    assert session.session_id == "plain-id"
    log_one_more()
    assert watch.changed() == []
    assert read_session_file(stream_path(sessions, "plain-id")).events[-1]["content"] == "one more"


# --- ids given by code and on the command line -------------------------------------------------


@pytest.mark.parametrize("session_id", REFUSED, ids=short)
def test_new_session_refuses_an_id_that_is_not_a_plain_name(
    tmp_path: Path, sessions: Path, session_id: str
) -> None:
    watch = Watch(tmp_path, sessions, session_id)
    with pytest.raises(SessionFileError) as caught:
        agenttrace.new_session(session_id)
    assert one_line(caught).startswith("not a session id: ")
    with pytest.raises(SessionFileError):
        stream_path(sessions, session_id)
    with pytest.raises(SessionFileError):
        snapshot_path(sessions, session_id)
    log_one_more()
    assert watch.changed() == []


def test_an_empty_id_makes_a_fresh_one() -> None:
    assert len(agenttrace.Session("").session_id) == 16


@pytest.mark.parametrize("reference", REFUSED, ids=short)
def test_resume_refuses_a_reference_that_leaves_the_directory(
    tmp_path: Path, sessions: Path, reference: str
) -> None:
    """A SESSION reference that is not an existing file is an id; each escape of ESCAPES has a
    real session waiting where it would lead (when a file can be named so)."""
    for target in (tmp_path / "a" / "b" / "escaped", tmp_path / "a" / "escaped"):
        target.with_name("escaped.events.jsonl").write_text(jsonl(EXAMPLE_1))
    watch = Watch(tmp_path, sessions, reference)
    with pytest.raises(SessionFileError) as caught:
        agenttrace.resume(reference, sessions_dir=sessions)
    one_line(caught)
    log_one_more()
    assert watch.changed() == []


# --- symlinks planted in the sessions directory -------------------------------------------------


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file outside the sessions directory that a planted link points at; it has a torn last
    line, so a stream repair that followed the link would cut it."""
    directory = tmp_path / "outside"
    directory.mkdir()
    target = directory / "precious.txt"
    target.write_bytes(b"line one\nline two, no newline")
    return target


@pytest.mark.parametrize("which", ["stream", "snapshot"])
def test_resume_refuses_a_session_whose_file_name_links_out(
    tmp_path: Path, sessions: Path, outside: Path, which: str
) -> None:
    path = planted(sessions, "session_id", "victim")  # resumed, its files are victim.*
    link = (stream_path if which == "stream" else snapshot_path)(sessions, "victim")
    link.symlink_to(outside)
    watch = Watch(tmp_path, sessions)
    with pytest.raises(SessionFileError) as caught:
        agenttrace.resume(path)
    assert one_line(caught) == (
        f"{link}: is a symlink that leads out of {sessions}; not writing the session there"
    )
    log_one_more()
    assert watch.changed() == []


def test_a_link_out_is_never_written_through(
    traced: Traced, tmp_path: Path, outside: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Links planted under both file names of a session that is recording: the stream is not
    opened through its link (one warning, the agent runs on), the session file replaces its
    link with a file of its own, and the file outside is untouched."""
    sessions = tmp_path / "sessions"
    sessions.mkdir(exist_ok=True)
    stream, snapshot = stream_path(sessions, "victim"), snapshot_path(sessions, "victim")
    stream.symlink_to(outside)
    snapshot.symlink_to(outside)
    watch = Watch(tmp_path, sessions)
    with caplog.at_level(logging.WARNING, logger="agenttrace"):
        session = agenttrace.new_session("victim")
        session.log_agent_created("agent_001", name="Root")
        log_one_more()
    assert [r.getMessage() for r in caplog.records] == [
        f"agenttrace: cannot write {stream} (is a symlink that leads out of {sessions}): 1 event "
        "of session victim waits in memory and will be written as soon as writing works again. "
        "The agent keeps running."
    ]
    assert outside.read_bytes() == b"line one\nline two, no newline"
    assert stream.is_symlink() and not snapshot.is_symlink()
    assert [e["message_id"] for e in read_session_file(snapshot).events] == ["msg_001", "msg_002"]
    assert [p for p in watch.changed() if p != str(snapshot)] == []


def test_a_link_that_stays_inside_is_followed(traced: Traced, tmp_path: Path) -> None:
    """Only links out are refused: a stream name linked to another file of the directory is
    written through, as before."""
    sessions = tmp_path / "sessions"
    sessions.mkdir(exist_ok=True)
    real = sessions / "real.events.jsonl"
    stream_path(sessions, "linked").symlink_to(real.name)
    check_session_files(sessions, "linked")
    session = agenttrace.new_session("linked")
    session.log_agent_created("agent_001", name="Root")
    agenttrace.force_flush()
    assert [e["message_id"] for e in read_session_file(real).events] == ["msg_001"]


@pytest.mark.parametrize("kind", ["fifo", "directory", "loop"])
def test_a_stream_name_that_is_not_a_regular_file_is_refused(
    traced: Traced, tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A FIFO under the stream's name once blocked the agent forever on its first event."""
    sessions = tmp_path / "sessions"
    sessions.mkdir(exist_ok=True)
    stream = stream_path(sessions, "odd")
    if kind == "fifo":
        os.mkfifo(stream)
        reason = "is a FIFO, not a regular file"
    elif kind == "directory":
        stream.mkdir()
        reason = "is a directory, not a regular file"
    else:
        stream.symlink_to(stream.name)
        reason = "is a symlink loop"
    with pytest.raises(SessionFileError, match=f"^{stream}: {reason}; not writing the session"):
        check_session_files(sessions, "odd")
    with caplog.at_level(logging.WARNING, logger="agenttrace"):
        session = agenttrace.new_session("odd")
        session.log_agent_created("agent_001", name="Root")
        agenttrace.force_flush()
    assert f"cannot write {stream} ({reason})" in caplog.text
    assert [e["message_id"] for e in read_session_file(snapshot_path(sessions, "odd")).events] == [
        "msg_001"
    ]
