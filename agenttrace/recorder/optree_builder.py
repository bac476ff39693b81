"""The opTree (docs/session-file.md), built live from lifecycle records: ``SessionNode`` →
``TurnNode`` → ``OperationNode``, with the sub-agent runs an op hosted (``childSession``, or
``childSessions`` once it hosted several), logs, accounting, request/response and reasoning.

Nodes are plain JSON-ready dicts. A node exists as soon as its scope starts (``startedAt`` only,
"in progress") and is completed when it ends. Each scope's place comes from its path label, so
the tree is right whatever order scopes end in. Every node also keeps its span exactly as it was
sent (``span``: ids, times in ns, kind, status, attributes, events), and a run's root keeps the
resource, so an export of the session file reproduces what went over OTLP.

The builder is a sink of our processor and runs on its background worker. Memory stays bounded
by what is running, not by what ran: a node that ends is serialised at once (or, if some of
its children still run, when the last of them ends) into a :class:`Fragment` in its parent's
place (JSON text, compacted into the session's spool of compressed gzip members as it
accumulates), and a run's tree is dropped once its root and everything in it have ended (the
session-file sink, which comes after this one among the processor's sinks, keeps the run it saw
start). A root that ends before something in it does (a tool left running in a thread, a
framework that ends an agent before the handoff it made) keeps its run open until the last of
them ends: a late record of a run still lands in its tree. Only while an
``on_optree`` subscriber
listens are finished nodes kept whole, since the subscriber is handed the tree.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import msgspec

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.later import recorded_text
from agenttrace._internal.redact import scrub_json_text
from agenttrace.formats.compact_json import compact_json
from agenttrace.formats.ledger import accounting_entry
from agenttrace.formats.session.schema import (
    LOG_SOURCE_AGENTTRACE,
    LOG_SOURCE_END,
    MAX_NODE_LOGS,
    MAX_TURN_PROMPTS,
    AccountingEntry,
)
from agenttrace.formats.session.spool import Piece, Ref, Spool
from agenttrace.model.amounts import latency_written
from agenttrace.model.lifecycle import Ended, EventLogged, Logged, SpanEvent, Started
from agenttrace.model.outcome import OpOutcome
from agenttrace.recorder.bare_outcome import bare_outcome
from agenttrace.recorder.op_lines import end_lines
from agenttrace.recorder.sink import RecordwiseSink

Node = dict[str, Any]


_RUN_IDS = ("originTxnId", "txnId", "parentTxnId")
"""The ids of its agent run a log entry carries (the accounting entries' own)."""


def _ms(nanoseconds: int) -> int:
    return nanoseconds // 1_000_000


COMPACT_BYTES = 64 << 10
"""Finished children whose JSON adds up to this much are compressed into the spool together."""
SMALL_BYTES = 4 << 10
"""A finished sub-agent run bigger than this is compressed into the spool on its own."""
REF_WEIGHT = 1 << 10
"""What a ref to the spool in a finished child counts toward :data:`COMPACT_BYTES`: a ref costs
memory for the session's life however little JSON is left beside it, so an op that hosted many
compressed sub-agent runs merges them too (into one ref per merge)."""


class Fragment:
    """A finished node (or several consecutive finished siblings), serialised: JSON pieces,
    ``bytes`` or refs to compressed members in the session's spool."""

    __slots__ = ("pieces", "raw")

    def __init__(self, pieces: list[Piece]) -> None:
        self.pieces = pieces
        if len(pieces) == 1 and type(pieces[0]) is bytes:  # a folded op (see serialize)
            self.raw = len(pieces[0])
        else:
            self.raw = sum(len(p) for p in pieces if isinstance(p, bytes))
        """Bytes of it not yet compressed."""


class RunTree:
    """One run (a root agent run and everything under it): its open nodes by path label."""

    __slots__ = (
        "encoded",
        "ended",
        "fragment",
        "nodes",
        "open_children",
        "origin",
        "parents",
        "positions",
        "raw",
        "root",
        "session",
        "session_id",
        "spool",
        "waiting",
    )

    def __init__(self, session_id: str, origin: str, session: Any = None) -> None:
        self.session_id = session_id
        self.origin = origin
        self.session = session
        """The ``Session`` the run records into."""
        self.nodes: dict[str, Node] = {}
        self.encoded: dict[str, bytes] = {}
        """Per ended op: its accounting entry as JSON, encoded once for the node and the
        ledger line alike."""
        self.parents: dict[str, str | None] = {}
        """Per open node: its parent's label."""
        self.positions: dict[str, str] = {}
        """Per open node: ``session``, ``turn`` or ``op`` (what it is in the tree)."""
        self.root: Node | None = None
        self.spool: Spool | None = None
        """The session's spool, where finished parts of the tree are compressed."""
        self.raw: dict[str, int] = {}
        """Per open node: bytes of its finished children not yet compressed."""
        self.ended = False
        """Its root has ended (the run may still wait for what runs in it)."""
        self.fragment: list[Piece] | None = None
        """The whole run, serialised (refs into the spool), once its root and everything in
        it have ended: the run is over."""
        self.open_children: dict[str, int] = {}
        """Per open node: how many of its children have not ended yet."""
        self.waiting: set[str] = set()
        """Nodes that ended before all their children did (a turn whose pool task or thread
        still runs): folded into their parent when the last child ends."""

    def place(self, label: str, node: Node, parent_label: str | None, position: str) -> None:
        """Put ``node`` under its parent."""
        self.nodes[label] = node
        self.parents[label] = parent_label
        self.positions[label] = position
        if parent_label is None:
            self.root = node
            return
        parent = self.nodes.get(parent_label)
        if parent is None:
            return  # its parent is not ours (a scope started before agenttrace was set up)
        self.open_children[parent_label] = self.open_children.get(parent_label, 0) + 1
        if position == "turn":
            parent.setdefault("turns", []).append(node)
        elif position == "op":
            parent.setdefault("ops", []).append(node)
        else:
            _host(parent, node)
            parent["kind"] = "session"

    def session_of(self, label: str) -> Node | None:
        """The SessionNode an open op or turn belongs to."""
        while label is not None and self.positions.get(label) != "session":
            label = self.parents.get(label)  # type: ignore[assignment]
        return self.nodes.get(label) if label is not None else None


def _host(op: Node, run: Node) -> None:
    """Put the sub-agent ``run`` under ``op``: as ``childSession`` if it is the op's first (the
    opTree's own form, docs/session-file.md), else every run the op hosted as ``childSessions``.
    Each run is in the tree once: a run under both keys is written twice, and a chain of sub-agents
    d deep 2^d times."""
    hosted = op.get("childSessions")
    if hosted is not None:
        hosted.append(run)
    elif "childSession" in op:
        op["childSessions"] = [op.pop("childSession"), run]
    else:
        op["childSession"] = run


class OpTreeSink(RecordwiseSink):
    """Builds every live run's opTree and tells ``on_optree`` subscribers when it changes."""

    def __init__(
        self,
        resource: Mapping[str, Any] | None = None,
        scope: Mapping[str, Any] | None = None,
        spool_dir: Path | None = None,
        recording: Mapping[str, Any] | None = None,
    ) -> None:
        self.runs: dict[str, RunTree] = {}  # origin txn id -> run, while it is live
        self.spool_dir = spool_dir or Path.cwd()
        """Where spools move once they outgrow memory (the sessions directory)."""
        self._spools: weakref.WeakKeyDictionary[Any, Spool] = weakref.WeakKeyDictionary()
        self.resource = dict(resource or {})
        """The resource the spans were sent with (``service.name``, ...), kept on each run."""
        self.scope = dict(scope or {})
        """The instrumentation scope of the spans (``name``, ``version``)."""
        self.recording = dict(recording or {})
        """How canonical events became span events (``captureContent``, ``maxPayloadBytes``)."""
        self._subscribers: list[_Subscriber] = []
        self._lock = threading.Lock()

    # -- subscriptions ------------------------------------------------------------------------

    def subscribe(
        self, callback: Callable[[Node], None], min_interval: float
    ) -> Callable[[], None]:
        """Call ``callback(run_root)`` as the tree changes, at most every ``min_interval`` s
        (and always when a run ends); returns the unsubscribe."""
        subscriber = _Subscriber(callback, min_interval)
        with self._lock:
            self._subscribers = [*self._subscribers, subscriber]

        def unsubscribe() -> None:
            with self._lock:
                self._subscribers = [s for s in self._subscribers if s is not subscriber]

        return unsubscribe

    # -- the sink -----------------------------------------------------------------------------

    handlers: ClassVar[dict[type, str]] = {
        Started: "_started",
        Ended: "_ended",
        Logged: "_logged",
        EventLogged: "_event_logged",
    }

    def _started(self, record: Started) -> None:
        run = self.runs.get(record.origin)
        if run is None:
            if record.label != "0":
                return  # a run whose root we never saw
            session_id = record.attributes.get(sc.SESSION_ID, record.origin)
            run = self.runs[record.origin] = RunTree(str(session_id), record.origin, record.session)
            run.spool = self.spool_for(record.session)
        position = _POSITIONS.get(record.kind, "op")
        node = _new_node(record, position)
        if record.label == "0":
            node["resource"] = {"attributes": dict(self.resource)}
            node["scope"] = dict(self.scope)
            # What the run's canonical span events were built with (an export rebuilds them).
            node["recording"] = dict(self.recording)
        run.place(record.label, node, record.parent, position)
        self._offer(run, final=False)

    def _logged(self, record: Logged) -> None:
        attributes = record.attributes
        ours = sc.LOG_SOURCE in attributes  # agenttrace's own warning: a record, no span event
        node = self._node(record.origin, record.label)
        if node is None and ours:
            # About an op whose end was written already (a sink's warning on the worker): on
            # the nearest node still open, its path saying where it happened.
            node = self._open_ancestor(record.origin, record.label)
        if node is None:
            return
        if not ours:
            _add_span_event(node, (record.name, record.time_ns, attributes))
        if record.name == sc.EVENT_LOG:
            entry: Node = {
                "ts": _ms(record.time_ns),
                "level": attributes.get(sc.LOG_LEVEL),
                "message": attributes.get(sc.LOG_MESSAGE),
                "path": attributes.get(sc.PATH),
            }
            if sc.LOG_DETAILS in attributes:
                entry["details"] = attributes[sc.LOG_DETAILS]
            source = attributes.get(sc.LOG_SOURCE)
            if isinstance(source, str):
                entry["source"] = source
            _add_log(self.runs[record.origin], str(node.get("path", record.label)), node, entry)
        elif record.name == sc.EVENT_REASONING:
            reasoning = node.setdefault("reasoning", {"chunks": []})
            parts = record.reasoning
            if parts is None:  # a record made by hand: its span event's text is its chunk
                reasoning["chunks"].append(
                    {"text": attributes.get(sc.REASONING_TEXT, ""), "ts": _ms(record.time_ns)}
                )
                return
            # As they came (a stream's deltas each), bounded by max_reasoning_bytes only.
            reasoning["chunks"].extend({"text": text, "ts": _ms(ts)} for text, ts in parts.chunks)
            if parts.final is not None:
                reasoning["final"] = parts.final

    def _event_logged(self, record: EventLogged) -> None:
        if record.origin is None or record.label is None:
            return
        run = self.runs.get(record.origin)
        if run is None:
            return
        if run.session is None:
            run.session = record.session
        # Its span event is not kept: it follows from the event (see tracing/recording.py).

    def _ended(self, record: Ended) -> None:
        run = self.runs.get(record.origin)
        if run is None:
            return
        node = run.nodes.get(record.label)
        if node is None:
            return
        subscribers = self._subscribers  # one list for the whole end (it is replaced, not changed)
        keep = bool(subscribers)  # a subscriber is handed whole trees
        started_ns, started = node["span"]["startTimeUnixNano"], node["span"]["attributes"]
        entry = _complete(node, record, run, keep)
        # What the console says of its end, at its most detailed level, whatever it prints.
        for level, text in end_lines(record, started_ns, started, node["span"]["attributes"]):
            line: Node = {
                "ts": _ms(record.ended_ns),
                "level": level,
                "message": scrub_json_text(text),  # as the console's boundary scrubs it
                "path": record.label,
                "source": LOG_SOURCE_END,
            }
            _add_log(run, record.label, node, line)
        if node.get("kind") == sc.KIND_LLM:
            parent = run.parents.get(record.label)
            if parent is not None and run.positions.get(parent) == "turn":
                turn = run.nodes.get(parent)
                if turn is not None:
                    payloads = record.payloads or {}
                    describe_turn(turn, node, recorded_text(payloads.get(sc.REQUEST_PROMPTS)))
        if entry is not None:
            # The bytes the ledger and the stream have, when the scope made them.
            accounted = record.accounted
            run.encoded[record.label] = accounted.entry_json if accounted else _json(entry)
        if record.label == "0":
            run.ended = True
        else:
            _settle(run, record.label, keep)
        if not run.ended:
            self._offer(run, final=False, subscribers=subscribers)
        elif run.open_children.get("0"):
            # Its root ended before everything in it did (work left running in a thread, an
            # agent a framework ends before its handoff): the run stays open, so the late ends
            # and the sub-agent runs still to come land in it, as they do in the spans.
            self._offer(run, final=True, subscribers=subscribers)
        else:
            run.fragment = _compress(run, serialize(run.root or node))
            self._offer(run, final=True, subscribers=subscribers)
            # Released: the session-file sink, after this one, kept the run since its start.
            del self.runs[record.origin]

    # -- helpers ------------------------------------------------------------------------------

    def _node(self, origin: str, label: str) -> Node | None:
        run = self.runs.get(origin)
        return run.nodes.get(label) if run is not None else None

    def _open_ancestor(self, origin: str, label: str) -> Node | None:
        """The nearest node above ``label`` (``1.2`` → ``1`` → ``0``) still open in its run."""
        run = self.runs.get(origin)
        while run is not None and "." in label:
            label = label.rsplit(".", 1)[0]
            node = run.nodes.get(label)
            if node is not None:
                return node
        return run.nodes.get("0") if run is not None and label != "0" else None

    def _offer(
        self, run: RunTree, final: bool, subscribers: list[_Subscriber] | None = None
    ) -> None:
        """Hand the run's tree to the ``on_optree`` subscribers (``final``: its root ended)."""
        if run.root is None:
            return
        for subscriber in self._subscribers if subscribers is None else subscribers:
            subscriber.offer(run.root, final)

    def spool_for(self, session: Any) -> Spool:
        """The spool of ``session`` (one per session object; a fresh one for ``None``)."""
        if session is None:
            return Spool(self.spool_dir)
        spool = self._spools.get(session)
        if spool is None:
            spool = self._spools[session] = Spool(self.spool_dir)
        return spool


class _Subscriber:
    def __init__(self, callback: Callable[[Node], None], min_interval: float) -> None:
        self.callback = callback
        self.min_interval = min_interval
        self.last: float | None = None

    def offer(self, root: Node, final: bool) -> None:
        now = time.monotonic()
        if not final and self.last is not None and now - self.last < self.min_interval:
            return
        self.last = now
        try:
            self.callback(root)
        except Exception as exc:  # a subscriber's bug must not stop the others
            report_internal_error("onOpTree subscriber", exc)


# --- serialising -------------------------------------------------------------------------------

_CHILD_KEYS = frozenset({"turns", "ops", "childSessions", "childSession"})
_CHILD_KEYS_AND_ACCOUNTING = _CHILD_KEYS | {"accounting"}


_json = compact_json


def serialize(node: Node, accounting: bytes | None = None, folded: bool = False) -> list[Piece]:
    """``node`` as JSON pieces; finished children are their :class:`Fragment`'s pieces.

    The node's own fields go through :func:`compact_json` (in C); its children lists come
    last.
    ``accounting``: the node's (one) accounting entry, already encoded.
    ``folded``: the node is being folded (:func:`_fold`), so nothing reads it after: its
    accounting is taken out of it rather than the node copied without it.
    """
    if accounting is not None and len(node.get("accounting", ())) == 1:
        if folded and _CHILD_KEYS.isdisjoint(node):  # an op that hosted no run: a leaf
            del node["accounting"]
            return [_json(node)[:-1] + b',"accounting":[' + accounting + b"]}"]  # one piece
        head = _json({k: v for k, v in node.items() if k not in _CHILD_KEYS_AND_ACCOUNTING})
        pieces: list[Piece] = [head[:-1] + b',"accounting":[' + accounting + b"]"]
    else:
        head = _json({k: v for k, v in node.items() if k not in _CHILD_KEYS})
        pieces = [head[:-1]]  # the object left open for the children
    for key in ("turns", "ops"):
        children = node.get(key)
        if children is not None:
            pieces.append(b',"' + key.encode() + b'":[')
            _extend(pieces, children)
            pieces.append(b"]")
    first = node.get("childSession")  # the op hosted one sub-agent run (see _host)
    if first is not None:
        pieces.append(b',"childSession":')
        _extend(pieces, [first])
    hosted = node.get("childSessions")  # it hosted several
    if hosted:
        pieces.append(b',"childSessions":[')
        _extend(pieces, hosted)
        pieces.append(b"]")
    pieces.append(b"}")
    return pieces


def _extend(pieces: list[Piece], children: list[Any]) -> None:
    for index, child in enumerate(children):
        if index:
            pieces.append(b",")
        if isinstance(child, Fragment):
            pieces.extend(child.pieces)
        else:
            pieces.extend(serialize(child))


def _settle(run: RunTree, label: str, keep: bool) -> None:
    """The ended node at ``label`` leaves the open tree (folded into its parent unless ``keep``)
    once its children have ended too: one that outlives it (work handed to a thread or a task
    that is still running) still finds it open, and its end is recorded in it."""
    if run.open_children.get(label):
        run.waiting.add(label)
        _builtin_accounting(run.nodes.get(label))  # it stays in the tree as a node
        return
    run.open_children.pop(label, None)
    parent_label = run.parents.get(label)
    node = run.nodes.get(label)
    if not keep and node is not None:
        _fold(run, label, node)
    if parent_label is None or parent_label not in run.open_children:
        return
    run.open_children[parent_label] -= 1
    if parent_label in run.waiting and not run.open_children[parent_label]:
        run.waiting.discard(parent_label)
        _settle(run, parent_label, keep)


def _builtin_accounting(node: Node | None) -> None:
    """An ended op node that stays in the tree: its accounting entry as plain JSON values, as
    the tree has them (:func:`_complete` leaves the struct to a node folded at once)."""
    accounting = node.get("accounting") if node is not None else None
    if accounting:
        accounting[:] = [
            msgspec.to_builtins(e) if isinstance(e, msgspec.Struct) else e for e in accounting
        ]


def _fold(run: RunTree, label: str, node: Node) -> None:
    """Replace the ended ``node`` in its parent by its serialised form, and compress the
    parent's finished children once they add up (see :data:`COMPACT_BYTES`)."""
    parent_label = run.parents.pop(label, None)
    position = run.positions.pop(label, "op")
    accounting = run.encoded.pop(label, None)
    run.nodes.pop(label, None)
    run.raw.pop(label, None)
    parent = run.nodes.get(parent_label) if parent_label is not None else None
    if parent is None:
        return
    key = _CHILD_LIST[position]
    hosting = key == "childSessions"
    alone = hosting and parent.get("childSession") is node  # the op's only sub-agent run
    siblings: list[Any] = parent.get(key) or []
    if not alone and not siblings:
        return
    fragment = Fragment(serialize(node, accounting, folded=True))
    if hosting and run.spool is not None and fragment.raw > SMALL_BYTES:
        fragment = Fragment(list(run.spool.compress(fragment.pieces)))  # a whole sub-agent run
    if alone:
        parent["childSession"] = fragment
    else:
        for index in range(len(siblings) - 1, -1, -1):
            if siblings[index] is node:
                siblings[index] = fragment
                break
    refs = sum(1 for piece in fragment.pieces if type(piece) is Ref)
    raw = run.raw.get(parent_label, 0) + fragment.raw + refs * REF_WEIGHT  # type: ignore[arg-type]
    if raw < COMPACT_BYTES or run.spool is None or alone:
        run.raw[parent_label] = raw  # type: ignore[index]
        return
    run.raw[parent_label] = 0  # type: ignore[index]
    parent[key] = _merge(run.spool, siblings)


def _merge(spool: Spool, children: list[Any]) -> list[Any]:
    """``children`` with each run of consecutive fragments packed into one ref (its pieces
    start with no separator; the separators between its members are inside it). A run's first
    fragment that is one ref already (the last merge's) stays as it is: packing it again would
    copy the whole of it on every merge. So a node keeps a ref per merge (per
    :data:`COMPACT_BYTES` of its children's JSON), not one per child it ever had."""
    merged: list[Any] = []
    run_: list[Fragment] = []

    def close() -> None:
        if not run_:
            return
        first = run_[0].pieces
        if len(run_) > 1 and len(first) == 1 and isinstance(first[0], Ref):
            merged.append(run_.pop(0))
        pieces: list[Piece] = []
        for index, fragment in enumerate(run_):
            if index:
                pieces.append(b",")
            pieces.extend(fragment.pieces)
        merged.append(Fragment([spool.pack(pieces)]))
        run_.clear()

    for child in children:
        if isinstance(child, Fragment):
            run_.append(child)
        else:
            close()
            merged.append(child)
    close()
    return merged


def _compress(run: RunTree, pieces: list[Piece]) -> list[Piece]:
    if run.spool is None:
        return pieces
    return list(run.spool.compress(pieces))


# --- logs ---------------------------------------------------------------------------------------


def _add_log(run: RunTree, label: str, node: Node, entry: Node) -> None:
    """Put ``entry`` on ``node`` with its run's ids (so a log read on its own, as in serve's
    flat list, says whose it is), within :data:`MAX_NODE_LOGS`: the last place says how many
    more there were."""
    owner = run.session_of(label)
    if owner is not None:
        for key in _RUN_IDS:
            entry[key] = owner.get(key)
    logs = node.setdefault("logs", [])
    if len(logs) < MAX_NODE_LOGS - 1:
        logs.append(entry)
        return
    if len(logs) == MAX_NODE_LOGS - 1:  # the cap's marker, counting what it stands for
        logs.append({**entry, "level": "WRN", "message": "", "source": LOG_SOURCE_AGENTTRACE})
    marker = logs[-1]
    dropped = int(marker.get("dropped", 0)) + 1
    marker["dropped"] = dropped
    marker["message"] = (
        f"agenttrace: {dropped} more log {'entry' if dropped == 1 else 'entries'} on this node "
        f"not kept (at most {MAX_NODE_LOGS} per node)"
    )


# --- nodes --------------------------------------------------------------------------------------

_SESSION_ATTRIBUTES = (sc.CALL_PATH, sc.AGENT_MODEL, sc.RESUMED_FROM, sc.IMPLICIT, sc.REENTERS)
_POSITIONS = {sc.KIND_SESSION: "session", sc.KIND_TURN: "turn"}
"""Where a scope sits in the tree, by the kind it started with (ops start as llm or tool)."""
_CHILD_LIST = {"turn": "turns", "op": "ops", "session": "childSessions"}


def _span(record: Started) -> Node:
    """The span as sent, as far as it is known when it starts."""
    span: Node = {
        "name": record.name,
        "kind": record.span_kind,
        "traceId": format(record.trace_id, "032x") if record.trace_id else None,
        "spanId": format(record.span_id, "016x") if record.trace_id else None,
        "parentSpanId": format(record.parent_span_id, "016x") if record.parent_span_id else None,
        "startTimeUnixNano": record.started_ns,
        "attributes": record.attributes,  # a record's: never changed, merged into a new dict
        "events": [],
    }
    if record.links:
        span["links"] = [
            {"traceId": format(trace_id, "032x"), "spanId": format(span_id, "016x"), "flags": flags}
            for trace_id, span_id, flags in record.links
        ]
    return span


def _add_span_event(node: Node, event: SpanEvent) -> None:
    name, time_ns, attributes = event
    node["span"]["events"].append(
        {"name": name, "timeUnixNano": time_ns, "attributes": dict(attributes)}
    )


def _new_node(record: Started, position: str) -> Node:
    attributes = record.attributes
    started = _ms(record.started_ns)
    label = record.label
    span = _span(record)
    if position == "session":
        return {
            "id": attributes.get(sc.TXN_ID),
            "traceId": span["traceId"],
            "spanId": span["spanId"],
            "path": label,
            "agentId": attributes.get(sc.AGENT_ID),
            "agentName": attributes.get(sc.GEN_AI_AGENT_NAME),
            "callPath": attributes.get(sc.CALL_PATH),
            "txnId": attributes.get(sc.TXN_ID),
            "originTxnId": attributes.get(sc.TXN_ORIGIN),
            "parentTxnId": attributes.get(sc.TXN_PARENT),
            "sessionId": attributes.get(sc.SESSION_ID),
            "startedAt": started,
            "attributes": {
                "ingress": _ingress(attributes),
                **{k: attributes[k] for k in _SESSION_ATTRIBUTES if k in attributes},
            },
            "turns": [],
            "span": span,
        }
    if position == "turn":
        return {
            "id": span["spanId"],
            "index": attributes.get(sc.TURN_INDEX),
            "path": label,
            "startedAt": started,
            "attributes": {sc.IMPLICIT: True} if attributes.get(sc.IMPLICIT) else {},
            "ops": [],
            "span": span,
        }
    return {
        "opId": span["spanId"],
        "path": label,
        "kind": record.kind,
        "name": attributes.get(sc.GEN_AI_TOOL_NAME) or attributes.get(sc.GEN_AI_REQUEST_MODEL),
        "startedAt": started,
        "attributes": {},
        "logs": [],
        "accounting": [],
        "span": span,
    }


def _complete(node: Node, record: Ended, run: RunTree, keep: bool) -> AccountingEntry | None:
    """Finish ``node`` with its ``Ended`` record; an op's new accounting entry is returned (the
    one its ``op_accounted`` event carries: the stream and the ledger have the same).

    The node gets the entry as plain JSON values if it is ``keep`` (handed to subscribers);
    otherwise the struct, which the node's fold writes as the bytes the ledger has (an
    op's node that outlives its end gets the values then, :func:`_settle`)."""
    span = node["span"]
    ended = record.attributes
    # As the SDK keeps them: a key set again moves to the end.
    attributes = {k: v for k, v in span["attributes"].items() if k not in ended}
    attributes.update(ended)
    span["attributes"] = attributes
    model = ended.get(sc.GEN_AI_REQUEST_MODEL)
    if model is not None and node.get("kind") == sc.KIND_LLM:
        # Set again after the start: a fork's model (instrumentation/litellm/fork.py).
        node["name"] = model
    for event in record.events:
        _add_span_event(node, event)
    span["endTimeUnixNano"] = record.ended_ns
    error = record.error
    latency_ms = latency_written((record.ended_ns - span["startTimeUnixNano"]) / 1e6)
    span["status"] = {"code": "ERROR", "message": error} if error is not None else {"code": "UNSET"}
    node["endedAt"] = _ms(record.ended_ns)
    if "turns" in node:  # a session
        node["success"] = error is None
        node["error"] = error
        node["latencyMs"] = latency_ms
        return None
    if "ops" in node:  # a turn
        return None
    entry: AccountingEntry
    if record.accounted is not None:
        op, entry = record.accounted.op, record.accounted.entry
    elif record.outcome is not None:  # answered from the journal: its outcome, unbilled
        op = record.outcome
        entry = accounting_entry(op)
    else:  # a record made by hand (no scope made its outcome)
        session = run.session_of(record.label)
        op = bare_outcome(
            span["attributes"],
            span["startTimeUnixNano"],
            record.ended_ns,
            error,
            session.get("callPath") if session is not None else None,
        )
        entry = accounting_entry(op)
    _complete_op(node, op, latency_ms)
    _payloads(node, record.payloads if record.payloads is not None else attributes)
    _final_flags(node, attributes)
    if record.accounted is None and attributes.get(sc.REPLAYED) is True:
        # Answered from the journal: nothing was bought or done again, so it has no accounting
        # entry (as it has no ledger line), and totals do not count the recorded call twice.
        return None
    node["accounting"].append(msgspec.to_builtins(entry) if keep else entry)
    return entry


def _complete_op(node: Node, op: OpOutcome, latency_ms: float) -> None:
    """An op's node as its outcome says it ended (its accounting entry aside)."""
    node["status"] = sc.STATUS_FAILED if op.failed else sc.STATUS_OK
    node["latencyMs"] = latency_ms
    if node.get("kind") != op.kind:
        node["kind"] = op.kind
    if op.error:
        node["error"] = op.error
    if op.error_type:
        node["attributes"]["errorType"] = op.error_type


_PAYLOADS = (
    (sc.GEN_AI_INPUT_MESSAGES, "request", "llm"),
    (sc.GEN_AI_TOOL_CALL_ARGUMENTS, "request", "tool"),
    (sc.GEN_AI_OUTPUT_MESSAGES, "response", None),
    (sc.GEN_AI_TOOL_CALL_RESULT, "response", None),
)
"""Where an op's content is (its payloads' or its span's attribute), the node's side for it,
and the ``kind`` that side says."""


def _payloads(node: Node, attributes: Mapping[str, Any]) -> None:
    get = attributes.get
    for key, side, kind in _PAYLOADS:
        payload = get(key)
        if payload is None:
            continue  # an op has two of the four
        value = recorded_text(payload)
        if value is not None:
            # The payload as recorded (capped, redacted JSON text), on the span or not.
            entry: Node = {"payload": value, "size": len(value)}
            if kind is not None:
                entry["kind"] = kind
            node[side] = entry
    # Where the whole request is (agenttrace.formats.session.requests): a message id, not the
    # history.
    reply = attributes.get(sc.REQUEST_REPLY_MESSAGE)
    if isinstance(reply, str):
        node["replyMessageId"] = reply
        instructions = recorded_text(attributes.get(sc.REQUEST_INSTRUCTIONS))
        if instructions is not None:
            node["instructions"] = {"payload": instructions, "size": len(instructions)}


_FINAL_FLAGS = (
    (sc.REQUEST_FINAL_TURN, "request", "isFinalTurn"),
    (sc.RESPONSE_FINAL_ANSWER, "response", "isFinalAnswer"),
)
"""An LLM attempt's span attribute, the node's side that carries it, and its name there."""


def _final_flags(node: Node, attributes: Mapping[str, Any]) -> None:
    """An LLM attempt's final-turn and final-answer flags (docs/events.md) on its request and
    response, when the span says them and the side was recorded."""
    for key, side, name in _FINAL_FLAGS:
        flag = attributes.get(key)
        entry = node.get(side)
        if isinstance(flag, bool) and isinstance(entry, dict):
            entry[name] = flag


def describe_turn(turn: Node, llm_op: Node, prompts: str | None = None) -> None:
    """Let ``turn`` say what it was about, from an LLM attempt of it that just ended: its
    ``prompts`` (the system and user messages of its first attempt's whole request, which that
    attempt recorded as ``prompts``, each ``{role, text, size}``) and its ``reply`` (the
    assistant text and tool calls of its latest attempt). Without ``prompts`` (a record made by
    hand) they are those the attempt's request added. The texts are as recorded (capped,
    redacted): nothing is scrubbed twice; a payload cut by its cap, which is no longer JSON,
    describes nothing."""
    if "prompts" not in turn:
        messages = _json_list(prompts)
        if messages is None:
            messages = _payload_messages(llm_op.get("request"))
        if messages is not None:
            texts = []
            for message in messages:
                role = message.get("role") if isinstance(message, dict) else None
                text = _message_text(message) if role in ("system", "user") else None
                if text:
                    texts.append({"role": role, "text": text, "size": len(text)})
            if len(texts) > MAX_TURN_PROMPTS:  # the first (a system prompt) and the latest
                texts = [texts[0], *texts[1 - MAX_TURN_PROMPTS :]]
            turn["prompts"] = texts
    for message in reversed(_payload_messages(llm_op.get("response")) or []):
        if not isinstance(message, dict) or message.get("role", "assistant") != "assistant":
            continue
        reply = _reply(message)
        if reply:
            turn["reply"] = reply
            break


def _reply(message: Mapping[str, Any]) -> Node:
    """An assistant message as a turn's ``reply``: ``{text, size, toolCalls}``, each when it
    has it."""
    reply: Node = {}
    text = _message_text(message)
    if text:
        reply["text"] = text
        reply["size"] = len(text)
    calls = []
    asked = message.get("tool_calls")
    for call in asked if isinstance(asked, list) else ():
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        calls.append(
            {
                "id": _str_or_none(call.get("id")),
                "name": _str_or_none(function.get("name")),
                "arguments": _str_or_none(function.get("arguments")),
            }
        )
    if calls:
        reply["toolCalls"] = calls
    return reply


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _payload_messages(side: Any) -> list[Any] | None:
    payload = side.get("payload") if isinstance(side, dict) else None
    return _json_list(payload)


def _json_list(payload: Any) -> list[Any] | None:
    """``payload`` (recorded JSON text) as the list it holds, else None."""
    if not isinstance(payload, str):
        return None
    try:
        messages = msgspec.json.decode(payload)
    except (msgspec.DecodeError, RecursionError):
        return None
    return messages if isinstance(messages, list) else None


def _message_text(message: Mapping[str, Any]) -> str | None:
    """A message's text: its content, or the text of its text parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[str] = []
        for part in content:
            text = part.get("text") if isinstance(part, dict) else None
            if isinstance(text, str):
                texts.append(text)
        return "\n".join(texts) if texts else None
    return None


def _ingress(attributes: Mapping[str, Any]) -> Node:
    ingress: Node = {}
    prefix = sc.INGRESS_PREFIX
    for key, value in attributes.items():
        if key.startswith(prefix):
            target = ingress
            parts = key[len(prefix) :].split(".")
            for part in parts[:-1]:
                target = target.setdefault(part, {})
            target[parts[-1]] = value
    return ingress
