"""One typed record per op: an op's outcome (agenttrace/model/outcome.py) is read once from its
span's attributes, and its accounting entry (the ledger line) is derived from it as an
``AccountingEntry``, written key for key as the ledger has always had it."""

from __future__ import annotations

import json

import msgspec

from agenttrace import semconv as sc
from agenttrace.formats.compact_json import compact_json
from agenttrace.formats.ledger import Accounted, accounting_entry
from agenttrace.formats.session.schema import AccountingEntry
from agenttrace.model.outcome import Usage, op_outcome
from agenttrace.tracing.op_attributes import (
    cost_span_attributes,
    error_span_attributes,
    tool_input_size_attributes,
    tool_output_size_attributes,
    unpriced,
    usage_span_attributes,
)

LLM_STARTED = {
    sc.KIND: sc.KIND_LLM,
    sc.TXN_ORIGIN: "0123456789abcdef",
    sc.TXN_ID: "0123456789abcdef",
    sc.AGENT_ID: "agent_001",
    sc.PATH: "1.1",
    sc.GEN_AI_OPERATION_NAME: "chat",
    sc.GEN_AI_PROVIDER_NAME: "openai",
    sc.GEN_AI_REQUEST_MODEL: "gpt-4o",
    sc.ATTEMPT: 1,
}
LLM_ENDED = {
    sc.GEN_AI_RESPONSE_MODEL: "gpt-4o-2024-08-06",
    sc.GEN_AI_USAGE_INPUT_TOKENS: 120,
    sc.GEN_AI_USAGE_OUTPUT_TOKENS: 30,
    sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 100,
    sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: 5,
    sc.COST_USD: 0.1 + 0.2,  # 0.30000000000000004: written to 12 decimals
}
TOOL_STARTED = {
    sc.KIND: sc.KIND_TOOL,
    sc.TXN_ORIGIN: "0123456789abcdef",
    sc.TXN_ID: "0123456789abcdef",
    sc.AGENT_ID: "agent_001",
    sc.PATH: "1.2",
    sc.GEN_AI_OPERATION_NAME: "execute_tool",
    sc.GEN_AI_TOOL_NAME: "search",
    sc.TOOL_MCP_SERVER: "docs",
    sc.TOOL_CHARS_IN: 17,
}


def test_an_llm_attempt_s_outcome_is_typed_and_its_entry_is_the_ledger_line_it_always_was() -> None:
    op = op_outcome(LLM_STARTED, LLM_ENDED, 1_000_000_000, 1_250_000_000, None, "main", "x", 7, 9)
    assert (op.kind, op.name, op.operation, op.failed) == ("llm", "gpt-4o", "chat", False)
    assert op.usage is not None
    usage = op.usage
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write) == (120, 30, 100, 0)
    assert (usage.reasoning, usage.total) == (5, 150)
    assert (op.latency_ms, op.chars_in, op.trace_id, op.span_id) == (250.0, None, 7, 9)

    entry = accounting_entry(op)
    assert isinstance(entry, AccountingEntry)
    assert compact_json(entry) == (
        b'{"timestamp":1250,"status":"ok","latency":250.0,"type":"llm",'
        b'"originTxnId":"0123456789abcdef","txnId":"0123456789abcdef","agentId":"agent_001",'
        b'"path":"1.1","provider":"openai","model":"gpt-4o","actualModel":"gpt-4o-2024-08-06",'
        b'"attempt":1,"tokens":{"inputTokens":120,"outputTokens":30,"cacheReadInputTokens":100,'
        b'"cacheWriteInputTokens":0,"reasoningTokens":5,"totalTokens":150},"costUsd":0.3,'
        b'"callPath":"main"}'
    )
    # What the ledger writes, the session file's reader takes back as it is.
    assert msgspec.json.decode(compact_json(entry), type=AccountingEntry) == entry


def test_a_failed_tool_call_s_entry_names_its_error_and_leaves_out_what_it_does_not_know() -> None:
    ended = {sc.ERROR_TYPE: "TimeoutError"}
    op = op_outcome(TOOL_STARTED, ended, 0, 3_000_000, "TimeoutError: slow", None, kind="tool")
    assert (op.tool_name, op.mcp_server, op.chars_in, op.chars_out, op.usage) == (
        "search",
        "docs",
        17,
        None,
        None,
    )
    assert json.loads(compact_json(accounting_entry(op))) == {
        "timestamp": 3,
        "status": "failed",
        "latency": 3.0,
        "type": "tool",
        "originTxnId": "0123456789abcdef",
        "txnId": "0123456789abcdef",
        "agentId": "agent_001",
        "path": "1.2",
        "providerLabel": "docs",
        "mcpServer": "docs",
        "command": "search",
        "charactersIn": 17,
        "charactersOut": None,
        "error": "TimeoutError: slow",
        "errorType": "TimeoutError",
        "callPath": None,
    }


def test_a_free_op_s_outcome_is_made_once_when_first_read_and_its_lines_agree() -> None:
    made = []

    def make() -> object:
        made.append(1)
        return op_outcome(TOOL_STARTED, {sc.TOOL_CHARS_OUT: 6}, 0, 2_000_000, None, "main")

    accounted = Accounted(None, "1970-01-01T00:00:00.002Z", inline=False, make=make)  # type: ignore[arg-type]
    assert made == []  # nothing made in the caller's thread
    line = accounted.ledger_line()
    assert accounted.op.chars_out == 6 and made == [1]
    stream = json.loads(accounted.stream_line())
    assert stream["accounting"] == json.loads(line)
    assert (stream["kind"], stream["name"], stream["path"]) == ("tool", "search", "1.2")
    assert "trace_id" not in stream  # no span context: no linkage fields


def test_an_entry_whose_text_json_cannot_encode_is_written_as_json_dumps_writes_it() -> None:
    started = {**TOOL_STARTED, sc.GEN_AI_TOOL_NAME: "bad\udc80name"}
    entry = accounting_entry(op_outcome(started, {}, 0, 1_000_000, None, None))
    written = compact_json(entry)
    assert b'"command":"bad\\udc80name"' in written
    assert list(json.loads(written)) == list(msgspec.to_builtins(entry))


def test_an_attempt_s_usage_goes_on_its_span_and_is_read_back_from_it_unchanged() -> None:
    usage = Usage(120, 30, cache_read=100, reasoning=5)
    attributes = usage_span_attributes(usage)
    assert sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS not in attributes  # 0: left out
    op = op_outcome({sc.KIND: sc.KIND_LLM}, attributes, 0, 1_000_000, None, None)
    assert op.usage is not None
    read = op.usage
    assert (read.input, read.output, read.cache_read, read.cache_write, read.reasoning) == (
        120,
        30,
        100,
        0,
        5,
    )


def test_a_price_and_tool_sizes_go_on_a_span_and_are_read_back_from_it_unchanged() -> None:
    priced = cost_span_attributes(0.0015, 0.001)
    attempt = op_outcome({sc.KIND: sc.KIND_LLM}, priced, 0, 1, None, None)
    assert (attempt.cost_usd, attempt.upstream_cost_usd) == (0.0015, 0.001)
    assert cost_span_attributes(None) == {}  # no price known: none said, never 0
    assert unpriced(dict(priced)) == {sc.COST_UPSTREAM_USD: 0.001}
    started = tool_input_size_attributes(14)
    ended = {**tool_output_size_attributes(0), **error_span_attributes("Timeout")}
    call = op_outcome({sc.KIND: sc.KIND_TOOL, **started}, ended, 0, 1, "Timeout: slow", None)
    assert (call.chars_in, call.chars_out, call.error_type) == (14, 0, "Timeout")
