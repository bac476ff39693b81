"""A new run after a resume (one that does not re-enter the killed run) is a run of its own in the
journal, even when the killed run logged no event (a plain ``@agenttrace.agent`` function whose
only record is its journal): its steps, and so its tool calls' idempotency keys, never take the
killed run's, and the killed run's call in doubt stays in doubt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .helpers import ROOT
from .payment_server import PaymentServer
from .test_cli import agenttrace as run_cli
from .test_cli import ok

RESUME_WITH_OTHER_ARGUMENTS = """
import sys
import agenttrace
from tests.reentry_agent import shop
agenttrace.init(sessions_dir=sys.argv[1], console="quiet")
agenttrace.resume(sys.argv[2])
print(shop(7))
"""


def test_a_new_run_after_a_resume_never_reuses_the_killed_runs_keys(tmp_path: Path) -> None:
    payments = PaymentServer().start()
    sessions = tmp_path / "sessions"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PAYMENTS_URL": payments.url,
        "CHARGE_EFFECT": "idempotent",
    }
    try:
        killed = subprocess.run(
            [sys.executable, "-m", "tests.reentry_agent", str(sessions)],
            cwd=ROOT, env={**env, "KILL_INSIDE": "1", "WITH_ARGUMENT": "1"},
            capture_output=True, text=True, timeout=480,
        )  # fmt: skip
        assert killed.returncode == -9, killed.stderr
        (stream,) = sessions.glob("*.events.jsonl")
        new_run = subprocess.run(
            [sys.executable, "-c", RESUME_WITH_OTHER_ARGUMENTS, str(sessions), str(stream)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=480,
        )  # fmt: skip
        assert new_run.returncode == 0, new_run.stderr
    finally:
        payments.stop()
    # shop(7) is another call than the killed shop(5): its charge is made, under a key of its own.
    first, second = payments.charges
    assert (first["amount"], second["amount"]) == (5, 7)
    assert first["key"] != second["key"]
    assert new_run.stdout.strip() == "paid " + second["charge"]
    # The killed run's charge may have happened: it is still listed in doubt.
    (doubt,) = json.loads(ok(run_cli(tmp_path, "doubts", str(stream), "--json")))
    assert (doubt["step"], doubt["tool"], json.loads(doubt["arguments"])) == (
        "1.1",
        "charge",
        {"amount": 5},
    )
    lines = [json.loads(line) for line in stream.read_text().splitlines()]
    runs = {line["run"] for line in lines if line.get("event_type") == "step"}
    assert len(runs) == 2  # the killed run and the new one, each its own
