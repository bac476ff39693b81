"""What the ``mcp`` instrumentation's parts share: whether its wrappers trace, what it patched,
and the name its internal errors are reported under."""

from __future__ import annotations

from agenttrace.instrumentation.base import PatchState

__all__ = ["WHERE", "state"]

WHERE = "the mcp instrumentation"

state = PatchState()
