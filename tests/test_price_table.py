"""The OpenAI and Anthropic SDK paths price a call from litellm's price map without importing
litellm (issue 34 item 1): the same cost ``litellm.cost_per_token`` gives for the same usage,
and a program that never imports litellm still gets it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import litellm
import pytest
from litellm.types.utils import Usage as LitellmUsage

from agenttrace._internal import price_table
from agenttrace.instrumentation.litellm.utils import cost_from_tokens, price
from agenttrace.model.outcome import Usage

from .helpers import ROOT, child_env
from .llm_server import LLMServer, Reply

# (model as the SDK paths name it, input incl. cache, output incl. reasoning, read, write,
# reasoning)
CASES = [
    ("gpt-4o", 1200, 300, 0, 0, 0),
    ("gpt-4o-mini", 5000, 800, 4096, 0, 0),
    ("o3-mini", 900, 4000, 256, 0, 3500),
    ("claude-sonnet-4-5-20250929", 6000, 500, 3000, 1500, 0),
    ("claude-sonnet-4-5-20250929", 250_000, 900, 20_000, 10_000, 0),  # above 200k: its rates
    ("azure/gpt-4o", 3000, 120, 1024, 0, 0),
    # (OpenRouter's models left litellm's map in 1.110: a provider prefix that stays in it.)
    ("mistral/mistral-large-latest", 700, 90, 0, 0, 0),
    ("deepseek/deepseek-chat", 2000, 400, 1500, 0, 0),
    ("dashscope/qwen-turbo", 400, 900, 0, 0, 600),  # a reasoning rate of its own
    ("fireworks_ai/accounts/fireworks/models/deepseek-v3", 1000, 200, 300, 0, 0),  # read: half
    ("xai/grok-4.20-0309-reasoning", 200_000, 100, 0, 0, 0),  # xAI: from 200k on, higher
]


def litellm_cost(model: str, inp: int, out: int, read: int, write: int, reasoning: int) -> float:
    usage = LitellmUsage(
        prompt_tokens=inp,
        completion_tokens=out,
        total_tokens=inp + out,
        reasoning_tokens=reasoning or None,
        cache_read_input_tokens=read,
        cache_creation_input_tokens=write,
    )
    prompt, completion = litellm.cost_per_token(
        model=model,
        prompt_tokens=inp,
        completion_tokens=out,
        cache_read_input_tokens=read,
        cache_creation_input_tokens=write,
        usage_object=usage,
    )
    return float(prompt + completion)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}")
def test_the_table_prices_as_litellm_does(case: tuple[str, int, int, int, int, int]) -> None:
    expected = litellm_cost(*case)
    assert expected > 0
    assert price_table.cost(*case) == pytest.approx(expected, rel=1e-12)
    # The litellm path (litellm loaded) prices the same usage the same.
    model, inp, out, read, write, reasoning = case
    usage = Usage(inp, out, read, write, reasoning)
    assert cost_from_tokens(litellm, model, usage) == pytest.approx(expected, rel=1e-12)


def test_a_model_the_map_does_not_price_has_no_cost() -> None:
    assert price_table.cost("no-such-model-xyz", 10, 10) is None
    assert price_table.cost("openai/no-such-model-xyz", 10, 10) is None


def test_without_litellm_loaded_the_sdk_price_is_the_table_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    usage = Usage(1200, 300, 1024, 0, 0)
    with_litellm = price("gpt-4o", usage)
    monkeypatch.delitem(sys.modules, "litellm")
    assert price("gpt-4o", usage) == pytest.approx(with_litellm, rel=1e-12)
    assert price("gpt-4o", Usage(None, 3)) is None  # no counts, no price


def test_litellm_s_registered_prices_win_when_litellm_is_loaded() -> None:
    """A price the program registered with litellm is litellm's, not the bundled map's."""
    litellm.register_model(
        {
            "agenttrace-test-model": {
                "input_cost_per_token": 1.0,
                "output_cost_per_token": 2.0,
                "litellm_provider": "openai",
            }
        }
    )
    try:
        assert price("agenttrace-test-model", Usage(3, 4)) == pytest.approx(11.0)
        assert price_table.cost("agenttrace-test-model", 3, 4) is None
    finally:
        litellm.model_cost.pop("agenttrace-test-model", None)


def test_without_litellm_installed_there_is_no_table(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules is how Python says a module cannot be imported.
    monkeypatch.setitem(sys.modules, "litellm", None)
    assert price_table.locate() is None


def test_a_file_that_is_not_a_price_map_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / price_table.FILE_NAME
    path.write_text("[1, 2]")
    assert price_table.read(path) is None
    path.write_text("{not json")
    assert price_table.read(path) is None
    path.write_text(json.dumps({"m": {"input_cost_per_token": 1e-6}, "note": "text"}))
    assert price_table.read(path) == {"m": {"input_cost_per_token": 1e-6}}
    monkeypatch.setattr(price_table, "MAX_BYTES", 10)
    assert price_table.read(path) is None


def test_an_openai_sdk_program_gets_a_cost_without_importing_litellm(llm: LLMServer) -> None:
    usage = {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050}
    llm.reset(Reply(content="Hello", usage=usage))
    done = subprocess.run(
        [sys.executable, "-m", "tests.sdk_price_child", llm.api_base],
        cwd=ROOT,
        env=child_env(PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["litellm_imported"] is False
    expected = litellm_cost("gpt-4o-mini", 1000, 50, 0, 0, 0)
    assert out["cost"] == pytest.approx(expected)
    (entry,) = out["ledger"]
    assert entry["costUsd"] == pytest.approx(expected, abs=1e-9)  # the ledger's amount too
    # The session file says what it was priced at: the map the installed litellm ships.
    priced = out["pricing"]["gpt-4o-mini"]
    assert (priced["source"], priced["costMap"]) == ("litellm", {"source": "local"})
    rates = price_table.entry("gpt-4o-mini")
    assert rates is not None
    assert priced["prices"]["input_cost_per_token"] == rates["input_cost_per_token"]
    recomputed = 1000 * rates["input_cost_per_token"] + 50 * rates["output_cost_per_token"]
    assert entry["costUsd"] == pytest.approx(recomputed, abs=1e-12)
