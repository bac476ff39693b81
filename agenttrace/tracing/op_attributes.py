"""An op's typed values (``agenttrace.model.outcome``) as the attributes of its span: one
function per value, so what a span says of an op's usage is written in one place, and read back
from it in one place (``op_outcome``)."""

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
