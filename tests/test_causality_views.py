"""The three causality views of ``SessionViewer`` compared with values worked out by hand, on
the specification's Jack and Jill discussion and inner monologue, plus a piece of text that two
tool calls caused (a list-valued ``cause``), from events, a live session and a file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agenttrace
from agenttrace.formats.session.files import read_session_file

EXAMPLES = json.loads((Path(__file__).parent / "data" / "seed001_examples.json").read_text())[
    "examples"
]

# The root sums up the meeting for both speakers: text two of its tool calls (the discussion,
# msg_011, and Jill's creation, msg_007) made together, heard by Jack.
SUMMARY = [
    {
        "message_id": "msg_040",
        "event_type": "piece_of_text",
        "agent_id": "agent_root",
        "content": "Jack and Jill have met.",
        "cause": ["msg_011", "msg_007"],
    },
    {
        "message_id": "msg_041",
        "event_type": "transcript_entry",
        "agent_id": "agent_jack",
        "role": "user",
        "content": "Jack and Jill have met.",
        "substance": "msg_040",
    },
]

EVENTS: list[dict[str, Any]] = [*EXAMPLES["1"]["events"], *EXAMPLES["2"]["events"], *SUMMARY]

CAUSALITY = {
    # agent creations: the message holding the task call
    "msg_004": "msg_003",
    "msg_008": "msg_007",
    "msg_031": "msg_030",
    # tool results: the message holding the call they answer (c1, c2, c3 twice, c5)
    "msg_006": "msg_003",
    "msg_010": "msg_007",
    "msg_016": "msg_011",
    "msg_019": "msg_011",
    "msg_038": "msg_034",
    # pieces of text: the tool call that made them; of a list, the first
    "msg_012": "msg_011",
    "msg_035": "msg_034",
    "msg_040": "msg_011",
    # heard entries: their substance
    "msg_013": "msg_012",
    "msg_014": "msg_012",
    "msg_017": "msg_015",
    "msg_020": "msg_018",
    "msg_033": "msg_015",
    "msg_036": "msg_035",
    "msg_041": "msg_040",
}

FLOWS = {
    "msg_036": ["msg_034", "msg_035", "msg_036"],  # Inner hears Jill's question
    "msg_020": ["msg_018", "msg_020"],  # Jack hears Jill's reply
    "msg_019": ["msg_011", "msg_019"],  # the root gets Jill's reply as discuss's result
    "msg_041": ["msg_011", "msg_040", "msg_041"],  # through the summary's first cause
    "msg_031": ["msg_030", "msg_031"],
    "msg_002": ["msg_002"],  # the user's prompt came from nothing logged
    "msg_999": [],  # not in the session
}

REFERENCES = {
    "msg_012": ["msg_013", "msg_014"],  # the prompt both speakers heard
    "msg_015": ["msg_017", "msg_033"],  # Jack's words as Jill heard them, twice
    "msg_018": ["msg_020"],
    "msg_035": ["msg_036"],
    "msg_040": ["msg_041"],
    "msg_011": [],  # a tool call is no content anyone heard
    "msg_999": [],
}


def ids(events: list[dict[str, Any]]) -> list[str]:
    return [e["message_id"] for e in events]


def viewers(tmp_path: Path) -> list[agenttrace.SessionViewer]:
    """The events as given, and as an event stream file read back."""
    stream = tmp_path / "discussion.events.jsonl"
    stream.write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    assert read_session_file(stream).events[-2]["cause"] == ["msg_011", "msg_007"]
    return [agenttrace.SessionViewer(EVENTS), agenttrace.SessionViewer(stream)]


@pytest.mark.parametrize("source", ["events", "file"])
def test_the_causality_index_is_what_the_links_say(tmp_path: Path, source: str) -> None:
    viewer = viewers(tmp_path)[source == "file"]
    assert viewer.build_causality_index() == CAUSALITY


@pytest.mark.parametrize("source", ["events", "file"])
def test_a_message_flow_is_its_chain_of_causes_oldest_first(tmp_path: Path, source: str) -> None:
    viewer = viewers(tmp_path)[source == "file"]
    for message, chain in FLOWS.items():
        assert ids(viewer.trace_message_flow(message)) == chain, message
    # The events themselves, not copies of some of their fields.
    (first, *_) = viewer.trace_message_flow("msg_036")
    assert first["tool_calls"][0]["id"] == "c5"


@pytest.mark.parametrize("source", ["events", "file"])
def test_content_references_are_the_entries_standing_for_it(tmp_path: Path, source: str) -> None:
    viewer = viewers(tmp_path)[source == "file"]
    for message, entries in REFERENCES.items():
        assert ids(viewer.trace_content_references(message)) == entries, message


def test_a_cycle_of_causes_ends_the_flow_instead_of_looping() -> None:
    events = [
        {"message_id": "msg_001", "event_type": "agent_created", "agent_id": "a"},
        {"message_id": "msg_002", "event_type": "piece_of_text", "agent_id": "a",
         "content": "x", "cause": "msg_003"},
        {"message_id": "msg_003", "event_type": "piece_of_text", "agent_id": "a",
         "content": "y", "cause": ["msg_002"]},
    ]  # fmt: skip
    viewer = agenttrace.SessionViewer(events)
    assert viewer.build_causality_index() == {"msg_002": "msg_003", "msg_003": "msg_002"}
    assert ids(viewer.trace_message_flow("msg_003")) == ["msg_002", "msg_003"]


def test_a_list_valued_cause_is_kept_through_the_stream_and_a_resume(tmp_path: Path) -> None:
    """Logged through the session API, a piece of text with two causes is written with both,
    read back with both, restored by a resume with both, and the views follow the first."""
    session = agenttrace.Session("summary")
    root = session.allocate_agent_id()
    session.log_agent_created(root, name="Host")
    call = session.log_transcript_entry(
        root,
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "function": {"name": "sum_up", "arguments": "{}"}},
                {"id": "c2", "function": {"name": "sum_up", "arguments": "{}"}},
            ],
        },
    )
    earlier = session.log_transcript_entry(root, {"role": "user", "content": "Earlier words."})
    piece = session.log_piece_of_text(root, "Both said hello.", [call, earlier])
    heard = session.log_transcript_entry(
        root, {"role": "user", "content": "Both said hello."}, substance=piece
    )
    assert session.events[-2]["cause"] == [call, earlier]
    stream = tmp_path / "summary.events.jsonl"
    stream.write_bytes(b"".join(session.event_lines()))
    assert read_session_file(stream).events[-2]["cause"] == [call, earlier]
    restored = agenttrace.Session.load(stream)
    assert restored.events[-2]["cause"] == [call, earlier]
    for viewer in (agenttrace.SessionViewer(session), agenttrace.SessionViewer(stream)):
        assert viewer.build_causality_index()[piece] == call
        assert ids(viewer.trace_message_flow(heard)) == [call, piece, heard]
        assert ids(viewer.trace_content_references(piece)) == [heard]
