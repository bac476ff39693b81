"""The sessions of a sessions directory, most recently written first (``agenttrace list``).

The directory is listed and its session files are sorted by when they were last written (one
``stat`` each); only the sessions shown are read, each with the readers every command uses
(regular files only, within the ``AGENTTRACE_MAX_*`` limits). A session whose file cannot be
read is a row with status ``damaged`` and the reader's one-line reason, not an error.

A session's status:

- ``ended``: its session file is up to date (the event stream holds no event the file lacks)
  and the last run in it has ended, or it has no run.
- ``running``: not ended, and the process that started its last run (the pid in the run's
  ingress) still runs on this machine and did not start after the run did (a later process
  that got the same pid does not count). When that process is not known to be the one
  writing (no session file yet, the stream went on after the last run ended, a run started by
  other means than a process's own call, or a system where processes cannot be probed), the
  event stream written in the last :data:`ACTIVE_WINDOW_S` seconds counts instead.
- ``interrupted``: not ended and not running: the process was killed or crashed mid-run.
- ``damaged``: a file of the session cannot be read.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenttrace._internal.config import ReadLimits
from agenttrace._internal.processes import process_alive
from agenttrace._internal.times import iso_seconds, ts_ms
from agenttrace.formats.session.files import (
    SNAPSHOT_SUFFIX,
    STREAM_SUFFIX,
    LoadedFile,
    SessionFileError,
    check_session_id,
    read_session_file,
)
from agenttrace.formats.session.totals import cost_text, session_stats

ENDED = "ended"
RUNNING = "running"
INTERRUPTED = "interrupted"
DAMAGED = "damaged"

ACTIVE_WINDOW_S = 600
"""A session whose writing process is unknown is running while its stream was written this
recently (an LLM call may take minutes without an event)."""


@dataclass(frozen=True)
class SessionRow:
    """One session of the listing; the counts are None when the session is damaged, and the
    tokens and cost also when no run of it is in a session file yet."""

    session_id: str
    status: str
    updated_ns: int
    """When a file of the session was last written (ns since the epoch)."""
    started_ms: int | None = None
    agents: int | None = None
    runs: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    totals: Mapping[str, Any] | None = None
    """The session's ``total`` row of :func:`~agenttrace.formats.session.totals.session_stats`."""
    error: str | None = None
    """Why a damaged session cannot be read (the reader's one line)."""

    @property
    def tokens(self) -> int | None:
        if self.input_tokens is None or self.output_tokens is None:
            return None
        return self.input_tokens + self.output_tokens

    @property
    def cost(self) -> str:
        """The cost for a person, as ``stats`` words it (``-`` when there is none to tell)."""
        return "-" if self.totals is None else cost_text(self.totals)

    def as_json(self) -> dict[str, Any]:
        """The row for scripts: times in ms and as ISO 8601 UTC, the cost in dollars (null
        when some call's price is unknown, as in ``stats --json``)."""
        totals = self.totals or {}
        return {
            "session_id": self.session_id,
            "status": self.status,
            "started": iso_seconds(self.started_ms),
            "started_ms": self.started_ms,
            "updated": iso_seconds(self.updated_ns // 1_000_000),
            "agents": self.agents,
            "runs": self.runs,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "tokens": self.tokens,
            "cost_usd": totals.get("cost_usd"),
            "cost_usd_known": totals.get("cost_usd_known"),
            "llm_attempts_cost_unknown": totals.get("llm_attempts_cost_unknown"),
            "error": self.error,
        }


@dataclass(frozen=True)
class Listing:
    """The rows shown, and how many sessions the directory holds in all."""

    directory: Path
    rows: list[SessionRow]
    total: int


@dataclass
class _Files:
    stream: Path | None = None
    snapshot: Path | None = None
    updated_ns: int = 0


def list_sessions(
    directory: Path,
    limit: int | None = None,
    *,
    limits: ReadLimits | None = None,
    now: float | None = None,
) -> Listing:
    """The ``limit`` most recently written sessions of ``directory`` (all if None), newest
    first. A missing directory holds none; one that cannot be listed raises ``OSError``."""
    limits = ReadLimits.from_env() if limits is None else limits
    now = time.time() if now is None else now
    found = _session_files(directory)
    newest = sorted(found.items(), key=lambda item: (-item[1].updated_ns, item[0]))
    shown = newest if limit is None else newest[:limit]
    rows = [_row(session_id, files, limits, now) for session_id, files in shown]
    return Listing(directory, rows, len(found))


def session_row(
    directory: Path,
    session_id: str,
    *,
    limits: ReadLimits | None = None,
    now: float | None = None,
) -> SessionRow | None:
    """The row of one session of ``directory`` (its id checked first: ``SessionFileError``),
    as :func:`list_sessions` makes it; None when it has no file there."""
    limits = ReadLimits.from_env() if limits is None else limits
    now = time.time() if now is None else now
    check_session_id(session_id)
    files = _Files()
    for suffix in (STREAM_SUFFIX, SNAPSHOT_SUFFIX):
        path = directory / f"{session_id}{suffix}"
        try:
            written = path.stat(follow_symlinks=False).st_mtime_ns
        except OSError:
            continue  # missing (or unreadable: the other file may still tell the session)
        if suffix == STREAM_SUFFIX:
            files.stream = path
        else:
            files.snapshot = path
        files.updated_ns = max(files.updated_ns, written)
    if files.stream is None and files.snapshot is None:
        return None
    return _row(session_id, files, limits, now)


def _session_files(directory: Path) -> dict[str, _Files]:
    """The sessions whose files are in ``directory``, by id (names that are not a session's
    file, such as a write's temporary file, are left out)."""
    found: dict[str, _Files] = {}
    try:
        entries = os.scandir(directory)
    except FileNotFoundError:
        return found
    with entries:
        for entry in entries:
            name = entry.name
            for suffix in (STREAM_SUFFIX, SNAPSHOT_SUFFIX):
                if name.endswith(suffix):
                    break
            else:
                continue
            session_id = name[: -len(suffix)]
            try:
                check_session_id(session_id)
            except SessionFileError:
                continue
            try:
                written = entry.stat(follow_symlinks=False).st_mtime_ns
            except OSError:
                written = 0  # listed last; reading it says what is wrong
            files = found.setdefault(session_id, _Files())
            path = Path(entry.path)
            if suffix == STREAM_SUFFIX:
                files.stream = path
            else:
                files.snapshot = path
            files.updated_ns = max(files.updated_ns, written)
    return found


def _row(session_id: str, files: _Files, limits: ReadLimits, now: float) -> SessionRow:
    try:
        stream = read_session_file(files.stream, limits=limits) if files.stream else None
        snapshot = read_session_file(files.snapshot, limits=limits) if files.snapshot else None
    except SessionFileError as exc:
        return SessionRow(session_id, DAMAGED, files.updated_ns, error=str(exc))
    if (stream and stream.kind != "stream") or (snapshot and snapshot.kind != "snapshot"):
        # A gzip named as a stream or the other way round: not what its name says.
        named = files.stream if stream and stream.kind != "stream" else files.snapshot
        return SessionRow(
            session_id, DAMAGED, files.updated_ns, error=f"{named}: not the file its name says"
        )
    events = _fullest_events(stream, snapshot)
    runs = snapshot.runs if snapshot else []
    totals = session_stats(runs)["total"] if runs else None
    return SessionRow(
        session_id,
        _status(stream, snapshot, files, now),
        files.updated_ns,
        started_ms=_started_ms(snapshot, events),
        agents=len({e.get("agent_id") for e in events if e.get("event_type") == "agent_created"}),
        runs=len(runs),
        input_tokens=totals["input_tokens"] if totals else None,
        output_tokens=totals["output_tokens"] if totals else None,
        totals=totals,
    )


def _fullest_events(
    stream: LoadedFile | None, snapshot: LoadedFile | None
) -> Sequence[Mapping[str, Any]]:
    """The events of whichever file has more (the stream is usually ahead)."""
    if stream is None:
        return snapshot.events if snapshot else []
    if snapshot is None or len(stream.events) >= len(snapshot.events):
        return stream.events
    return snapshot.events


def _status(
    stream: LoadedFile | None, snapshot: LoadedFile | None, files: _Files, now: float
) -> str:
    last = snapshot.runs[-1] if snapshot and snapshot.runs else None
    up_to_date = snapshot is not None and (
        stream is None or len(stream.events) <= len(snapshot.events)
    )
    last_ended = last is None or "endedAt" in last
    if up_to_date and last_ended:
        return ENDED
    alive = None if last is None else process_alive(_pid(last), last.get("startedAt"))
    if alive or (alive is False and not last_ended):
        return RUNNING if alive else INTERRUPTED
    # The process writing is not known: a stream without a session file, events after the last
    # run ended from another process (a resume), or a system that cannot probe processes.
    return RUNNING if now - files.updated_ns / 1e9 < ACTIVE_WINDOW_S else INTERRUPTED


def _pid(run: Mapping[str, Any]) -> object:
    """The pid of the process that started ``run`` (its ingress ``cli.pid``), if it has one."""
    attributes = run.get("attributes")
    ingress = attributes.get("ingress") if isinstance(attributes, Mapping) else None
    cli = ingress.get("cli") if isinstance(ingress, Mapping) else None
    return cli.get("pid") if isinstance(cli, Mapping) else None


def _started_ms(snapshot: LoadedFile | None, events: Sequence[Mapping[str, Any]]) -> int | None:
    """When the session started: its first run (the session file's ``createdAt``), else its
    first event."""
    if snapshot is not None:
        created = snapshot.meta.get("createdAt")
        if type(created) is int:
            return created
        if snapshot.runs and type(snapshot.runs[0].get("startedAt")) is int:
            return int(snapshot.runs[0]["startedAt"])
    for event in events[:1]:
        ts = event.get("ts")
        ms = ts_ms(ts)
        if ms is not None:
            return ms
    return None
