"""The sessions of a sessions directory, most recently written first (``agenttrace list``).

The directory is listed and its session files are sorted by when they were last written (one
``stat`` each); only the sessions shown are read, each with the readers every command uses
(regular files only, within the ``AGENTTRACE_MAX_*`` limits). A session whose file cannot be
read is a row with status ``damaged`` and the reader's one-line reason, not an error.

A session's status is its account's state (:mod:`agenttrace.views.account`, the one rule every
view derives a session from): ``ended`` or ``failed`` (how its last run ended), ``running``,
``interrupted``; ``damaged`` when a file of the session cannot be read. Its runs, tokens and
cost are the account's too (what ``stats`` and ``tree`` show), from the stream, the session file
and the journal: a killed session's are those of every op that ended before the kill.

Reading a session costs the whole of its files; a row is kept in memory (by each file's size and
modification time) and only its state is decided again while they do not change (``serve``
lists the directory every few seconds).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenttrace._internal.config import ReadLimits
from agenttrace._internal.times import iso_seconds, ts_ms
from agenttrace.formats.session.files import (
    SNAPSHOT_SUFFIX,
    STREAM_SUFFIX,
    LoadedFile,
    SessionFileError,
    check_session_id,
    read_session_file,
    segments_dir,
    segments_state,
)
from agenttrace.formats.session.fullest import fullest_of, load_pair
from agenttrace.formats.session.totals import cost_text
from agenttrace.views.account import (
    ACTIVE_WINDOW_S,
    DAMAGED,
    ENDED,
    FAILED,
    INTERRUPTED_STATE,
    RUNNING,
    Liveness,
    session_account,
    state_of,
)

INTERRUPTED = INTERRUPTED_STATE
__all__ = ["ACTIVE_WINDOW_S", "DAMAGED", "ENDED", "FAILED", "INTERRUPTED", "RUNNING"]


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
    state: tuple[Any, ...] = ()
    """Each file's (size, mtime in ns), as listed: what a kept row is valid for."""


@dataclass(frozen=True)
class _Kept:
    row: SessionRow
    liveness: Liveness | None


_KEPT: dict[tuple[str, str], tuple[tuple[Any, ...], _Kept]] = {}
"""(directory, session id) -> the files' state and the row read from them."""
_KEPT_MAX = 4096


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
            status = path.stat(follow_symlinks=False)
        except OSError:
            continue  # missing (or unreadable: the other file may still tell the session)
        written = status.st_mtime_ns
        files.state += ((suffix, status.st_size, written),)
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
            size = -1
            try:
                status = entry.stat(follow_symlinks=False)
                written, size = status.st_mtime_ns, status.st_size
            except OSError:
                written = 0  # listed last; reading it says what is wrong
            files = found.setdefault(session_id, _Files())
            files.state = tuple(sorted((*files.state, (suffix, size, written))))
            path = Path(entry.path)
            if suffix == STREAM_SUFFIX:
                files.stream = path
            else:
                files.snapshot = path
            files.updated_ns = max(files.updated_ns, written)
    return found


def _row(session_id: str, files: _Files, limits: ReadLimits, now: float) -> SessionRow:
    """The session's row: kept from an earlier read while its files did not change (its state
    decided again: a process can die without writing), else read."""
    where = (str((files.stream or files.snapshot or Path()).parent), session_id)
    state = tuple(sorted(files.state))
    known = _KEPT.get(where)
    segments = _segments(files)
    if segments is not None:
        state = (*state, *segments)  # a joined writer's progress changes the row too
    if known is not None and known[0] == state and state:
        kept = known[1]
    else:
        kept = _read_row(session_id, files, limits, now)
        if len(_KEPT) >= _KEPT_MAX:
            _KEPT.clear()
        _KEPT[where] = (state, kept)
    if kept.liveness is None:
        return kept.row
    return dataclasses.replace(kept.row, status=state_of(kept.liveness, files.updated_ns, now))


def _read_row(session_id: str, files: _Files, limits: ReadLimits, now: float) -> _Kept:
    try:
        stream = read_session_file(files.stream, limits=limits) if files.stream else None
        snapshot = read_session_file(files.snapshot, limits=limits) if files.snapshot else None
    except SessionFileError as exc:
        return _Kept(SessionRow(session_id, DAMAGED, files.updated_ns, error=str(exc)), None)
    if (stream and stream.kind != "stream") or (snapshot and snapshot.kind != "snapshot"):
        # A gzip named as a stream or the other way round: not what its name says.
        named = files.stream if stream and stream.kind != "stream" else files.snapshot
        error = f"{named}: not the file its name says"
        return _Kept(SessionRow(session_id, DAMAGED, files.updated_ns, error=error), None)
    events = _fullest_events(stream, snapshot)
    fullest, up_to_date = fullest_of(stream, snapshot, limits.nesting_depth)
    named = files.stream or files.snapshot
    if named is not None and _segments(files):  # read whole, as every command reads it
        try:
            fullest, up_to_date = load_pair(named)
        except SessionFileError as exc:
            return _Kept(SessionRow(session_id, DAMAGED, files.updated_ns, error=str(exc)), None)
        events = fullest.events
    account = session_account(fullest, up_to_date=up_to_date, updated_ns=files.updated_ns, now=now)
    runs = account.runs
    totals = account.stats()["total"] if runs else None
    row = SessionRow(
        session_id,
        account.state,
        files.updated_ns,
        started_ms=_started_ms(snapshot, events),
        agents=len({e.get("agent_id") for e in events if e.get("event_type") == "agent_created"}),
        runs=len(runs),
        input_tokens=totals["input_tokens"] if totals else None,
        output_tokens=totals["output_tokens"] if totals else None,
        totals=totals,
    )
    return _Kept(row, account.liveness)


def _segments(files: _Files) -> tuple[tuple[str, int, int], ...] | None:
    """The joined writers' segment files of the session (``segments_state``), ``None`` for a
    session written by one process (docs/session-file.md, "Several writers")."""
    named = files.stream or files.snapshot
    directory = segments_dir(named) if named is not None else None
    return segments_state(directory) if directory is not None else None


def _fullest_events(
    stream: LoadedFile | None, snapshot: LoadedFile | None
) -> Sequence[Mapping[str, Any]]:
    """The events of whichever file has more (the stream is usually ahead)."""
    if stream is None:
        return snapshot.events if snapshot else []
    if snapshot is None or len(stream.events) >= len(snapshot.events):
        return stream.events
    return snapshot.events


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
