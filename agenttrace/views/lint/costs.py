"""Rules on what the session says was spent and done: a model with no price shown as $0
(AT401), a tool call a kill left in doubt (AT402)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from agenttrace.formats.session.optree import children, finite_number, owner_run
from agenttrace.views.doubts import doubts_of
from agenttrace.views.lint.finding import Waste
from agenttrace.views.lint.model_map import free
from agenttrace.views.lint.rule import Found, LintContext, Rule, describe, label
from agenttrace.views.lint.walk import Node, entry_of, waste


def _zero_priced(op: Node) -> tuple[str, str | None] | None:
    """The model of an LLM attempt that used tokens and says it cost exactly 0, which
    litellm's offline map does not price at 0; else ``None``. A mocked reply (litellm made it
    up, nothing was sent) really is free."""
    entry = entry_of(op)
    if op.get("kind") != "llm" or entry is None or entry.get("mocked") is True:
        return None
    if finite_number(entry.get("costUsd")) != 0:
        return None
    tokens = entry.get("tokens")
    used = (
        [finite_number(tokens.get(key)) for key in ("inputTokens", "outputTokens")]
        if isinstance(tokens, Mapping)
        else []
    )
    model, provider = entry.get("model"), entry.get("provider")
    if not any(used) or not isinstance(model, str):
        return None
    provider = provider if isinstance(provider, str) else None
    return None if free(model, provider) is True else (model, provider)


def unpriced_zero(context: LintContext) -> Iterator[Found]:
    """AT401: LLM attempts that used tokens and are priced $0, for a model litellm's map does
    not price at 0 (unknown is ``null``, which every view shows as unknown): one finding per
    model and run."""
    for number in range(1, len(context.loaded.runs) + 1):
        by_model: dict[str, list[Node]] = {}
        for agent in context.runs:
            if agent.run != number:
                continue
            for turn in children(agent.node, "turns"):
                for op in children(turn, "ops"):
                    found = _zero_priced(op)
                    if found is not None:
                        by_model.setdefault(found[0], []).append(op)
        for model, ops in by_model.items():
            priced = free(model)
            why = "has no price for it" if priced is None else "prices it above 0"
            spent = waste(ops)
            yield Found(
                f"{len(ops)} attempt(s) of {model} shown as $0 though litellm's map {why}: "
                f"the cost is unknown, not free, at {', '.join(label(op) for op in ops)}",
                number,
                tuple(ops),
                Waste(spent.tokens, None),
            )


def in_doubt(context: LintContext) -> Iterator[Found]:
    """AT402: a tool call that started and left no outcome (``agenttrace doubts``): a kill
    struck while it ran, and nothing says whether its effect happened."""
    runs = [run for run in context.loaded.runs if isinstance(run, Mapping)]
    for doubt in doubts_of(context.loaded):
        owner = owner_run(runs, doubt.run, doubt.label)
        ops = [op for turn in children(owner or {}, "turns") for op in children(turn, "ops")]
        nodes = tuple(op for op in ops if op.get("path") == doubt.label)
        number = next(
            (
                index
                for index, run in enumerate(runs, 1)
                if doubt.run in (run.get("originTxnId"), run.get("txnId"))
            ),
            None,
        )
        arguments = "" if doubt.arguments is None else f" ({describe(doubt.arguments, 40)})"
        yield Found(
            f"{doubt.tool}{arguments} at {doubt.label} is in doubt ({doubt.effect}): it started "
            "and left no outcome; decide it with agenttrace resolve",
            number,
            nodes or ({"path": doubt.label},),
        )


RULES = (
    Rule("AT401", "unpriced-zero-cost", "a model with no price shown as $0", unpriced_zero),
    Rule("AT402", "tool-in-doubt", "a tool call left in doubt", in_doubt),
)
