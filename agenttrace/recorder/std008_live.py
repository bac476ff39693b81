"""The STD-008 document written as the session runs (``init(std008_dir=...)``,
``AGENTTRACE_STD008_DIR``; docs/std008.md, "Written live").

Section 5.2's recording sequence, on lifecycle records: the document is made when a root run
starts, again when each sub-agent run (a sub-session) starts and ends, and when the run ends,
and written over ``<std008_dir>/<session id>.std008.json`` atomically each time. Each document
is the export of the session file as it would be written at that moment (the same reader, the
same redaction and caps as ``agenttrace export --format std008``), in the form section 5.1
gives it (:func:`agenttrace.formats.std008.live.live_form`): so the last one is the export's
of the finished session, but for a single Task call, which it writes as STD-001 with
``SubagentInfo``.

Making the document reads the whole session, so its cost grows with the session: it is done
only at these points, not on every record, and, as the session file is written, no sooner than
``min_interval`` after the last one and than ``cost_factor`` times what the last one took
(:class:`agenttrace.recorder.throttle.WriteThrottle`). A change that comes sooner is written
once, when that time has come (or at ``force_flush`` and shutdown): a session of a thousand
sub-agents writes its document a few times a second, not two thousand times, each longer than
the last.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.redact import redacted_copy
from agenttrace.formats.session.files import read_snapshot_bytes
from agenttrace.formats.std008.live import live_form, live_path, replace_document
from agenttrace.formats.std008.writer import std008_document
from agenttrace.model.lifecycle import Ended, Started
from agenttrace.recorder.sink import RecordwiseSink, Scheduler, Sink
from agenttrace.recorder.store import SessionFileSink
from agenttrace.recorder.throttle import WriteThrottle


class Std008LiveSink(RecordwiseSink):
    """Writes each session's STD-008 document in ``directory`` when a run or sub-agent run
    starts or ends. It reads the session file the :class:`SessionFileSink` would write, so it
    comes after that sink among the processor's sinks."""

    handlers: ClassVar[dict[type, str]] = {Started: "_started", Ended: "_ended"}

    def __init__(
        self,
        directory: Path,
        session_file: SessionFileSink,
        max_bytes: int,
        min_interval: float = 0.25,
        cost_factor: float = 20.0,
    ) -> None:
        self.directory = directory
        self.session_file = session_file
        self.max_bytes = max_bytes
        """The cap on each string, as an export's (``max_payload_bytes``)."""
        self._sessions: dict[str, Any] = {}
        """Per origin txn id: the session its run records into, from its root's start."""
        self._due: dict[str, Any] = {}
        """Per session file stem: a session whose document is behind, to be written."""
        self._lock = threading.RLock()
        """The worker writes as records come and on its timer; ``force_flush`` in its caller."""
        self.throttle: WriteThrottle[str] = WriteThrottle(
            self._write_due, self._on_timer, min_interval, cost_factor
        )
        """When each session's document may be written again (by stem)."""

    def reads_from(self) -> tuple[Sink, ...]:
        return (self.session_file,)

    def attach(self, scheduler: Scheduler) -> None:
        self.throttle.attach(scheduler)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        with self._lock:
            for stem in list(self._due):
                self._write_due(stem)
        return True

    def shutdown(self) -> None:
        self.force_flush()

    def _started(self, record: Started) -> None:
        if record.label == "0":
            if record.session is not None:
                self._sessions[record.origin] = record.session
        elif record.kind != sc.KIND_SESSION:
            return
        self._request(self._sessions.get(record.origin))

    def _ended(self, record: Ended) -> None:
        session = self._sessions.get(record.origin)
        if record.label == "0":
            self._sessions.pop(record.origin, None)
        elif record.started is None or record.started.kind != sc.KIND_SESSION:
            return
        self._request(session)

    def _request(self, session: Any) -> None:
        """The document of ``session`` changed: write it now if the last write is far enough
        back, else once, later."""
        if session is None:
            return
        stem = session.segment_stem
        with self._lock:
            self._due[stem] = session
            self.throttle.request(stem)

    def _on_timer(self, stem: str) -> None:
        with self._lock:
            self._write_due(stem)

    def _write_due(self, stem: str) -> None:
        """Write the document of ``stem`` if it is behind (under the lock)."""
        session = self._due.pop(stem, None)
        if session is None:
            return
        started = time.perf_counter()
        self._write(session)
        self.throttle.wrote(stem, time.perf_counter() - started)

    def _write(self, session: Any) -> None:
        """Make the document of ``session`` now and write it; a failure is reported once and
        the agent goes on (re-raised under the tests)."""
        if session is None:
            return
        try:
            snapshot = self.session_file.snapshot(session)
            if snapshot is None:
                return
            path, data = snapshot
            loaded = read_snapshot_bytes(path, data)
            loaded = dataclasses.replace(  # as an export shows it (views.public.public_view)
                loaded,
                events=redacted_copy(loaded.events, self.max_bytes),
                runs=redacted_copy(loaded.runs, self.max_bytes),
                meta=redacted_copy(loaded.meta, self.max_bytes),
            )
            document = live_form(std008_document(loaded))
            replace_document(document, live_path(self.directory, session.segment_stem))
        except Exception as exc:  # a disk that is full, a session too deep to read
            report_internal_error("the live STD-008 document", exc)
