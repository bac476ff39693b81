"""Hostile files too large to keep in the repository, built by code: each once crashed or hung
a reader or a view (the regression cases in tests/fuzz/regressions/ are the small ones)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agenttrace.formats.session.files import snapshot_bytes


def _stream(events: list[dict[str, Any]]) -> bytes:
    return b"".join((json.dumps(event) + "\n").encode() for event in events)


def _task_call(message: str, agent: str, call: str, name: str) -> dict[str, Any]:
    arguments = json.dumps({"name": name})
    return {
        "message_id": message,
        "event_type": "transcript_entry",
        "agent_id": agent,
        "role": "assistant",
        "tool_calls": [{"id": call, "function": {"name": "task", "arguments": arguments}}],
    }


def agent_chain(length: int = 2000) -> bytes:
    """Each agent created by the one before: ``load_session`` rebuilt them recursively, one
    Python frame per generation, and died of a RecursionError past ~1,000."""
    events: list[dict[str, Any]] = [
        {"message_id": "msg_001", "event_type": "agent_created", "agent_id": "agent_001"}
    ]
    number = 1
    for generation in range(1, length):
        parent, child = f"agent_{generation:03d}", f"agent_{generation + 1:03d}"
        number += 1
        call = f"msg_{number:03d}"
        events.append(_task_call(call, parent, f"call_{generation}", child))
        number += 1
        events.append(
            {
                "message_id": f"msg_{number:03d}",
                "event_type": "agent_created",
                "agent_id": child,
                "name": child,
                "cause": call,
            }
        )
    return _stream(events)


def open_task_calls(count: int = 10_000) -> bytes:
    """One entry with ``count`` unanswered ``task`` calls, then ``count`` agents created in
    the older spelling (no ``cause``): finding each one's call scanned every call (quadratic),
    and the HTML page scanned every event for each agent's perspective; over the CPU deadline."""
    calls = [
        {"id": f"call_{n}", "function": {"name": "task", "arguments": "{}"}} for n in range(count)
    ]
    events: list[dict[str, Any]] = [
        {"message_id": "msg_001", "event_type": "agent_created", "agent_id": "agent_001"},
        {
            "message_id": "msg_002",
            "event_type": "transcript_entry",
            "agent_id": "agent_001",
            "role": "assistant",
            "tool_calls": calls,
        },
    ]
    for n in range(count):
        events.append(
            {
                "message_id": f"msg_{n + 3:03d}",
                "event_type": "agent_created",
                "agent_id": f"agent_{n + 2:03d}",
                "name": f"N{n}",
            }
        )
    return _stream(events)


def nested_sub_agents(depth: int = 150) -> bytes:
    """A session file whose opTree nests sub-agents ``depth`` deep (six JSON levels each, so
    nearly as deep as Python's JSON reader goes): every view walks the tree recursively."""
    root: dict[str, Any] = {"path": "0", "agentId": "agent_001", "agentName": "Root"}
    node = root
    for level in range(depth):
        child: dict[str, Any] = {"path": "1.1", "agentId": f"agent_{level + 2:03d}"}
        op = {
            "path": "1.1",
            "kind": "tool",
            "name": "task",
            "status": "ok",
            "childSessions": [child],
        }
        node["turns"] = [{"path": "1", "index": 1, "ops": [op]}]
        node = child
    events = [{"message_id": "msg_001", "event_type": "agent_created", "agent_id": "agent_001"}]
    text = json.dumps(root)  # json.dumps recurses: built as text to stay clear of its limit
    return snapshot_bytes("nested", [text.encode()], _stream(events).splitlines(True), {})


CRAFTED: dict[str, tuple[str, Callable[[int], bytes], int, int]] = {
    "agent-chain": ("agent-chain.events.jsonl", agent_chain, 500, 4000),
    "open-task-calls": ("open-task-calls.events.jsonl", open_task_calls, 2500, 20_000),
    "nested-sub-agents": ("nested-sub-agents.json.gz", nested_sub_agents, 20, 150),
}
"""name -> (the file's name, what builds its bytes from a size, a small size, a large one, eight
times the small and at least the size that once broke a reader): each case runs at both sizes
and is judged by how its cost grows (tests/fuzz/test_regressions.py)."""
