"""The agent factory the fuzz suite gives ``agenttrace resume --agent``: it rebuilds each agent
from its record as a user's factory does (its chat messages, its model), and its root answers a
prompt without calling a model, so a resumed run exercises reading, rebuilding and continuing a
session and nothing else."""

from __future__ import annotations

from typing import Any

import agenttrace


class Revived:
    """An agent as the session left it: what it would send a model next."""

    def __init__(self, record: agenttrace.AgentRecord) -> None:
        self.agent_id = record.agent_id
        self.model = record.language_model
        self.messages = record.messages()
        self.subagents: dict[str, Any] = {}

    def harken(self, prompt: str) -> None:
        self.messages.append({"role": "user", "content": prompt})

    def response(self) -> str:
        return f"{len(self.messages)} messages, {len(self.subagents)} sub-agents"


def rebuild(record: agenttrace.AgentRecord, session: agenttrace.Session) -> Revived:
    """``agenttrace resume --agent tests.fuzz.factory:rebuild``."""
    return Revived(record)
