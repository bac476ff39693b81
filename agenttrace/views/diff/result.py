"""What ``agenttrace diff`` finds: a :class:`RunDiff`, and its JSON shape (``--json``, stable:
docs/how-to/replay-diff.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agenttrace.views.diff.compare import FieldDiff
from agenttrace.views.diff.steps import Usage

DIVERGENCE_KINDS = ("structure", "request", "response", "tool_arguments", "tool_result", "status")
"""What a divergence can be: a step in one run only, or of another kind or name (``structure``);
an LLM attempt's request or response; a tool call's arguments or result; a step's status."""

USAGE_FIELDS = ("input_tokens", "output_tokens", "cost_usd", "latency_ms")


@dataclass(frozen=True)
class RunRef:
    """One of the two runs: its session, its number (as ``agenttrace tree`` prints it), ids."""

    session: str
    run: int
    trace_id: str | None
    txn_id: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "run": self.run,
            "trace_id": self.trace_id,
            "txn_id": self.txn_id,
        }


@dataclass(frozen=True)
class Divergence:
    """Where two steps differ: what (one of :data:`DIVERGENCE_KINDS`), the step's label in
    each run (``None`` where it is not in it), its kind and name, and the fields that differ."""

    kind: str
    label_a: str | None
    label_b: str | None
    step_kind: str
    name: str | None
    diff: FieldDiff
    note: str = ""
    """Said when the values compared are not the whole story (only fingerprints were kept)."""

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "a": self.label_a,
            "b": self.label_b,
            "step_kind": self.step_kind,
            "name": self.name,
            "note": self.note,
            **self.diff.as_json(),
        }


@dataclass(frozen=True)
class StepDiff:
    """One step of either run, paired with the other run's when it has it: its labels, kind,
    names, the divergences found at it (their kinds), its usage in each run and its status
    there (``ok``, ``failed``, ``in doubt``...; ``None`` for a turn, which has none)."""

    label_a: str | None
    label_b: str | None
    kind: str
    name_a: str | None
    name_b: str | None
    depth: int
    usage_a: Usage | None
    usage_b: Usage | None
    differs: tuple[str, ...] = ()
    status_a: str | None = None
    status_b: str | None = None

    @property
    def paired(self) -> bool:
        return self.label_a is not None and self.label_b is not None

    def deltas(self) -> dict[str, dict[str, float | None]]:
        """Per usage field: its value in each run and B minus A (``None`` when not known)."""
        result = {}
        for name in USAGE_FIELDS:
            a = getattr(self.usage_a, name) if self.usage_a is not None else None
            b = getattr(self.usage_b, name) if self.usage_b is not None else None
            result[name] = _compared(name, a, b)
        return result

    def as_json(self) -> dict[str, Any]:
        return {
            "a": self.label_a,
            "b": self.label_b,
            "kind": self.kind,
            "name_a": self.name_a,
            "name_b": self.name_b,
            "depth": self.depth,
            "differs": list(self.differs),
            "deltas": self.deltas(),
        }


@dataclass(frozen=True)
class OnlyIn:
    """A step in one run only, with every step under it (``steps``: how many, itself too)."""

    label: str | None
    kind: str
    name: str | None
    steps: int

    def as_json(self) -> dict[str, Any]:
        return {"label": self.label, "kind": self.kind, "name": self.name, "steps": self.steps}


@dataclass(frozen=True)
class RunDiff:
    """Two runs compared step by step (``agenttrace.diff_runs``, ``agenttrace diff``)."""

    a: RunRef
    b: RunRef
    first_divergence: Divergence | None
    steps: list[StepDiff] = field(default_factory=list)
    """Every step of either run, in run order, paired where both have it."""
    only_in_a: list[OnlyIn] = field(default_factory=list)
    only_in_b: list[OnlyIn] = field(default_factory=list)
    totals_a: dict[str, float | None] = field(default_factory=dict)
    totals_b: dict[str, float | None] = field(default_factory=dict)
    divergences: int = 0
    """How many divergences there are in all (each step may have several)."""

    @property
    def same(self) -> bool:
        """Whether the runs did the same: no divergence (usage and timing may differ)."""
        return self.first_divergence is None

    def as_json(self) -> dict[str, Any]:
        """The ``--json`` document (version 1; docs/how-to/replay-diff.md)."""
        totals: dict[str, Any] = {}
        for name in self.totals_a.keys() | self.totals_b.keys():
            totals[name] = _compared(name, self.totals_a.get(name), self.totals_b.get(name))
        return {
            "version": 1,
            "same": self.same,
            "a": self.a.as_json(),
            "b": self.b.as_json(),
            "divergences": self.divergences,
            "first_divergence": (
                None if self.first_divergence is None else self.first_divergence.as_json()
            ),
            "steps": [step.as_json() for step in self.steps],
            "only_in_a": [step.as_json() for step in self.only_in_a],
            "only_in_b": [step.as_json() for step in self.only_in_b],
            "totals": dict(sorted(totals.items())),
        }


def _compared(name: str, a: float | None, b: float | None) -> dict[str, float | None]:
    """``{"a", "b", "delta"}`` (B minus A), tidied: token and call counts as integers, costs
    to the nano-dollar, times to the microsecond (no float noise in a report)."""
    delta = None if a is None or b is None else b - a
    return {"a": tidy(name, a), "b": tidy(name, b), "delta": tidy(name, delta)}


def tidy(name: str, value: float | None) -> float | None:
    """``value`` of the usage field ``name`` as it is reported."""
    if value is None:
        return None
    if name == "cost_usd":
        return round(value, 9)
    if name == "latency_ms":
        return round(value, 3)
    return int(value) if float(value).is_integer() else value
