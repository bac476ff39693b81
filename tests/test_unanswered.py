"""Tool calls a crash left without a result are answered on resume (agenttrace.model.unanswered),
so the transcript can be sent to OpenAI's or Anthropic's API again."""

from __future__ import annotations

from typing import Any

import pytest

from agenttrace import Session
from agenttrace.model.unanswered import INTERRUPTED_RESULT, close_unanswered_calls


def call(call_id: str, name: str = "search") -> dict[str, Any]:
    return {"id": call_id, "function": {"name": name, "arguments": "{}"}}


def session_with(*messages: dict[str, Any]) -> Session:
    session = Session("unanswered")
    session.log_agent_created("agent_001", name="Boss")
    for message in messages:
        session.log_transcript_entry("agent_001", message)
    return session


def shape(session: Session) -> list[tuple[Any, ...]]:
    return [
        (m["role"], m.get("tool_call_id"), m.get("content"))
        for m in session.revivify("agent_001").messages()
    ]


def test_calls_left_at_the_end_get_an_interrupted_result_each() -> None:
    session = session_with(
        {"role": "user", "content": "Find tea."},
        {"role": "assistant", "tool_calls": [call("c1"), call("c2", "fetch")]},
        {"role": "tool", "tool_call_id": "c1", "content": "found"},
    )
    assert close_unanswered_calls(session) == (1, 0)
    assert shape(session)[-2:] == [("tool", "c1", "found"), ("tool", "c2", INTERRUPTED_RESULT)]
    closing = session.events[-1]
    assert closing["event_type"] == "transcript_entry" and closing["name"] == "fetch"
    assert close_unanswered_calls(session) == (0, 0)  # once closed, closed


def test_a_call_answered_too_late_is_put_in_place_with_a_reset() -> None:
    session = session_with(
        {"role": "assistant", "tool_calls": [call("c1")]},
        {"role": "user", "content": "Hello?"},
    )
    assert close_unanswered_calls(session) == (1, 0)
    assert shape(session) == [
        ("assistant", None, None),
        ("tool", "c1", INTERRUPTED_RESULT),
        ("user", None, "Hello?"),
    ]
    # The result is new; what followed the gap is referred to by its id, not logged again.
    hello = session.revivify("agent_001").transcript[-1]["message_id"]
    reset, result = session.events[-2:]
    assert (reset["event_type"], result["event_type"]) == ("transcript_reset", "transcript_entry")
    assert reset["reused"] == [1, [hello, hello]] and reset["entries"] == 1


def test_keep_leaves_the_transcript_as_it_is_and_a_bad_policy_is_refused() -> None:
    session = session_with({"role": "assistant", "tool_calls": [call("c1")]})
    assert close_unanswered_calls(session, "keep") == (0, 0)
    assert shape(session) == [("assistant", None, None)]
    with pytest.raises(ValueError, match="unanswered_tool_calls"):
        close_unanswered_calls(session, "drop")  # type: ignore[arg-type]


def test_a_call_without_an_id_is_closed_once() -> None:
    session = session_with({"role": "assistant", "tool_calls": [{"id": None, "function": {
        "name": "x", "arguments": "{}"}}]})  # fmt: skip
    assert close_unanswered_calls(session) == (1, 0)
    assert close_unanswered_calls(session) == (0, 0)


def test_more_calls_than_one_resume_answers_are_left_as_they_are() -> None:
    """Files are untrusted: the work is bounded. An entry with more unanswered calls than the
    limit is left alone (and counted); the others are still closed."""
    session = session_with(
        {"role": "assistant", "tool_calls": [call(f"c{n}") for n in range(5)]},
        {"role": "tool", "tool_call_id": "c0", "content": "done"},
    )
    assert close_unanswered_calls(session, limit=3) == (0, 4)
    assert close_unanswered_calls(session, limit=4) == (4, 0)


def test_a_server_tool_s_call_is_never_closed() -> None:
    """Anthropic ran the web search itself and its result is in the same reply: a result added
    for it would be refused, and only the client's own call is closed."""
    server_call = {**call("srvtoolu_1", "web_search"), "type": "server_tool_use"}
    session = session_with(
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "tool_calls": [server_call, call("c1", "book")]},
    )
    assert close_unanswered_calls(session) == (1, 0)
    assert shape(session)[-1] == ("tool", "c1", INTERRUPTED_RESULT)
    assert close_unanswered_calls(session) == (0, 0)
