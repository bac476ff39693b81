"""The outputs that persist a session: the event stream and the gzipped session file.

- :class:`EventStreamSink` writes each canonical event, the moment it is logged, as one flushed
  JSON line of ``<sessions_dir>/<session_id>.events.jsonl`` (a durable sink: an event is
  ``BEFORE_CALL_GOES_ON``, on disk before ``log_*`` returns), and each op's ``op_accounted``
  line and each step-journal line, as durable as their records say.
  Its file stays open while the session object is alive, and at most ``max_open`` at a time.
- :class:`SessionFileSink` writes ``<session_id>.json.gz`` (opTree of every run, every event,
  meta) atomically. Writes are coalesced: when a run or a sub-agent ends, the file is written at
  once if the last write is far enough back, else once, later, with everything that changed
  meanwhile; the gap grows with the write's own cost, so snapshots stay a bounded share of the
  work whatever the session's length. ``force_flush`` and shutdown write whatever changed.
  A finished run is serialised once, when it ends, and its tree released.
- A joined writer's session (``Session.writer``) is written the same way to its own segment,
  ``<session_id>.w/<writer_id>.*`` (``Session.segment_stem``): no file has two writers.

If the directory cannot be written (read-only, disk full), the agent keeps running and one
warning on stderr says what is not being saved.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from agenttrace import semconv as sc
from agenttrace._internal.redact import saved_line
from agenttrace.formats.ledger import accounted_line
from agenttrace.formats.session.files import (
    SNAPSHOT_SUFFIX,
    STREAM_SUFFIX,
    StreamAppender,
    document_pieces,
    stem_path,
)
from agenttrace.formats.session.leftovers import remove_leftovers
from agenttrace.formats.session.repair import repair_stream, restored_stream
from agenttrace.formats.session.spool import Piece, Spool, gzip_bytes, write_pieces
from agenttrace.model.lifecycle import Ended, EventLogged, Journaled, Record, Started
from agenttrace.recorder.optree_builder import COMPACT_BYTES, OpTreeSink, RunTree, serialize
from agenttrace.recorder.outage import RETRY_INTERVAL, Outage, OutageBuffer, count
from agenttrace.recorder.pricing import note_prices
from agenttrace.recorder.sink import RecordwiseSink, Scheduler, Sink, journal_bytes
from agenttrace.recorder.throttle import WriteThrottle
from agenttrace.session.leases import Taken, share, writing
from agenttrace.session.state import Session

logger = logging.getLogger("agenttrace")


def _compact(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", "backslashreplace"
    )


class EventStreamSink(Sink):
    """Appends every canonical event, op accounting and step-journal line to its session's
    stream, as durable as each record says."""

    durable = True
    takes = frozenset({EventLogged, Ended, Journaled})

    def __init__(
        self,
        sessions_dir: Path,
        redacted: bool = False,
        max_open: int = 64,
        retry_interval: float = RETRY_INTERVAL,
    ) -> None:
        self.sessions_dir = sessions_dir
        self.redacted = redacted
        self.max_open = max_open
        # Open appenders, least recently used first.
        self._appenders: collections.OrderedDict[str, StreamAppender] = collections.OrderedDict()
        self._repaired: set[str] = set()
        # Lines of a write still being logged (an agent's creation and its first entries).
        self._groups: dict[str, list[bytes]] = {}
        self._lock = threading.Lock()
        # Sessions whose stream could not be written: their lines wait here, in order. They are
        # the session's own lines (no copy; a scrubbed one with redacted saving), which the
        # session keeps anyway, so waiting costs no memory of its own and has no bound but that.
        self._waiting = OutageBuffer(self._lock, self._recovered, retry_interval)
        self._affected: set[Path] = set()
        self._released: collections.deque[tuple[str, StreamAppender]] = collections.deque()
        """Appenders of sessions that went away, to close under the lock (:meth:`_release`)."""
        self._homes: dict[str, Path] = {}
        """The directory of each session written elsewhere than ``sessions_dir`` (a path the
        program named: ``Session.directory``), by stem, for what names its stream by stem."""

    def attach(self, scheduler: Scheduler) -> None:
        self._waiting.attach(scheduler)

    def _path(self, stem: str) -> Path:
        """The stream of the session ``stem``: in its own directory, or ``sessions_dir``."""
        return stem_path(self._homes.get(stem, self.sessions_dir), stem, STREAM_SUFFIX)

    def _hold_lease(self, session: Session) -> None:
        """Before the session's first line (its stream not open yet): hold its lease
        (``agenttrace.session.leases.writing``: once per session, not per line). Outside this
        sink's lock: taking the lease takes the leases' own lock, and a finalizer run meanwhile
        (a session collected) may take this one."""
        stem = session.segment_stem
        if stem in self._appenders and (
            self._homes.get(stem) is session.directory or not self._moved(session)
        ):
            return
        if session.directory is not None:
            self._homes[stem] = session.directory
        else:  # a session of the same id in the sessions directory, after one elsewhere
            self._homes.pop(stem, None)
        writing(session, session.directory or self.sessions_dir)

    def _moved(self, session: Session) -> bool:
        """Whether another object of a session id this sink writes is written elsewhere (the
        same session resumed from a copy of its files in another directory, in one process): the
        open stream, the other's, is closed, so this one's lines go to its own (and the next line
        of the other object's moves them back). Not while lines wait for an outage to end: they
        are the open stream's."""
        stem = session.segment_stem
        here = session.directory or self.sessions_dir
        with self._lock:
            if self._homes.get(stem, self.sessions_dir) == here:
                if session.directory is not None:  # the same directory: `is` holds from now on
                    self._homes[stem] = session.directory
                return False
            if self._waiting.waits(stem):
                return False
            self._close(stem)
            self._repaired.discard(stem)
            return True

    def consume(self, records: Sequence[Record]) -> None:
        """Each canonical event's line, each op's ``op_accounted`` line (docs/events.md), each
        step-journal line: the ``op_accounted`` lines of one session in a row in one
        ``write``."""
        lines: list[bytes] = []
        session: Session | None = None
        for record in records:
            kind = type(record)
            if kind is Ended:
                accounted = record.accounted  # type: ignore[union-attr]
                of = record.session  # type: ignore[union-attr]
                if of is None or accounted is None:
                    continue
                if of is not session and lines:
                    self._write_lines(session, lines)  # type: ignore[arg-type]
                    lines = []
                session = of
                line = accounted.stream_line()
                lines.append(saved_line(line, self.redacted))
                continue
            if lines:
                self._write_lines(session, lines)  # type: ignore[arg-type]
                lines = []
            if kind is EventLogged:
                self._event_logged(record)  # type: ignore[arg-type]
            elif kind is Journaled:
                self._journaled(record)  # type: ignore[arg-type]
        if lines:
            self._write_lines(session, lines)  # type: ignore[arg-type]

    def _event_logged(self, record: EventLogged) -> None:
        session: Session = record.session
        session_id = session.segment_stem
        line = record.line
        line = saved_line(line, self.redacted)
        self._hold_lease(session)
        with self._lock:
            if record.more:  # the rest of its write is still to come
                self._groups.setdefault(session_id, []).append(line)
                return
            events = 1
            group = self._groups.pop(session_id, None)
            if group is not None:
                group.append(line)
                line, events = b"".join(group), len(group)
            self._write(session, line, events)

    def _journaled(self, record: Journaled) -> None:
        """A step-journal line, one ``write`` (an intent: before the step's body runs)."""
        line = journal_bytes(record)
        if line is None:
            return
        line = saved_line(line, self.redacted)
        session: Session = record.session
        self._hold_lease(session)
        with self._lock:
            self._write(session, line, 0)

    def journal_now(self, session: Session, line: bytes) -> None:
        """A tool's intent line, in the caller's thread before its body runs: one lock and one
        ``write`` to the session's open stream. The general way (:meth:`_write`: the outage
        buffer, opening and repairing the stream) only when the stream is not open, when lines
        wait, or when this write fails (the line then waits, as any refused line does)."""
        line = saved_line(line, self.redacted)
        session_id = session.segment_stem
        appenders = self._appenders
        self._hold_lease(session)
        with self._lock:
            appender = appenders.get(session_id)
            if appender is None or self._waiting.waits(session_id):
                self._write(session, line, 0)
                return
            try:
                appender.append(line)
            except OSError as exc:
                self._refused(session)
                if self._waiting.refused(
                    session_id, line, 0, lambda data: self._append(session, data), exc
                ):
                    self._warn(session_id)
                return
            appenders.move_to_end(session_id)

    def _write_lines(self, session: Session, lines: list[bytes]) -> None:
        self._hold_lease(session)
        with self._lock:
            self._write(session, b"".join(lines), 0)  # no event: warnings count events

    def _write(self, session: Session, line: bytes, events: int) -> None:
        """Append ``line`` (``events`` lines) to the session's stream, or keep it, in order,
        behind lines that wait (under the lock)."""
        session_id = session.segment_stem
        if self._waiting.put(session_id, line, events, lambda data: self._append(session, data)):
            self._warn(session_id)

    def _warn(self, session_id: str) -> None:
        """Say, once, that the session's stream cannot be written (an outage starts)."""
        path = self._path(session_id)
        waiting = self._waiting.counts[session_id]
        logger.warning(
            "agenttrace: cannot write %s (%s): %s of session %s %s in memory and will be "
            "written as soon as writing works again. The agent keeps running.",
            path,
            self._waiting.outage.reason,
            count(waiting, "event") if waiting else "an op's accounting",
            session_id,
            "waits" if waiting <= 1 else "wait",
        )

    def _append(self, session: Session, data: bytes) -> None:
        """Append ``data`` to the session's stream; on a failure, close it (it is opened again,
        and repaired, for the next try)."""
        try:
            self._appender(session).append(data)
        except OSError:
            self._refused(session)
            raise

    def _refused(self, session: Session) -> None:
        """A write to the session's stream failed: close it (it is opened again, and
        repaired, for the next try)."""
        self._close(session.segment_stem)
        self._affected.add(self._path(session.segment_stem))

    def _recovered(self, caught_up: int) -> None:
        logger.warning(
            "agenttrace: writing works again: the %s that waited %s in %s",
            count(caught_up, "event"),
            "is" if caught_up == 1 else "are",
            self._where(),
        )
        self._affected.clear()

    def _where(self) -> str:
        if len(self._affected) == 1:
            return str(next(iter(self._affected)))
        return f"{len(self._affected)} event streams in {self.sessions_dir}"

    def _appender(self, session: Session) -> StreamAppender:
        """The session's open appender (opened, after repairing the file, if need be)."""
        if self._released:
            self._close_released()
        session_id = session.segment_stem
        appenders = self._appenders
        appender = appenders.get(session_id)
        if appender is not None:
            appenders.move_to_end(session_id)
            return appender
        path = self._path(session_id)
        if session_id not in self._repaired:
            restored = session.restored_count
            repair_stream(
                path,
                restored,
                cut_short=bool(session.cut_short),
                restored_stream=lambda: restored_stream(
                    session.event_lines(restored),
                    map(accounted_line, session.accounted),
                    session.restored_journal,
                ),
            )
            self._repaired.add(session_id)
        appender = appenders[session_id] = StreamAppender(path)
        if session.stream_source is None:  # where evicted agents are revived from
            session.stream_source = functools.partial(self._faithful, session_id)
        # The file is closed when the session object goes away (it can log no more), inline in
        # the collector's thread: _release never waits...
        weakref.finalize(session, self._release, session_id, appender).atexit = False
        while len(appenders) > self.max_open:  # ... and reopened on demand past the cap
            _, oldest = appenders.popitem(last=False)
            oldest.close()
        return appender

    def _faithful(self, session_id: str) -> Path | None:
        """The stream of ``session_id`` if it holds every event logged so far as logged (open,
        nothing waiting for an outage to end, not redacted), else ``None``: only then can
        agents be evicted to it (``Session.agent_stopped``)."""
        if self.redacted:
            return None
        with self._lock:
            if self._waiting.waits(session_id):
                return None
            return self._path(session_id)

    def _close(self, session_id: str) -> None:
        appender = self._appenders.pop(session_id, None)
        if appender is not None:
            appender.close()

    def _release(self, session_id: str, appender: StreamAppender) -> None:
        # A finalizer: it runs on whatever thread collects the session, and a collection can
        # start at any allocation, also on a thread inside this sink's lock (writing another
        # session's line): waiting for the lock there would wait for itself for ever. So it
        # never waits: the appender is closed now if the lock is free, else by the next
        # holder (closing a file descriptor twice is prevented by StreamAppender).
        self._released.append((session_id, appender))
        if self._lock.acquire(blocking=False):
            try:
                self._close_released()
            finally:
                self._lock.release()

    def _close_released(self) -> None:
        """Close the appenders of sessions that went away (under the lock)."""
        released = self._released
        while released:
            session_id, appender = released.popleft()
            if self._appenders.get(session_id) is appender:
                del self._appenders[session_id]
            appender.close()

    def sync(self, session_id: str) -> None:
        """fsync the stream (the snapshot does, so both are on disk together)."""
        with self._lock:
            appender = self._appenders.get(session_id)
            if appender is not None:
                with contextlib.suppress(OSError):
                    appender.sync()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        with self._lock:
            self._close_released()
            return self._waiting.flush()

    def shutdown(self) -> None:
        with self._lock:
            self._close_released()
            if not self._waiting.flush():
                reason = self._waiting.outage.reason
                left = self._waiting.give_up()
                lost = sum(left.values())
                if len(left) == 1:
                    [(session_id, _)] = left.items()
                    logger.warning(
                        "agenttrace: could not write %s before exit (%s): %s of session %s "
                        "%s not in it",
                        self._path(str(session_id)),
                        reason,
                        count(lost, "event"),
                        session_id,
                        "is" if lost == 1 else "are",
                    )
                else:
                    logger.warning(
                        "agenttrace: could not write the event streams of %d sessions in %s "
                        "before exit (%s): %s are not in them",
                        len(left),
                        self.sessions_dir,
                        reason,
                        count(lost, "event"),
                    )
            for appender in self._appenders.values():
                with contextlib.suppress(OSError):
                    appender.sync()
                appender.close()
            self._appenders.clear()


class _SessionState:
    """What the session-file sink keeps of one session between writes: enough to write the file
    without the ``Session`` object (which may be gone by then), as pieces (see
    ``agenttrace.formats.session.spool``) so finished parts are compressed once and never held
    whole."""

    __slots__ = (
        "__weakref__",
        "directory",
        "dirty",
        "event_count",
        "events",
        "events_raw",
        "failing",
        "group",
        "journal",
        "journal_count",
        "journal_lock",
        "journal_raw",
        "journal_tail",
        "lease",
        "live",
        "meta",
        "owner",
        "redacted",
        "released",
        "runs",
        "saved",
        "session_id",
        "spool",
        "stem",
        "summaries",
    )

    def __init__(self, session: Session, spool: Spool, redacted: bool) -> None:
        self.session_id = session.session_id
        self.stem = session.segment_stem
        """What its files are named by (its session id, or a joined writer's segment)."""
        self.directory = session.directory
        """Where its files are, when not the sessions directory (a path the program named)."""
        self.redacted = redacted
        self.owner: weakref.ref[Session] = weakref.ref(session)
        self.meta = dict(session.meta)
        self.spool = spool
        # Every run in start order: earlier runs (from the file it was resumed from) and this
        # process's finished runs as pieces, live runs as their tree.
        self.runs: list[list[Piece] | RunTree] = [[_compact(run)] for run in session.runs]
        self.summaries: list[dict[str, Any] | None] = [_summary(run) for run in session.runs]
        self.live = 0
        """How many of its runs are still running."""
        # The events section: the restored events now, each new one as its record arrives.
        self.events: list[Piece] = []
        self.events_raw = 0
        self.event_count = 0
        for line in session.event_lines(session.restored_count):
            self.add_event(line, redacted)
        # The step journal: settled pieces (the worker's) and the lines journaled since (a
        # deque: appended in the caller's thread, taken from its other end by the worker or a
        # thread flushing, without a lock).
        self.journal: list[Piece] = []
        self.journal_raw = 0
        self.journal_tail: collections.deque[bytes] = collections.deque()
        self.journal_count = 0
        self.journal_lock = threading.Lock()
        """Held while the tail is settled (the worker and a flushing thread may both)."""
        for step in session.restored_journal:
            self.add_journal(_compact(step))
        self.settle_journal()
        self.group: list[bytes] = []
        """Lines of a write still being logged (an agent's creation and its first entries)."""
        self.dirty = True
        self.failing = False
        """Its last write failed: it is tried again after the retry interval."""
        self.saved = 0
        """How many of its events the last file written holds."""
        self.released = False
        """The session object is gone: no more runs or events will come."""
        self.lease: Taken | None = None
        """Its share of the session's lease, kept until its last snapshot is written."""

    def add_event(self, line: bytes, redacted: bool) -> None:
        line = saved_line(line, redacted)
        line = line.rstrip(b"\n")
        piece = b"," + line if self.event_count else line
        self.events.append(piece)
        self.event_count += 1
        self.events_raw += len(piece)
        if self.events_raw >= COMPACT_BYTES:
            self.events = list(self.spool.compress(self.events))
            self.events_raw = 0

    def add_journal(self, line: bytes) -> None:
        """A step-journal line, as written to the stream (on the worker, or an intent in the
        caller's thread: so nothing but an append here); :meth:`settle_journal` files it (on
        the worker, or in a thread flushing the sink)."""
        self.journal_tail.append(line)
        self.dirty = True

    def settle_journal(self) -> None:
        """Move the lines journaled since into the journal's pieces (scrubbed with redacted
        saving), compressing them once they add up to ``COMPACT_BYTES`` (as events are; on the
        worker only: the spool is its own): an LLM attempt's ``done`` line holds its whole
        response."""
        tail = self.journal_tail
        if not tail:
            return
        with self.journal_lock:
            count = self.journal_count
            while tail:
                line = tail.popleft()
                line = saved_line(line, self.redacted)
                line = line.rstrip(b"\n")
                piece = b"," + line if count else line
                count += 1
                self.journal.append(piece)
                self.journal_raw += len(piece)
            self.journal_count = count
            if self.journal_raw >= COMPACT_BYTES:
                self.journal = list(self.spool.compress(self.journal))
                self.journal_raw = 0

    def release(self) -> None:
        self.released = True


class SessionFileSink(RecordwiseSink):
    """Writes the gzipped session file, coalesced, when runs and sub-agents end, and at exit.

    It reads the runs ``optree`` builds, so it must come after that sink among the
    processor's sinks (:meth:`reads_from`, checked as it is added): the processor hands each
    record to its sinks in order, and the opTree has then placed (or completed) the node a
    ``Started`` (``Ended``) record is about."""

    handlers: ClassVar[dict[type, str]] = {
        EventLogged: "_event_logged",
        Started: "_started",
        Ended: "_ended",
        Journaled: "_journaled",
    }

    def __init__(
        self,
        sessions_dir: Path,
        optree: OpTreeSink,
        stream: EventStreamSink | None = None,
        redacted: bool = False,
        min_interval: float = 0.25,
        cost_factor: float = 20.0,
        retry_interval: float = RETRY_INTERVAL,
    ) -> None:
        self.sessions_dir = sessions_dir
        self.optree = optree
        self.stream = stream
        self.redacted = redacted
        self._states: dict[str, _SessionState] = {}
        self.throttle: WriteThrottle[str] = WriteThrottle(
            # Looked up at each call, as a method: what replaces ``write`` on the sink counts.
            lambda stem: self.write(stem),
            lambda stem: self._scheduled_write(stem),
            min_interval,
            cost_factor,
        )
        """When each session's file may be written again (by stem); a failed write's retry."""
        self._outage = Outage(retry_interval)
        self._swept: set[Path] = set()
        """The directories whose leftovers were removed (before the first write in each)."""
        self._lock = threading.RLock()
        self._pending: dict[str, list[bytes]] = {}
        """Journal lines of sessions whose state the worker has not made yet, by session id."""
        self._journal_lock = threading.Lock()
        """Held while an intent (in the caller's thread) finds its session's state or waits in
        ``_pending``, and while the worker makes a state and takes what waits."""
        self._live: dict[str, RunTree] = {}
        """Per origin txn id: the opTree's run, from its root's start to its end."""
        self.on_write: Callable[[str], None] | None = None
        """Called with a session's stem after each write of its file (the shipper's cue)."""
        self._inherited: set[str] = set()
        """In a forked child: the stems of the sessions its parent was writing, never written
        here (the child's copy of their state is the parent's at the fork, and writing it would
        put that back over whatever the parent wrote since)."""
        if hasattr(os, "register_at_fork"):
            forked = weakref.WeakMethod(self._forked)
            os.register_at_fork(after_in_child=lambda: (method := forked()) and method())

    def _forked(self) -> None:
        """In a forked child: the parent's sessions are the parent's to write."""
        self._inherited = set(self._states)

    def reads_from(self) -> tuple[Sink, ...]:
        return (self.optree,)

    def attach(self, scheduler: Scheduler) -> None:
        self.throttle.attach(scheduler)

    def _state(self, session: Session) -> _SessionState:
        """The session's state, made if need be (on the worker only: the opTree's spools are
        its own)."""
        state = self._states.get(session.segment_stem)
        if state is not None and state.owner() is session:
            return state
        if state is not None:
            if state.dirty:
                self.write(state.stem)  # another object of the same id replaces it
            if state.lease is not None:
                state.lease.give_back()
                state.lease = None
            self.throttle.forget(state.stem)  # the new object's file starts afresh
        state = _SessionState(session, self.optree.spool_for(session), self.redacted)
        directory = session.directory or self.sessions_dir
        if writing(session, directory):  # a run with no event yet: its first record
            state.lease = share(session, directory)
        # Inline in the collector's thread: it only sets a flag the worker reads.
        weakref.finalize(session, state.release).atexit = False
        with self._journal_lock:  # no intent between the lines that waited and the state
            for line in self._pending.pop(session.segment_stem, ()):
                state.add_journal(line)
            self._states[session.segment_stem] = state
        return state

    def _journaled(self, record: Journaled) -> None:
        """A step-journal line: kept for the next snapshot, which holds the journal too (a
        session whose stream is lost resumes from its session file alone)."""
        line = journal_bytes(record)
        if line is not None:
            self.journal_now(record.session, line)

    def journal_now(self, session: Session, line: bytes) -> None:
        """A step-journal line (a tool's intent comes this way in the caller's thread, not as
        a record on the worker: a queue item less per call). One that comes before a record
        has made the session's state waits for it."""
        state = self._states.get(session.segment_stem)
        if state is None or state.owner() is not session:
            with self._journal_lock:  # its state may be being made: see again under the lock
                state = self._states.get(session.segment_stem)
                if state is None or state.owner() is not session:
                    self._pending.setdefault(session.segment_stem, []).append(line)
                    return
        # (A state is in _states only once the lines that waited for it are in it.)
        state.journal_tail.append(line)
        state.dirty = True

    def _event_logged(self, record: EventLogged) -> None:
        state = self._state(record.session)
        if record.more:  # an agent's creation goes in a file with its first entries or not at all
            state.group.append(record.line)
            return
        for line in state.group:
            state.add_event(line, self.redacted)
        state.group.clear()
        state.add_event(record.line, self.redacted)
        state.settle_journal()
        state.dirty = True

    def _started(self, record: Started) -> None:
        run = self.optree.runs.get(record.origin)
        if run is None:
            return  # a run the opTree does not build (its root started before recording)
        if record.label == "0":
            self._live[record.origin] = run
        if run.session is None:
            return
        state = self._state(run.session)
        state.dirty = True
        if record.label == "0":
            state.runs.append(run)
            state.summaries.append(None)
            state.live += 1

    def _ended(self, record: Ended) -> None:
        run = self._live.get(record.origin)
        if run is None or run.session is None:
            return
        state = self._state(run.session)
        state.settle_journal()
        state.dirty = True
        accounted = record.accounted
        if accounted is not None and accounted.inline:  # an LLM attempt's prices, once a model
            note_prices(state.meta, accounted.entry)
        # Over once its root and everything in it ended (the opTree then serialised it): a
        # record that ends after its root still lands in the run, written as it comes.
        if run.fragment is not None:  # the run is over: keep it serialised, the tree goes
            del self._live[record.origin]
            index = _last_index(state.runs, run)
            if index is not None and run.fragment is not None and run.root is not None:
                state.runs[index] = run.fragment
                state.summaries[index] = _summary(run.root)
                state.live -= 1
            self.request_write(run.session.segment_stem)
        elif record.label == "0" or (
            record.started is not None and record.started.kind == sc.KIND_SESSION
        ):
            self.request_write(run.session.segment_stem)  # a root or a sub-agent finished

    def request_write(self, session_id: str) -> None:
        """Write now if the last write is far enough back, else once, later."""
        if session_id in self._states:
            self.throttle.request(session_id)

    def _scheduled_write(self, session_id: str) -> None:
        """On the throttle's timer: write the session if it changed since; forget the sessions
        done with."""
        state = self._states.get(session_id)
        if state is not None and state.dirty:
            self.write(session_id)
        self._drop_released()

    def write(self, session_id: str) -> bool:
        """Write the file of ``session_id`` (a session's :attr:`Session.segment_stem`) now;
        True if written. A failed write is tried again
        (the session stays changed) after the retry interval, at force_flush and at exit."""
        with self._lock:
            state = self._states.get(session_id)
            if state is None:
                return False
            if session_id in self._inherited:
                state.dirty = False  # its parent's file: not this process's to write
                return False
            directory = state.directory or self.sessions_dir
            if directory not in self._swept:  # the first write in a directory: tidy it first
                self._swept.add(directory)
                remove_leftovers(directory)
            started = time.perf_counter()
            path = stem_path(directory, session_id, SNAPSHOT_SUFFIX)
            # Clean before the events are read, not after the write: an event the agent logs
            # meanwhile marks the session changed again, so the next snapshot has it.
            state.dirty = False
            events = state.event_count
            try:
                pieces = self.pieces(state)
                if self.stream is not None:
                    self.stream.sync(session_id)
                write_pieces(path, pieces, state.spool)
            except OSError as exc:
                self._failed(state, path, exc)
                return False
            state.saved = events
            if state.failing:
                state.failing = False
                self._recovered()
            self.throttle.wrote(session_id, time.perf_counter() - started)
            if self.on_write is not None and state.directory is None:
                # (A session written where the program named is not the store's to ship: the
                # shipper ships the sessions directory.)
                self.on_write(session_id)
            return True

    def _failed(self, state: _SessionState, path: Path, exc: OSError) -> None:
        """A write failed: the session stays changed and is written again later."""
        state.dirty = True
        state.failing = True
        self.throttle.retry(state.stem, self._outage.retry_interval)
        if self._outage.failed(exc):
            waiting = state.event_count - state.saved
            logger.warning(
                "agenttrace: cannot write %s (%s): session %s (%s not saved yet) stays in memory "
                "and will be written as soon as writing works again. The agent keeps running.",
                path,
                self._outage.reason,
                state.session_id,
                count(waiting, "event"),
            )

    def _recovered(self) -> None:
        if not any(state.failing for state in self._states.values()) and self._outage.ended():
            logger.warning(
                "agenttrace: writing works again: session files in %s are written",
                self.sessions_dir,
            )

    def pieces(self, state: _SessionState) -> list[Piece]:
        """The session file's document: every run (earlier, finished, live), events, meta."""
        runs: list[list[Piece]] = []
        summaries: list[dict[str, Any]] = []
        for run, summary in zip(state.runs, state.summaries, strict=True):
            if isinstance(run, RunTree):
                if run.root is None:
                    continue
                runs.append(serialize(run.root))
                summaries.append(_summary(run.root))
            else:
                runs.append(run)
                summaries.append(summary or {})
        meta = dict(state.meta)
        now_ms = int(time.time() * 1000)
        first = summaries[0] if summaries else None
        meta.setdefault("createdAt", first["startedAt"] if first else now_ms)
        meta["updatedAt"] = now_ms
        if summaries:
            last = summaries[-1]
            meta["result"] = {"success": last.get("success"), "error": last.get("error")}
            meta.setdefault("ingress", first.get("ingress", {}) if first else {})
            meta["trace_ids"] = [s["traceId"] for s in summaries if s.get("traceId")]
        meta["session_id"] = state.session_id
        state.settle_journal()
        return document_pieces(state.session_id, runs, state.events, meta, state.journal)

    def snapshot(self, session: Session) -> tuple[Path, bytes] | None:
        """The session file of ``session`` as a write would make it now, not written: its path
        and gzipped bytes (None for a session this sink does not write, and in a forked child
        for one it inherited: what is made of it, the live STD-008 document, is the parent's
        to write, as the file is)."""
        with self._lock:
            state = self._states.get(session.segment_stem)
            if state is None or state.owner() is not session or state.stem in self._inherited:
                return None
            path = stem_path(state.directory or self.sessions_dir, state.stem, SNAPSHOT_SUFFIX)
            return path, gzip_bytes(self.pieces(state), state.spool)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        for session_id, state in list(self._states.items()):
            if state.dirty:
                self.write(session_id)
        self._drop_released()
        return True

    def shutdown(self) -> None:
        self.force_flush()
        with self._lock:
            failing = [state for state in self._states.values() if state.failing]
            for state in failing:
                missing = state.event_count - state.saved
                logger.warning(
                    "agenttrace: could not write %s before exit (%s): %s",
                    stem_path(state.directory or self.sessions_dir, state.stem, SNAPSHOT_SUFFIX),
                    self._outage.reason,
                    f"{count(missing, 'event')} of session {state.session_id} "
                    f"{'is' if missing == 1 else 'are'} not in it"
                    if missing
                    else f"the last changes to session {state.session_id} are not in it",
                )

    def _drop_released(self) -> None:
        """Forget sessions that can change no more and are written: their spools go too."""
        with self._lock:
            for session_id, state in list(self._states.items()):
                if (
                    state.released
                    and not state.dirty
                    and not state.live
                    and not self.throttle.pending(session_id)
                ):
                    del self._states[session_id]
                    self.throttle.forget(session_id)
                    state.spool.close()
                    if state.lease is not None:  # its last snapshot is written
                        state.lease.give_back()
                        state.lease = None


def _last_index(runs: list[list[Piece] | RunTree], run: RunTree) -> int | None:
    """Where ``run`` is (searched from the end: the run that ends is usually a recent one)."""
    for index in range(len(runs) - 1, -1, -1):
        if runs[index] is run:
            return index
    return None


def _summary(root: dict[str, Any]) -> dict[str, Any]:
    """What meta needs of a run: start, result, ingress, trace id."""
    attributes = root.get("attributes")
    return {
        "startedAt": root.get("startedAt"),
        "success": root.get("success"),
        "error": root.get("error"),
        "ingress": attributes.get("ingress", {}) if isinstance(attributes, dict) else {},
        "traceId": root.get("traceId"),
    }
