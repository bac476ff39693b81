"""``tree`` and ``stats`` of a real traced run: cache writes shown, tool calls counted by model,
and costs and latencies written at a fixed precision (the ledger, the opTree, ``stats``)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import agenttrace
from agenttrace import semconv as sc
from agenttrace.formats.session.files import read_session_file, snapshot_path
from agenttrace.formats.session.optree import MAX_OP_NESTING, op_parents
from agenttrace.formats.session.totals import session_stats
from agenttrace.model.amounts import COST_DECIMALS, LATENCY_DECIMALS
from agenttrace.views.tree import render_optree

from .conftest import Traced


def anthropic_reply(model: str, cache_read: int, cache_write: int) -> dict[str, Any]:
    """An Anthropic-shaped message, as ``record_response`` reads it."""
    return {
        "model": model,
        "role": "assistant",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "cache_read_input_tokens": cache_read,
            "cache_creation_input_tokens": cache_write,
        },
    }


def ask(model: str, cache_read: int = 0, cache_write: int = 0, cost: float = 0.1 + 0.2) -> None:
    """One LLM attempt of ``model``; its cost carries float noise (0.30000000000000004)."""
    with agenttrace.llm(f"anthropic/{model}") as attempt:
        attempt.set_attribute(sc.COST_USD, cost)
        attempt.record_response(anthropic_reply(model, cache_read, cache_write))


def use(name: str) -> None:
    with agenttrace.tool(name, arguments={}) as call:
        call.set_result("done")


def recorded_runs(traced: Traced, tmp_path: Path, session: agenttrace.Session) -> list[Any]:
    traced.handle.force_flush()
    return read_session_file(snapshot_path(tmp_path / "sessions", session.session_id)).runs


def line_of(lines: list[str], label: str) -> str:
    """The tree line of the op labelled ``label``."""
    (line,) = (line for line in lines if line.lstrip("│├└─ ").startswith(f"{label} "))
    return line


def test_tree_shows_cache_reads_and_writes(traced: Traced, tmp_path: Path) -> None:
    session = agenttrace.new_session()
    with agenttrace.agent("Cached"), agenttrace.turn():
        ask("reader", cache_read=30, cache_write=20)
        ask("writer", cache_write=20)
        ask("plain")
    lines = render_optree(recorded_runs(traced, tmp_path, session))
    reader, writer, plain = (line_of(lines, label) for label in ("1.1", "1.2", "1.3"))
    assert "in 60 out 5 (cache r 30 w 20)" in reader  # input counts the cache on top (Anthropic)
    assert "in 30 out 5 (cache r 0 w 20)" in writer
    assert "in 10 out 5 " in plain and "cache" not in plain


def test_stats_counts_each_tool_call_for_the_model_that_asked_for_it(
    traced: Traced, tmp_path: Path
) -> None:
    session = agenttrace.new_session()

    @agenttrace.agent("Helper")
    def helper() -> None:
        with agenttrace.turn():
            ask("small")
            use("lookup")

    with agenttrace.agent("Lead"), agenttrace.turn():
        use("before any model")  # no model asked for it
        ask("big")
        use("search")
        with agenttrace.tool("delegate", arguments={}) as call:
            helper()
            call.set_result("delegated")
        ask("small")
        use("write")
    totals = session_stats(recorded_runs(traced, tmp_path, session))
    by_model = {row["model"]: row for row in totals["by_model"]}
    assert {name: row["tool_calls"] for name, row in by_model.items()} == {
        "anthropic:big": 2,  # search, delegate
        "anthropic:small": 2,  # the helper's lookup, the lead's write
    }
    assert totals["total"]["tool_calls"] == 5
    assert {name: row["llm_attempts_ok"] for name, row in by_model.items()} == {
        "anthropic:big": 1,
        "anthropic:small": 2,
    }


def decimals(value: float) -> int:
    """How many decimals ``value`` is written with in JSON."""
    text = json.dumps(value)
    assert "e" not in text, text
    return len(text.partition(".")[2])


def test_costs_and_latencies_are_written_at_a_fixed_precision(
    traced: Traced, tmp_path: Path
) -> None:
    session = agenttrace.new_session()
    with agenttrace.agent("Priced"), agenttrace.turn():
        ask("m1")
        ask("m2", cost=1.3e-10 * 7)  # seven tokens of the cheapest price: kept, not rounded to 0
        use("t")
    traced.handle.force_flush()
    ledger = [json.loads(line) for line in (tmp_path / "accounting.jsonl").read_text().splitlines()]
    assert [line["costUsd"] for line in ledger if line["type"] == "llm"] == [0.3, 9.1e-10]
    assert all(decimals(line["latency"]) <= LATENCY_DECIMALS for line in ledger)
    runs = recorded_runs(traced, tmp_path, session)
    ops = [op for turn in runs[0]["turns"] for op in turn["ops"]]
    assert all(decimals(op["latencyMs"]) <= LATENCY_DECIMALS for op in ops)
    assert decimals(runs[0]["latencyMs"]) <= LATENCY_DECIMALS
    totals = session_stats(runs)
    assert totals["total"]["cost_usd"] == round(0.3 + 9.1e-10, COST_DECIMALS) == 0.30000000091
    assert decimals(totals["wall_time_ms"]) <= LATENCY_DECIMALS
    assert all(decimals(row["wall_time_ms"]) <= LATENCY_DECIMALS for row in totals["by_agent"])


def test_tree_nests_a_tool_under_the_tool_that_called_it(traced: Traced, tmp_path: Path) -> None:
    session = agenttrace.new_session()

    @agenttrace.tool
    def inner() -> str:
        return "in"

    @agenttrace.tool
    def outer() -> str:
        return inner() + inner()

    with agenttrace.agent("Nesting"), agenttrace.turn():
        outer()
        use("after")
    runs = recorded_runs(traced, tmp_path, session)
    ops = runs[0]["turns"][0]["ops"]
    assert [op["name"] for op in ops] == ["outer", "inner", "inner", "after"]
    assert op_parents(ops) == [None, 0, 0, None]
    lines = render_optree(runs)
    depth = {label: indent(line_of(lines, label)) for label in ("1.1", "1.2", "1.3", "1.4")}
    assert depth["1.1"] == depth["1.4"] < depth["1.2"] == depth["1.3"]


def indent(line: str) -> int:
    return len(line) - len(line.lstrip("│├└─ "))


def test_op_nesting_in_a_damaged_file_makes_no_cycle_and_stays_shallow() -> None:
    """Parents are read from span ids, which a damaged file may point anywhere: only an earlier
    op is a parent, and a chain stops nesting at MAX_OP_NESTING."""
    chain = [{"opId": f"{n:016x}", "span": {"parentSpanId": f"{n - 1:016x}"}} for n in range(100)]
    parents = op_parents(chain)
    assert parents[: MAX_OP_NESTING + 1] == [None, *range(MAX_OP_NESTING)]
    assert parents[MAX_OP_NESTING + 1] is None  # too deep: back at the top
    loop = [
        {"opId": "a", "span": {"parentSpanId": "b"}},
        {"opId": "b", "span": {"parentSpanId": "a"}},
        {"opId": "c", "span": {"parentSpanId": "c"}},
        {"opId": "d", "span": "not a span"},
    ]
    assert op_parents(loop) == [None, 0, None, None]
    run = {"path": "0", "turns": [{"path": "1", "index": 1, "ops": chain}]}
    assert len(render_optree([run], width=1000)) == 1 + 1 + 1 + 100  # every op, once


def test_tree_gives_a_failed_tool_calls_sizes_without_a_none(
    traced: Traced, tmp_path: Path
) -> None:
    """A tool call that raised returned nothing: its line gives the size of what it was given,
    never ``chars 13/None``."""
    session = agenttrace.new_session()

    @agenttrace.tool
    def charge(amount: int) -> str:
        raise RuntimeError("declined")

    with agenttrace.agent("Shop"), agenttrace.turn():
        with contextlib.suppress(RuntimeError):
            charge(5)
        use("after")
    lines = render_optree(recorded_runs(traced, tmp_path, session))
    failed, after = line_of(lines, "1.1"), line_of(lines, "1.2")
    assert "failed" in failed and "None" not in failed
    assert failed.rstrip().endswith(" chars 13")  # {"amount": 5}
    assert after.rstrip().endswith(" chars 2/4")  # {} and done


def test_tree_follow_into_a_pipe_ends_the_trees_last_line(traced: Traced, tmp_path: Path) -> None:
    """Piped (no terminal), ``tree --follow`` prints the tree once and the session's status on
    a line of its own, not glued to the last node's."""
    from .test_cli import agenttrace as run_cli
    from .test_cli import ok

    session = agenttrace.new_session()
    with agenttrace.agent("Piped"), agenttrace.turn():
        use("last")
    traced.handle.force_flush()
    snapshot = snapshot_path(tmp_path / "sessions", session.session_id)
    lines = ok(run_cli(tmp_path, "tree", "--follow", str(snapshot))).splitlines()
    assert lines[-1] == f"session {session.session_id}: ended"
    assert "1.1 tool last ok" in lines[-2]
