"""The scripted model, now part of the package: :mod:`agenttrace.testing.scripted_model`.

Kept so that ``from examples.scripted_model import ScriptedModel`` (the examples, the tests and
programs written against earlier releases) goes on working.
"""

from __future__ import annotations

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
    response_body,
    system_prompt,
)

__all__ = [
    "ECHO",
    "FALLBACK",
    "Reply",
    "Script",
    "ScriptError",
    "ScriptedModel",
    "echo",
    "last_user_text",
    "load_script",
    "next_reply",
    "response_body",
    "system_prompt",
]
