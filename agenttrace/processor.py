"""Our span processor: the one place every output of agenttrace is derived from the spans.

OpenTelemetry calls ``on_start``/``on_end`` for every span; agenttrace's own span events (logs,
reasoning, canonical events) arrive through :meth:`AgentTraceProcessor.on_event` the moment they
are added, so outputs that must not wait for a span to end (console warnings, the event stream)
see them at once. Each output is a :class:`Sink`; the processor hands our spans to every sink and
ignores spans that are not ours.

Like the SDK's processors, it never lets an error reach its caller: a failing sink is reported
once (and re-raised under the test suite) and the others go on.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from . import semconv as sc
from ._internal_errors import report_internal_error


class Sink:
    """One output derived from our spans. Methods must not block for long or raise."""

    def on_start(self, span: ReadableSpan) -> None:
        """An agenttrace span started (its start attributes are set)."""

    def on_event(self, span: ReadableSpan, name: str, attributes: Mapping[str, Any]) -> None:
        """An agenttrace event (log, reasoning chunk, canonical event) was added to ``span``."""

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
        self._sinks = sinks  # copy-on-write: iterated on every span without a lock
        self._lock = threading.Lock()
        self._shut_down = False

    @property
    def sinks(self) -> tuple[Sink, ...]:
        """The sinks, in the order they are called."""
        return self._sinks

    def add_sink(self, sink: Sink) -> None:
        """Add a sink; it sees spans and events from now on."""
        with self._lock:
            self._sinks = (*self._sinks, sink)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self._shut_down or span.attributes is None or sc.KIND not in span.attributes:
            return
        for sink in self._sinks:
            try:
                sink.on_start(span)
            except Exception as exc:
                report_internal_error(f"{type(sink).__name__}.on_start", exc)

    def on_event(self, span: ReadableSpan, name: str, attributes: Mapping[str, Any]) -> None:
        """Called by agenttrace right after it adds an event to one of its spans."""
        if self._shut_down:
            return
        for sink in self._sinks:
            try:
                sink.on_event(span, name, attributes)
            except Exception as exc:
                report_internal_error(f"{type(sink).__name__}.on_event", exc)

    def on_end(self, span: ReadableSpan) -> None:
        if self._shut_down or span.attributes is None or sc.KIND not in span.attributes:
            return
        for sink in self._sinks:
            try:
                sink.on_end(span)
            except Exception as exc:
                report_internal_error(f"{type(sink).__name__}.on_end", exc)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        ok = True
        for sink in self._sinks:
            try:
                ok = sink.force_flush(timeout_millis) and ok
            except Exception as exc:
                report_internal_error(f"{type(sink).__name__}.force_flush", exc)
                ok = False
        return ok

    def shutdown(self) -> None:
        with self._lock:
            if self._shut_down:
                return
            self._shut_down = True
        for sink in self._sinks:
            try:
                sink.shutdown()
            except Exception as exc:
                report_internal_error(f"{type(sink).__name__}.shutdown", exc)
