"""One typed record per op: an op's outcome (agenttrace/model/outcome.py) is filled by typed
setters while it runs and frozen when it ends; its span's attributes are a projection of it
(tracing/op_attributes.py), and so is its accounting entry (the ledger line), an
``AccountingEntry`` written key for key as the ledger has always had it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import msgspec
import pytest

from agenttrace import model
from agenttrace import semconv as sc
from agenttrace.formats.compact_json import compact_json
from agenttrace.formats.ledger import ACCOUNTED_PREFIX, Accounted, accounted_line, accounting_entry
from agenttrace.formats.session.schema import AccountingEntry
from agenttrace.model.outcome import KIND_LLM, OpOutcome, OutcomeBuilder, Usage
from agenttrace.tracing.op_attributes import (
    cost_span_attributes,
    end_attributes,
    route_user_attribute,
    start_attributes,
    usage_span_attributes,
)

IDENTITY = {"origin_txn_id": "0123456789abcdef", "txn_id": "0123456789abcdef"}


def _llm() -> OutcomeBuilder:
    outcome = OutcomeBuilder()
    outcome.set_operation("chat")
    outcome.set_request("gpt-4o", "openai")
    outcome.set_attempt(1)
    outcome.set_response(model="gpt-4o-2024-08-06")
    outcome.set_usage(Usage(120, 30, cache_read=100, reasoning=5))
    outcome.set_cost(0.1 + 0.2)  # 0.30000000000000004: written to 12 decimals
    return outcome


def _tool() -> OutcomeBuilder:
    outcome = OutcomeBuilder()
    outcome.set_operation("execute_tool")
    outcome.set_tool("search")
    outcome.set_mcp_server("docs")
    outcome.set_sizes(chars_in=17)
    return outcome


def _made(
    outcome: OutcomeBuilder,
    kind: str,
    path: str,
    ended_ns: int,
    error: str | None = None,
    call_path: str | None = None,
    started_ns: int = 0,
) -> OpOutcome:
    return outcome.outcome(
        kind,
        "x",
        path,
        started_ns,
        ended_ns,
        error,
        agent_id="agent_001",
        call_path=call_path,
        trace_id=7,
        span_id=9,
        **IDENTITY,
    )


def test_an_llm_attempt_s_outcome_is_typed_and_its_entry_is_its_ledger_line() -> None:
    op = _made(_llm(), "llm", "1.1", 1_250_000_000, None, "main", 1_000_000_000)
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
        b'"originTxnId":"0123456789abcdef","txnId":"0123456789abcdef","parentTxnId":null,'
        b'"agentId":"agent_001","path":"1.1","provider":"openai","model":"gpt-4o","actualModel":"gpt-4o-2024-08-06",'
        b'"attempt":1,"tokens":{"inputTokens":120,"outputTokens":30,"cacheReadInputTokens":100,'
        b'"cacheWriteInputTokens":0,"reasoningTokens":5,"totalTokens":150},"costUsd":0.3,'
        b'"callPath":"main"}'
    )
    # What the ledger writes, the session file's reader takes back as it is.
    assert msgspec.json.decode(compact_json(entry), type=AccountingEntry) == entry


def test_a_failed_tool_call_s_entry_names_its_error_and_leaves_out_what_it_does_not_know() -> None:
    outcome = _tool()
    outcome.set_error("TimeoutError")
    op = _made(outcome, "tool", "1.2", 3_000_000, "TimeoutError: slow")
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
        "parentTxnId": None,  # a root run's op
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
        outcome = _tool()
        outcome.set_sizes(chars_out=6)
        return outcome.outcome(
            "tool", "x", "1.2", 0, 2_000_000, agent_id="agent_001", call_path="main", **IDENTITY
        )

    accounted = Accounted(None, "1970-01-01T00:00:00.002Z", inline=False, make=make)  # type: ignore[arg-type]
    assert made == []  # nothing made in the caller's thread
    line = accounted.ledger_line()
    assert accounted.op.chars_out == 6 and made == [1]
    stream = json.loads(accounted.stream_line())
    assert stream["accounting"] == json.loads(line)
    assert (stream["kind"], stream["name"], stream["path"]) == ("tool", "search", "1.2")
    assert "trace_id" not in stream  # no span context: no linkage fields


def test_an_entry_whose_text_json_cannot_encode_is_written_as_json_dumps_writes_it() -> None:
    outcome = _tool()
    outcome.set_tool("bad\udc80name")
    entry = accounting_entry(_made(outcome, "tool", "1.2", 1_000_000))
    written = compact_json(entry)
    assert b'"command":"bad\\udc80name"' in written
    assert list(json.loads(written)) == list(msgspec.to_builtins(entry))


def test_an_attempt_s_span_attributes_are_the_projection_of_its_outcome() -> None:
    outcome = _llm()
    assert start_attributes(outcome) == {
        sc.GEN_AI_OPERATION_NAME: "chat",
        sc.GEN_AI_REQUEST_MODEL: "gpt-4o",
        sc.ATTEMPT: 1,
        sc.GEN_AI_PROVIDER_NAME: "openai",
    }
    outcome.set_upstream_cost(0.001)
    outcome.set_time_to_first_chunk(0.25)
    assert end_attributes(outcome) == {
        sc.GEN_AI_RESPONSE_MODEL: "gpt-4o-2024-08-06",
        sc.GEN_AI_USAGE_INPUT_TOKENS: 120,
        sc.GEN_AI_USAGE_OUTPUT_TOKENS: 30,
        sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 100,  # a cache write of 0: left out
        sc.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: 5,
        sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: 0.25,
        sc.COST_USD: 0.1 + 0.2,
        sc.COST_UPSTREAM_USD: 0.001,
    }
    assert usage_span_attributes(Usage(None, None)) == {}  # not reported: not said
    assert cost_span_attributes(None) == {}  # no price known: none said, never 0
    op = _made(outcome, KIND_LLM, "1.1", 1)
    assert (op.cost_usd, op.upstream_cost_usd, op.time_to_first_chunk) == (0.1 + 0.2, 0.001, 0.25)
    with pytest.raises(AttributeError):
        op.cost_usd = 1.0  # type: ignore[misc]  # frozen once made


def test_a_tool_call_s_span_attributes_are_the_projection_of_its_outcome() -> None:
    outcome = _tool()
    outcome.set_tool("search", provider="acme")
    assert start_attributes(outcome) == {
        sc.TOOL_PROVIDER: "acme",
        sc.TOOL_MCP_SERVER: "docs",
        sc.TOOL_CHARS_IN: 17,
    }
    outcome.set_sizes(chars_out=0)
    outcome.set_error("Timeout")
    assert end_attributes(outcome) == {sc.TOOL_CHARS_OUT: 0, sc.ERROR_TYPE: "Timeout"}
    call = _made(outcome, "tool", "1.2", 1, "Timeout: slow")
    assert (call.chars_in, call.chars_out, call.error_type) == (17, 0, "Timeout")
    assert (call.usage, call.request_model, call.tool_provider) == (None, None, "acme")


def test_a_billing_value_user_code_sets_by_name_goes_to_the_outcome() -> None:
    outcome = OutcomeBuilder()
    assert route_user_attribute(outcome, sc.COST_USD, 0.25)
    assert route_user_attribute(outcome, sc.GEN_AI_USAGE_INPUT_TOKENS, 12)
    assert not route_user_attribute(outcome, sc.COST_USD, "a lot")  # not a number: plain
    assert not route_user_attribute(outcome, "page", 3)
    assert outcome.cost_usd == 0.25
    assert outcome.usage is not None and (outcome.usage.input, outcome.usage.output) == (12, None)
    assert end_attributes(outcome) == {sc.GEN_AI_USAGE_INPUT_TOKENS: 12, sc.COST_USD: 0.25}


def test_the_domain_imports_no_wire_names() -> None:
    """``model/`` knows no attribute name: no module of it imports ``agenttrace.semconv``."""
    importing = []
    for path in sorted(Path(model.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [f"{node.module}.{a.name}" for a in node.names]
            if any(name.startswith("agenttrace.semconv") for name in names):
                importing.append(path.name)
    assert importing == []
    assert KIND_LLM == sc.KIND_LLM


@pytest.mark.parametrize(
    "name",
    ["search", 'a "quoted" name\\ with \n controls', "café ☕", "a lone surrogate \udc80"],
)
@pytest.mark.parametrize("trace_id", [0, 0x0123456789ABCDEF0123456789ABCDEF])
def test_a_stream_line_made_from_the_outcome_is_the_line_the_event_writes(
    name: str, trace_id: int
) -> None:
    # The worker writes an op's op_accounted line in one format from its outcome; the event's
    # writer (field by field, the stream's separators) is what every other line goes through.
    outcome = _tool()
    outcome.set_tool(name)
    made = outcome.outcome(
        "tool", name, "1.2", 0, 2_000_000, agent_id="agent_001", call_path="main", **IDENTITY
    )
    op = msgspec.structs.replace(made, trace_id=trace_id, span_id=0xFEDCBA9876543210)
    accounted = Accounted(op, "1970-01-01T00:00:00.002Z")
    line = accounted.stream_line()
    assert line == accounted_line(accounted.event, accounted.entry_json)
    assert line.startswith(ACCOUNTED_PREFIX) and line.endswith(b"}\n")
    assert ("trace_id" in json.loads(line.decode("utf-8", "surrogatepass"))) is bool(trace_id)
