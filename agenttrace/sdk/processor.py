"""Our span processor, and the recorder every lifecycle record goes through.

agenttrace's outputs are projections of lifecycle records (``agenttrace.model.lifecycle``), not
of spans: scopes emit records whether or not their spans are sampled, and end their spans in the
caller, so every processor on the provider sees ``on_end`` in order, in the caller's thread, as
OpenTelemetry promises. This processor therefore does nothing with spans. It is on the provider
so that the application's own ``provider.force_flush()`` and ``provider.shutdown()`` also flush and
close agenttrace's outputs (the session files, the ledger), whatever order processors were added.

Records reach :meth:`AgentTraceProcessor.record` in the caller's thread, and this processor is
the one scheduler of the sinks, as OpenTelemetry's ``BatchProcessor`` is of its exporter: each
record says how durable it must be (``agenttrace.model.lifecycle.Durability``) and the sinks
have one way in (``Sink.consume``). A ``BEFORE_CALL_GOES_ON`` record (a canonical event, a paid
op's accounting, a tool's intent) is written to the durable sinks (the event stream, the
ledger, the metrics) in the caller's thread, before ``record`` returns, together with every
``SOON`` record of its type emitted before it that they have not had yet (a paid op's end
with the free ops' ends before it): accounting lines stay in the order the ops ended, and a
paid op's lines on disk mean every op that ended before it is there too. (An intent or an
event does not wait for accounting lines: their order against those was never read.)
Everything else goes to the background worker, which feeds the durable sinks what they have
not had and the other sinks everything, in order. A tool's intent (:meth:`journal`), on every
undeclared call's path, takes a direct way: no record, each sink that takes journal lines
takes its bytes in the caller's thread (``Sink.journal_now``: the stream with one lock and
one ``write``, the session file an append to its memory, not a queue item).

Like the SDK's processors, it never lets an error reach its caller: a failing sink is reported
once (and re-raised under the test suite) and the others go on.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.runtime import runtime
from agenttrace.model.lifecycle import (
    BEFORE_CALL_GOES_ON,
    SOON,
    WHENEVER,
    Ended,
    EventLogged,
    Journaled,
    Logged,
    Record,
    Started,
)
from agenttrace.recorder.sink import Sink, journal_bytes
from agenttrace.recorder.worker import Worker

_KINDS = (Started, Ended, Logged, EventLogged, Journaled)

_Writers = tuple[tuple[Callable[[Any], None], str], ...]
"""Sinks' ``write``, bound, with the name each failure is reported under."""

_JournalWriters = tuple[tuple[Callable[[Any, bytes], None], str], ...]
"""Sinks' ``journal_now``, bound, with the name each failure is reported under."""


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
        # Per record type: the durable sinks that take it, and the others (copy-on-write).
        self._durable: dict[type, _Writers] = {kind: () for kind in _KINDS}
        self._later: dict[type, _Writers] = {kind: () for kind in _KINDS}
        self._soon: dict[type, deque[Record]] = {kind: deque() for kind in _KINDS}
        """Per record type, the ``SOON`` records the durable sinks have not had yet, in the
        order they came."""
        self._draining: set[type] = set()
        """The record types whose ``SOON`` records are being written (taken from ``_soon``)."""
        self._durable_lock = threading.Lock()
        """Held while ``SOON`` records are written, and while a record that must follow them
        is: so each is written once, in order."""
        if hasattr(os, "register_at_fork"):
            # A forked child's worker starts with an empty queue: the parent writes these.
            forget = weakref.WeakMethod(self._forget_soon)
            os.register_at_fork(after_in_child=lambda: (method := forget()) and method())
        self._journal_now: _JournalWriters | None = ()
        """Each sink that takes journal lines, by its direct way for an intent
        (:meth:`Sink.journal_now`), durable ones first; ``None`` while one has none (every
        intent is then a :class:`Journaled` record)."""
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
            writer = (sink.consume, f"{type(sink).__name__}.consume")
            table = self._durable if sink.durable else self._later
            table.update({kind: (*table[kind], writer) for kind in _KINDS if kind in sink.takes})
            self._journal_now = self._direct_journal()
        sink.attach(self)

    def _direct_journal(self) -> _JournalWriters | None:
        """What :attr:`_journal_now` is for the sinks added so far."""
        takers = [s for s in self._sinks if Journaled in s.takes and s.durable]
        takers += [s for s in self._sinks if Journaled in s.takes and not s.durable]
        if any(not s.durable and type(s).journal_now is Sink.journal_now for s in takers):
            return None
        return tuple((s.journal_now, f"{type(s).__name__}.journal_now") for s in takers)

    def schedule(self, delay: float, fn: Callable[[], None]) -> None:
        """Run ``fn()`` on the worker after ``delay`` seconds (dropped at shutdown)."""
        self.worker.schedule(delay, _Deferred(fn))

    # -- records: the one scheduler -----------------------------------------------------------

    def record(self, record: Record) -> None:
        """Take one record, in the caller's thread (see the module docstring)."""
        if not self._shut_down:
            self._take(record)

    def _take(self, record: Record) -> None:
        kind = type(record)
        durability = record.durability
        if self._durable[kind]:
            if durability is BEFORE_CALL_GOES_ON:
                if self._soon[kind] or kind in self._draining:
                    with self._durable_lock:  # after the SOON ones of its type before it
                        self._write_durable(kind, record)
                else:  # none waits: no lock to take (it would wait for the worker's writes)
                    self._write_each((record,))
            elif durability is SOON:
                self._soon[kind].append(record)
                self.worker.put(record)
                return
            else:
                self.worker.put(record)
                return
        if self._later[kind]:
            self.worker.put(record)

    def journal(self, session: Any, line: bytes | Callable[[], bytes], later: bool = False) -> None:
        """Emit a step-journal line (a :class:`Journaled` record): by default
        ``BEFORE_CALL_GOES_ON`` (on disk before the step's body runs); ``later``: ``WHENEVER``
        (an outcome, which a kill may lose: its step then reads as in doubt, never as done),
        and ``line`` may then be a callable that makes it on the worker (an LLM response
        turned into JSON). What ``tracing``'s journal steps call."""
        if later:
            # Taken even once shutdown began: the worker drains its queue then, and an outcome
            # dropped there would leave a call that ended read as in doubt.
            self._take(Journaled(session, line, WHENEVER))
        elif not self._shut_down:
            direct = self._journal_now
            # (No journal line is SOON today; one that were would be written first, in order.)
            if direct is None or self._soon[Journaled] or Journaled in self._draining:
                self._take(Journaled(session, line, BEFORE_CALL_GOES_ON))
                return
            # The one record on every undeclared tool call's path, so no record and no
            # scheduling: each sink that takes it takes its bytes, the stream with one write.
            if type(line) is not bytes:
                made = journal_bytes(Journaled(session, line))
                if made is None:
                    return
                line = made
            for take, where in direct:
                try:
                    take(session, line)
                except Exception as exc:
                    report_internal_error(where, exc)

    def _forget_soon(self) -> None:
        self._soon = {kind: deque() for kind in _KINDS}
        self._draining = set()
        self._durable_lock = threading.Lock()

    def _write_durable(self, kind: type, then: Record | None = None) -> None:
        """Give the durable sinks the ``SOON`` records of type ``kind`` that wait, oldest
        first, and ``then``, together (under the durable lock)."""
        soon = self._soon[kind]
        if not soon:
            if then is not None:
                self._write_each((then,))
            return
        # Marked before any is taken, cleared once all are written: a record that must
        # follow them and finds the queue empty meanwhile waits for the lock.
        self._draining.add(kind)
        try:
            records: list[Record] = []
            while soon:
                records.append(soon.popleft())
            if then is not None:
                records.append(then)
            self._write_each(records)
        finally:
            self._draining.discard(kind)

    def _write_each(self, records: Sequence[Record]) -> None:
        """Each durable sink's share of ``records`` (their types differ: a free op's end, an
        intent), in one call per sink."""
        durable = self._durable
        writers = durable[type(records[0])]
        if len(records) > 1 and any(durable[type(r)] != writers for r in records):
            for write, where in dict.fromkeys(w for r in records for w in durable[type(r)]):
                _write(write, where, [r for r in records if (write, where) in durable[type(r)]])
            return
        for write, where in writers:
            _write(write, where, records)

    def _consume(self, record: Any) -> None:
        kind = type(record)
        if kind is _Deferred:
            record.fn()
            return
        durable = self._durable[kind]
        if durable:
            durability = record.durability
            if durability is SOON:
                if self._soon[kind]:
                    with self._durable_lock:  # this one and those that came before it
                        self._write_durable(kind)
            elif durability is WHENEVER:
                # Not under the lock: encoding it may take long (an LLM response), and every
                # SOON record emitted before it was written as the worker passed it.
                self._write_each((record,))
        later = self._later[kind]
        if later:
            records = (record,)
            for write, where in later:
                _write(write, where, records)

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


def _write(write: Callable[[Any], None], where: str, records: Sequence[Record]) -> None:
    try:
        write(records)
    except Exception as exc:
        report_internal_error(where, exc)
