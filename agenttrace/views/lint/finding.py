"""What a lint rule reports: one :class:`Finding` per defect, with the steps involved and what
they wasted."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Waste:
    """Tokens and cost a defect spent for nothing. ``None`` is unknown (an attempt without
    usage, a model without a price, or a defect that spends nothing by itself), never a 0 made
    up: a 0 here is a real 0."""

    tokens: int | None = None
    cost_usd: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "cost_usd": self.cost_usd}


UNKNOWN = Waste()
"""The waste of a defect that spends nothing by itself, or whose spending cannot be known."""


@dataclass(frozen=True)
class Finding:
    """One defect lint found in a session.

    ``rule`` is the rule's stable id (``AT101``), ``name`` its stable name
    (``repeated-tool-call``); ``run`` the 1-based number of the run it is in, as ``agenttrace
    tree`` numbers runs (``None`` for a defect of the whole session); ``paths`` the path labels
    of the steps involved (docs/path-labels.md) and ``span_ids`` their span ids where the file
    has them, in the same order as far as both are known."""

    rule: str
    name: str
    message: str
    run: int | None
    paths: tuple[str, ...]
    span_ids: tuple[str, ...]
    wasted: Waste = UNKNOWN

    @property
    def title(self) -> str:
        """``AT101 repeated-tool-call``."""
        return f"{self.rule} {self.name}"

    def as_json(self) -> dict[str, Any]:
        """The finding as ``agenttrace lint --json`` prints it (docs/lint.md)."""
        return {
            "rule": self.rule,
            "name": self.name,
            "message": self.message,
            "run": self.run,
            "paths": list(self.paths),
            "span_ids": list(self.span_ids),
            "wasted": self.wasted.as_json(),
        }


def total_waste(findings: Sequence[Finding]) -> tuple[int, float, int]:
    """The tokens and cost the findings wasted, over those whose waste is known, and how many
    findings had some part unknown (a total that leaves some out says so)."""
    tokens, cost, unknown = 0, 0.0, 0
    for finding in findings:
        if finding.wasted.tokens is None or finding.wasted.cost_usd is None:
            unknown += 1
        tokens += finding.wasted.tokens or 0
        cost += finding.wasted.cost_usd or 0.0
    return tokens, round(cost, 12), unknown
