"""Calls in flight: the LLM attempts and tool calls that have started and not ended, from the
step journal (docs/journal.md), for the live views (``agenttrace serve``, ``agenttrace tree
--follow``).

A step's ``intent`` line is on disk before its call runs; its ``done`` or ``failed`` line and
its op's ``op_accounted`` line come when it ends. An LLM call that hangs or a tool that blocks
logs nothing else, so without the journal nothing would show it. An intent without an outcome
(nor a person's decision, ``agenttrace resolve``) is a call that runs now, or, once its process
is gone, one that never ended (in doubt).

:func:`with_running_steps` puts each such call into its run's tree as an op at its path label,
making the turn, host ops and sub-agent runs on the way as an event logged there would
(:func:`~agenttrace.formats.session.rebuilt.running_op`): its kind and name, ``startedAt`` the
intent's ``ts``, its arguments as its ``request``, and no end, so a view shows it running. An op
that has ended is left alone (its node is whole), and so is a run that has ended. Like the other
nodes of a live view, these are never written back.

The journal names a step's run by the run's origin id; a tree names its runs by trace id when
they are known only from events. The run is the unfinished one with that origin (for a step of
a re-entry, the unfinished run that says it re-enters that origin, ``agenttrace.reenters``),
else the one the ``op_accounted`` lines give that origin's trace, else the only unfinished run
whose origin no file says yet; else it is made from the steps (its agent the one of its
root-level steps).

A call whose process is gone never ends: it was interrupted, not running. The journal tells it
from the runs' own lines: each names its process (a random token), so a call is interrupted
once a later run line comes from another process, or re-enters the call's run (a resume: its
process was gone). Such a call's op is in the tree marked interrupted
(:data:`PROCESS_GONE`), as is every unfinished node of a run whose process is gone, and it is
not among the calls in flight. (An intent of a release whose run lines name no process is
interrupted only by a re-entry of its run.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agenttrace._internal.config import ReadLimits
from agenttrace._internal.times import ts_ms
from agenttrace.formats.session.files import LoadedFile
from agenttrace.formats.session.optree import hosted_sessions
from agenttrace.formats.session.rebuilt import INTERRUPTED, Node, running_op
from agenttrace.model.journal_lines import RUN_LABEL, JournalLine, Step, journal_lines
from agenttrace.model.paths import format_label, parse_label

PROCESS_GONE = "agenttrace.process_gone"
"""The attribute a live view gives a node that has not ended and whose process is gone (a later
process's run lines say so): interrupted, never running (never written to a file)."""

REENTERS = "agenttrace.reenters"
"""The attribute of a run that re-enters an interrupted one: that run's origin."""


@dataclass(frozen=True)
class RunningStep:
    """A step whose intent is in the journal and whose outcome is not."""

    run: str
    """The origin id of the run it belongs to."""
    path: str
    """The path label of its op in that run."""
    attempt: int
    kind: str
    """``tool`` or ``llm``."""
    name: str
    """The tool's name, or the model an LLM attempt asked for."""
    agent_id: str
    started_at: int
    """When its intent was written (ms since the epoch): when it started."""
    arguments: str | None = None
    """A tool's arguments as JSON text (as the journal holds them)."""
    interrupted: bool = False
    """Its process is gone (see the module docstring): it will never end."""
    run_attempt: int = 1
    """The attempt at its run that made it (2 and up: a resume's re-entry of the run)."""
    label: str = ""
    """Its label in the journal, where that is not its op's ``path`` (a re-entry's call matched
    to a step at another place, or given a label of its own: docs/journal.md); else empty."""

    @property
    def step(self) -> str:
        """Its label in the journal."""
        return self.label or self.path

    def as_json(self) -> dict[str, Any]:
        """The step as ``GET /api/runs/{id}/tree`` lists it (``runningSteps``)."""
        return {
            "run": self.run,
            "path": self.path,
            "attempt": self.attempt,
            "kind": self.kind,
            "name": self.name,
            "agentId": self.agent_id,
            "startedAt": self.started_at,
            "arguments": self.arguments,
        }


@dataclass
class _Intent:
    """A step's intent line where it is in the journal, and the run line it came after."""

    attempt: int
    line: Step | None
    """``None`` once the step ended (or a person decided it did not run)."""
    index: int = 0
    run_attempt: int = 1
    process: str | None = None


class _RunLines:
    """The runs' own lines of a journal (kind ``run``): which process wrote each, and when."""

    def __init__(self) -> None:
        self.current: dict[str, tuple[int, str | None]] = {}
        """Each run's latest line: (its attempt, its process)."""
        self.by_run: dict[str, list[tuple[int, int]]] = {}
        """Each run's lines: (index in the journal, attempt)."""
        self.last_of_process: dict[str, int] = {}
        """The index of each process's last run line."""

    def add(self, index: int, run: str, attempt: int, process: Any) -> None:
        process = process if isinstance(process, str) and process else None
        self.current[run] = (attempt, process)
        self.by_run.setdefault(run, []).append((index, attempt))
        if process is not None:
            self.last_of_process[process] = index

    def gone(self, index: int, run: str, run_attempt: int, process: str | None) -> bool:
        """Whether the process that wrote line ``index`` (of ``run``'s attempt
        ``run_attempt``, by ``process``) is gone: another process wrote a run line after it,
        or a later attempt at ``run`` started after it."""
        if process is not None and any(
            other != process and last > index for other, last in self.last_of_process.items()
        ):
            return True
        return any(at > index and attempt > run_attempt for at, attempt in self.by_run.get(run, ()))


def running_steps(journal: Iterable[Mapping[str, Any] | JournalLine]) -> list[RunningStep]:
    """The steps of ``journal`` (a stream's journal lines, in order, decoded or typed) that started
    and have no outcome, in the order they started, each ``interrupted`` if its process is gone (see
    the module docstring). Of the attempts at one place only the last counts: an earlier one ended,
    or its process died, before the next began. An intent without a ``ts`` (none agenttrace writes)
    says nothing of when it started, and is left out."""
    last: dict[tuple[str, str], _Intent] = {}
    runs = _RunLines()
    for index, line in enumerate(journal_lines(journal)):
        run, label, attempt = line.run, line.step, line.attempt
        step = line if type(line) is Step else None
        if step is not None and step.kind == "run":  # a run's own line: not a call
            if step.state == "intent" and label == RUN_LABEL:
                runs.add(index, run, attempt, step.process)
            continue
        known = last.get((run, label))
        if step is not None and step.state == "intent":
            if known is None or attempt >= known.attempt:
                run_attempt, process = runs.current.get(run, (1, None))
                last[(run, label)] = _Intent(attempt, step, index, run_attempt, process)
        elif known is not None and known.attempt == attempt:
            known.line = None  # it ended, or a person decided it did not run
    steps = []
    for (run, label), found in last.items():
        intent = found.line
        started = ts_ms(intent.ts) if intent is not None else None
        if intent is None or started is None:
            continue
        arguments = intent.arguments
        path = intent.path
        steps.append(
            RunningStep(
                run=run,
                path=path if isinstance(path, str) and path != label else label,
                label=label if isinstance(path, str) and path != label else "",
                attempt=found.attempt,
                kind=intent.kind,
                name=intent.name,
                agent_id=intent.agent_id,
                started_at=started,
                arguments=arguments if isinstance(arguments, str) else None,
                interrupted=runs.gone(found.index, run, found.run_attempt, found.process),
                run_attempt=found.run_attempt,
            )
        )
    return steps


def with_running_steps(
    loaded: LoadedFile,
    max_depth: int | None = None,
    steps: list[RunningStep] | None = None,
) -> tuple[LoadedFile, list[RunningStep]]:
    """``loaded`` with a running op for each step of its journal that has not ended (see the
    module docstring), and those steps; ``loaded`` itself and ``[]`` when there is none. Apply
    it after :func:`~agenttrace.formats.session.rebuilt.with_started_nodes`, whose runs it fills.
    A step whose process is gone is in the tree marked interrupted, not in the steps returned,
    and so is every unfinished node of its run.

    An op whose place would nest the tree deeper than ``max_depth`` levels
    (``AGENTTRACE_MAX_NESTING_DEPTH``) is left out, as a file that deep would be refused.
    ``steps``: :func:`running_steps` of ``loaded``'s journal, for a caller that has them
    already (decoding the journal is most of what this costs on a long one)."""
    if steps is None:
        steps = running_steps(loaded.journal)
    if not steps:
        return loaded, []
    if max_depth is None:
        max_depth = ReadLimits.from_env().nesting_depth
    runs = [dict(run) for run in loaded.runs]
    finder = _Runs(runs, loaded, steps)
    placed: list[RunningStep] = []
    gone: list[Node] = []
    for step in steps:
        try:
            address = parse_label(step.path)
        except ValueError:
            continue
        run = finder.run_of(step)
        if run is None:
            continue
        op = running_op(run, address, step.started_at, step.agent_id, finder.names, max_depth)
        if op is None:
            continue
        _describe(op, step)
        if step.interrupted:
            gone.append(run)
        else:
            placed.append(step)
    if not placed and not gone:
        return loaded, []
    for run in gone:
        mark_gone(run)
    empty = {id(run) for run in finder.made if not run["turns"]}  # its one step nested too deep
    runs = [run for run in runs if id(run) not in empty]
    runs.sort(key=lambda run: run.get("startedAt") or 0)
    return dataclasses.replace(loaded, runs=runs), placed


def _describe(op: Node, step: RunningStep) -> None:
    """What the journal says of a running op that its other lines did not."""
    if op.get("kind") != "session":  # a tool hosting a sub-agent is a session op, as it ends
        op["kind"] = step.kind
    if not op.get("name"):
        op["name"] = step.name
    if step.arguments is not None and "request" not in op:
        op["request"] = {"payload": step.arguments, "size": len(step.arguments), "kind": step.kind}


def mark_gone(run: Node) -> None:
    """Mark ``run`` and every node under it that has not ended as interrupted: its process is
    gone, so none of them will end."""
    stack: list[Node] = [run]
    while stack:
        node = stack.pop()
        if node.get("endedAt") is None:
            attributes = node.get("attributes")
            if not isinstance(attributes, dict):
                attributes = node["attributes"] = {}
            attributes[PROCESS_GONE] = True
            attributes[INTERRUPTED] = True
        for key in ("turns", "ops"):
            stack.extend(child for child in node.get(key) or [] if isinstance(child, dict))
        stack.extend(child for child in hosted_sessions(node) if isinstance(child, dict))


class _Runs:
    """Finds the run of each step in ``runs`` (see the module docstring), making it if none is
    there."""

    def __init__(self, runs: list[Node], loaded: LoadedFile, steps: list[RunningStep]) -> None:
        self.runs = runs
        self.made: list[Node] = []
        self.session_id = loaded.session_id or _text(loaded.meta.get("session_id"))
        self.names: dict[str, str] = {}
        for event in loaded.events:
            agent, name = event.get("agent_id"), event.get("name")
            created = event.get("event_type") == "agent_created"
            if created and isinstance(agent, str) and isinstance(name, str) and name:
                self.names[agent] = name
        self.traces: dict[str, str] = {}  # origin -> the trace of its last op that ended
        for line in loaded.accounted:
            entry, trace = line.get("accounting"), line.get("trace_id")
            if isinstance(entry, Mapping) and isinstance(trace, str):
                origin = entry.get("originTxnId")
                if isinstance(origin, str):
                    self.traces[origin] = trace
        self.root_agents: dict[str, str] = {}  # origin -> the agent of its root-level steps
        for step in steps:
            if step.agent_id and _is_root_op(step.path):
                self.root_agents.setdefault(step.run, step.agent_id)

    def run_of(self, step: RunningStep) -> Node | None:
        """The run ``step`` belongs to; ``None`` when that run has ended (it has every node)."""
        roots = [run for run in self.runs if run.get("path", "0") == "0"]
        if step.run_attempt > 1:  # a re-entry's: the run that re-enters the step's run
            again = [
                run
                for run in roots
                if _attribute(run, REENTERS) == step.run and run.get("endedAt") is None
            ]
            if again:
                return again[-1]
            nameless = [run for run in roots if _unnamed(run) and run.get("endedAt") is None]
            if len(nameless) == 1:  # the re-entering run, known from its events only
                return nameless[0]
        named = [run for run in roots if step.run in (run.get("originTxnId"), run.get("txnId"))]
        unfinished = [run for run in named if run.get("endedAt") is None]
        if unfinished:
            return unfinished[-1]
        if named:
            # An ended run still lacks the step if the sub-agent run holding it never ended:
            # one another process ran and was killed in (docs/session-file.md, "Several
            # writers").
            return named[-1] if _under_unfinished_run(named[-1], step.path) else None
        trace = self.traces.get(step.run)
        if trace is not None:
            traced = [r for r in roots if r.get("traceId") == trace and r.get("endedAt") is None]
            if traced:
                return traced[-1]
        nameless = [run for run in roots if run.get("endedAt") is None and _unnamed(run)]
        if len(nameless) == 1:  # several: which is which is not known, so none is guessed
            run = nameless[0]
            run["txnId"] = run["originTxnId"] = step.run
            return run
        return self._made(step)

    def _made(self, step: RunningStep) -> Node:
        agent = self.root_agents.get(step.run) or step.agent_id
        name = self.names.get(agent, agent)
        run: Node = {
            "id": step.run,
            "traceId": None,
            "spanId": None,
            "path": "0",
            "agentId": agent,
            "agentName": name,
            "callPath": name,
            "txnId": step.run,
            "originTxnId": step.run,
            "parentTxnId": None,
            "sessionId": self.session_id,
            "startedAt": step.started_at,
            "attributes": {"ingress": {}},
            "turns": [],
        }
        self.runs.append(run)
        self.made.append(run)
        return run


def _under_unfinished_run(run: Node, label: str) -> bool:
    """Whether the op at ``label`` is inside a sub-agent run of ``run`` that has not ended."""
    try:
        address = parse_label(label)
    except ValueError:
        return False
    session: Mapping[str, Any] = run
    for depth in range(3, len(address), 3):  # each sub-agent run on the way: (turn, op, n)
        turn, _, number = address[depth - 3 : depth]
        turns = session.get("turns")
        if not isinstance(turns, list) or not 0 < turn <= len(turns):
            return False
        found = _op_at(turns[turn - 1], address[: depth - 1])
        hosted = list(hosted_sessions(found)) if found is not None else []
        if not 0 < number <= len(hosted):
            return False
        session = hosted[number - 1]
    return session is not run and session.get("endedAt") is None


def _op_at(turn: Any, address: tuple[int, ...]) -> Mapping[str, Any] | None:
    """The op of ``turn`` at ``address`` (a turn's ops are listed in start order, their
    labels saying which is which)."""
    if not isinstance(turn, Mapping):
        return None
    label = format_label(address)
    ops = turn.get("ops")
    for op in ops if isinstance(ops, list) else []:
        if isinstance(op, Mapping) and op.get("path") == label:
            return op
    return None


def _is_root_op(label: str) -> bool:
    """Whether ``label`` is an op of a run's own turns (not of a sub-agent's)."""
    try:
        return len(parse_label(label)) == 2
    except ValueError:
        return False


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _attribute(node: Node, key: str) -> Any:
    attributes = node.get("attributes")
    return attributes.get(key) if isinstance(attributes, dict) else None


def _unnamed(run: Node) -> bool:
    """Whether no file says ``run``'s origin yet (a run known from its events only)."""
    return not run.get("originTxnId") and not run.get("txnId")


def process_last(
    journal: Iterable[Mapping[str, Any] | JournalLine], run: str, path: str, attempt: int
) -> int | None:
    """The last journal record (ms) of the process that started the step ``(run, path,
    attempt)``: the lines from its intent up to the first run line of another process (a
    resume's). When it died is written nowhere: this is the latest it is known to have lived."""
    latest: int | None = None
    started = False
    process: Any = None
    for line in journal_lines(journal):
        if type(line) is not Step:
            continue  # a person's decision: no record of the process
        run_line = line.kind == "run" and line.step == RUN_LABEL
        if not started:
            if run_line:
                process = line.process
            started = line.key == (run, path, attempt) and line.state == "intent"
            if not started:
                continue
        elif run_line and line.state == "intent" and line.process != process:
            break  # another process: this one was gone
        ms = ts_ms(line.ts)
        if ms is not None and (latest is None or ms > latest):
            latest = ms
    return latest
