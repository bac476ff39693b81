"""Our span processor, and the recorder every lifecycle record goes through.

agenttrace's outputs are projections of lifecycle records (``agenttrace.model.lifecycle``), not
of spans: scopes emit records whether or not their spans are sampled, and end their spans in the
caller, so every processor on the provider sees ``on_end`` in order, in the caller's thread, as
OpenTelemetry promises. This processor therefore does nothing with spans. It is on the provider
so that the application's own ``provider.force_flush()`` and ``provider.shutdown()`` also flush and
close agenttrace's outputs (the session files, the ledger), whatever order processors were added.

Records reach :meth:`AgentTraceProcessor.record` in the caller's thread. Canonical events go at
once to the *inline* sinks (the event stream: on disk before ``log_*`` returns), and the
accounting of an op that can carry a cost to the sinks that take it (the stream's
``op_accounted`` line, the ledger line, an LLM attempt's GenAI metrics); everything else is
queued for the background worker, which feeds the other sinks in order. The accounting of a
free tool call is written by the worker, or before the lines of the next paid op if that comes
first: the lines stay in the order the ops ended, and a paid op's lines on disk mean every op
that ended before it is there too.

Like the SDK's processors, it never lets an error reach its caller: a failing sink is reported
once (and re-raised under the test suite) and the others go on.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.runtime import runtime
from agenttrace.model.lifecycle import Ended, EventLogged, Logged, Record, Started
from agenttrace.recorder.sink import Sink
from agenttrace.recorder.worker import Worker

_METHODS = {Started: "started", Ended: "ended", Logged: "logged", EventLogged: "event_logged"}


class _Deferred:
    """Work a sink scheduled on the worker (see :meth:`AgentTraceProcessor.schedule`)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], None]) -> None:
        self.fn = fn


class AgentTraceProcessor(SpanProcessor):
    """Feeds lifecycle records to agenttrace's sinks; flushes and shuts them down with the
    provider it is added to."""

    def __init__(self, sinks: tuple[Sink, ...] = ()) -> None:
        self._sinks: tuple[Sink, ...] = ()
        # Per record type, the sinks that implement its method (copy-on-write tuples), and
        # those methods bound, with the name each failure is reported under.
        self._deferred: dict[type, tuple[Sink, ...]] = {kind: () for kind in _METHODS}
        self._handlers: dict[type, tuple[tuple[Callable[[Any], None], str], ...]] = {
            kind: () for kind in _METHODS
        }
        self._inline_events: tuple[Sink, ...] = ()
        self._accounting: tuple[Sink, ...] = ()
        self._journals: tuple[Sink, ...] = ()
        self._unwritten: deque[Ended] = deque()
        """Ended ops whose accounting (made later) is not written yet, in the order they ended."""
        self._accounting_lock = threading.Lock()
        if hasattr(os, "register_at_fork"):
            # A forked child's worker starts with an empty queue: the parent writes these.
            forget = weakref.WeakMethod(self._forget_unwritten)
            os.register_at_fork(after_in_child=lambda: (method := forget()) and method())
        self._lock = threading.Lock()
        self._shut_down = False
        self.worker = Worker(self._consume)
        for sink in sinks:
            self.add_sink(sink)

    @property
    def sinks(self) -> tuple[Sink, ...]:
        """The sinks, in the order they are called."""
        return self._sinks

    def add_sink(self, sink: Sink) -> None:
        """Add a sink; it sees records from now on. The sinks it reads from
        (:meth:`Sink.reads_from`) must have been added before it: a ``ValueError`` otherwise."""
        with self._lock:
            missing = [read for read in sink.reads_from() if read not in self._sinks]
            if missing:
                raise ValueError(
                    f"{type(sink).__name__} reads what {type(missing[0]).__name__} builds: "
                    "add that sink to the processor before it"
                )
            self._sinks = (*self._sinks, sink)
            deferred = dict(self._deferred)
            for kind, method in _METHODS.items():
                if getattr(type(sink), method) is getattr(Sink, method):
                    continue  # a no-op: never queue calls to it
                if kind is EventLogged and sink.inline:
                    self._inline_events = (*self._inline_events, sink)
                else:
                    deferred[kind] = (*deferred[kind], sink)
            self._deferred = deferred
            if type(sink).journaled is not Sink.journaled:
                self._journals = (*self._journals, sink)
            if type(sink).op_accounted is not Sink.op_accounted:
                self._accounting = (*self._accounting, sink)
            self._handlers = {
                kind: tuple(
                    (getattr(s, method), f"{type(s).__name__}.{method}") for s in deferred[kind]
                )
                for kind, method in _METHODS.items()
            }
        sink.attach(self)

    def schedule(self, delay: float, fn: Callable[[], None]) -> None:
        """Run ``fn()`` on the worker after ``delay`` seconds (dropped at shutdown)."""
        self.worker.schedule(delay, _Deferred(fn))

    # -- records ------------------------------------------------------------------------------

    def record(self, record: Record) -> None:
        """Take one record, in the caller's thread (see the module docstring)."""
        if self._shut_down:
            return
        if type(record) is EventLogged:
            for sink in self._inline_events:
                try:
                    sink.event_logged(record)
                except Exception as exc:
                    report_internal_error(f"{type(sink).__name__}.event_logged", exc)
        elif type(record) is Ended and record.accounted is not None and self._accounting:
            if not record.accounted.inline:
                self._unwritten.append(record)
                self.worker.put(record)
                return
            with self._accounting_lock:
                if self._unwritten:  # the free ops that ended before it come first
                    self._write_unwritten(record)
                else:
                    self._write_accounting(record)
        if self._deferred[type(record)]:
            self.worker.put(record)

    def journal(self, session: Any, line: bytes | Callable[[], bytes], later: bool = False) -> None:
        """Write one step-journal line now, in the caller's thread (see ``Sink.journaled``);
        ``later``: by the background worker, in order with the records before it (an outcome,
        which a kill may lose: its step then reads as in doubt, never as done), and ``line``
        may then be a callable that makes it there (an LLM response turned into JSON)."""
        if self._shut_down:
            return
        if later:
            # Written by the worker even once shutdown began: it drains its queue then, and an
            # outcome dropped there would leave a call that ended read as in doubt.
            self.worker.put(_Deferred(lambda: self._write_journal(session, line)))
            return
        self._write_journal(session, line)

    def _write_journal(self, session: Any, line: bytes | Callable[[], bytes]) -> None:
        if callable(line):
            try:
                line = line()
            except Exception as exc:
                report_internal_error("journal line", exc)
                return
        for sink in self._journals:
            try:
                sink.journaled(session, line)
            except Exception as exc:
                report_internal_error(f"{type(sink).__name__}.journaled", exc)

    def _forget_unwritten(self) -> None:
        self._unwritten = deque()
        self._accounting_lock = threading.Lock()

    def _write_accounting(self, record: Ended) -> None:
        for sink in self._accounting:
            try:
                sink.op_accounted(record)
            except Exception as exc:
                report_internal_error(f"{type(sink).__name__}.op_accounted", exc)

    def _write_unwritten(self, then: Ended | None = None) -> None:
        """Write the accounting that waits, oldest first, and ``then``'s, together (under the
        accounting lock)."""
        unwritten = self._unwritten
        records = []
        while unwritten:
            records.append(unwritten.popleft())
        if then is not None:
            records.append(then)
        for sink in self._accounting:
            try:
                sink.ops_accounted(records)
            except Exception as exc:
                report_internal_error(f"{type(sink).__name__}.ops_accounted", exc)

    def _consume(self, record: Any) -> None:
        if type(record) is _Deferred:
            record.fn()
            return
        if type(record) is Ended and self._unwritten:
            with self._accounting_lock:  # this op's and those that ended before it
                self._write_unwritten()
        for handle, where in self._handlers[type(record)]:
            try:
                handle(record)
            except Exception as exc:
                report_internal_error(where, exc)

    # -- the span processor -------------------------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Nothing: agenttrace's outputs come from its own records, not from spans."""

    def on_end(self, span: ReadableSpan) -> None:
        """Nothing: agenttrace's outputs come from its own records, not from spans."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Consume every record so far and flush every sink."""
        try:
            ok = self.worker.flush(timeout_millis / 1000)
        except Exception as exc:
            report_internal_error("force_flush", exc)
            ok = False
        for sink in self._sinks:
            try:
                ok = sink.force_flush(timeout_millis) and ok
            except Exception as exc:
                report_internal_error(f"{type(sink).__name__}.force_flush", exc)
                ok = False
        return ok

    def shutdown(self) -> None:
        """Consume every record so far, then shut each sink down (later calls do nothing)."""
        with self._lock:
            if self._shut_down:
                return
            self._shut_down = True
        if runtime.recorder is self:
            runtime.recorder = None  # scopes stop recording: nothing would take the records
        try:
            self.worker.stop()
        except Exception as exc:
            report_internal_error("shutdown", exc)
        for sink in self._sinks:
            try:
                sink.shutdown()
            except Exception as exc:
                report_internal_error(f"{type(sink).__name__}.shutdown", exc)
