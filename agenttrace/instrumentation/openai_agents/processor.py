"""The Agents SDK's spans, as they start and end, made agenttrace scopes: a ``TracingProcessor``.

The SDK starts and ends its spans in the code that runs them (``with function_span(...)``,
``span.start()`` / ``span.finish()`` in the run loop), and calls its processors synchronously
there. So each agenttrace scope opens in ``on_span_start`` and is made current in that task
(the tool's body, the agent's model calls run inside it), and is made current no longer in
``on_span_end``, in the same context: every span ends in the code that ran it.

**A handoff nests.** The SDK ends the agent that hands off and starts the next as its sibling;
agenttrace shows the next agent as a sub-agent of the op that handed off, under the agent that
handed off, as a tool that calls an agent is shown. So a handoff's op and the agent that
handed off stay open (no longer current) when their SDK spans end, the next agent's run opens
under the handoff's op, and they end, innermost first, when the trace ends (``on_trace_end``:
the end of ``Runner.run``) or when an agent that is no handoff's target starts in the same
trace (a second ``Runner.run`` inside one ``trace()``).

The SDK's model spans (``GenerationSpanData``, ``ResponseSpanData``) are ignored: the OpenAI
SDK's instrumentation makes each model call's one LLM span, in the agent's turn.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

from agents.tracing import Span, Trace, TracingProcessor

from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.runtime import runtime
from agenttrace.instrumentation.openai_agents import tools
from agenttrace.instrumentation.openai_agents.ops import (
    WHERE,
    agent_opener,
    guardrail_opener,
    guardrail_result,
    handoff_opener,
    tool_opener,
)
from agenttrace.tracing.scopes import Tokens, deactivate, make_current
from agenttrace.tracing.wrapping import Opener

__all__ = ["AgentTraceTracingProcessor", "AgentsSpanError"]

_OPENERS = {
    "agent": agent_opener,
    "function": tool_opener,
    "handoff": handoff_opener,
    "guardrail": guardrail_opener,
}
"""The SDK span types that become scopes (``SpanData.type``), and the opener of each."""


@dataclass
class _Open:
    """One SDK span's scope."""

    seq: int
    """Opening order: deferred scopes end in the reverse of it."""
    kind: str
    opener: Opener
    scope: Any
    tokens: Tokens | None
    handed_off: bool = False
    """An agent that handed off: it ends with the trace, after the agents under it."""
    result: Any = None
    """What a kept scope's op came to (a handoff's: the SDK's transfer message)."""
    error: BaseException | None = None
    """An agent's failure that the SDK set on its turn, not on the agent (a tripped
    guardrail)."""


@dataclass
class _Trace:
    """What a trace keeps open past its SDK spans."""

    deferred: list[_Open] = field(default_factory=list)
    handoff: _Open | None = None
    """The handoff whose target agent has not started yet."""
    target: str | None = None


class AgentTraceTracingProcessor(TracingProcessor):
    """The processor agenttrace adds to the Agents SDK (``add_trace_processor``); inert while
    ``enabled`` is false (the SDK can add a processor, not remove one)."""

    def __init__(self) -> None:
        self.enabled = True
        self._lock = threading.Lock()
        self._open: dict[str, _Open] = {}
        self._traces: dict[str, _Trace] = {}
        self._seq = itertools.count()

    # -- the SDK's calls --------------------------------------------------------------------
    def on_trace_start(self, trace: Trace) -> None:
        """Nothing: a run is its first agent's run."""

    def on_trace_end(self, trace: Trace) -> None:
        """End what the trace kept open (handoffs and the agents that made them)."""
        with self._lock:
            kept = self._traces.pop(trace.trace_id, None)
        if kept is not None:
            self._end_deferred(kept)

    def on_span_start(self, span: Span[Any]) -> None:
        """Open the span's scope, if its type has one, and make it current."""
        if not self.enabled or runtime.disabled:
            return
        data = span.span_data
        make = _OPENERS.get(data.type)
        if make is None:
            return
        try:
            self._start(span, data.type, make)
        except Exception as exc:
            report_internal_error(WHERE, exc)

    def on_span_end(self, span: Span[Any]) -> None:
        """Make the span's scope current no longer, and end it (or keep it, for a handoff)."""
        with self._lock:
            entry = self._open.pop(span.span_id, None)
            if entry is None:
                if span.error and span.span_data.type == "turn":
                    # The SDK's turn span is no scope: its failure is the agent's.
                    agent = self._open.get(span.parent_id or "")
                    if agent is not None and agent.kind == "agent":
                        agent.error = _error(span)
                return
        try:
            self._end(span, entry)
        except Exception as exc:
            report_internal_error(WHERE, exc)

    def shutdown(self) -> None:
        """Nothing to release: agenttrace's outputs flush with its own provider."""

    def force_flush(self) -> None:
        """Nothing buffered here."""

    # -- scopes -----------------------------------------------------------------------------
    def _start(self, span: Span[Any], kind: str, make: Any) -> None:
        data = span.span_data
        host = None
        if kind == "agent":
            host = self._host(span.trace_id, str(getattr(data, "name", "")))
        undo = make_current(host.scope) if host is not None else None
        try:
            opener = make(data)
            scope = opener.open((), {})
        finally:
            if undo is not None:
                undo()
        if scope is None:
            return
        if kind == "function":
            tools.opened(scope)  # its body is guarded for a re-entered run (.tools)
        tokens = scope.activate()
        with self._lock:
            self._open[span.span_id] = _Open(next(self._seq), kind, opener, scope, tokens)

    def _host(self, trace_id: str, agent: str) -> _Open | None:
        """The handoff op an agent starting now runs under: the trace's pending handoff, if it
        is to this agent. An agent no handoff is to starts a new run: what the trace kept open
        ends first."""
        with self._lock:
            kept = self._traces.get(trace_id)
            if kept is None:
                return None
            handoff, target = kept.handoff, kept.target
            kept.handoff = kept.target = None
            if handoff is not None and target == agent:
                return handoff
            del self._traces[trace_id]
        self._end_deferred(kept)
        return None

    def _end(self, span: Span[Any], entry: _Open) -> None:
        if entry.tokens is not None:
            deactivate(entry.tokens)  # in the context that activated it: the SDK's span's
            entry.tokens = None
        data = span.span_data
        error = _error(span) or entry.error
        if entry.kind == "handoff":
            target = getattr(data, "to_agent", None)
            if error is None and target:
                self._keep_handoff(span, entry, str(target))
                return
            _close(entry, error, None)
        elif entry.kind == "agent" and entry.handed_off:
            with self._lock:
                self._traces.setdefault(span.trace_id, _Trace()).deferred.append(entry)
        elif entry.kind == "guardrail":
            _close(entry, error, guardrail_result(data))
        elif entry.kind == "function":
            _close(entry, error, tools.output(entry.scope, getattr(data, "output", None)))
        else:
            _close(entry, error, None)

    def _keep_handoff(self, span: Span[Any], entry: _Open, target: str) -> None:
        """Keep the handoff's op open for its target agent, and the agent that made it."""
        with self._lock:
            kept = self._traces.setdefault(span.trace_id, _Trace())
            entry.result = {"assistant": target}  # what the SDK tells the model
            kept.deferred.append(entry)
            kept.handoff, kept.target = entry, target
            agent = self._agent_of(entry)
            if agent is not None:
                agent.handed_off = True

    def _agent_of(self, entry: _Open) -> _Open | None:
        """The open agent whose run ``entry``'s op is in, found by its scope: the SDK's span
        parent of a handoff is its turn span (no scope of ours) since the SDK has turn spans.
        Called with the lock held."""
        session = getattr(entry.scope, "session", None)
        for other in self._open.values():
            if other.kind == "agent" and other.scope is session:
                return other
        return None

    def _end_deferred(self, kept: _Trace) -> None:
        for entry in sorted(kept.deferred, key=lambda e: e.seq, reverse=True):
            try:
                _close(entry, None, entry.result)
            except Exception as exc:
                report_internal_error(WHERE, exc)


def _close(entry: _Open, error: BaseException | None, result: Any) -> None:
    entry.opener.close(entry.scope, error, result)


class AgentsSpanError(Exception):
    """An Agents SDK span's error (``span.error``), as the failure its scope records; the
    exception the SDK raised, if any, reaches the program unchanged."""


def _error(span: Span[Any]) -> BaseException | None:
    error = span.error
    if not error:
        return None
    return AgentsSpanError(str(error.get("message") or "error"))
