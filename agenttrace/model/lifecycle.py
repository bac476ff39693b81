"""Lifecycle records: what agenttrace's scopes report as they start and end, as plain values.

A scope (an agent run, a turn, an LLM attempt, a tool call) emits a :class:`Started` when it
opens and an :class:`Ended` when it closes; logs and reasoning chunks are :class:`Logged`, and
every canonical event a :class:`EventLogged`. They are emitted whether or not the scope's span is
sampled or recording, and they are the one source of every output but the spans themselves: the
event stream, the session file, the ledger, the GenAI metrics, the live opTree and the console
lines (see ``docs/architecture.md``). What an op came to (usage, cost, tool sizes, status) is
typed, in its ``Ended`` record's ``accounted.op`` (``agenttrace.model.outcome``).

Records are immutable values: built once in the caller's thread, from copies of what the caller
passed (a result is serialised when the call returns, never read later from the user's object),
so a sink may consume them later, on another thread. Their attribute mappings are the very ones
put on the span, and must not be changed by anyone after the record is built.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from agenttrace.model.outcome import OpOutcome

AttributeMap = Mapping[str, Any]

SpanEvent = tuple[str, int, AttributeMap]
"""A span event as recorded: (name, time in ns since the epoch, attributes)."""


class Durability(enum.IntEnum):
    """How soon a record's durable outputs (the event stream, the ledger, the GenAI metrics)
    must have it: what the record's producer promises its caller. The recorder
    (``agenttrace.sdk.processor``) is the one place that honours it."""

    WHENEVER = 0
    """On the background worker, in record order (a scope's start, a run's end, a step's
    outcome: a kill may lose it, and the step then reads as in doubt, never as done)."""
    SOON = 1
    """On the worker, or before the next ``BEFORE_CALL_GOES_ON`` record of its type if that
    comes first (a free op's accounting): the lines stay in the order the ops ended."""
    BEFORE_CALL_GOES_ON = 2
    """In the caller's thread, before ``emit`` returns, after every earlier ``SOON`` record
    of its type (a canonical event, a paid op's accounting, a tool's intent): a kill that
    comes next finds it on disk."""


WHENEVER = Durability.WHENEVER
SOON = Durability.SOON
BEFORE_CALL_GOES_ON = Durability.BEFORE_CALL_GOES_ON


class Started:
    """A scope opened: its place (``label``) in the run ``origin``, and its span's identity."""

    durability = WHENEVER

    __slots__ = (
        "attributes",
        "kind",
        "label",
        "links",
        "name",
        "origin",
        "parent",
        "parent_span_id",
        "session",
        "span_id",
        "span_kind",
        "started_ns",
        "trace_flags",
        "trace_id",
    )

    def __init__(
        self,
        origin: str,
        label: str,
        kind: str,
        name: str,
        started_ns: int,
        trace_id: int,
        span_id: int,
        parent_span_id: int | None,
        attributes: AttributeMap,
        span_kind: str = "INTERNAL",
        links: Sequence[tuple[int, int, int]] = (),
        session: Any = None,
        parent: str | None = None,
        trace_flags: int = 0,
    ) -> None:
        self.origin = origin
        """The origin txn id of the run (root agent run) the scope belongs to."""
        self.label = label
        """The scope's path label (``0``, ``1``, ``1.2``, ``1.2:2.1.1``, ...)."""
        self.kind = kind
        """``session``, ``turn``, ``llm`` or ``tool`` as the scope started."""
        self.name = name
        """The span's name (``invoke_agent Jack``, ``chat gpt-4o``, ...)."""
        self.started_ns = started_ns
        self.trace_id = trace_id
        """0 when there is no span context (OpenTelemetry's no-op tracer)."""
        self.span_id = span_id
        self.parent_span_id = parent_span_id
        self.attributes = attributes
        """The attributes the span started with."""
        self.span_kind = span_kind
        """OpenTelemetry's span kind, by name (``INTERNAL``, ``CLIENT``)."""
        self.links = links
        """(trace id, span id, OTLP link flags) of each span this one links to."""
        self.session = session
        """On a run's root only: the ``agenttrace.session.state.Session`` it records into."""
        self.parent = parent
        """The label of the scope it opened in (``None`` for a run's root)."""
        self.trace_flags = trace_flags
        """The span's W3C trace flags (bit 0: sampled), as the sampler decided."""


class Accounting(Protocol):
    """What an op's ``Ended`` record carries of what it came to: its typed outcome, and its
    accounting entry and ``op_accounted`` line as the ledger and the stream write them
    (``agenttrace.formats.ledger.Accounted`` is the one kind)."""

    inline: bool
    """Whether its lines are written in the caller's thread (an op that can carry a cost)."""

    @property
    def op(self) -> OpOutcome:
        """The op's outcome: usage, cost, tool sizes, status (``agenttrace.model.outcome``)."""
        ...

    @property
    def entry(self) -> Any:
        """Its accounting entry (an ``AccountingEntry``)."""
        ...

    @property
    def entry_json(self) -> bytes:
        """The entry as compact JSON, encoded once."""
        ...

    def ledger_line(self) -> bytes:
        """The entry as its line of the billing ledger."""
        ...

    def stream_line(self) -> bytes:
        """Its ``op_accounted`` line of the event stream."""
        ...


class Ended:
    """A scope closed: when, how, and the attributes and events it gained since it started."""

    __slots__ = (
        "accounted",
        "attributes",
        "durability",
        "ended_ns",
        "error",
        "events",
        "label",
        "origin",
        "outcome",
        "payloads",
        "session",
        "started",
    )

    def __init__(
        self,
        origin: str,
        label: str,
        ended_ns: int,
        attributes: AttributeMap,
        error: str | None = None,
        events: Sequence[SpanEvent] = (),
        payloads: Mapping[str, Any] | None = None,
        accounted: Accounting | None = None,
        session: Any = None,
        started: Started | None = None,
        outcome: OpOutcome | None = None,
    ) -> None:
        self.origin = origin
        self.label = label
        self.ended_ns = ended_ns
        self.attributes = attributes
        """Every attribute set on the span after it started (status, latency, results, ...)."""
        self.error = error
        """The span's ERROR status description (scrubbed); ``None``: the scope succeeded."""
        self.events = events
        """Span events added when it ended (the ``exception`` event of a failure)."""
        self.payloads = payloads
        """An op's request and response content (redacted, capped JSON text) under the span
        attribute names it has when content goes on spans: the saved state keeps it whatever
        the span setting. A value may be a ``RecordedLater`` (``_internal/later.py``): a value
        that cannot change, whose text is made when first read (``recorded_text``)."""
        self.accounted = accounted
        """An op's outcome (``accounted.op``: typed usage, cost, tool sizes, status), from which
        its accounting entry, ledger line, ``op_accounted`` line, metrics and opTree node are
        derived: for an op that can carry a cost, made in the caller's thread and written to
        the stream and the ledger there before the op's caller goes on; for a free one, made
        and written later. ``None`` for a run or a turn."""
        self.durability = (
            WHENEVER if accounted is None else BEFORE_CALL_GOES_ON if accounted.inline else SOON
        )
        """A paid op's accounting (``accounted.inline``) is on disk before its caller goes on;
        a free op's soon after, in the order the ops ended; a run's or a turn's end whenever."""
        self.session = session
        """With ``accounted``: the ``Session`` whose stream gets it."""
        self.started = started
        """The scope's :class:`Started` record (``None`` if recording began after it started):
        what a consumer in the caller's thread needs of the start, such as the span's identity
        and start attributes, without having kept the start itself."""
        self.outcome = outcome
        """The outcome of an op that has no ``accounted``: one answered from the journal, which
        bought nothing (its console line and opTree node are still made from it)."""


class ReasoningParts(NamedTuple):
    """A model's reasoning as it came, redacted and bounded: its chunks, each ``(text, time in
    ns)`` (a stream's deltas, a response's thinking blocks), and the provider's summary of it, if
    it gave one."""

    chunks: tuple[tuple[str, int], ...]
    final: str | None = None


class Logged:
    """A log line or reasoning attached to the running scope (a span event of its own)."""

    durability = WHENEVER

    __slots__ = ("attributes", "label", "name", "origin", "reasoning", "time_ns")

    def __init__(
        self,
        origin: str,
        label: str,
        name: str,
        time_ns: int,
        attributes: AttributeMap,
        reasoning: ReasoningParts | None = None,
    ) -> None:
        self.origin = origin
        self.label = label
        self.name = name
        """``agenttrace.log`` or ``agenttrace.reasoning``."""
        self.time_ns = time_ns
        self.attributes = attributes
        """The span event's attributes, as the span got them (capped by ``max_payload_bytes``)."""
        self.reasoning = reasoning
        """Reasoning's chunks and summary as the opTree keeps them (bounded by
        ``max_reasoning_bytes`` only); ``None`` for a log line, or a record made by hand (its
        span event's text is then its one chunk)."""


class EventLogged:
    """A canonical event (docs/events.md) was logged in ``session``.

    ``line`` is the event's JSON line exactly as the stream stores it. ``origin``/``label`` name
    the scope it was logged in (``None`` outside any). The span event it became there is not
    carried: it follows from the event (``agenttrace.tracing.recording``). ``more``: how many
    events logged with this one follow it; they are written together, in one write. On the
    stream before ``log_*`` returns.
    """

    durability = BEFORE_CALL_GOES_ON

    __slots__ = ("event", "label", "line", "more", "origin", "session")

    def __init__(
        self,
        session: Any,
        event: Mapping[str, Any],
        line: bytes,
        origin: str | None = None,
        label: str | None = None,
        more: int = 0,
    ) -> None:
        self.session = session
        """The ``agenttrace.session.state.Session`` it was logged in."""
        self.event = event
        self.line = line
        self.origin = origin
        self.label = label
        self.more = more


class Journaled:
    """A step-journal line (docs/journal.md) of ``session``.

    ``line`` is the line as its producer made it: its bytes (ending in a newline), a callable
    that makes them (an LLM response turned into JSON, made off the caller's thread), or a
    value with a ``journal_bytes()`` method (a typed journal line). The sinks that write it
    take its bytes from :meth:`encoded`, which makes them once. ``durability``: a tool's
    intent is ``BEFORE_CALL_GOES_ON`` (on disk before the step's body runs); an outcome
    (``done``, ``failed``) is ``WHENEVER``.
    """

    __slots__ = ("_bytes", "durability", "line", "session")

    def __init__(
        self,
        session: Any,
        line: bytes | Callable[[], bytes] | Any,
        durability: Durability = BEFORE_CALL_GOES_ON,
    ) -> None:
        self.session = session
        """The ``agenttrace.session.state.Session`` whose journal it belongs to."""
        self.line = line
        self.durability = durability
        self._bytes: bytes | None = line if type(line) is bytes else None

    def encoded(self) -> bytes:
        """The line's bytes, made on first use (by whichever sink takes it first). Raises
        whatever the line's own encoding raises, once: ``b""`` (no line) after that."""
        data = self._bytes
        if data is None:
            line = self.line
            encode = getattr(line, "journal_bytes", None)
            try:
                data = encode() if encode is not None else line() if callable(line) else line
            except BaseException:
                self._bytes = b""  # a line that cannot be made is reported once, then skipped
                raise
            self._bytes = data
        return data


Record = Started | Ended | Logged | EventLogged | Journaled
