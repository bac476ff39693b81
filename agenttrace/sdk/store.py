"""The outputs that persist a session: the event stream and the gzipped session file.

- :class:`EventStreamSink` writes each canonical event, the moment it is logged, as one flushed
  JSON line of ``<sessions_dir>/<session_id>.events.jsonl`` (inline: before ``log_*`` returns).
- :class:`SessionFileSink` writes ``<session_id>.json.gz`` (opTree of every run, every event,
  meta) atomically at every sub-agent finish, at run end and at a clean exit. Sub-agent
  snapshots are throttled in proportion to how long the last one took, so snapshot cost stays a
  bounded share of the run instead of growing with the square of the session's length.

If the directory cannot be written (read-only, disk full), the agent keeps running and one
warning on stderr says what is not being saved.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from agenttrace._internal.redact import scrub_json_text
from agenttrace.record.paths import kind_of, parse_label
from agenttrace.record.session import Session
from agenttrace.record.session_files import (
    StreamAppender,
    snapshot_bytes,
    snapshot_path,
    stream_path,
    write_atomically,
)
from agenttrace.sdk.optree import OpTreeSink, RunTree
from agenttrace.sdk.processor import Sink

logger = logging.getLogger("agenttrace")

_sessions: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()


def register(session: Session) -> None:
    """Let the sinks find a session by its id (sessions hold the events and lines)."""
    _sessions[session.session_id] = session


class EventStreamSink(Sink):
    """Appends every canonical event to its session's stream, at once."""

    inline = True

    def __init__(self, sessions_dir: Path, redacted: bool = False) -> None:
        self.sessions_dir = sessions_dir
        self.redacted = redacted
        self._appenders: dict[str, StreamAppender | None] = {}
        self._lock = threading.Lock()

    def on_canonical_event(
        self, session: Session, event: dict[str, Any], line: bytes, span: ReadableSpan | None
    ) -> None:
        register(session)
        with self._lock:
            appender = self._appender(session)
            if appender is None:
                return
            if self.redacted:
                line = scrub_json_text(line.decode()).encode()
            try:
                appender.append(line)
            except OSError as exc:
                self._appenders[session.session_id] = None
                appender.close()
                logger.warning(
                    "agenttrace: cannot write %s (%s): the event stream of session %s stops here;"
                    " its events stay in memory for the session file. The agent keeps running.",
                    appender.path,
                    exc.strerror or exc,
                    session.session_id,
                )

    def _appender(self, session: Session) -> StreamAppender | None:
        session_id = session.session_id
        if session_id in self._appenders:
            return self._appenders[session_id]
        path = stream_path(self.sessions_dir, session_id)
        try:
            _repair(path, session)
            appender: StreamAppender | None = StreamAppender(path)
        except OSError as exc:
            appender = None
            logger.warning(
                "agenttrace: cannot write %s (%s): session %s is not being saved to its event "
                "stream. The agent keeps running.",
                path,
                exc.strerror or exc,
                session_id,
            )
        self._appenders[session_id] = appender
        return appender

    def sync(self, session_id: str) -> None:
        """fsync the stream (the snapshot does, so both are on disk together)."""
        with self._lock:
            appender = self._appenders.get(session_id)
            if appender is not None:
                with contextlib.suppress(OSError):
                    appender.sync()

    def shutdown(self) -> None:
        with self._lock:
            for appender in self._appenders.values():
                if appender is not None:
                    with contextlib.suppress(OSError):
                        appender.sync()
                    appender.close()
            self._appenders.clear()


def _repair(path: Path, session: Session) -> None:
    """Before appending to an existing stream, make it a whole prefix of the session.

    A torn last line (a write cut off by a crash) is dropped, so the next event does not land
    on its bytes; and a resumed session whose stream has fewer events than were restored (the
    stream stopped on a full disk while the session file went on) gets the stream rewritten
    from the restored events, so the ids stay contiguous in both files.
    """
    if not path.is_file():  # nothing yet, or not a regular file (a device, a pipe)
        return
    data = path.read_bytes()
    restored = session.restored_count
    if restored and data.count(b"\n") < restored:
        write_atomically(path, b"".join(session.event_lines()[:restored]))
        logger.warning(
            "agenttrace: %s had fewer events than session %s; rewritten from the restored "
            "session before appending",
            path,
            session.session_id,
        )
    elif data and not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
        with open(path, "r+b") as handle:
            handle.truncate(keep)
        logger.warning(
            "agenttrace: %s ended in a torn line (%d bytes, a write cut off by a crash); "
            "dropped before appending",
            path,
            len(data) - keep,
        )


class SessionFileSink(Sink):
    """Writes the gzipped session file when runs and sub-agents finish, and at exit."""

    inline = True  # its event handler only notes the session changed: cheaper than queueing

    def __init__(
        self,
        sessions_dir: Path,
        optree: OpTreeSink,
        stream: EventStreamSink | None = None,
        redacted: bool = False,
        min_interval: float = 0.25,
        cost_factor: float = 20.0,
    ) -> None:
        self.sessions_dir = sessions_dir
        self.optree = optree
        self.stream = stream
        self.redacted = redacted
        self.min_interval = min_interval
        self.cost_factor = cost_factor
        self._last_write: dict[str, float] = {}
        self._next_allowed: dict[str, float] = {}
        self._dirty: set[str] = set()
        self._failed: set[str] = set()
        self._lock = threading.Lock()
        optree.add_listener(self._on_tree)

    def on_canonical_event(
        self, session: Session, event: dict[str, Any], line: bytes, span: ReadableSpan | None
    ) -> None:
        register(session)
        self._dirty.add(session.session_id)

    def _on_tree(self, what: str, run: RunTree, label: str) -> None:
        self._dirty.add(run.session_id)
        if what != "end":
            return
        address = parse_label(label)
        if not address:
            self.write(run.session_id, force=True)  # run end
        elif kind_of(address) == "session":
            self.write(run.session_id)  # a sub-agent finished: throttled

    def write(self, session_id: str, force: bool = False) -> bool:
        """Snapshot ``session_id`` now (``force``) or if the throttle allows; True if written."""
        session = _sessions.get(session_id)
        if session is None or session_id in self._failed:
            return False
        with self._lock:
            now = time.monotonic()
            if not force and now < self._next_allowed.get(session_id, 0.0):
                return False
            started = time.perf_counter()
            path = snapshot_path(self.sessions_dir, session_id)
            # Clean before the events are read, not after the write: an event the agent logs
            # meanwhile marks the session changed again, so the next snapshot has it.
            self._dirty.discard(session_id)
            try:
                data = self.payload(session)
                if self.stream is not None:
                    self.stream.sync(session_id)
                write_atomically(path, data)
            except OSError as exc:
                self._failed.add(session_id)
                logger.warning(
                    "agenttrace: cannot write %s (%s): session %s is not being saved to its "
                    "session file. The agent keeps running.",
                    path,
                    exc.strerror or exc,
                    session_id,
                )
                return False
            took = time.perf_counter() - started
            self._last_write[session_id] = now
            self._next_allowed[session_id] = now + max(self.min_interval, self.cost_factor * took)
            return True

    def payload(self, session: Session) -> bytes:
        """The session file's bytes: earlier runs, this process's runs, every event, meta."""
        # Earlier runs from the file, then this process's (which win: they may be more recent).
        by_txn: dict[Any, dict[str, Any]] = {}
        for run in [*session.runs, *self.optree.runs_of(session.session_id)]:
            by_txn[run.get("txnId") or id(run)] = run
        runs = list(by_txn.values())
        lines = session.event_lines()
        if self.redacted:
            lines = [scrub_json_text(line.decode()).encode() for line in lines]
        meta = dict(session.meta)
        now_ms = int(time.time() * 1000)
        meta.setdefault("createdAt", runs[0].get("startedAt") if runs else now_ms)
        meta["updatedAt"] = now_ms
        if runs:
            last = runs[-1]
            meta["result"] = {"success": last.get("success"), "error": last.get("error")}
            meta.setdefault("ingress", runs[0].get("attributes", {}).get("ingress", {}))
            meta["trace_ids"] = [r.get("traceId") for r in runs if r.get("traceId")]
        meta["session_id"] = session.session_id
        return snapshot_bytes(session.session_id, runs, lines, meta)

    def shutdown(self) -> None:
        for session_id in list(self._dirty):
            self.write(session_id, force=True)
