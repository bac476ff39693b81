"""Continuing a traced Claude Agent SDK session: ``agenttrace resume SESSION --agent
agenttrace.instrumentation.claude_agent_sdk:rebuild --prompt "..."``.

Each exchange's run records the SDK's session id, working directory and permission mode
(``claude_agent_sdk.*`` attributes). :func:`rebuild` (``load_session``'s agent factory) makes
the root agent a :class:`ClaudeAgent` that hands that session id back to the SDK
(``ClaudeAgentOptions(resume=...)``), so the CLI continues the conversation it has on disk and
agenttrace continues the same agent: its runs, transcript and ids go on in the same session.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from agenttrace.formats.session.optree import hosted_sessions, session_ops
from agenttrace.session.state import AgentRecord, Session

from .utils import CWD, PERMISSION_MODE, SESSION_ID, resuming, state

_SESSION_ID = re.compile(r"^[0-9A-Za-z][0-9A-Za-z-]{0,127}$")
_SAFE_MODES = frozenset({"default", "acceptEdits", "plan"})
"""Permission modes taken from a session file; any other (``bypassPermissions``) is not: a
file is no one's word for running tools unasked."""


class ClaudeAgent:
    """The main agent of a traced SDK session, rebuilt: ``harken(prompt)`` then ``await
    response()`` runs one more exchange with ``resume=`` its SDK session id."""

    def __init__(
        self, record: AgentRecord, session_id: str, cwd: str | None, permission_mode: str | None
    ) -> None:
        self.agent_id = record.agent_id
        self.name = record.name
        self.language_model = record.language_model
        self.session_id = session_id
        self.cwd = cwd
        self.permission_mode = permission_mode
        self.subagents: dict[str, Any] = {}
        self.prompt: str | None = None

    def harken(self, prompt: str) -> None:
        """The next exchange's input."""
        self.prompt = prompt

    async def response(self) -> str:
        """Run the exchange; returns its result text."""
        from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query

        options = ClaudeAgentOptions(
            resume=self.session_id,
            cwd=self.cwd,
            permission_mode=self.permission_mode,  # type: ignore[arg-type]
        )
        token = resuming.set(self)
        try:
            answer = ""
            async for message in query(prompt=self.prompt or "", options=options):
                if isinstance(message, ResultMessage):
                    answer = message.result or ""
            return answer
        finally:
            resuming.reset(token)


class SubAgent:
    """A sub-agent of a traced SDK session: the CLI runs it again only through its parent."""

    def __init__(self, record: AgentRecord) -> None:
        self.agent_id = record.agent_id
        self.name = record.name
        self.subagents: dict[str, Any] = {}


def rebuild(record: AgentRecord, session: Session) -> Any:
    """``load_session``'s agent factory for sessions of the Claude Agent SDK."""
    found = last_run_attributes(session, record.agent_id)
    session_id = found.get(SESSION_ID)
    if record.cause is not None or not isinstance(session_id, str):
        return SubAgent(record)
    if not _SESSION_ID.match(session_id):
        raise ValueError(f"{session_id!r} is not an SDK session id")
    cwd = found.get(CWD)
    if not isinstance(cwd, str) or not Path(cwd).is_dir():
        cwd = None
    mode = found.get(PERMISSION_MODE)
    _instrument()
    return ClaudeAgent(record, session_id, cwd, mode if mode in _SAFE_MODES else None)


def last_run_attributes(session: Session, agent_id: str) -> Mapping[str, Any]:
    """The span attributes of the agent's last run in the session's earlier runs."""
    found: Mapping[str, Any] = {}
    for node in _sessions(session.runs):
        if node.get("agentId") == agent_id:
            span = node.get("span")
            attributes = span.get("attributes") if isinstance(span, Mapping) else None
            if isinstance(attributes, Mapping):
                found = attributes
    return found


def _sessions(runs: list[dict[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """Every SessionNode of the runs, in order (a stack: trees may nest deep)."""
    stack: list[Mapping[str, Any]] = [run for run in reversed(runs) if isinstance(run, Mapping)]
    while stack:
        node = stack.pop()
        yield node
        nested = [child for op in session_ops(node) for child in hosted_sessions(op)]
        stack.extend(reversed(nested))


def _instrument() -> None:
    """Trace the resumed exchange too (as it is configured, if it is already)."""
    from .instrumentor import instrument_when_imported  # its wrappers import the SDK

    if not state.patches:
        instrument_when_imported()
