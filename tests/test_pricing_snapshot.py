"""Pricing that can be audited (issue 38, item 6; seed 002, opTree Structure Revisions): the
session file's ``meta.pricingSnapshot`` holds, per model the session billed, the per-token
prices it was billed at and their source (litellm's map, with litellm's version, or the
program's own ``litellm.register_model``), written as the session runs and kept by a resume.

Real runs through litellm to the scripted model and the local server, real files; a cost is
checked the way an auditor would: from the snapshot's prices and the ledger's tokens alone.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any

import litellm
import msgspec

import agenttrace
from agenttrace.formats.session.files import read_session_file, snapshot_path
from agenttrace.formats.session.schema import SessionMeta

from .conftest import Traced
from .llm_server import LLMServer
from .test_litellm import http
from .test_trace_fields import ledger, record_cafe, valid

CAFE_MODEL = "claude-sonnet-4-5-20250929"


def meta_of(tmp_path: Path, session_id: str) -> dict[str, Any]:
    """The session file's ``meta``, read back (and validated) as every reader reads it."""
    meta = read_session_file(snapshot_path(tmp_path / "sessions", session_id)).meta
    msgspec.convert(meta, SessionMeta)
    assert valid("SessionMeta", meta) == []
    return dict(meta)


def recomputed(line: dict[str, Any], prices: dict[str, float]) -> float:
    """What an LLM attempt cost, from its ledger line's tokens and the snapshot's prices alone:
    uncached input, cache reads and cache writes each at their rate (an absent cache rate is
    the input rate, litellm's rule), output at the output rate."""
    tokens = line["tokens"]
    read, written = tokens["cacheReadInputTokens"], tokens["cacheWriteInputTokens"]
    uncached = tokens["inputTokens"] - read - written
    rate = prices["input_cost_per_token"]
    return (
        uncached * rate
        + read * prices.get("cache_read_input_token_cost", rate)
        + written * prices.get("cache_creation_input_token_cost", rate)
        + tokens["outputTokens"] * prices["output_cost_per_token"]
    )


async def test_each_cost_is_rechecked_from_the_snapshot_and_the_ledger_s_tokens(
    traced: Traced, tmp_path: Path
) -> None:
    session = await record_cafe(traced)
    snapshot = meta_of(tmp_path, session.session_id)["pricingSnapshot"]
    assert list(snapshot) == [CAFE_MODEL]  # the one model the session billed
    priced = snapshot[CAFE_MODEL]
    assert priced["source"] == "litellm" and priced["pricedAs"] == CAFE_MODEL
    assert priced["litellmVersion"] == importlib.metadata.version("litellm")
    assert (
        priced["prices"]["input_cost_per_token"]
        == litellm.model_cost[CAFE_MODEL]["input_cost_per_token"]
    )
    attempts = [line for line in ledger(tmp_path) if line["type"] == "llm"]
    assert len(attempts) == 6
    assert any(line["tokens"]["cacheReadInputTokens"] for line in attempts)  # cache rates too
    for line in attempts:
        assert line["costUsd"] > 0
        assert abs(recomputed(line, priced["prices"]) - line["costUsd"]) < 1e-11, line


AUDIT_MODEL = "agenttrace-audit-model"
"""A model only this test's program prices (litellm's map has no such model)."""


def test_the_program_s_own_prices_are_the_snapshot_s_and_say_so(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    litellm.register_model(
        {
            AUDIT_MODEL: {
                "input_cost_per_token": 1e-6,
                "output_cost_per_token": 2e-6,
                "litellm_provider": "openai",
                "mode": "chat",
            }
        }
    )
    session = agenttrace.new_session()
    litellm.completion(**http(llm, model=f"openai/{AUDIT_MODEL}"))
    traced.handle.force_flush()
    (line,) = ledger(tmp_path)
    assert line["model"] == AUDIT_MODEL
    assert abs(line["costUsd"] - (11 * 1e-6 + 7 * 2e-6)) < 1e-15  # the program's prices
    priced = meta_of(tmp_path, session.session_id)["pricingSnapshot"][AUDIT_MODEL]
    assert priced["source"] == "override"
    assert priced["prices"] == {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}
    assert abs(recomputed(line, priced["prices"]) - line["costUsd"]) < 1e-15


def test_only_the_models_the_session_paid_for_are_in_it(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    session = agenttrace.new_session()
    litellm.completion(**http(llm, model="openai/no-such-model-anywhere"))  # no price known
    litellm.completion(  # made up by litellm: nothing was bought
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}], mock_response="hello"
    )
    litellm.completion(**http(llm))  # openai/gpt-4o-mini, priced
    litellm.completion(**http(llm))  # the same model again: its prices are in already
    traced.handle.force_flush()
    costs = [line["costUsd"] for line in ledger(tmp_path)]
    assert costs[:2] == [None, 0.0] and costs[2] == costs[3] > 0
    snapshot = meta_of(tmp_path, session.session_id)["pricingSnapshot"]
    assert list(snapshot) == ["gpt-4o-mini"] and snapshot["gpt-4o-mini"]["source"] == "litellm"


async def test_a_resumed_session_keeps_the_prices_its_earlier_runs_were_billed_at(
    traced: Traced, tmp_path: Path
) -> None:
    session = await record_cafe(traced)
    before = meta_of(tmp_path, session.session_id)["pricingSnapshot"]
    agenttrace.use_session(None)  # a later process

    _, resumed = agenttrace.load_session(session.session_id)
    assert resumed.resumed_from is not None

    @agenttrace.agent("Later")
    def later() -> None:
        with agenttrace.tool("tidy"):
            pass

    later()
    agenttrace.force_flush()
    meta = meta_of(tmp_path, session.session_id)
    assert len(meta["trace_ids"]) == 2  # the file is the resumed session's
    assert meta["pricingSnapshot"] == before
