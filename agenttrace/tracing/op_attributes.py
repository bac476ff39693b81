"""An op's typed values (``agenttrace.model.outcome``) as the attributes of its span: one
function per value (usage, cost, tool sizes, error type), so what a span says of an op's
outcome is written in one place, and read back from it in one place (``op_outcome``)."""

from __future__ import annotations

from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace._internal.runtime import runtime
from agenttrace.model.outcome import Usage


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
    """What an op cost as span attributes: its price in USD, and for an LLM attempt the price
    its provider's upstream charged, where reported (``None``: not known, left out)."""
    attributes: dict[str, AttributeValue] = {}
    if cost_usd is not None:
        attributes[sc.COST_USD] = cost_usd
    if upstream_usd is not None:
        attributes[sc.COST_UPSTREAM_USD] = upstream_usd
    return attributes


def unpriced(attributes: dict[str, AttributeValue]) -> dict[str, AttributeValue]:
    """``attributes`` without a price: an op answered from the journal bought nothing."""
    attributes.pop(sc.COST_USD, None)
    return attributes


def tool_input_size_attributes(chars_in: int) -> dict[str, AttributeValue]:
    """A tool call's input size (its arguments as JSON, in characters) as span attributes."""
    return {sc.TOOL_CHARS_IN: chars_in}


def tool_output_size_attributes(chars_out: int) -> dict[str, AttributeValue]:
    """A tool call's output size (its result as JSON, in characters) as span attributes."""
    return {sc.TOOL_CHARS_OUT: chars_out}


def error_span_attributes(error_type: str) -> dict[str, AttributeValue]:
    """A failed op's error type as span attributes (its status and description are the
    span's own status: ``scopes.record_error``)."""
    return {sc.ERROR_TYPE: error_type}
