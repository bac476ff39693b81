"""Reading a session's runs the way the rules need them: every agent run (sub-agents
included) with the run it belongs to, its tool calls in order, and what a set of LLM attempts
spent. Read from session files, which may be edited by hand: anything that is not what it
should be is skipped (``agenttrace.formats.session.optree``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agenttrace.formats.session.optree import (
    children,
    cost_unknown,
    finite_number,
    has_usage,
    hosted_sessions,
)
from agenttrace.views.lint.finding import Waste

Node = Mapping[str, Any]


@dataclass(frozen=True)
class AgentRun:
    """One agent run: a session's root run or a sub-agent run under it."""

    node: Node
    run: int
    """The 1-based number of the root run it is in (as ``agenttrace tree`` numbers them)."""
    host: Node | None = None
    """The op that ran it (a sub-agent run), else ``None``."""
    caller: AgentRun | None = None
    """The agent run that op belongs to."""


@dataclass(frozen=True)
class Call:
    """One op of an agent run, with the turn it was made in."""

    op: Node
    turn: Node
    turn_index: int
    """0-based position of its turn in its agent run."""


def agent_runs(runs: Sequence[Node]) -> Iterator[AgentRun]:
    """Every agent run of ``runs`` (the session's root runs), each root followed by its
    sub-agent runs, depth first, in start order."""
    pending = [AgentRun(root, number) for number, root in enumerate(runs, 1)][::-1]
    while pending:  # not recursive: a session nests as deep as its sub-agents did
        current = pending.pop()
        yield current
        hosted = [
            AgentRun(child, current.run, op, current)
            for op in own_ops(current.node)
            for child in hosted_sessions(op)
        ]
        pending.extend(reversed(hosted))


def own_ops(session: Node) -> Iterator[Node]:
    """The ops of a run's own turns (not its sub-agents'), turn by turn."""
    for turn in children(session, "turns"):
        yield from children(turn, "ops")


def calls(session: Node, kinds: Iterable[str] = ("tool", "session")) -> list[Call]:
    """The ops of kind ``kinds`` (tool calls, by default) of a run's own turns, in order."""
    wanted = set(kinds)
    return [
        Call(op, turn, index)
        for index, turn in enumerate(children(session, "turns"))
        for op in children(turn, "ops")
        if op.get("kind") in wanted
    ]


def payload(op: Node, key: str) -> str | None:
    """An op's recorded ``request`` or ``response`` payload text, or ``None`` when it has none
    or it was cut by its cap (a cut payload is not the whole value: never equal to another)."""
    holder = op.get(key)
    if not isinstance(holder, Mapping):
        return None
    text = holder.get("payload")
    if not isinstance(text, str) or "…[truncated" in text or "…[+" in text:
        return None
    return text


def span_id(node: Node) -> str | None:
    """A node's span id: an op's ``opId``, a run's ``spanId``, a turn's ``id``."""
    key = "opId" if "opId" in node else "spanId" if "spanId" in node else "id"
    value = node.get(key)
    return value if isinstance(value, str) else None


def where(nodes: Iterable[Node]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The path labels and the span ids of ``nodes`` (those that have one)."""
    listed = list(nodes)
    paths = tuple(str(node["path"]) for node in listed if isinstance(node.get("path"), str))
    spans = tuple(found for node in listed if (found := span_id(node)) is not None)
    return paths, spans


def llm_ops(ops: Iterable[Node], *, within: bool = True) -> Iterator[Node]:
    """The LLM attempts among ``ops``, and with ``within`` those of the sub-agent runs they
    hosted, at any depth."""
    pending = list(ops)[::-1]
    while pending:
        op = pending.pop()
        if op.get("kind") == "llm":
            yield op
        if within:
            for child in hosted_sessions(op):
                pending.extend(reversed(list(own_ops(child))))


def turn_llm_ops(turns: Iterable[Node]) -> list[Node]:
    """The LLM attempts of ``turns`` (each turn once), not those of the sub-agents they ran."""
    seen: set[int] = set()
    found: list[Node] = []
    for turn in turns:
        if id(turn) in seen:
            continue
        seen.add(id(turn))
        found.extend(op for op in children(turn, "ops") if op.get("kind") == "llm")
    return found


def waste(ops: Iterable[Node]) -> Waste:
    """What the LLM attempts ``ops`` spent: their tokens (input + output) and cost, each
    ``None`` when unknown for any of them or when there is none. A failed attempt that
    reported no usage counts as nothing, as ``agenttrace stats`` counts it (a provider bills no
    request it refused)."""
    tokens: int | None = 0
    cost: float | None = 0.0
    counted = 0
    for op in ops:
        if op.get("kind") != "llm":
            continue
        counted += 1
        entries = list(children(op, "accounting"))
        if not entries:  # never ended: nothing says what it spent
            tokens = cost = None
            continue
        entry = entries[0]
        refused = entry.get("status") == "failed" and not has_usage(entry)
        used = None if refused else _tokens(entry)
        if tokens is not None:
            tokens = tokens if refused else (None if used is None else tokens + used)
        price = finite_number(entry.get("costUsd"))
        if cost is not None:
            if price is not None:
                cost += price
            elif cost_unknown(entry) or entry.get("status") == "interrupted":
                cost = None
    if counted == 0:
        return Waste()
    return Waste(tokens, None if cost is None else round(cost, 12))


def _tokens(entry: Mapping[str, Any]) -> int | None:
    usage = entry.get("tokens")
    if not isinstance(usage, Mapping):
        return None
    parts = [finite_number(usage.get(key)) for key in ("inputTokens", "outputTokens")]
    if any(part is None for part in parts):
        return None
    return int(sum(part for part in parts if part is not None))


def entry_of(op: Node) -> Mapping[str, Any] | None:
    """An op's accounting entry, once it ended."""
    return next(iter(children(op, "accounting")), None)
