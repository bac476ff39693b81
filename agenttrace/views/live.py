"""A session as it is now, while its agents may still run: for ``agenttrace serve`` and
``agenttrace tree --follow``.

It reads only what agenttrace writes, so it follows a process it did not start (and files of
earlier releases): the event stream, appended as events happen, and the session file,
replaced atomically when a run or a sub-agent ends. Each read takes both with the readers
every command uses (bounded, validated) and builds the fullest tree they hold:

1. the session file's runs, with the stream's events when it is ahead
   (:func:`~agenttrace.formats.session.fullest.load_fullest`);
2. every op that ended since, from the stream's ``op_accounted`` lines, in its place
   (:func:`~agenttrace.formats.session.rebuilt.with_rebuilt_runs`);
3. every run, turn and op that an event was logged in and that has not ended, from the
   events' path labels (:func:`~agenttrace.formats.session.rebuilt.with_started_nodes`): a sub-agent
   shows under its tool call from the first thing it hears;
4. every LLM attempt and tool call that started and has not ended, from the step journal's
   ``intent`` lines without an outcome
   (:func:`~agenttrace.formats.session.inflight.with_running_steps`): a call that hangs shows, with
   its kind, name and start, though it logged nothing.

Steps 1 to 4, the status and every node's settling are the session's account
(:mod:`agenttrace.views.account`): the one rule ``list``, ``tree``, ``stats`` and the exports
follow too. What is shown passes the
redaction policy of every output (:mod:`agenttrace.views.public`). A reader polls
:func:`files_state`, which costs three ``stat`` calls, and reads again only when it changes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenttrace._internal.config import Settings
from agenttrace._internal.redact import redacted_copy
from agenttrace.formats.session.files import (
    SEGMENTS_SUFFIX,
    LoadedFile,
    SessionFileError,
    check_session_id,
    segments_state,
    snapshot_path,
    stream_path,
)
from agenttrace.formats.session.optree import children, hosted_sessions, session_ops
from agenttrace.views.account import RUNNING, read_account
from agenttrace.views.public import public_view

FilesState = tuple[tuple[int, int] | None, tuple[int, int] | None, tuple[tuple[str, int, int], ...]]
"""(size, mtime in ns) of a session's stream and of its session file (None: missing)."""


class NoSuchSession(SessionFileError):
    """The sessions directory has no file of that session."""


@dataclass(frozen=True)
class LiveSession:
    """A session as read at ``read_at_ms``: its redacted files, with the nodes still running."""

    session_id: str
    status: str
    """``running``, ``ended``, ``interrupted`` or ``damaged``, as ``agenttrace list`` says."""
    loaded: LoadedFile
    read_at_ms: int
    state: FilesState
    """The files as they were when read (compare with :func:`files_state` to know if stale)."""
    running_steps: tuple[dict[str, Any], ...] = ()
    """The calls in flight, each as :meth:`~agenttrace.formats.session.inflight.RunningStep.as_json`
    (redacted): in the tree too, as ops without an end."""

    @property
    def running(self) -> bool:
        return self.status == RUNNING


def files_state(directory: Path, session_id: str) -> FilesState:
    """The size and modification time of the session's two files (id checked), and of its
    joined writers' segments (docs/session-file.md, "Several writers"; none: one more
    ``stat``, of the directory they would be in)."""
    return (
        _stat(stream_path(directory, session_id)),
        _stat(snapshot_path(directory, session_id)),
        segments_state(directory / f"{session_id}{SEGMENTS_SUFFIX}") or (),
    )


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        status = path.stat()
    except OSError:
        return None
    return (status.st_size, status.st_mtime_ns)


def read_live(directory: Path, session_id: str) -> LiveSession:
    """The session ``session_id`` of ``directory`` as it is now (see the module docstring).

    Raises :class:`NoSuchSession` when neither file is there, and ``SessionFileError`` when
    the id is not a plain name or the files cannot be read (a damaged session file beside a
    readable stream is not an error: the stream tells the rest, as for every command)."""
    check_session_id(session_id)
    state = files_state(directory, session_id)
    stream, snapshot = stream_path(directory, session_id), snapshot_path(directory, session_id)
    if state[:2] == (None, None):
        raise NoSuchSession(f"no session {session_id} in {directory}")
    read_at = time.time()
    account = read_account(stream if state[0] is not None else snapshot, now=read_at)
    loaded = public_view(account.loaded)
    steps = account.running_steps
    shown = redacted_copy([step.as_json() for step in steps], Settings.resolve().max_payload_bytes)
    return LiveSession(session_id, account.state, loaded, int(read_at * 1000), state, tuple(shown))


def session_document(live: LiveSession) -> dict[str, Any]:
    """The JSON of ``GET /api/runs/{id}/tree`` (docs/serve.md): the page's data (the HTML
    export's, :func:`~agenttrace.views.exports.html.page_data`) with the opTree as ``tree``,
    the conversation, each agent's transcript, every log and accounting entry with the path of
    its op, and the live fields ``status``, ``now`` and ``runningSteps`` (the calls in flight)."""
    from agenttrace.views.exports.html import page_data

    data = page_data(live.loaded)
    runs = data.pop("runs")
    dialog = data.pop("dialog")
    conversations: dict[str, list[dict[str, Any]]] = {}
    for event in live.loaded.events:
        agent = event.get("agent_id")
        if event.get("event_type") == "transcript_entry" and isinstance(agent, str):
            conversations.setdefault(agent, []).append(event)
    return {
        "sessionId": live.session_id,
        "status": live.status,
        "now": live.read_at_ms,
        "runningSteps": list(live.running_steps),
        **data,
        "tree": runs,
        "conversation": dialog,
        "conversations": conversations,
        # Every node's: an op's, and a run's or turn's (its failure, a log made there).
        "logs": [
            _with_path(node, log) for node in _all_nodes(runs) for log in children(node, "logs")
        ],
        "accounting": [
            _with_path(op, entry) for op in _all_ops(runs) for entry in children(op, "accounting")
        ],
    }


def _all_ops(runs: list[dict[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """Every op of ``runs``, sub-agents' too, each run's tree in order."""
    for run in runs:
        yield from _ops_under(run)


def _ops_under(session: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for op in session_ops(session):
        yield op
        for child in hosted_sessions(op):
            yield from _ops_under(child)


def _all_nodes(runs: list[dict[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """Every run, turn and op of ``runs``, sub-agents' too, in tree order."""
    for run in runs:
        yield from _nodes_under(run)


def _nodes_under(session: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield session
    for turn in children(session, "turns"):
        yield turn
        for op in children(turn, "ops"):
            yield op
            for child in hosted_sessions(op):
                yield from _nodes_under(child)


def _with_path(op: Mapping[str, Any], item: Mapping[str, Any]) -> dict[str, Any]:
    return {"path": op.get("path"), **item}
