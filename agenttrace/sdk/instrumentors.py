"""The libraries ``init(instrument=[...])`` can instrument, by name, and starting one.

Each is an instrumentation subpackage with an ``instrument_when_imported(**options)`` that
patches the library now if it is imported, else as soon as it is, and returns the undo.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

INSTRUMENTORS = {
    "anthropic": "agenttrace.instrumentation.anthropic",
    "claude_agent_sdk": "agenttrace.instrumentation.claude_agent_sdk",
    "litellm": "agenttrace.instrumentation.litellm",
    "mcp": "agenttrace.instrumentation.mcp",
    "openai": "agenttrace.instrumentation.openai",
    "openai_agents": "agenttrace.instrumentation.openai_agents",
    "pydantic_ai": "agenttrace.instrumentation.pydantic_ai",
    "smolagents": "agenttrace.instrumentation.smolagents",
}
"""Name (as ``init(instrument=...)`` takes it; ``-`` works for ``_``) -> subpackage."""


def library_name(name: str) -> str:
    """``name`` as ``INSTRUMENTORS`` spells it (``claude-agent-sdk`` -> ``claude_agent_sdk``)."""
    return name.replace("-", "_")


def library_module(name: str) -> str:
    """The subpackage that instruments ``name``; an unknown name is a ``ValueError`` that lists
    the known ones."""
    module_name = INSTRUMENTORS.get(library_name(name))
    if module_name is None:
        known = ", ".join(sorted(INSTRUMENTORS))
        raise ValueError(f"agenttrace cannot instrument {name!r}: it knows {known}")
    return module_name


def start_instrumentor(name: str, **options: Any) -> Callable[[], None]:
    """Instrument the library ``name`` (now or on import); returns the undo.

    An unknown name is a ``ValueError`` that lists the known ones.
    """
    module = importlib.import_module(library_module(name))
    undo: Callable[[], None] = module.instrument_when_imported(**options)
    return undo
