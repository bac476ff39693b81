"""The session file holds the step journal too (issue 22 item 1; docs/session-file.md,
docs/journal.md): a session whose event stream is gone (only its ``.json.gz`` kept, sent or
downloaded) is resumed and re-entered as from the stream, and ``agenttrace doubts`` reads its
in-doubt calls from it. The processes are real: the shop agent of ``tests/journal_child.py``
killed with SIGKILL."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from agenttrace.formats.session.files import read_session_file, snapshot_bytes
from agenttrace.formats.session.fullest import load_fullest
from agenttrace.formats.session.schema_file import published_schema

from .helpers import ROOT
from .payment_server import PaymentServer
from .test_cli import agenttrace as run_cli
from .test_cli import ok
from .test_reentry import billed, child, killed_then_resumed

RELEASES = ROOT / "tests" / "data" / "releases"


def only_file(sessions: Path, suffix: str) -> Path:
    (found,) = sessions.glob(f"*{suffix}")
    return found


def document(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(gzip.decompress(path.read_bytes()))
    return loaded


def drop_stream(sessions: Path) -> None:
    only_file(sessions, ".events.jsonl").unlink()


@pytest.mark.e2e
def test_a_session_file_alone_is_re_entered_as_the_stream_would_be(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    report, payments = killed_then_resumed(
        tmp_path, "effect", "after_done", between=lambda: drop_stream(sessions)
    )
    # Both calls were done before the kill: answered from the session file's journal.
    assert report == {
        "answer": "ch_1",
        "bodies": [],
        "replayed": ["execute_tool balance", "execute_tool charge"],
    }
    assert len(payments.charges) == 1  # no duplicate charge
    assert billed(tmp_path, "charge") == 1  # and nothing billed again
    # The new session file keeps the journal it was resumed from, then its own lines.
    lines = document(only_file(sessions, ".json.gz"))["journal"]
    states = [(line.get("kind"), line.get("name"), line.get("state")) for line in lines]
    assert states[:3] == [
        ("run", "Shop", "intent"),
        ("tool", "balance", "intent"),
        ("tool", "balance", "done"),
    ]
    replayed = [line["name"] for line in lines if line.get("state") == "replayed"]
    assert replayed == ["balance", "charge"]
    # The stream is written again from the session file before the first line is appended: it
    # holds the whole journal too, and every event, from the first.
    stream = read_session_file(only_file(sessions, ".events.jsonl"))
    assert stream.journal == lines
    assert stream.events[0]["message_id"] == "msg_001"
    jsonschema.Draft202012Validator(published_schema()).validate(
        document(only_file(sessions, ".json.gz"))
    )


@pytest.mark.e2e
def test_doubts_lists_the_call_in_doubt_from_a_session_file_alone(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    payments = PaymentServer().start()
    try:
        assert child(tmp_path, payments, "effect", "inside").returncode == -9
        # A resume that stops at the call in doubt writes a session file holding the whole
        # journal (what it resumed from, and its own lines) ...
        stopped = child(tmp_path, payments, "effect", "inside", "resume")
        assert stopped.returncode == 0, stopped.stderr
        assert json.loads(stopped.stdout.splitlines()[-1])["in_doubt"] == [["1.2", "charge"]]
    finally:
        payments.stop()
    drop_stream(sessions)  # ... which alone says which call may have happened
    snapshot = only_file(sessions, ".json.gz")
    shown = ok(run_cli(tmp_path, "doubts", str(snapshot)))
    assert "1.2  charge (effect)" in shown and '{"amount":5}' in shown
    # Resolved there too: the stream is written again from the session file, the decision last,
    # and the next resume applies it (the body is not called).
    result = tmp_path / "result.json"
    result.write_text('"ch_seen_in_dashboard"')
    ok(run_cli(tmp_path, "resolve", str(snapshot), "1.2", "--done", str(result)))
    assert "no call in doubt" in ok(run_cli(tmp_path, "doubts", str(snapshot)))
    payments = PaymentServer().start()
    try:
        resumed = child(tmp_path, payments, "effect", "inside", "resume")
        assert resumed.returncode == 0, resumed.stderr
    finally:
        payments.stop()
    report = json.loads(resumed.stdout.splitlines()[-1])
    assert report["answer"] == "ch_seen_in_dashboard" and report["bodies"] == []
    assert payments.charges == []  # a new server: nothing was charged by this resume


def journal_line(state: str, step: str = "1.1", **more: Any) -> dict[str, Any]:
    return {
        "event_type": "step",
        "run": "0123456789abcdef",
        "step": step,
        "attempt": 1,
        "agent_id": "agent_001",
        "kind": "tool",
        "name": "charge",
        "state": state,
        **more,
    }


def test_a_session_file_reads_back_its_journal_and_is_validated(tmp_path: Path) -> None:
    release = next((RELEASES / "previous-619d4d5" / "cafe").glob("*.json.gz"))
    old = document(release)
    lines = [
        journal_line("intent", effect="effect", arguments='{"amount": 5}'),
        journal_line("done", result='"ch_1"'),
        {
            "event_type": "step_decision",
            "run": "0123456789abcdef",
            "step": "1.2",
            "attempt": 1,
            "decision": "abandon",
        },
    ]
    path = tmp_path / "s.json.gz"
    path.write_bytes(
        snapshot_bytes(
            old["session_id"],
            old["runs"],
            [json.dumps(event).encode() for event in old["events"]],
            old["meta"],
            journal_lines=[json.dumps(line).encode() for line in lines],
        )
    )
    assert read_session_file(path).journal == lines
    jsonschema.Draft202012Validator(published_schema()).validate(document(path))
    # A journal line the format does not know is refused with where and what.
    wrong = [journal_line("exploded")]
    path.write_bytes(
        snapshot_bytes(
            old["session_id"],
            old["runs"],
            [json.dumps(event).encode() for event in old["events"]],
            old["meta"],
            journal_lines=[json.dumps(line).encode() for line in wrong],
        )
    )
    with pytest.raises(Exception, match=r"\$\.journal\[0\]\.state"):
        read_session_file(path)


def test_a_session_file_of_an_earlier_release_reads_with_no_journal() -> None:
    for release in RELEASES.iterdir():
        if release.is_dir():
            for path in release.rglob("*.json.gz"):
                loaded = read_session_file(path)
                assert loaded.journal == [] and "journal" not in document(path), path


def test_the_fuller_journal_of_the_two_files_is_taken(tmp_path: Path) -> None:
    release = next((RELEASES / "previous-619d4d5" / "cafe").glob("*.json.gz"))
    old = document(release)
    events = [json.dumps(event).encode() for event in old["events"]]
    intent = journal_line("intent", effect="effect", arguments="{}")
    done = journal_line("done", result='"ch_1"')
    snapshot = tmp_path / f"{old['session_id']}.json.gz"
    stream = tmp_path / f"{old['session_id']}.events.jsonl"

    def pair(in_file: list[dict[str, Any]], in_stream: list[dict[str, Any]]) -> None:
        snapshot.write_bytes(
            snapshot_bytes(
                old["session_id"],
                old["runs"],
                events,
                old["meta"],
                journal_lines=[json.dumps(line).encode() for line in in_file],
            )
        )
        journaled = [json.dumps(line).encode() for line in in_stream]
        stream.write_bytes(b"".join(line + b"\n" for line in events + journaled))

    # The stream cut short (a full disk): the session file's journal says the call was done.
    pair([intent, done], [intent])
    assert load_fullest(snapshot).journal == [intent, done]
    assert load_fullest(stream).journal == [intent, done]
    # The stream ahead of the last snapshot (the usual case): the stream's.
    pair([intent], [intent, done])
    assert load_fullest(stream).journal == [intent, done]


def test_a_stream_scan_counts_no_journal_line_as_an_event(tmp_path: Path) -> None:
    """Repairing a resumed session's stream (``formats.session.repair.repair_stream``) counts
    its events: a journal line counted as one would cut real events off a stream a kill left
    cut short."""
    from agenttrace.formats.session.repair import _scan_lines
    from agenttrace.model.journal_lines import decode_line, journal_bytes

    event = b'{"event_type": "transcript_entry", "message_id": "m"}\n'
    typed = decode_line(journal_line("intent", effect="effect"))
    assert typed is not None
    step = journal_bytes(typed)
    decision = json.dumps({"event_type": "step_decision", "run": "r"}).encode() + b"\n"
    data = event + step + event + decision + step + event
    path = tmp_path / "s.events.jsonl"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        events, size, keep, second_end = _scan_lines(fd, 2)
    finally:
        os.close(fd)
    assert (events, size, keep) == (3, len(data), len(data))
    # Event 2 ends with the journal lines right after it, which belong to it.
    assert second_end == len(event + step + event + decision + step)
