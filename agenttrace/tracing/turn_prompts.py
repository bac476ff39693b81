"""A turn's prompts: the system and user messages of its first LLM attempt's whole request.

An attempt's recorded input is only what is new since the agent's previous reply (its
``input_deltas``), so a turn that adds only tool results would say nothing of what it was asked.
The first attempt of each turn therefore records the request's system and user messages once
more, for the turn node's ``prompts`` (docs/session-file.md): capped and redacted like the rest of
the saved state, saved state only (never on a span).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.redact import recorded_json
from agenttrace._internal.runtime import runtime
from agenttrace.formats.session.schema import MAX_TURN_PROMPTS
from agenttrace.tracing.llm_attributes import field
from agenttrace.tracing.scopes import OpScope

_ROLES = {"system": "system", "developer": "system", "user": "user"}
"""The roles a prompt has, as the turn node names them (OpenAI's reasoning models send the system
prompt as ``developer``)."""


def record_turn_prompts(scope: OpScope, messages: Any) -> None:
    """Record the system and user messages of ``messages`` (an LLM attempt's whole request) in
    ``scope``'s payloads if it is its turn's first attempt to get here. Never raises."""
    try:
        turn = scope.turn
        if turn.prompted or not isinstance(messages, Sequence) or isinstance(messages, str):
            return
        turn.prompted = True
        prompts = []
        for message in messages:
            raw = field(message, "role")
            role = _ROLES.get(raw) if isinstance(raw, str) else None
            if role is not None:
                prompts.append({"role": role, "content": field(message, "content")})
        if len(prompts) > MAX_TURN_PROMPTS:  # the first (a system prompt) and the latest
            prompts = [prompts[0], *prompts[1 - MAX_TURN_PROMPTS :]]
        text = recorded_json(prompts, runtime.settings.max_payload_bytes)[1]
        scope.payloads[sc.REQUEST_PROMPTS] = text
    except Exception as exc:  # the turn says less; the call goes on
        report_internal_error("turn prompts", exc)
