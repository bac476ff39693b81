"""A :class:`~agenttrace.views.diff.result.RunDiff` as text for a person: the verdict, the first
divergence with its field diff, the steps that differ or are in one run only, each paired step's
deltas, the totals. Plain lines (:func:`diff_lines`), or rich tables when the ``[cli]`` extra is
installed (:func:`print_diff`)."""

from __future__ import annotations

import json
from typing import Any

from agenttrace._internal.escapes import escaped
from agenttrace.views.diff.result import USAGE_FIELDS, Divergence, RunDiff, RunRef, StepDiff

HEADINGS = {"input_tokens": "in", "output_tokens": "out", "cost_usd": "cost", "latency_ms": "ms"}


def diff_lines(diff: RunDiff) -> list[str]:
    """The report's head (runs, verdict, first divergence) and, in plain columns, its steps
    and totals."""
    return [*head_lines(diff), "", *_plain_table(step_rows(diff)), "", *totals_lines(diff)]


def head_lines(diff: RunDiff) -> list[str]:
    """The two runs, whether they differ, and the first divergence with its field diff."""
    lines = [f"A: {ref_text(diff.a)}", f"B: {ref_text(diff.b)}"]
    divergence = diff.first_divergence
    if divergence is None:
        lines.append("same: no divergence (usage and timing may differ)")
        return lines
    lines.append(f"first divergence: {divergence_text(divergence)}")
    if divergence.note:
        lines.append(f"  ({divergence.note})")
    for change in divergence.diff.changes:
        lines.append(f"  {change.path}:")
        if change.text_diff:
            lines.extend(f"    {line}" for line in change.text_diff)
            continue
        lines.append(f"    A: {_value(change.a) if change.a_present else '(absent)'}")
        lines.append(f"    B: {_value(change.b) if change.b_present else '(absent)'}")
    if divergence.diff.more:
        lines.append(f"  ... {divergence.diff.more} more difference(s)")
    counts = f"{len(diff.only_in_a)} step(s) only in A, {len(diff.only_in_b)} only in B"
    differing = sum(1 for step in diff.steps if step.paired and step.differs)
    lines.append(f"{differing} paired step(s) differ; {counts}")
    return lines


def step_rows(diff: RunDiff) -> list[list[str]]:
    """One row per step: labels in A and B, kind and name, what differs, the deltas."""
    rows = [["A", "B", "step", "differs", *(f"Δ{HEADINGS[name]}" for name in USAGE_FIELDS)]]
    for step in diff.steps:
        deltas = step.deltas()
        rows.append(
            [
                step.label_a or "-",
                step.label_b or "-",
                "  " * step.depth + _step_name(step),
                differs_text(step),
                *(number(name, deltas[name]["delta"], signed=True) for name in USAGE_FIELDS),
            ]
        )
    return rows


def totals_lines(diff: RunDiff) -> list[str]:
    """``totals (A -> B):`` and a line per total: A's, B's and B less A."""
    lines = ["totals (A -> B):"]
    for name, values in diff.as_json()["totals"].items():
        a, b = number(name, values["a"]), number(name, values["b"])
        delta = number(name, values["delta"], signed=True)
        lines.append(f"  {name}: {a} -> {b} ({delta})")
    return lines


def print_diff(diff: RunDiff, console: Any) -> None:
    """The report on a rich ``console``: the head as lines, the steps as a table."""
    from rich.table import Table
    from rich.text import Text

    for line in head_lines(diff):
        console.print(Text(escaped(line)))
    header, *rows = step_rows(diff)
    table = Table(title="steps", title_justify="left")
    for index, heading in enumerate(header):
        table.add_column(heading, justify="right" if index > 3 else "left")
    for row in rows:
        table.add_row(*(Text(escaped(cell)) for cell in row))  # names are text, not markup
    console.print(table)
    for line in totals_lines(diff):
        console.print(Text(escaped(line)))


def _plain_table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            escaped(cell).ljust(width) if i <= 3 else escaped(cell).rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]


def ref_text(ref: RunRef) -> str:
    """A run as the report names it: its session, number, trace and transaction."""
    return f"session {ref.session} run {ref.run} (trace {ref.trace_id}, txn {ref.txn_id})"


def divergence_text(divergence: Divergence) -> str:
    """What diverged where: ``response at A 2.1 / B 2.1: llm weather``."""
    where = f"A {divergence.label_a or '-'} / B {divergence.label_b or '-'}"
    return f"{divergence.kind} at {where}: {divergence.step_kind} {divergence.name or ''}".rstrip()


def _step_name(step: StepDiff) -> str:
    name = step.name_a if step.name_a == step.name_b or step.name_b is None else step.name_b
    if step.name_a is not None and step.name_b is not None and step.name_a != step.name_b:
        name = f"{step.name_a} -> {step.name_b}"
    return f"{step.kind} {name}" if name else step.kind


def differs_text(step: StepDiff) -> str:
    """What differs at a step: its divergences' kinds, or the run it alone is in."""
    if step.label_a is None:
        return "only in B"
    if step.label_b is None:
        return "only in A"
    return ", ".join(step.differs)


def number(name: str, value: Any, signed: bool = False) -> str:
    """A usage value as shown (``-``: not known); a delta with its sign."""
    if value is None:
        return "-"
    sign = "+" if signed else ""
    if name == "cost_usd":
        return f"{value:{sign}.6f}"
    if name == "latency_ms":
        return f"{value:{sign}.1f}"
    return f"{value:{sign}}"


def _value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
