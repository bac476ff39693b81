"""Tool calls a crash left without a result, closed when a session is resumed.

A process killed between a model's reply that asks for tools and the tools' results leaves an
assistant entry whose ``tool_calls`` no ``tool`` entry answers. Sent to a model again, such a
transcript is refused: OpenAI's and Anthropic's APIs both require a result for every call, right
after the message that made it. So :func:`close_unanswered_calls` answers each such call when
the session is resumed, by the policy the caller names (docs/how-to/resume.md):

- ``reply`` (the default): a ``tool`` entry per unanswered call, right after the call's
  assistant entry and the results it did get, whose content (:data:`INTERRUPTED_RESULT`) says
  the call was interrupted. The entries are logged as any entry is, so the stream shows what
  was added and when; a call answered later in the transcript than the API allows is closed with
  a ``transcript_reset`` that puts the results in their place.
- ``keep``: nothing is added (for agent code that closes the calls itself).

A server tool's call (Anthropic's web search, say: :func:`~agenttrace.model.events.server_side`)
is never closed: its provider ran it and its result is in the same reply.

Files are untrusted, so the work is bounded: at most :data:`MAX_CLOSED` calls are answered in
one resume (no model asks for that many at once; a file that leaves more unanswered is left
as it is past them, and the warning says so).
"""

from __future__ import annotations

from typing import Any, Literal

from agenttrace.model import events as ev

UnansweredPolicy = Literal["reply", "keep"]
POLICIES: tuple[UnansweredPolicy, ...] = ("reply", "keep")

MAX_CLOSED = 1000
"""At most this many calls are answered in one resume."""

INTERRUPTED_RESULT = (
    "interrupted: the process running this tool call ended before it returned a result "
    "(closed by agenttrace when the session was resumed)"
)


def close_unanswered_calls(
    session: Any, policy: UnansweredPolicy = "reply", limit: int = MAX_CLOSED
) -> tuple[int, int]:
    """Answer the tool calls of every agent's transcript in ``session`` (an
    ``agenttrace.Session``) that have no result, by ``policy``, at most ``limit`` of them;
    returns (how many were answered, how many were left unanswered past the limit)."""
    if policy not in POLICIES:
        raise ValueError(f"unanswered_tool_calls must be one of {POLICIES}, not {policy!r}")
    if policy == "keep":
        return 0, 0
    closed = left = 0
    for agent_id in list(session.agents):
        # Each pass closes the first gap; a transcript has at most one per assistant entry.
        for _ in range(len(session.agents[agent_id].transcript) + 1):
            count, over = _close_first_gap(session, agent_id, limit - closed)
            closed += count
            left += over
            if not count:
                break
    return closed, left


def _close_first_gap(session: Any, agent_id: str, room: int) -> tuple[int, int]:
    """Close the first assistant entry's calls that lack results, if they are at most
    ``room``; (how many it closed, how many it left because they were more)."""
    transcript = session.agents[agent_id].transcript
    for index, entry in enumerate(transcript):
        calls = entry.get("tool_calls") if entry.get("role") == "assistant" else None
        if not isinstance(calls, list) or not calls:
            continue
        end = index + 1
        answered: set[Any] = set()
        while end < len(transcript) and transcript[end].get("role") == "tool":
            answered.add(transcript[end].get("tool_call_id") or "")
            end += 1
        missing = [
            call
            for call in calls
            if (_call_id(call) or "") not in answered and not ev.server_side(call)
        ]
        if not missing:
            continue
        if len(missing) > room:
            return 0, len(missing)
        results = [_result(call) for call in missing]
        if end == len(transcript):
            for result in results:
                session.log_transcript_entry(agent_id, result)
        else:  # entries follow the gap: they move after the results
            rest = [ev.api_message(later) for later in transcript[end:]]
            session.log_transcript_reset(agent_id, end, [*results, *rest])
        return len(missing), 0
    return 0, 0


def _call_id(call: Any) -> Any:
    return call.get("id") if isinstance(call, dict) else None


def _result(call: Any) -> dict[str, Any]:
    """The ``tool`` message that closes ``call``."""
    message: dict[str, Any] = {
        "role": "tool",
        "tool_call_id": _call_id(call) or "",
        "content": INTERRUPTED_RESULT,
    }
    function = call.get("function") if isinstance(call, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if isinstance(name, str) and name:
        message["name"] = name
    return message
