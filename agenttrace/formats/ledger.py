"""What an op cost: its accounting entry (docs/session-file.md, "Accounting entries"), and the
``op_accounted`` line that carries it into the event stream the moment the op ends.

The entry is an :class:`AccountingEntry` (the struct the session file's schema reads it back
with), made once from the op's outcome (``agenttrace.model.outcome``) by
:func:`accounting_entry`. Its compact JSON is the op's line of the billing ledger and the
``accounting`` of its ``op_accounted`` stream line, and the same entry is the op's
``accounting`` in the opTree. An op that can carry a cost (an LLM attempt,
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
from typing import Any, Final

import msgspec
from msgspec import UNSET

from agenttrace import semconv as sc
from agenttrace.formats.compact_json import compact_json
from agenttrace.formats.session.schema import OP_ACCOUNTED, AccountingEntry, Tokens
from agenttrace.model.amounts import cost_written, latency_written
from agenttrace.model.outcome import OpOutcome, Usage

ACCOUNTED_PREFIX = b'{"event_type": "op_accounted"'
"""How every ``op_accounted`` line agenttrace writes starts (``event_type`` first), so a scan
of a stream's bytes tells them from canonical events without decoding them."""


def accounting_entry(op: OpOutcome) -> AccountingEntry:
    """The accounting entry of the op that came to ``op``: its line of the billing ledger, and
    the ``accounting`` of its opTree node and of its ``op_accounted`` stream line. (Every
    field is spelled out, in both branches: this runs in the caller's thread of each LLM
    attempt.)"""
    status: Any = sc.STATUS_FAILED if op.error is not None else sc.STATUS_OK
    error = op.error or UNSET  # an empty description is no error to write
    error_type = op.error_type if op.error else UNSET
    if op.is_llm:
        usage = op.usage or _NO_USAGE
        cost, upstream = op.cost_usd, op.upstream_cost_usd
        return AccountingEntry(
            timestamp=op.ended_ns // 1_000_000,
            status=status,
            latency=latency_written(op.latency_ms),
            type="llm",
            originTxnId=op.origin_txn_id,
            txnId=op.txn_id,
            parentTxnId=op.parent_txn_id,
            agentId=op.agent_id,
            path=op.path,
            provider=op.provider,
            model=op.request_model,
            actualProvider=op.response_provider if op.response_provider is not None else UNSET,
            actualModel=op.response_model,
            attempt=op.attempt,
            tokens=Tokens(
                inputTokens=usage.input,
                outputTokens=usage.output,
                cacheReadInputTokens=usage.cache_read,
                cacheWriteInputTokens=usage.cache_write,
                reasoningTokens=usage.reasoning,
                totalTokens=usage.total,
            ),
            costUsd=cost_written(cost) if cost is not None else None,
            upstreamInferenceCostUsd=cost_written(upstream) if upstream is not None else UNSET,
            mocked=True if op.mocked else UNSET,
            error=error,
            errorType=error_type,
            callPath=op.call_path,
        )
    return AccountingEntry(
        timestamp=op.ended_ns // 1_000_000,
        status=status,
        latency=latency_written(op.latency_ms),
        type="tool",
        originTxnId=op.origin_txn_id,
        txnId=op.txn_id,
        parentTxnId=op.parent_txn_id,
        agentId=op.agent_id,
        path=op.path,
        # The tool's name when no provider is known, as every release wrote it.
        providerLabel=op.tool_provider or op.mcp_server or op.tool_name,
        mcpServer=op.mcp_server if op.mcp_server is not None else UNSET,
        command=op.tool_name,
        charactersIn=op.chars_in,
        charactersOut=op.chars_out,
        error=error,
        errorType=error_type,
        callPath=op.call_path,
    )


_NO_USAGE = Usage(None, None)

DECIDED_ERRORS = {
    "not_applied": "the call did not happen (agenttrace resolve --not-applied): a resume runs it",
    "retry": "the call is to be run again whatever happened (agenttrace resolve --retry)",
    "abandon": "the call was abandoned (agenttrace resolve --abandon)",
}
"""What the ledger line of a decision other than ``done`` says the call came to."""


def decided_entry(
    *,
    origin: str,
    txn_id: str,
    agent_id: str,
    path: str,
    name: str,
    decision: str,
    arguments: str | None,
    result: str | None,
    evidence: str | None,
    started_ms: int,
    ended_ms: int,
    call_path: str | None,
    parent_txn_id: Any = UNSET,
) -> AccountingEntry:
    """The accounting entry of a tool call a kill left in doubt, as a person decided it
    (``agenttrace resolve``): status ok with ``--done`` (it happened; ``result`` is what it
    returned), else failed, the decision saying why. ``ended_ms``: the last the session's
    files know of it (when it was killed is written nowhere). ``parent_txn_id``: its run's
    (:func:`parent_of`), left out when its run is not known."""
    done = decision == "done"
    return AccountingEntry(
        timestamp=ended_ms,
        status=sc.STATUS_OK if done else sc.STATUS_FAILED,
        latency=latency_written(float(max(0, ended_ms - started_ms))),
        type="tool",
        originTxnId=origin,
        txnId=txn_id,
        parentTxnId=parent_txn_id,
        agentId=agent_id,
        path=path,
        providerLabel=name,
        command=name,
        charactersIn=len(arguments) if arguments is not None else None,
        charactersOut=len(result) if done and result is not None else None,
        error=UNSET if done else DECIDED_ERRORS.get(decision, decision),
        errorType=UNSET if done else "InDoubtToolCall",
        callPath=call_path,
        decision=decision,  # type: ignore[arg-type]  # one of the four resolve takes
        evidence=evidence if evidence else UNSET,
    )


def parent_of(owner: Mapping[str, Any] | None) -> Any:
    """The ``parentTxnId`` an entry of the agent run ``owner`` (its SessionNode) carries: the
    run's own (``None`` for a root), or ``UNSET`` (left out) when the run is not known or its
    file does not say."""
    if not owner or "parentTxnId" not in owner:
        return UNSET
    parent = owner["parentTxnId"]
    return parent if parent is None or isinstance(parent, str) else UNSET


INTERRUPTED: Final = "interrupted"
"""The status of the accounting entry of an LLM attempt a kill cut short
(:func:`interrupted_entry`)."""
INTERRUPTED_ERROR = (
    "the process was killed while the request was in flight: the provider may have answered "
    "it, and billed it (its tokens and cost are not known here)"
)
INTERRUPTED_TYPE = "InterruptedLLMCall"


def interrupted_entry(
    *,
    origin: str,
    txn_id: str,
    agent_id: str,
    path: str,
    model: str,
    attempt: int,
    started_ms: int,
    ended_ms: int,
    call_path: str | None,
    parent_txn_id: Any = UNSET,
) -> AccountingEntry:
    """The accounting entry of an LLM attempt a kill cut short (its journal ``intent`` and no
    outcome), written once by the process that takes its session over: status
    ``interrupted``, ``providerMayHaveBilled``, its model (the intent's name), no tokens and a
    cost of ``null`` (unknown: nothing is known of what the provider did with it). ``ended_ms``:
    the last record of the killed process (when it died is written nowhere)."""
    return AccountingEntry(
        timestamp=ended_ms,
        status=INTERRUPTED,
        latency=latency_written(float(max(0, ended_ms - started_ms))),
        type="llm",
        originTxnId=origin,
        txnId=txn_id,
        parentTxnId=parent_txn_id,
        agentId=agent_id,
        path=path,
        provider=None,
        model=model or None,
        actualModel=None,
        attempt=attempt,
        tokens=Tokens(
            inputTokens=None,
            outputTokens=None,
            cacheReadInputTokens=0,
            cacheWriteInputTokens=0,
            reasoningTokens=0,
            totalTokens=0,
        ),
        costUsd=None,
        error=INTERRUPTED_ERROR,
        errorType=INTERRUPTED_TYPE,
        callPath=call_path,
        providerMayHaveBilled=True,
    )


def is_interrupted_entry(entry: Any) -> bool:
    """Whether ``entry`` (an accounting entry, as read) is an interrupted LLM attempt's."""
    if isinstance(entry, AccountingEntry):
        return entry.type == "llm" and entry.status == INTERRUPTED
    return (
        isinstance(entry, Mapping)
        and entry.get("type") == "llm"
        and entry.get("status") == INTERRUPTED
    )


def op_accounted(
    entry: AccountingEntry | Mapping[str, Any],
    kind: str,
    name: str,
    ts: str,
    trace_id: str | None,
    span_id: str | None,
) -> dict[str, Any]:
    """The ``op_accounted`` stream line of an op (docs/events.md): what it was (``kind``:
    ``llm``, ``tool`` or ``session``; ``name``: the tool or the requested model), its
    ``accounting`` entry, and the linkage fields of its span."""
    agent_id: Any
    path: Any
    if isinstance(entry, AccountingEntry):
        agent_id, path = entry.agentId, entry.path
    else:
        agent_id, path = entry.get("agentId"), entry.get("path")
    event: dict[str, Any] = {
        "event_type": OP_ACCOUNTED,
        "agent_id": agent_id,
        "kind": kind,
        "name": name,
        "accounting": entry,
        "ts": ts,
    }
    if trace_id is not None:
        event["trace_id"] = trace_id
        event["span_id"] = span_id
    event["path"] = path
    return event


_LINE = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "))


class Accounted:
    """An op's outcome and what the ledger and the stream write of it: its accounting entry,
    encoded once (compact JSON), and its ``op_accounted`` event. The ledger line, the
    ``accounting`` of the stream line and the op's opTree entry are these very bytes. Immutable
    once made.

    ``inline``: its lines are written in the caller's thread as the op ends (an op that can
    carry a cost). Otherwise the outcome is made on first use, by ``make()`` (given no
    ``op``), from values that never change, and written off the caller's path.
    """

    __slots__ = ("_entry", "_entry_json", "_event", "_make", "_op", "inline", "ts")

    def __init__(
        self,
        op: OpOutcome | None,
        ts: str,
        inline: bool = True,
        make: Callable[[], OpOutcome] | None = None,
    ) -> None:
        self._op = op
        self._make = make
        self._event: dict[str, Any] | None = None
        self._entry: AccountingEntry | None = None
        self._entry_json: bytes | None = None
        self.ts = ts
        """When the op ended, as an event's ``ts``."""
        self.inline = inline

    @property
    def op(self) -> OpOutcome:
        """The op's outcome."""
        op = self._op
        if op is None:  # made once; two threads making it at once make equal outcomes
            op = self._op = self._make()  # type: ignore[misc]
        return op

    @property
    def event(self) -> Mapping[str, Any]:
        """The ``op_accounted`` event (a dict: treat it as read-only)."""
        event = self._event
        if event is None:
            op = self.op
            event = self._event = op_accounted(
                self.entry, str(op.kind), op.name, self.ts, *_linkage(op)
            )
        return event

    @property
    def entry(self) -> AccountingEntry:
        """The accounting entry, made once."""
        entry = self._entry
        if entry is None:
            entry = self._entry = accounting_entry(self.op)
        return entry

    @property
    def entry_json(self) -> bytes:
        """The accounting entry as compact JSON, encoded once."""
        encoded = self._entry_json
        if encoded is None:
            encoded = self._entry_json = _compact(self.entry)
        return encoded

    def ledger_line(self) -> bytes:
        """The entry as its line of the billing ledger."""
        return self.entry_json + b"\n"

    def stream_line(self) -> bytes:
        """The event as its line of the stream: the bytes :func:`accounted_line` writes of
        :attr:`event`, in one format from the outcome (this runs once per op on the worker)."""
        op = self.op
        entry = self.entry
        trace_id, span_id = _linkage(op)
        linkage = (
            b', "trace_id": "%b", "span_id": "%b"'
            % (
                trace_id.encode(),
                span_id.encode(),  # type: ignore[union-attr]  # set with the trace id
            )
            if trace_id is not None
            else b""
        )
        try:
            fields = (
                _text(entry.agentId),
                _text(str(op.kind)),
                _text(op.name),
                self.entry_json,
                _text(self.ts),
                linkage,
                _text(entry.path),
            )
        except (UnicodeEncodeError, TypeError):  # not text, or a lone surrogate: the long way
            return accounted_line(self.event, self.entry_json)
        return _STREAM_LINE % fields


def _linkage(op: OpOutcome) -> tuple[str | None, str | None]:
    """The op's span's ``trace_id`` and ``span_id`` as an event writes them (none without a
    span context)."""
    if not op.trace_id:
        return None, None
    return format(op.trace_id, "032x"), format(op.span_id, "016x")


_STREAM_LINE = (
    b'{"event_type": "op_accounted", "agent_id": %b, "kind": %b, "name": %b, '
    b'"accounting": %b, "ts": %b%b, "path": %b}\n'
)
"""An ``op_accounted`` line as :func:`accounted_line` writes it, its values to fill in."""
_encode_text = msgspec.json.Encoder().encode


def _text(value: str | None) -> bytes:
    """A text field of an ``op_accounted`` line, as :func:`_field` writes it; a ``TypeError``
    for anything else (which the long way writes), a ``UnicodeEncodeError`` for a lone
    surrogate."""
    if type(value) is str:
        return _encode_text(value)
    if value is None:
        return b"null"
    raise TypeError(type(value))


_compact = compact_json


def accounted_line(event: Mapping[str, Any], entry_json: bytes | None = None) -> bytes:
    """An ``op_accounted`` event as its line of the stream: the stream's separators, its
    ``accounting`` the compact JSON of the ledger line (``entry_json``, if encoded already)."""
    if entry_json is None:
        entry_json = _compact(event["accounting"])
    fields = [_field(prefix, event[key]) for key, prefix in _HEAD if key in event]
    fields.append(b'"accounting": ' + entry_json)
    fields += [_field(prefix, event[key]) for key, prefix in _TAIL if key in event]
    return b"{" + b", ".join(fields) + b"}\n"


def _keyed(*keys: str) -> tuple[tuple[str, bytes], ...]:
    """Each key, and how a line writes it with the separator after it (made once)."""
    return tuple((key, b'"' + key.encode() + b'": ') for key in keys)


_HEAD = _keyed("event_type", "agent_id", "kind", "name")
_TAIL = _keyed("ts", "trace_id", "span_id", "path")


def _field(prefix: bytes, value: Any) -> bytes:
    # Text and null have no separators inside: compact JSON writes them as the stream does.
    if value is None or type(value) is str:
        encoded = compact_json(value)
    else:
        encoded = _LINE.encode(value).encode("utf-8", "backslashreplace")
    return prefix + encoded


def is_accounted_line(line: bytes) -> bool:
    """Whether a line of a stream, as agenttrace writes them, is an ``op_accounted`` line."""
    return line.startswith(ACCOUNTED_PREFIX)
