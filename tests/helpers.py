"""Small things many tests share."""

from __future__ import annotations

import os


def child_env(**overrides: str) -> dict[str, str]:
    """The environment for a process a test starts, as a user's would be: the suite's own
    ``OTEL_*`` and ``AGENTTRACE_*`` settings left out, litellm offline, then ``overrides``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENTTRACE_"))}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env.update(overrides)
    return env
