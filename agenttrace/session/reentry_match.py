"""Whether the next root run re-enters the interrupted run a resume armed (docs/journal.md,
"Re-entry").

Only a call of the interrupted run's entry point (the same name) with the same arguments (the
same fingerprint), with no message heard by an agent since the resume, re-enters it: anything
else is a new question. A journal of an earlier release says nothing of the arguments: its run
is re-entered by the next run, whatever it is, as then.

Any other run drops the armed re-entry before it starts: the transcripts the resume set back
are put back as the killed run left them (with what was heard since), the tool calls it left
without a result are answered by the resume's ``unanswered_tool_calls``, and one INFO line
says why and how to re-enter. The run is then a new one, exactly as after
``resume(reenter=False)``.
"""

from __future__ import annotations

import logging
from typing import Any

from agenttrace._internal.errors import report_internal_error
from agenttrace.model import events as ev
from agenttrace.model.journal_lines import RUN_LABEL
from agenttrace.model.reentry import Reentry
from agenttrace.model.replay import ReplayDivergence
from agenttrace.model.rewind import undo_rewind
from agenttrace.model.unanswered import MAX_CLOSED, close_unanswered_calls

logger = logging.getLogger("agenttrace")


def why_not(
    session: Any, reentry: Reentry, name: str, fingerprint: str | None, implicit: bool
) -> str | None:
    """Why the root run ``name`` starting now in ``session`` (its arguments' ``fingerprint``;
    ``implicit``: made by ``init()`` around LLM calls outside a decorated run) is not the
    interrupted run ``reentry`` stands for, or ``None`` if it is."""
    if reentry.fingerprint is None:  # a journal of an earlier release: as it was then
        return None
    if implicit:
        return "is an implicit run (LLM calls outside any decorated run), which re-enters none"
    if name != reentry.name:
        return f"is {name!r}"
    if fingerprint != reentry.fingerprint:
        return "has other arguments"
    if _heard_since_resume(session, reentry):
        return "follows a message an agent heard since the resume (a new question)"
    return None


def _heard_since_resume(session: Any, reentry: Reentry) -> bool:
    """Whether a transcript entry was logged since the resume set the transcripts back: the run
    has input the interrupted run did not have (``@agenttrace.hears``)."""
    if reentry.rewound is None:
        return False
    since = session.events[reentry.rewound.events :]
    return any(event.get("event_type") == ev.TRANSCRIPT_ENTRY for event in since)


def enters(
    session: Any, reentry: Reentry, name: str, fingerprint: str | None, implicit: bool
) -> bool:
    """Whether the root run starting now re-enters ``reentry``'s run; if not, the re-entry is
    dropped (see the module docstring)."""
    try:
        why = why_not(session, reentry, name, fingerprint, implicit)
        if why is None:
            return True
        drop(session, reentry, f"the run starting now, {name!r}, {why}")
    except Exception as exc:
        report_internal_error("resume", exc)
    return False


def replay_enters(
    session: Any, reentry: Reentry, name: str, fingerprint: str | None, implicit: bool
) -> None:
    """The root run starting now in a replay session: the source run's entry point with its
    arguments, or a divergence at the run's start (strict: raised; lenient: it runs live)."""
    rules = reentry.replay
    if rules is None or why_not(session, reentry, name, fingerprint, implicit) is None:
        return
    error = ReplayDivergence(RUN_LABEL, "run", rules.run, name, fingerprint)
    raised = rules.diverge(error)
    if raised is not None:
        raise raised


def drop(session: Any, reentry: Reentry, why: str) -> None:
    """Leave ``reentry``'s run interrupted: put the transcripts back as it left them, answer
    its unanswered tool calls, and say so (one INFO line, ``why`` in it)."""
    if reentry.rewound is not None:
        undo_rewind(session, reentry.rewound)
    logger.info(
        "agenttrace: session %s: its interrupted run %s (%s) is not re-entered: %s; it is a "
        "new run, with the transcripts as the interrupted run left them (to re-enter that run, "
        "call %s with the same arguments first after the resume)",
        session.session_id,
        reentry.origin,
        reentry.name,
        why,
        reentry.name,
    )
    closed, left = close_unanswered_calls(session, reentry.unanswered)
    say_unanswered(session.resumed_from, closed, left)


def say_unanswered(path: Any, closed: int, left: int) -> None:
    """The warning for the tool calls a resumed session's crash left without a result:
    ``closed`` answered as interrupted, ``left`` past the most a resume answers."""
    if not closed and not left:
        return
    past = f", {left} left as they are (past the {MAX_CLOSED} a resume answers)"
    logger.warning(
        "agenttrace: %s left %d tool %s without a result (its process was killed); %d "
        "answered as interrupted, so the transcript can be sent to a model again%s",
        path,
        closed + left,
        "call" if closed + left == 1 else "calls",
        closed,
        past if left else "",
    )
