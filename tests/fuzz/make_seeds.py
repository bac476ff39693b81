"""Regenerate the fuzz suite's seed files: ``python -m tests.fuzz.make_seeds`` from the checkout.

The seeds are real files made by agenttrace: ``examples/cafe.py`` (its scripted model, offline)
records a session, ``agenttrace resume`` continues it once, so the session file holds two runs
with every kind of node (sub-agents, LLM calls, tools, links) and the stream both runs' events.
They are kept in the repository rather than made at test time so that every run of the suite
mutates the very same bytes: the ids and times of a fresh recording differ each time, and a
fuzz suite whose inputs change from run to run is not reproducible.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.helpers import ROOT, child_env, run_demo

SEEDS = Path(__file__).resolve().parent / "seeds"
NAME = "cafe"
"""The seed files' stem: ``cafe.json.gz`` and ``cafe.events.jsonl`` (siblings, as recorded)."""


def main() -> None:
    with tempfile.TemporaryDirectory() as temporary:
        sessions = Path(temporary) / "sessions"
        run_demo(sessions, AGENTTRACE_CONSOLE="quiet")
        (snapshot,) = sessions.glob("*.json.gz")
        session_id = snapshot.name.removesuffix(".json.gz")
        resumed = subprocess.run(
            [sys.executable, "-m", "agenttrace.cli", "resume", session_id, "--prompt", "Coffee?",
             "--agent", "examples.cafe:rebuild", "--sessions-dir", str(sessions)],
            env=child_env(), capture_output=True, text=True, timeout=120, cwd=ROOT,
        )  # fmt: skip
        if resumed.returncode != 0:
            sys.exit(f"resuming the demo's session failed: {resumed.stderr}")
        SEEDS.mkdir(exist_ok=True)
        shutil.copyfile(snapshot, SEEDS / f"{NAME}.json.gz")
        shutil.copyfile(sessions / f"{session_id}.events.jsonl", SEEDS / f"{NAME}.events.jsonl")
    print(f"wrote {SEEDS}/{NAME}.json.gz and {NAME}.events.jsonl")


if __name__ == "__main__":
    main()
