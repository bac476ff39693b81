"""Links a framework's ids make (docs/events.md, "Which reply heard text stands for"): a
sub-agent's task and its answer, known by the call that ran it, not by their text.

A framework that runs a sub-agent inside a tool call (smolagents' managed agents) says which
call it is: the sub-agent run is hosted by that call's op. So

- the task the call hands over (``OpScope.delivers``, set by the instrumentation) is what the
  first user message the sub-agent is sent in that run stands for (the framework starts the run
  with it, in its own words: a template around it, a hook's edits): a ``piece_of_text`` the call
  made, caused by the assistant entry that holds the call, as any text a tool passes on;
- the call's result is the sub-agent's answer when the framework says so (``OpScope.answer``,
  found from the sub-agent's last reply of that run, ``OpScope.hosted_reply``, kept as the
  replies are logged): the calling agent's tool entry has it as its ``substance``.

Neither depends on the text: a short task or answer, one another agent also said, or one a
hook edited, links the same way. Everything else is left to the content rule
(``agenttrace.model.links``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agenttrace.session.state import Session
from agenttrace.tracing.scopes import OpScope, SessionScope


def piece_for(session: Session, op: OpScope, text: str) -> str | None:
    """The ``piece_of_text`` ``op`` made of ``text`` (logged the first time, caused by the
    assistant entry holding the op's call); ``None`` if that entry is not known."""
    pieces = op.pieces
    if text not in pieces:
        if op.call_message is None:
            return None
        pieces[text] = session.log_piece_of_text(op.session.agent_id, text, op.call_message, at=op)
    return pieces[text]


def delivered(session: Session, run: SessionScope, entry: Mapping[str, Any]) -> str | None:
    """The substance of ``entry``, a message the sub-agent of ``run`` is sent, if it is the
    first user message of the run hosted by an op that hands over a task: that task (the op
    has then delivered it; what follows is the sub-agent's own conversation)."""
    host = run.hosted_by
    task = host.delivers if host is not None else None
    if host is None or not task or entry.get("role", "user") != "user":
        return None
    host.delivers = None
    return piece_for(session, host, task)


def replied(run: SessionScope, message_id: str) -> None:
    """The sub-agent of ``run`` logged the reply ``message_id``: its answer so far."""
    host = run.hosted_by
    if host is not None:
        host.hosted_reply = message_id
