"""Sessions made from documents of other formats (STD-008, ATIF): an opTree and an event stream
built as agenttrace would have recorded the same agents, so every view reads them.

A reader of a format maps it onto the pieces here: :class:`Builder` numbers path labels, makes
the ids (derived from the document, so reading it twice gives the same session), gives every
node its span as if sent (names and attributes of docs/session-file.md), and logs the canonical
events (docs/events.md) on those spans. What the format says that agenttrace keeps nowhere else
(its ids, types, categories) goes on the spans as attributes, where an export finds it again.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agenttrace import semconv as sc
from agenttrace._internal.config import DEFAULT_MAX_PAYLOAD_BYTES
from agenttrace._internal.times import MAX_EPOCH_NS, MAX_MS, clamp_ms, ms_iso
from agenttrace._version import __version__
from agenttrace.formats.session.files import LoadedFile
from agenttrace.formats.session.schema import SESSION_ID_PATTERN
from agenttrace.model.paths import Address, format_label

_SESSION_ID = re.compile(SESSION_ID_PATTERN)


def _duration(ms: float) -> float:
    """A duration as the document gives it (an int stays an int), within the opTree's range."""
    return ms if 0 <= ms <= MAX_MS else clamp_ms(ms)


def derived_id(seed: str, length: int) -> str:
    """``length`` hex digits made from ``seed``: the same document gives the same ids."""
    digest = hashlib.sha256(seed.encode("utf-8", "surrogatepass")).hexdigest()[:length]
    return digest if digest.strip("0") else "1".rjust(length, "0")


def plain_id(value: Any, seed: str) -> str:
    """``value`` if it can name a session or run (a plain file-name stem), else 16 hex digits
    derived from ``seed``."""
    if isinstance(value, str) and _SESSION_ID.search(value):
        return value
    return derived_id(seed, 16)


def json_text(value: Any) -> str:
    """``value`` as an agent would have recorded it: a string as it is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


@dataclass
class Node:
    """A node being built: the dict that goes into the opTree, and where it is."""

    data: dict[str, Any]
    address: Address
    span_id: str
    started_ms: int
    agent_id: str
    txn_id: str
    call_path: str = ""
    turn: dict[str, Any] | None = None
    """The turn new ops go into (an agent run's; None before its first)."""
    children: int = 0
    ops: int = 0
    """Ops of the current turn so far."""

    @property
    def label(self) -> str:
        return format_label(self.address)


@dataclass
class Builder:
    """Builds the runs of a session, one after the other: their opTrees and their events, in
    the order they happened."""

    session_id: str
    source: str
    """The format read (``std008``, ``atif``): the run's ingress source."""
    started_ms: int
    trace_id: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)
    agents: set[str] = field(default_factory=set)
    trace_ids: list[str] = field(default_factory=list)
    """The trace of each run begun so far (each run is a trace of its own)."""
    _txn_ids: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.trace_id = derived_id(f"{self.source}:{self.session_id}", 32)

    # -- nodes --------------------------------------------------------------------------------

    def root(
        self,
        agent_id: str,
        name: str,
        attributes: Mapping[str, Any],
        model: str | None = None,
        txn_hint: Any = None,
        started_ms: int | None = None,
    ) -> Node:
        """A run's root: the agent that ran it all (the orchestrator). The first run starts at
        the builder's time and its txn id is the session id unless ``txn_hint`` names one; each
        further run (called again, once the one before is built) is a trace of its own."""
        runs = len(self.trace_ids)
        if runs:
            self.trace_id = derived_id(f"{self.source}:{self.session_id}:{runs}", 32)
        self.trace_ids.append(self.trace_id)
        txn = self._txn(self.session_id if txn_hint is None else txn_hint, f"root/{runs}")
        started = self.started_ms if started_ms is None else clamp_ms(started_ms)
        node_attributes: dict[str, Any] = {
            "ingress": {"source": self.source},
            sc.CALL_PATH: name,
        }
        if model:
            node_attributes[sc.AGENT_MODEL] = model
        node = self._session(agent_id, name, txn, (), None, started, node_attributes)
        node.data.update(
            {
                "parentTxnId": None,
                "resource": {
                    "attributes": {
                        "service.name": "agenttrace",
                        sc.IMPORT_FORMAT: self.source,
                        sc.SESSION_ID: self.session_id,
                    }
                },
                "scope": {"name": "agenttrace", "version": __version__},
                "recording": {"captureContent": True, "maxPayloadBytes": DEFAULT_MAX_PAYLOAD_BYTES},
            }
        )
        node.data["span"]["attributes"].update(attributes)
        return node

    def child(
        self,
        op: Node,
        parent: Node,
        agent_id: str,
        name: str,
        txn_hint: Any,
        started_ms: int,
        attributes: Mapping[str, Any],
    ) -> Node:
        """A sub-agent run hosted by ``op`` (a tool call of ``parent``'s run)."""
        op.children += 1
        txn = self._txn(txn_hint, f"{parent.txn_id}/{op.label}/{op.children}")
        call_path = f"{parent.call_path}/{name}"
        node_attributes: dict[str, Any] = {
            "ingress": {"source": "sub-agent", "sub_agent": {"tool_name": op.data["name"]}},
            sc.CALL_PATH: call_path,
        }
        node = self._session(
            agent_id,
            name,
            txn,
            (*op.address, op.children),
            op.span_id,
            started_ms,
            node_attributes,
        )
        node.data["parentTxnId"] = parent.txn_id
        node.data["span"]["attributes"][sc.TXN_PARENT] = parent.txn_id
        node.data["span"]["attributes"].update(attributes)
        op.data["kind"] = sc.KIND_SESSION
        op.data["span"]["attributes"][sc.KIND] = sc.KIND_SESSION
        # As agenttrace writes them (docs/session-file.md): one run under ``childSession``,
        # several under ``childSessions``, never both (each run written once).
        first = op.data.pop("childSession", None)
        if first is not None:
            op.data["childSessions"] = [first, node.data]
        elif "childSessions" in op.data:
            op.data["childSessions"].append(node.data)
        else:
            op.data["childSession"] = node.data
        return node

    def _txn(self, hint: Any, seed: str) -> str:
        txn = plain_id(hint, f"{self.session_id}/{seed}")
        if txn in self._txn_ids:  # a document that repeats an id: told apart
            txn = derived_id(f"{self.session_id}/{seed}/{len(self._txn_ids)}", 16)
        self._txn_ids.add(txn)
        return txn

    def _session(
        self,
        agent_id: str,
        name: str,
        txn: str,
        address: Address,
        parent_span: str | None,
        started_ms: int,
        attributes: dict[str, Any],
    ) -> Node:
        span_id = derived_id(f"{self.trace_id}/session/{txn}", 16)
        label = format_label(address)
        origin = self.session_id if address else txn
        span_attributes: dict[str, Any] = {
            sc.TXN_ID: txn,
            sc.TXN_ORIGIN: origin,
            sc.AGENT_ID: agent_id,
            sc.KIND: sc.KIND_SESSION,
            sc.PATH: label,
            sc.GEN_AI_OPERATION_NAME: sc.OP_INVOKE_AGENT,
            sc.GEN_AI_AGENT_NAME: name,
            sc.GEN_AI_AGENT_ID: agent_id,
            sc.GEN_AI_CONVERSATION_ID: self.session_id,
            sc.SESSION_ID: self.session_id,
            sc.CALL_PATH: attributes[sc.CALL_PATH],
        }
        data: dict[str, Any] = {
            "id": txn,
            "traceId": self.trace_id,
            "spanId": span_id,
            "path": label,
            "agentId": agent_id,
            "agentName": name,
            "callPath": attributes[sc.CALL_PATH],
            "txnId": txn,
            "originTxnId": origin,
            "sessionId": self.session_id,
            "startedAt": started_ms,
            "attributes": attributes,
            "span": self._span(
                sc.SPAN_SESSION.format(name=name), span_id, parent_span, started_ms, span_attributes
            ),
            "turns": [],
        }
        return Node(data, address, span_id, started_ms, agent_id, txn, attributes[sc.CALL_PATH])

    def op(
        self,
        run: Node,
        name: str,
        started_ms: int,
        arguments: str | None,
        attributes: Mapping[str, Any],
    ) -> Node:
        """A tool call of ``run``'s agent (its ``arguments`` as recorded JSON text)."""
        turn = run.turn if run.turn is not None else self.turn(run, started_ms)
        run.ops += 1
        address = (*turn_address(run), run.ops)
        label = format_label(address)
        span_id = derived_id(f"{self.trace_id}/op/{run.txn_id}/{label}", 16)
        span_attributes: dict[str, Any] = {
            sc.TXN_ID: run.txn_id,
            sc.TXN_ORIGIN: self.session_id,
            sc.AGENT_ID: run.agent_id,
            sc.KIND: sc.KIND_TOOL,
            sc.PATH: label,
            sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
            sc.GEN_AI_TOOL_NAME: name,
            **attributes,
        }
        data: dict[str, Any] = {
            "opId": span_id,
            "path": label,
            "kind": sc.KIND_TOOL,
            "name": name,
            "startedAt": started_ms,
            "attributes": {},
            "logs": [],
            "accounting": [],
            "span": self._span(
                sc.SPAN_TOOL.format(name=name), span_id, turn["id"], started_ms, span_attributes
            ),
        }
        if arguments is not None:
            data["request"] = {"payload": arguments, "size": len(arguments), "kind": "tool"}
            span_attributes[sc.TOOL_CHARS_IN] = len(arguments)
            span_attributes[sc.GEN_AI_TOOL_CALL_ARGUMENTS] = arguments
        turn["ops"].append(data)
        return Node(data, address, span_id, started_ms, run.agent_id, run.txn_id, run.call_path)

    def turn(self, run: Node, started_ms: int) -> dict[str, Any]:
        """Open ``run``'s next turn, where the ops that follow go. A document without turns
        (STD-008) gets one, opened by its first op, holding all of them."""
        index = len(run.data["turns"]) + 1
        run.ops = 0
        label = format_label((*run.address, index))
        span_id = derived_id(f"{self.trace_id}/turn/{run.txn_id}/{index}", 16)
        attributes = {
            sc.TXN_ID: run.txn_id,
            sc.TXN_ORIGIN: self.session_id,
            sc.AGENT_ID: run.agent_id,
            sc.KIND: sc.KIND_TURN,
            sc.PATH: label,
            sc.TURN_INDEX: index,
            sc.IMPLICIT: True,
        }
        start = max(started_ms, run.started_ms)
        run.turn = {
            "id": span_id,
            "index": index,
            "path": label,
            "startedAt": start,
            "attributes": {sc.IMPLICIT: True},
            "span": self._span(
                sc.SPAN_TURN.format(index=index), span_id, run.span_id, start, attributes
            ),
            "ops": [],
        }
        run.data["turns"].append(run.turn)
        return run.turn

    def llm(
        self,
        run: Node,
        model: str,
        started_ms: int,
        tokens: Mapping[str, int | None],
        cost: float | None,
        latency_ms: float = 0,
    ) -> Node:
        """An LLM attempt of ``run``'s agent that answered, opening a turn, with what it
        used: ``tokens`` has ``input``, ``output`` and ``cache_read`` (each may be None)."""
        latency_ms = _duration(latency_ms)
        turn = self.turn(run, started_ms)
        run.ops += 1
        address = (*turn_address(run), run.ops)
        label = format_label(address)
        span_id = derived_id(f"{self.trace_id}/llm/{run.txn_id}/{label}", 16)
        provider, _, short = model.rpartition("/")
        inputs, outputs = tokens.get("input"), tokens.get("output")
        cache = tokens.get("cache_read") or 0
        attributes: dict[str, Any] = {
            sc.TXN_ID: run.txn_id,
            sc.TXN_ORIGIN: self.session_id,
            sc.AGENT_ID: run.agent_id,
            sc.KIND: sc.KIND_LLM,
            sc.PATH: label,
            sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
            sc.GEN_AI_REQUEST_MODEL: short,
            sc.GEN_AI_RESPONSE_MODEL: short,
        }
        if provider:
            attributes[sc.GEN_AI_PROVIDER_NAME] = provider
        for key, value in (
            (sc.GEN_AI_USAGE_INPUT_TOKENS, inputs),
            (sc.GEN_AI_USAGE_OUTPUT_TOKENS, outputs),
            (sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, cache or None),
            (sc.COST_USD, cost),
        ):
            if value is not None:
                attributes[key] = value
        span = self._span(
            sc.SPAN_LLM.format(model=short), span_id, turn["id"], started_ms, attributes
        )
        span["kind"] = "CLIENT"
        self._end_span(span, started_ms, latency_ms, None)
        ended_ms = clamp_ms(started_ms + latency_ms)
        entry: dict[str, Any] = {
            "timestamp": ended_ms,
            "status": "ok",
            "latency": latency_ms,
            "type": "llm",
            "originTxnId": self.session_id,
            "txnId": run.txn_id,
            "agentId": run.agent_id,
            "path": label,
            "provider": provider or None,
            "model": short,
            "actualModel": short,
            "attempt": 1,
            "tokens": {
                "inputTokens": inputs,
                "outputTokens": outputs,
                "cacheReadInputTokens": cache,
                "cacheWriteInputTokens": 0,
                "reasoningTokens": 0,
                "totalTokens": (inputs or 0) + (outputs or 0),
            },
            "costUsd": cost,
            "callPath": run.call_path,
        }
        data: dict[str, Any] = {
            "opId": span_id,
            "path": label,
            "kind": sc.KIND_LLM,
            "name": short,
            "startedAt": started_ms,
            "attributes": {},
            "logs": [],
            "span": span,
            "endedAt": ended_ms,
            "status": "ok",
            "latencyMs": latency_ms,
            "accounting": [entry],
        }
        turn["ops"].append(data)
        return Node(data, address, span_id, started_ms, run.agent_id, run.txn_id, run.call_path)

    def end_op(
        self,
        op: Node,
        ended_ms: int | None,
        latency_ms: float | None,
        error: str | None,
        result: str | None,
    ) -> None:
        """End ``op`` (``ended_ms`` None: it never did), failed if ``error``."""
        if result is not None:
            op.data["response"] = {"payload": result, "size": len(result)}
            op.data["span"]["attributes"][sc.GEN_AI_TOOL_CALL_RESULT] = result
        if ended_ms is None:
            return
        ended_ms = clamp_ms(max(ended_ms, op.started_ms))
        latency = ended_ms - op.started_ms if latency_ms is None else _duration(latency_ms)
        failed = error is not None
        chars_in = op.data.get("request", {}).get("size", 0)
        chars_out = None if failed else (len(result) if result is not None else 0)
        op.data.update(
            {"endedAt": ended_ms, "status": "failed" if failed else "ok", "latencyMs": latency}
        )
        entry: dict[str, Any] = {
            "timestamp": ended_ms,
            "status": "failed" if failed else "ok",
            "latency": latency,
            "type": "tool",
            "originTxnId": self.session_id,
            "txnId": op.txn_id,
            "agentId": op.agent_id,
            "path": op.label,
            "providerLabel": op.data["name"],
            "charactersIn": chars_in,
            "charactersOut": chars_out,
            "callPath": op.call_path,
        }
        if failed:
            op.data["error"] = error
            op.data["attributes"]["errorType"] = IMPORTED_ERROR
            entry.update(error=error, errorType=IMPORTED_ERROR)
            op.data["span"]["attributes"][sc.ERROR_TYPE] = IMPORTED_ERROR
        elif chars_out is not None:
            op.data["span"]["attributes"][sc.TOOL_CHARS_OUT] = chars_out
        op.data["accounting"].append(entry)
        self._end_span(op.data["span"], op.started_ms, latency, error)

    def end_run(
        self, run: Node, ended_ms: int | None, latency_ms: float | None, error: str | None
    ) -> None:
        """End ``run`` (``ended_ms`` None: it never did), failed if ``error``."""
        if ended_ms is None:
            return
        ended_ms = clamp_ms(max(ended_ms, run.started_ms))
        latency = ended_ms - run.started_ms if latency_ms is None else _duration(latency_ms)
        run.data.update(
            {"endedAt": ended_ms, "success": error is None, "error": error, "latencyMs": latency}
        )
        self._end_span(run.data["span"], run.started_ms, latency, error)
        turns = run.data["turns"]
        for index, turn in enumerate(turns):
            # A turn ends when the next begins (the last with the run), or with its last op.
            ends = [op.get("endedAt", 0) for op in turn["ops"]]
            ends.append(turns[index + 1]["startedAt"] if index + 1 < len(turns) else ended_ms)
            last = clamp_ms(max(turn["startedAt"], *ends))
            turn["endedAt"] = last
            self._end_span(turn["span"], turn["startedAt"], last - turn["startedAt"], None)

    def _span(
        self,
        name: str,
        span_id: str,
        parent: str | None,
        started_ms: int,
        attributes: dict[str, Any],
    ) -> dict[str, Any]:
        return {
            "name": name,
            "kind": "INTERNAL",
            "traceId": self.trace_id,
            "spanId": span_id,
            "parentSpanId": parent,
            "startTimeUnixNano": started_ms * 1_000_000,
            "attributes": attributes,
            "events": [],
        }

    @staticmethod
    def _end_span(span: dict[str, Any], started_ms: int, latency: float, error: str | None) -> None:
        end = started_ms * 1_000_000 + max(0, round(latency * 1_000_000))
        span["endTimeUnixNano"] = min(end, MAX_EPOCH_NS)
        span["status"] = (
            {"code": "ERROR", "message": error} if error is not None else {"code": "UNSET"}
        )

    # -- events -------------------------------------------------------------------------------

    @staticmethod
    def span_event(node: Node, ts_ms: int, name: str, attributes: Mapping[str, Any]) -> None:
        """Add a span event (no canonical event) to ``node``'s span, at ``ts_ms``."""
        node.data["span"]["events"].append(
            {"name": name, "timeUnixNano": clamp_ms(ts_ms) * 1_000_000, "attributes": attributes}
        )

    def event(self, node: Node, ts_ms: int, **fields: Any) -> str:
        """Log a canonical event on ``node``'s span; its message id."""
        message_id = f"msg_{len(self.events) + 1:03d}"
        event = {
            "message_id": message_id,
            **{key: value for key, value in fields.items() if value is not None},
            "ts": ms_iso(ts_ms),
            "trace_id": self.trace_id,
            "span_id": node.span_id,
            "path": node.label,
        }
        self.events.append(event)
        return message_id

    def created(
        self,
        node: Node,
        ts_ms: int,
        agent_id: str,
        name: str | None,
        model: str | None = None,
        cause: str | None = None,
    ) -> None:
        """The agent's ``agent_created``, the first time it appears."""
        if agent_id in self.agents:
            return
        self.agents.add(agent_id)
        self.event(
            node,
            ts_ms,
            event_type="agent_created",
            agent_id=agent_id,
            name=name,
            language_model=model,
            cause=cause,
        )

    # -- the result ---------------------------------------------------------------------------

    def loaded(self, path: Path, *roots: Node) -> LoadedFile:
        """The session built: its runs (``roots``, in order), its events, and the metadata a
        session file has (the result is the last run's)."""
        last = roots[-1]
        ended = last.data.get("endedAt")
        meta: dict[str, Any] = {
            "createdAt": roots[0].started_ms,
            "updatedAt": ended if isinstance(ended, int) else last.started_ms,
            "result": {"success": last.data.get("success"), "error": last.data.get("error")},
            "ingress": {"source": self.source},
            "trace_ids": list(self.trace_ids) or [self.trace_id],
            "session_id": self.session_id,
        }
        runs = [root.data for root in roots]
        return LoadedFile(path, self.source, self.events, runs, meta, self.session_id)


IMPORTED_ERROR = "ImportedError"
"""The ``error.type`` of a call or run a document says failed (it names no exception)."""


def turn_address(run: Node) -> Address:
    """The address of ``run``'s current turn."""
    return (*run.address, len(run.data["turns"]))
