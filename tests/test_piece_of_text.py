"""``agenttrace.piece_of_text()``: text a tool call makes for delivery to agents is logged once,
caused by the reply that asked for the call, and each agent that hears it points to it."""

from __future__ import annotations

from typing import Any

import agenttrace

from .conftest import Traced
from .test_agent_api import chat, tool_call_reply


class Listener:
    def __init__(self, name: str) -> None:
        self.name = name
        self.transcript: list[str] = []

    @agenttrace.hears
    def harken(self, text: str) -> None:
        self.transcript.append(text)


def events_of(kind: str) -> list[dict[str, Any]]:
    return [e for e in agenttrace.current_session().events if e["event_type"] == kind]


def test_a_piece_of_text_is_logged_once_and_each_hearer_points_to_it(traced: Traced) -> None:
    listeners = [Listener("Jack"), Listener("Jill")]
    made: list[agenttrace.LoggedString] = []

    @agenttrace.tool
    def announce(place: str) -> str:
        text = agenttrace.piece_of_text(f"We meet at the {place}. Introduce yourselves.")
        made.append(text)
        for listener in listeners:
            listener.harken(text)
        return "announced"

    @agenttrace.agent("Host")
    def host() -> None:
        chat(messages=[], reply=tool_call_reply(("c1", "announce", {"place": "cafe"})))
        announce("cafe")

    host()
    (asked,) = [e for e in events_of("transcript_entry") if e.get("tool_calls")]
    (piece,) = events_of("piece_of_text")
    host_id = asked["agent_id"]
    assert piece == {
        **{k: piece[k] for k in ("message_id", "ts", "trace_id", "span_id", "path")},
        "event_type": "piece_of_text",
        "agent_id": host_id,
        "content": "We meet at the cafe. Introduce yourselves.",
        "cause": asked["message_id"],
    }
    (text,) = made
    assert isinstance(text, agenttrace.LoggedString) and text.message_id == piece["message_id"]
    assert text == "We meet at the cafe. Introduce yourselves."
    heard = [e for e in events_of("transcript_entry") if e.get("role") == "user"]
    names = {e["agent_id"]: e["name"] for e in events_of("agent_created")}
    assert [(names[e["agent_id"]], e["substance"], e["content"]) for e in heard] == [
        ("Jack", piece["message_id"], str(text)),
        ("Jill", piece["message_id"], str(text)),
    ]
    viewer = agenttrace.SessionViewer(agenttrace.current_session())
    assert viewer.trace_content_references(piece["message_id"]) == heard
    assert [e["message_id"] for e in viewer.trace_message_flow(heard[1]["message_id"])] == [
        asked["message_id"],
        piece["message_id"],
        heard[1]["message_id"],
    ]


def test_without_a_tool_call_a_model_asked_for_no_piece_is_logged(traced: Traced) -> None:
    """Outside a tool call, or in one no model asked for, there is no cause to name: the text
    comes back as a ``LoggedString`` without an id, and nothing is logged."""
    outside = agenttrace.piece_of_text("Hello.")

    @agenttrace.tool
    def unasked() -> agenttrace.LoggedString:
        return agenttrace.piece_of_text("Hello again.")

    @agenttrace.agent("Host")
    def host() -> agenttrace.LoggedString:
        return unasked()

    inside = host()
    for text, content in ((outside, "Hello."), (inside, "Hello again.")):
        assert isinstance(text, agenttrace.LoggedString) and text == content
        assert text.message_id is None
    assert events_of("piece_of_text") == []
