"""Validating a STD-008 document (STD-008, section 6): its format
(:mod:`agenttrace.formats.std008.schema`), then the consistency checks between its parts.

The checks of section 6.2 report STD-008's own messages (``sub_session X has invalid
trigger``, ``Task call X references missing sub_session``, ``Message X from unknown agent``).
Its first two rules name the triggering tool ``Task`` (Claude Code's); agenttrace's sessions run
sub-agents from tools of any name (the cafe's ``discuss``), and a sub-agent may run its own. So
by default a call that carries ``subagent_info`` is a trigger whatever its name, and a
sub-session's trigger is looked up where its ``parent_session_id`` says (the session's calls,
or the calls of the sub-session that ran it). ``strict=True`` applies STD-008's rules to the
letter: only a call named ``Task``, in the session's own ``tool_calls``.

Beyond STD-008, ids that link parts must be unique, every message goes to a known agent and
every sub-session's agent is a participant. The checks read the decoded JSON defensively, so
they report what they can also on a document the format check refused.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from agenttrace._internal.config import DEFAULT_MAX_NESTING_DEPTH
from agenttrace.formats.std008.schema import check

TASK_TOOL = "Task"
"""The name STD-008's section 6.2 gives the tool that starts a sub-agent."""


def validate(
    document: Any, *, strict: bool = False, max_depth: int = DEFAULT_MAX_NESTING_DEPTH
) -> list[str]:
    """Every problem of ``document`` (decoded JSON), one line each: the first way it is not of
    the format (``$.path: what``), then each failed consistency check. Empty: it is valid."""
    errors: list[str] = []
    problem = check(document, max_depth)
    if problem is not None:
        errors.append(str(problem))
        if problem.what.startswith("nested more than"):
            return errors  # not worth walking
    if isinstance(document, Mapping):
        errors.extend(consistency_errors(document, strict=strict))
    return errors


def consistency_errors(document: Mapping[str, Any], *, strict: bool = False) -> list[str]:
    """The consistency checks of section 6 (and agenttrace's own) on ``document``."""
    errors: list[str] = []
    session_id = document.get("session_id")
    calls = list(_objects(document.get("tool_calls")))
    subs = list(_objects(document.get("sub_sessions")))
    collaboration = document.get("collaboration")
    if not isinstance(collaboration, Mapping):
        collaboration = {}
    mode = collaboration.get("mode")
    if mode == "multi_agent" and isinstance(document.get("sub_sessions"), list) and not subs:
        errors.append("multi_agent session has no sub_session (section 6.1: at least one)")
    if mode == "single" and subs:
        errors.append("single-agent session has sub_sessions (collaboration.mode is single)")

    by_id: dict[Any, Mapping[str, Any]] = {}
    for sub in subs:
        key = _key(sub.get("sub_session_id"))
        if key in by_id:
            errors.append(f"sub_session_id {_shown(key)} is not unique")
        by_id.setdefault(key, sub)
    all_calls = [*calls, *(call for sub in subs for call in _objects(sub.get("tool_calls")))]
    seen_calls: set[Any] = set()
    for call in all_calls:
        key = _key(call.get("call_id"))
        if key in seen_calls:
            errors.append(f"call_id {_shown(key)} is not unique")
        seen_calls.add(key)

    # Section 6.2: every sub-session has a valid trigger.
    for sub in subs:
        trigger = _key(sub.get("triggered_by_call_id"))
        if strict:
            where = calls
        else:
            parent = _key(sub.get("parent_session_id"))
            host = by_id.get(parent) if parent != _key(session_id) else None
            where = list(_objects(host.get("tool_calls"))) if host is not None else calls
        found = [c for c in where if _key(c.get("call_id")) == trigger]
        if not found or not _is_trigger(found[0], strict):
            errors.append(f"sub_session {_shown(sub.get('sub_session_id'))} has invalid trigger")

    # Section 6.2: every Task call's sub-session exists.
    for call in calls if strict else all_calls:
        if not _is_trigger(call, strict):
            continue
        info = call.get("subagent_info")
        linked = [info.get("sub_session_id")] if isinstance(info, Mapping) else []
        if (
            not strict
            and isinstance(info, Mapping)
            and isinstance(info.get("sub_session_ids"), list)
        ):
            linked.extend(info["sub_session_ids"])
        for sub_id in linked:
            if sub_id and _key(sub_id) not in by_id:
                errors.append(
                    f"Task call {_shown(call.get('call_id'))} references missing sub_session"
                )
                break

    # Section 6.2: messages come from known agents (and, agenttrace adds, go to one).
    agents = {_key(_agent_id(collaboration.get("orchestrator")))}
    agents.update(_key(_agent_id(p)) for p in _objects(collaboration.get("participants")))
    for message in _objects(document.get("messages")):
        shown = _shown(message.get("message_id"))
        if _key(_agent_id(message.get("from_agent"))) not in agents:
            errors.append(f"Message {shown} from unknown agent")
        if _key(_agent_id(message.get("to_agent"))) not in agents:
            errors.append(f"Message {shown} to unknown agent")
    for sub in subs:
        agent = _agent_id(sub.get("agent"))
        if _key(agent) not in agents:
            errors.append(
                f"sub_session {_shown(sub.get('sub_session_id'))} is run by {_shown(agent)}, "
                "not a participant"
            )
    return errors


def _is_trigger(call: Mapping[str, Any], strict: bool) -> bool:
    """Whether ``call`` starts sub-agents: named ``Task`` (STD-008), or, unless ``strict``,
    carrying ``subagent_info``."""
    if call.get("tool_name") == TASK_TOOL:
        return True
    return not strict and isinstance(call.get("subagent_info"), Mapping)


def _objects(value: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(value, list):
        yield from (item for item in value if isinstance(item, Mapping))


def _agent_id(identifier: Any) -> Any:
    return identifier.get("agent_id") if isinstance(identifier, Mapping) else None


def _key(value: Any) -> Any:
    """``value`` as a key to compare ids by (an id that is a list or object is never equal to
    anything: it failed the format check already)."""
    return value if isinstance(value, (str, int, float, bool)) or value is None else object()


def _shown(value: Any, limit: int = 100) -> str:
    """An id as it goes into a message: one line, cut to ``limit`` characters."""
    text = value if isinstance(value, str) else repr(value)
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text if len(text) <= limit else text[: limit - 1] + "…"
