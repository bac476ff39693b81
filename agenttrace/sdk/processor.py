"""Our span processor: the one place every output of agenttrace is derived from the spans.

OpenTelemetry calls ``on_start``/``on_end`` for every span; agenttrace's own span events (logs,
reasoning, canonical events) arrive through :meth:`AgentTraceProcessor.on_event` the moment they
are added, so outputs that must not wait for a span to end (the event stream) see them at once.
Everything else is handed to the background worker (``_worker``), which also ends agenttrace's
spans: sinks see starts, events and ends in the order they happened, off the agent's hot path.
Each output is a :class:`Sink`; the processor hands our spans to every sink and ignores spans
that are not ours.

Like the SDK's processors, it never lets an error reach its caller: a failing sink is reported
once (and re-raised under the test suite) and the others go on.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace.sdk.worker import worker

if TYPE_CHECKING:
    from agenttrace.record.session import Session


def span_attributes(span: ReadableSpan) -> Mapping[str, Any]:
    """A span's attributes as a plain mapping, read fast.

    ``span.attributes`` is a read-only proxy over the SDK's ``BoundedAttributes``, whose every
    lookup runs three Python-level calls; the sinks read ~30 attributes a span on the worker. The
    dict inside is used when it is there (the SDK's current layout), the proxy otherwise.
    """
    inner = getattr(getattr(span, "_attributes", None), "_dict", None)
    if isinstance(inner, dict):
        return inner
    return span.attributes or {}


class Sink:
    """One output derived from our spans. Methods must not block for long or raise.

    ``on_start`` and ``on_event`` run on agenttrace's background worker, in order with the span
    ends (which the worker performs), unless ``inline`` is true: then ``on_event`` runs in the
    caller's thread at once (for outputs that must be on disk before the call returns).
    """

    inline = False

    def on_start(self, span: ReadableSpan) -> None:
        """An agenttrace span started (its start attributes are set)."""

    def on_event(self, span: ReadableSpan, name: str, attributes: Mapping[str, Any]) -> None:
        """An agenttrace event (log, reasoning chunk, canonical event) was added to ``span``."""

    def on_canonical_event(
        self, session: Session, event: dict[str, Any], line: bytes, span: ReadableSpan | None
    ) -> None:
        """A seed-001 event was logged: ``event`` in full, ``line`` its JSON line as written."""

    def on_end(self, span: ReadableSpan) -> None:
        """An agenttrace span ended."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Write out anything buffered."""
        return True

    def shutdown(self) -> None:
        """Flush and release resources; later calls are ignored."""


class AgentTraceProcessor(SpanProcessor):
    """Feeds agenttrace's spans and events to its sinks (console, stream, session file, ...)."""

    def __init__(self, sinks: tuple[Sink, ...] = ()) -> None:
        self._sinks: tuple[Sink, ...] = ()  # copy-on-write: iterated without a lock
        self._start_sinks: tuple[Sink, ...] = ()
        self._event_sinks: tuple[Sink, ...] = ()
        self._lock = threading.Lock()
        self._shut_down = False
        for sink in sinks:
            self.add_sink(sink)

    @property
    def sinks(self) -> tuple[Sink, ...]:
        """The sinks, in the order they are called."""
        return self._sinks

    def add_sink(self, sink: Sink) -> None:
        """Add a sink; it sees spans and events from now on."""
        with self._lock:
            self._sinks = (*self._sinks, sink)
            if type(sink).on_start is not Sink.on_start:  # skip queueing no-op calls
                self._start_sinks = (*self._start_sinks, sink)
            if type(sink).on_canonical_event is not Sink.on_canonical_event:
                self._event_sinks = (*self._event_sinks, sink)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self._shut_down or not self._start_sinks:
            return
        if sc.KIND in span_attributes(span):
            worker.submit(self._dispatch, "on_start", self._start_sinks, (span,))

    def on_event(self, span: ReadableSpan, name: str, attributes: Mapping[str, Any]) -> None:
        """Called by agenttrace right after it adds an event to one of its spans."""
        if not self._shut_down:
            self._deliver("on_event", self._sinks, (span, name, attributes))

    def on_canonical_event(
        self, session: Session, event: dict[str, Any], line: bytes, span: ReadableSpan | None
    ) -> None:
        """Called by ``Session`` for every event it logs, in message-id order."""
        if not self._shut_down:
            self._deliver("on_canonical_event", self._event_sinks, (session, event, line, span))

    def on_end(self, span: ReadableSpan) -> None:
        # Runs where the span was ended: agenttrace's worker, in order with the queued calls.
        if self._shut_down:
            return
        if sc.KIND in span_attributes(span):
            self._dispatch("on_end", self._sinks, (span,))

    def _deliver(self, method: str, sinks: tuple[Sink, ...], args: tuple[Any, ...]) -> None:
        """Call ``method`` on the inline sinks now, and queue one call for the others."""
        queued = []
        for sink in sinks:
            if sink.inline:
                self._dispatch(method, (sink,), args)
            else:
                queued.append(sink)
        if queued:
            worker.submit(self._dispatch, method, tuple(queued), args)

    @staticmethod
    def _dispatch(method: str, sinks: tuple[Sink, ...], args: tuple[Any, ...]) -> None:
        for sink in sinks:
            try:
                getattr(sink, method)(*args)
            except Exception as exc:
                report_internal_error(f"{type(sink).__name__}.{method}", exc)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        ok = worker.flush(timeout_millis / 1000)
        for sink in self._sinks:
            try:
                ok = sink.force_flush(timeout_millis) and ok
            except Exception as exc:
                report_internal_error(f"{type(sink).__name__}.force_flush", exc)
                ok = False
        return ok

    def shutdown(self) -> None:
        worker.flush()
        with self._lock:
            if self._shut_down:
                return
            self._shut_down = True
        for sink in self._sinks:
            try:
                sink.shutdown()
            except Exception as exc:
                report_internal_error(f"{type(sink).__name__}.shutdown", exc)
