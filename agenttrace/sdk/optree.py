"""The opTree of seed 002, built live from span starts and ends: ``SessionNode`` → ``TurnNode`` →
``OperationNode``, with ``childSession``s for sub-agents, logs, accounting, request/response and
reasoning.

Nodes are plain JSON-ready dicts. A node exists as soon as its span starts (``startedAt`` only,
"in progress") and is completed when it ends. Each span's place comes from its path label, so
the tree is right whatever order spans end in. The builder is a sink of our processor; it runs
on the background worker.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace.record.paths import Address, kind_of, parse_label
from agenttrace.sdk.processor import Sink, span_attributes

Node = dict[str, Any]


def _ms(nanoseconds: int | None) -> int | None:
    return nanoseconds // 1_000_000 if nanoseconds is not None else None


class RunTree:
    """One run (a root agent run and everything under it): its nodes by address."""

    def __init__(self, session_id: str, origin: str) -> None:
        self.session_id = session_id
        self.origin = origin
        self.nodes: dict[Address, Node] = {}
        self.root: Node | None = None
        self.finished = False

    def place(self, address: Address, node: Node) -> None:
        self.nodes[address] = node
        if not address:
            self.root = node
            return
        parent = self.nodes.get(address[:-1])
        if parent is None:
            return  # its parent is not ours (a span started before agenttrace was set up)
        kind = kind_of(address)
        if kind == "turn":
            parent.setdefault("turns", []).append(node)
        elif kind == "op":
            parent.setdefault("ops", []).append(node)
        else:
            children = parent.setdefault("childSessions", [])
            children.append(node)
            parent.setdefault("childSession", node)
            parent["kind"] = "session"


class OpTreeSink(Sink):
    """Builds every run's opTree and tells subscribers (throttled) when it changes."""

    def __init__(self) -> None:
        self.runs: dict[str, RunTree] = {}  # origin txn id -> run
        self._subscribers: list[_Subscriber] = []
        self._listeners: list[Callable[[str, RunTree, str], None]] = []
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

    def add_listener(self, listener: Callable[[str, RunTree, str], None]) -> None:
        """``listener(what, run, label)`` at the start and end of each node (the session file)."""
        self._listeners.append(listener)

    # -- the sink -----------------------------------------------------------------------------

    def on_start(self, span: ReadableSpan) -> None:
        attributes = span_attributes(span)
        label = attributes.get(sc.PATH)
        origin = attributes.get(sc.TXN_ORIGIN)
        if not isinstance(label, str) or not isinstance(origin, str):
            return
        address = parse_label(label)
        run = self.runs.get(origin)
        if run is None:
            if address:
                return  # a run whose root we never saw
            run = self.runs[origin] = RunTree(str(attributes.get(sc.SESSION_ID, origin)), origin)
        run.place(address, _new_node(span, address))
        self._changed(run, "start", label)

    def on_event(self, span: ReadableSpan, name: str, attributes: Mapping[str, Any]) -> None:
        node = self._node(span)
        if node is None:
            return
        if name == sc.EVENT_LOG:
            node.setdefault("logs", []).append(
                {
                    "ts": int(time.time() * 1000),
                    "level": attributes.get(sc.LOG_LEVEL),
                    "message": attributes.get(sc.LOG_MESSAGE),
                    "path": attributes.get(sc.PATH),
                    **(
                        {"details": attributes[sc.LOG_DETAILS]}
                        if sc.LOG_DETAILS in attributes
                        else {}
                    ),
                }
            )
        elif name == sc.EVENT_REASONING:
            reasoning = node.setdefault("reasoning", {"chunks": []})
            reasoning["chunks"].append(
                {"text": attributes.get(sc.REASONING_TEXT, ""), "ts": int(time.time() * 1000)}
            )

    def on_end(self, span: ReadableSpan) -> None:
        node = self._node(span)
        if node is None:
            return
        attributes = span_attributes(span)
        _complete(node, span, attributes)
        run = self.runs.get(str(attributes.get(sc.TXN_ORIGIN)))
        if run is None:
            return
        label = str(attributes.get(sc.PATH))
        if label == "0":
            run.finished = True
        self._changed(run, "end", label)

    # -- helpers ------------------------------------------------------------------------------

    def _node(self, span: ReadableSpan) -> Node | None:
        attributes = span_attributes(span)
        run = self.runs.get(str(attributes.get(sc.TXN_ORIGIN)))
        label = attributes.get(sc.PATH)
        if run is None or not isinstance(label, str):
            return None
        return run.nodes.get(parse_label(label))

    def _changed(self, run: RunTree, what: str, label: str) -> None:
        for listener in self._listeners:
            try:
                listener(what, run, label)
            except Exception as exc:
                report_internal_error("opTree listener", exc)
        if run.root is None:
            return
        final = what == "end" and label == "0"
        for subscriber in self._subscribers:
            subscriber.offer(run.root, final)

    def runs_of(self, session_id: str) -> list[Node]:
        """The root SessionNodes of this process's runs of ``session_id``, oldest first."""
        return [r.root for r in self.runs.values() if r.session_id == session_id and r.root]


class _Subscriber:
    def __init__(self, callback: Callable[[Node], None], min_interval: float) -> None:
        self.callback = callback
        self.min_interval = min_interval
        self.last = 0.0

    def offer(self, root: Node, final: bool) -> None:
        now = time.monotonic()
        if not final and now - self.last < self.min_interval:
            return
        self.last = now
        try:
            self.callback(root)
        except Exception as exc:  # a subscriber's bug must not stop the others
            report_internal_error("onOpTree subscriber", exc)


# --- nodes --------------------------------------------------------------------------------------

_SESSION_ATTRIBUTES = (sc.CALL_PATH, sc.AGENT_MODEL, sc.RESUMED_FROM, sc.IMPLICIT)


def _new_node(span: ReadableSpan, address: Address) -> Node:
    attributes = span_attributes(span)
    context = span.get_span_context()
    started = _ms(span.start_time)
    label = attributes.get(sc.PATH)
    kind = attributes.get(sc.KIND)
    if kind == sc.KIND_SESSION and kind_of(address) == "session":
        node: Node = {
            "id": attributes.get(sc.TXN_ID),
            "traceId": format(context.trace_id, "032x") if context else None,
            "spanId": format(context.span_id, "016x") if context else None,
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
        }
        return node
    if kind == sc.KIND_TURN:
        return {
            "id": format(context.span_id, "016x") if context else None,
            "index": attributes.get(sc.TURN_INDEX),
            "path": label,
            "startedAt": started,
            "attributes": {sc.IMPLICIT: True} if attributes.get(sc.IMPLICIT) else {},
            "ops": [],
        }
    return {
        "opId": format(context.span_id, "016x") if context else None,
        "path": label,
        "kind": kind,
        "name": attributes.get(sc.GEN_AI_TOOL_NAME) or attributes.get(sc.GEN_AI_REQUEST_MODEL),
        "startedAt": started,
        "attributes": {},
        "logs": [],
        "accounting": [],
    }


def _complete(node: Node, span: ReadableSpan, attributes: Mapping[str, Any]) -> None:
    node["endedAt"] = _ms(span.end_time)
    failed = attributes.get(sc.STATUS) == sc.STATUS_FAILED
    error = span.status.description if failed else None
    if "turns" in node:  # a session
        node["success"] = not failed
        node["error"] = error
        node["latencyMs"] = attributes.get(sc.LATENCY_MS)
        return
    if "ops" in node:  # a turn
        return
    node["status"] = sc.STATUS_FAILED if failed else sc.STATUS_OK
    node["latencyMs"] = attributes.get(sc.LATENCY_MS)
    if node.get("kind") != attributes.get(sc.KIND):
        node["kind"] = attributes.get(sc.KIND)
    if error:
        node["error"] = error
    if attributes.get(sc.ERROR_TYPE):
        node["attributes"]["errorType"] = attributes[sc.ERROR_TYPE]
    node["accounting"].append(_accounting(attributes, span, error))
    _payloads(node, attributes)


def _accounting(attributes: Mapping[str, Any], span: ReadableSpan, error: str | None) -> Node:
    entry: Node = {
        "timestamp": _ms(span.end_time),
        "status": attributes.get(sc.STATUS),
        "latency": attributes.get(sc.LATENCY_MS),
        "type": "llm" if attributes.get(sc.KIND) == sc.KIND_LLM else "tool",
        "originTxnId": attributes.get(sc.TXN_ORIGIN),
        "txnId": attributes.get(sc.TXN_ID),
        "agentId": attributes.get(sc.AGENT_ID),
        "path": attributes.get(sc.PATH),
    }
    if entry["type"] == "llm":
        entry["provider"] = attributes.get(sc.GEN_AI_PROVIDER_NAME)
        entry["model"] = attributes.get(sc.GEN_AI_REQUEST_MODEL)
        entry["actualModel"] = attributes.get(sc.GEN_AI_RESPONSE_MODEL)
        entry["attempt"] = attributes.get(sc.ATTEMPT)
        input_tokens = attributes.get(sc.GEN_AI_USAGE_INPUT_TOKENS)
        output_tokens = attributes.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS)
        entry["tokens"] = {
            "inputTokens": input_tokens,
            "outputTokens": output_tokens,
            "cacheReadInputTokens": attributes.get(sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, 0),
            "cacheWriteInputTokens": attributes.get(sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, 0),
            "reasoningTokens": attributes.get(sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS, 0),
            "totalTokens": (input_tokens or 0) + (output_tokens or 0),
        }
        entry["costUsd"] = attributes.get(sc.COST_USD)
    else:
        entry["providerLabel"] = attributes.get(sc.GEN_AI_TOOL_NAME)
        entry["charactersIn"] = attributes.get(sc.TOOL_CHARS_IN)
        entry["charactersOut"] = attributes.get(sc.TOOL_CHARS_OUT)
    if error:
        entry["error"] = error
        entry["errorType"] = attributes.get(sc.ERROR_TYPE)
    return entry


def _payloads(node: Node, attributes: Mapping[str, Any]) -> None:
    for key, side, kind in (
        (sc.GEN_AI_INPUT_MESSAGES, "request", "llm"),
        (sc.GEN_AI_TOOL_CALL_ARGUMENTS, "request", "tool"),
        (sc.GEN_AI_OUTPUT_MESSAGES, "response", None),
        (sc.GEN_AI_TOOL_CALL_RESULT, "response", None),
    ):
        value = attributes.get(key)
        if isinstance(value, str):
            # The payload as recorded on the span (capped, redacted JSON text): parsing it for
            # every op would cost the worker more than the rest of the node.
            entry: Node = {"payload": value, "size": len(value)}
            if kind is not None:
                entry["kind"] = kind
            node[side] = entry


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
