"""agenttrace: OpenTelemetry tracing for LLM agents.

Decorate agent code (``agent``, ``turn``, ``tool``, ``llm``), call ``init()``, and every agent
run, turn, LLM attempt, tool call and sub-agent becomes a nested span carrying the opTree fields;
litellm calls are traced without any change to them.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .decorators import Handle, agent, llm, tool, turn
from .lifecycle import Tracing, force_flush, init, shutdown
from .logs import log, thinking
from .paths import format_label, parse_label
from .propagation import ContextThreadPoolExecutor, bind_context

__all__ = [
    "ContextThreadPoolExecutor",
    "Handle",
    "Tracing",
    "__version__",
    "agent",
    "bind_context",
    "force_flush",
    "format_label",
    "init",
    "llm",
    "log",
    "parse_label",
    "shutdown",
    "thinking",
    "tool",
    "turn",
]
