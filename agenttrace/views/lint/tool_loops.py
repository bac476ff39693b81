"""Rules on an agent's tool calls in a row: the same call again and again (AT101), the same
failing call again (AT102), two calls in turn (AT103), a tool polled with no progress (AT104).

A call is the same as another when its tool's name and its recorded arguments are (and, for
AT101 and AT104, its result): payloads cut by their cap are never the same as anything."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from agenttrace.views.lint.finding import Waste
from agenttrace.views.lint.rule import Found, LintContext, Rule, describe, label
from agenttrace.views.lint.walk import Call, Node, calls, llm_ops, payload, turn_llm_ops, waste

Key = tuple[str, str]


def _key(call: Call) -> Key | None:
    name, arguments = call.op.get("name"), payload(call.op, "request")
    return None if not isinstance(name, str) or arguments is None else (name, arguments)


def _streaks(items: Sequence[Call], same: Callable[[Call, Call], bool]) -> Iterator[list[Call]]:
    """The maximal runs of consecutive ``items`` each ``same`` as the one before it."""
    start = 0
    for index in range(1, len(items) + 1):
        if index == len(items) or not same(items[index - 1], items[index]):
            yield list(items[start:index])
            start = index


def _asked_again(streak: Sequence[Call]) -> Waste:
    """What the calls after the first of ``streak`` cost: the LLM attempts of the turns that
    asked for them (not the first call's turn), and what ran inside those calls."""
    first_turn = streak[0].turn
    turns = [call.turn for call in streak[1:] if call.turn is not first_turn]
    return waste([*turn_llm_ops(turns), *llm_ops([call.op for call in streak[1:]])])


def _ops(streak: Sequence[Call]) -> tuple[Node, ...]:
    return tuple(call.op for call in streak)


def _labels(streak: Sequence[Call]) -> str:
    return ", ".join(label(call.op) for call in streak)


def repeated(context: LintContext) -> Iterator[Found]:
    """AT101: identical calls (tool, arguments, result) in a row, each asked in a later turn."""
    least = max(2, context.settings.repeat_min_calls)
    for agent in context.runs:
        made = [call for call in calls(agent.node) if call.op.get("status") == "ok"]

        def same(a: Call, b: Call) -> bool:
            result = payload(a.op, "response")
            return (
                _key(a) is not None
                and _key(a) == _key(b)
                and result is not None
                and result == payload(b.op, "response")
                and b.turn_index > a.turn_index
            )

        for streak in _streaks(made, same):
            if len(streak) >= least:
                name, arguments = _key(streak[0]) or ("?", "")
                yield Found(
                    f"{name} called {len(streak)} times in a row with the same arguments "
                    f"({describe(arguments)}) and the same result, at {_labels(streak)}",
                    agent.run,
                    _ops(streak),
                    _asked_again(streak),
                )


def repeated_failure(context: LintContext) -> Iterator[Found]:
    """AT102: the same call failing, again and again in a row."""
    least = max(2, context.settings.failing_min_calls)
    for agent in context.runs:

        def same(a: Call, b: Call) -> bool:
            failed = a.op.get("status") == b.op.get("status") == "failed"
            return failed and _key(a) is not None and _key(a) == _key(b)

        for streak in _streaks(calls(agent.node), same):
            if len(streak) >= least and streak[0].op.get("status") == "failed":
                name, arguments = _key(streak[0]) or ("?", "")
                error = streak[-1].op.get("error")
                yield Found(
                    f"{name} failed {len(streak)} times in a row with the same arguments "
                    f"({describe(arguments)}), at {_labels(streak)}"
                    + (f": {describe(error)}" if isinstance(error, str) else ""),
                    agent.run,
                    _ops(streak),
                    _asked_again(streak),
                )


def ping_pong(context: LintContext) -> Iterator[Found]:
    """AT103: two different calls in turn, A-B-A-B, for at least ``pingpong_min_cycles``."""
    least = 2 * max(2, context.settings.pingpong_min_cycles)
    for agent in context.runs:
        made = calls(agent.node)
        keys = [_key(call) for call in made]
        index = 0
        while index + 1 < len(made):
            a, b = keys[index], keys[index + 1]
            if a is None or b is None or a == b:
                index += 1
                continue
            end = index + 2
            while end < len(made) and keys[end] is not None and keys[end] == keys[end - 2]:
                end += 1
            if end - index >= least:
                streak = made[index:end]
                yield Found(
                    f"{a[0]} and {b[0]} called in turn {end - index} times "
                    f"({describe(a[1], 30)} / {describe(b[1], 30)}), at {_labels(streak)}",
                    agent.run,
                    _ops(streak),
                    _asked_again(streak[1:]),
                )
                index = end - 1
            else:
                index += 1


def polling(context: LintContext) -> Iterator[Found]:
    """AT104: one tool called again and again within one turn (by code: no model asked), every
    result the same as the one before."""
    least = max(2, context.settings.poll_min_calls)
    for agent in context.runs:

        def same(a: Call, b: Call) -> bool:
            result = payload(a.op, "response")
            return (
                a.turn is b.turn
                and a.op.get("name") == b.op.get("name")
                and result is not None
                and result == payload(b.op, "response")
            )

        for streak in _streaks(calls(agent.node), same):
            if len(streak) >= least:
                result = payload(streak[0].op, "response")
                yield Found(
                    f"{streak[0].op.get('name')} polled {len(streak)} times in one turn with no "
                    f"progress (every result {describe(result, 40)}), at {_labels(streak)}",
                    agent.run,
                    _ops(streak),
                    waste(llm_ops([call.op for call in streak[1:]])),
                )


RULES = (
    Rule("AT101", "repeated-tool-call", "the same tool, arguments and result in a row", repeated),
    Rule("AT102", "repeated-failing-call", "the same failing tool call again", repeated_failure),
    Rule("AT103", "ping-pong", "two tool calls in turn, A-B-A-B", ping_pong),
    Rule("AT104", "polling-without-progress", "a tool polled with no change", polling),
)
