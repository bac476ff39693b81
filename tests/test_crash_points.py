"""The crash-point matrix, its first half (issue 22 item 7): for each effect class, an agent
whose tool charges the payment server is killed with SIGKILL at each point of a tool call
(tests/journal_child.py: the shop agent reads its balance, then charges), and ``agenttrace
doubts`` says what the journal knows of the charge: nothing before the intent is on disk, the
call in doubt from its intent until its ``done`` (whatever happened in between: no charge, or a
charge), done after. A ``pure`` call journals nothing: running it again is harmless. The server
counts what was really charged.

The other half resumes each killed session and re-enters its run (the resume policy,
docs/journal.md): an ``effect`` call is never made twice (a kill between its intent and its
``done`` stops the resume with the call named in doubt), an ``idempotent`` one is made again
with the same key and the server charges once, ``pure`` and ``read`` ones run again, and a call
whose ``done`` is on disk is answered from the journal."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenttrace.formats.session.files import read_session_file
from agenttrace.model.journal import Journal

from .fork_server import Forks
from .helpers import run_journal_child
from .payment_server import PaymentServer
from .test_cli import forked_agenttrace, ok

POINTS = ("before_intent", "before_body", "inside", "after_body", "after_done")
CHARGED = {"before_intent": 0, "before_body": 0, "inside": 1, "after_body": 1, "after_done": 1}
"""How many charges the server counts when the process is killed there."""
IN_DOUBT = {"before_body", "inside", "after_body"}
"""The points between the intent and ``done``: a call that is not pure is in doubt there."""


@pytest.fixture(scope="module")
def payments() -> Iterator[PaymentServer]:
    server = PaymentServer().start()
    yield server
    server.stop()


@pytest.mark.e2e
@pytest.mark.parametrize("effect", ["pure", "read", "idempotent", "effect"])
@pytest.mark.parametrize("point", POINTS)
def test_what_the_journal_says_after_a_kill_at_each_point_of_a_tool_call(
    tmp_path: Path,
    payments: PaymentServer,
    journal_forks: Forks,
    cli_forks: Forks,
    effect: str,
    point: str,
) -> None:
    before = len(payments.charges)
    sessions = tmp_path / "sessions"
    child = run_journal_child(sessions, payments.url, effect, point, forks=journal_forks)
    assert child.returncode == -9, child.stderr
    assert len(payments.charges) - before == CHARGED[point]
    (stream,) = sessions.glob("*.events.jsonl")
    listed = json.loads(ok(forked_agenttrace(cli_forks, tmp_path, "doubts", str(stream), "--json")))
    journaled = Journal(read_session_file(stream).journal).steps.values()
    steps = [step for step in journaled if step.name == "charge"]  # not the run's, the read's
    if effect == "pure" or point == "before_intent":
        assert listed == [] and steps == []  # nothing journaled: nothing to doubt
    elif point in IN_DOUBT:
        (doubt,) = listed
        assert (doubt["tool"], doubt["effect"], doubt["step"]) == ("charge", effect, "1.2")
        assert json.loads(doubt["arguments"]) == {"amount": 5}
    else:
        assert listed == []
        (step,) = steps
        # The result as JSON: a string tool result is a JSON string, so a replay gives it back.
        assert (step.state, json.loads(step.result)) == ("done", payments.charges[-1]["charge"])


def resumed_charges(effect: str, point: str) -> int:
    """What the server has charged in all once the killed run is resumed and re-entered."""
    if point == "before_intent":
        return 1  # never journaled: the re-entered run makes the call
    if point == "after_done" and effect != "pure":
        return 1  # done: answered from the journal
    if effect == "idempotent":
        return 1  # made again with the same key: the server does it once
    if effect == "effect":
        return CHARGED[point]  # in doubt: not made again
    return CHARGED[point] + 1  # pure (journals nothing), read: made again


@pytest.mark.e2e
@pytest.mark.parametrize("effect", ["pure", "read", "idempotent", "effect"])
@pytest.mark.parametrize("point", POINTS)
def test_resuming_after_a_kill_at_each_point_never_repeats_an_effect(
    tmp_path: Path, payments: PaymentServer, journal_forks: Forks, effect: str, point: str
) -> None:
    before = len(payments.charges)
    sessions = tmp_path / "sessions"
    killed = run_journal_child(sessions, payments.url, effect, point, forks=journal_forks)
    assert killed.returncode == -9, killed.stderr
    resumed = run_journal_child(
        sessions, payments.url, effect, point, "resume", forks=journal_forks
    )
    assert resumed.returncode == 0, resumed.stderr
    out = json.loads(resumed.stdout.splitlines()[-1])
    assert len(payments.charges) - before == resumed_charges(effect, point), out
    stopped = effect == "effect" and point in IN_DOUBT
    assert out.get("in_doubt", []) == ([["1.2", "charge"]] if stopped else [])
    replayed = point == "after_done" and effect != "pure"
    assert out["bodies"] == ([] if stopped or replayed else ["charge"])
