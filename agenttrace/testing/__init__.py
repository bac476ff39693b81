"""Helpers to try an agent without a provider: :class:`ScriptedModel`, a scripted LLM on
127.0.0.1 that speaks Anthropic's Messages API and OpenAI's Chat Completions API
(docs/how-to/offline-model.md). Standard library only: importing it costs nothing."""

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
    "system_prompt",
]
