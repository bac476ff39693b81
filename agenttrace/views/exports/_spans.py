"""The opTree of a session file as neutral span records, shared by the Jaeger and OTLP exports.

Each node of a run's opTree keeps its span exactly as it was sent (``span``: ids, parent, name,
kind, times in ns, status, attributes, events, links), and each run's root the resource and
instrumentation scope it was sent with (``resource``, ``scope``): those are exported as they are,
so an export says what went over OTLP live.

Session files written before nodes kept their span get their spans rebuilt from the node's own
fields, with the ids, names and attributes they had on the wire as far as the tree keeps them: a
session is ``invoke_agent {agent}``, a turn ``turn {index}``, an LLM call ``chat {model}`` and a
tool call ``execute_tool {tool}``. Their parents come from the tree (the only nesting such a file
holds), and their resource is ``service.name`` = the exporter's ``service_name``.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

from agenttrace import semconv as sc
from agenttrace._internal.capture import Output, captures
from agenttrace._internal.runtime import runtime
from agenttrace._internal.times import iso_nanoseconds, ts_nanoseconds
from agenttrace._version import __version__
from agenttrace.formats.documents import read_any
from agenttrace.formats.session.files import LoadedFile, SessionFileError
from agenttrace.formats.session.optree import children, finite_number, hosted_sessions
from agenttrace.formats.session.span_events import span_event_attributes
from agenttrace.views.public import public_view

Scalar: TypeAlias = str | bool | int | float
AttributeValue: TypeAlias = Scalar | list[Scalar]
StatusCode: TypeAlias = Literal["UNSET", "OK", "ERROR"]
"""OpenTelemetry's status codes, by name."""
Source: TypeAlias = LoadedFile | str | os.PathLike[str]
"""What the exporters take: a file already read, or the path of one."""

_HEX = re.compile(r"^[0-9a-f]+$")
_NS_PER_MS = 1_000_000
_NS_LIMIT = 1 << 64
"""OTLP's times are fixed64 nanoseconds."""
_STATUS_CODES: tuple[StatusCode, ...] = ("UNSET", "OK", "ERROR")

SCOPE_NAME = "agenttrace"
"""The instrumentation scope of agenttrace's spans (for files that did not record theirs)."""
_DROPPED_COUNTS = ("droppedAttributesCount", "droppedEventsCount", "droppedLinksCount")
FLAGS_HAS_IS_REMOTE = 0x100
"""OTLP ``SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK``: the sender knew whether the parent is remote."""


@dataclass
class Producer:
    """What sent a span: the resource (the process: ``service.name``, ``telemetry.sdk.*``, ...)
    and the instrumentation scope."""

    resource: dict[str, AttributeValue]
    scope_name: str
    scope_version: str | None

    @property
    def key(self) -> str:
        """Equal for equal producers (attributes in the same order)."""
        return json.dumps(
            [list(self.resource.items()), self.scope_name, self.scope_version], default=str
        )

    @property
    def resource_key(self) -> str:
        """Equal for equal resources, whatever the scope."""
        return json.dumps(list(self.resource.items()), default=str)


@dataclass
class SpanLog:
    """A timestamped event on a span (a log line, a reasoning chunk, a canonical event)."""

    timestamp_ns: int
    name: str
    attributes: dict[str, AttributeValue]


@dataclass
class SpanLink:
    """A link from a span to another (a resumed run's root links to the previous run's)."""

    trace_id: str
    span_id: str
    attributes: dict[str, AttributeValue] = field(default_factory=dict)
    flags: int | None = None
    """OTLP's link flags, if the file recorded them."""


@dataclass
class SpanRecord:
    """One opTree node as a span, in no particular wire format."""

    trace_id: str
    """32 lowercase hex digits."""
    span_id: str
    """16 lowercase hex digits."""
    parent_span_id: str | None
    name: str
    kind: str
    """The opTree kind: ``session``, ``turn``, ``llm`` or ``tool``."""
    path: str
    start_ns: int
    end_ns: int | None
    """``None``: the span never ended (the process stopped first)."""
    status: StatusCode | None
    """``None`` for a span that never ended (it was never sent)."""
    status_message: str | None
    attributes: dict[str, AttributeValue]
    producer: Producer
    logs: list[SpanLog] = field(default_factory=list)
    links: list[SpanLink] = field(default_factory=list)
    span_kind: str = "INTERNAL"
    """OpenTelemetry's span kind, by name (``INTERNAL``, ``CLIENT``, ...)."""
    flags: int | None = None
    """OTLP's span flags where they are known (see :func:`traces_of`), else ``None``."""
    dropped: dict[str, int] = field(default_factory=dict)
    """What the SDK's span limits dropped, as recorded: OTLP's ``droppedAttributesCount``,
    ``droppedEventsCount``, ``droppedLinksCount`` (only those above 0)."""
    warnings: list[str] = field(default_factory=list)


@dataclass
class TraceRecord:
    """The spans of one trace id (a run, or several runs that share a trace)."""

    trace_id: str
    spans: list[SpanRecord]


UNFINISHED_WARNING = "unfinished: this span never ended (the process stopped before it did)"


def load(source: Source) -> LoadedFile:
    """``source`` (a :class:`LoadedFile`, or the session file, stream or other format's
    document at that path) as it may leave the process: redacted and capped
    (:func:`agenttrace.views.public.public_view`)."""
    loaded = source if isinstance(source, LoadedFile) else read_any(Path(source))
    return public_view(loaded)


@contextmanager
def nesting_checked(loaded: LoadedFile) -> Iterator[None]:
    """An export of ``loaded`` that finds values nested deeper than Python's stack goes (a
    hostile file: the JSON reader takes what its own stack allows) raises
    :class:`SessionFileError` saying so, as for any other file that cannot be read."""
    try:
        yield
    except RecursionError:
        raise SessionFileError(f"{loaded.path}: values nested too deeply to export") from None


def traces_of(loaded: LoadedFile, service_name: str = "agenttrace") -> list[TraceRecord]:
    """The spans of every run in ``loaded``, one trace per trace id, runs in file order.

    Runs recorded without their resource get ``service.name`` = ``service_name``. An event
    stream holds no opTree, so it gives no traces.

    Span flags: OpenTelemetry's OTLP exporter sends ``SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK``
    on every span, plus ``IS_REMOTE`` when the parent came from another process. The file does
    not say whether a parent was remote, so the flags are given only where that is certain: a
    span without a parent, and a span whose parent is in the file (a span of this process).
    """
    events = _events_by_span(loaded.events)
    fallback = Producer(resource_attributes(loaded, service_name), SCOPE_NAME, __version__)
    seen: set[tuple[str, str]] = set()
    spans: list[SpanRecord] = []
    for number, run in enumerate(loaded.runs, start=1):
        if not isinstance(run, dict):
            continue
        trace_id = _valid_id(run.get("traceId"), 32) or _derived_id(
            f"{loaded.session_id}/run {number}", 32
        )
        walker = _Walker(trace_id, f"run {number}", events, _producer(run, fallback), seen)
        recording = run.get("recording")
        if isinstance(recording, Mapping):
            walker.recording = recording
        walker.session(run, parent_span_id=None, parent_start_ns=_start_of_file(loaded))
        spans.extend(walker.spans)
    traces: dict[str, TraceRecord] = {}
    for span in spans:
        if span.flags is None and (
            span.parent_span_id is None or (span.trace_id, span.parent_span_id) in seen
        ):
            span.flags = FLAGS_HAS_IS_REMOTE
        traces.setdefault(span.trace_id, TraceRecord(span.trace_id, [])).spans.append(span)
    return list(traces.values())


def resource_attributes(loaded: LoadedFile, service_name: str) -> dict[str, AttributeValue]:
    """The resource of runs recorded without theirs: the service and the session."""
    attributes: dict[str, AttributeValue] = {"service.name": service_name}
    if loaded.session_id:
        attributes[sc.SESSION_ID] = loaded.session_id
    return attributes


def json_text(value: Any) -> str:
    """``value`` as it is shown in an attribute: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _producer(run: Mapping[str, Any], fallback: Producer) -> Producer:
    """The resource and scope a run's root recorded, or ``fallback`` if it recorded none."""
    resource = run.get("resource")
    attributes = resource.get("attributes") if isinstance(resource, Mapping) else None
    if not isinstance(attributes, Mapping):
        return fallback
    scope = run.get("scope")
    if not isinstance(scope, Mapping):
        return Producer(_span_attributes(attributes), fallback.scope_name, fallback.scope_version)
    name = scope.get("name")
    return Producer(
        _span_attributes(attributes),
        name if isinstance(name, str) else "",
        _text(scope.get("version")),
    )


# --- the walk ------------------------------------------------------------------------------------


@dataclass
class _Context:
    """What the spans of one agent run carry besides their own fields (as on the wire)."""

    txn_id: str | None
    origin_txn_id: str | None
    agent_id: str | None


class _Walker:
    def __init__(
        self,
        trace_id: str,
        run_name: str,
        events: Mapping[str, list[dict[str, Any]]],
        producer: Producer,
        seen: set[tuple[str, str]],
    ) -> None:
        self.trace_id = trace_id
        """The run's trace id, for spans rebuilt from the tree."""
        self.run_name = run_name
        self.events = events
        self.producer = producer
        self.seen = seen
        """(trace id, span id) of every span so far, in every run."""
        self.spans: list[SpanRecord] = []
        self.recording: Mapping[str, Any] = {}
        """How the run turned canonical events into span events (its root's ``recording``)."""

    def session(
        self, node: Mapping[str, Any], parent_span_id: str | None, parent_start_ns: int
    ) -> None:
        path = _text(node.get("path")) or "0"
        recorded = self._recorded(node, path, sc.KIND_SESSION, parent_span_id)
        if recorded is not None:
            span_id, start_ns = recorded
        else:
            span_id, start_ns = self._rebuilt_session(node, path, parent_span_id, parent_start_ns)
        context = _Context(
            _text(node.get("txnId")) or _text(node.get("id")),
            _text(node.get("originTxnId")),
            _text(node.get("agentId")),
        )
        for turn in children(node, "turns"):
            self.turn(turn, span_id, start_ns, context)

    def turn(
        self, node: Mapping[str, Any], parent_span_id: str, parent_start_ns: int, context: _Context
    ) -> None:
        path = _text(node.get("path")) or "?"
        recorded = self._recorded(node, path, sc.KIND_TURN, parent_span_id)
        if recorded is not None:
            span_id, start_ns = recorded
        else:
            span_id, start_ns = self._rebuilt_turn(
                node, path, parent_span_id, parent_start_ns, context
            )
        for op in children(node, "ops"):
            self.op(op, span_id, start_ns, context)

    def op(
        self, node: Mapping[str, Any], parent_span_id: str, parent_start_ns: int, context: _Context
    ) -> None:
        path = _text(node.get("path")) or "?"
        kind = _text(node.get("kind")) or sc.KIND_TOOL
        recorded = self._recorded(node, path, kind, parent_span_id)
        if recorded is not None:
            span_id, start_ns = recorded
        else:
            span_id, start_ns = self._rebuilt_op(
                node, path, kind, parent_span_id, parent_start_ns, context
            )
        for child in hosted_sessions(node):
            self.session(child, span_id, start_ns)

    # -- the span as it was sent --------------------------------------------------------------

    def _recorded(
        self, node: Mapping[str, Any], path: str, kind: str, tree_parent: str | None
    ) -> tuple[str, int] | None:
        """Add the span ``node`` recorded as it was sent: (its span id, its start), or ``None``
        if the node has no usable ``span`` (an older file, a span that had no context)."""
        span = node.get("span")
        if not isinstance(span, Mapping):
            return None
        trace_id = _valid_id(span.get("traceId"), 32)
        span_id = _valid_id(span.get("spanId"), 16)
        start_ns = _nanos(span.get("startTimeUnixNano"))
        name = span.get("name")
        if (
            trace_id is None
            or span_id is None
            or start_ns is None
            or not isinstance(name, str)
            or (trace_id, span_id) in self.seen
        ):
            return None
        raw_parent = span.get("parentSpanId")
        # A parent id that is there but unreadable (an edited file): the tree's parent.
        parent_span_id = tree_parent if raw_parent is not None else None
        if isinstance(raw_parent, str):
            parent_span_id = _valid_id(raw_parent, 16) or tree_parent
        end_ns = _nanos(span.get("endTimeUnixNano"))
        status: StatusCode | None = None
        message: str | None = None
        if end_ns is not None:
            end_ns = max(end_ns, start_ns)
            raw_status = span.get("status")
            status = "UNSET"
            if isinstance(raw_status, Mapping):
                code = raw_status.get("code")
                status = next((c for c in _STATUS_CODES if c == code), "UNSET")
                message = _text(raw_status.get("message"))
        attributes = _span_attributes(span.get("attributes"))
        span_kind = span.get("kind")
        self._append(
            SpanRecord(
                trace_id=trace_id,
                span_id=span_id,
                parent_span_id=parent_span_id,
                name=name,
                kind=kind,
                path=path,
                start_ns=start_ns,
                end_ns=end_ns,
                status=status,
                status_message=message if status == "ERROR" else None,
                attributes=attributes,
                producer=self.producer,
                logs=self._span_events(span, span_id, start_ns),
                links=_recorded_links(span),
                span_kind=span_kind.upper() if isinstance(span_kind, str) else "INTERNAL",
                flags=_flags(span.get("flags")),
                dropped={
                    key: count
                    for key in _DROPPED_COUNTS
                    if (count := _flags(span.get(key))) is not None and count > 0
                },
            )
        )
        return span_id, start_ns

    def _span_events(self, span: Mapping[str, Any], span_id: str, start_ns: int) -> list[SpanLog]:
        """The span's events as sent: those the node recorded (logs, reasoning, exceptions)
        and its canonical events, which the node does not store since they follow from the
        session's events (same attributes, the event's own time; see
        formats/session/span_events.py). Merged by time; a log and a canonical event in the
        same millisecond may swap."""
        recorded = _recorded_events(span, start_ns)
        if any(log.name == sc.EVENT_CANONICAL for log in recorded):
            return recorded  # a file that stored them on the span
        # As the session was recorded; a file that does not say: as this process records.
        capture = self.recording.get("captureContent")
        if not isinstance(capture, bool):
            capture = captures(Output.SPAN_EVENT, runtime.settings)
        limit = self.recording.get("maxPayloadBytes")
        if not isinstance(limit, int) or isinstance(limit, bool):
            limit = runtime.settings.max_payload_bytes
        canonical = [
            SpanLog(
                ts_nanoseconds(str(event.get("ts"))) or start_ns,
                sc.EVENT_CANONICAL,
                _span_attributes(span_event_attributes(event, capture, limit)),
            )
            for event in self.events.get(span_id, ())
        ]
        if not canonical:
            return recorded
        return list(heapq.merge(recorded, canonical, key=lambda log: log.timestamp_ns))

    # -- spans rebuilt from the tree (files written before nodes kept their span) -------------

    def _rebuilt_session(
        self, node: Mapping[str, Any], path: str, parent_span_id: str | None, parent_start_ns: int
    ) -> tuple[str, int]:
        start_ns = _start(node, parent_start_ns)
        end_ns = _end(node, start_ns)
        context = _Context(
            _text(node.get("txnId")) or _text(node.get("id")),
            _text(node.get("originTxnId")),
            _text(node.get("agentId")),
        )
        agent = _text(node.get("agentName")) or context.agent_id or "agent"
        attributes: dict[str, AttributeValue] = {}
        _put(attributes, sc.KIND, sc.KIND_SESSION)
        _put(attributes, sc.PATH, path)
        _put(attributes, sc.GEN_AI_OPERATION_NAME, sc.OP_INVOKE_AGENT)
        _put(attributes, sc.GEN_AI_AGENT_NAME, node.get("agentName"))
        _put(attributes, sc.GEN_AI_AGENT_ID, context.agent_id)
        _put(attributes, sc.GEN_AI_CONVERSATION_ID, node.get("sessionId"))
        _put(attributes, sc.SESSION_ID, node.get("sessionId"))
        _put(attributes, sc.CALL_PATH, node.get("callPath"))
        _put(attributes, sc.TXN_PARENT, node.get("parentTxnId"))
        _put_context(attributes, context)
        extra = node.get("attributes")
        if isinstance(extra, Mapping):
            for key, value in extra.items():
                if key == "ingress" and isinstance(value, Mapping):
                    _flatten(attributes, sc.INGRESS_PREFIX.rstrip("."), value)
                elif isinstance(key, str) and key.startswith("agenttrace."):
                    _put(attributes, key, value)
        success = node.get("success")
        failed = False
        if end_ns is not None and isinstance(success, bool):
            failed = not success
            _put(attributes, sc.STATUS, sc.STATUS_FAILED if failed else sc.STATUS_OK)
        _put(attributes, sc.LATENCY_MS, node.get("latencyMs"))
        span_id = self._add(
            node.get("spanId"),
            path,
            parent_span_id,
            sc.SPAN_SESSION.format(name=agent),
            sc.KIND_SESSION,
            start_ns,
            end_ns,
            _text(node.get("error")) if failed else None,
            failed,
            attributes,
        )
        return span_id, start_ns

    def _rebuilt_turn(
        self,
        node: Mapping[str, Any],
        path: str,
        parent_span_id: str,
        parent_start_ns: int,
        context: _Context,
    ) -> tuple[str, int]:
        start_ns = _start(node, parent_start_ns)
        index = node.get("index")
        attributes: dict[str, AttributeValue] = {}
        _put(attributes, sc.KIND, sc.KIND_TURN)
        _put(attributes, sc.PATH, path)
        _put(attributes, sc.TURN_INDEX, index)
        _put_context(attributes, context)
        extra = node.get("attributes")
        if isinstance(extra, Mapping):
            _put(attributes, sc.IMPLICIT, extra.get(sc.IMPLICIT))
        # The opTree keeps no status for a turn (its ops and session have one): none is made up.
        span_id = self._add(
            node.get("id"),
            path,
            parent_span_id,
            sc.SPAN_TURN.format(index=index if index is not None else "?"),
            sc.KIND_TURN,
            start_ns,
            _end(node, start_ns),
            None,
            False,
            attributes,
        )
        return span_id, start_ns

    def _rebuilt_op(
        self,
        node: Mapping[str, Any],
        path: str,
        kind: str,
        parent_span_id: str,
        parent_start_ns: int,
        context: _Context,
    ) -> tuple[str, int]:
        name = _text(node.get("name")) or kind
        is_llm = kind == sc.KIND_LLM
        start_ns = _start(node, parent_start_ns)
        end_ns = _end(node, start_ns)
        attributes: dict[str, AttributeValue] = {}
        _put(attributes, sc.KIND, kind)
        _put(attributes, sc.PATH, path)
        if is_llm:
            _put(attributes, sc.GEN_AI_OPERATION_NAME, sc.OP_CHAT)
            _put(attributes, sc.GEN_AI_REQUEST_MODEL, node.get("name"))
        else:
            _put(attributes, sc.GEN_AI_OPERATION_NAME, sc.OP_EXECUTE_TOOL)
            _put(attributes, sc.GEN_AI_TOOL_NAME, node.get("name"))
        _put_context(attributes, context)
        _put_accounting(attributes, node.get("accounting"))
        raw_status = node.get("status")
        failed = False
        if end_ns is not None and raw_status in (sc.STATUS_OK, sc.STATUS_FAILED):
            failed = raw_status == sc.STATUS_FAILED
            _put(attributes, sc.STATUS, raw_status)
        _put(attributes, sc.LATENCY_MS, node.get("latencyMs"))
        extra = node.get("attributes")
        if isinstance(extra, Mapping):
            _put(attributes, sc.ERROR_TYPE, extra.get("errorType"))
            _put(attributes, sc.IMPLICIT, extra.get(sc.IMPLICIT))
        for side, llm_key, tool_key in (
            ("request", sc.GEN_AI_INPUT_MESSAGES, sc.GEN_AI_TOOL_CALL_ARGUMENTS),
            ("response", sc.GEN_AI_OUTPUT_MESSAGES, sc.GEN_AI_TOOL_CALL_RESULT),
        ):
            entry = node.get(side)
            if isinstance(entry, Mapping) and "payload" in entry:
                _put(attributes, llm_key if is_llm else tool_key, json_text(entry["payload"]))
        operation = sc.SPAN_LLM.format(model=name) if is_llm else sc.SPAN_TOOL.format(name=name)
        span_id = self._add(
            node.get("opId"),
            path,
            parent_span_id,
            operation,
            kind,
            start_ns,
            end_ns,
            _text(node.get("error")) if failed else None,
            failed,
            attributes,
            logs=[*_node_logs(node, start_ns), *_reasoning(node, start_ns)],
        )
        return span_id, start_ns

    def _add(
        self,
        raw_id: Any,
        path: str,
        parent_span_id: str | None,
        name: str,
        kind: str,
        start_ns: int,
        end_ns: int | None,
        error: str | None,
        failed: bool,
        attributes: dict[str, AttributeValue],
        logs: list[SpanLog] | None = None,
    ) -> str:
        """Add a span rebuilt from the tree. Its status is what agenttrace sets on a span:
        ERROR with the error when it failed, else left UNSET."""
        span_id = _valid_id(raw_id, 16)
        if span_id is None or (self.trace_id, span_id) in self.seen:
            # A node without a usable id (or a duplicate) still needs one to hang children on;
            # derived from its place, so exporting twice gives the same document.
            span_id = _derived_id(f"{self.trace_id}/{self.run_name}/{path}/{len(self.spans)}", 16)
        all_logs = [*(logs or []), *_canonical_logs(self.events.get(span_id, ()), start_ns)]
        all_logs.sort(key=lambda log: log.timestamp_ns)
        status: StatusCode | None = None
        if end_ns is not None:
            status = "ERROR" if failed else "UNSET"
        self._append(
            SpanRecord(
                trace_id=self.trace_id,
                span_id=span_id,
                parent_span_id=parent_span_id,
                name=name,
                kind=kind,
                path=path,
                start_ns=start_ns,
                end_ns=end_ns,
                status=status,
                status_message=error if status == "ERROR" else None,
                attributes=attributes,
                producer=self.producer,
                logs=all_logs,
            )
        )
        return span_id

    def _append(self, span: SpanRecord) -> None:
        self.seen.add((span.trace_id, span.span_id))
        if span.end_ns is None:
            span.warnings.append(UNFINISHED_WARNING)
            span.attributes["agenttrace.unfinished"] = True
        self.spans.append(span)


def _recorded_events(span: Mapping[str, Any], start_ns: int) -> list[SpanLog]:
    """A recorded span's events, in the order they were added (the order they were sent)."""
    return [
        SpanLog(
            _nanos(event.get("timeUnixNano")) or start_ns,
            _text(event.get("name")) or "",
            _span_attributes(event.get("attributes")),
        )
        for event in children(span, "events")
    ]


def _recorded_links(span: Mapping[str, Any]) -> list[SpanLink]:
    links = []
    for link in children(span, "links"):
        trace_id = _valid_id(link.get("traceId"), 32)
        span_id = _valid_id(link.get("spanId"), 16)
        if trace_id is not None and span_id is not None:
            attributes = _span_attributes(link.get("attributes"))
            links.append(SpanLink(trace_id, span_id, attributes, _flags(link.get("flags"))))
    return links


# --- times ---------------------------------------------------------------------------------------


def _start_of_file(loaded: LoadedFile) -> int:
    created = loaded.meta.get("createdAt")
    return _ms_to_ns(created) or 0


def _ms_to_ns(value: Any) -> int | None:
    """A time in ms as a file records it, in ns: ``None`` if it is not a number or, in ns,
    outside OTLP's 64 bits (a hostile file's ``1e300``)."""
    milliseconds = finite_number(value)
    if milliseconds is None or not -_NS_LIMIT < milliseconds * _NS_PER_MS < _NS_LIMIT:
        return None
    if isinstance(value, int):
        return value * _NS_PER_MS  # exact: a float would round a large time
    return round(milliseconds * _NS_PER_MS)


def _nanos(value: Any) -> int | None:
    """A time in ns since the epoch as the span recorded it (a positive 64-bit integer)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < _NS_LIMIT:
        return None
    return value


def _flags(value: Any) -> int | None:
    """Recorded OTLP flags or counts (32-bit unsigned), if any."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 32:
        return None
    return value


def _start(node: Mapping[str, Any], fallback_ns: int) -> int:
    started = _ms_to_ns(node.get("startedAt"))
    return started if started is not None and started > 0 else fallback_ns


def _end(node: Mapping[str, Any], start_ns: int) -> int | None:
    """The end of a node, or ``None`` if it never ended.

    The tree keeps start and end in whole milliseconds but the latency to the nanosecond (it is
    the span's own end minus start), so start + latency keeps sub-millisecond tools from
    collapsing to a zero duration.
    """
    ended = _ms_to_ns(node.get("endedAt"))
    if ended is None:
        return None
    latency = _ms_to_ns(node.get("latencyMs"))
    if latency is not None and latency >= 0:
        return start_ns + latency
    return max(ended, start_ns)


# --- attributes ----------------------------------------------------------------------------------


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _valid_id(value: Any, length: int) -> str | None:
    if not isinstance(value, str):
        return None
    lowered = value.lower()
    if len(lowered) != length or not _HEX.match(lowered) or not lowered.strip("0"):
        return None
    return lowered


def _derived_id(seed: str, length: int) -> str:
    return hashlib.sha256(seed.encode("utf-8")).hexdigest()[:length]


def _value(value: Any) -> AttributeValue | None:
    """An attribute value as OTel allows them: scalars and lists of scalars; else JSON text."""
    if value is None:
        return None
    if isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)) and value and all(isinstance(item, str) for item in value):
        return list(value)  # OTel arrays are of one type: only lists of strings occur here
    return json_text(value)


def _span_value(value: Any) -> AttributeValue | None:
    """A recorded attribute value as it was on the span: a scalar, or a list of scalars of one
    type. Anything else was never on a span (an edited file): a mixed list is shown as JSON
    text, anything else is left out (``None``)."""
    if isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        items: list[Scalar] = []
        for item in value:
            if not isinstance(item, (str, bool, int, float)) or type(item) is not type(value[0]):
                return json_text(value)
            items.append(item)
        return items
    return None


def _span_attributes(attributes: Any) -> dict[str, AttributeValue]:
    """Recorded attributes (a JSON object) as they were on the span, in their order."""
    recorded: dict[str, AttributeValue] = {}
    if not isinstance(attributes, Mapping):
        return recorded
    for key, value in attributes.items():
        converted = _span_value(value)
        if isinstance(key, str) and converted is not None:
            recorded[key] = converted
    return recorded


def _put(attributes: dict[str, AttributeValue], key: str, value: Any) -> None:
    converted = _value(value)
    if converted is not None:
        attributes[key] = converted


def _put_context(attributes: dict[str, AttributeValue], context: _Context) -> None:
    _put(attributes, sc.TXN_ID, context.txn_id)
    _put(attributes, sc.TXN_ORIGIN, context.origin_txn_id)
    _put(attributes, sc.AGENT_ID, context.agent_id)


def _flatten(attributes: dict[str, AttributeValue], prefix: str, value: Mapping[str, Any]) -> None:
    for key, item in value.items():
        name = f"{prefix}.{key}"
        if isinstance(item, Mapping):
            _flatten(attributes, name, item)
        else:
            _put(attributes, name, item)


_TOKEN_ATTRIBUTES = (
    ("inputTokens", sc.GEN_AI_USAGE_INPUT_TOKENS),
    ("outputTokens", sc.GEN_AI_USAGE_OUTPUT_TOKENS),
    ("cacheReadInputTokens", sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS),
    ("cacheWriteInputTokens", sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS),
    ("reasoningTokens", sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS),
)


def _put_accounting(attributes: dict[str, AttributeValue], accounting: Any) -> None:
    """Tokens, cost and characters of an op: summed over its accounting entries (one per end
    of its span, so normally one), the descriptive fields taken from the last."""
    if not isinstance(accounting, list):
        return
    entries = [entry for entry in accounting if isinstance(entry, Mapping)]
    if not entries:
        return
    totals: dict[str, int] = {}
    cost: float | None = None
    chars: dict[str, int] = {}
    for entry in entries:
        tokens = entry.get("tokens")
        if isinstance(tokens, Mapping):
            for field_name, key in _TOKEN_ATTRIBUTES:
                count = tokens.get(field_name)
                if isinstance(count, int) and not isinstance(count, bool):
                    totals[key] = totals.get(key, 0) + count
        value = finite_number(entry.get("costUsd"))
        if value is not None:
            cost = (cost or 0.0) + value
        for field_name, key in (
            ("charactersIn", sc.TOOL_CHARS_IN),
            ("charactersOut", sc.TOOL_CHARS_OUT),
        ):
            count = entry.get(field_name)
            if isinstance(count, int) and not isinstance(count, bool):
                chars[key] = chars.get(key, 0) + count
    last = entries[-1]
    _put(attributes, sc.GEN_AI_PROVIDER_NAME, last.get("provider"))
    _put(attributes, sc.GEN_AI_RESPONSE_MODEL, last.get("actualModel"))
    _put(attributes, sc.ATTEMPT, last.get("attempt"))
    attributes.update(totals)
    attributes.update(chars)
    if cost is not None:
        attributes[sc.COST_USD] = cost


# --- logs ----------------------------------------------------------------------------------------


def _node_logs(node: Mapping[str, Any], start_ns: int) -> Iterator[SpanLog]:
    for entry in children(node, "logs"):
        attributes: dict[str, AttributeValue] = {}
        _put(attributes, sc.LOG_LEVEL, entry.get("level"))
        _put(attributes, sc.LOG_MESSAGE, entry.get("message"))
        _put(attributes, sc.PATH, entry.get("path"))
        if "details" in entry:
            _put(attributes, sc.LOG_DETAILS, json_text(entry["details"]))
        yield SpanLog(_ms_to_ns(entry.get("ts")) or start_ns, sc.EVENT_LOG, attributes)


def _reasoning(node: Mapping[str, Any], start_ns: int) -> Iterator[SpanLog]:
    reasoning = node.get("reasoning")
    if not isinstance(reasoning, Mapping):
        return
    for chunk in children(reasoning, "chunks"):
        attributes: dict[str, AttributeValue] = {}
        _put(attributes, sc.REASONING_TEXT, chunk.get("text"))
        yield SpanLog(_ms_to_ns(chunk.get("ts")) or start_ns, sc.EVENT_REASONING, attributes)


def _events_by_span(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    by_span: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        span_id = _valid_id(event.get("span_id"), 16)
        if span_id is not None:
            by_span.setdefault(span_id, []).append(event)
    return by_span


def _canonical_logs(events: Iterable[Mapping[str, Any]], start_ns: int) -> Iterator[SpanLog]:
    """The session's canonical events recorded on a span, as the span events they were on the
    wire, so a trace viewer shows who said what where. The events were redacted and capped
    when the document was loaded (:func:`load`: the exports' boundary)."""
    for event in events:
        attributes: dict[str, AttributeValue] = {}
        for key, attribute in sc.EVENT_FIELD_ATTRIBUTES:
            _put(attributes, attribute, event.get(key))
        content = event.get("content")
        if isinstance(content, str):
            attributes[sc.EVENT_CONTENT] = content
        calls = event.get("tool_calls")
        if calls:
            attributes[sc.EVENT_TOOL_CALLS] = json_text(calls)
        yield SpanLog(iso_nanoseconds(event.get("ts")) or start_ns, sc.EVENT_CANONICAL, attributes)
