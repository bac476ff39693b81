"""The fuzz suite's tally as lines for the end of the run, from one process's counts or from
every xdist worker's (standard library only: tests/conftest.py imports it on the controller)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

KEY = "agenttrace_fuzz_tally"
"""Where a worker hands its tally to the controller (``config.workeroutput``)."""


def handed_over(tally: Counter[str], dearest: tuple[float, str]) -> dict[str, Any]:
    """A worker's tally as plain data for xdist to carry to the controller."""
    return {"tally": dict(tally), "dearest": list(dearest)}


def merged(outputs: Iterable[Mapping[str, Any]]) -> tuple[Counter[str], tuple[float, str]]:
    """The workers' tallies added up, and the dearest case of them all."""
    tally: Counter[str] = Counter()
    dearest: tuple[float, str] = (0.0, "")
    for output in outputs:
        tally.update(output["tally"])
        dearest = max(dearest, (float(output["dearest"][0]), str(output["dearest"][1])))
    return tally, dearest


def summary_lines(tally: Mapping[str, int], dearest: tuple[float, str]) -> list[str]:
    """What the run ends with (the README quotes these figures); none if no fuzz case ran."""
    files = sum(tally.get(kind, 0) for kind in ("mutated", "generated", "regression"))
    if not files and not tally.get("event lists", 0):
        return []
    kinds = ", ".join(
        f"{tally[k]} {k}" for k in ("mutated", "generated", "regression") if tally.get(k)
    )
    lines = [
        f"fuzz: {files} files ({kinds}) through every reader, view and command, "
        f"{tally.get('readable', 0)} of them read as sessions; {tally.get('event lists', 0)} "
        f"event lists straight to the views; {tally.get('failed', 0)} failed"
    ]
    cpu, name = dearest
    if name:
        lines.append(
            f"fuzz: the dearest case under the CPU deadline took {cpu:.2f} s of CPU ({name})"
        )
    return lines
