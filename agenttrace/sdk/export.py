"""The OTLP export agenttrace sets up, with a bounded shutdown and a count of what it dropped.

A batch processor's shutdown and force_flush export what is queued, and the OTLP exporters retry
a dead collector with backoff for up to their timeout (10 s by default) per batch, with no way to
bound the whole. :class:`BoundedExport` wraps the batch processor and its exporter: its
``shutdown`` waits at most ``budget`` seconds, then stops the exporter (which aborts its retries),
gives up on what is still queued and says in one warning how many spans were not exported; its
``force_flush`` waits at most the budget too, and leaves what it did not wait for to the
exporter's retries.

The count needs no private SDK attribute: the spans the batch processor was given (sampled ones,
as it takes only those) minus the spans our own exporter wrapper saw exported successfully. It
therefore includes spans the batch processor dropped on a full queue, batches the collector
refused, and whatever was still queued or in flight when the budget ran out.

Only what agenttrace made is bounded: an application's own processors are its business.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

logger = logging.getLogger("agenttrace")


def in_background(fn: Callable[[], object], name: str) -> Callable[[float], BaseException | bool]:
    """Start ``fn()`` on a daemon thread; returns ``wait(seconds)``, which waits at most that
    long and says how it went: True if ``fn`` returned, what it raised, or False if it is still
    running (it is left to finish, or to be dropped with the process: a daemon thread never
    holds up the exit)."""
    done = threading.Event()
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            fn()
        except BaseException as exc:  # handed to the caller, which decides how to say it
            outcome.append(exc)
        finally:
            done.set()

    threading.Thread(target=call, name=name, daemon=True).start()

    def wait(seconds: float) -> BaseException | bool:
        if not done.wait(max(0.0, seconds)):
            return False
        return outcome[0] if outcome else True

    return wait


def run_within(fn: Callable[[], object], seconds: float, name: str) -> BaseException | bool:
    """``fn()`` on a daemon thread, waited for at most ``seconds`` (see :func:`in_background`)."""
    return in_background(fn, name)(seconds)


class _CountingExporter(SpanExporter):
    """The exporter as our batch processor sees it: counts the spans exported successfully,
    and once :meth:`close` is called refuses every batch at once instead of sending it."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.exported = 0
        self.failed = 0
        """Spans in batches the exporter reported failed (a dead collector, a refusal)."""
        self._lock = threading.Lock()
        self._closed = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Send ``spans`` through the real exporter, counting them if it succeeded."""
        if self._closed:
            return SpanExportResult.FAILURE
        result = self.inner.export(spans)
        with self._lock:
            if result is SpanExportResult.SUCCESS:
                self.exported += len(spans)
            else:
                self.failed += len(spans)
        return result

    def close(self) -> None:
        """Refuse later batches, and shut the real exporter down (aborting its retries)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.inner.shutdown()

    def shutdown(self) -> None:
        """Called by the batch processor once its queue is done: the same as :meth:`close`."""
        self.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """The real exporter's ``force_flush``."""
        return self.inner.force_flush(timeout_millis)

    def reset_count(self) -> None:
        """Forget the counts (in a forked child, which starts with an empty queue)."""
        with self._lock:
            self.exported = 0
            self.failed = 0


class BoundedExport(SpanProcessor):
    """A batch processor feeding ``exporter``, whose ``shutdown`` takes at most ``budget``
    seconds and warns once with the number of spans not exported.

    ``target`` names the destination in the warning (only its host and port are shown).
    """

    def __init__(self, exporter: SpanExporter, budget: float, target: str | None = None) -> None:
        self.budget = budget
        self._exporter = _CountingExporter(exporter)
        self._batch = BatchSpanProcessor(self._exporter)
        self._target = _where(target)
        self._lock = threading.Lock()
        self._given = 0
        self._shut_down = False
        self._flushing: Callable[[float], BaseException | bool] | None = None
        """Waits for the last force_flush's thread (which may still be in the retries)."""
        if hasattr(os, "register_at_fork"):
            this = weakref.ref(self)
            os.register_at_fork(after_in_child=lambda: _after_fork(this))

    @property
    def given(self) -> int:
        """Spans handed to the batch processor so far."""
        return self._given

    @property
    def exported(self) -> int:
        """Spans the exporter reported exported so far."""
        return self._exporter.exported

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Nothing (the batch processor does nothing at a span's start either)."""

    def on_end(self, span: ReadableSpan) -> None:
        """Queue the span for export, counting it as the batch processor would take it."""
        if self._shut_down or not (span.context and span.context.trace_flags.sampled):
            return
        with self._lock:
            self._given += 1
        self._batch.on_end(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Export what is queued, waiting at most ``timeout_millis`` or the budget, whichever is
        shorter; True only if it finished and no batch failed meanwhile.

        The batch processor's own ``force_flush`` ignores its timeout and waits out the
        exporter's retries (about 8 s on a refused port with the default 10 s OTLP timeout), so
        it runs on a thread and is waited for only so long. Nothing is dropped for giving up:
        the batch in hand stays with the exporter's retries, and what is still queued with the
        batch processor, for its next export or the shutdown.
        """
        if self._shut_down:
            return True
        failed_before = self._exporter.failed
        deadline = time.monotonic() + min(timeout_millis / 1000, self.budget)
        with self._lock:
            running = self._flushing
        # One flush at a time: a program that flushes often with the collector dead waits on
        # the flush still in the exporter's retries, instead of piling up threads behind it.
        if running is not None and running(deadline - time.monotonic()) is False:
            return False
        wait = in_background(self._batch.force_flush, "agenttrace-export-flush")
        with self._lock:
            self._flushing = wait
        finished = wait(deadline - time.monotonic())
        return finished is True and self._exporter.failed == failed_before

    def shutdown(self) -> None:
        """Export what is queued within the budget; drop the rest, and say how many spans."""
        with self._lock:
            if self._shut_down:
                return
            self._shut_down = True
        finished = run_within(self._batch.shutdown, self.budget, "agenttrace-export-shutdown")
        if finished is not True:
            # Stops the retries and the batches still queued: the thread ends soon after, or
            # (blocked on a silent collector) is dropped with the process.
            self._exporter.close()
        dropped = self._given - self._exporter.exported
        if dropped <= 0:
            return
        if finished is True:
            why = "the exporter or a full queue dropped them (OpenTelemetry's messages say why)"
        elif finished is not False:
            why = f"the batch processor failed to shut down: {type(finished).__name__}: {finished}"
        else:
            why = (
                f"not taken within the {self.budget:g} s shutdown budget "
                "(AGENTTRACE_SHUTDOWN_TIMEOUT or init(shutdown_timeout=...) sets it)"
            )
        logger.warning(
            "agenttrace: %d of %d spans were not exported%s: %s",
            dropped,
            self._given,
            f" to {self._target}" if self._target else "",
            why,
        )

    def _forked(self) -> None:
        with self._lock:
            self._given = 0
        self._exporter.reset_count()


def _after_fork(ref: weakref.ref[BoundedExport]) -> None:
    export = ref()
    if export is not None:
        export._forked()


def _where(endpoint: str | None) -> str | None:
    """``scheme://host:port`` of ``endpoint``: never its user, password, path or query."""
    if not endpoint:
        return None
    try:
        parts = urlsplit(endpoint)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return None
    if not host:
        return None
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}" + (f":{port}" if port else "")
