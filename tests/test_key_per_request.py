"""A re-entered run that makes another request at a place its killed run had used: found by the
kill matrix (tests/kill_matrix.py, seed 31, scenario 76). Two sub-agents ran at once and took
their ops' labels in the other order on the re-entry, so one's ``book(11)`` came to the label
where the killed run's other sub-agent had made ``book(17)``. As another request at that place
it ran as the place's next attempt, and so with the same idempotency key (session, run, label,
tool): the payment server took it for the first booking sent again and answered with it. The
tool returned ``booked 11``; nothing was booked. Such a call now runs under a label of its own
(docs/journal.md, Idempotency keys)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import agenttrace
from agenttrace.views.account import read_account

from .conftest import Traced
from .test_cli import ROOT, env_for
from .test_cli import agenttrace as agenttrace_command


def test_another_request_at_a_used_place_gets_a_key_of_its_own(
    traced: Traced, tmp_path: Path
) -> None:
    keys: dict[int, str | None] = {}
    amount = [17]

    @agenttrace.tool(effect="idempotent")
    def book(amount: int) -> str:
        keys[amount] = agenttrace.idempotency_key()
        return f"booked {amount}"

    @agenttrace.agent("Shop")
    def shop() -> str:
        return book(amount[0])

    shop()
    stream = _as_killed(traced, tmp_path / "sessions")
    agenttrace.resume(stream)
    amount[0] = 11  # the re-entered run asks another thing at the same place
    assert shop() == "booked 11"
    assert keys[11] is not None and keys[17] is not None
    assert keys[11] != keys[17], json.dumps(keys)


def test_a_later_reentry_finds_each_request_at_its_own_label(
    traced: Traced, tmp_path: Path
) -> None:
    ran: list[tuple[int, str | None]] = []
    amount = [17]

    @agenttrace.tool(effect="idempotent")
    def book(amount: int) -> str:
        ran.append((amount, agenttrace.idempotency_key()))
        return f"booked {amount}"

    @agenttrace.agent("Shop")
    def shop() -> str:
        return book(amount[0])

    shop()
    stream = _as_killed(traced, tmp_path / "sessions")
    agenttrace.resume(stream)
    amount[0] = 11
    assert shop() == "booked 11"
    stream = _as_killed(traced, tmp_path / "sessions")
    # Both requests are in the journal, each at its own place: a re-entry asking either one is
    # answered from it, and neither body runs again.
    labels = [
        json.loads(line)["step"]
        for line in stream.read_bytes().splitlines()
        if b'"kind": "tool"' in line and b'"state": "intent"' in line
    ]
    assert len(labels) == 2 and labels[1] == labels[0] + "/2", labels
    for asked in (17, 11):
        agenttrace.resume(stream)
        amount[0] = asked
        assert shop() == f"booked {asked}"
        stream = _as_killed(traced, tmp_path / "sessions")
    assert [paid for paid, _ in ran] == [17, 11], ran


def _as_killed(traced: Traced, sessions: Path) -> Path:
    """The session as a kill during its last run leaves it: that run's own done line never
    written, no session file since."""
    traced.handle.force_flush()
    (stream,) = sessions.glob("*.events.jsonl")
    lines = stream.read_bytes().splitlines(keepends=True)
    ran = [line for line in lines if b'"kind": "run"' in line and b'"state": "done"' in line]
    stream.write_bytes(b"".join(line for line in lines if line not in ran))
    for snapshot in sessions.glob("*.json.gz"):
        snapshot.unlink()
    assert ran
    return stream


def _child(
    tmp_path: Path, amount: int, kill: str, *resume: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.key_child",
            str(tmp_path / "sessions"),
            str(amount),
            kill,
            *list(resume),
        ],
        env=env_for(tmp_path),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=480,
    )


@pytest.mark.e2e
def test_a_call_killed_at_a_label_of_its_own_is_in_doubt_under_its_op(tmp_path: Path) -> None:
    """Killed once the booking of 17 was done, then in the body of the re-entry's booking of 11:
    the views put the call in doubt under its op (1.1), ``doubts`` names its step (1.1/2),
    ``resolve`` takes that name and bills the call at its op, and the next re-entry is answered
    with the decision, its body not run again. (The tree shows the op as the killed run ended
    it: this re-entry logged no event of its own before the kill, so no run of its own is in
    the tree to hold its call.)"""
    assert _child(tmp_path, 17, "after_book").returncode == -signal.SIGKILL
    assert _child(tmp_path, 11, "inside", "resume").returncode == -signal.SIGKILL
    (stream,) = (tmp_path / "sessions").glob("*.events.jsonl")

    listed = agenttrace_command(tmp_path, "doubts", "--json", str(stream))
    assert listed.returncode == 0, listed.stderr
    (doubt,) = json.loads(listed.stdout)
    assert (doubt["step"], doubt["tool"]) == ("1.1/2", "book"), doubt
    (cut,) = read_account(stream).cut_short
    assert (cut.path, cut.step, cut.status, cut.effect) == (
        "1.1",
        "1.1/2",
        "in doubt",
        "idempotent",
    )
    assert agenttrace_command(tmp_path, "tree", str(stream)).returncode == 0

    result = tmp_path / "result.json"
    result.write_text(json.dumps("booked 11"))
    decided = agenttrace_command(tmp_path, "resolve", str(stream), "1.1/2", "--done", str(result))
    assert decided.returncode == 0, decided.stderr
    billed = [json.loads(line) for line in (tmp_path / "accounting.jsonl").read_text().splitlines()]
    (line,) = [line for line in billed if line.get("decision") == "done"]
    assert (line["path"], line["status"]) == ("1.1", "ok"), line

    again = _child(tmp_path, 11, "never", "resume")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout.splitlines()[-1]) == {"answer": "booked 11", "ran": []}
