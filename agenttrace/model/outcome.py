"""What an op (an LLM attempt or a tool call) came to when it ended, as typed values.

An op's :class:`OpOutcome` is its one record of what it used, cost and returned: its usage
(tokens in and out, cache reads and writes, reasoning), its cost, its tool's input and output
sizes, its status, and the identity of the op and its span. Every output that says what an op
came to is derived from it, each in one function: its accounting entry, which is its line of the
billing ledger and of the stream (``agenttrace.formats.ledger.accounting_entry``), its GenAI
metrics (``agenttrace.sdk.metrics``) and its opTree node (``agenttrace.recorder.optree_builder``).

:func:`op_outcome` is the one place these values are read from the attributes the op's span
started and ended with (the names of ``agenttrace.semconv``). An outcome is immutable once made,
so a sink may read it later, on another thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agenttrace import semconv as sc


class Usage:
    """An LLM attempt's token counts, as its response reported them (``None``: not reported).
    ``input`` counts every input token, cache reads and writes included."""

    __slots__ = ("cache_read", "cache_write", "input", "output", "reasoning")

    def __init__(
        self,
        input: int | None,
        output: int | None,
        cache_read: int = 0,
        cache_write: int = 0,
        reasoning: int = 0,
    ) -> None:
        self.input = input
        self.output = output
        self.cache_read = cache_read
        self.cache_write = cache_write
        self.reasoning = reasoning

    @property
    def total(self) -> int:
        """Input and output tokens together (a count not reported counts as 0)."""
        return (self.input or 0) + (self.output or 0)


class OpOutcome:
    """One op as it ended: what it was, how it went, what it used and cost.

    Values are those the op's span carries, typed; the LLM fields are ``None`` on a tool call,
    and the tool fields on an LLM attempt.
    """

    __slots__ = (
        "agent_id",
        "attempt",
        "call_path",
        "chars_in",
        "chars_out",
        "cost_usd",
        "ended_ns",
        "error",
        "error_type",
        "kind",
        "mcp_server",
        "mocked",
        "name",
        "operation",
        "origin_txn_id",
        "path",
        "provider",
        "request_model",
        "response_model",
        "response_provider",
        "span_id",
        "started_ns",
        "time_to_first_chunk",
        "tool_name",
        "tool_provider",
        "trace_flags",
        "trace_id",
        "txn_id",
        "upstream_cost_usd",
        "usage",
    )

    kind: str | None
    """``llm`` or ``tool`` (``None`` for a span that never said)."""
    name: str
    """The tool's name, or the requested model."""
    operation: str | None
    """``gen_ai.operation.name`` (``chat``, ``execute_tool``, ...)."""
    error: str | None
    """The span's ERROR status description (scrubbed); ``None``: the op succeeded."""
    error_type: str | None
    started_ns: int
    ended_ns: int
    origin_txn_id: str
    """The origin txn id of the run; like the other ids, on every op's span (a record made by
    hand without them has ``None``)."""
    txn_id: str
    agent_id: str
    path: str
    """The op's path label."""
    call_path: str | None
    """The call path of the agent run the op belongs to."""
    provider: str | None
    request_model: str | None
    response_provider: str | None
    """The provider that actually served the attempt, where the response says it."""
    response_model: str | None
    attempt: int | None
    usage: Usage | None
    """An LLM attempt's tokens (``None`` on a tool call)."""
    time_to_first_chunk: float | None
    """Seconds from a streamed attempt's start to its first chunk (``None``: not streamed)."""
    cost_usd: float | None
    upstream_cost_usd: float | None
    mocked: bool
    """An LLM attempt no model answered (litellm's ``mock_response``): its cost is 0."""
    tool_name: str | None
    tool_provider: str | None
    mcp_server: str | None
    chars_in: int | None
    """Length of a tool call's arguments as JSON."""
    chars_out: int | None
    """Length of a tool call's result as JSON (``None`` when it failed)."""
    trace_id: int
    """0 when the op had no span context (OpenTelemetry's no-op tracer)."""
    span_id: int
    trace_flags: int
    """The span's W3C trace flags (bit 0: sampled)."""

    @property
    def is_llm(self) -> bool:
        """Whether it is an LLM attempt (else a tool call)."""
        return self.kind == sc.KIND_LLM

    @property
    def failed(self) -> bool:
        """Whether it ended with an error."""
        return self.error is not None

    @property
    def latency_ms(self) -> float:
        """How long it took, in milliseconds."""
        return (self.ended_ns - self.started_ns) / 1e6


def op_outcome(
    started: Mapping[str, Any],
    ended: Mapping[str, Any],
    started_ns: int,
    ended_ns: int,
    error: str | None,
    call_path: str | None,
    name: str = "",
    trace_id: int = 0,
    span_id: int = 0,
    trace_flags: int = 0,
    kind: str | None = None,
) -> OpOutcome:
    """The outcome of an op whose span started with the attributes ``started`` and gained
    ``ended`` since (a key set again counts as set last), and ended at ``ended_ns`` with
    ``error`` (``None``: success). ``name``: the op's name when its span names neither a tool
    nor a model; ``kind``: its kind when its span does not say."""
    attributes = {**started, **ended}
    get: Callable[..., Any] = attributes.get  # values as the span has them
    outcome = OpOutcome()
    outcome.kind = get(sc.KIND, kind)
    named = get(sc.GEN_AI_TOOL_NAME) or get(sc.GEN_AI_REQUEST_MODEL)
    outcome.name = str(named) if named is not None else name
    outcome.operation = get(sc.GEN_AI_OPERATION_NAME)
    outcome.error = error
    outcome.error_type = get(sc.ERROR_TYPE)
    outcome.started_ns = started_ns
    outcome.ended_ns = ended_ns
    outcome.origin_txn_id = get(sc.TXN_ORIGIN)
    outcome.txn_id = get(sc.TXN_ID)
    outcome.agent_id = get(sc.AGENT_ID)
    outcome.path = get(sc.PATH)
    outcome.call_path = call_path
    outcome.trace_id = trace_id
    outcome.span_id = span_id
    outcome.trace_flags = trace_flags
    if outcome.kind == sc.KIND_LLM:
        outcome.provider = get(sc.GEN_AI_PROVIDER_NAME)
        outcome.request_model = get(sc.GEN_AI_REQUEST_MODEL)
        outcome.response_provider = get(sc.RESPONSE_PROVIDER)
        outcome.response_model = get(sc.GEN_AI_RESPONSE_MODEL)
        outcome.attempt = get(sc.ATTEMPT)
        outcome.usage = Usage(
            get(sc.GEN_AI_USAGE_INPUT_TOKENS),
            get(sc.GEN_AI_USAGE_OUTPUT_TOKENS),
            get(sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, 0),
            get(sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS, 0),
            get(sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS, 0),
        )
        outcome.time_to_first_chunk = get(sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK)
        outcome.cost_usd = get(sc.COST_USD)
        outcome.upstream_cost_usd = get(sc.COST_UPSTREAM_USD)
        outcome.mocked = get(sc.MOCKED) is True
        outcome.tool_name = outcome.tool_provider = outcome.mcp_server = None
        outcome.chars_in = outcome.chars_out = None
    else:
        outcome.provider = outcome.request_model = outcome.response_provider = None
        outcome.response_model = outcome.attempt = outcome.usage = None
        outcome.time_to_first_chunk = None
        outcome.cost_usd = get(sc.COST_USD)
        outcome.upstream_cost_usd = None
        outcome.mocked = False
        outcome.tool_name = get(sc.GEN_AI_TOOL_NAME)
        outcome.tool_provider = get(sc.TOOL_PROVIDER)
        outcome.mcp_server = get(sc.TOOL_MCP_SERVER)
        outcome.chars_in = get(sc.TOOL_CHARS_IN)
        outcome.chars_out = get(sc.TOOL_CHARS_OUT)
    return outcome
