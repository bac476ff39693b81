"""``agenttrace doubts`` and ``agenttrace resolve`` (issue 22 item 5): the calls a killed run
left in doubt, listed with their arguments redacted, and a person's decision journaled."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from msgspec import to_builtins

from agenttrace.formats.session.files import read_session_file, snapshot_bytes
from agenttrace.formats.session.fullest import load_fullest
from agenttrace.formats.session.journal_union import journal_union
from agenttrace.formats.session.lease import lease_path
from agenttrace.model import journal as j
from agenttrace.model import journal_lines as jl

from .fork_server import Forks
from .test_cli import agenttrace, forked_agenttrace, ok, one_error_line
from .test_journal import hold_in_child
from .test_session_files import META

RUN = "0123456789abcdef"
FP = "sha256:" + "0" * 64


def session_with_a_doubt(directory: Path) -> Path:
    """A stream whose run charged a card (in doubt: no outcome) after a search (done)."""
    directory.mkdir(parents=True, exist_ok=True)
    stream = directory / "s1.events.jsonl"
    created = {"message_id": "msg_001", "event_type": "agent_created", "agent_id": "agent_001"}
    lines = [
        created,
        to_builtins(
            jl.intent_line(
                (RUN, "1.1", 1),
                agent_id="agent_001",
                name="search",
                effect="read",
                request_fingerprint=FP,
                arguments='{"q": "tea"}',
            )
        ),
        to_builtins(
            jl.done_line(
                (RUN, "1.1", 1), agent_id="agent_001", kind="tool", name="search", result='"tea"'
            )
        ),
        to_builtins(
            jl.intent_line(
                (RUN, "2.1", 1),
                agent_id="agent_001",
                name="charge",
                effect="effect",
                request_fingerprint=FP,
                arguments='{"amount": 5, "password": "hunter2-canary"}',
            )
        ),
    ]
    stream.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return stream


def test_doubts_lists_the_calls_in_doubt_with_their_arguments_redacted(tmp_path: Path) -> None:
    stream = session_with_a_doubt(tmp_path / "sessions")
    listed = ok(agenttrace(tmp_path, "doubts", str(stream)))
    assert listed.splitlines() == [
        f'2.1  charge (effect)  run {RUN}  arguments: {{"amount": 5, "password": "[REDACTED]"}}'
    ]
    (doubt,) = json.loads(
        ok(agenttrace(tmp_path, "doubts", "s1", "--json", "--sessions-dir", str(stream.parent)))
    )  # by id too
    assert (doubt["step"], doubt["tool"], doubt["effect"]) == ("2.1", "charge", "effect")
    assert "hunter2-canary" not in json.dumps(doubt)


def test_resolve_journals_a_decision_and_the_call_is_no_longer_in_doubt(
    tmp_path: Path, cli_forks: Forks
) -> None:
    stream = session_with_a_doubt(tmp_path / "sessions")
    result = tmp_path / "result.json"
    result.write_text('{"charge": "ch_1"}')
    said = ok(
        forked_agenttrace(
            cli_forks,
            tmp_path,
            "resolve",
            str(stream),
            "2.1",
            "--done",
            str(result),
            "--evidence",
            "seen in the dashboard",
        )
    )
    assert said == "2.1 (charge): done, journaled\n"
    journal = j.Journal(read_session_file(stream).journal)
    step = journal.step(RUN, "2.1")
    assert step is not None and step.outcome == "decided: done"
    assert (step.result, step.evidence) == ('{"charge": "ch_1"}', "seen in the dashboard")
    assert ok(forked_agenttrace(cli_forks, tmp_path, "doubts", str(stream))) == "no call in doubt\n"
    # Nothing is left at that label to decide, and the refusal says why.
    assert (
        one_error_line(
            forked_agenttrace(cli_forks, tmp_path, "resolve", str(stream), "2.1", "--retry")
        )
        == "the call at 2.1 was decided already (done): a decision is taken once"
    )
    assert (
        one_error_line(
            forked_agenttrace(cli_forks, tmp_path, "resolve", str(stream), "9.9", "--retry")
        )
        == "no call in doubt at 9.9"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give one of --done RESULT_FILE, --not-applied, --retry, --abandon"),
        (("--retry", "--abandon"), "give one of --done RESULT_FILE, --not-applied, --retry"),
        (("--done", "missing.json"), "missing.json: cannot read: No such file or directory"),
    ],
)
def test_resolve_takes_one_decision(
    tmp_path: Path, cli_forks: Forks, args: tuple[str, ...], message: str
) -> None:
    stream = session_with_a_doubt(tmp_path / "sessions")
    before = stream.read_bytes()
    assert message in one_error_line(
        forked_agenttrace(cli_forks, tmp_path, "resolve", str(stream), "2.1", *args)
    )
    assert stream.read_bytes() == before  # nothing journaled


def test_resolve_waits_for_no_one_while_a_resume_holds_the_session(
    tmp_path: Path, cli_forks: Forks
) -> None:
    stream = session_with_a_doubt(tmp_path / "sessions")
    holder = hold_in_child(lease_path(stream.parent, "s1"))
    try:
        error = one_error_line(
            forked_agenttrace(cli_forks, tmp_path, "resolve", str(stream), "2.1", "--retry")
        )
        assert error.startswith(
            f"s1.lease: the session is held by resume of the test (pid {holder.pid}"
        )
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    ok(forked_agenttrace(cli_forks, tmp_path, "resolve", str(stream), "2.1", "--not-applied"))


def test_a_decision_appended_to_a_stream_behind_its_session_file_is_kept(
    tmp_path: Path, cli_forks: Forks
) -> None:
    # The stream stopped at the search's intent (a full disk); the session file, written once
    # there was room, holds the whole journal: the search done, the charge in doubt.
    stream = session_with_a_doubt(tmp_path / "sessions")
    lines = stream.read_bytes().splitlines(keepends=True)
    event, journal = lines[0], [json.loads(line) for line in lines[1:]]
    snapshot = stream.with_name("s1.json.gz")
    snapshot.write_bytes(
        snapshot_bytes("s1", [], [event], {**META, "session_id": "s1"}, journal_lines=lines[1:])
    )
    stream.write_bytes(event + lines[1])
    assert ok(forked_agenttrace(cli_forks, tmp_path, "doubts", str(stream))).startswith(
        "2.1  charge (effect)"
    )
    ok(forked_agenttrace(cli_forks, tmp_path, "resolve", str(stream), "2.1", "--not-applied"))
    # The stream is still the shorter journal, the decision in it: both files are read.
    assert len(read_session_file(stream).journal) < len(journal)
    assert ok(forked_agenttrace(cli_forks, tmp_path, "doubts", str(stream))) == "no call in doubt\n"
    assert (
        ok(forked_agenttrace(cli_forks, tmp_path, "doubts", str(snapshot))) == "no call in doubt\n"
    )
    merged = load_fullest(stream).journal
    assert merged[:-1] == journal and merged[-1]["decision"] == "not_applied"
    step = j.Journal(merged).step(RUN, "2.1")
    assert step is not None and step.outcome == "decided: not_applied"


def test_the_journal_of_two_files_is_every_line_of_either_once() -> None:
    intent, done, decided = {"state": "intent"}, {"state": "done"}, {"decision": "retry"}
    replayed = {"state": "replayed"}
    assert journal_union([intent, done], [intent]) == [intent, done]  # one starts the other
    assert journal_union([intent, done], [intent, decided]) == [intent, done, decided]
    assert journal_union([intent, done], [done, intent]) == [intent, done]  # known by content
    # A line written twice (two resumes replayed the step) stands as often as in either file.
    assert journal_union([intent, replayed], [intent, replayed, replayed]) == [
        intent,
        replayed,
        replayed,
    ]
    assert journal_union([], [intent]) == [intent]


def test_a_decision_never_lands_on_a_torn_last_line(tmp_path: Path, cli_forks: Forks) -> None:
    # The process was killed in the middle of writing an event after the charge's intent.
    stream = session_with_a_doubt(tmp_path / "sessions")
    whole = stream.read_bytes()
    stream.write_bytes(whole + b'{"message_id": "msg_002", "event_type": "transcr')
    ok(forked_agenttrace(cli_forks, tmp_path, "resolve", str(stream), "2.1", "--abandon"))
    assert stream.read_bytes().startswith(whole)  # the torn bytes cut off, nothing else
    loaded = read_session_file(stream)  # every line whole: the stream still reads
    assert loaded.torn is None and loaded.journal[-1]["decision"] == "abandon"
    assert ok(forked_agenttrace(cli_forks, tmp_path, "doubts", str(stream))) == "no call in doubt\n"
