"""What a consumer of lifecycle records implements: the processor (``agenttrace.sdk.processor``)
hands each record to every sink that takes it, through one way in (:meth:`Sink.consume`), and
each sink derives one output from them. When a sink gets a record is the processor's business
alone, told by the record's durability (``agenttrace.model.lifecycle.Durability``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Protocol

from agenttrace._internal.errors import report_internal_error
from agenttrace.model.lifecycle import BEFORE_CALL_GOES_ON, Journaled, Record


class Scheduler(Protocol):
    """Runs work later on the recorder's background worker (the processor is one)."""

    def schedule(self, delay: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the worker after ``delay`` seconds."""


class Sink:
    """One output derived from lifecycle records. :meth:`consume` must not block for long or
    raise.

    A sink that is not ``durable`` gets every record it takes on the background worker, one
    at a time, in record order. A ``durable`` sink (it writes what a kill must find: the event
    stream, the ledger, the GenAI metrics of a paid attempt) gets each record when the
    record's durability says: a ``BEFORE_CALL_GOES_ON`` one in the caller's thread, before
    ``emit`` returns, together with the ``SOON`` ones of its type emitted before it that it
    has not had yet; a ``SOON`` or ``WHENEVER`` one on the worker. Its records come in
    emission order among those of one durability; a ``SOON`` record always before any
    ``BEFORE_CALL_GOES_ON`` one of its type emitted after it (a free op's accounting before a
    later paid op's). Calls to one sink may come from two threads
    (the caller's, the worker's), one at a time for durable records.
    """

    durable = False
    takes: frozenset[type] = frozenset()
    """The record types it derives its output from (the processor hands it no others)."""

    def reads_from(self) -> tuple[Sink, ...]:
        """The sinks whose state this one reads as it takes a record: each must come before it
        among the processor's sinks (it hands a record to them in order), which the processor
        checks as the sink is added."""
        return ()

    def attach(self, scheduler: Scheduler) -> None:
        """Called when the sink is added to the processor (``scheduler``: to schedule work on its
        worker)."""

    def consume(self, records: Sequence[Record]) -> None:
        """Take ``records`` (of the types it ``takes``), oldest first: several when a durable
        sink gets the ``SOON`` records that waited with the record that cannot wait (written
        together where the sink can: one ``write`` for several lines)."""

    def journal_now(self, session: Any, line: bytes) -> None:
        """Take a ``BEFORE_CALL_GOES_ON`` step-journal line of ``session`` (a tool's intent),
        its bytes made, in the caller's thread, before the step's body runs: the processor's
        direct way for the one record that is on every undeclared tool call's path (no
        record made, no scheduling).

        A durable sink takes it as it would take its record (this default). A sink that is
        not durable gets it this way only if it overrides this method (it must then be safe
        to call from any thread, beside its worker-side ``consume``); while one that takes
        journal lines does not, every sink gets the line as a :class:`Journaled` record."""
        self.consume((Journaled(session, line, BEFORE_CALL_GOES_ON),))

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Write out anything buffered."""
        return True

    def shutdown(self) -> None:
        """Flush and release resources; later calls are ignored."""


class RecordwiseSink(Sink):
    """A sink that takes its records one at a time, each by the method its ``handlers`` name
    for the record's type; what it ``takes`` is those types."""

    handlers: ClassVar[dict[type, str]] = {}
    """Per record type, the name of the method that takes one record of it."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.takes = frozenset(cls.handlers)

    def consume(self, records: Sequence[Record]) -> None:
        handlers = self.handlers
        for record in records:
            getattr(self, handlers[type(record)])(record)


def journal_bytes(record: Journaled) -> bytes | None:
    """A journal record's line as bytes, made by the first sink that asks; ``None`` if the line
    could not be made (reported once, as an internal error)."""
    try:
        return record.encoded() or None
    except Exception as exc:
        report_internal_error("journal line", exc)
        return None
