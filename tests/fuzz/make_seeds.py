"""Regenerate the fuzz suite's seed files: ``python -m tests.fuzz.make_seeds`` from the checkout.

The seeds are real files made by agenttrace: ``examples/cafe.py`` (its scripted model, offline)
records a session, ``agenttrace resume`` continues it once, so the session file holds two runs
with every kind of node (sub-agents, LLM calls, tools, links) and the stream both runs' events.
``crashed.json.gz`` and ``crashed.events.jsonl`` are what the demo leaves when it is killed
with SIGKILL inside ``discuss`` (tests/crash_child.py's ``first ... jill``): a session file
written mid-run, a stream with ``op_accounted`` lines past it, and a journal whose run and
``discuss`` call have an ``intent`` and no outcome (a run to re-enter, a call in doubt).

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

from examples.cafe import scripted_model
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
            env=child_env(), capture_output=True, text=True, timeout=480, cwd=ROOT,
        )  # fmt: skip
        if resumed.returncode != 0:
            sys.exit(f"resuming the demo's session failed: {resumed.stderr}")
        SEEDS.mkdir(exist_ok=True)
        shutil.copyfile(snapshot, SEEDS / f"{NAME}.json.gz")
        shutil.copyfile(sessions / f"{session_id}.events.jsonl", SEEDS / f"{NAME}.events.jsonl")
        _crashed(Path(temporary) / "crashed")
    print(f"wrote {SEEDS}/{NAME}.* and crashed.*")


def _crashed(sessions: Path) -> None:
    """The demo killed inside ``discuss`` (tests/crash_child.py), its two files as seeds."""
    with scripted_model() as model:
        env = child_env(CRASH_API_BASE=model.api_base, PYTHONPATH=str(ROOT))
        env["AGENTTRACE_BILLING_FILE"] = str(sessions.parent / "accounting.jsonl")
        killed = subprocess.run(
            [sys.executable, "-m", "tests.crash_child", "first", str(sessions), "jill"],
            env=env, capture_output=True, text=True, timeout=480, cwd=ROOT,
        )  # fmt: skip
    if killed.returncode != -9:
        sys.exit(f"the demo was not killed as planned: {killed.stderr}")
    (snapshot,) = sessions.glob("*.json.gz")
    (stream,) = sessions.glob("*.events.jsonl")
    shutil.copyfile(snapshot, SEEDS / "crashed.json.gz")
    shutil.copyfile(stream, SEEDS / "crashed.events.jsonl")


if __name__ == "__main__":
    main()
