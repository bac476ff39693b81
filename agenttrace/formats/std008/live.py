"""The STD-008 document as it is written while the session runs (``init(std008_dir=...)``,
docs/std008.md, "Written live"): which form section 5.1 gives a session, and the atomic write.

Section 5.1 logs a session with a single Task call as STD-001 with ``SubagentInfo``, and
only several calls (in sequence or in parallel) or a review cycle as STD-008. The export
(:func:`agenttrace.formats.std008.writer.std008_document`) writes every session with
sub-agents in the multi-agent form, so that an imported document comes back as it was; the live
document is :func:`live_form` of it: the same document, in the single-task form when section 5.1
says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agenttrace.formats.session.spool import atomic_file

REVIEW_MESSAGES = frozenset({"review_request", "review_result", "feedback"})
"""Messages that make a review cycle (section 5.1: a Task with one is STD-008)."""
MULTI_AGENT_SUMMARY = ("agents", "tasks", "review_iterations", "final_verdict")
"""The summary's section 3.6 figures, which only a multi-agent document has."""
LINKS = ("sub_session_id", "sub_session_ids")
"""What links a call's ``subagent_info`` to sub-sessions the single-task form does not have."""


def is_single_task(document: Mapping[str, Any]) -> bool:
    """Whether section 5.1 logs ``document`` (an export's) as a single Task call: exactly one
    sub-session, run by a call that ran no other, and no review cycle (no reviewer, no review
    or feedback message)."""
    subs = document.get("sub_sessions")
    if not isinstance(subs, list) or len(subs) != 1:
        return False
    agent = subs[0].get("agent") if isinstance(subs[0], Mapping) else None
    if isinstance(agent, Mapping) and agent.get("agent_type") == "reviewer":
        return False
    messages = document.get("messages")
    return not any(
        isinstance(message, Mapping) and message.get("message_type") in REVIEW_MESSAGES
        for message in messages or ()
    )


def single_task_form(document: Mapping[str, Any]) -> dict[str, Any]:
    """``document`` (an export's, with one sub-session) as STD-001 with ``SubagentInfo``
    (section 8.1's single-agent form): ``collaboration.mode: "single"`` with no participants, no
    sub-sessions or messages, the summary without the multi-agent figures, and the Task call's
    ``subagent_info`` (the sub-agent's type, its tool uses and tokens) without its link to a
    sub-session."""
    single = dict(document)
    collaboration = single.get("collaboration")
    if isinstance(collaboration, Mapping):
        single["collaboration"] = {**collaboration, "mode": "single", "participants": []}
    calls = single.get("tool_calls")
    if isinstance(calls, list):
        single["tool_calls"] = [_unlinked(call) for call in calls]
    single["sub_sessions"] = []
    single["messages"] = []
    summary = single.get("summary")
    if isinstance(summary, Mapping):
        single["summary"] = {k: v for k, v in summary.items() if k not in MULTI_AGENT_SUMMARY}
    return single


def live_form(document: Mapping[str, Any]) -> dict[str, Any]:
    """``document`` (an export's) in the form section 5.1 gives it: the single-task form for
    a single Task call, else as it is (STD-008, or single-agent without sub-agents)."""
    return single_task_form(document) if is_single_task(document) else dict(document)


def live_path(directory: Path, stem: str) -> Path:
    """Where the live document of the session (or joined writer's segment) ``stem`` is
    written: ``<directory>/<stem>.std008.json``, a name that stays while the document changes
    form (section 2.1's name holds the task summary and form, known only later)."""
    return directory / f"{stem}.std008.json"


def replace_document(document: Mapping[str, Any], path: Path) -> None:
    """Write ``document`` over ``path`` atomically: a temporary file in the same directory,
    fsync, ``os.replace`` (a reader sees the last document whole, never part of one)."""
    text = json.dumps(document, ensure_ascii=False, indent=2) + "\n"
    with atomic_file(path) as handle:
        handle.write(text.encode("utf-8", "backslashreplace"))


def _unlinked(call: Any) -> Any:
    if not isinstance(call, Mapping) or not isinstance(call.get("subagent_info"), Mapping):
        return call
    info = {k: v for k, v in call["subagent_info"].items() if k not in LINKS}
    return {**call, "subagent_info": info}
