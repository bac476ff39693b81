"""Tool calls in the step journal (issue 22, items 1 and 2): a call that is not ``pure`` has its
intent on disk before its body runs and its outcome after; a process killed in between leaves
it in doubt, which ``agenttrace doubts`` lists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agenttrace
from agenttrace.model.journal import Journal

from .conftest import Traced
from .helpers import run_journal_child
from .payment_server import PaymentServer
from .test_cli import agenttrace as run_cli
from .test_cli import ok


def journal_lines(tmp_path: Path, runs: bool = False) -> list[dict[str, Any]]:
    """The stream's journal lines (``runs``: with the runs' own lines)."""
    (stream,) = (tmp_path / "sessions").glob("*.events.jsonl")
    lines = [json.loads(line) for line in stream.read_text().splitlines()]
    return [
        line
        for line in lines
        if line["event_type"] in ("step", "step_decision") and (runs or line.get("kind") != "run")
    ]


def test_a_tool_call_is_journaled_before_its_body_runs_and_after(
    traced: Traced, tmp_path: Path
) -> None:
    seen_in_body: list[list[str]] = []

    @agenttrace.tool  # undeclared: effect
    def charge(amount: int) -> dict[str, Any]:
        # What a kill now would leave on disk: the intent, and nothing after it.
        seen_in_body.append([line["state"] for line in journal_lines(tmp_path)])
        return {"charge": "ch_1", "amount": amount}

    @agenttrace.tool(effect="pure")
    def add(a: int, b: int) -> int:
        return a + b

    @agenttrace.agent("Shop")
    def shop() -> None:
        add(2, 3)
        charge(5)

    shop()
    traced.handle.force_flush()
    assert seen_in_body == [["intent"]]
    intent, done = journal_lines(tmp_path)  # the pure call journals nothing
    assert (intent["name"], intent["effect"], intent["state"]) == ("charge", "effect", "intent")
    assert json.loads(intent["arguments"]) == {"amount": 5}
    assert intent["fingerprint"].startswith("sha256:") and intent["step"] == "1.2"
    assert (done["state"], json.loads(done["result"])) == ("done", {"charge": "ch_1", "amount": 5})
    assert (done["run"], done["step"], done["attempt"]) == (
        intent["run"],
        intent["step"],
        intent["attempt"],
    )
    assert Journal(journal_lines(tmp_path)).in_doubt() == []


class Declined(Exception):
    effect_applied = False


@pytest.mark.parametrize(
    ("effect", "error", "applied"),
    [
        ("read", RuntimeError("the index is down"), "no"),
        ("effect", RuntimeError("the connection broke"), "unknown"),
        ("idempotent", Declined("card declined"), "no"),
    ],
)
def test_a_failed_call_says_whether_its_effect_happened(
    traced: Traced, tmp_path: Path, effect: str, error: Exception, applied: str
) -> None:
    @agenttrace.tool(effect=effect)
    def act() -> None:
        raise error

    @agenttrace.agent("Shop")
    def shop() -> None:
        with pytest.raises(type(error)):
            act()

    shop()
    traced.handle.force_flush()
    _, failed = journal_lines(tmp_path)
    assert (failed["state"], failed["applied"]) == ("failed", applied)
    assert failed["error"].endswith(str(error))


@pytest.mark.init(journal=False)
def test_the_journal_can_be_turned_off(traced: Traced, tmp_path: Path) -> None:
    @agenttrace.tool
    def charge() -> str:
        return "ch_1"

    agenttrace.agent("Shop")(charge)()
    traced.handle.force_flush()
    assert journal_lines(tmp_path) == []


def test_an_unknown_effect_is_refused() -> None:
    with pytest.raises(ValueError, match="effect must be one of pure, read, idempotent, effect"):
        agenttrace.tool(effect="dangerous")


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("effect", "kill", "in_doubt"),
    [
        ("effect", "inside", True),  # charged, then killed before its outcome: in doubt
        ("idempotent", "inside", True),
        ("effect", "after_done", False),  # killed once its outcome was written: done
        ("pure", "inside", False),  # nothing to doubt: running it again is harmless
    ],
)
def test_a_call_killed_mid_body_is_in_doubt(
    tmp_path: Path, effect: str, kill: str, in_doubt: bool
) -> None:
    payments = PaymentServer().start()
    sessions = tmp_path / "sessions"
    try:
        child = run_journal_child(sessions, payments.url, effect, kill)
    finally:
        payments.stop()
    assert child.returncode == -9, child.stderr
    assert len(payments.charges) == 1  # the effect happened once
    (stream,) = sessions.glob("*.events.jsonl")
    listed = json.loads(ok(run_cli(tmp_path, "doubts", str(stream), "--json")))
    if in_doubt:
        (doubt,) = listed
        assert (doubt["tool"], doubt["effect"], doubt["step"]) == ("charge", effect, "1.2")
        assert json.loads(doubt["arguments"]) == {"amount": 5}
    else:
        assert listed == []


def test_an_outcome_still_waiting_at_shutdown_is_written(traced: Traced, tmp_path: Path) -> None:
    @agenttrace.tool
    def charge() -> str:
        return "ch_1"

    agenttrace.agent("Shop")(charge)()
    traced.handle.shutdown()  # no flush first: the done line still waits for the worker
    assert [line["state"] for line in journal_lines(tmp_path)] == ["intent", "done"]
