"""The step journal's format (docs/journal.md): fingerprints, idempotency keys, the lines and
how they read back; and the lease that lets one process at a time resume a session."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from msgspec import to_builtins

import agenttrace
from agenttrace.formats.session.files import SessionFileError, read_session_file
from agenttrace.formats.session.lease import LeaseHeld, acquire, lease_path, read_holder
from agenttrace.model import journal as j
from agenttrace.model import journal_lines as jl

from .helpers import ROOT
from .payment_server import PaymentServer

KEY = ("run-1", "2.1", 1)


def test_a_fingerprint_is_the_question_not_where_or_when_it_was_asked() -> None:
    request = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "charge 5", "id": "m1"}],
        "temperature": 0,
        "api_key": "sk-secret",
        "metadata": {"run": 1},
    }
    same = {
        "temperature": 0,
        "messages": [{"content": "charge 5", "role": "user", "id": "m2", "timestamp": 5}],
        "model": "gpt-4o-mini",
        "api_base": "http://elsewhere",
    }
    assert j.fingerprint(j.llm_request(request)) == j.fingerprint(j.llm_request(same))
    changed = {**same, "messages": [{"role": "user", "content": "charge 6"}]}
    assert j.fingerprint(j.llm_request(changed)) != j.fingerprint(j.llm_request(same))
    assert j.fingerprint(j.tool_request("charge", {"amount": 5})).startswith("sha256:")
    assert j.fingerprint(j.tool_request("charge", {"amount": 5})) != j.fingerprint(
        j.tool_request("charge", {"amount": 6})
    )


def test_an_idempotency_key_names_one_logical_call() -> None:
    key = j.idempotency_key("s1", "run-1", "2.1", "charge")
    assert key == j.idempotency_key("s1", "run-1", "2.1", "charge")  # every attempt, every resume
    assert key.startswith("at-") and len(key) == 35
    others = {
        j.idempotency_key("s2", "run-1", "2.1", "charge"),
        j.idempotency_key("s1", "run-2", "2.1", "charge"),
        j.idempotency_key("s1", "run-1", "2.2", "charge"),
        j.idempotency_key("s1", "run-1", "2.1", "refund"),
    }
    assert key not in others and len(others) == 4


def test_the_journal_says_what_became_of_each_step() -> None:
    charge = to_builtins(
        jl.intent_line(
            KEY,
            agent_id="agent_001",
            name="charge",
            effect="effect",
            request_fingerprint=j.fingerprint(j.tool_request("charge", {"amount": 5})),
            arguments='{"amount": 5}',
            call_id="call_1",
        )
    )
    search = to_builtins(
        jl.intent_line(
            ("run-1", "2.2", 1),
            agent_id="agent_001",
            name="search",
            effect="read",
            request_fingerprint=j.fingerprint(j.tool_request("search", {})),
        )
    )
    journal = j.Journal(
        [
            charge,
            search,
            to_builtins(
                jl.done_line(
                    ("run-1", "2.2", 1),
                    agent_id="agent_001",
                    kind="tool",
                    name="search",
                    result='"tea"',
                )
            ),
            to_builtins(
                jl.failed_line(
                    ("run-1", "3.1", 1),
                    agent_id="agent_001",
                    kind="llm",
                    name="gpt",
                    error="Timeout",
                    applied="no",
                )
            ),
            {"event_type": "transcript_entry", "message_id": "msg_001"},  # not the journal's
        ]
    )
    (doubt,) = journal.in_doubt()
    assert doubt.key == KEY and doubt.name == "charge" and doubt.call_id == "call_1"
    assert doubt.outcome == "in doubt" and doubt.arguments == '{"amount": 5}'
    assert journal.step("run-1", "2.2").outcome == "done"  # type: ignore[union-attr]
    assert journal.step("run-1", "2.2").result == '"tea"'  # type: ignore[union-attr]
    failed = journal.step("run-1", "3.1")
    assert failed is not None and (failed.outcome, failed.applied) == ("failed", "no")
    # A user's decision settles it.
    journal.add(
        to_builtins(
            jl.decision_line(KEY, "done", result='{"charge": "ch_1"}', evidence="dashboard")
        )
    )
    assert journal.in_doubt() == []
    settled = journal.step(*KEY)
    assert settled is not None and settled.outcome == "decided: done"
    assert (settled.result, settled.evidence) == ('{"charge": "ch_1"}', "dashboard")


def write_stream(path: Path, lines: list[dict[str, Any]]) -> Path:
    created = {"message_id": "msg_001", "event_type": "agent_created", "agent_id": "agent_001"}
    path.write_text("".join(json.dumps(line) + "\n" for line in [created, *lines]))
    return path


def test_journal_lines_are_read_beside_the_events(tmp_path: Path) -> None:
    fp = j.fingerprint(j.tool_request("charge", {"amount": 5}))
    lines = [
        to_builtins(
            jl.intent_line(
                KEY, agent_id="agent_001", name="charge", effect="effect", request_fingerprint=fp
            )
        ),
        to_builtins(jl.decision_line(KEY, "not_applied")),
    ]
    loaded = read_session_file(write_stream(tmp_path / "s.events.jsonl", lines))
    assert [e["event_type"] for e in loaded.events] == ["agent_created"]
    assert [line["event_type"] for line in loaded.journal] == ["step", "step_decision"]
    assert agenttrace.Session.load(tmp_path / "s.events.jsonl").message_counter == 1


@pytest.mark.parametrize(
    "bad",
    [
        {"state": "maybe"},
        {"attempt": 0},
        {"effect": "dangerous"},
        {"fingerprint": "md5:abc"},
        {"step": "not a label"},
        {"applied": "perhaps"},
    ],
)
def test_a_malformed_journal_line_is_refused(tmp_path: Path, bad: dict[str, Any]) -> None:
    line = {
        **to_builtins(
            jl.intent_line(
                KEY,
                agent_id="agent_001",
                name="charge",
                effect="effect",
                request_fingerprint="sha256:" + "0" * 64,
            )
        ),
        **bad,
    }
    with pytest.raises(SessionFileError, match="line 2 is not a step-journal line: "):
        read_session_file(write_stream(tmp_path / "s.events.jsonl", [line]))


# --- leases, between real processes -------------------------------------------------------------

HOLDER = """
import sys
from agenttrace.formats.session.lease import acquire
lease = acquire(sys.argv[1], owner="resume of the test")
print("held", flush=True)
sys.stdin.read()
"""


def hold_in_child(path: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert child.stdout is not None and child.stdout.readline() == "held\n"
    return child


def test_one_process_at_a_time_holds_a_session_and_a_dead_holder_is_taken_over(
    tmp_path: Path,
) -> None:
    path = lease_path(tmp_path, "s1")
    child = hold_in_child(path)
    try:
        with pytest.raises(LeaseHeld, match=f"held by resume of the test \\(pid {child.pid} on "):
            acquire(path)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    dead = read_holder(path)
    assert dead is not None and dead.pid == child.pid
    with acquire(path) as lease:  # its holder died: taken over, nothing to clean up
        assert lease.holder.pid == os.getpid() and lease.token != dead.token
        with pytest.raises(LeaseHeld):  # and held again, even in this process
            acquire(path)
    with acquire(path):
        pass  # released: free


def test_a_lease_another_host_holds_needs_force(tmp_path: Path) -> None:
    path = lease_path(tmp_path, "s1")
    elsewhere = {
        "owner": "resume",
        "pid": 1,
        "host": socket.gethostname() + "-other",
        "token": "t",
        "since": 0,
    }
    path.write_text(json.dumps(elsewhere))
    with pytest.raises(LeaseHeld, match="another host; take it over with --force"):
        acquire(path)
    with acquire(path, force=True) as lease:
        assert lease.holder.host == socket.gethostname()


def test_the_payment_server_charges_once_per_idempotency_key() -> None:
    import urllib.request

    payments = PaymentServer().start()
    try:

        def charge(key: str | None) -> dict[str, Any]:
            request = urllib.request.Request(
                payments.url + "/charge", data=b'{"amount": 5}', method="POST"
            )
            if key:
                request.add_header("Idempotency-Key", key)
            with urllib.request.urlopen(request, timeout=30) as answer:
                return json.loads(answer.read())  # type: ignore[no-any-return]

        first = charge("at-1")
        assert charge("at-1") == {**first, "replayed": True}
        charge(None)
        charge(None)
        assert len(payments.charges) == 3
    finally:
        payments.stop()
