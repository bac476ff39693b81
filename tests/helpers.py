"""Small things many tests share."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def child_env(**overrides: str) -> dict[str, str]:
    """The environment for a process a test starts, as a user's would be: the suite's own
    ``OTEL_*`` and ``AGENTTRACE_*`` settings left out, litellm offline, then ``overrides``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENTTRACE_"))}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env.update(overrides)
    return env


ROOT = Path(__file__).resolve().parent.parent


def run_demo(sessions: Path, **overrides: str) -> subprocess.CompletedProcess[str]:
    """``examples/cafe.py`` as a user runs it, its session going to ``sessions``."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "cafe.py"), "--sessions-dir", str(sessions)],
        env=child_env(**overrides),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result
