"""Scopes: the agent run, turn and operation that are executing now, and their spans.

A scope is the live counterpart of an opTree node: it owns one span, knows its address and path
label, and numbers its children. The innermost scope lives in a context variable, so asyncio tasks
and threads that copy the context nest correctly. Scopes are created and finished by the
decorators and the litellm patch; nothing here catches the user's exceptions.

Rules (see docs/path-labels.md for how they number nodes):

- A session (agent run) started with no scope around it is a root session. Started inside an op,
  it is that op's next child session and the op becomes kind ``session``. Started inside a turn or
  session without an op, agenttrace opens an implicit tool op named after the agent to host it.
- An op started in a session with no explicit turn goes into the session's *auto turn*: an LLM call
  there opens a new auto turn, and the tool calls after it belong to that turn until the next one.
- An op started inside another op is a sibling in the same turn (a tool called by a tool is the
  turn's next op), though its span nests under the op's span.
- An op or turn started with nothing around it gets an implicit session (and turn), so a bare
  litellm call after ``init()`` still gives session → turn → op.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Mapping
from contextvars import Token
from typing import Any, NamedTuple, Union

import msgspec
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace._internal.capture import Output, captures
from agenttrace._internal.context import current_scope_var
from agenttrace._internal.memo import BoundedMemo
from agenttrace._internal.redact import secret_values
from agenttrace._internal.runtime import runtime
from agenttrace._internal.times import event_ts
from agenttrace.formats.ledger import Accounted
from agenttrace.model.fork import Fork
from agenttrace.model.ids import new_txn_id
from agenttrace.model.lifecycle import Ended, SpanEvent, Started
from agenttrace.model.outcome import OpOutcome, OutcomeBuilder
from agenttrace.model.paths import Address, format_label
from agenttrace.session.state import Session, current_session
from agenttrace.tracing.agents import agent_of
from agenttrace.tracing.op_attributes import (
    end_attributes,
    error_span_attributes,
    route_user_attribute,
    start_attributes,
)
from agenttrace.tracing.outbound import outbound_attributes, outbound_text, outbound_value
from agenttrace.tracing.recording import emit_inference_details, record_canonical_event
from agenttrace.tracing.runs import Run, new_root_run, run_ended, run_started
from agenttrace.tracing.travel import joined_parent

Scope = Union["SessionScope", "TurnScope", "OpScope"]

_current = current_scope_var

_shared = threading.RLock()
"""Guards what the threads of one turn or op share (its auto turn, its pending tool calls, its
sub-agent counter): with thread propagation, pool tasks of one turn run its ops at once."""

_NO_PARENT_KNOWN: Any = object()

Tokens = tuple[Token[Any], object]
"""What :meth:`_BaseScope.activate` returns and :meth:`_BaseScope.deactivate` takes back."""


def deactivate(tokens: Tokens) -> None:
    """Undo one ``scope.activate()``; must run in the same context that activated."""
    otel_context.detach(tokens[1])  # type: ignore[arg-type]
    _current.reset(tokens[0])


def current_scope() -> Scope | None:
    """The innermost agenttrace scope in this context, if any."""
    scope: Scope | None = _current.get()
    return scope


class _BaseScope:
    __slots__ = (
        "__weakref__",  # the litellm patch remembers failed calls per scope, weakly
        "address",
        "attributes",
        "label",
        "late",
        "origin",
        "span",
        "span_id",
        "start_record",
        "started_ns",
        "trace_id",
    )

    span: Span
    address: Address
    label: str
    origin: str
    """The origin txn id of the run this scope belongs to."""
    started_ns: int
    trace_id: int
    span_id: int
    start_record: Started | None
    """The record of its start (it goes into its ``Ended`` record); ``None`` if not recorded."""
    late: dict[str, AttributeValue] | None
    """Attributes set on the span after it started (they go into its ``Ended`` record)."""
    attributes: dict[str, AttributeValue]
    """The attributes the span started with (never changed afterwards)."""

    def activate(self) -> Tokens:
        """Make this scope (and its span) current in this context; returns what
        :meth:`deactivate` needs. State is per activation, so one scope (or one context manager
        object) may be active in many tasks and threads at once."""
        return (
            _current.set(self),
            otel_context.attach(trace.set_span_in_context(self.span)),
        )

    @staticmethod
    def deactivate(tokens: Tokens) -> None:
        """Undo one :meth:`activate`; must run in the same context that activated."""
        deactivate(tokens)

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        """Set an attribute on the span, and remember it for the scope's ``Ended`` record."""
        if self.late is None:
            self.late = {}
        value = outbound_value(key, value, runtime.settings.max_payload_bytes)
        self.late[key] = value
        self.span.set_attribute(key, value)

    def link_ids(self) -> tuple[str | None, str | None]:
        """The span's trace and span ids as hex (``None`` without a span context)."""
        if not self.trace_id:
            return None, None
        return format(self.trace_id, "032x"), format(self.span_id, "016x")

    def event_logged(self, session: Session, event: dict[str, Any], line: bytes, more: int) -> None:
        """A canonical event was logged in this scope: on its span, and to the recorder."""
        record_canonical_event(self, getattr(self, "span", None), session, event, line, more)


class SessionScope(_BaseScope):
    """One agent run: a session span ``invoke_agent {name}``."""

    __slots__ = (
        "agent_id",
        "auto_turn",
        "call_path",
        "common",
        "host_op",
        "hosted_by",
        "model",
        "name",
        "parent_txn_id",
        "prefix",
        "run",
        "turn_counter",
        "txn_id",
    )

    name: str
    agent_id: str
    model: str | None
    txn_id: str
    parent_txn_id: str | None
    call_path: str
    run: Run
    auto_turn: TurnScope | None
    host_op: OpScope | None
    """The implicit op agenttrace opened to host this session, finished with it."""
    hosted_by: OpScope | None
    """The op this run is a sub-agent run of (``None`` for a root run)."""
    common: dict[str, AttributeValue]
    """Attributes every span inside this session carries (txn ids, agent id)."""
    prefix: str
    """What this session's turn labels start with (``paths.format_label``, built incrementally)."""
    turn_counter: itertools.count[int]

    def __init__(
        self,
        name: str,
        run: Run,
        *,
        txn_id: str,
        agent_id: str,
        address: Address,
        label: str,
        prefix: str,
        call_path: str,
        parent_txn_id: str | None = None,
        model: str | None = None,
        host_op: OpScope | None = None,
        hosted_by: OpScope | None = None,
        started_ns: int,
    ) -> None:
        self.started_ns = started_ns
        self.name = name
        self.model = model
        self.run = run
        self.origin = run.origin_txn_id
        self.txn_id = txn_id
        self.parent_txn_id = parent_txn_id
        self.agent_id = agent_id
        self.address = address
        self.label = label
        self.prefix = prefix
        self.call_path = call_path
        self.host_op = host_op
        self.hosted_by = hosted_by
        self.auto_turn = None
        self.turn_counter = itertools.count(1)
        self.common = outbound_attributes(  # once: every span inside carries it as it is
            {sc.TXN_ID: txn_id, sc.TXN_ORIGIN: run.origin_txn_id, sc.AGENT_ID: agent_id},
            runtime.settings.max_payload_bytes,
        )

    def next_turn_index(self) -> int:
        return next(self.turn_counter)

    @property
    def session(self) -> SessionScope:
        """Itself: every scope's ``.session`` is the agent run it belongs to."""
        return self


class TurnScope(_BaseScope):
    """One turn of an agent's loop: ``turn {index}``."""

    __slots__ = (
        "implicit",
        "index",
        "op_counter",
        "owned_session",
        "pending_tool_calls",
        "prompted",
        "session",
    )

    session: SessionScope
    index: int
    implicit: bool
    prompted: bool
    """An LLM attempt of the turn recorded the turn's prompts (the first one does)."""
    owned_session: SessionScope | None
    op_counter: itertools.count[int]
    pending_tool_calls: deque[tuple[str, str, str, str | None]]
    """Tool calls the turn's LLM asked for and no tool span has claimed yet:
    (id, name, arguments, message id of the assistant entry holding them)."""

    def __init__(
        self,
        session: SessionScope,
        index: int,
        started_ns: int,
        implicit: bool = False,
        owned_session: SessionScope | None = None,
    ) -> None:
        self.started_ns = started_ns
        self.session = session
        self.index = index
        self.implicit = implicit
        self.owned_session = owned_session
        self.address = (*session.address, index)
        self.label = f"{session.prefix}{index}"
        self.op_counter = itertools.count(1)
        self.pending_tool_calls = deque()
        self.prompted = False
        self.origin = session.origin

    def next_op_index(self) -> int:
        return next(self.op_counter)

    def offer_tool_calls(self, calls: list[tuple[str, str, str, str | None]]) -> None:
        """Remember the tool calls an LLM response asked for, to link the tool spans to them."""
        with _shared:
            self.pending_tool_calls.extend(calls)

    def claim_tool_call(
        self, name: str, call_id: str | None = None
    ) -> tuple[str, str, str, str | None] | None:
        """The oldest unclaimed tool call named ``name`` (``call_id``: the one with that id),
        removed, if any."""
        if not self.pending_tool_calls:  # most tools run with none pending: no lock then
            return None
        with _shared:  # another thread's claim would change the deque under this loop
            pending = self.pending_tool_calls
            for call in pending:
                if call[1] == name and (call_id is None or call[0] == call_id):
                    pending.remove(call)
                    return call
            return None

    def unclaimed_tool_calls(self) -> list[tuple[str, str, str, str | None]]:
        """The tool calls no op has claimed yet, oldest first (a copy)."""
        with _shared:
            return list(self.pending_tool_calls)


class OpScope(_BaseScope):
    """One operation: an LLM attempt or a tool call (kind ``session`` once it hosts a sub-agent)."""

    __slots__ = (
        "answer",
        "call_id",
        "call_message",
        "child_counter",
        "delivers",
        "hosted_reply",
        "kind",
        "name",
        "outcome",
        "owned_session",
        "payloads",
        "pieces",
        "request",
        "session",
        "step",
        "streamed_chars",
        "streamed_items",
        "text_arguments",
        "turn",
    )

    kind: str
    name: str
    turn: TurnScope
    session: SessionScope
    child_counter: itertools.count[int] | None
    call_id: str | None
    """The LLM tool call this op answers (a tool op), if one matched."""
    call_message: str | None
    """The message id of the assistant entry that holds that tool call."""
    answer: str | None
    """The message id of the reply its result stands for, when a framework's ids say so (the
    final reply of the sub-agent a managed-agent call ran): its tool entry's ``substance``."""
    delivers: str | None
    """Text the op hands to the sub-agent it hosts as its task, when a framework says so (a
    managed agent's ``task``): the first message of that agent that holds it stands for it
    (``agenttrace.tracing.relays``)."""
    hosted_reply: str | None
    """The message id of the last reply a sub-agent run it hosts logged (its answer so far)."""
    text_arguments: tuple[Any, ...]
    """The op's arguments (its string ones: text a tool was given to pass on, pieces of
    text)."""
    pieces: dict[str, str]
    """piece_of_text message ids this op logged, by content."""
    request: Any
    """What was sent (an LLM op's messages), for logging the exchange at its end."""
    streamed_chars: int
    """Characters a generator tool yielded so far."""
    streamed_items: list[Any] | None
    """The items a generator tool whose call is journaled yielded so far (its results, for the
    journal's ``done`` line); ``None`` for every other op."""
    step: Any
    """Its step in the journal while it runs, if its intent was journaled (tracing.steps)."""
    owned_session: SessionScope | None
    """The implicit session opened for an op that had none (a bare LLM call), finished with it."""
    payloads: dict[str, Any]
    """Its request and response content for the saved state (see ``Ended.payloads``): text,
    or a ``RecordedLater``."""
    outcome: OutcomeBuilder
    """What it comes to, set by typed setters during the call: its span's outcome attributes,
    and its frozen ``OpOutcome`` when it ends, are made from it."""

    def __init__(
        self,
        kind: str,
        name: str,
        turn: TurnScope,
        index: int,
        started_ns: int,
        outcome: OutcomeBuilder | None = None,
        owned_session: SessionScope | None = None,
    ) -> None:
        self.started_ns = started_ns
        self.kind = kind
        self.name = name
        self.turn = turn
        self.session = turn.session
        self.owned_session = owned_session
        self.address = (*turn.address, index)
        self.label = f"{turn.label}.{index}"
        self.origin = turn.origin
        self.outcome = OutcomeBuilder() if outcome is None else outcome
        self.child_counter = None
        self.call_id = None
        self.call_message = None
        self.answer = None
        self.delivers = None
        self.hosted_reply = None
        self.text_arguments = ()
        self.pieces = {}
        self.request = None
        self.step = None
        self.streamed_chars = 0
        self.streamed_items = None
        self.payloads = {}

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        """Set an attribute on the span, and remember it for the scope's ``Ended`` record; a
        billing value (a cost, tokens) set by name goes to the op's outcome, which the span
        gets it from as it ends (``op_attributes.route_user_attribute``)."""
        if not route_user_attribute(self.outcome, key, value):
            super().set_attribute(key, value)

    def next_child_index(self) -> int:
        with _shared:  # sub-agents started at once in pool threads: one counter, one kind change
            if self.child_counter is None:  # made on first use: most ops host no sub-agent
                self.child_counter = itertools.count(1)
            if self.kind != sc.KIND_SESSION:
                self.kind = sc.KIND_SESSION
                self.set_attribute(sc.KIND, sc.KIND_SESSION)
            return next(self.child_counter)


def make_current(scope: Scope | None) -> Callable[[], None]:
    """Make ``scope`` (and its span; ``None``: no scope, no span) current; returns the undo."""
    span = scope.span if scope is not None else trace.INVALID_SPAN
    scope_token = _current.set(scope)
    otel_token = otel_context.attach(trace.set_span_in_context(span))

    def undo() -> None:
        otel_context.detach(otel_token)
        _current.reset(scope_token)

    return undo


# --- starting scopes -------------------------------------------------------------------------


def _start(
    scope: _BaseScope,
    kind: str,
    name: str,
    attributes: dict[str, AttributeValue],
    parent: Span | None,
    links: list[Link] | None = None,
    session: Session | None = None,
    parent_label: str | None = None,
    span_kind: SpanKind = SpanKind.INTERNAL,
    capped: bool = False,
) -> None:
    """Start ``scope``'s span (under ``parent``, else the current span) and record the start
    (``session``: a root run's ``Session``; ``capped``: the name and attributes are capped
    already)."""
    if not capped:
        # The name and every string attribute are capped and scrubbed as an export of the
        # session file does to every string it writes, so the two agree.
        attributes = outbound_attributes(attributes, runtime.settings.max_payload_bytes)
        name = outbound_text(name, runtime.settings.max_payload_bytes)
    if parent is not None:
        span = runtime.tracer.start_span(
            name,
            context=trace.set_span_in_context(parent),
            kind=span_kind,
            attributes=attributes,
            start_time=scope.started_ns,
            links=links,
        )
        parent_context = parent.get_span_context()
    else:
        span = runtime.tracer.start_span(
            name, kind=span_kind, attributes=attributes, start_time=scope.started_ns, links=links
        )
        # The SDK's span knows its parent (None for a root); only another tracer's needs the
        # context looked up again.
        parent_context = getattr(span, "parent", _NO_PARENT_KNOWN)
        if parent_context is _NO_PARENT_KNOWN:
            parent_context = trace.get_current_span().get_span_context()
    scope.span = span
    scope.attributes = attributes
    scope.late = None
    context = span.get_span_context()
    scope.trace_id = context.trace_id
    scope.span_id = context.span_id
    scope.start_record = None
    recorder = runtime.recorder  # read once: emit() would read it again
    if recorder is not None:
        recorder.record(
            started := Started(
                scope.origin,
                scope.label,
                kind,
                name,
                scope.started_ns,
                context.trace_id,
                context.span_id,
                parent_context.span_id
                if parent_context is not None and parent_context.is_valid
                else None,
                attributes,
                span_kind=_SPAN_KIND_NAMES[span_kind],
                links=[_link(link) for link in links] if links else (),
                session=session,
                parent=parent_label,
                trace_flags=context.trace_flags,
            )
        )
        scope.start_record = started


_SPAN_KIND_NAMES = {kind: kind.name for kind in SpanKind}
"""Each span kind's name, as a ``Started`` record says it (an enum's ``name`` is a property)."""


def start_session(
    name: str,
    *,
    agent_id: str | None = None,
    model: str | None = None,
    ingress: Mapping[str, Any] | None = None,
    implicit: bool = False,
    owner: object = None,
    started_ns: int | None = None,
    host_name: str | None = None,
    host_attributes: dict[str, AttributeValue] | None = None,
    arguments: tuple[tuple[Any, ...], Mapping[str, Any]] | None = None,
) -> SessionScope:
    """Open a session span for an agent run, placed by the rules in the module docstring.

    The agent is ``owner`` (the object whose method runs) or, for a function, the agent of
    that ``name``; it is registered in the run's ``Session`` (``agent_created``) on first use.
    ``started_ns``: when the run began, if that was before now (an instrumentation that learns
    of a run only from its first message). ``host_name`` and ``host_attributes``: the name (else
    ``name``) and attributes of the op that hosts the run when it starts in a turn.
    ``arguments``: (positional, keyword) the run's entry point was called with, the agent a
    method runs for left out; a root run journals their fingerprint, and re-enters the
    interrupted run a resume armed only if it is that run's (``agenttrace.session.reentry_match``).
    """
    parent = _current.get()
    host_op: OpScope | None = None
    if parent is not None and not isinstance(parent, OpScope):
        host_op = start_op(
            sc.KIND_TOOL,
            host_name or name,
            host_attributes,
            implicit=True,
            started_ns=started_ns,
        )
        parent = host_op
    started_ns = time.time_ns() if started_ns is None else started_ns
    if parent is None:
        place = _root_place(name, ingress, arguments, implicit)
    else:
        place = _child_place(parent, name, ingress)
    run = place.run
    scope = SessionScope(
        name,
        run,
        txn_id=place.txn_id,
        agent_id=agent_of(run.session, owner, name, model, agent_id),
        address=place.address,
        label=place.label,
        prefix=place.prefix,
        call_path=place.call_path,
        parent_txn_id=place.parent_txn_id,
        model=model,
        host_op=host_op,
        hosted_by=parent,
        started_ns=started_ns,
    )
    run.session.agent_running(scope.agent_id)  # not done, so never evicted, while it runs
    attributes = place.attributes
    _add_session_attributes(attributes, scope, model, implicit)
    if parent is None and run.reentry is not None and run.reentry.replay is None:  # its tree too
        attributes[sc.REENTERS] = run.journal_run
    # A hosting op agenttrace opened itself is not current in the context: parent explicitly;
    # so is the remote op a root run joined with no span of its process around it.
    parent_span = host_op.span if host_op is not None else place.remote_parent
    _start(
        scope,
        sc.KIND_SESSION,
        sc.SPAN_SESSION.format(name=name),
        attributes,
        parent_span,
        place.links,
        run.session if parent is None else None,
        parent.label if parent is not None else None,
    )
    if parent is None and scope.trace_id:  # the next run of this session links to this one
        run.session.previous_trace = (scope.trace_id, scope.span_id)
    if parent is None:
        run_started(run, scope.agent_id, name, implicit)
    return scope


class _Place(NamedTuple):
    """Where a starting agent run goes: its run, identity and place in the opTree, and what
    its span starts with of them (its ingress, a root run's link to the session's last run)."""

    run: Run
    txn_id: str
    parent_txn_id: str | None
    address: Address
    label: str
    prefix: str
    call_path: str
    attributes: dict[str, AttributeValue]
    links: list[Link]
    remote_parent: Span | None = None


def _root_place(
    name: str,
    ingress: Mapping[str, Any] | None,
    arguments: tuple[tuple[Any, ...], Mapping[str, Any]] | None,
    implicit: bool,
) -> _Place:
    """A root run's place: a new run of the current session, linked to its last one."""
    session = current_session()
    run = new_root_run(session, name, arguments, implicit)
    joined = joined_parent()
    remote_parent: Span | None = None
    if joined is not None:  # started from a carrier: says which session, op and writer
        ingress = {
            **(ingress if ingress is not None else default_ingress(sc.INGRESS_JOINED)),
            "joined": joined.ingress(),
        }
        if not trace.get_current_span().get_span_context().is_valid:
            remote_parent = trace.NonRecordingSpan(joined.span_context)
    attributes = _flatten_ingress(ingress if ingress is not None else default_ingress())
    links: list[Link] = []
    previous = session.previous_trace
    if previous is not None:
        links.append(Link(SpanContext(previous[0], previous[1], is_remote=True)))
        if session.resumed_from is not None:
            attributes[sc.RESUMED_FROM] = format(previous[0], "032x")
    fork = run.reentry.replay.fork if run.reentry and run.reentry.replay else None
    if fork is not None:  # a fork's run: linked to the source run it branches from
        attributes.update(_fork_attributes(fork))
        if fork.trace_id and fork.span_id:
            links.append(Link(SpanContext(fork.trace_id, fork.span_id, is_remote=True)))
    return _Place(
        run,
        run.origin_txn_id,
        None,
        (),
        format_label(()),
        "",
        name,
        attributes,
        links,
        remote_parent,
    )


def _fork_attributes(fork: Fork) -> dict[str, AttributeValue]:
    """What a fork's root run says of where it branches (``agenttrace.fork.*``)."""
    attributes: dict[str, AttributeValue] = {
        sc.FORK_SESSION: fork.session,
        sc.FORK_RUN: fork.run,
        sc.FORK_LABEL: fork.label,
    }
    if fork.model is not None:
        attributes[sc.FORK_MODEL] = fork.model
    return attributes


def _child_place(parent: OpScope, name: str, ingress: Mapping[str, Any] | None) -> _Place:
    """A sub-agent run's place: the next child session of the op ``parent``."""
    run = parent.session.run
    child = parent.next_child_index()
    label = f"{parent.label}:{child}"
    parent_txn_id = parent.session.txn_id
    attributes = _flatten_ingress(
        ingress
        if ingress is not None
        else {
            "source": "sub-agent",
            "sub_agent": {
                "parent_trace_id": format(parent.span.get_span_context().trace_id, "032x"),
                "parent_call_path": parent.session.call_path,
                "tool_name": parent.name,
            },
        }
    )
    attributes[sc.TXN_PARENT] = parent_txn_id
    return _Place(
        run,
        new_txn_id(),
        parent_txn_id,
        (*parent.address, child),
        label,
        f"{parent.label}." if child == 1 else f"{label}.",
        f"{parent.session.call_path}/{name}",
        attributes,
        [],
    )


def _add_session_attributes(
    attributes: dict[str, AttributeValue], scope: SessionScope, model: str | None, implicit: bool
) -> None:
    """What a session span starts with of its run, after its ingress."""
    run = scope.run
    attributes.update(scope.common)
    attributes[sc.KIND] = sc.KIND_SESSION
    if runtime.settings.openinference:
        attributes[sc.OPENINFERENCE_SPAN_KIND] = sc.OI_AGENT
    attributes[sc.PATH] = scope.label
    attributes[sc.GEN_AI_OPERATION_NAME] = sc.OP_INVOKE_AGENT
    attributes[sc.GEN_AI_AGENT_NAME] = scope.name
    attributes[sc.GEN_AI_AGENT_ID] = scope.agent_id
    attributes[sc.GEN_AI_CONVERSATION_ID] = run.session_id
    attributes[sc.SESSION_ID] = run.session_id
    attributes[sc.CALL_PATH] = scope.call_path
    if model:
        attributes[sc.AGENT_MODEL] = model
    if implicit:
        attributes[sc.IMPLICIT] = True


def start_turn(
    *,
    implicit: bool = False,
    session: SessionScope | None = None,
    started_ns: int | None = None,
) -> TurnScope:
    """Open a turn in ``session`` (default: the current scope's session, or an implicit one),
    begun at ``started_ns`` (default: now)."""
    owned: SessionScope | None = None
    if session is None:
        parent = _current.get()
        if parent is None:
            owned = session = start_session(
                _default_agent_name(), implicit=True, started_ns=started_ns
            )
        else:
            session = parent if isinstance(parent, SessionScope) else parent.session
    if session.auto_turn is not None:
        close_auto_turn(session, started_ns)
    started_ns = time.time_ns() if started_ns is None else started_ns
    scope = TurnScope(session, session.next_turn_index(), started_ns, implicit, owned)
    attributes: dict[str, AttributeValue] = {
        **session.common,
        sc.KIND: sc.KIND_TURN,
        sc.PATH: scope.label,
        sc.TURN_INDEX: scope.index,
    }
    if runtime.settings.openinference:
        attributes[sc.OPENINFERENCE_SPAN_KIND] = sc.OI_CHAIN
    if implicit:
        attributes[sc.IMPLICIT] = True
    _start(
        scope,
        sc.KIND_TURN,
        sc.SPAN_TURN.format(index=scope.index),
        attributes,
        session.span,
        parent_label=session.label,
    )
    if implicit:
        session.auto_turn = scope
    return scope


def close_auto_turn(session: SessionScope, ended_ns: int | None = None) -> None:
    """End the session's open auto turn, if any (at ``ended_ns``, default now)."""
    with _shared:  # taken once: two threads must not both end it
        turn = session.auto_turn
        session.auto_turn = None
    if turn is not None:
        finish(turn, ended_ns=ended_ns)


def start_op(
    kind: str,
    name: str,
    attributes: dict[str, AttributeValue] | None = None,
    *,
    new_turn: bool = False,
    implicit: bool = False,
    more: Callable[[SessionScope], dict[str, AttributeValue]] | None = None,
    started_ns: int | None = None,
    outcome: OutcomeBuilder | None = None,
) -> OpScope:
    """Open an op span of ``kind`` (``llm``/``tool``) in the current turn.

    ``new_turn``: this op starts a new LLM request, so when it runs directly in a session (no
    explicit turn) it opens the next auto turn. ``attributes`` are added to the span at start,
    and so are those ``more`` computes from the session the op turns out to run in.
    ``started_ns``: when the op began, if before now (a turn it opens begins then too).
    ``outcome``: what is known of the op's outcome before it starts (an LLM attempt's request,
    a tool's provider and input size), which its span starts with; it becomes the scope's
    ``outcome``, filled in during the call.
    """
    turn, owned, parent_span = _turn_for_op(new_turn, started_ns)
    started_ns = time.time_ns() if started_ns is None else started_ns
    scope = OpScope(kind, name, turn, turn.next_op_index(), started_ns, outcome, owned)
    outcome = scope.outcome
    # Made outbound here, part by part: the session's common attributes were when it started,
    # the op's name and what a tool's span starts with of it once per name (``_op_names``).
    settings = runtime.settings
    cap = settings.max_payload_bytes
    names = _op_names(name, cap, settings.openinference)
    label = scope.label  # counters: only a cap below 4 bytes a character could cut it
    span_attributes: dict[str, AttributeValue] = {
        **turn.session.common,
        sc.KIND: kind,
        sc.PATH: label if len(label) * 4 <= cap else outbound_value(sc.PATH, label, cap),
    }
    if kind == sc.KIND_TOOL:
        outcome.operation = sc.OP_EXECUTE_TOOL
        outcome.tool_name = names.name
        span_attributes.update(names.tool_attributes)
        span_name = names.tool_span
    else:
        if settings.openinference:
            span_attributes[sc.OPENINFERENCE_SPAN_KIND] = sc.OI_LLM
        span_name = names.name
    if implicit:
        span_attributes[sc.IMPLICIT] = True
    # One pass over what is not made once per name: the outcome's, the caller's, ``more``'s.
    given = start_attributes(outcome)
    if attributes:
        given.update(attributes)
    if more is not None:
        given.update(more(scope.session))
    if given:
        span_attributes.update(outbound_attributes(given, cap))
    # GenAI conventions: a call to a model is a CLIENT span; agents and tools run in-process.
    span_kind = SpanKind.CLIENT if kind == sc.KIND_LLM else SpanKind.INTERNAL
    _start(
        scope,
        kind,
        span_name,
        span_attributes,
        parent_span,
        parent_label=turn.label,
        span_kind=span_kind,
        capped=True,
    )
    return scope


def _turn_for_op(
    new_turn: bool, started_ns: int | None
) -> tuple[TurnScope, SessionScope | None, Span | None]:
    """The turn an op starting now goes into (see the module docstring), the implicit session
    opened for it if it had none, and the span to parent it under when that is not the current
    one (a turn opened here is not current)."""
    parent = _current.get()
    if parent is None:
        owned = start_session(_default_agent_name(), implicit=True, started_ns=started_ns)
        turn = start_turn(implicit=True, session=owned, started_ns=started_ns)
        return turn, owned, turn.span
    if isinstance(parent, SessionScope):
        with _shared:  # ops started at once in pool threads join one auto turn, as inline
            turn = parent.auto_turn  # type: ignore[assignment]
            if turn is None or new_turn:
                turn = start_turn(implicit=True, session=parent, started_ns=started_ns)
        return turn, None, turn.span
    if isinstance(parent, TurnScope):
        return parent, None, None
    return parent.turn, None, None


class _OpNames:
    """An op name's outbound forms, made once per name (``_op_names``)."""

    __slots__ = ("cap", "generation", "name", "openinference", "tool_attributes", "tool_span")

    def __init__(self, name: str, cap: int, generation: int, openinference: bool) -> None:
        self.generation = generation
        self.cap = cap
        self.openinference = openinference
        self.name = outbound_text(name, cap)
        """The name as it leaves the process (an LLM op's span name)."""
        self.tool_span = outbound_text(sc.SPAN_TOOL.format(name=name), cap)
        """The span name of a tool of that name."""
        tool_attributes: dict[str, AttributeValue] = {
            sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
            sc.GEN_AI_TOOL_NAME: self.name,
        }
        if openinference:
            tool_attributes[sc.OPENINFERENCE_SPAN_KIND] = sc.OI_TOOL
            tool_attributes[sc.TOOL_NAME] = self.name
        self.tool_attributes = tool_attributes
        """What a tool span of that name starts with of it (never changed: copied from)."""


_names: BoundedMemo[str, _OpNames] = BoundedMemo()
"""Per op name: its outbound forms (few names recur)."""


def _op_names(name: str, cap: int, openinference: bool) -> _OpNames:
    """``name``'s outbound forms for this cap and setting; made once (again once a new secret
    is known)."""
    generation = secret_values.generation
    names = _names.get(name)
    if (
        names is None
        or names.generation != generation
        or names.cap != cap
        or names.openinference is not openinference
    ):
        names = _names.keep(name, _OpNames(name, cap, generation, openinference))
    return names


# --- finishing scopes ------------------------------------------------------------------------


Attributes = dict[str, AttributeValue]


def _link(link: Link) -> tuple[int, int, int]:
    """A link as recorded: (trace id, span id, OTLP flags: the trace flags, and whether the
    linked context is remote, as OpenTelemetry's OTLP exporter sends them)."""
    context = link.context
    flags = int(context.trace_flags) | 0x100 | (0x200 if context.is_remote else 0)
    return context.trace_id, context.span_id, flags


def finish(
    scope: Scope,
    error: BaseException | None = None,
    attributes: Attributes | Callable[[], Attributes] | None = None,
    *,
    passed: BaseException | None = None,
    ended_ns: int | None = None,
) -> None:
    """End ``scope``'s span now (or at ``ended_ns``, for a run whose end was only known
    later), with status, latency and ``attributes``, and record the end; then close what the
    scope owns.

    ``error`` is the exception that ended it (recorded, scrubbed of secrets); ``None``: success.
    ``passed`` is an exception that ended it without being a failure (one a framework uses for
    control flow): the span keeps an ``exception`` event for it and no error status.
    ``attributes`` may be a callable, computed here. Whatever it does, the span ends.
    """
    if ended_ns is None:
        ended_ns = time.time_ns()
    op = scope if isinstance(scope, OpScope) else None
    if op is None and isinstance(scope, SessionScope) and scope.auto_turn is not None:
        close_auto_turn(scope, ended_ns)
    # The span's own status and duration say how it went and how long it took: no attribute
    # repeats them (the opTree's status and latency come from the Ended record).
    final: Attributes = (
        {} if error is None or op is not None else error_span_attributes(type(error).__qualname__)
    )
    try:
        more = attributes() if callable(attributes) else attributes
        if more:
            final.update(more)
    finally:
        # Even if computing the attributes failed, the span ends with the call's status.
        _end(scope, op, final, error, passed, ended_ns)
    _finish_owned(scope, error, passed, ended_ns)


def _end(
    scope: Scope,
    op: OpScope | None,
    final: Attributes,
    error: BaseException | None,
    passed: BaseException | None,
    ended_ns: int,
) -> None:
    """End ``scope``'s span with ``final`` (and an op's outcome attributes) and its status,
    and record the end."""
    if op is not None:  # its outcome's attributes, as the call set them (once, here)
        if error is not None and op.outcome.error_type is None:
            op.outcome.set_error(type(error).__qualname__)
        final.update(end_attributes(op.outcome))
    span = scope.span
    settings = runtime.settings
    if final:
        final = outbound_attributes(final, settings.max_payload_bytes)
        span.set_attributes(final)
    description: str | None = None
    events: tuple[SpanEvent, ...] = ()
    if error is not None:
        description, event = record_error(span, error, ended_ns)
        events = (event,)
    elif passed is not None:
        events = (record_exception(span, passed, ended_ns),)
    span.end(ended_ns)
    if (
        op is not None
        and op.kind == sc.KIND_LLM
        and captures(Output.LOG, settings)
        and span.get_span_context().trace_flags.sampled
    ):
        emit_inference_details(span, {**op.attributes, **final}, op.payloads, ended_ns)
    recorder = runtime.recorder  # read once: emit() would read it again
    if recorder is not None:
        recorder.record(_ended(scope, op, final, description, events, ended_ns))


def _ended(
    scope: Scope,
    op: OpScope | None,
    final: Attributes,
    description: str | None,
    events: tuple[SpanEvent, ...],
    ended_ns: int,
) -> Ended:
    """The record of ``scope``'s end: what its span gained since it started and, for an op,
    its content and what it came to."""
    late = scope.late
    ended = {**late, **final} if late else final
    if op is None:
        return Ended(
            scope.origin,
            scope.label,
            ended_ns,
            ended,
            description,
            events,
            started=scope.start_record,
        )
    accounted = outcome = None
    # A step answered from the journal did not run: nothing new to bill.
    if late is not None and late.get(sc.REPLAYED) is True:
        outcome = _outcome(op, ended_ns, description)
    else:
        accounted = _accounted(op, ended_ns, description)
    return Ended(
        op.origin,
        op.label,
        ended_ns,
        ended,
        description,
        events,
        op.payloads or None,
        accounted,
        op.session.run.session,
        op.start_record,
        outcome,
    )


def _finish_owned(
    scope: Scope, error: BaseException | None, passed: BaseException | None, ended_ns: int
) -> None:
    """Finish what ``scope`` owned (an implicit session, a hosting op) now that it ended; a
    root run's end is told to the run's bookkeeping."""
    if isinstance(scope, OpScope):
        if scope.owned_session is not None:
            finish(scope.owned_session, error, passed=passed, ended_ns=ended_ns)
    elif isinstance(scope, SessionScope):
        if not scope.address:  # a root run ended
            run_ended(scope.run, scope.agent_id, scope.name)
        # Its end is recorded (its events are in the stream): the agent may be done, and the
        # agents evicted now need no request memory in this run (a cache: rebuilt if one runs
        # again).
        run = scope.run
        for evicted in run.session.agent_stopped(scope.agent_id):
            run.histories.pop(evicted, None)
            run.digests.pop(evicted, None)
        if scope.host_op is not None:
            finish(scope.host_op, error, passed=passed, ended_ns=ended_ns)
    elif scope.owned_session is not None:
        finish(scope.owned_session, error, passed=passed, ended_ns=ended_ns)


def _accounted(scope: OpScope, ended_ns: int, error: str | None) -> Accounted:
    """The op's outcome (``agenttrace.model.outcome``), with its accounting entry and
    ``op_accounted`` event. An op that can carry a cost (an LLM attempt, a tool whose outcome
    has a non-zero cost) has it made now, and the stream and the ledger get it in the caller's
    thread, before the op's caller goes on; any other op's is made and written off the caller's
    path (see ``formats/ledger.py``): its builder is not changed once the op has ended."""
    ts = event_ts(ended_ns)
    cost = scope.outcome.cost_usd
    if scope.kind == sc.KIND_LLM or (cost is not None and cost != 0):
        return Accounted(_outcome(scope, ended_ns, error), ts)
    make = functools.partial(_outcome, scope, ended_ns, error)
    return Accounted(None, ts, inline=False, make=make)


def _outcome(scope: OpScope, ended_ns: int, error: str | None) -> OpOutcome:
    """The op's frozen outcome: what its builder holds, with its identity and how it ended."""
    started = scope.start_record
    session = scope.session
    # The ids as every output carries them: outbound (capped, scrubbed) once, as the session's
    # spans and the ledger have always had them.
    common = session.common
    outcome = scope.outcome.outcome(
        scope.kind,
        scope.name,
        scope.label,
        scope.started_ns,
        ended_ns,
        error,
        origin_txn_id=str(common[sc.TXN_ORIGIN]),
        txn_id=str(common[sc.TXN_ID]),
        agent_id=str(common[sc.AGENT_ID]),
        parent_txn_id=session.parent_txn_id,
        call_path=session.call_path,
        trace_id=scope.trace_id,
        span_id=scope.span_id,
        trace_flags=started.trace_flags if started is not None else 0,
    )
    return _outbound_names(outcome)


_NAMES = (
    "name",
    "provider",
    "request_model",
    "response_provider",
    "response_model",
    "tool_name",
    "tool_provider",
    "mcp_server",
)
"""The outcome's texts that come from the caller or a response: the ledger, the opTree and the
console carry them, so they leave the process capped and scrubbed, as the span's copies do."""


def _outbound_names(outcome: OpOutcome) -> OpOutcome:
    """``outcome`` with each of its :data:`_NAMES` outbound (itself when none changes)."""
    cap = runtime.settings.max_payload_bytes
    generation = secret_values.generation  # read first: a scrub may see newer secrets only
    changed: dict[str, str] | None = None
    for field in _NAMES:
        value = getattr(outcome, field)
        if value is None:
            continue
        # A tool's names are the same few texts on every call: each made outbound once.
        known = _outbound.get(value)
        if known is not None and known[0] == generation and known[1] == cap:
            clean = known[2]
        else:
            clean = _outbound.keep(value, (generation, cap, outbound_text(value, cap)))[2]
        if clean is not value and clean != value:
            if changed is None:
                changed = {}
            changed[field] = clean
    return msgspec.structs.replace(outcome, **changed) if changed else outcome


_outbound: BoundedMemo[str, tuple[int, int, str]] = BoundedMemo()
"""An outcome's names outbound, by name: (the secrets' generation, the cap, the text)."""


def record_error(span: Span, error: BaseException, when_ns: int) -> tuple[str, SpanEvent]:
    """Set ERROR status and add an ``exception`` event, both capped and scrubbed of secrets;
    returns the status description and the event as recorded."""
    cap = runtime.settings.max_payload_bytes
    message = outbound_text(f"{type(error).__name__}: {error}", cap)
    span.set_status(Status(StatusCode.ERROR, message))
    return message, record_exception(span, error, when_ns)


def record_exception(span: Span, error: BaseException, when_ns: int) -> SpanEvent:
    """Add an ``exception`` event (capped, scrubbed of secrets) to ``span``; returns it as
    recorded. The span's status is left as it is."""
    cap = runtime.settings.max_payload_bytes
    module = type(error).__module__
    qualname = type(error).__qualname__
    attributes: dict[str, AttributeValue] = {
        "exception.type": qualname if module == "builtins" else f"{module}.{qualname}",
        "exception.message": outbound_text(str(error), cap),
        "exception.stacktrace": outbound_text("".join(traceback.format_exception(error)), cap),
        "exception.escaped": "True",
    }
    span.add_event("exception", attributes, timestamp=when_ns)
    return ("exception", when_ns, attributes)


# --- ingress ---------------------------------------------------------------------------------


def default_ingress(source: str = "cli") -> dict[str, Any]:
    """The ingress block (docs/session-file.md) of a run started from Python: source ``cli``
    (``joined``: started from a carrier, with the process's details all the same)."""
    return {
        "source": source,
        "cli": {"pid": os.getpid(), "argv0": sys.argv[0] if sys.argv else "", "cwd": _cwd()},
    }


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:  # the directory was removed under us
        return ""


def _flatten_ingress(ingress: Mapping[str, Any]) -> dict[str, AttributeValue]:
    flat: dict[str, AttributeValue] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), item)
        elif isinstance(value, float) and not math.isfinite(value):
            # JSON has no infinity or NaN: as text, or the session file could not be read back.
            flat[sc.INGRESS_PREFIX + prefix] = str(value)
        elif isinstance(value, (str, bool, int, float)):
            flat[sc.INGRESS_PREFIX + prefix] = value  # scrubbed where the span starts

    walk("", ingress)
    flat.setdefault(sc.INGRESS_SOURCE, "api")
    return flat


def _default_agent_name() -> str:
    return runtime.settings.service_name
