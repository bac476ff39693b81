"""An op's typed outcome (``agenttrace.model.outcome``) as the attributes of its span.

The span's attributes are one projection of the op's :class:`OutcomeBuilder`, the typed values
set during the call: :func:`start_attributes` when the span starts (what was known then: the
request, the attempt, a tool's provider and input size) and :func:`end_attributes` when it
ends (usage, price, the response, a tool's output size, an error's type), each value by one
function below. Nothing reads these names back into an outcome: the outcome is made from the
builder itself.

User code that sets a billing value as a span attribute by its name (``Handle.set_attribute``
with ``agenttrace.cost.usd``, say) has it routed to the builder's setter
(:func:`route_user_attribute`), so the outcome, the ledger and the span agree.
"""

from __future__ import annotations

from collections.abc import Callable

from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace._internal.runtime import runtime
from agenttrace.model.outcome import OutcomeBuilder, Usage


def start_attributes(outcome: OutcomeBuilder) -> dict[str, AttributeValue]:
    """What an op's span starts with of its outcome: an LLM attempt's request (operation,
    model, provider, attempt, whether it is mocked), a tool call's provider, MCP server and
    input size (its name and operation are the span's own: ``scopes.start_op``)."""
    attributes: dict[str, AttributeValue] = {}
    openinference = runtime.settings.openinference
    if outcome.request_model is not None:
        if outcome.operation is not None:
            attributes[sc.GEN_AI_OPERATION_NAME] = outcome.operation
        attributes[sc.GEN_AI_REQUEST_MODEL] = outcome.request_model
        if outcome.attempt is not None:
            attributes[sc.ATTEMPT] = outcome.attempt
        if openinference:  # OpenInference's names, for Phoenix
            attributes[sc.LLM_MODEL_NAME] = outcome.request_model
        if outcome.provider:
            attributes[sc.GEN_AI_PROVIDER_NAME] = outcome.provider
            if openinference:
                attributes[sc.LLM_PROVIDER] = outcome.provider
        if outcome.mocked:
            attributes[sc.MOCKED] = True  # from its start: a failed mock says so too
    if outcome.tool_provider is not None:
        attributes[sc.TOOL_PROVIDER] = outcome.tool_provider
    if outcome.mcp_server is not None:
        attributes[sc.TOOL_MCP_SERVER] = outcome.mcp_server
    if outcome.chars_in is not None:
        attributes[sc.TOOL_CHARS_IN] = outcome.chars_in
    return attributes


def end_attributes(outcome: OutcomeBuilder) -> dict[str, AttributeValue]:
    """What an op's span gains of its outcome as it ends: the response's model and provider,
    the usage, the first chunk's time, the price, a tool call's output size, the error's
    type (each only when known)."""
    attributes: dict[str, AttributeValue] = {}
    if outcome.response_model is not None:
        attributes[sc.GEN_AI_RESPONSE_MODEL] = outcome.response_model
    if outcome.response_provider is not None:
        attributes[sc.RESPONSE_PROVIDER] = outcome.response_provider
    if outcome.usage is not None:
        attributes.update(usage_span_attributes(outcome.usage))
    if outcome.time_to_first_chunk is not None:
        attributes[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = outcome.time_to_first_chunk
    if outcome.cost_usd is not None or outcome.upstream_cost_usd is not None:
        attributes.update(cost_span_attributes(outcome.cost_usd, outcome.upstream_cost_usd))
    if outcome.chars_out is not None:
        attributes.update(tool_output_size_attributes(outcome.chars_out))
    if outcome.error_type is not None:
        attributes.update(error_span_attributes(outcome.error_type))
    return attributes


def usage_span_attributes(usage: Usage) -> dict[str, AttributeValue]:
    """An LLM attempt's token counts as span attributes: the GenAI conventions' (a count not
    reported, and cache and reasoning counts of 0, left out), and OpenInference's when that
    setting is on and both input and output are known."""
    attributes: dict[str, AttributeValue] = {}
    if usage.input is not None:
        attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] = usage.input
    if usage.output is not None:
        attributes[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = usage.output
    if usage.cache_read:
        attributes[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = usage.cache_read
    if usage.cache_write:
        attributes[sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] = usage.cache_write
    if usage.reasoning:
        attributes[sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = usage.reasoning
    if usage.input is not None and usage.output is not None and runtime.settings.openinference:
        attributes[sc.LLM_TOKEN_COUNT_PROMPT] = usage.input
        attributes[sc.LLM_TOKEN_COUNT_COMPLETION] = usage.output
        attributes[sc.LLM_TOKEN_COUNT_TOTAL] = usage.total
    return attributes


def cost_span_attributes(
    cost_usd: float | None, upstream_usd: float | None = None
) -> dict[str, AttributeValue]:
    """What an op or a run cost as span attributes: its price in USD, and for an LLM attempt
    the price its provider's upstream charged, where reported (``None``: not known, left
    out)."""
    attributes: dict[str, AttributeValue] = {}
    if cost_usd is not None:
        attributes[sc.COST_USD] = cost_usd
    if upstream_usd is not None:
        attributes[sc.COST_UPSTREAM_USD] = upstream_usd
    return attributes


def tool_output_size_attributes(chars_out: int) -> dict[str, AttributeValue]:
    """A tool call's output size (its result as JSON, in characters) as span attributes."""
    return {sc.TOOL_CHARS_OUT: chars_out}


def error_span_attributes(error_type: str) -> dict[str, AttributeValue]:
    """A failed scope's error type as span attributes (its status and description are the
    span's own status: ``scopes.record_error``)."""
    return {sc.ERROR_TYPE: error_type}


def _number(value: AttributeValue) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _tokens(field: str) -> Callable[[OutcomeBuilder, AttributeValue], bool]:
    def set_tokens(outcome: OutcomeBuilder, value: AttributeValue) -> bool:
        if not isinstance(value, int) or isinstance(value, bool):
            return False
        usage = outcome.usage if outcome.usage is not None else Usage(None, None)
        setattr(usage, field, value)
        outcome.set_usage(usage)
        return True

    return set_tokens


def _cost(outcome: OutcomeBuilder, value: AttributeValue) -> bool:
    usd = _number(value)
    if usd is not None:
        outcome.set_cost(usd)
    return usd is not None


def _upstream_cost(outcome: OutcomeBuilder, value: AttributeValue) -> bool:
    usd = _number(value)
    if usd is not None:
        outcome.set_upstream_cost(usd)
    return usd is not None


def _response_model(outcome: OutcomeBuilder, value: AttributeValue) -> bool:
    if isinstance(value, str):
        outcome.set_response(model=value)
    return isinstance(value, str)


_USER_SETTABLE: dict[str, Callable[[OutcomeBuilder, AttributeValue], bool]] = {
    sc.COST_USD: _cost,
    sc.COST_UPSTREAM_USD: _upstream_cost,
    sc.GEN_AI_USAGE_INPUT_TOKENS: _tokens("input"),
    sc.GEN_AI_USAGE_OUTPUT_TOKENS: _tokens("output"),
    sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: _tokens("cache_read"),
    sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: _tokens("cache_write"),
    sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: _tokens("reasoning"),
    sc.GEN_AI_RESPONSE_MODEL: _response_model,
}
"""The billing values user code may set on an op by attribute name (documented in the README's
"Cost" notes): each goes to its typed setter."""


def route_user_attribute(outcome: OutcomeBuilder, key: str, value: AttributeValue) -> bool:
    """Set the billing value ``key`` names on ``outcome`` (the span gets it from the outcome as
    it ends); ``False``: ``key`` is no billing value (or ``value`` not of its type), and stays a
    plain attribute."""
    route = _USER_SETTABLE.get(key)
    return route is not None and route(outcome, value)
