"""A fork of a recorded run (docs/design/replay.md, "Fork"): where it branches from the source
run, and the overrides its live LLM calls are sent with.

A fork is a replay ``until`` its label (:mod:`agenttrace.model.replay`) carrying a :class:`Fork`:
every step before the label is served from the recording, and each LLM call made live from the
label on is sent with :meth:`Fork.request` instead of what the program asked. This module
decides what a request becomes; it sends nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

REFUSED_SETTINGS: Mapping[str, str] = {
    "messages": "the messages are the program's (the system prompt has its own override)",
    "stream": "whether a reply streams is the program's: it reads the reply as it asked",
    "model": "the model has its own override",
    "input": "the input items are the program's (the system prompt has its own override)",
    "system": "the system prompt has its own override (--system-prompt)",
    "instructions": "the system prompt has its own override (--system-prompt)",
}
"""Request keywords a fork cannot set, and why: setting them would break the call. The same
settings go to every live LLM call, whatever API it is made with: what one API's request is
made of (the OpenAI Responses API's ``input``, its system prompt ``instructions``, the Anthropic
Messages API's ``system``) is refused for all."""


@dataclass(frozen=True)
class RequestShape:
    """Where one API's request carries the system prompt a fork overrides."""

    system_keyword: str | None = None
    """The request keyword that is the system prompt (the Anthropic Messages API's ``system``,
    the OpenAI Responses API's ``instructions``); None: a system message of ``messages``."""


CHAT = RequestShape()
"""An OpenAI-style chat request (litellm's, the OpenAI SDK's chat completions): the system
prompt is the first system (or developer) message, put first when there is none."""

RESPONSES = RequestShape("instructions")
"""The OpenAI Responses API: the system prompt is ``instructions``."""

MESSAGES = RequestShape("system")
"""The Anthropic Messages API: the system prompt is the top-level ``system``."""


def check_settings(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """``settings`` as a dict of request keywords, or a ``ValueError`` naming the first key
    that is not a keyword name or that a fork cannot set."""
    checked: dict[str, Any] = {}
    for key, value in (settings or {}).items():
        if not isinstance(key, str) or not key.isidentifier():
            raise ValueError(f"settings: {key!r} is not a request keyword's name")
        if key in REFUSED_SETTINGS:
            raise ValueError(f"settings: {key!r} cannot be set: {REFUSED_SETTINGS[key]}")
        checked[key] = value
    return checked


def parse_setting(text: str) -> tuple[str, Any]:
    """``key=value`` as (key, value): the value as JSON (``0.2``, ``50``, ``true``,
    ``{"type": "json_object"}``), else as the string it is; a ``ValueError`` for a key that
    is missing, not a keyword name or refused."""
    key, equals, value = text.partition("=")
    key = key.strip()
    if not equals or not key:
        raise ValueError(f"--set {text!r} is not key=value (temperature=0.2)")
    try:
        parsed: Any = json.loads(value)
    except ValueError:
        parsed = value
    check_settings({key: parsed})
    return key, parsed


@dataclass(frozen=True)
class Fork:
    """Where a fork branches, and what its live LLM calls are sent with."""

    session: str
    """The source session's id."""
    run: str
    """The source run's origin id."""
    label: str
    """The label it branches at: it and every later step run live."""
    model: str | None = None
    """The model every live LLM call is sent to instead of the program's."""
    system_prompt: str | None = None
    """The text every live LLM call's system message has instead of the program's."""
    settings: Mapping[str, Any] = field(default_factory=dict)
    """Request keywords every live LLM call is sent with (``temperature``, ``max_tokens``)."""
    trace_id: int | None = None
    """The source run's root span's trace id, for the fork's link to it (when recorded)."""
    span_id: int | None = None
    """The source run's root span's span id (when recorded)."""

    def request(self, kwargs: Mapping[str, Any], shape: RequestShape = CHAT) -> dict[str, Any]:
        """A live LLM call's keywords with the overrides applied, the system prompt where the
        API's ``shape`` puts it (a new dict: the program's, and its messages, are left as they
        were)."""
        sent = dict(kwargs)
        sent.update(self.settings)
        if self.model is not None:
            sent["model"] = self.model
        if self.system_prompt is None:
            return sent
        if shape.system_keyword is not None:
            sent[shape.system_keyword] = self.system_prompt
            return sent
        messages = sent.get("messages")
        if isinstance(messages, Sequence) and not isinstance(messages, (str, bytes)):
            sent["messages"] = _with_system_prompt(list(messages), self.system_prompt)
        return sent

    def overrides(self) -> dict[str, Any]:
        """The overrides as the fork's session file names them. The system prompt is named by
        its length and digest: the text is the fork's requests' (on their spans, as
        ``capture_content`` keeps them), not metadata every reader of the file gets."""
        given: dict[str, Any] = {}
        if self.model is not None:
            given["model"] = self.model
        if self.system_prompt is not None:
            digest = hashlib.sha256(self.system_prompt.encode("utf-8", "surrogatepass"))
            given["system_prompt"] = {
                "chars": len(self.system_prompt),
                "sha256": digest.hexdigest(),
            }
        if self.settings:
            given["settings"] = dict(self.settings)
        return given

    def meta(self) -> dict[str, Any]:
        """``meta.fork_of`` of the fork's session file."""
        return {
            "session": self.session,
            "run": self.run,
            "label": self.label,
            "overrides": self.overrides(),
        }


_SYSTEM_ROLES = ("system", "developer")
"""The roles of a chat request's system prompt (OpenAI's reasoning models take ``developer``)."""


def _with_system_prompt(messages: list[Any], text: str) -> list[Any]:
    """``messages`` with the first system (or developer) message's content replaced by
    ``text`` (a system message is put first if there is none)."""
    for index, message in enumerate(messages):
        if isinstance(message, Mapping) and message.get("role") in _SYSTEM_ROLES:
            replaced = list(messages)
            replaced[index] = {**message, "content": text}
            return replaced
    return [{"role": "system", "content": text}, *messages]
