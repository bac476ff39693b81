"""Reading opTrees back: the readers every view shares.

An opTree (``SessionNode`` -> ``TurnNode`` -> ``OperationNode``, with sub-agent ``SessionNode``s
under the op that ran them) is read from session files, which may be damaged or edited by hand.
These helpers skip anything that is not what it should be, so every view shows what is there.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any


def finite_number(value: Any) -> float | None:
    """A count, an amount or a time as recorded, as a float; ``None`` for anything else: not a
    number, a boolean, NaN or an infinity, or an integer too large for a float (``10**400``
    is valid JSON, and ``float()``, ``math.isfinite`` and ``f"{x:.2f}"`` raise on it)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        result = float(value)
    except OverflowError:
        return None
    return result if math.isfinite(result) else None


def journal_origin(run: Mapping[str, Any]) -> str | None:
    """The run whose journal steps a root run's are (a re-entered run journals under the
    interrupted one's: its ``originTxnId``), or ``None`` when its file does not say."""
    for key in ("originTxnId", "txnId", "id"):
        value = run.get(key)
        if isinstance(value, str):
            return value
    return None


def children(node: Mapping[str, Any], key: str) -> Iterator[Mapping[str, Any]]:
    """The objects listed under ``node[key]`` (``turns``, ``ops``, ``accounting``, ...).

    Trees are read back from session files, which may be damaged or edited by hand: anything
    that is not a list of objects is skipped, so every reader shows what is there instead of
    failing on it.
    """
    value = node.get(key)
    if isinstance(value, list):
        yield from (item for item in value if isinstance(item, Mapping))


def session_ops(session: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """A SessionNode's ops, turn by turn."""
    for turn in children(session, "turns"):
        yield from children(turn, "ops")


def hosted_sessions(op: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The sub-agent SessionNodes an op ran, in order: its ``childSessions`` when it hosted
    several, its ``childSession`` when it hosted one. Files of earlier releases have both
    (``childSession`` a copy of the first): ``childSessions`` is then the whole list."""
    hosted = list(children(op, "childSessions"))
    if not hosted:
        first = op.get("childSession")
        if isinstance(first, Mapping):
            hosted = [first]
    yield from hosted


MAX_OP_NESTING = 32
"""Ops nest at most this deep under the ops that ran them in a view (deeper ones stay at the
deepest level shown: a damaged file may chain thousands)."""


def op_parents(ops: Sequence[Mapping[str, Any]]) -> list[int | None]:
    """For each op of a turn, the index of the op of the same turn it ran inside (its span's
    parent is that op's span: a tool called by a tool, or by a code agent's code), else None.

    The opTree keeps a turn's ops in one list, in start order; the spans keep the nesting. Only
    an earlier op can be a parent (so a damaged file makes no cycle), at most
    :data:`MAX_OP_NESTING` deep."""
    index_of: dict[str, int] = {}
    depth: list[int] = []
    parents: list[int | None] = []
    for index, op in enumerate(ops):
        span = op.get("span")
        parent_id = span.get("parentSpanId") if isinstance(span, Mapping) else None
        parent = index_of.get(parent_id) if isinstance(parent_id, str) else None
        if parent is not None and depth[parent] >= MAX_OP_NESTING:
            parent = None
        parents.append(parent)
        depth.append(0 if parent is None else depth[parent] + 1)
        op_id = op.get("opId")
        if isinstance(op_id, str):
            index_of.setdefault(op_id, index)
    return parents


def agent_names(runs: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """agent id -> the name its runs carry in the opTrees (``agentName``: the name given to
    ``@agent``, else the class or function's), sub-agents included; the first name wins. The
    events name only agents created with a name, so this is how views name a root agent."""
    names: dict[str, str] = {}
    pending = [run for run in runs if isinstance(run, Mapping)][::-1]  # popped in order
    while pending:  # not recursive: a session nests as deep as its sub-agents did
        session = pending.pop()
        agent_id, name = session.get("agentId"), session.get("agentName")
        if isinstance(agent_id, str) and isinstance(name, str) and name:
            names.setdefault(agent_id, name)
        hosted = [child for op in session_ops(session) for child in hosted_sessions(op)]
        pending.extend(reversed(hosted))
    return names


def has_usage(entry: Mapping[str, Any]) -> bool:
    """True if an accounting entry reports token usage (a failed attempt usually has none:
    its ``inputTokens`` and ``outputTokens`` are null)."""
    tokens = entry.get("tokens")
    if not isinstance(tokens, Mapping):
        return False
    return any(
        finite_number(tokens.get(key)) is not None for key in ("inputTokens", "outputTokens")
    )


def cost_unknown(entry: Mapping[str, Any]) -> bool:
    """True for an LLM accounting entry of unknown price: no ``costUsd`` (its model is missing
    from litellm's price map, or nothing priced the call), though it succeeded or reported
    usage. Views show it as unknown, never as free; a real zero (a model priced at 0) is a
    price. A failed attempt that reported no usage is not one: there is nothing to price, and
    a provider bills no request it refused. Nor is an interrupted attempt (a kill cut it short:
    ``stats`` counts it as interrupted, what it cost is the provider's bill's to say)."""
    if entry.get("type") != "llm" or finite_number(entry.get("costUsd")) is not None:
        return False
    if entry.get("status") == "interrupted":  # a kill cut it short: counted as interrupted
        return False
    return entry.get("status") != "failed" or has_usage(entry)


def owner_run(
    runs: Sequence[Mapping[str, Any]], origin: str, label: str
) -> Mapping[str, Any] | None:
    """The run (a root run of origin ``origin``, or a sub-agent run under it) whose turns hold
    the op at path label ``label``, if the tree has it."""
    roots = [run for run in runs if origin in (run.get("originTxnId"), run.get("txnId"))]
    stack: list[Mapping[str, Any]] = list(reversed(roots or list(runs)))
    while stack:
        session = stack.pop()
        for turn in session.get("turns") or []:
            for op in turn.get("ops") or [] if isinstance(turn, Mapping) else []:
                if not isinstance(op, Mapping):
                    continue
                if op.get("path") == label:
                    return session
                stack.extend(hosted_sessions(op))
    return None
