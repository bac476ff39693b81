"""How far to move each writer's lines to merge them in causal order when the writers ran on
hosts whose clocks disagree (docs/design/cross-process.md, "Clocks of other hosts").

Each joined run's ``ingress.joined`` says its writer's clock id (``clock``) and that of the
writer that started it (``parent_clock``): equal on one machine. A writer's lines are merged at
their ``ts`` plus an *ordering offset* ``d`` (ms), the same for every writer of one clock; no
``ts`` is changed. ``d`` is

- 0 for the first writer's clock, and the offset of the starting writer's clock for a run whose
  clocks are equal or not recorded (files of earlier versions: one clock, as before);
- else fitted into the window of the ops that started the clock's runs, the starting writers'
  offsets already applied (starting writers first, so offsets compose down a chain of hosts).
  For a run placed under op X: ``S``, ``E`` X's start and end (``E`` +inf while X has none),
  ``f``, ``l`` the run's first and last line (or its own start and end without lines);
  ``lo = S + 1 - f``, ``hi = E - 1 - l`` (its lines strictly inside the op's, to the ms, so
  neither writer's order on a tie decides). Over the clock's runs ``lo`` is the largest, ``hi``
  the smallest; both move inward by :data:`MARGIN_MS` (at most half the room between them: the
  op's own lines are a ms or two inside its times); ``d`` is 0 moved into ``[lo, hi]``, or
  ``max(lo, 0)`` when the window is empty (a run that outlived its op, fire-and-forget: only
  its start is bound).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

MARGIN_MS = 25
"""How far inside the window of the ops that started it a moved clock's lines go (at most half
the window's room)."""


class Placement(NamedTuple):
    """A joined run placed under an op, with the writers of both (indexes: 0 the first)."""

    writer: int
    run: Mapping[str, Any]
    host: int
    """The writer whose tree holds the op."""
    op: Mapping[str, Any]


def joined_clocks(run: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """A joined run's ``(clock, parent_clock)`` from its ``ingress.joined`` (``None`` where
    its file does not say)."""
    attributes = run.get("attributes")
    ingress = attributes.get("ingress") if isinstance(attributes, Mapping) else None
    joined = ingress.get("joined") if isinstance(ingress, Mapping) else None
    if not isinstance(joined, Mapping):
        return None, None
    clock, parent = joined.get("clock"), joined.get("parent_clock")
    return (
        clock if isinstance(clock, str) else None,
        parent if isinstance(parent, str) else None,
    )


def skewed(placements: Sequence[Placement]) -> bool:
    """Whether any run was started from a writer of another clock (else every offset is 0)."""
    for placement in placements:
        clock, parent = joined_clocks(placement.run)
        if clock is not None and parent is not None and clock != parent:
            return True
    return False


def offsets(
    writers: int, placements: Sequence[Placement], stamps: Sequence[Sequence[int]]
) -> list[int]:
    """Each writer's ordering offset in ms, as above. ``stamps``: each writer's line times (ms,
    its own clock), in its files' order."""
    keys = _clock_keys(writers, placements)
    spans = _run_spans(writers, placements, stamps)
    fixed: dict[object, int] = {keys[0]: 0}
    pending = {keys[w] for w in range(1, writers)} - {keys[0]}
    while pending:
        ready = [key for key in pending if _inputs(key, keys, placements, fixed, every=True)]
        if not ready:  # starting writers that start each other: take what is known
            ready = [key for key in pending if _inputs(key, keys, placements, fixed, every=False)]
        if not ready:
            break  # the rest were started under no op any file holds: as they wrote it
        for key in sorted(ready, key=lambda k: keys.index(k)):
            fixed[key] = _fitted(key, keys, placements, spans, fixed)
            pending.discard(key)
    return [fixed.get(keys[w], 0) for w in range(writers)]


def _clock_keys(writers: int, placements: Sequence[Placement]) -> list[object]:
    """Each writer's clock, or the writer itself where no file says (its offset then comes from
    the writer that started it). The first writer's is the ``parent_clock`` its runs gave."""
    keys: list[object] = [("writer", w) for w in range(writers)]
    for placement in placements:
        clock, parent = joined_clocks(placement.run)
        if clock is not None and keys[placement.writer] == ("writer", placement.writer):
            keys[placement.writer] = clock
    for placement in placements:
        _, parent = joined_clocks(placement.run)
        if placement.host == 0 and parent is not None:
            keys[0] = parent
            break
    return keys


def _run_spans(
    writers: int, placements: Sequence[Placement], stamps: Sequence[Sequence[int]]
) -> dict[int, tuple[float, float]]:
    """id of each placed run -> its first and last line (ms, its writer's clock): a writer's
    lines go to the run that started last before them (a writer runs one joined run at a time;
    lines before its first run, its agent made as it started, to the first)."""
    spans: dict[int, tuple[float, float]] = {}
    by_writer: list[list[Mapping[str, Any]]] = [[] for _ in range(writers)]
    for placement in placements:
        by_writer[placement.writer].append(placement.run)
    for writer, runs in enumerate(by_writer):
        runs = sorted(runs, key=lambda run: _ms(run.get("startedAt"), -math.inf))
        starts = [_ms(run.get("startedAt"), -math.inf) for run in runs]
        firsts = [_ms(run.get("startedAt"), math.inf) for run in runs]
        lasts = [_ms(run.get("endedAt"), -math.inf) for run in runs]
        seen = [False] * len(runs)
        for ts in stamps[writer] if runs else ():
            i = max(bisect_right(starts, ts) - 1, 0)
            if not seen[i]:  # its lines, not its node's times, say where a run's lines are
                seen[i], firsts[i], lasts[i] = True, ts, ts
            firsts[i], lasts[i] = min(firsts[i], ts), max(lasts[i], ts)
        for run, first, last in zip(runs, firsts, lasts, strict=True):
            spans[id(run)] = (first, last)
    return spans


def _inputs(
    key: object,
    keys: list[object],
    placements: Sequence[Placement],
    fixed: Mapping[object, int],
    *,
    every: bool,
) -> bool:
    """Whether the runs of clock ``key`` started from other clocks have their starting
    writers' offsets (``every``: all of them, else at least one)."""
    known = [
        keys[p.host] in fixed for p in placements if keys[p.writer] == key and keys[p.host] != key
    ]
    return bool(known) and (all(known) if every else any(known))


def _fitted(
    key: object,
    keys: list[object],
    placements: Sequence[Placement],
    spans: Mapping[int, tuple[float, float]],
    fixed: Mapping[object, int],
) -> int:
    lo, hi = -math.inf, math.inf
    for p in placements:
        if keys[p.writer] != key or keys[p.host] == key or keys[p.host] not in fixed:
            continue
        parent_offset = fixed[keys[p.host]]
        clock, parent = joined_clocks(p.run)
        if clock is None or parent is None or clock == parent:
            return parent_offset  # one clock with its starting writer's: exactly its offset
        first, last = spans.get(id(p.run), (math.inf, -math.inf))
        start = _ms(p.op.get("startedAt"), -math.inf) + parent_offset
        end = _ms(p.op.get("endedAt"), math.inf) + parent_offset
        lo = max(lo, start + 1 - first)
        hi = min(hi, end - 1 - last)
    if lo <= hi:
        # Inward by up to MARGIN_MS: the starting op's intent and done lines are written a ms
        # or two after its span starts and before it ends, so a child fitted exactly to the
        # op's times could still cross them.
        margin = min(MARGIN_MS, (hi - lo) / 2)
        lo, hi = lo + margin, hi - margin
    chosen = min(max(0.0, lo), hi) if lo <= hi else max(lo, 0.0)
    return int(chosen) if math.isfinite(chosen) else 0


def _ms(value: Any, default: float) -> float:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
