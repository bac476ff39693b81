"""A replay of every run of a recorded session (docs/design/replay.md, "Several runs"): one
:class:`~agenttrace.model.reentry.Reentry` per recorded run, in the order the runs started; the
k-th root run started in the replay session takes the k-th, and is answered from the k-th
recorded run only.

A root run started once every recorded run has been taken is one the recording never made: a
divergence at its start (strict: raised; lenient: it runs live). This module decides and keeps
count; it runs nothing (``agenttrace.tracing.runs`` asks it as a run starts).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agenttrace.model.journal import Journal, Step
from agenttrace.model.journal_lines import RUN_LABEL
from agenttrace.model.reentry import Reentry
from agenttrace.model.replay import ReplayDivergence
from agenttrace.model.rewind import events_before


@dataclass
class ReplayRuns:
    """The re-entries of a replay of several recorded runs, not yet taken, in start order."""

    pending: deque[Reentry]
    recorded: int
    """How many recorded runs the replay answers."""
    started: int = 0
    """How many root runs started in the replay session so far."""
    taken: list[Reentry] = field(default_factory=list)
    """The re-entries root runs took, in the order they took them."""
    _last: Reentry | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def of(cls, reentries: Sequence[Reentry]) -> ReplayRuns:
        """The replay of ``reentries`` (one per recorded run, in the order they started)."""
        return cls(deque(reentries), len(reentries))

    def take(self) -> Reentry | None:
        """The re-entry of the root run starting now: the next recorded run's, or ``None``
        once every one was taken (:meth:`past_end` then says what that run is)."""
        with self._lock:
            self.started += 1
            if not self.pending:
                return None
            self._last = self.pending.popleft()
            self.taken.append(self._last)
            return self._last

    @property
    def unused(self) -> int:
        """How many recorded runs no root run has taken."""
        with self._lock:
            return len(self.pending)

    def past_end(self, name: str, fingerprint: str | None) -> ReplayDivergence | None:
        """The root run ``name`` started after the last recorded run was taken: the error to
        raise (strict), or ``None`` and it runs live (lenient), the divergence reported."""
        with self._lock:
            last, started = self._last, self.started
        rules = last.replay if last is not None else None
        what = f"the recording holds {self.recorded} run(s); this is run {started}"
        error = ReplayDivergence(RUN_LABEL, "run", None, name, fingerprint, what=what)
        if rules is None:
            return error
        return rules.diverge(error)


def recorded_runs(journal: Journal) -> list[tuple[Step, Step]]:
    """The first and last run line of each decorated run of ``journal`` (not an implicit
    one), in the order the runs started."""
    attempts: dict[str, list[Step]] = {}
    for (run, label, _), step in journal.steps.items():
        if step.kind == "run" and label == RUN_LABEL and not step.implicit:
            attempts.setdefault(run, []).append(step)
    return [(steps[0], steps[-1]) for steps in attempts.values()]


def run_events(
    journal: Journal, events: Sequence[Mapping[str, Any]], first: Step
) -> tuple[int, int]:
    """(how many of the session's ``events`` were logged before the run of ``first``, its
    first run line, started; how many before the next run started, or all of them): the
    events from the one to the other are the run's, and those between runs. A run's path
    labels start again at ``1``: told apart by these bounds only."""
    starts: dict[str, int] = {}
    for (run, label, _), step in journal.steps.items():
        if step.kind == "run" and label == RUN_LABEL and run not in starts:
            starts[run] = step.messages or 0
    start = first.messages or 0
    later = [n for run, n in starts.items() if n >= start and run != first.key[0]]
    end = events_before(events, min(later)) if later else len(events)
    return events_before(events, start), end
