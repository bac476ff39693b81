"""Helpers to test an agent: :class:`ScriptedModel`, a scripted LLM on 127.0.0.1 that speaks
Anthropic's Messages API and OpenAI's Chat Completions API (docs/how-to/offline-model.md), and
what the pytest plugin's ``agent_trace`` fixture gives a test: :class:`CapturedRun`,
:func:`assert_tree`, :func:`assert_trajectory` (docs/how-to/testing.md).

Importing it costs nothing: the scripted model is standard library only, and the rest is
imported when first named (``agenttrace.testing.assert_tree``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agenttrace.testing.scripted_model import (
    ECHO,
    FALLBACK,
    Reply,
    Script,
    ScriptedModel,
    ScriptError,
    echo,
    last_user_text,
    load_script,
    next_reply,
    system_prompt,
)

if TYPE_CHECKING:
    from agenttrace.testing.assertions import assert_trajectory, assert_tree
    from agenttrace.testing.capture import capturing
    from agenttrace.testing.captured import CapturedRun
    from agenttrace.testing.span_query import SpanQuery
    from agenttrace.testing.span_tree import SpanNode

_LAZY = {
    "CapturedRun": "agenttrace.testing.captured",
    "SpanNode": "agenttrace.testing.span_tree",
    "SpanQuery": "agenttrace.testing.span_query",
    "assert_tree": "agenttrace.testing.assertions",
    "assert_trajectory": "agenttrace.testing.assertions",
    "capturing": "agenttrace.testing.capture",
}
"""Names imported when first used: they need agenttrace's tracing, which the scripted model
does not."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agenttrace.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ECHO",
    "FALLBACK",
    "CapturedRun",
    "Reply",
    "Script",
    "ScriptError",
    "ScriptedModel",
    "SpanNode",
    "SpanQuery",
    "assert_trajectory",
    "assert_tree",
    "capturing",
    "echo",
    "last_user_text",
    "load_script",
    "next_reply",
    "system_prompt",
]
