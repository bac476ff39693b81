"""What a replayed tool call's body logged (docs/design/replay.md, "The replay session"): a
sub-agent created inside a tool call, and what it heard and said, is in the replay session
once, whether the call is served from the recording (its body does not run: what it logged is
copied when it is served) or runs live after a lenient divergence (its body logs it again: no
copy). In the Session, its saved session file and its event stream; and ``agenttrace tree``
and ``diff`` read the replay session as one run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agenttrace
from agenttrace.views.account import read_account

from .conftest import Traced
from .llm_server import LLMServer, Reply
from .test_cli import agenttrace as run_cli
from .test_cli import ok
from .test_replay import CHARGES, record, script, session_file, shop_agent

EVENT_TYPES = ("agent_created", "transcript_entry", "transcript_reset", "piece_of_text")
"""The stream's canonical events (its other lines: the journal's, the accounting's)."""
BARISTA = [("user", "which tea?"), ("assistant", "Green tea.")]


def baristas(events: list[dict[str, Any]]) -> tuple[int, list[tuple[Any, Any]]]:
    """How many times Barista was created among ``events``, and what every Barista said and
    heard there."""
    created = [
        e for e in events if e.get("event_type") == "agent_created" and e.get("name") == "Barista"
    ]
    ids = {e["agent_id"] for e in created}
    said = [
        (e.get("role"), e.get("content"))
        for e in events
        if e.get("event_type") == "transcript_entry" and e.get("agent_id") in ids
    ]
    return len(created), said


def stream_events(tmp_path: Path, session: agenttrace.Session) -> list[dict[str, Any]]:
    path = tmp_path / "sessions" / f"{session.session_id}.events.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [line for line in lines if line.get("event_type") in EVENT_TYPES]


@pytest.mark.parametrize("body", ["live", "served"])
def test_a_sub_agent_of_a_replayed_tool_call_is_in_the_replay_session_once(
    traced: Traced, tmp_path: Path, llm: LLMServer, body: str
) -> None:
    source = record(traced, llm, shop_agent(llm))
    if body == "live":
        # The first prompt was edited: the replay diverges before ask_barista, whose body
        # (Barista, asking the model) then runs live.
        llm.reset(*script())
        edited = shop_agent(llm, edited_first=True)
        expected = (3, [5, 5])  # every LLM call asked, the charge made again
    else:
        # The last prompt was edited: ask_barista is served before the divergence.
        llm.reset(Reply(content="Here is your green tea."))
        edited = shop_agent(llm, edited=True)
        expected = (1, [5])
    with agenttrace.replaying(source.session_id, mode="lenient") as replay:
        assert edited("a tea, please") == "Here is your green tea."
    assert (len(llm.requests), CHARGES) == expected
    divergence = replay.report.divergence
    assert divergence is not None and divergence.kind == "llm"
    assert replay.report.served == (0 if body == "live" else 3)
    traced.handle.force_flush()

    (barista,) = [r for r in replay.session.agents.values() if r.name == "Barista"]
    assert [(e.get("role"), e.get("content")) for e in barista.transcript] == BARISTA
    assert baristas(replay.session.events) == (1, BARISTA)
    saved = session_file(traced, tmp_path, replay.session.session_id)
    assert baristas(saved["events"]) == (1, BARISTA)
    streamed = stream_events(tmp_path, replay.session)
    assert baristas(streamed) == (1, BARISTA)
    # The stream is in message-id order, no id twice (a copy takes the next one).
    numbers = [int(e["message_id"].removeprefix("msg_")) for e in streamed]
    assert numbers == sorted(set(numbers))

    # Read back (as tree and diff read it, the stream included), the replay session holds one
    # run: the copies are logged in the served call's span, not in the source's trace.
    replay_file = tmp_path / "sessions" / f"{replay.session.session_id}.json.gz"
    assert len(read_account(replay_file).loaded.runs) == 1
    sessions = str(tmp_path / "sessions")
    tree = ok(run_cli(tmp_path, "tree", replay.session.session_id, "--sessions-dir", sessions))
    assert "run 1:" in tree and "run 2:" not in tree
    assert ("Barista" in tree) == (body == "live")  # a sub-agent run only where it ran
    source_file = tmp_path / "sessions" / f"{source.session_id}.json.gz"
    diff = agenttrace.diff_runs(source_file, replay_file)
    assert diff.first_divergence is not None
    assert diff.first_divergence.label_a == divergence.label
