"""What a tool call's result stands for, by the call's id: the ``substance`` a framework's ids
give (docs/events.md, "Which reply heard text stands for").

A framework that runs a sub-agent as a tool (smolagents' managed agents, the Claude Agent SDK's
``Agent`` tool) says by its ids which reply the tool's result is: the call it answers carries
the call's id, and the sub-agent ran inside that call. Once the calling agent's tool entry for
the call is logged with that reply as its ``substance``, every later message that answers the
same call id in that agent's history (a framework sending the tool message again, in a history
it rewrote, as OpenAI-style ``tool`` messages with their ``tool_call_id``) is the same content,
and gets the same ``substance``, whatever its text: the id says so, not the content.
"""

from __future__ import annotations

from typing import Any

CALLS_REMEMBERED = 4096
"""How many answered call ids a session remembers (the oldest are forgotten first)."""


class CallAnswers:
    """Per (agent id, tool call id): the message id the call's result stands for."""

    def __init__(self, limit: int = CALLS_REMEMBERED) -> None:
        self._limit = limit
        self._answers: dict[tuple[str, str], str] = {}  # insertion order is age

    def remember(self, agent: str, call_id: str, substance: str) -> None:
        """``agent``'s tool call ``call_id`` was answered by content that is ``substance``."""
        key = (agent, call_id)
        self._answers.pop(key, None)
        self._answers[key] = substance
        if len(self._answers) > self._limit:
            del self._answers[next(iter(self._answers))]

    def answer(self, agent: str, entry: Any) -> str | None:
        """The substance of ``entry`` (a chat message's fields) if it is a tool result for a
        call of ``agent`` whose answer is known; else ``None``."""
        if not self._answers or not hasattr(entry, "get") or entry.get("role") != "tool":
            return None
        call_id = entry.get("tool_call_id")
        if not call_id:
            return None
        return self._answers.get((agent, str(call_id)))
