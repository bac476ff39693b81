"""One account of a session: its state, runs, tokens, cost and wall times, and the calls a kill
cut short, derived by one rule from its files (the event stream, the session file and the step
journal in them), so that ``list``, ``serve``, ``tree``, ``stats`` and the exports agree at
every moment, live or dead.

The tree is the fullest the files hold (:func:`~agenttrace.formats.session.fullest.load_pair`:
the session file's runs, every op that ended since from the stream's ``op_accounted`` lines),
with every run, turn and op an event was logged in
(:func:`~agenttrace.formats.session.rebuilt.with_started_nodes`) and every call whose intent
has no outcome (:func:`~agenttrace.formats.session.inflight.with_running_steps`). Then:

- the state (:func:`state_of`): ``ended`` or ``failed`` (the last run's outcome) once the session
  file is up to date and the last run ended; else ``running`` while the process of the last run
  still runs (the pid of its ingress, or of its journal line: known before any session file);
  ``interrupted`` once it is gone; when no process can be asked, ``running`` while the stream was
  written in the last :data:`ACTIVE_WINDOW_S` seconds;
- once nothing runs (the session is not ``running``), every node that never ended is marked
  interrupted, and each call the kill cut short is kept under its op as ``interrupted``, or
  ``in doubt`` with its effect class (a tool call that may have had its effect: ``agenttrace
  doubts``), with the time it had run (to its process's last record: when it died is written
  nowhere);
- a turn is running only while one of its ops runs: one whose ops all ended ended with its last;
- a run that never ended ran until its last record (its ``latencyMs``: its wall time);
- tokens and cost are :func:`~agenttrace.formats.session.totals.session_stats` over that tree.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msgspec import UNSET

from agenttrace._internal.processes import process_alive
from agenttrace._internal.times import ts_ms
from agenttrace.formats.session.files import (
    LoadedFile,
    Progress,
    segments_dir,
    segments_state,
    sibling_path,
)
from agenttrace.formats.session.fullest import load_pair
from agenttrace.formats.session.inflight import (
    PROCESS_GONE,
    RunningStep,
    mark_gone,
    process_last,
    running_steps,
    with_running_steps,
)
from agenttrace.formats.session.optree import hosted_sessions
from agenttrace.formats.session.optree import owner_run as owner_run
from agenttrace.formats.session.rebuilt import INTERRUPTED, with_started_nodes
from agenttrace.formats.session.totals import session_stats
from agenttrace.model.journal import Journal
from agenttrace.model.journal_lines import RUN_LABEL, JournalLine, Step, journal_lines

ENDED = "ended"
FAILED = "failed"
RUNNING = "running"
INTERRUPTED_STATE = "interrupted"
DAMAGED = "damaged"

ACTIVE_WINDOW_S = 600
"""A session whose writing process cannot be asked is running while its stream was written
this recently (an LLM call may take minutes without an event)."""

IN_DOUBT = "agenttrace.in_doubt"
"""The attribute of a tool call a kill cut short that may have had its effect: its effect
class (``agenttrace doubts`` lists it, ``agenttrace resolve`` decides it)."""
CUT_SHORT = "agenttrace.cut_short"
"""The attribute of a call a kill cut short (an LLM attempt or a tool call that never ended)."""


@dataclass(frozen=True)
class Liveness:
    """What a session's state is decided from, besides the clock (cheap to keep: ``list``
    keeps it with a session's row while its files do not change)."""

    runs: int
    last_ended: bool
    """The last run ended (or there is none)."""
    last_failed: bool
    in_flight: bool
    """A call's intent has no outcome."""
    up_to_date: bool
    """The session file holds every event of the stream."""
    pid: object = None
    """The process of the last run, if a file names it."""
    pid_since_ms: object = None
    """When that run started (a later process with the same pid is not it)."""


def state_of(liveness: Liveness, updated_ns: int, now: float) -> str:
    """The session's state (see the module docstring); ``updated_ns``: when a file of it was
    last written; ``now``: seconds since the epoch."""
    finished = liveness.last_ended and not liveness.in_flight
    if finished and liveness.up_to_date:
        return FAILED if liveness.last_failed else ENDED
    alive = process_alive(liveness.pid, liveness.pid_since_ms)
    if alive:
        return RUNNING
    if alive is False and not finished:
        return INTERRUPTED_STATE
    # The process writing is not known: events after the last run ended from another process
    # (a resume), or a system that cannot probe processes.
    return RUNNING if now - updated_ns / 1e9 < ACTIVE_WINDOW_S else INTERRUPTED_STATE


@dataclass(frozen=True)
class CutShort:
    """A call a kill cut short: started, never ended, its process gone."""

    run: str
    path: str
    kind: str
    name: str
    started_at: int
    ran_ms: float
    """From its start to the session's last record: at least this long."""
    effect: str | None = None
    """A tool call in doubt: its effect class; None: interrupted (nothing to decide)."""
    step: str = ""
    """Its label in the journal (what ``doubts`` lists and ``resolve`` takes): its op's
    ``path``, or another where a re-entry matched it to a step at another place."""

    @property
    def status(self) -> str:
        return "in doubt" if self.effect is not None else "interrupted"

    def as_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "path": self.path,
            "kind": self.kind,
            "name": self.name,
            "status": self.status,
            "effect": self.effect,
            "startedAt": self.started_at,
            "ranMs": self.ran_ms,
        }


@dataclass(frozen=True)
class Account:
    """A session as its files tell it now (see the module docstring)."""

    state: str
    loaded: LoadedFile
    """The fullest tree, every node as :func:`session_account` settles it."""
    liveness: Liveness
    running_steps: list[RunningStep] = field(default_factory=list)
    """The calls in flight (none once the session is interrupted)."""
    cut_short: list[CutShort] = field(default_factory=list)
    last_record_ms: int | None = None

    @property
    def runs(self) -> list[dict[str, Any]]:
        return self.loaded.runs

    def stats(self) -> dict[str, Any]:
        """:func:`~agenttrace.formats.session.totals.session_stats` of the tree (``stats``)."""
        return session_stats(self.runs)


def read_account(
    path: Path, progress: Progress | None = None, *, now: float | None = None
) -> Account:
    """The account of the session ``path`` is a file of (raises ``SessionFileError``);
    ``progress`` is told how far the reading is."""
    loaded, up_to_date = load_pair(path, progress)
    now = time.time() if now is None else now
    return session_account(loaded, up_to_date=up_to_date, updated_ns=_updated_ns(path), now=now)


def _updated_ns(path: Path) -> int:
    """When a file of the session was last written: its own pair, or a joined writer's segment
    (a child still recording keeps the session active after the first writer's last line)."""
    written = 0
    for each in (path, sibling_path(path)):
        if each is None:
            continue
        try:
            written = max(written, os.stat(each, follow_symlinks=False).st_mtime_ns)
        except OSError:
            continue
    directory = segments_dir(path)
    for _name, _size, mtime_ns in (segments_state(directory) if directory else None) or ():
        written = max(written, mtime_ns)
    return written


def session_account(
    loaded: LoadedFile, *, up_to_date: bool, updated_ns: int, now: float
) -> Account:
    """The account of the session whose fullest picture is ``loaded`` (see the module
    docstring). ``loaded``'s runs are settled in place: give it a picture of its own."""
    if loaded.journal or loaded.accounted:
        # Nodes known from events alone: only a release that journals its calls and accounts
        # its ops says which of them ended (an earlier release's stream would be all running).
        loaded = with_started_nodes(loaded)
    # The journal decoded once, for every reading below (each would decode it again).
    lines = journal_lines(loaded.journal)
    steps = running_steps(lines)
    loaded, in_flight = with_running_steps(loaded, steps=steps)
    runs = loaded.runs
    last = runs[-1] if runs else None
    pid, since = _process(lines, last)
    liveness = Liveness(
        runs=len(runs),
        last_ended=last is None or last.get("endedAt") is not None,
        last_failed=last is not None and last.get("success") is False,
        in_flight=bool(in_flight),
        up_to_date=up_to_date,
        pid=pid,
        pid_since_ms=since,
    )
    state = state_of(liveness, updated_ns, now)
    last_record = _last_record(loaded)
    gone = state != RUNNING  # nothing runs: whatever never ended never will
    if gone:
        for run in runs:
            mark_gone(run)
        in_flight = []
    cut = [step for step in steps if gone or step.interrupted]
    traces = _trace_records(loaded)
    cut_short = _cut_short(runs, cut, lines, traces)
    for run in runs:
        _settle(run, traces.get(str(run.get("traceId"))))
    return Account(state, loaded, liveness, in_flight, cut_short, last_record)


def _process(lines: Sequence[JournalLine], last: Mapping[str, Any] | None) -> tuple[object, object]:
    """The pid of the process of the last run, and when that run started: its ingress's (the
    session file's), else the journal's last run line's (written as the run starts, so known
    before any session file is)."""
    if last is not None:
        attributes = last.get("attributes")
        ingress = attributes.get("ingress") if isinstance(attributes, Mapping) else None
        cli = ingress.get("cli") if isinstance(ingress, Mapping) else None
        if isinstance(cli, Mapping) and "pid" in cli:
            return cli.get("pid"), last.get("startedAt")
    for line in reversed(lines):
        run_line = type(line) is Step and line.kind == "run" and line.step == RUN_LABEL
        if run_line and line.state == "intent":  # type: ignore[union-attr]
            return (None if line.pid is UNSET else line.pid), ts_ms(line.ts)  # type: ignore[union-attr]
    return None, None


def _last_record(loaded: LoadedFile) -> int | None:
    """When the session's last record was written (ms): its last event, journal or accounting
    line. A person's decision (``resolve``) is no record of the run's."""
    latest: int | None = None
    for lines in (loaded.events, loaded.accounted, loaded.journal):
        for line in reversed(lines):
            if line.get("event_type") == "step_decision":
                continue
            ms = ts_ms(line.get("ts"))
            if ms is not None:
                latest = ms if latest is None else max(latest, ms)
                break  # each list is in the order written
    return latest


def _trace_records(loaded: LoadedFile) -> dict[str, int]:
    """The last record of each trace (ms), from the events and accounting lines naming it."""
    latest: dict[str, int] = {}
    for lines in (loaded.events, loaded.accounted):
        for line in lines:
            trace = line.get("trace_id")
            ms = ts_ms(line.get("ts")) if isinstance(trace, str) else None
            if ms is not None and ms > latest.get(trace, 0):  # type: ignore[arg-type]
                latest[trace] = ms  # type: ignore[index]
    return latest


def _cut_short(
    runs: Sequence[dict[str, Any]],
    steps: Sequence[RunningStep],
    lines: list[JournalLine],
    traces: Mapping[str, int],
) -> list[CutShort]:
    """The calls ``steps`` (each started, never ended, its process gone), each marked on its op
    in the tree with the time it ran and, for one in doubt, its effect class; ``lines``: the
    session's journal, decoded."""
    if not steps:
        return []
    doubts = {(step.key[0], step.key[1]): step.effect for step in Journal(lines).in_doubt()}
    found = []
    for step in steps:
        owner = owner_run(runs, step.run, step.path) or {}
        last = _later(
            process_last(lines, step.run, step.step, step.attempt),
            traces.get(str(owner.get("traceId"))),
        )
        ran = float(max(0, (last or step.started_at) - step.started_at))
        effect = doubts.get((step.run, step.step)) if step.kind == "tool" else None
        found.append(
            CutShort(
                step.run, step.path, step.kind, step.name, step.started_at, ran, effect, step.step
            )
        )
        # Its op, by its place (its start may be an earlier event's logged in it).
        ops = [op for op in _own_ops(owner) if op.get("path") == step.path]
        if not ops or ops[0].get("endedAt") is not None:
            continue
        op = ops[0]
        attributes = op.get("attributes")
        if not isinstance(attributes, dict):
            attributes = op["attributes"] = {}
        attributes[CUT_SHORT] = True
        attributes[INTERRUPTED] = attributes[PROCESS_GONE] = True
        if effect is not None:
            attributes[IN_DOUBT] = effect
        op["latencyMs"] = ran
    return found


def _own_ops(session: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The ops of ``session``'s own turns (not of its sub-agents')."""
    for turn in session.get("turns") or []:
        if isinstance(turn, Mapping):
            yield from (op for op in turn.get("ops") or [] if isinstance(op, dict))


def _settle(run: dict[str, Any], trace_last: int | None) -> int | None:
    """Settle ``run`` and the sub-agent runs under it: a turn whose ops all ended ended with
    its last one; a run that never ended ran until its last record (its ``latencyMs``).
    Returns the run's last record (ms)."""
    latest = trace_last
    for turn in run.get("turns") or []:
        if not isinstance(turn, dict):
            continue
        turn_last: int | None = None
        unended = False
        ops = [op for op in turn.get("ops") or [] if isinstance(op, dict)]
        for op in ops:
            end = _number(op.get("endedAt"))
            if end is None:
                unended = True
                end = _number(op.get("startedAt"))
                ran = _number(op.get("latencyMs"))
                if end is not None and ran is not None:
                    end += ran
            for child in hosted_sessions(op):
                if isinstance(child, dict):
                    end = _later(end, _settle(child, None))
            turn_last = _later(turn_last, end)
        if turn.get("endedAt") is None and ops and not unended and turn_last is not None:
            turn["endedAt"] = turn_last
        known = _number(turn.get("endedAt")) or _number(turn.get("startedAt"))
        turn_last = _later(turn_last, known)
        latest = _later(latest, turn_last)
    ended = _number(run.get("endedAt"))
    if ended is not None:
        return ended
    started = _number(run.get("startedAt"))
    if started and latest is not None and _number(run.get("latencyMs")) is None:
        run["latencyMs"] = float(max(0, latest - started))
    return latest


def _later(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else max(a, b)


def _number(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value)
