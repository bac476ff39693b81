"""A root agent run's lifecycle: what it shares with every sub-agent inside it (:class:`Run`),
how it starts (its origin txn id, the interrupted run it re-enters, its ``run_start`` journal
line) and how it ends (its ``run_end`` line). The scopes (``tracing/scopes.py``) open and
close the runs' spans; this module is what a run is beside its span."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.runtime import runtime
from agenttrace.model.ids import new_txn_id
from agenttrace.model.reentry import Reentry
from agenttrace.model.replay_runs import ReplayRuns
from agenttrace.model.request_digests import MessageDigests
from agenttrace.session.reentry_match import enters as enters_reentry
from agenttrace.session.reentry_match import replay_enters
from agenttrace.session.state import Session
from agenttrace.tracing.run_arguments import root_run_fingerprint
from agenttrace.tracing.run_journal import journal_run_end, journal_run_start


class Run:
    """What a root agent run shares with every sub-agent inside it."""

    __slots__ = (
        "attempt",
        "digests",
        "fingerprint",
        "histories",
        "journal_run",
        "origin_txn_id",
        "reentry",
        "session",
        "session_id",
        "values",
    )

    def __init__(self, origin_txn_id: str, session: Session) -> None:
        self.origin_txn_id = origin_txn_id
        self.session = session
        """The ``Session`` the run records its events in (ids, agents, transcripts)."""
        self.session_id = session.session_id
        self.histories: dict[str, tuple[int, Any]] = {}
        """Per agent id: (message count, last message) of its previous LLM request."""
        self.digests: dict[str, MessageDigests] = {}
        """Per agent id: its last LLM request's messages and their digests, for the next
        request's fingerprint (``agenttrace.model.request_digests``)."""
        self.journal_run = origin_txn_id
        """The run its steps are journaled under: its own origin, or the interrupted run's it
        re-enters (so its steps and idempotency keys are that run's)."""
        self.attempt = 1
        """Which attempt at ``journal_run`` this is (2 for its first re-entry)."""
        self.reentry: Reentry | None = None
        """The interrupted run it re-enters, if it does (``agenttrace.model.reentry``)."""
        self.fingerprint: str | None = None
        """The fingerprint of the arguments its entry point was called with, if journaled."""
        self.values: dict[str, itertools.count[int]] = {}
        """Per path label: how many values were read there inside ``agenttrace.deterministic()``
        (``agenttrace.tracing.journal.values``)."""


def new_root_run(
    session: Session,
    name: str,
    arguments: tuple[tuple[Any, ...], Mapping[str, Any]] | None,
    implicit: bool,
) -> Run:
    """A root run of ``session`` starting now: named by the session if it is its first (its
    origin txn id is the session id), re-entering the interrupted run a resume armed if it is
    that run's (``agenttrace.session.reentry_match``), or answered from the next recorded run
    of a replay of several (``agenttrace.model.replay_runs``)."""
    # A joined writer's runs never take the session id: the first writer's first run has it.
    first = session.run_count == 0 and not session.runs and session.writer is None
    run = Run(session.session_id if first else new_txn_id(), session)
    session.run_count += 1
    run.fingerprint = root_run_fingerprint(session, arguments, implicit)
    if session.replay_runs is not None:
        run.reentry = _next_replayed(session, session.replay_runs, name, run.fingerprint, implicit)
        return run
    reentry = session.reentry
    if reentry is not None and reentry.take():
        session.reentry = None
        if reentry.replay is not None:
            # A replay session: a run of its own (its own origin and journal keys), answered
            # from the source run's journal (ReplayDivergence if it is another run, strict).
            run.reentry = reentry
            replay_enters(session, reentry, name, run.fingerprint, implicit)
        elif enters_reentry(session, reentry, name, run.fingerprint, implicit):
            run.journal_run, run.attempt = reentry.origin, reentry.attempt
            run.reentry = reentry
    return run


def _next_replayed(
    session: Session, replays: ReplayRuns, name: str, fingerprint: str | None, implicit: bool
) -> Reentry | None:
    """The re-entry of the root run ``name`` starting now in a replay of several runs: the
    k-th run started is answered from the k-th recorded (a divergence at its start if it is
    another run); one past the last recorded is a divergence (strict: raised), and runs live."""
    reentry = replays.take()
    if reentry is None:
        raised = replays.past_end(name, fingerprint)
        if raised is not None:
            raise raised
        return None
    reentry.take()
    replay_enters(session, reentry, name, fingerprint, implicit)
    return reentry


def run_started(run: Run, agent_id: str, name: str, implicit: bool) -> None:
    """A root run's span started: journal its start (``run_start``). A joined writer's run is
    then written to its segment's session file at once, with the ingress that places it under
    the op that started it (docs/design/cross-process.md): a process killed before the run's
    first snapshot would leave a stream only, whose rebuilt run knows no ingress and could
    not be placed. One flush per joined run, each a hand-over between processes anyway."""
    journal_run_start(
        run.session, run.journal_run, run.attempt, agent_id, name, run.fingerprint, implicit
    )
    recorder = runtime.recorder
    if run.session.writer is not None and recorder is not None:
        try:
            recorder.force_flush()
        except Exception as exc:  # the run goes on: only its early snapshot is missing
            report_internal_error("a joined run's first snapshot", exc)


def run_ended(run: Run, agent_id: str, name: str) -> None:
    """A root run ended: the journal no longer has it interrupted, unless it re-entered one
    and stopped at a call in doubt (the next resume re-enters it again, once decided)."""
    if run.reentry is None or run.reentry.stopped is None:
        journal_run_end(run.session, run.journal_run, run.attempt, agent_id, name)
