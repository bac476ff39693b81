"""Repairing a resumed session's stream before its first append
(``formats.session.repair.repair_stream``) after a crash cut an agent's creation short
(``formats.session.unfinished``): the creation's lines go, and nothing journaled after them is
lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from msgspec import to_builtins

import agenttrace
from agenttrace.formats.session.files import read_session_file
from agenttrace.formats.session.unfinished import unfinished_tail
from agenttrace.model import journal as j
from agenttrace.model import journal_lines as jl
from agenttrace.views.doubts import doubts, resolve

from .conftest import Traced

RUN = "0123456789abcdef"
TS = "2026-11-23T00:32:34.350Z"


def line(message_id: str, more: bool = False, **fields: Any) -> bytes:
    """An event's stream line; ``more``: not the last line of its write (a space before its
    newline, as the stream writes it)."""
    text = json.dumps({"message_id": message_id, **fields, "ts": TS}).encode()
    return text + (b" \n" if more else b"\n")


def created(message_id: str, agent_id: str, name: str) -> bytes:
    return line(message_id, True, event_type="agent_created", agent_id=agent_id, name=name)


def entry(message_id: str, agent_id: str, role: str, content: str, more: bool = False) -> bytes:
    return line(
        message_id, more, event_type="transcript_entry", agent_id=agent_id, role=role,
        content=content,
    )  # fmt: skip


def test_a_decision_journaled_after_a_creation_cut_short_is_kept(
    traced: Traced, tmp_path: Path
) -> None:
    # Boss's tool started a charge (its intent on disk), then created Jill: the process was
    # killed in the middle of that write, before Jill's first user message.
    stream = tmp_path / "sessions" / "cut1.events.jsonl"
    stream.parent.mkdir()
    intent = to_builtins(
        jl.intent_line(
            (RUN, "1.1", 1),
            agent_id="agent_001",
            name="charge",
            effect="effect",
            request_fingerprint="sha256:" + "0" * 64,
            arguments='{"amount": 5}',
        )
    )
    stream.write_bytes(
        created("msg_001", "agent_001", "Boss")
        + entry("msg_002", "agent_001", "system", "be brief")
        + json.dumps(intent).encode()
        + b"\n"
        + created("msg_003", "agent_002", "Jill")
        + entry("msg_004", "agent_002", "system", "help Boss", more=True)
    )
    # A person decides about the charge before resuming: the decision comes after the cut write.
    (doubt,) = doubts(stream)
    resolve(stream, doubt.label, "not_applied")
    assert len(unfinished_tail(stream)) == 2  # the cut write is still told apart
    session = agenttrace.resume(stream)
    assert [event["message_id"] for event in session.cut_short] == ["msg_003", "msg_004"]
    session.log_transcript_entry("agent_001", {"role": "user", "content": "go on"})
    traced.handle.force_flush()
    loaded = read_session_file(stream)
    assert [(e["message_id"], e["agent_id"]) for e in loaded.events] == [
        ("msg_001", "agent_001"),
        ("msg_002", "agent_001"),
        ("msg_003", "agent_001"),  # Jill's cut creation is gone, its ids taken again
    ]
    assert b"agent_002" not in stream.read_bytes()
    step = j.Journal(loaded.journal).step(RUN, "1.1")
    assert step is not None and step.outcome == "decided: not_applied"
    assert doubts(stream) == []


def test_a_first_write_cut_short_is_cut_off_before_the_resumed_session_writes(
    traced: Traced, tmp_path: Path
) -> None:
    # The process was killed in its first write, the root's creation: nothing is restored.
    stream = tmp_path / "sessions" / "cut2.events.jsonl"
    stream.parent.mkdir()
    stream.write_bytes(created("msg_001", "agent_001", "Boss"))
    session = agenttrace.resume(stream)
    assert session.events == [] and len(session.cut_short) == 1
    agent = session.allocate_agent_id()
    session.log_agent_created(agent, name="Boss", initial=[{"role": "system", "content": "hi"}])
    traced.handle.force_flush()
    lines = stream.read_bytes().splitlines()
    assert [json.loads(text)["message_id"] for text in lines] == ["msg_001", "msg_002"]
    assert [e["event_type"] for e in read_session_file(stream).events] == [
        "agent_created",
        "transcript_entry",
    ]
