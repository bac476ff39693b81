"""Agents in the session registry: who an agent run is, and registering new agents.

The rule for creation (docs/responsibility.md): an agent created inside a tool call names the
assistant message that holds that call as its ``cause``, and whatever its transcript already
holds (a system prompt) is logged with its ``agent_created``, in one write. Scopes are read here
only through the context variable and by duck typing, so the scope module can use this one
without an import cycle.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Sequence
from typing import Any

from agenttrace._internal.context import Linkable, current_scope_var
from agenttrace.model.events import message_fields
from agenttrace.session.state import Session, current_session


def str_attribute(owner: object, name: str) -> str | None:
    """``owner.name`` if it is a non-empty string (an agent's name, id or model)."""
    value = getattr(owner, name, None)
    return value if isinstance(value, str) and value else None


_class_agents: weakref.WeakKeyDictionary[type, str] = weakref.WeakKeyDictionary()
"""The agent ids of classes whose classmethod runs are agents (one agent per class): kept
here, not set as the class's ``agent_id``, which every instance and subclass would inherit."""


def owner_agent_id(owner: object) -> str | None:
    """The agent id ``owner`` (an object whose method runs, or a class for a classmethod) has."""
    if isinstance(owner, type):
        return _class_agents.get(owner)
    return str_attribute(owner, "agent_id")


def session_for_new_agent() -> Session:
    """The session an agent created now belongs to: the running one's, else the current one."""
    scope = current_scope_var.get()
    if scope is not None:
        session: Session = scope.session.run.session
        return session
    return current_session()


def tool_call_message(scope: object) -> str | None:
    """The message id of the assistant entry holding the tool call ``scope`` (an op) answers."""
    message = getattr(scope, "call_message", None)
    return message if isinstance(message, str) else None


def register_agent(
    session: Session,
    *,
    name: str | None,
    language_model: str | None,
    initial: Sequence[Any] = (),
    owner: object = None,
    at: Linkable | None = None,
) -> str:
    """Allocate an id for a new agent, log ``agent_created`` (with the tool call that made it as
    ``cause``) and the entries its transcript starts with, in one write; returns the id."""
    agent_id = session.allocate_agent_id()
    if isinstance(owner, type):
        _class_agents[owner] = agent_id
    elif owner is not None:
        # An object with __slots__ and no agent_id keeps none: the registry still knows it.
        with contextlib.suppress(AttributeError):
            owner.agent_id = agent_id  # type: ignore[attr-defined]
    session.log_agent_created(
        agent_id,
        cause=tool_call_message(current_scope_var.get()),
        name=name,
        language_model=language_model,
        initial=[message_fields(message) for message in initial],
        at=at,
    )
    return agent_id


def agent_of(
    session: Session,
    owner: object,
    name: str | None,
    model: str | None,
    explicit_id: str | None = None,
) -> str:
    """The registered id of the agent ``owner`` (or of the function agent ``name``)."""
    known = explicit_id or (owner_agent_id(owner) if owner is not None else None)
    if known is not None and known in session.agents:
        return known
    if owner is None and known is None and name is not None:
        record = session.agent_named(name)
        if record is not None:
            return record.agent_id
    if known is not None:
        session.log_agent_created(
            known,
            cause=tool_call_message(current_scope_var.get()),
            name=name,
            language_model=model,
        )
        return known
    return register_agent(session, name=name, language_model=model, owner=owner)
