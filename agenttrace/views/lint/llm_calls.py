"""Rules on an agent's LLM attempts: a logical call with too many attempts (AT201), retries
sent with no backoff (AT202), the model asked again with nothing new (AT203), input growing
past a share of the model's context window (AT204).

A logical call is its attempts in one turn: attempt 1, then 2, 3, ... (``attempt`` in their
accounting entries: retries by an SDK, litellm, a Router or the program, docs/how-to/litellm.md,
"Retries are attempts")."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping, Sequence

from agenttrace.formats.session.optree import children, finite_number
from agenttrace.views.lint.finding import UNKNOWN
from agenttrace.views.lint.model_map import context_window
from agenttrace.views.lint.rule import Found, LintContext, Rule, label
from agenttrace.views.lint.walk import Node, calls, entry_of, payload, waste


def _attempt(op: Node) -> int | None:
    entry = entry_of(op)
    value = finite_number(entry.get("attempt")) if entry is not None else None
    if value is None:
        span = op.get("span")
        attributes = span.get("attributes") if isinstance(span, Mapping) else None
        if isinstance(attributes, Mapping):
            value = finite_number(attributes.get("agenttrace.attempt"))
    return None if value is None else int(value)


def logical_calls(turn: Node) -> list[list[Node]]:
    """A turn's LLM attempts grouped by logical call, in order."""
    groups: list[list[Node]] = []
    previous: int | None = None
    for op in children(turn, "ops"):
        if op.get("kind") != "llm":
            continue
        attempt = _attempt(op)
        if groups and attempt is not None and previous is not None and attempt > previous:
            groups[-1].append(op)
        else:
            groups.append([op])
        previous = attempt
    return groups


def _turns(context: LintContext) -> Iterator[tuple[int, Node]]:
    for agent in context.runs:
        for turn in children(agent.node, "turns"):
            yield agent.run, turn


def _failed(ops: Sequence[Node]) -> list[Node]:
    return [op for op in ops if op.get("status") != "ok"]


def retry_storm(context: LintContext) -> Iterator[Found]:
    """AT201: a logical call that took more than ``max_attempts`` attempts."""
    most = max(1, context.settings.max_attempts)
    for run, turn in _turns(context):
        for group in logical_calls(turn):
            if len(group) > most:
                failed = _failed(group)
                yield Found(
                    f"one call to {group[0].get('name')} took {len(group)} attempts "
                    f"({len(failed)} failed; at most {most} expected), at {label(group[0])}"
                    f"..{label(group[-1])}",
                    run,
                    tuple(group),
                    waste(failed),
                )


def _start_ns(op: Node) -> float | None:
    span = op.get("span")
    if isinstance(span, Mapping) and finite_number(span.get("startTimeUnixNano")) is not None:
        return finite_number(span.get("startTimeUnixNano"))
    started = finite_number(op.get("startedAt"))
    return None if started is None else started * 1e6


def _end_ns(op: Node) -> float | None:
    span = op.get("span")
    if isinstance(span, Mapping) and finite_number(span.get("endTimeUnixNano")) is not None:
        return finite_number(span.get("endTimeUnixNano"))
    ended = finite_number(op.get("endedAt"))
    return None if ended is None else ended * 1e6


def no_backoff(context: LintContext) -> Iterator[Found]:
    """AT202: a retry sent less than ``min_backoff_ms`` after the failed attempt before it."""
    least = context.settings.min_backoff_ms
    if least <= 0:
        return
    for run, turn in _turns(context):
        for group in logical_calls(turn):
            hasty: list[Node] = []
            for before, after in itertools.pairwise(group):
                ended, started = _end_ns(before), _start_ns(after)
                if before.get("status") == "ok" or ended is None or started is None:
                    continue
                if (started - ended) / 1e6 < least:
                    hasty.append(before)
            if hasty:
                yield Found(
                    f"{len(hasty)} attempt(s) of one call to {group[0].get('name')} retried "
                    f"within {least:g} ms of failing, at {', '.join(label(op) for op in hasty)}",
                    run,
                    tuple(group),
                    waste(hasty),
                )


def _new_input(turn: Node) -> bool | None:
    """Whether the first LLM attempt of ``turn`` sent anything after the agent's previous
    reply (its recorded ``request`` is that delta); ``None`` when the file does not say."""
    first = next((op for op in children(turn, "ops") if op.get("kind") == "llm"), None)
    text = None if first is None else payload(first, "request")
    if text is None:
        return None
    try:
        sent = json.loads(text)
    except ValueError:
        return None
    messages = sent.get("messages") if isinstance(sent, Mapping) else sent
    return None if not isinstance(messages, list) else bool(messages)


def idle_turns(context: LintContext) -> Iterator[Found]:
    """AT203: after a turn that called no tool, turns that asked the model again with nothing
    new to say (no tool result, no user message)."""
    least = max(1, context.settings.idle_min_turns)
    for agent in context.runs:
        turns = list(children(agent.node, "turns"))
        with_tools = {id(call.turn) for call in calls(agent.node)}
        index = 1
        while index < len(turns):
            streak: list[Node] = []
            while (
                index < len(turns)
                and id(turns[index - 1]) not in with_tools
                and any(op.get("kind") == "llm" for op in children(turns[index - 1], "ops"))
                and _new_input(turns[index]) is False
            ):
                streak.append(turns[index])
                index += 1
            if len(streak) >= least:
                ops = [
                    op for turn in streak for op in children(turn, "ops") if op.get("kind") == "llm"
                ]
                yield Found(
                    f"{len(streak)} turn(s) asked the model again with nothing new after a reply "
                    f"that called no tool, at {', '.join(label(turn) for turn in streak)}",
                    agent.run,
                    tuple(streak),
                    waste(ops),
                )
            index += 1


def context_growth(context: LintContext) -> Iterator[Found]:
    """AT204: LLM attempts whose input tokens pass ``window_share`` of their model's window
    (one finding per agent run, from the first such attempt)."""
    share = context.settings.window_share
    for agent in context.runs:
        past: list[tuple[Node, int, int]] = []
        for op in (op for turn in children(agent.node, "turns") for op in children(turn, "ops")):
            entry = entry_of(op)
            if op.get("kind") != "llm" or entry is None:
                continue
            tokens = entry.get("tokens")
            used = finite_number(tokens.get("inputTokens")) if isinstance(tokens, Mapping) else None
            model, provider = entry.get("model"), entry.get("provider")
            window = context.settings.context_window or (
                context_window(model, provider if isinstance(provider, str) else None)
                if isinstance(model, str)
                else None
            )
            if used is not None and window and used > share * window:
                past.append((op, int(used), window))
        if past:
            op, used, window = past[-1]
            yield Found(
                f"input reached {used:,} tokens of {op.get('name')}'s {window:,}-token window "
                f"({used / window:.0%}, past {share:.0%}) at {label(op)}; "
                f"{len(past)} attempt(s) past it, from {label(past[0][0])}",
                agent.run,
                tuple(op for op, _, _ in past),
                UNKNOWN,
            )


RULES = (
    Rule("AT201", "retry-storm", "a logical LLM call with too many attempts", retry_storm),
    Rule("AT202", "retry-without-backoff", "a retry sent at once after a failure", no_backoff),
    Rule("AT203", "idle-turn", "the model asked again with nothing new", idle_turns),
    Rule("AT204", "context-window", "input tokens past a share of the window", context_growth),
)
