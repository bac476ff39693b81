"""What an op (an LLM attempt or a tool call) came to when it ended, as typed values.

An op's :class:`OpOutcome` is its one record of what it used, cost and returned: its usage
(tokens in and out, cache reads and writes, reasoning), its cost, its tool's input and output
sizes, its status, and the identity of the op and its span. Every output that says what an op
came to is derived from it, each in one function: its span's attributes
(``agenttrace.tracing.op_attributes``), its accounting entry, which is its line of the billing
ledger and of the stream (``agenttrace.formats.ledger.accounting_entry``), its GenAI metrics
(``agenttrace.sdk.metrics``), its opTree node (``agenttrace.recorder.optree_builder``) and its
console line (``agenttrace.recorder.console``).

While the op runs, what it comes to is filled in by typed setters on an :class:`OutcomeBuilder`
(its scope's ``outcome``), as OpenTelemetry util-genai's ``InferenceInvocation`` is; when it
ends, the builder and the op's identity make the frozen :class:`OpOutcome`. Nothing here knows
an attribute name: the names are the wire's (``agenttrace.tracing.op_attributes``), used only by the
projections. An outcome is immutable once made, so a sink may read it later, on another thread.
"""

from __future__ import annotations

from typing import Any

import msgspec

KIND_LLM = "llm"
"""The kind of an LLM attempt (the opTree's and the wire's)."""


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


class OpOutcome(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One op as it ended: what it was, how it went, what it used and cost.

    The LLM fields are ``None`` on a tool call, and the tool fields on an LLM attempt.
    """

    kind: str | None
    """``llm`` or ``tool`` (``session`` for a tool that hosted a sub-agent run)."""
    name: str
    """The tool's name, or the requested model."""
    started_ns: int
    ended_ns: int
    path: str
    """The op's path label."""
    origin_txn_id: str
    """The origin txn id of the run."""
    txn_id: str
    agent_id: str
    parent_txn_id: str | None = None
    """The txn id of the agent run whose tool call ran the op's run (``None`` in a root run)."""
    call_path: str | None = None
    """The call path of the agent run the op belongs to."""
    operation: str | None = None
    """The GenAI operation (``chat``, ``execute_tool``, ...)."""
    error: str | None = None
    """The span's ERROR status description (scrubbed); ``None``: the op succeeded."""
    error_type: str | None = None
    provider: str | None = None
    request_model: str | None = None
    response_provider: str | None = None
    """The provider that actually served the attempt, where the response says it."""
    response_model: str | None = None
    attempt: int | None = None
    usage: Usage | None = None
    """An LLM attempt's tokens (``None`` on a tool call)."""
    time_to_first_chunk: float | None = None
    """Seconds from a streamed attempt's start to its first chunk (``None``: not streamed)."""
    cost_usd: float | None = None
    upstream_cost_usd: float | None = None
    mocked: bool = False
    """An LLM attempt no model answered (litellm's ``mock_response``): its cost is 0."""
    tool_name: str | None = None
    tool_provider: str | None = None
    mcp_server: str | None = None
    chars_in: int | None = None
    """Length of a tool call's arguments as JSON."""
    chars_out: int | None = None
    """Length of a tool call's result as JSON (``None`` when it failed)."""
    trace_id: int = 0
    """0 when the op had no span context (OpenTelemetry's no-op tracer)."""
    span_id: int = 0
    trace_flags: int = 0
    """The span's W3C trace flags (bit 0: sampled)."""

    @property
    def is_llm(self) -> bool:
        """Whether it is an LLM attempt (else a tool call)."""
        return self.kind == KIND_LLM

    @property
    def failed(self) -> bool:
        """Whether it ended with an error."""
        return self.error is not None

    @property
    def latency_ms(self) -> float:
        """How long it took, in milliseconds."""
        return (self.ended_ns - self.started_ns) / 1e6


class OutcomeBuilder:
    """What an op comes to, filled in by typed setters while it runs (its scope's ``outcome``).

    What is known when the op starts (the requested model and provider, the attempt's number, a
    tool's provider and input size) is set before its span starts, and goes on the span as it
    starts; the rest (usage, price, the response's model, a tool's output size, an error's
    type) is set during the call or as it ends. A value set again replaces the last one.
    :meth:`outcome` makes the frozen :class:`OpOutcome` when the op has ended.
    """

    __slots__ = (
        "attempt",
        "chars_in",
        "chars_out",
        "cost_usd",
        "error_type",
        "mcp_server",
        "mocked",
        "operation",
        "provider",
        "request_model",
        "response_model",
        "response_provider",
        "time_to_first_chunk",
        "tool_name",
        "tool_provider",
        "upstream_cost_usd",
        "usage",
    )

    def __init__(self) -> None:
        self.operation: str | None = None
        self.provider: str | None = None
        self.request_model: str | None = None
        self.attempt: int | None = None
        self.mocked = False
        self.response_model: str | None = None
        self.response_provider: str | None = None
        self.usage: Usage | None = None
        self.time_to_first_chunk: float | None = None
        self.cost_usd: float | None = None
        self.upstream_cost_usd: float | None = None
        self.tool_name: str | None = None
        self.tool_provider: str | None = None
        self.mcp_server: str | None = None
        self.chars_in: int | None = None
        self.chars_out: int | None = None
        self.error_type: str | None = None

    def copy(self) -> OutcomeBuilder:
        """A builder with the same values (the next attempt of one request starts from it)."""
        other = OutcomeBuilder.__new__(OutcomeBuilder)
        for name in OutcomeBuilder.__slots__:
            setattr(other, name, getattr(self, name))
        return other

    # --- known at the start ---------------------------------------------------------------

    def set_operation(self, operation: str) -> None:
        """The GenAI operation (``chat``, ``embeddings``, ``execute_tool``)."""
        self.operation = operation

    def set_request(self, model: str, provider: str | None) -> None:
        """The model an LLM attempt asks for, and its provider (``None``: not known)."""
        self.request_model = model
        self.provider = provider

    def set_attempt(self, number: int) -> None:
        """Which attempt at its request an LLM attempt is (1 for the first)."""
        self.attempt = number

    def set_mocked(self) -> None:
        """No model answers this attempt (litellm's ``mock_response``): it costs nothing."""
        self.mocked = True

    def set_tool(self, name: str, provider: str | None = None) -> None:
        """A tool call's tool, and who provides it (``None``: not said)."""
        self.tool_name = name
        if provider is not None:
            self.tool_provider = provider

    def set_mcp_server(self, server: str) -> None:
        """The MCP server a tool call went to."""
        self.mcp_server = server

    # --- known during the call or at its end ----------------------------------------------

    def set_sizes(self, chars_in: int | None = None, chars_out: int | None = None) -> None:
        """A tool call's input and output sizes (its arguments and result as JSON, in
        characters); ``None`` leaves a size as it was."""
        if chars_in is not None:
            self.chars_in = chars_in
        if chars_out is not None:
            self.chars_out = chars_out

    def set_response(self, model: str | None = None, provider: str | None = None) -> None:
        """The model that answered, and the provider that served it where a gateway says
        (``None`` leaves a value as it was)."""
        if model is not None:
            self.response_model = model
        if provider is not None:
            self.response_provider = provider

    def set_usage(self, usage: Usage | None) -> None:
        """An LLM attempt's token counts (``None``: not reported)."""
        self.usage = usage

    def set_cost(self, usd: float | None) -> None:
        """What the op cost, in USD (``None``: not known, or nothing was bought)."""
        self.cost_usd = usd

    def set_upstream_cost(self, usd: float | None) -> None:
        """What the provider behind a gateway charged for the attempt, in USD."""
        self.upstream_cost_usd = usd

    def set_time_to_first_chunk(self, seconds: float) -> None:
        """Seconds from a streamed attempt's start to its first chunk."""
        self.time_to_first_chunk = seconds

    def set_error(self, error_type: str) -> None:
        """The type of the error the op failed with (its class, or a category)."""
        self.error_type = error_type

    # --- at the end -----------------------------------------------------------------------

    def outcome(
        self,
        kind: str | None,
        name: str,
        path: str,
        started_ns: int,
        ended_ns: int,
        error: str | None = None,
        *,
        origin_txn_id: str,
        txn_id: str,
        agent_id: str,
        parent_txn_id: str | None = None,
        call_path: str | None = None,
        trace_id: int = 0,
        span_id: int = 0,
        trace_flags: int = 0,
    ) -> OpOutcome:
        """The op's frozen outcome: these values, with its identity, kind (``llm`` keeps the
        LLM fields, any other kind the tool fields) and how it ended (``error``: its status
        description, ``None``: success). ``name``: the op's name when it has neither a tool
        nor a requested model."""
        named = self.tool_name or self.request_model
        return OpOutcome(
            kind=kind,
            name=named if named is not None else name,
            started_ns=started_ns,
            ended_ns=ended_ns,
            path=path,
            origin_txn_id=origin_txn_id,
            txn_id=txn_id,
            agent_id=agent_id,
            parent_txn_id=parent_txn_id,
            call_path=call_path,
            operation=self.operation,
            error=error,
            error_type=self.error_type,
            cost_usd=self.cost_usd,
            trace_id=trace_id,
            span_id=span_id,
            trace_flags=trace_flags,
            **(self._llm_fields() if kind == KIND_LLM else self._tool_fields()),
        )

    def _llm_fields(self) -> dict[str, Any]:
        """What only an LLM attempt's outcome holds."""
        return {
            "provider": self.provider,
            "request_model": self.request_model,
            "response_provider": self.response_provider,
            "response_model": self.response_model,
            "attempt": self.attempt,
            "usage": self.usage if self.usage is not None else Usage(None, None),
            "time_to_first_chunk": self.time_to_first_chunk,
            "upstream_cost_usd": self.upstream_cost_usd,
            "mocked": self.mocked,
        }

    def _tool_fields(self) -> dict[str, Any]:
        """What only a tool call's outcome holds."""
        return {
            "tool_name": self.tool_name,
            "tool_provider": self.tool_provider,
            "mcp_server": self.mcp_server,
            "chars_in": self.chars_in,
            "chars_out": self.chars_out,
        }
