"""The format of session files and event streams, as typed structs: what readers accept, and the
source of the published JSON Schema.

A session file (``<id>.json.gz``, docs/session-file.md) holds one :class:`SessionFile`; each line
of an event stream (``<id>.events.jsonl``, docs/events.md) one :data:`Event`. Files are untrusted
input, so :func:`check_document` and :func:`check_events` validate what was decoded against these
structs (msgspec, in C) before any view sees it; the callers keep the plain dicts and lists they
decoded, so absent fields stay absent and nothing a later write copies is dropped. Constraints
make what passes safe to use: ids are strings of a bounded, printable form, labels are canonical,
times are integers in range, and numbers are finite (JSON has no NaN or infinity; the decoder
refuses both). Rules that relate fields (an ended op has a status, a root's ``resource`` comes
with its ``span``) are checked in ``__post_init__`` and published from the same tables.

The published JSON Schema is generated from these structs
(:mod:`agenttrace.formats.session.schema_file`; ``python -m agenttrace.formats.session.schema_file
--write`` regenerates it after a change here): field descriptions are ``Meta(description=...)`` and
docstrings, and the rules between fields are the ``requires``/``excludes`` tables and
``json_schema_extra``.

Unknown keys are refused everywhere except in ``meta``, which keeps whatever keys an earlier file
had: they are carried over as they are, never dropped.

Version 1 is what every release has written since the first: the structs are the superset, so a
field an earlier release did not write is optional here (the first release kept no ``span`` in
its nodes, no ``resource``, ``scope`` or ``recording`` on a run's root and no ``callPath`` in
accounting entries; docs/session-file.md, "Files of earlier releases"), with the same types and
patterns as when it is there. tests/test_releases.py reads the files those releases wrote.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Annotated, Any, ClassVar, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType, field

from agenttrace._internal.times import MAX_EPOCH_NS
from agenttrace.model.constrained import (
    AGENT_ID_PATTERN,
    LABEL_PATTERN,
    STEP_LABEL_PATTERN,
    TIMESTAMP_PATTERN,
    AgentId,
    Label,
    Timestamp,
    whole,
    without_surrogates,
)
from agenttrace.model.constrained import FINGERPRINT_PATTERN as FINGERPRINT_PATTERN
from agenttrace.model.constrained import StepLabel as StepLabel
from agenttrace.model.journal_lines import JournalLine, Step, StepDecision
from agenttrace.model.resets import MAX_PIECES

FORMAT = "agenttrace.session"
VERSION = 1
SCHEMA_ID = f"urn:agenttrace:schema:{FORMAT}:{VERSION}"
"""The published schema's ``$id``: it names the format and its version."""
SCHEMA_RESOURCE = f"{FORMAT}.v{VERSION}.schema.json"
"""The published schema's file name in this package (``agenttrace/formats/session/``)."""


# --- constrained values -------------------------------------------------------------------------


_whole = whole

_NAME = "[A-Za-z0-9][A-Za-z0-9_.-]{0,127}"
SESSION_ID_PATTERN = _whole(f"(?!.*\\.\\.){_NAME}")
"""The latest time OTLP can carry (a signed 64-bit count of nanoseconds: the year 2262)."""

SessionId = Annotated[
    str,
    Meta(
        pattern=SESSION_ID_PATTERN,
        description="A plain file-name stem (no '..'): a fresh session's id is 16 hex digits "
        "(its first run's origin txn id).",
    ),
]
TxnId = Annotated[
    str,
    Meta(
        pattern=SESSION_ID_PATTERN,
        description="A transaction id: 16 hex digits (or the session's id, for a session's "
        "first run).",
    ),
]
ParentTxnId = Annotated[
    TxnId | UnsetType | None,
    Meta(
        description="The txn of the agent run whose tool call ran this entry's run; null in a "
        "root run (absent in files of earlier releases)."
    ),
]
TRACE_ID_PATTERN = _whole("[0-9a-f]{32}")
SPAN_ID_PATTERN = _whole("[0-9a-f]{16}")
TraceId = Annotated[str, Meta(pattern=TRACE_ID_PATTERN, description="32 hex digits.")]
SpanId = Annotated[str, Meta(pattern=SPAN_ID_PATTERN, description="16 hex digits.")]
MESSAGE_ID_PATTERN = _whole("[A-Za-z0-9_.:-]{1,128}")
MessageId = Annotated[
    str,
    Meta(
        pattern=MESSAGE_ID_PATTERN,
        description="msg_001, msg_002, ...: one counter for every event of the session.",
    ),
]
EpochMs = Annotated[
    int,
    Meta(ge=0, le=MAX_EPOCH_NS // 1_000_000, description="Milliseconds since the Unix epoch."),
]
EpochNs = Annotated[
    int, Meta(ge=0, le=MAX_EPOCH_NS, description="Nanoseconds since the Unix epoch.")
]
Milliseconds = Annotated[float, Meta(description="A duration in milliseconds.")]
Scalar = str | bool | int | float
AttributeValue = Annotated[
    Scalar | list[Scalar],
    Meta(
        description="An OpenTelemetry attribute value: a string, boolean or number, or an "
        "array of them."
    ),
]
Attributes = dict[str, AttributeValue]
# msgspec 0.22 frees a pattern's compiled regex as if it were a type when a pattern-constrained
# str shares a union with an array or object type (memory corruption, a crash at exit): the
# string form of a cause is checked by _check_cause instead, and the schema states the pattern.
Cause = (
    Annotated[str, Meta(extra_json_schema={"pattern": MESSAGE_ID_PATTERN})]
    | Annotated[list[MessageId], Meta(min_length=1)]
)
_MESSAGE_ID = re.compile(MESSAGE_ID_PATTERN)


def _check_cause(name: str, cause: Any) -> None:
    if isinstance(cause, str) and not _MESSAGE_ID.search(cause):
        raise ValueError(f"`{name}` is not a message id")


Status = Literal["ok", "failed"]
AccountingStatus = Annotated[
    Literal["ok", "failed", "interrupted"],
    Meta(
        description="ok or failed: what the op came to; interrupted: an LLM attempt a kill cut "
        "short, written when a later process took the session over (providerMayHaveBilled)."
    ),
]

Ingress = Annotated[
    dict[str, Any],
    Meta(
        description="How the run started: source (cli, api, web, slack, sub-agent, or what the "
        "application passed) and details, nested; leaves are strings, booleans or numbers.",
        extra_json_schema={
            "properties": {"source": {"type": "string"}},
            "additionalProperties": {"$ref": "#/$defs/IngressValue"},
        },
    ),
]


def _check_ingress(ingress: Mapping[str, Any]) -> None:
    """Ingress is nested objects whose leaves are strings, booleans or numbers (its JSON
    Schema: ``IngressValue``); the nesting itself was bounded before (:func:`depth_error`)."""
    pending = [ingress]
    while pending:
        for value in pending.pop().values():
            if isinstance(value, dict):
                pending.append(value)
            elif not isinstance(value, (str, bool, int, float)):
                kind = "null" if value is None else "array"
                raise ValueError(f"ingress holds {kind}: leaves are strings, booleans or numbers")


# --- rules between fields ----------------------------------------------------------------------


class _Object(Struct, kw_only=True, forbid_unknown_fields=True, gc=False):
    """A JSON object of the format. ``requires`` maps a key to the keys that must come with it
    (JSON Schema's ``dependentRequired``), ``excludes`` to those that must not; a struct with
    either checks them in ``__post_init__`` (:func:`_check_rules`).

    ``gc=False``: the structs are made to validate and dropped at once, never in a cycle, and
    hundreds of thousands of them would otherwise each cost the cyclic collector."""

    requires: ClassVar[Mapping[str, Sequence[str]]] = {}
    excludes: ClassVar[Mapping[str, Sequence[str]]] = {}


_Rules = tuple[tuple[tuple[str, tuple[str, ...]], ...], tuple[tuple[str, tuple[str, ...]], ...]]
_RULES: dict[type, _Rules] = {}


def _compile_rules(cls: type) -> _Rules:
    """``requires`` and ``excludes`` of ``cls`` with attribute names (``agenttrace.implicit``
    is the attribute ``implicit``), made once per struct: this runs for every event read."""
    names = {f.encode_name: f.name for f in msgspec.structs.fields(cls)}

    def table(rules: Mapping[str, Sequence[str]]) -> tuple[tuple[str, tuple[str, ...]], ...]:
        return tuple((names[k], tuple(names[o] for o in others)) for k, others in rules.items())

    compiled = (table(getattr(cls, "requires", {})), table(getattr(cls, "excludes", {})))
    _RULES[cls] = compiled
    return compiled


def _check_rules(obj: Any) -> None:
    requires, excludes = _RULES.get(type(obj)) or _compile_rules(type(obj))
    for key, needed in requires:
        if getattr(obj, key) is not UNSET:
            for other in needed:
                if getattr(obj, other) is UNSET:
                    raise ValueError(f"`{_key_of(obj, key)}` without `{_key_of(obj, other)}`")
    for key, refused in excludes:
        if getattr(obj, key) is not UNSET:
            for other in refused:
                if getattr(obj, other) is not UNSET:
                    raise ValueError(f"`{_key_of(obj, key)}` and `{_key_of(obj, other)}` together")


def _key_of(obj: Any, attribute: str) -> str:
    """The JSON key of ``attribute`` (for messages)."""
    return next(
        (f.encode_name for f in msgspec.structs.fields(type(obj)) if f.name == attribute),
        attribute,
    )


# --- the span as sent ---------------------------------------------------------------------------


class SpanEvent(_Object, kw_only=True):
    """A span event other than a canonical event (a log, a reasoning chunk, the exception of a
    failure)."""

    name: str
    timeUnixNano: EpochNs
    attributes: Attributes


class SpanLink(_Object, kw_only=True):
    """A link to another span: a run's root links to the root of the session's run before it."""

    traceId: TraceId
    spanId: SpanId
    flags: Annotated[
        int,
        Meta(
            ge=0,
            le=2**32 - 1,
            description="OTLP link flags: the trace flags, 0x100, and 0x200 for a remote context.",
        ),
    ]


class SpanStatus(_Object, kw_only=True):
    """The span's status once it has ended."""

    code: Literal["UNSET", "ERROR"]
    message: str | UnsetType = UNSET


class Span(_Object, kw_only=True):
    """The node's span exactly as it was sent over OTLP (docs/session-file.md, 'The span as
    sent'). endTimeUnixNano and status appear when the span has ended."""

    requires: ClassVar = {"endTimeUnixNano": ["status"], "status": ["endTimeUnixNano"]}

    def __post_init__(self) -> None:
        _check_rules(self)

    name: str
    kind: Literal["INTERNAL", "CLIENT"]
    traceId: TraceId | None
    spanId: SpanId | None
    parentSpanId: SpanId | None
    startTimeUnixNano: EpochNs
    attributes: Attributes
    events: Annotated[
        list[SpanEvent],
        Meta(
            description="Span events other than canonical events (logs, reasoning chunks, the "
            "exception of a failure); a canonical event's span event is rebuilt from the event."
        ),
    ]
    links: list[SpanLink] | UnsetType = UNSET
    endTimeUnixNano: EpochNs | UnsetType = UNSET
    status: SpanStatus | UnsetType = UNSET


NodeSpan = Annotated[
    Span | UnsetType,
    Meta(
        description="The node's span as sent; absent only in files of the first release, which "
        "kept no spans (docs/session-file.md, 'Files of earlier releases')."
    ),
]


# --- what nodes hold ----------------------------------------------------------------------------


MAX_NODE_LOGS = 1000
"""A node keeps at most this many log entries: the last place is a ``WRN`` that counts the
ones past it (``dropped``), so a chatty op cannot fill memory or the file."""

LOG_SOURCE_END = "end"
"""A log entry's ``source``: a line the console prints at the node's end (its summary, its
failure), kept whatever the console's level."""
LOG_SOURCE_AGENTTRACE = "agenttrace"
"""A log entry's ``source``: agenttrace's own warning about the node (a write that failed, an
internal error), which its Python logger gets too."""


class LogEntry(_Object, kw_only=True):
    """A log attached to the node it concerns: an ``agenttrace.log`` call in the node, a line
    the console prints at its end, or agenttrace's own warning about it (``source``)."""

    ts: EpochMs
    level: Literal["VRB", "WRN", "ERR", "TRC", "THK", "FIN"]
    message: str
    path: Label
    originTxnId: Annotated[
        TxnId | UnsetType,
        Meta(description="The run's root txn (absent in files of earlier releases)."),
    ] = UNSET
    txnId: Annotated[
        TxnId | UnsetType,
        Meta(description="The agent run's txn (absent in files of earlier releases)."),
    ] = UNSET
    parentTxnId: ParentTxnId = UNSET
    details: Annotated[
        str | UnsetType,
        Meta(
            description="The keyword arguments of agenttrace.log, as JSON text (redacted, capped)."
        ),
    ] = UNSET
    source: Annotated[
        Literal["end", "agenttrace"] | UnsetType,
        Meta(
            description="Absent: an agenttrace.log call. 'end': a line the console prints at the "
            "node's end (its summary or failure), kept at the console's most detailed level. "
            "'agenttrace': agenttrace's own warning about the node. Absent in files of earlier "
            "releases, which kept only agenttrace.log calls."
        ),
    ] = UNSET
    dropped: (
        Annotated[
            int,
            Meta(
                ge=1, description="On a node's last entry: how many past MAX_NODE_LOGS it counts."
            ),
        ]
        | UnsetType
    ) = UNSET


class ReasoningChunk(_Object, kw_only=True):
    """One chunk of reasoning, as it came: an ``agenttrace.thinking(text)``, a reasoning delta
    of a stream, or the reasoning of a whole response."""

    text: str
    ts: EpochMs


class Reasoning(_Object, kw_only=True):
    """The reasoning of a node: its chunks in the order they came, and the summary the provider
    gave of them, if it gave one."""

    chunks: list[ReasoningChunk]
    final: (
        Annotated[
            str, Meta(description="The provider's summary of the reasoning, when it gave one.")
        ]
        | UnsetType
    ) = UNSET


class Payload(_Object, kw_only=True):
    """What an op sent or got back, as recorded."""

    payload: Annotated[
        str,
        Meta(
            description="The content as recorded: JSON text (a string result as it is), "
            "redacted and capped."
        ),
    ]
    size: Annotated[int, Meta(ge=0, description="Length of payload in characters.")]
    kind: Annotated[Literal["llm", "tool"] | UnsetType, Meta(description="On request only.")] = (
        UNSET
    )
    isFinalTurn: Annotated[
        bool | UnsetType,
        Meta(
            description="An LLM request's: it offered the model no tool to call, so the model "
            "could only answer (docs/events.md, 'LLM requests and responses')."
        ),
    ] = UNSET
    isFinalAnswer: Annotated[
        bool | UnsetType,
        Meta(
            description="An LLM response's: it asked for no tool call, so it is the agent's "
            "answer (docs/events.md, 'LLM requests and responses')."
        ),
    ] = UNSET


class Tokens(_Object, kw_only=True):
    """An LLM attempt's token counts."""

    inputTokens: Annotated[
        int | None, Meta(description="All input tokens, cache reads and writes included.")
    ]
    outputTokens: int | None
    cacheReadInputTokens: int
    cacheWriteInputTokens: int
    reasoningTokens: int
    totalTokens: Annotated[int, Meta(description="inputTokens + outputTokens.")]


class AccountingEntry(_Object, kw_only=True):
    """One op's accounting record; each is also one line of the billing ledger, unchanged."""

    requires: ClassVar = {"error": ["errorType"], "errorType": ["error"]}
    _LLM_ONLY: ClassVar = ("provider", "model", "actualModel", "attempt", "tokens", "costUsd")
    _TOOL_ONLY: ClassVar = ("providerLabel", "charactersIn", "charactersOut")
    # Written only where known, and not by earlier releases: optional, but never on the other
    # type's entries.
    _LLM_OPTIONAL: ClassVar = (
        "actualProvider",
        "upstreamInferenceCostUsd",
        "providerMayHaveBilled",
        "mocked",
    )
    _TOOL_OPTIONAL: ClassVar = ("mcpServer", "command", "decision", "evidence")
    # Per type (True: an LLM attempt's), the fields it must have and those it must not.
    _NEEDED: ClassVar = {True: _LLM_ONLY, False: _TOOL_ONLY}
    _REFUSED: ClassVar = {
        True: _TOOL_ONLY + _TOOL_OPTIONAL,
        False: _LLM_ONLY[1:] + _LLM_OPTIONAL,
    }
    _GETTERS: ClassVar = {
        True: (attrgetter(*_LLM_ONLY), attrgetter(*_REFUSED[True])),
        False: (attrgetter(*_TOOL_ONLY), attrgetter(*_REFUSED[False])),
    }
    _ALL_UNSET: ClassVar = {
        True: (UNSET,) * len(_REFUSED[True]),
        False: (UNSET,) * len(_REFUSED[False]),
    }

    timestamp: Annotated[EpochMs, Meta(description="When the op ended.")]
    status: AccountingStatus
    latency: Annotated[float, Meta(description="Milliseconds.")]
    type: Literal["llm", "tool"]
    originTxnId: TxnId
    txnId: TxnId
    parentTxnId: ParentTxnId = UNSET
    agentId: AgentId
    path: Label
    provider: str | UnsetType | None = UNSET
    model: Annotated[str | UnsetType | None, Meta(description="The requested model.")] = UNSET
    actualProvider: Annotated[
        str | UnsetType,
        Meta(
            description="The provider that actually served the call, where the response says "
            "it: the one OpenRouter names (as it spells it), or the provider of the litellm "
            "Router deployment that answered."
        ),
    ] = UNSET
    actualModel: Annotated[
        str | UnsetType | None, Meta(description="The model the response names.")
    ] = UNSET
    attempt: Annotated[int, Meta(ge=1)] | UnsetType | None = UNSET
    tokens: Tokens | UnsetType = UNSET
    costUsd: Annotated[
        float | UnsetType | None,
        Meta(description="null: unknown (no price, or an interrupted attempt: nothing known)."),
    ] = UNSET
    upstreamInferenceCostUsd: Annotated[
        float | UnsetType,
        Meta(
            description="What the provider that served the call charged the gateway, in US "
            "dollars, where the response says it (OpenRouter's upstream_inference_cost)."
        ),
    ] = UNSET
    providerLabel: Annotated[
        str | UnsetType | None,
        Meta(
            description="Who provides the tool (@tool(provider=...), an MCP tool's server), "
            "else the tool's name (all that earlier releases wrote)."
        ),
    ] = UNSET
    mcpServer: Annotated[
        str | UnsetType, Meta(description="The MCP server the tool came from.")
    ] = UNSET
    command: Annotated[
        str | UnsetType | None,
        Meta(description="The tool's name (absent in files of earlier releases)."),
    ] = UNSET
    charactersIn: Annotated[
        int | UnsetType | None, Meta(description="Length of the arguments' JSON.")
    ] = UNSET
    charactersOut: Annotated[
        int | UnsetType | None,
        Meta(
            description="Length of the result's JSON (or of the items a generator yielded); "
            "null when the tool failed."
        ),
    ] = UNSET
    error: str | UnsetType = UNSET
    errorType: str | UnsetType | None = UNSET
    callPath: Annotated[
        str | UnsetType | None,
        Meta(
            description="The callPath of the agent run the op belongs to (absent in files of "
            "the first release)."
        ),
    ] = UNSET
    providerMayHaveBilled: Annotated[
        bool | UnsetType,
        Meta(
            description="An interrupted LLM attempt (status interrupted): the request may have "
            "reached the provider, which may have answered and billed it; its tokens and cost "
            "are not known (the provider's bill says)."
        ),
    ] = UNSET
    mocked: Annotated[
        bool | UnsetType,
        Meta(
            description="An LLM attempt no model answered: litellm made its reply up from the "
            "call's mock_response (or mock_tool_calls) and sent nothing. true, with costUsd 0 "
            "whatever the model's price."
        ),
    ] = UNSET
    decision: Annotated[
        Literal["done", "not_applied", "retry", "abandon"] | UnsetType,
        Meta(
            description="A tool call a kill left in doubt, as a person decided it (agenttrace "
            "resolve): done (it happened: status ok), not_applied, retry or abandon (status "
            "failed: a resume runs it, runs it again or abandons it)."
        ),
    ] = UNSET
    evidence: Annotated[
        str | UnsetType, Meta(description="Why the person decided so (resolve --evidence).")
    ] = UNSET

    def __post_init__(self) -> None:
        # ``requires`` and the fields of each type, checked inline: the ledger makes an entry
        # in the caller's thread of every LLM attempt.
        if (self.error is UNSET) is not (self.errorType is UNSET):
            _check_rules(self)  # says which one lacks the other
        llm = self.type == "llm"
        # All at once (one attrgetter each); key by key only to say which one is wrong.
        needed, refused = self._GETTERS[llm]
        if UNSET in needed(self):
            for key in self._NEEDED[llm]:
                if getattr(self, key) is UNSET:
                    raise ValueError(f"Object missing required field `{key}` (a {self.type} entry)")
        if refused(self) != self._ALL_UNSET[llm]:
            for key in self._REFUSED[llm]:
                if getattr(self, key) is not UNSET:
                    raise ValueError(f"Object contains field `{key}`, not for a {self.type} entry")

    json_schema_extra: ClassVar = {
        "if": {"properties": {"type": {"const": "llm"}}},
        "then": {
            "required": list(_LLM_ONLY),
            "not": {"anyOf": [{"required": [key]} for key in _TOOL_ONLY + _TOOL_OPTIONAL]},
        },
        "else": {
            "required": list(_TOOL_ONLY),
            "not": {"anyOf": [{"required": [key]} for key in _LLM_ONLY[1:] + _LLM_OPTIONAL]},
        },
    }


# --- the opTree --------------------------------------------------------------------------------


class SessionAttributes(_Object, kw_only=True):
    """A SessionNode's attributes."""

    ingress: Ingress
    call_path: str | UnsetType = field(default=UNSET, name="agenttrace.call_path")
    agent_model: str | UnsetType = field(default=UNSET, name="agenttrace.agent.model")
    resumed_from: TraceId | UnsetType = field(default=UNSET, name="agenttrace.resumed_from")
    implicit: Literal[True] | UnsetType = field(default=UNSET, name="agenttrace.implicit")
    reenters: TxnId | UnsetType = field(default=UNSET, name="agenttrace.reenters")
    """On a run's root that re-enters an interrupted run: that run's origin."""
    interrupted: Annotated[
        Literal[True] | UnsetType,
        Meta(
            description="On a run's root that never ended: its process was killed (the run "
            "rebuilt from the event stream, or resumed after it)."
        ),
    ] = field(default=UNSET, name="agenttrace.interrupted")

    def __post_init__(self) -> None:
        _check_ingress(self.ingress)


class TurnAttributes(_Object, kw_only=True):
    """agenttrace.implicit is true on a turn agenttrace opened by itself (an auto turn)."""

    implicit: Literal[True] | UnsetType = field(default=UNSET, name="agenttrace.implicit")


class OpAttributes(_Object, kw_only=True):
    """An op's attributes."""

    errorType: Annotated[
        str | UnsetType,
        Meta(
            description="error.type of a failure: for an LLM attempt auth, quota, network, "
            "model, timeout or invalid; for a tool the exception's class name."
        ),
    ] = UNSET


class Resource(_Object, kw_only=True):
    """Root only: the OpenTelemetry resource the spans were sent with."""

    attributes: Attributes


class InstrumentationScope(_Object, kw_only=True):
    """Root only: the instrumentation scope of the spans."""

    name: str
    version: str


class Recording(_Object, kw_only=True):
    """Root only: how canonical events became span events in this run."""

    captureContent: bool
    maxPayloadBytes: Annotated[int, Meta(ge=0)]


class _SessionNode(_Object, kw_only=True):
    requires: ClassVar = {"endedAt": ["success", "error", "latencyMs"]}

    def __post_init__(self) -> None:
        _check_rules(self)

    id: TxnId
    traceId: TraceId | None
    spanId: SpanId | None
    agentId: AgentId
    agentName: str
    callPath: Annotated[str, Meta(description="Agent names from the root, joined by '/'.")]
    txnId: TxnId
    originTxnId: TxnId
    sessionId: SessionId
    startedAt: EpochMs
    attributes: SessionAttributes
    turns: list[TurnNode]
    span: NodeSpan = UNSET
    logs: list[LogEntry] | UnsetType = UNSET
    reasoning: Reasoning | UnsetType = UNSET
    endedAt: EpochMs | UnsetType = UNSET
    success: bool | UnsetType = UNSET
    error: Annotated[
        str | UnsetType | None,
        Meta(
            description="The failure: exception type and message, secrets scrubbed; null on "
            "success."
        ),
    ] = UNSET
    latencyMs: Milliseconds | UnsetType = UNSET


class RootSessionNode(_SessionNode, kw_only=True):
    """A run's root: one agent run at path 0 with no parent txn, which also keeps the resource,
    scope and recording (with its span: all four, or none in a run of the first release).
    Until the run ends only startedAt is set of its times."""

    requires: ClassVar = {
        **_SessionNode.requires,
        # The first release kept none of the four; every release since keeps all of them.
        "span": ["resource", "scope", "recording"],
        "resource": ["span"],
        "scope": ["span"],
        "recording": ["span"],
    }

    path: Literal["0"]
    parentTxnId: None
    resource: Resource | UnsetType = UNSET
    scope: InstrumentationScope | UnsetType = UNSET
    recording: Recording | UnsetType = UNSET


class ChildSessionNode(_SessionNode, kw_only=True):
    """A sub-agent run, hosted by an op. Until the run ends only startedAt is set of its
    times."""

    path: Label
    parentTxnId: TxnId


MAX_TURN_PROMPTS = 32
"""A turn keeps at most this many prompts: the first and the latest ones."""


class TurnText(_Object, kw_only=True):
    """A prompt of a turn, as its LLM attempt recorded it (capped, redacted). Files of earlier
    releases have a reply of this form too (a :class:`TurnReply` with text only)."""

    role: Literal["system", "user"] | UnsetType = UNSET
    text: str
    size: Annotated[int, Meta(ge=0, description="The text's length in characters.")]


class TurnToolCall(_Object, kw_only=True):
    """A tool call an assistant reply asked for, as the attempt recorded it."""

    id: str | None = None
    name: str | None = None
    arguments: Annotated[
        str | None, Meta(description="The JSON text the model wrote (capped).")
    ] = None


class TurnReply(_Object, kw_only=True):
    """What the assistant said in a turn's latest attempt: its text and the tool calls it made
    (capped, redacted as the attempt recorded them)."""

    text: Annotated[str, Meta(description="Absent when it only called tools.")] | UnsetType = UNSET
    size: Annotated[int, Meta(ge=0, description="The text's length in characters.")] | UnsetType = (
        UNSET
    )
    toolCalls: list[TurnToolCall] | UnsetType = UNSET


class TurnNode(_Object, kw_only=True):
    """One turn of an agent's loop: an LLM request and the tool calls after it. ``prompts``
    and ``reply`` say what it was about without the event stream: the system and user messages
    of its first LLM attempt's whole request, and its latest attempt's assistant text and tool
    calls. Files of earlier releases have only the prompts that attempt added."""

    id: Annotated[SpanId | None, Meta(description="The turn's span id.")]
    index: Annotated[int, Meta(ge=1, description="1-based within its agent run.")]
    path: Label
    startedAt: EpochMs
    attributes: TurnAttributes
    ops: list[OperationNode]
    span: NodeSpan = UNSET
    logs: list[LogEntry] | UnsetType = UNSET
    reasoning: Reasoning | UnsetType = UNSET
    prompts: Annotated[list[TurnText], Meta(max_length=MAX_TURN_PROMPTS)] | UnsetType = UNSET
    reply: TurnReply | UnsetType = UNSET
    endedAt: EpochMs | UnsetType = UNSET


class OperationNode(_Object, kw_only=True):
    """One operation: an LLM attempt (llm), a tool call (tool), or a tool call that ran
    sub-agents (session)."""

    # The sub-agent runs an op hosted are under ``childSession`` when it hosted one and under
    # ``childSessions`` when it hosted several, each run once; earlier releases wrote both keys
    # (``childSession`` the first run again in full, so a chain d deep held its deepest run
    # 2^d times), which is still read. Readers take ``childSessions``, else ``childSession``.
    requires: ClassVar = {"endedAt": ["status", "latencyMs"]}

    def __post_init__(self) -> None:
        _check_rules(self)

    opId: Annotated[SpanId | None, Meta(description="The op's span id.")]
    path: Label
    kind: Literal["llm", "tool", "session"]
    name: Annotated[
        str, Meta(description="The tool's name, or the requested model of an LLM attempt.")
    ]
    startedAt: EpochMs
    attributes: OpAttributes
    logs: list[LogEntry]
    accounting: Annotated[
        list[AccountingEntry],
        Meta(max_length=1, description="Empty while the op runs; one entry once it has ended."),
    ]
    span: NodeSpan = UNSET
    reasoning: Reasoning | UnsetType = UNSET
    endedAt: EpochMs | UnsetType = UNSET
    status: Status | UnsetType = UNSET
    latencyMs: Milliseconds | UnsetType = UNSET
    error: str | UnsetType = UNSET
    request: Payload | UnsetType = UNSET
    response: Payload | UnsetType = UNSET
    replyMessageId: Annotated[
        MessageId | UnsetType,
        Meta(
            description="An LLM attempt whose response entered its agent's transcript: that "
            "transcript_entry's message id. Its whole request is the agent's transcript just "
            "before it, after the instructions (agenttrace.formats.session.requests.full_request)."
        ),
    ] = UNSET
    instructions: Annotated[
        Payload | UnsetType,
        Meta(
            description="With replyMessageId: the system messages the request sent ahead of "
            "the agent's transcript, when it sent some (JSON text, redacted and capped)."
        ),
    ] = UNSET
    childSession: Annotated[
        ChildSessionNode | UnsetType,
        Meta(
            description="The sub-agent run the op hosted, when it hosted one. Files of earlier "
            "releases also have it beside childSessions, as a copy of childSessions[0]."
        ),
    ] = UNSET
    childSessions: Annotated[
        Annotated[list[ChildSessionNode], Meta(min_length=1)] | UnsetType,
        Meta(
            description="Every sub-agent run the op hosted, in start order, when it hosted "
            "several (in files of earlier releases, also when it hosted one)."
        ),
    ] = UNSET


# --- canonical events ---------------------------------------------------------------------------


class ToolFunction(_Object, kw_only=True):
    """The function a tool call asks for."""

    name: str | None
    arguments: Annotated[str, Meta(description="The arguments as the model wrote them: JSON text.")]


class ToolCall(_Object, kw_only=True):
    """One tool call of an assistant entry."""

    id: str | None
    type: Annotated[
        str | UnsetType,
        Meta(description="Left out when it is function (the only type models use today)."),
    ] = UNSET
    function: ToolFunction


class _Event(_Object, kw_only=True, tag_field="event_type"):
    """What every canonical event has: its id, and the linkage fields agenttrace appends."""

    requires: ClassVar = {"trace_id": ["span_id", "path"], "span_id": ["trace_id"]}

    def __post_init__(self) -> None:
        _check_rules(self)

    message_id: MessageId
    ts: Timestamp | UnsetType = UNSET
    trace_id: TraceId | UnsetType = UNSET
    span_id: SpanId | UnsetType = UNSET
    path: Label | UnsetType = UNSET


class AgentCreated(_Event, kw_only=True, tag="agent_created"):
    """An agent came into existence (``cause``: the assistant entry whose tool call made it;
    none for the root). ``caused_by`` is the older spelling of ``cause``."""

    excludes: ClassVar = {"cause": ["caused_by"]}

    agent_id: AgentId
    name: str | UnsetType = UNSET
    language_model: str | UnsetType = UNSET
    cause: Cause | UnsetType = UNSET
    caused_by: Cause | UnsetType = UNSET

    def __post_init__(self) -> None:
        _check_rules(self)
        _check_cause("cause", self.cause)
        _check_cause("caused_by", self.caused_by)


class TranscriptEntry(_Event, kw_only=True, tag="transcript_entry"):
    """A message entered an agent's transcript. ``content_id`` is the older spelling of
    ``substance``."""

    excludes: ClassVar = {"substance": ["content_id"]}

    agent_id: AgentId
    role: Annotated[
        str, Meta(description="user, assistant, tool or system (or the role the message had).")
    ]
    content: Annotated[
        str | int | float | bool | list[Any] | dict[str, Any] | UnsetType,
        Meta(
            description="Usually text; a message whose content is a list of parts keeps the "
            "list. Absent when the message had none."
        ),
    ] = UNSET
    tool_calls: Annotated[list[ToolCall], Meta(min_length=1)] | UnsetType = UNSET
    tool_call_id: str | UnsetType = UNSET
    name: str | UnsetType = UNSET
    substance: MessageId | UnsetType = UNSET
    content_id: MessageId | UnsetType = UNSET


# A list of two, not a tuple: msgspec 0.22 crashes on a union of a constrained int and a tuple.
ReusedPiece = (
    Annotated[int, Meta(ge=0)]
    | Annotated[
        list[MessageId],
        Meta(
            min_length=2,
            max_length=2,
            description="The first and the last of a run of the transcript's entries.",
        ),
    ]
)
"""A piece of what follows a reset's kept entries (``agenttrace.model.resets``)."""


class TranscriptReset(_Event, kw_only=True, tag="transcript_reset"):
    """An agent's transcript was rewritten: the request it sent did not extend what was logged
    (a framework rewrote its history). Its transcript is now its first ``kept`` entries; the
    ``transcript_entry`` events written with it (in the same write) are the rest of what it was
    sent."""

    agent_id: AgentId
    kept: Annotated[
        int,
        Meta(
            ge=0,
            description="How many leading entries of the agent's transcript stay (0: none); "
            "the entries after them are dropped.",
        ),
    ]
    entries: (
        Annotated[
            int,
            Meta(
                ge=0,
                description="How many transcript_entry events of the agent follow it in the "
                "same write: the messages it was sent after the kept ones that are not "
                "entries it reused (without reused: all of them, restating its context).",
            ),
        ]
        | UnsetType
    ) = UNSET
    reused: (
        Annotated[
            list[ReusedPiece],
            Meta(
                max_length=MAX_PIECES,
                description="What follows the kept entries, in order: [first, last], the "
                "entries of the transcript before the reset from first to last (message ids; "
                "they are referred to, not logged again); n, the next n transcript_entry "
                "events of the same write. The counts add up to entries. Absent: all the "
                "entries follow the kept ones.",
            ),
        ]
        | UnsetType
    ) = UNSET

    def __post_init__(self) -> None:
        if self.reused is UNSET:
            return
        new = sum(piece for piece in self.reused if isinstance(piece, int))
        if new != (self.entries if self.entries is not UNSET else 0):
            raise ValueError("`reused` counts do not add up to `entries`")


class PieceOfText(_Event, kw_only=True, tag="piece_of_text"):
    """Text a tool call produced to hand it to agents. The older spelling has no ``agent_id``
    and spells ``cause`` ``caused_by``."""

    excludes: ClassVar = {"cause": ["caused_by"]}

    agent_id: AgentId | UnsetType = UNSET
    content: str
    cause: Cause | UnsetType = UNSET
    caused_by: Cause | UnsetType = UNSET

    def __post_init__(self) -> None:
        _check_rules(self)
        _check_cause("cause", self.cause)
        _check_cause("caused_by", self.caused_by)
        if self.cause is UNSET and self.caused_by is UNSET:
            raise ValueError("Object missing required field `cause`")

    json_schema_extra: ClassVar = {"anyOf": [{"required": ["cause"]}, {"required": ["caused_by"]}]}


Event = AgentCreated | TranscriptEntry | TranscriptReset | PieceOfText
"""A canonical event (docs/events.md): one line of an event stream."""


OP_ACCOUNTED = "op_accounted"
"""The ``event_type`` of a stream line that carries an op's accounting (no message id: it is
no part of any transcript)."""


class OpAccounted(_Object, kw_only=True, tag_field="event_type", tag=OP_ACCOUNTED):
    """An LLM attempt or tool call ended: what it cost, written to the event stream the moment
    it ended (docs/events.md, "Accounting lines"). A line of the stream only, never of a session
    file's events, and no canonical event: no message id, no part of any transcript."""

    requires: ClassVar = {"trace_id": ["span_id"], "span_id": ["trace_id"]}

    def __post_init__(self) -> None:
        _check_rules(self)

    agent_id: AgentId
    kind: Annotated[
        Literal["llm", "tool", "session"],
        Meta(description="As the op's node has it: session for a tool call that ran sub-agents."),
    ]
    name: Annotated[
        str, Meta(description="The tool's name, or the requested model of an LLM attempt.")
    ]
    accounting: AccountingEntry
    ts: Annotated[Timestamp, Meta(description="When the op ended.")]
    trace_id: TraceId | UnsetType = UNSET
    span_id: Annotated[SpanId | UnsetType, Meta(description="The op's span id.")] = UNSET
    path: Label


StreamLine = Event | OpAccounted | Step | StepDecision
"""One line of an event stream: a canonical event, an op's accounting, or the step journal."""


# --- the document -------------------------------------------------------------------------------


class MetaResult(_Object, kw_only=True):
    """How the last run ended; nulls while it runs."""

    success: bool | None
    error: str | None


class CostMap(Struct, kw_only=True):
    """Which litellm cost map priced the session's calls, where litellm says."""

    source: Annotated[
        str | UnsetType,
        Meta(description="local: the map litellm ships; remote: fetched from litellm's GitHub."),
    ] = UNSET
    revision: Annotated[
        str | UnsetType, Meta(description="The map's git blob id, as litellm gives it.")
    ] = UNSET


class ModelPricing(Struct, kw_only=True):
    """The per-token prices one model was billed at in the session, and their source (keys a
    later release adds are carried over, as meta's are)."""

    source: Annotated[
        Literal["litellm", "override"],
        Meta(
            description="litellm: litellm's cost map; override: the program's own prices "
            "(litellm.register_model), which differ from the map."
        ),
    ]
    pricedAs: Annotated[str, Meta(description="The model's key in the price map.")]
    prices: Annotated[
        dict[str, float],
        Meta(
            description="Every per-token rate of the model, in USD, under litellm's names "
            "(input_cost_per_token, output_cost_per_token, cache_read_input_token_cost, "
            "cache_creation_input_token_cost, their _above_ thresholds...)."
        ),
    ]
    litellmVersion: Annotated[
        str | UnsetType, Meta(description="The installed litellm's version.")
    ] = UNSET
    costMap: CostMap | UnsetType = UNSET


class SessionMeta(Struct, kw_only=True):
    """Facts about the session as a whole, recomputed at every write (keys of an earlier file
    are carried over as they are)."""

    requires: ClassVar = {"result": ["ingress", "trace_ids"]}

    createdAt: Annotated[
        EpochMs,
        Meta(
            description="When the first run started (kept from the file a session was resumed "
            "from)."
        ),
    ]
    updatedAt: Annotated[EpochMs, Meta(description="When this file was written.")]
    result: MetaResult | UnsetType = UNSET
    ingress: Annotated[Ingress, Meta(description="The first run's ingress.")] | UnsetType = UNSET
    trace_ids: Annotated[
        list[TraceId] | UnsetType, Meta(description="The trace id of each run, in order.")
    ] = UNSET
    session_id: SessionId
    pricingSnapshot: Annotated[
        dict[str, ModelPricing] | UnsetType,
        Meta(
            description="Per model the session billed (the accounting entries' model): the "
            "prices it was billed at, recorded when its first priced call ended (absent in "
            "files of earlier releases)."
        ),
    ] = UNSET

    def __post_init__(self) -> None:
        _check_rules(self)
        if self.ingress is not UNSET:
            _check_ingress(self.ingress)


class SessionFile(_Object, kw_only=True):
    """The JSON document inside ``<session_id>.json.gz`` (docs/session-file.md)."""

    format: Literal["agenttrace.session"]
    version: Literal[1]
    session_id: SessionId
    runs: Annotated[
        list[RootSessionNode],
        Meta(
            description="One SessionNode per run of the session, in start order: the first run, "
            "then one per resume. A run still going when the file was written is there as far "
            "as it got."
        ),
    ]
    meta: SessionMeta
    events: Annotated[
        list[Event],
        Meta(
            description="Every canonical event of the session, in message-id order: the same "
            "objects as the lines of the event stream."
        ),
    ]
    journal: Annotated[
        list[JournalLine] | UnsetType,
        Meta(
            description="The step journal (docs/journal.md), in the order it was written: the "
            "same objects as the stream's step and step_decision lines. Absent from files of "
            "earlier releases."
        ),
    ] = UNSET


# --- checking what was decoded -------------------------------------------------------------------


class FormatError(ValueError):
    """What was decoded is not of the format: ``where`` (a JSON path such as
    ``$.runs[0].turns[2]``, or ``[3]`` for the fourth of a list of events) and ``what``, both
    on one line."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where}: {what}")
        self.where = where
        self.what = what

    @classmethod
    def of(cls, error: msgspec.ValidationError, prefix: str = "$") -> FormatError:
        """msgspec's ``"what - at `$.path`"``, with ``$`` replaced by ``prefix``."""
        what, sep, where = str(error).rpartition(" - at `")
        if not sep:
            what, where = str(error), "$`"
        for pattern, form in _FORMS.items():
            what = what.replace(pattern, form)
        return cls(_one_line(prefix + where[1:-1]), _one_line(what))


_MAX_MESSAGE = 200
_FORMS = {
    f"`str` matching regex {pattern!r}": form
    for pattern, form in (
        (SESSION_ID_PATTERN, "a session or txn id (a plain file-name stem)"),
        (LABEL_PATTERN, "a path label (docs/path-labels.md)"),
        (STEP_LABEL_PATTERN, "a step's label (a path label, or one and /n or ~n)"),
        (MESSAGE_ID_PATTERN, "a message id (msg_001)"),
        (AGENT_ID_PATTERN, "an agent id (printable, at most 256 characters)"),
        (TRACE_ID_PATTERN, "a trace id (32 hex digits)"),
        (SPAN_ID_PATTERN, "a span id (16 hex digits)"),
        (TIMESTAMP_PATTERN, "a time as 2026-11-23T00:32:34.350Z"),
    )
}
"""msgspec names a pattern a string failed by the pattern itself; a reader wants its name."""


def _one_line(text: str) -> str:
    """``text`` shortened and with control characters escaped: a key or value quoted in an error
    comes from the file, and the message must stay one line."""
    if len(text) > _MAX_MESSAGE:
        text = text[:_MAX_MESSAGE] + "..."
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def number_error(text: bytes | bytearray, error: msgspec.ValidationError) -> FormatError:
    """Where the number out of range that failed decoding ``text`` is. msgspec names no object
    key in such a path (``$[...][0]``); the standard library reads that number as infinity, so
    it finds the key (only on this rare failure: it is the slower parser)."""
    import json  # the fallback parser, not needed on any other path

    try:
        pending: list[tuple[Any, str]] = [(json.loads(text), "$")]
    except (ValueError, RecursionError):
        return FormatError.of(error)
    while pending:
        value, where = pending.pop()
        if type(value) is float and not math.isfinite(value):
            return FormatError(_one_line(where), "Number out of range")
        pairs = (
            value.items()
            if type(value) is dict
            else enumerate(value)
            if type(value) is list
            else ()
        )
        for key, item in reversed(list(pairs)):
            pending.append((item, f"{where}[{key}]" if type(key) is int else f"{where}.{key}"))
    return FormatError.of(error)


def depth_error(value: Any, limit: int, where: str = "$", level: int = 1) -> FormatError | None:
    """A :class:`FormatError` if ``value`` (at ``level``) nests arrays and objects more than
    ``limit`` levels deep, else ``None``. Iterative: a hostile file must not exhaust the stack.

    ``value`` may be anything decoded JSON holds: a number, a string, ``null`` or a boolean
    nests nothing (whether it belongs where it stands is for the structs to say, in one line),
    so it is never an error here, whatever the ``level``."""
    if type(value) is not dict and type(value) is not list:
        return None
    if level > limit:
        return FormatError(where, _deep_what(limit))
    pending: list[tuple[Any, int]] = [(value, level)]
    deepest = 0
    while pending:
        node, depth = pending.pop()
        if depth > deepest:
            deepest = depth
        if deepest > limit:
            return FormatError(_one_line(_deep_path(value, limit, where, level)), _deep_what(limit))
        items = node.values() if type(node) is dict else node
        for item in items:
            kind = type(item)
            if kind is dict or kind is list:
                pending.append((item, depth + 1))
    return None


def _deep_what(limit: int) -> str:
    return f"nested more than {limit} levels deep (AGENTTRACE_MAX_NESTING_DEPTH)"


def _deep_path(value: Any, limit: int, where: str, level: int) -> str:
    """The JSON path of the first array or object past ``limit`` (only called on failure)."""
    pending: list[tuple[Any, int, str]] = [(value, level, where)]
    while pending:
        node, depth, path = pending.pop()
        if depth > limit:
            return path if len(path) <= _MAX_MESSAGE else path[:100] + "..." + path[-50:]
        pairs = node.items() if type(node) is dict else enumerate(node)
        for key, item in pairs:
            if type(item) is dict or type(item) is list:
                step = f"[{key}]" if type(key) is int else f".{key}"
                pending.append((item, depth + 1, path + step))
    return where


def _convert(value: Any, type_: Any) -> None:
    """Validate ``value`` as ``type_``. A lone surrogate (text with no UTF-8, which agenttrace
    writes as its JSON escape) makes msgspec's pattern checks raise ``UnicodeEncodeError``; then
    the value is checked again with each one as U+FFFD, which no id or label pattern allows and
    free text does, so only where a pattern applies is it an error."""
    try:
        msgspec.convert(value, type_)
    except UnicodeEncodeError:
        msgspec.convert(without_surrogates(value), type_)


def check_events(events: list[Any], max_depth: int) -> None:
    """Raise :class:`FormatError` unless every item of ``events`` (decoded JSON: dicts and
    lists) is a canonical event nested at most ``max_depth`` levels; ``where`` starts with the
    event's index in the list (``[3].message_id``)."""
    _check_lines(events, max_depth, list[Event])


def check_stream_lines(lines: list[Any], max_depth: int) -> None:
    """:func:`check_events` for the lines of an event stream, which may also be
    :class:`OpAccounted` lines."""
    _check_lines(lines, max_depth, list[StreamLine])


def check_journal(lines: list[Any], max_depth: int) -> None:
    """:func:`check_events` for a session file's step journal: each line a :class:`Step` or a
    :class:`StepDecision` nested at most ``max_depth`` levels."""
    for index, line in enumerate(lines):
        problem = depth_error(line, max_depth, f"[{index}]")
        if problem is not None:
            raise problem
    _check_lines(lines, max_depth, list[JournalLine])


def _check_lines(lines: list[Any], max_depth: int, kind: Any) -> None:
    """Each line's content nested at most ``max_depth`` levels (checked first: msgspec would
    recurse into it), then the lines as ``kind``."""
    for index, line in enumerate(lines):
        content = line.get("content") if type(line) is dict else None
        if type(content) is list or type(content) is dict:
            problem = depth_error(content, max_depth, f"[{index}].content", 2)
            if problem is not None:
                raise problem
    try:
        _convert(lines, kind)
    except msgspec.ValidationError as exc:
        raise FormatError.of(exc, "") from None


def check_run(run: Any, max_depth: int) -> None:
    """Raise :class:`FormatError` unless ``run`` (decoded JSON) is a run's root
    :class:`RootSessionNode` nesting at most ``max_depth`` levels below the document (a run
    recovered from a damaged session file is held to what the whole file would be)."""
    problem = depth_error(run, max_depth, "$.runs[]", 3)
    if problem is not None:
        raise problem
    try:
        _convert(run, RootSessionNode)
    except msgspec.ValidationError as exc:
        raise FormatError.of(exc) from None


def check_document(document: Any, max_depth: int) -> None:
    """Raise :class:`FormatError` unless ``document`` (decoded JSON) is a :class:`SessionFile`
    whose events each nest at most ``max_depth`` levels, as does the rest of it."""
    events = document.get("events") if type(document) is dict else None
    if type(events) is not list:  # not a document, or no event list: say which
        try:
            _convert(document, SessionFile)
        except msgspec.ValidationError as exc:
            raise FormatError.of(exc) from None
        return
    journal = document.get("journal")
    lines = type(journal) is list
    rest = {
        key: value
        for key, value in document.items()
        if key != "events" and not (key == "journal" and lines)
    }
    problem = depth_error(rest, max_depth)
    if problem is not None:
        raise problem
    try:  # the events and the journal, once each, below
        _convert({**rest, "events": [], **({"journal": []} if lines else {})}, SessionFile)
    except msgspec.ValidationError as exc:
        raise FormatError.of(exc) from None
    try:
        check_events(events, max_depth)
    except FormatError as exc:
        raise FormatError("$.events" + exc.where, exc.what) from None
    if lines:
        try:
            check_journal(journal, max_depth)
        except FormatError as exc:
            raise FormatError("$.journal" + exc.where, exc.what) from None
