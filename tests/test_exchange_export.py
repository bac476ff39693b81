"""``agenttrace export --format exchanges``: any session, litellm agents' too, as seed 004's
exchange log, one ``exchange`` per root run. The cafe demo (run as a user runs it) field for
field; a failed tool call, a failed run, a run that never ended and a call nobody priced."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from agenttrace.formats.session.files import LoadedFile
from agenttrace.formats.session.fullest import load_fullest
from agenttrace.formats.session.totals import session_stats
from agenttrace.views.exports import exchanges_jsonl, to_exchanges

from .helpers import record_demo_here

TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
TIMES = ("ts", "ts_start", "ts_end")
MODEL = "anthropic/claude-sonnet-4-5-20250929"


def without_times(line: dict[str, Any]) -> dict[str, Any]:
    for key in TIMES:
        if line.get(key) is not None:
            assert TS.match(line[key]), (key, line[key])
    stripped = {k: v for k, v in line.items() if k not in TIMES}
    if isinstance(stripped.get("messages"), list):
        stripped["messages"] = [without_times(m) for m in stripped["messages"]]
    return stripped


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> LoadedFile:
    """The cafe demo's session: its stream's events and its session file's runs."""
    directory = tmp_path_factory.mktemp("exchanges")
    snapshot, _ = record_demo_here(directory)
    return load_fullest(snapshot)


def said(text: str, parent: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"source": "assistant", "type": "text", "text": text}
    if parent:
        message["parent_tool_use_id"] = parent
    return message


def asked(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "source": "assistant",
        "type": "tool_use",
        "tool_use_id": call_id,
        "name": name,
        "input": arguments,
    }


def got(call_id: str, output: str, is_error: bool = False) -> dict[str, Any]:
    return {
        "source": "tool",
        "type": "result",
        "tool_use_id": call_id,
        "is_error": is_error,
        "output": output,
    }


JACK, JILL = "Hi, I'm Jack. *extends hand*", "*smiles* Hello Jack, I'm Jill."
CAFE_MESSAGES = [
    asked("c1", "task", {"name": "Jack", "system_prompt": "You work in HR..."}),
    got("c1", "Created subagent: Jack"),
    asked("c2", "task", {"name": "Jill", "system_prompt": "You are an aspiring author..."}),
    got("c2", "Created subagent: Jill"),
    asked(
        "c3",
        "discuss",
        {"prompt": "You meet in a cafe. Introduce yourselves.", "speakers": ["Jack", "Jill"]},
    ),
    said(JACK, parent="c3"),
    got("c3", JACK),
    said(JILL, parent="c3"),
    got("c3", JILL),
    said("Jack and Jill have met in the cafe and introduced themselves."),
]


def test_the_demo_is_one_exchange_field_for_field(demo: LoadedFile) -> None:
    start, exchange, end = to_exchanges(demo)
    (run,) = demo.runs
    assert without_times(start) == {
        "type": "session_start",
        "session_id": demo.session_id,
        "model": MODEL,
        "cwd": run["attributes"]["ingress"]["cli"]["cwd"],
        "tools_available": None,
        "permission_mode": None,
    }
    total = session_stats(demo.runs)["total"]
    stats = exchange["stats"]
    assert without_times(exchange) == {
        "type": "exchange",
        "session_id": demo.session_id,
        "exchange": 1,
        "user_input": "Create Jack and Jill for a cafe discussion",
        "messages": CAFE_MESSAGES,
        "stats": {
            "num_turns": 4,
            "duration_ms": round(run["latencyMs"]),
            "duration_api_ms": stats["duration_api_ms"],
            "tokens_in": total["input_tokens"]
            - total["cache_read_tokens"]
            - total["cache_write_tokens"],
            "tokens_out": total["output_tokens"],
            "cache_creation": total["cache_write_tokens"],
            "cache_read": total["cache_read_tokens"],
            "cost_usd": round(total["cost_usd"], 12),
        },
    }
    llm_ms = [op["latencyMs"] for op in _ops(run) if op["kind"] == "llm"]
    assert len(llm_ms) == 6  # the root agent's four, Jack's and Jill's
    assert stats["duration_api_ms"] == round(sum(llm_ms))
    assert total["cache_read_tokens"] > 0 and stats["tokens_in"] > 0
    assert without_times(end) == {
        "type": "session_end",
        "session_id": demo.session_id,
        "total_exchanges": 1,
        "total_duration_ms": stats["duration_ms"],
        "total_duration_api_ms": stats["duration_api_ms"],
        "total_cost_usd": stats["cost_usd"],
        "total_tokens": {
            "input": stats["tokens_in"],
            "output": stats["tokens_out"],
            "cache_creation": stats["cache_creation"],
            "cache_read": stats["cache_read"],
        },
        "tools_used": {"task": 2, "discuss": 1},
    }


def test_the_jsonl_is_the_lines_compact(demo: LoadedFile) -> None:
    text = exchanges_jsonl(demo)
    assert text.endswith("\n") and ": " not in text.splitlines()[0]
    assert [json.loads(line) for line in text.splitlines()] == to_exchanges(demo)


def test_failed_and_unfinished_runs(demo: LoadedFile) -> None:
    """Op 1.2 (the call c1) failed and so did the run; a second run never ended and heard
    nothing; an LLM call nobody priced makes the cost unknown, never 0."""
    loaded = copy.deepcopy(demo)
    run = loaded.runs[0]
    run["success"], run["error"] = False, "RuntimeError: the cafe closed"
    run["turns"][0]["ops"][1]["status"] = "failed"
    run["turns"][1]["ops"][0]["accounting"][0]["costUsd"] = None
    unfinished = copy.deepcopy(run)
    unfinished["traceId"] = "0" * 31 + "1"
    for key in ("endedAt", "success", "error", "latencyMs"):
        del unfinished[key]
    loaded.runs.append(unfinished)
    _, failed, never_ended, end = to_exchanges(loaded)
    assert failed["error"] == "RuntimeError: the cafe closed"
    assert failed["messages"][1] == {
        **got("c1", "Created subagent: Jack", is_error=True),
        "ts": failed["messages"][1]["ts"],
    }
    assert [m["is_error"] for m in failed["messages"] if m["type"] == "result"].count(True) == 1
    assert failed["stats"]["cost_usd"] is None
    assert never_ended["stats"] is None and never_ended["ts_end"] is None
    assert never_ended["user_input"] is None and never_ended["messages"] == []
    assert "error" not in never_ended
    assert end["total_exchanges"] == 2 and end["total_cost_usd"] is None
    assert end["tools_used"] == {"task": 4, "discuss": 2}
    assert end["total_tokens"]["output"] == failed["stats"]["tokens_out"]  # the last with stats


def test_a_stream_without_runs_has_no_exchange(demo: LoadedFile) -> None:
    loaded = copy.deepcopy(demo)
    loaded.runs = []
    start, end = to_exchanges(loaded)
    assert start["type"] == "session_start" and start["model"] is None
    assert end["total_exchanges"] == 0 and end["total_cost_usd"] == 0


def _ops(node: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for turn in node.get("turns", []):
        for op in turn.get("ops", []):
            found.append(op)
            for child in op.get("childSessions", []):
                found.extend(_ops(child))
    return found


def test_a_session_files_path_exports_the_same(demo: LoadedFile) -> None:
    assert demo.path.name.endswith(".json.gz")
    assert to_exchanges(demo.path) == to_exchanges(demo)
