"""The console's verbose line of an op is made from the op's typed outcome: the one its
accounting carries, or (an op answered from the journal is not accounted: it bought nothing)
the one its Ended record carries, with the same line either way; never from attribute names."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

import agenttrace
from agenttrace import semconv as sc
from agenttrace.formats.ledger import Accounted
from agenttrace.model.lifecycle import Ended, Started
from agenttrace.model.outcome import OutcomeBuilder, Usage
from agenttrace.recorder.console import ConsoleSink
from agenttrace.tracing.llm_attributes import request_outcome
from agenttrace.tracing.op_attributes import end_attributes

from .conftest import Traced
from .test_llm_steps import rearm

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


def _llm_outcome(answered: bool = True) -> OutcomeBuilder:
    outcome = request_outcome("gpt-4o", "openai", 2 if answered else None)
    if answered:
        outcome.set_usage(Usage(120, 30, cache_read=100, cache_write=7))
        outcome.set_time_to_first_chunk(0.25)
        outcome.set_cost(0.0015)
    return outcome


def _tool_outcome(answered: bool = True) -> OutcomeBuilder:
    outcome = OutcomeBuilder()
    outcome.set_tool("search")
    outcome.set_sizes(chars_in=14, chars_out=5 if answered else None)
    return outcome


TOOL_STARTED = {
    sc.KIND: sc.KIND_TOOL,
    sc.TXN_ORIGIN: "o1",
    sc.PATH: "1.2",
    sc.GEN_AI_TOOL_NAME: "search",
    sc.GEN_AI_OPERATION_NAME: sc.OP_EXECUTE_TOOL,
    sc.TOOL_CHARS_IN: 14,
}


def _line(started: dict[str, Any], outcome: OutcomeBuilder, *, accounted: bool) -> str:
    """The verbose console line of one op that started with these attributes and ended with
    this outcome, on its accounting or (answered from the journal) on its Ended record."""
    stream = io.StringIO()
    sink = ConsoleSink("verbose", stream)
    sink.consume([Started("o1", started[sc.PATH], "op", "op", STARTED_NS, 1, 2, None, started)])
    op = outcome.outcome(
        started[sc.KIND],
        "op",
        started[sc.PATH],
        STARTED_NS,
        ENDED_NS,
        origin_txn_id="o1",
        txn_id="o1",
        agent_id="a",
    )
    ended = end_attributes(outcome)  # as the scope sets them
    if accounted:
        record = Ended("o1", op.path, ENDED_NS, ended, accounted=Accounted(op, "2023-11-14Z"))
    else:
        record = Ended("o1", op.path, ENDED_NS, ended, outcome=op)
    sink.consume([record])
    return stream.getvalue()


def test_an_attempt_s_line_says_its_typed_usage_first_chunk_and_cost() -> None:
    line = _line(LLM_STARTED, _llm_outcome(), accounted=True)
    assert line == (
        "[txn:o1] 1.1 llm/openai:gpt-4o: VRB ok 1234ms, attempt 2, "
        "tokens in 120 (cache r 100 w 7) out 30, first chunk 250ms, $0.001500\n"
    )


def test_a_tool_call_s_line_says_its_typed_sizes() -> None:
    line = _line(TOOL_STARTED, _tool_outcome(), accounted=True)
    assert line == "[txn:o1] 1.2 tool/search: VRB ok 1234ms, chars in 14 out 5\n"


@pytest.mark.parametrize(
    ("started", "outcome"),
    [
        (LLM_STARTED, _llm_outcome()),
        (LLM_STARTED, _llm_outcome(answered=False)),  # no usage, no price
        (TOOL_STARTED, _tool_outcome()),
        (TOOL_STARTED, _tool_outcome(answered=False)),  # no result: no output size
    ],
)
def test_an_op_answered_from_the_journal_gets_the_same_line_from_its_record_s_outcome(
    started: dict[str, Any], outcome: OutcomeBuilder
) -> None:
    assert _line(started, outcome, accounted=False) == _line(started, outcome, accounted=True)


def test_an_attempt_without_usage_or_price_says_so() -> None:
    line = _line(LLM_STARTED, _llm_outcome(answered=False), accounted=False)
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


@pytest.mark.console("verbose")
def test_an_attempt_answered_from_the_journal_has_its_line_from_the_replayed_outcome(
    traced: Traced, tmp_path: Path
) -> None:
    """A re-entered run's attempt answered from the journal bought nothing (no accounting),
    and its line still says the recorded reply's tokens, from the outcome its record carries."""

    @agenttrace.llm(model="house/model-1")
    def chat(messages: list[dict[str, Any]]) -> Any:
        return {
            "choices": [{"message": {"role": "assistant", "content": "answer"}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2},
        }

    @agenttrace.agent("Asker")
    def ask() -> None:
        chat([{"role": "user", "content": "hi"}])

    ask()
    traced.handle.force_flush()
    rearm(tmp_path)
    ask()
    lines = [line for line in traced.output().splitlines() if " llm/house:model-1" in line]
    assert len(lines) == 2
    assert all(
        line.endswith(", attempt 1, tokens in 3 (cache r 0 w 0) out 2, cost unknown")
        for line in lines
    ), lines


def test_a_failed_attempt_s_line_says_its_outcome_s_error_type_and_attempt() -> None:
    stream = io.StringIO()
    sink = ConsoleSink("verbose", stream)
    sink.consume([Started("o1", "1.1", "op", "op", STARTED_NS, 1, 2, None, LLM_STARTED)])
    outcome = _llm_outcome(answered=False)
    outcome.set_attempt(3)
    outcome.set_error("rate_limit")
    op = outcome.outcome(
        "llm",
        "op",
        "1.1",
        STARTED_NS,
        ENDED_NS,
        "RateLimitError: slow down",
        origin_txn_id="o1",
        txn_id="o1",
        agent_id="a",
    )
    # The record's attributes say neither: the line is the outcome's, not the span's.
    sink.consume([Ended("o1", "1.1", ENDED_NS, {}, op.error, accounted=Accounted(op, "ts"))])
    assert stream.getvalue() == (
        "[txn:o1] 1.1 llm/openai:gpt-4o: WRN attempt 3 failed (rate_limit) after 1234ms: "
        "RateLimitError: slow down\n"
    )
