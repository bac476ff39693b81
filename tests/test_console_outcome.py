"""The console's verbose line of an op is made from the op's typed outcome: the one its Ended
record carries, or (an op answered from the journal carries none) the one read from its
span's attributes, with the same line either way."""

from __future__ import annotations

import io
from typing import Any

import pytest

import agenttrace
from agenttrace import semconv as sc
from agenttrace.formats.ledger import Accounted
from agenttrace.model.lifecycle import Ended, Started
from agenttrace.model.outcome import op_outcome
from agenttrace.recorder.console import ConsoleSink

from .conftest import Traced

STARTED_NS = 1_700_000_000_000_000_000
ENDED_NS = STARTED_NS + 1_234_000_000  # 1234 ms later

LLM_STARTED = {
    sc.KIND: sc.KIND_LLM,
    sc.TXN_ORIGIN: "o1",
    sc.PATH: "1.1",
    sc.GEN_AI_PROVIDER_NAME: "openai",
    sc.GEN_AI_REQUEST_MODEL: "gpt-4o",
    sc.GEN_AI_OPERATION_NAME: sc.OP_CHAT,
}
LLM_ENDED = {
    sc.ATTEMPT: 2,
    sc.GEN_AI_USAGE_INPUT_TOKENS: 120,
    sc.GEN_AI_USAGE_OUTPUT_TOKENS: 30,
    sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 100,
    sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: 7,
    sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: 0.25,
    sc.COST_USD: 0.0015,
}
TOOL_STARTED = {
    sc.KIND: sc.KIND_TOOL,
    sc.TXN_ORIGIN: "o1",
    sc.PATH: "1.2",
    sc.GEN_AI_TOOL_NAME: "search",
    sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
    sc.TOOL_CHARS_IN: 14,
}
TOOL_ENDED = {sc.TOOL_CHARS_OUT: 5}


def _line(started: dict[str, Any], ended: dict[str, Any], *, accounted: bool) -> str:
    """The verbose console line of one op that started and ended with these attributes, its
    Ended record carrying its outcome or not."""
    stream = io.StringIO()
    sink = ConsoleSink("verbose", stream)
    sink.consume([Started("o1", started[sc.PATH], "op", "op", STARTED_NS, 1, 2, None, started)])
    outcome = None
    if accounted:
        op = op_outcome(started, ended, STARTED_NS, ENDED_NS, None, None)
        outcome = Accounted(op, "2023-11-14T22:13:21.234Z")
    sink.consume([Ended("o1", started[sc.PATH], ENDED_NS, ended, accounted=outcome)])
    return stream.getvalue()


def test_an_attempt_s_line_says_its_typed_usage_first_chunk_and_cost() -> None:
    line = _line(LLM_STARTED, LLM_ENDED, accounted=True)
    assert line == (
        "[txn:o1] 1.1 llm/openai:gpt-4o: VRB ok 1234ms, attempt 2, "
        "tokens in 120 (cache r 100 w 7) out 30, first chunk 250ms, $0.001500\n"
    )


def test_a_tool_call_s_line_says_its_typed_sizes() -> None:
    line = _line(TOOL_STARTED, TOOL_ENDED, accounted=True)
    assert line == "[txn:o1] 1.2 tool/search: VRB ok 1234ms, chars in 14 out 5\n"


@pytest.mark.parametrize(
    ("started", "ended"),
    [
        (LLM_STARTED, LLM_ENDED),
        (LLM_STARTED, {}),  # no usage, no price
        (TOOL_STARTED, TOOL_ENDED),
        (TOOL_STARTED, {}),  # no result: no output size
    ],
)
def test_an_op_without_an_outcome_on_its_record_gets_the_same_line(
    started: dict[str, Any], ended: dict[str, Any]
) -> None:
    assert _line(started, ended, accounted=False) == _line(started, ended, accounted=True)


def test_an_attempt_without_usage_or_price_says_so() -> None:
    line = _line(LLM_STARTED, {}, accounted=False)
    assert line.endswith(": VRB ok 1234ms, attempt 1, no usage, cost unknown\n")


@pytest.mark.console("verbose")
def test_a_decorated_attempt_s_cache_reads_reach_its_line(traced: Traced) -> None:
    @agenttrace.llm(model="openai/gpt-4o")
    def ask(prompt: str) -> dict[str, Any]:
        usage = {"prompt_tokens": 120, "completion_tokens": 30}
        usage["prompt_tokens_details"] = {"cached_tokens": 100}  # type: ignore[assignment]
        return {"choices": [{"message": {"role": "assistant", "content": "hi"}}], "usage": usage}

    @agenttrace.agent
    def run() -> None:
        ask("hello")

    run()
    (line,) = [line for line in traced.output().splitlines() if " llm/" in line]
    assert " llm/openai:gpt-4o: VRB ok " in line
    assert line.endswith(", attempt 1, tokens in 120 (cache r 100 w 0) out 30, cost unknown")
