"""Setting transcripts back to an earlier point of a session (a re-entry sets them back to where
the interrupted run started: ``agenttrace.model.reentry``). The stream says so: each agent
whose transcript changed gets a ``transcript_reset`` keeping the entries it shares with the
earlier transcript and restating the rest, so replaying the events gives what the session now
holds.

A rewind can be undone (:func:`undo_rewind`: the resumed run turned out to be a new one), the
entries logged since it kept."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agenttrace.model import events as ev
from agenttrace.model.skipped_bodies import SkippedBodies


@dataclass(frozen=True)
class Rewound:
    """What :func:`rewind_transcripts` changed, so that :func:`undo_rewind` can put it back."""

    before: Mapping[str, list[dict[str, Any]]]
    """Each changed agent's transcript before the rewind."""
    after: Mapping[str, list[Any]]
    """The message ids of each changed agent's transcript just after the rewind."""
    events: int
    """How many events the session held just after the rewind."""
    absent: frozenset[str] = frozenset()
    """The agents the interrupted run created that its re-entry creates again: they did not
    exist when it started (a ``load_session`` factory does not rebuild them)."""


def rewind_transcripts(
    session: Any,
    events: Sequence[Mapping[str, Any]],
    messages: int,
    skipped: SkippedBodies | None = None,
) -> Rewound:
    """Set each agent of ``session`` (an ``agenttrace.Session`` restored from ``events``) back
    to the transcript the events up to message number ``messages`` made it, and those the
    bodies of ``skipped`` calls logged since (a re-entry does not run them again): a
    ``transcript_reset`` for each agent whose transcript changed since, logged now. An agent
    ``skipped`` says the run created and its re-entry creates again is emptied (it did not
    exist); other agents created after that point are left as they are. Returns what
    changed."""
    count = events_before(events, messages)
    absent = skipped.absent(events) if skipped is not None else frozenset()
    at_start = _state(session, events, count, skipped)
    changed: dict[str, list[dict[str, Any]]] = {}
    for agent_id, record in list(session.agents.items()):
        then = at_start.agents.get(agent_id)
        if agent_id not in absent and then is None:
            continue
        now = list(record.transcript)
        if _reset_to(session, agent_id, [] if agent_id in absent else then.transcript):
            changed[agent_id] = now
    after = {agent_id: _ids(session.agents[agent_id].transcript) for agent_id in changed}
    return Rewound(changed, after, len(session.events), absent)


def events_before(events: Sequence[Mapping[str, Any]], messages: int) -> int:
    """How many of ``events`` the session had logged up to message number ``messages`` (a run
    line's ``messages``: where the run started)."""
    count = 0
    for event in events:
        number = ev.id_number(str(event.get("message_id", "")), ev.MESSAGE_PREFIX)
        if number is None or number > messages:
            break
        count += 1
    return count


def events_at_start(
    events: Sequence[Mapping[str, Any]], count: int, skipped: SkippedBodies | None
) -> list[dict[str, Any]]:
    """The first ``count`` events and those the ``skipped`` bodies logged after them: what a
    run the journal answers those calls of starts from (a re-entry's transcripts; a replay
    session's events)."""
    kept = list(events[:count])
    if skipped is not None:
        kept += [event for event in events[count:] if skipped.region(event) is not None]
    return [dict(event) for event in kept]


def _state(
    session: Any, events: Sequence[Mapping[str, Any]], count: int, skipped: SkippedBodies | None
) -> Any:
    """A session restored from the first ``count`` events and those the ``skipped`` bodies
    logged after them (a reset among those that reuses an entry left out places what it
    finds: a reader's rule)."""
    state = type(session)(session.session_id)
    state.restore(events_at_start(events, count, skipped), raw_lines=None)
    return state


def undo_rewind(session: Any, rewound: Rewound) -> None:
    """Put each transcript :func:`rewind_transcripts` set back where it was before, with the
    entries logged since the rewind after it (a ``transcript_reset`` each, logged now). A
    transcript reset otherwise since the rewind is left as it is."""
    for agent_id, before in rewound.before.items():
        record = session.agents.get(agent_id)
        after = rewound.after[agent_id]
        if record is None or _ids(record.transcript[: len(after)]) != after:
            continue
        _reset_to(session, agent_id, [*before, *record.transcript[len(after) :]])


def _reset_to(session: Any, agent_id: str, wanted: Sequence[Mapping[str, Any]]) -> bool:
    """Log the ``transcript_reset`` that makes the agent's transcript ``wanted`` (its entries
    after the longest run of the same message ids), unless it is already: whether it was not."""
    now = session.agents[agent_id].transcript
    kept = 0
    for entry, old in zip(now, wanted, strict=False):
        if entry.get("message_id") != old.get("message_id"):
            break
        kept += 1
    if kept == len(now) == len(wanted):
        return False
    session.log_transcript_reset(agent_id, kept, [ev.api_message(entry) for entry in wanted[kept:]])
    return True


def _ids(transcript: Sequence[Mapping[str, Any]]) -> list[Any]:
    return [entry.get("message_id") for entry in transcript]
