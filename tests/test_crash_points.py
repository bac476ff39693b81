"""The crash-point matrix, its first half (issue 22 item 7): for each effect class, an agent
whose tool charges the payment server is killed with SIGKILL at each point of a tool call
(tests/crash_point_child.py), and ``agenttrace doubts`` says what the journal knows: nothing before
the intent is on disk, the call in doubt from its intent until its ``done`` (whatever happened
in between: no charge, or a charge), done after. A ``pure`` call journals nothing: running it
again is harmless. The server counts what was really charged. (Resuming after each kill is the
other half, with the resume policy.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenttrace.formats.session.files import read_session_file
from agenttrace.model.journal import Journal

from .helpers import ROOT
from .payment_server import PaymentServer
from .test_cli import agenttrace as run_cli
from .test_cli import ok

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
    tmp_path: Path, payments: PaymentServer, effect: str, point: str
) -> None:
    before = len(payments.charges)
    sessions = tmp_path / "sessions"
    child = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.crash_point_child",
            str(sessions),
            payments.url,
            effect,
            point,
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -9, child.stderr
    assert len(payments.charges) - before == CHARGED[point]
    (stream,) = sessions.glob("*.events.jsonl")
    listed = json.loads(ok(run_cli(tmp_path, "doubts", str(stream), "--json")))
    journaled = Journal(read_session_file(stream).journal).steps.values()
    steps = [step for step in journaled if step.kind == "tool"]  # not the run's own lines
    if effect == "pure" or point == "before_intent":
        assert listed == [] and steps == []  # nothing journaled: nothing to doubt
    elif point in IN_DOUBT:
        (doubt,) = listed
        assert (doubt["tool"], doubt["effect"], doubt["step"]) == ("charge", effect, "1.1")
        assert json.loads(doubt["arguments"]) == {"amount": 5}
    else:
        assert listed == []
        (step,) = steps
        # The result as JSON: a string tool result is a JSON string, so a replay gives it back.
        assert (step.state, json.loads(step.result)) == ("done", payments.charges[-1]["charge"])
