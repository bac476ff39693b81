"""What an op cost: its accounting entry (docs/session-file.md, "Accounting entries"), and the
``op_accounted`` line that carries it into the event stream the moment the op ends.

The entry is made once from the attributes its span started and ended with. The same dict
becomes the op's ``accounting`` in the opTree, its line of the billing ledger and the
``accounting`` of its ``op_accounted`` stream line. An op that can carry a cost (an LLM attempt,
a tool call whose span has a non-zero ``agenttrace.cost.usd``) has it made in the caller's
thread when its scope ends and written there, so a process killed right after it returned has
already put what it paid for on disk. Any other tool call's entry is made and written later, by
agenttrace's worker or before the next paid op's lines, whichever comes first (docs/events.md,
"Accounting lines"): a kill can lose only the accounting of free tool calls that ended since the
last paid op.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from agenttrace import semconv as sc
from agenttrace.formats.compact_json import compact_json
from agenttrace.model.amounts import cost_written, latency_written

OP_ACCOUNTED = "op_accounted"
"""The ``event_type`` of a stream line that carries an op's accounting (no message id: it is
no part of any transcript)."""

ACCOUNTED_PREFIX = b'{"event_type": "op_accounted"'
"""How every ``op_accounted`` line agenttrace writes starts (``event_type`` first), so a scan
of a stream's bytes tells them from canonical events without decoding them."""


def accounting_entry(
    attributes: Mapping[str, Any],
    ended_ns: int,
    error: str | None,
    latency_ms: float,
    call_path: str | None,
) -> dict[str, Any]:
    """The accounting entry of an op whose span has ``attributes`` (those it started with and
    those set since, merged) and ended at ``ended_ns`` with ``error`` (``None``: success)."""
    entry: dict[str, Any] = {
        "timestamp": ended_ns // 1_000_000,
        "status": sc.STATUS_FAILED if error is not None else sc.STATUS_OK,
        "latency": latency_written(latency_ms),
        "type": "llm" if attributes.get(sc.KIND) == sc.KIND_LLM else "tool",
        "originTxnId": attributes.get(sc.TXN_ORIGIN),
        "txnId": attributes.get(sc.TXN_ID),
        "agentId": attributes.get(sc.AGENT_ID),
        "path": attributes.get(sc.PATH),
    }
    if entry["type"] == "llm":
        entry["provider"] = attributes.get(sc.GEN_AI_PROVIDER_NAME)
        entry["model"] = attributes.get(sc.GEN_AI_REQUEST_MODEL)
        served_by = attributes.get(sc.RESPONSE_PROVIDER)
        if served_by is not None:
            entry["actualProvider"] = served_by
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
        entry["costUsd"] = cost_written(attributes.get(sc.COST_USD))
        upstream = attributes.get(sc.COST_UPSTREAM_USD)
        if upstream is not None:
            entry["upstreamInferenceCostUsd"] = cost_written(upstream)
    else:
        name = attributes.get(sc.GEN_AI_TOOL_NAME)
        server = attributes.get(sc.TOOL_MCP_SERVER)
        # The tool's name when no provider is known, as every release wrote it.
        entry["providerLabel"] = attributes.get(sc.TOOL_PROVIDER) or server or name
        if server is not None:
            entry["mcpServer"] = server
        entry["command"] = name
        entry["charactersIn"] = attributes.get(sc.TOOL_CHARS_IN)
        entry["charactersOut"] = attributes.get(sc.TOOL_CHARS_OUT)
    if error:
        entry["error"] = error
        entry["errorType"] = attributes.get(sc.ERROR_TYPE)
    entry["callPath"] = call_path
    return entry


def op_accounted(
    entry: Mapping[str, Any],
    kind: str,
    name: str,
    ts: str,
    trace_id: str | None,
    span_id: str | None,
) -> dict[str, Any]:
    """The ``op_accounted`` stream line of an op (docs/events.md): what it was (``kind``:
    ``llm``, ``tool`` or ``session``; ``name``: the tool or the requested model), its
    ``accounting`` entry, and the linkage fields of its span."""
    event: dict[str, Any] = {
        "event_type": OP_ACCOUNTED,
        "agent_id": entry.get("agentId"),
        "kind": kind,
        "name": name,
        "accounting": entry,
        "ts": ts,
    }
    if trace_id is not None:
        event["trace_id"] = trace_id
        event["span_id"] = span_id
    event["path"] = entry.get("path")
    return event


_LINE = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "))


class Accounted:
    """An op's ``op_accounted`` event, with its accounting entry encoded once (compact JSON):
    the ledger line, the ``accounting`` of the stream line and the op's opTree entry are these
    very bytes. Immutable once made.

    ``inline``: its lines are written in the caller's thread as the op ends (an op that can
    carry a cost). Otherwise the event is made on first use, by ``make()`` (given no
    ``event``), from values that never change, and written off the caller's path.
    """

    __slots__ = ("_entry_json", "_event", "_make", "inline")

    def __init__(
        self,
        event: Mapping[str, Any] | None,
        inline: bool = True,
        make: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        self._event = event
        self._make = make
        self._entry_json: bytes | None = None
        self.inline = inline

    @property
    def event(self) -> Mapping[str, Any]:
        """The ``op_accounted`` event (a dict: treat it as read-only)."""
        event = self._event
        if event is None:  # made once; two threads making it at once make equal events
            event = self._event = self._make()  # type: ignore[misc]
        return event

    @property
    def entry_json(self) -> bytes:
        """The accounting entry as compact JSON, encoded once."""
        encoded = self._entry_json
        if encoded is None:
            encoded = self._entry_json = _compact(self.event["accounting"])
        return encoded

    @property
    def entry(self) -> Any:
        """The accounting entry (a dict: treat it as read-only)."""
        return self.event["accounting"]

    def ledger_line(self) -> bytes:
        """The entry as its line of the billing ledger."""
        return self.entry_json + b"\n"

    def stream_line(self) -> bytes:
        """The event as its line of the stream."""
        return accounted_line(self.event, self.entry_json)


_compact = compact_json


def accounted_line(event: Mapping[str, Any], entry_json: bytes | None = None) -> bytes:
    """An ``op_accounted`` event as its line of the stream: the stream's separators, its
    ``accounting`` the compact JSON of the ledger line (``entry_json``, if encoded already)."""
    if entry_json is None:
        entry_json = _compact(event["accounting"])
    fields = [_field(key, event[key]) for key in _HEAD if key in event]
    fields.append(b'"accounting": ' + entry_json)
    fields += [_field(key, event[key]) for key in _TAIL if key in event]
    return b"{" + b", ".join(fields) + b"}\n"


_HEAD = ("event_type", "agent_id", "kind", "name")
_TAIL = ("ts", "trace_id", "span_id", "path")


def _field(key: str, value: Any) -> bytes:
    # Text and null have no separators inside: compact JSON writes them as the stream does.
    if value is None or type(value) is str:
        encoded = compact_json(value)
    else:
        encoded = _LINE.encode(value).encode("utf-8", "backslashreplace")
    return b'"' + key.encode() + b'": ' + encoded


def is_accounted_line(line: bytes) -> bool:
    """Whether a line of a stream, as agenttrace writes them, is an ``op_accounted`` line."""
    return line.startswith(ACCOUNTED_PREFIX)
