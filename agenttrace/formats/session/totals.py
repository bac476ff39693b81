"""Totals over a session's whole opTree, sub-agents included: by agent and by model.

Pure functions over the session file's ``runs`` (``SessionNode`` dicts): tokens in, out and
cache, cost, LLM attempts ok, failed and interrupted (a kill cut them short: their entry, status
``interrupted``, has no tokens or cost, though the provider may have billed them), tool calls,
and wall time. A tool call counts for the
model the agent asked last before it (the reply that asked for it); one before any LLM call
counts for no model.

Cost is never guessed: an LLM call whose price is unknown (its model is missing from
litellm's price map) makes the total unknown. Each row then has ``cost_usd`` null,
``cost_usd_known`` the sum of the prices that are known (a lower bound) and
``llm_attempts_cost_unknown`` the number of calls without one; :func:`cost_text` words it as
``at least $0.000123 (2 calls of unknown cost)``. A model priced at 0 costs ``$0``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from agenttrace.formats.session.optree import (
    children,
    cost_unknown,
    finite_number,
    hosted_sessions,
    session_ops,
)
from agenttrace.model.amounts import cost_written, latency_written


def _empty() -> dict[str, Any]:
    return {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "cost_usd": 0.0,
        "cost_usd_known": 0.0,
        "llm_attempts_cost_unknown": 0,
        "llm_attempts_ok": 0,
        "llm_attempts_failed": 0,
        "llm_attempts_interrupted": 0,
        "tool_calls": 0,
        "tool_calls_failed": 0,
    }


def _number(value: Any) -> float:
    """A count or an amount as recorded; 0 for anything else (a damaged or hand-edited file)."""
    if finite_number(value) is None:
        return 0
    return value  # type: ignore[no-any-return]  # an int stays an int: counts are exact


def _add_accounting(totals: dict[str, Any], entry: Mapping[str, Any]) -> None:
    failed = entry.get("status") == "failed"
    if entry.get("type") == "llm" and entry.get("status") == "interrupted":
        # Cut short by a kill: no tokens or cost known, whatever the provider billed.
        totals["llm_attempts_interrupted"] += 1
    elif entry.get("type") == "llm":
        tokens = entry.get("tokens")
        if not isinstance(tokens, Mapping):
            tokens = {}
        totals["input_tokens"] += _number(tokens.get("inputTokens"))
        totals["output_tokens"] += _number(tokens.get("outputTokens"))
        totals["cache_read_tokens"] += _number(tokens.get("cacheReadInputTokens"))
        totals["cache_write_tokens"] += _number(tokens.get("cacheWriteInputTokens"))
        totals["cost_usd_known"] += _number(entry.get("costUsd"))
        if cost_unknown(entry):
            totals["llm_attempts_cost_unknown"] += 1
        totals["llm_attempts_failed" if failed else "llm_attempts_ok"] += 1
    else:
        totals["tool_calls"] += 1
        if failed:
            totals["tool_calls_failed"] += 1


def _sessions(node: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield node
    for op in session_ops(node):
        for child in hosted_sessions(op):
            yield from _sessions(child)


def session_stats(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"total", "by_agent", "by_model", "runs", "wall_time_ms"}`` for ``runs``."""
    total = _empty()
    by_agent: dict[str, dict[str, Any]] = {}
    by_model: dict[str, dict[str, Any]] = {}
    wall = 0.0
    for run in runs:
        wall += _number(run.get("latencyMs"))
        for session in _sessions(run):
            agent_id = str(session.get("agentId"))
            agent = by_agent.setdefault(
                agent_id, {"agent_id": agent_id, "name": session.get("agentName"), **_empty()}
            )
            agent["wall_time_ms"] = agent.get("wall_time_ms", 0.0) + _number(
                session.get("latencyMs")
            )
            model: str | None = None  # the model this agent asked last: its tool calls' own
            for op in session_ops(session):
                for entry in children(op, "accounting"):
                    _add_accounting(total, entry)
                    _add_accounting(agent, entry)
                    if entry.get("type") == "llm":
                        model = f"{entry.get('provider') or '?'}:{entry.get('model') or '?'}"
                    if model is not None:
                        _add_accounting(
                            by_model.setdefault(model, {"model": model, **_empty()}), entry
                        )
    for row in (total, *by_agent.values(), *by_model.values()):
        row["cost_usd_known"] = cost_written(row["cost_usd_known"])
        row["cost_usd"] = None if row["llm_attempts_cost_unknown"] else row["cost_usd_known"]
        if "wall_time_ms" in row:
            row["wall_time_ms"] = latency_written(row["wall_time_ms"])
    return {
        "runs": len(runs),
        "wall_time_ms": latency_written(wall),
        "total": total,
        "by_agent": list(by_agent.values()),
        "by_model": list(by_model.values()),
    }


def cost_text(row: Mapping[str, Any]) -> str:
    """A row's cost for a person: ``$0.000123``; ``at least $0.000123 (2 calls of unknown
    cost)`` when some calls have no price; ``unknown (2 calls of unknown cost)`` when none
    that cost anything has one."""
    known = finite_number(row.get("cost_usd_known"))
    if known is None:  # a row from before the field: only the total
        known = finite_number(row.get("cost_usd")) or 0.0
    unknown = row.get("llm_attempts_cost_unknown")
    if not isinstance(unknown, int) or isinstance(unknown, bool) or unknown <= 0:
        return f"${known:.6f}"
    calls = f"{unknown} call{'' if unknown == 1 else 's'} of unknown cost"
    return f"at least ${known:.6f} ({calls})" if known > 0 else f"unknown ({calls})"
