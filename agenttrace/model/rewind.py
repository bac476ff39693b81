"""Setting transcripts back to an earlier point of a session (a re-entry sets them back to where
the interrupted run started: ``agenttrace.model.reentry``). The stream says so: each agent
whose transcript changed gets a ``transcript_reset`` keeping the entries it shares with the
earlier transcript and restating the rest, so replaying the events gives what the session now
holds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agenttrace.model import events as ev


def rewind_transcripts(session: Any, events: Sequence[Mapping[str, Any]], messages: int) -> None:
    """Set each agent of ``session`` (an ``agenttrace.Session`` restored from ``events``) back
    to the transcript the events up to message number ``messages`` made it: a
    ``transcript_reset`` for each agent whose transcript changed since, logged now. Agents
    created after that point are left as they are."""
    count = 0
    for event in events:
        number = ev.id_number(str(event.get("message_id", "")), ev.MESSAGE_PREFIX)
        if number is None or number > messages:
            break
        count += 1
    at_start = type(session)(session.session_id)
    at_start.restore([dict(event) for event in events[:count]], raw_lines=None)
    for agent_id, then in at_start.agents.items():
        record = session.agents.get(agent_id)
        if record is None:
            continue
        now, before = record.transcript, then.transcript
        kept = 0
        for entry, old in zip(now, before, strict=False):
            if entry.get("message_id") != old.get("message_id"):
                break
            kept += 1
        if kept == len(now) == len(before):
            continue
        session.log_transcript_reset(
            agent_id, kept, [ev.api_message(entry) for entry in before[kept:]]
        )
