"""Which step of one run is which step of the other.

Two runs' children of one parent (a run's turns, a turn's ops, the sub-agent runs an op
hosted) are paired by position, that is by path label, while their keys (kind and name) agree;
where they disagree (one run inserted a step, so every later label shifts) they are paired by
the longest common subsequence of their keys, so one inserted step leaves the rest paired. A
stretch left between two common ones is paired by position (the same places, something else
there: a step whose kind or name changed, a turn whose ops did), the longer run's extra steps at
its end each in that run only.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

T = TypeVar("T")

MAX_LCS_CELLS = 1_000_000
"""The exact common subsequence is computed over at most this many (a, b) pairs of a stretch
whose keys differ; past it (thousands of turns that all changed) ``difflib``'s matching blocks,
which find the same pairs for an inserted or dropped step, in near-linear time."""


def align(
    a: Sequence[T], b: Sequence[T], key: Callable[[T], Hashable]
) -> list[tuple[T | None, T | None]]:
    """``a`` and ``b`` paired in order: ``(x, y)`` for a pair, ``(x, None)`` for a step only in
    ``a``, ``(None, y)`` for one only in ``b``."""
    keys_a = [key(item) for item in a]
    keys_b = [key(item) for item in b]
    pairs: list[tuple[T | None, T | None]] = []
    start = 0
    while start < len(a) and start < len(b) and keys_a[start] == keys_b[start]:
        start += 1
    end_a, end_b = len(a), len(b)
    while end_a > start and end_b > start and keys_a[end_a - 1] == keys_b[end_b - 1]:
        end_a -= 1
        end_b -= 1
    pairs.extend(zip(a[:start], b[:start], strict=True))
    matches = _common(keys_a[start:end_a], keys_b[start:end_b])
    i, j = start, start
    for x, y in [*((start + x, start + y) for x, y in matches), (end_a, end_b)]:
        pairs.extend(_gap(a[i:x], b[j:y]))
        if x < end_a and y < end_b:
            pairs.append((a[x], b[y]))
        i, j = x + 1, y + 1
    pairs.extend(zip(a[end_a:], b[end_b:], strict=True))
    return pairs


def _gap(a: Sequence[T], b: Sequence[T]) -> list[tuple[T | None, T | None]]:
    """A stretch between two common steps: paired by position (the same places, something
    else there), the longer one's extra steps at its end each in its run only."""
    shared = min(len(a), len(b))
    pairs: list[tuple[T | None, T | None]] = list(zip(a[:shared], b[:shared], strict=True))
    pairs.extend((x, None) for x in a[shared:])
    pairs.extend((None, y) for y in b[shared:])
    return pairs


def _common(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[tuple[int, int]]:
    """The positions of a longest common subsequence of ``a`` and ``b``, in order."""
    if not a or not b:
        return []
    if len(a) * len(b) > MAX_LCS_CELLS:
        matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
        return [
            (block.a + k, block.b + k)
            for block in matcher.get_matching_blocks()
            for k in range(block.size)
        ]
    # lengths[i][j]: the longest common subsequence of a[i:] and b[j:].
    width = len(b) + 1
    lengths = [[0] * width for _ in range(len(a) + 1)]
    for i in range(len(a) - 1, -1, -1):
        row, below = lengths[i], lengths[i + 1]
        for j in range(len(b) - 1, -1, -1):
            row[j] = below[j + 1] + 1 if a[i] == b[j] else max(below[j], row[j + 1])
    found: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] == b[j]:
            found.append((i, j))
            i += 1
            j += 1
        elif lengths[i + 1][j] >= lengths[i][j + 1]:
            i += 1
        else:
            j += 1
    return found
