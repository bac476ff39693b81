"""The step journal of a session's pair of files: the union of the two journals.

The event stream and the session file each hold the journal's lines in the order they were
written, but neither is always the whole of it: the stream is usually ahead (an intent is on
disk there before its body runs), the session file is ahead when the stream stopped being
written (a full disk), and ``agenttrace resolve`` appends a decision to the stream even when it
is behind. Taking the longer of the two would lose what only the shorter holds (a decision, an
outcome), so readers take every line of either, once.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any


def journal_union(
    fuller: list[dict[str, Any]], other: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Every line of ``fuller`` in its order, then the lines of ``other`` it lacks, in theirs.

    A line is known by its whole content. A line that stands several times (a step replayed by
    two resumes writes the same line twice) stands as often as in the file that has it most: the
    n-th time ``other`` has it is one ``fuller`` lacks once ``fuller`` has it fewer than n times.
    What only ``other`` has comes after ``fuller``'s lines: the usual case is a decision
    appended to a stream that was behind the session file, made after all the session file
    holds (a decision placed before the intent it is about would decide nothing)."""
    if other == fuller[: len(other)]:  # the usual case: one is the start of the other
        return fuller
    counts = Counter(_identity(line) for line in fuller)
    seen: Counter[str] = Counter()
    missing: list[dict[str, Any]] = []
    for line in other:
        identity = _identity(line)
        seen[identity] += 1
        if seen[identity] > counts[identity]:
            missing.append(line)
    return [*fuller, *missing]


def _identity(line: dict[str, Any]) -> str:
    return json.dumps(line, sort_keys=True, ensure_ascii=False)
