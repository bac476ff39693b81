"""What a consumer of lifecycle records implements: the processor (``agenttrace.sdk.processor``)
hands each record to every sink it was given, and each sink derives one output from them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from agenttrace.model.lifecycle import Ended, EventLogged, Logged, Started


class Scheduler(Protocol):
    """Runs work later on the recorder's background worker (the processor is one)."""

    def schedule(self, delay: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the worker after ``delay`` seconds."""


class Sink:
    """One output derived from lifecycle records. Methods must not block for long or raise.

    Every method runs on the background worker, in record order, except ``event_logged`` of an
    ``inline`` sink and every sink's ``op_accounted`` for an op that can carry a cost, which run
    in the caller's thread at once (for outputs that must be on disk before the call that logged
    the event, or the paid op, returns); a free op's accounting (``ops_accounted``) runs on the
    worker or in the thread of the next paid op, under a lock, in the order the ops ended.
    """

    inline = False

    def reads_from(self) -> tuple[Sink, ...]:
        """The sinks whose state this one reads as it takes a record: each must come before it
        among the processor's sinks (it hands a record to them in order), which the processor
        checks as the sink is added."""
        return ()

    def attach(self, scheduler: Scheduler) -> None:
        """Called when the sink is added to the processor (``scheduler``: to schedule work on its
        worker)."""

    def started(self, record: Started) -> None:
        """A scope started."""

    def ended(self, record: Ended) -> None:
        """A scope ended."""

    def logged(self, record: Logged) -> None:
        """A log line or reasoning chunk was attached to a scope."""

    def event_logged(self, record: EventLogged) -> None:
        """A canonical event was logged."""

    def op_accounted(self, record: Ended) -> None:
        """An op ended and its accounting was made (``record.accounted``). For an op that can
        carry a cost (``record.accounted.inline``), runs in the caller's thread, before the op's
        caller goes on: what an LLM attempt cost is on disk before a kill can come. For others,
        on the worker or in the thread of the next paid op, one at a time, in the order the ops
        ended."""

    def ops_accounted(self, records: list[Ended]) -> None:
        """Several ops' accounting, in the order the ops ended (what waited for the worker):
        :meth:`op_accounted` for each, unless the sink writes them together."""
        for record in records:
            self.op_accounted(record)

    def journaled(self, session: Any, line: bytes) -> None:
        """A step-journal line (docs/journal.md) to write now. Runs in the caller's thread,
        before the step's body runs (a tool's ``intent``): a kill that comes next finds it."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Write out anything buffered."""
        return True

    def shutdown(self) -> None:
        """Flush and release resources; later calls are ignored."""
