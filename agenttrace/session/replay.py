"""``agenttrace.replaying``: a recorded run runs again from its journal, into a new session
(docs/design/replay.md).

The source session's files are only read. The replay session starts with the source's agents
and transcripts as they were when the source run started, its file's ``meta.replay_of`` names
the source, and it is armed with a :class:`~agenttrace.model.reentry.Reentry` carrying the
replay's rules, so the next root run is answered from the source run's journal by the re-entry
code; a replay of every run of the session arms one per run, taken in the order runs start
(``agenttrace.model.replay_runs``). What the body of a tool call the replay serves logged is
copied into it when the call is served (``agenttrace.model.served_bodies``): a call that runs
live logs its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenttrace._internal.checks import check_callable, check_choice, check_flag, check_path
from agenttrace._internal.context import Linkable
from agenttrace._internal.offline import offline as refusing_connections
from agenttrace._internal.runtime import runtime
from agenttrace.formats.session.files import SessionFileError, check_session_files, find_session
from agenttrace.formats.session.fullest import load_writers
from agenttrace.formats.session.optree import journal_origin
from agenttrace.formats.session.unfinished import without_unfinished
from agenttrace.model.fork import Fork
from agenttrace.model.ids import new_txn_id
from agenttrace.model.journal import EFFECTS, Journal, Step
from agenttrace.model.journal_lines import RUN_LABEL
from agenttrace.model.reentry import InDoubtAction, Reentry
from agenttrace.model.replay import (
    REPLAY_MODES,
    NotReplayed,
    ReplayMode,
    ReplayReport,
    ReplayRules,
)
from agenttrace.model.replay import labels_before as labels_started_before
from agenttrace.model.replay_runs import ReplayRuns, recorded_runs, run_events
from agenttrace.model.rewind import events_at_start
from agenttrace.model.served_bodies import served_bodies
from agenttrace.model.skipped_bodies import skipped_bodies
from agenttrace.session.leases import hold as hold_lease
from agenttrace.session.leases import take as take_lease
from agenttrace.session.restore import build_agents
from agenttrace.session.state import AgentRecord, Session, session_if_any, use_session

RUN_AGAIN: dict[str, InDoubtAction] = dict.fromkeys(EFFECTS, "retry")
"""A replay runs live whatever the recording cannot answer: no step stops it as in doubt."""


@dataclass
class Replay:
    """A replay under way (``with agenttrace.replaying(...) as replay``)."""

    session: Session
    """The replay session: new, current inside the block."""
    source: str
    """The source session's id."""
    run: str
    """The source run's origin id."""
    report: ReplayReport
    """What was served and what ran live (final once the block exits)."""
    root: Any = None
    """The root agent ``agent_factory`` rebuilt (``None`` without one)."""
    fork: Fork | None = None
    """A fork's (``agenttrace.forking``): where it branches and its overrides."""
    runs: list[str] = dataclasses.field(default_factory=list)
    """The origin id of each source run the replay answers, in the order they started (one
    but with ``every_run``): the k-th root run started in the block is answered from the
    k-th."""
    reentries: list[Reentry] = dataclasses.field(default_factory=list, repr=False)
    """One per source run, as ``runs``: what answers it, and what it was asked."""

    @property
    def unused_runs(self) -> int:
        """How many of ``runs`` no root run started in the block has been answered from."""
        replays = self.session.replay_runs
        if replays is not None:
            return replays.unused
        reentry = self.session.reentry
        return 1 if reentry is not None and not reentry.taken else 0

    def unasked(self) -> list[NotReplayed]:
        """The recorded LLM and tool calls of the runs started in the block that no call asked
        for (the block made fewer calls than the recording), in each run's order."""
        return [
            NotReplayed(step.key[1], step.kind, step.name or "", "recorded, never asked")
            for reentry in self.reentries
            for step in reentry.unasked()
        ]


@contextlib.contextmanager
def replaying(
    session: str | Path,
    *,
    run: int | None = None,
    until: str | None = None,
    mode: ReplayMode = "strict",
    offline: bool = False,
    sessions_dir: str | Path | None = None,
    agent_factory: Callable[[AgentRecord, Session], Any] | None = None,
    every_run: bool = False,
) -> Iterator[Replay]:
    """Replay a recorded run: the code run inside the block (the source run's entry point,
    called as it was) is answered from the source run's journal, into a new session made
    current for the block (docs/design/replay.md).

    ``session``: the source session's id (in ``sessions_dir``, by default init's) or file.
    ``run``: which of its runs, numbered as ``agenttrace tree`` prints them (1 for the first;
    by default the last decorated run that ended).
    ``until``: a label of that run; it and every step after it run live. ``mode``: ``strict``
    raises :class:`~agenttrace.model.replay.ReplayDivergence` at the first call the recording
    does not answer; ``lenient`` runs that call and everything after it live. ``offline``:
    every network connection is refused inside the block. ``agent_factory``: rebuilds the
    agents as ``load_session``'s does (``replay.root``). ``every_run``: every decorated run of
    the session is replayed, in the order they started: the k-th root run started in the block
    is answered from the k-th (one past the last is a divergence at its start); not with
    ``run`` nor ``until``.
    """
    api = "agenttrace.replaying"
    check_choice(api, "mode", mode, REPLAY_MODES)
    check_arguments(api, session, run, offline, sessions_dir, agent_factory)
    if until is not None and not isinstance(until, str):
        raise TypeError(f"{api}: until must be a path label (str), not {until!r}")
    check_flag(api, "every_run", every_run, optional=False)
    if every_run and (run is not None or until is not None):
        raise ValueError(f"{api}: every_run replays every run: give it no run nor until")
    with replay_block(
        session, run, until, mode, offline, sessions_dir, agent_factory, every_run=every_run
    ) as replay:
        yield replay


def check_arguments(
    api: str,
    session: str | Path,
    run: int | None,
    offline: bool,
    sessions_dir: str | Path | None,
    agent_factory: Callable[[AgentRecord, Session], Any] | None,
) -> None:
    """The arguments a replay and a fork share, checked (``api`` names the caller)."""
    check_path(api, "session", session, optional=False)
    check_path(api, "sessions_dir", sessions_dir)
    check_flag(api, "offline", offline, optional=False)
    check_callable(api, "agent_factory", agent_factory, "a callable of (record, session)")
    if run is not None and (type(run) is not int or run < 1):
        raise ValueError(
            f"{api}: run must be a run's number as tree prints it (1 for the first), not {run!r}"
        )


@contextlib.contextmanager
def replay_block(
    session: str | Path,
    run: int | None,
    until: str | None,
    mode: ReplayMode,
    offline: bool,
    sessions_dir: str | Path | None,
    agent_factory: Callable[[AgentRecord, Session], Any] | None,
    fork: Fork | None = None,
    every_run: bool = False,
) -> Iterator[Replay]:
    """The block of a replay whose arguments are checked (``replaying``'s, ``forking``'s):
    the replay session started and current, the agents rebuilt, connections refused if
    ``offline``; the session that was current before is current again after it. ``fork``:
    the fork's overrides, at ``until`` (its source, run and root span filled in here);
    ``every_run``: every run is replayed (``replaying``'s)."""
    directory = Path(sessions_dir) if sessions_dir is not None else runtime.settings.sessions_dir
    previous = session_if_any()
    path = find_session(str(session), directory)
    replay, expected = _start(path, run, until, mode, fork, every_run)
    try:
        if agent_factory is not None:
            root = expected.root()
            if root is None:
                raise SessionFileError(f"{session}: the session has no root agent")
            # As the run will find them once its served calls are: a sub-agent a served call
            # created is there (its body does not run to create it), as the source left it.
            replay.root = build_agents(replay.session, root, agent_factory, expected)
        with refusing_connections() if offline else contextlib.nullcontext():
            yield replay
        replay.report.unasked = replay.unasked()
    finally:
        use_session(previous)


def _start(
    path: Path,
    index: int | None,
    until: str | None,
    mode: ReplayMode,
    fork: Fork | None = None,
    every_run: bool = False,
) -> tuple[Replay, Session]:
    """The replay session of run number ``index`` of the session in ``path`` (``every_run``:
    of each of its decorated runs, in the order they started), made current (a fork's, with
    ``fork``); and the agents as the (first) run finds them if every call the replay may serve
    is (a session not written: what the agents are rebuilt from)."""
    (own, _), _writers = load_writers(path, keep_damaged=True)
    loaded, _ = without_unfinished(path, own)
    journal = Journal(loaded.journal)
    runs = recorded_runs(journal) if every_run else [_source_run(journal, loaded.runs, index, path)]
    if not runs:
        raise ValueError(f"{path}: the session has no decorated run: nothing to replay")
    first = runs[0][0]
    origin = first.key[0]
    source_id = loaded.session_id or path.name.split(".", 1)[0]
    before = None
    if until is not None:
        before = labels_started_before(journal, origin, until)
        if before is None:
            raise ValueError(f"{path}: run {origin} has no step at {until!r} to replay until")
    skipped = skipped_bodies(journal, origin)
    if before is not None:  # only the calls before the label are answered
        callers = {k: v for k, v in skipped.callers.items() if k in before}
        skipped = dataclasses.replace(skipped, callers=callers)
    count, end = run_events(journal, loaded.events, first)
    expected = Session()  # never written: what the agents are rebuilt from
    expected.restore(events_at_start(loaded.events[:end], count, skipped), raw_lines=None)
    source = Session.from_file(loaded)  # for a divergence's diff: what each agent was sent
    if fork is not None:
        trace_id, span_id = _root_span(loaded.runs, origin)
        fork = dataclasses.replace(
            fork, session=source_id, run=origin, trace_id=trace_id, span_id=span_id
        )
    requests = {aid: list(record.transcript) for aid, record in source.agents.items()}
    report, lock = ReplayReport(), threading.Lock()  # one report for all the runs

    def reentry(run: tuple[Step, Step]) -> Reentry:
        start, end_line = run
        at, upto = run_events(journal, loaded.events, start)
        body = skipped if start is first else skipped_bodies(journal, start.key[0])
        rules = ReplayRules(
            mode,
            until,
            before,
            report=report,
            run=end_line,
            requests=requests,
            fork=fork,
            bodies=served_bodies(loaded.events[:upto], at, start.messages or 0, body),
            _lock=lock,
        )
        return Reentry(
            start.key[0],
            1,
            journal,
            RUN_AGAIN,
            name=end_line.name,
            fingerprint=end_line.fingerprint,
            replay=rules,
        )

    # Every run's ids counted: a copy from any run's body keeps ids the session never allocates.
    counted = (expected, source) if every_run else (expected,)
    replay_session = _new_session([dict(event) for event in loaded.events[:count]], *counted)
    origins = [start.key[0] for start, _ in runs]
    replay_session.meta["replay_of"] = {
        "session": source_id,
        "run": origin,
        **({"runs": origins} if every_run else {}),
        "mode": mode,
        **({"until": until} if until is not None else {}),
    }
    if fork is not None:
        replay_session.meta["fork_of"] = fork.meta()
    reentries = [reentry(run) for run in runs]
    if every_run:
        replay_session.replay_runs = ReplayRuns.of(reentries)
    else:
        replay_session.reentry = reentries[0]
    use_session(replay_session)
    replayed = Replay(
        replay_session, source_id, origin, report, fork=fork, runs=origins, reentries=reentries
    )
    return replayed, expected


def copy_served_body(
    session: Session,
    reentry: Reentry | None,
    step: Step | None,
    call_message: str | None,
    at: Linkable | None = None,
) -> None:
    """The tool call of a replay that ``session`` records was just served from the source's
    ``step``: what its body logged there is copied into ``session`` now, once, in the call's
    scope ``at`` (default: the current one). Nothing for a re-entry's call: a resumed session
    holds what the body logged. ``call_message``: the replay's message id of the assistant
    entry holding the call, if it has one."""
    rules = reentry.replay if reentry is not None else None
    if rules is None or rules.bodies is None or step is None:
        return
    session.log_copies(rules.bodies.take(step.key[1], call_message), at=at)


def _root_span(runs: list[Any], origin: str) -> tuple[int | None, int | None]:
    """(trace id, span id) of the source run's root span, as its session file keeps them (its
    last root node journaled under ``origin``: a re-entered run's is the one that ended);
    ``None`` for what the file does not hold (a fork then has no link to follow)."""
    for root in reversed(runs):
        if isinstance(root, dict) and journal_origin(root) == origin:
            trace_id, span_id = root.get("traceId"), root.get("spanId")
            return _hex_id(trace_id, 32), _hex_id(span_id, 16)
    return None, None


def _hex_id(value: Any, digits: int) -> int | None:
    """An OpenTelemetry id written as ``digits`` hex digits, if ``value`` is one (not zero)."""
    if not isinstance(value, str) or len(value) != digits:
        return None
    try:
        number = int(value, 16)
    except ValueError:
        return None
    return number or None


def _source_run(
    journal: Journal, runs: list[Any], number: int | None, path: Path
) -> tuple[Step, Step]:
    """The source run's first and last run lines: run ``number`` as ``agenttrace tree``
    numbers the session's runs (1 for the first), by default the last decorated run that
    ended."""
    attempts: dict[str, list[Step]] = {}
    for (run, label, _), step in journal.steps.items():
        if step.kind == "run" and label == RUN_LABEL and not step.implicit:
            attempts.setdefault(run, []).append(step)
    if number is None:
        ended = [steps for steps in attempts.values() if steps[-1].state == "done"]
        if not ended:
            raise ValueError(f"{path}: no run of this session ended: nothing to replay")
        return ended[-1][0], ended[-1][-1]
    roots = [run for run in runs if isinstance(run, dict)]
    if number > len(roots):
        raise ValueError(f"{path}: it has {len(roots)} run(s); no run {number}")
    steps = attempts.get(journal_origin(roots[number - 1]) or "")
    if steps is None:
        raise ValueError(
            f"{path}: run {number} has no decorated run in the journal (an implicit run, or "
            "one recorded without the journal): nothing to replay"
        )
    return steps[0], steps[-1]


def _new_session(events: list[dict[str, Any]], *counted: Session) -> Session:
    """A new session holding ``events`` (written to its own files as restored ones are), under
    its lease where it will be written, as ``load_session`` starts one. Its ID counters start
    past each of ``counted``'s: no message id of a source run's that a copy refers to, nor agent
    id a served call's body gave a sub-agent, is allocated again."""
    session_id = new_txn_id()
    written = runtime.settings.sessions_dir if runtime.recorder is not None else None
    check_session_files(runtime.settings.sessions_dir, session_id)
    session = Session(session_id)
    session.restore(events, raw_lines=None)
    session.restored_count = len(events)
    for other in counted:
        session.message_counter = max(session.message_counter, other.message_counter)
        session.agent_counter = max(session.agent_counter, other.agent_counter)
    if written is not None:
        taken = take_lease(session_id, written)
        hold_lease(session, written)  # the lease just taken, shared
        taken.give_back()
    return session
