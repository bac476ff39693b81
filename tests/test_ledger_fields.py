"""The billing ledger's fields beyond the request: the provider that actually served an LLM call
and what it charged upstream (OpenRouter, a litellm Router), and who provides a tool.

LLM calls go through real litellm (and a real Router) to the local server (tests/llm_server.py),
which answers as OpenRouter does when a reply names a ``provider``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import jsonschema
import litellm
import msgspec
import pytest

import agenttrace
from agenttrace import semconv as sc
from agenttrace.formats.session.files import read_session_file, snapshot_path, stream_path
from agenttrace.formats.session.schema import AccountingEntry
from agenttrace.formats.session.schema_file import published_schema

from .conftest import Traced, attrs
from .llm_server import LLMServer, Reply
from .test_litellm import KEY, http, llm_spans

OPENROUTER_MODEL = "openrouter/anthropic/claude-3.5-sonnet"
OPENROUTER_USAGE = {
    "prompt_tokens": 11,
    "completion_tokens": 7,
    "total_tokens": 18,
    "cost": 0.0012,
    "cost_details": {"upstream_inference_cost": 0.001},
}
"""What OpenRouter reports with ``usage: {"include": true}`` (which litellm always asks for):
its price, and what the provider behind it charged."""


def ledger(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "accounting.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def entry_validator() -> jsonschema.Draft202012Validator:
    """The published schema's description of one ledger line."""
    return jsonschema.Draft202012Validator(
        {"$defs": published_schema()["$defs"], "$ref": "#/$defs/AccountingEntry"}
    )


def checked(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``entries``, each accepted by the reader's struct and by the published schema."""
    validator = entry_validator()
    for entry in entries:
        msgspec.convert(entry, AccountingEntry)
        assert [e.message for e in validator.iter_errors(entry)] == []
    return entries


# --- behind OpenRouter -------------------------------------------------------------------------


def test_openrouter_names_the_provider_that_served_the_call_and_its_upstream_cost(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    llm.reset(Reply(provider="Anthropic", usage=OPENROUTER_USAGE))
    session = agenttrace.new_session()

    @agenttrace.agent("Routed")
    def run() -> Any:
        return litellm.completion(**http(llm, model=OPENROUTER_MODEL))

    assert run().choices[0].message.content == "Hello!"
    traced.handle.force_flush()
    (span,) = llm_spans(traced)
    assert attrs(span)[sc.RESPONSE_PROVIDER] == "Anthropic"
    assert attrs(span)[sc.COST_UPSTREAM_USD] == 0.001
    (line,) = checked(ledger(tmp_path))
    assert {key: line.get(key) for key in LLM_KEYS} == {
        "provider": "openrouter",
        "model": "anthropic/claude-3.5-sonnet",
        "actualProvider": "Anthropic",
        "actualModel": "anthropic/claude-3.5-sonnet",
        "costUsd": 0.0012,
        "upstreamInferenceCostUsd": 0.001,
    }
    # The session file and the stream hold the same entry, and read back.
    sessions = tmp_path / "sessions"
    runs = read_session_file(snapshot_path(sessions, session.session_id)).runs
    ops = [op for run_ in runs for turn in run_["turns"] for op in turn["ops"]]
    assert [op["accounting"] for op in ops] == [[line]]
    accounted = read_session_file(stream_path(sessions, session.session_id)).accounted
    assert [event["accounting"] for event in accounted] == [line]


LLM_KEYS = ("provider", "model", "actualProvider", "actualModel", "costUsd")
LLM_KEYS += ("upstreamInferenceCostUsd",)


def test_a_direct_call_names_no_other_provider(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    litellm.completion(**http(llm))
    traced.handle.force_flush()
    (span,) = llm_spans(traced)
    assert sc.RESPONSE_PROVIDER not in attrs(span) and sc.COST_UPSTREAM_USD not in attrs(span)
    (line,) = checked(ledger(tmp_path))
    assert line["provider"] == "openai" and line["costUsd"] > 0
    assert "actualProvider" not in line and "upstreamInferenceCostUsd" not in line


# --- behind a litellm Router -------------------------------------------------------------------


def two_deployments(llm: LLMServer) -> litellm.Router:
    """One model group served by an OpenAI deployment and an Anthropic one, both the local
    server (``/v1/chat/completions`` and ``/v1/messages``)."""
    return litellm.Router(
        model_list=[
            {
                "model_name": "smart",
                "litellm_params": {
                    "model": "openai/gpt-4o-mini",
                    "api_base": llm.api_base,
                    "api_key": KEY,
                },
            },
            {
                "model_name": "smart",
                "litellm_params": {
                    "model": "anthropic/claude-3-5-haiku-20241022",
                    "api_base": llm.base_url,
                    "api_key": KEY,
                },
            },
        ],
    )


SERVED_BY = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}
"""Which deployment's provider answered a request, by the server path it went to."""


def routed_calls(llm: LLMServer, call: Any) -> None:
    """``call()`` until the Router has sent calls to both deployments (it picks one at random
    for each call: 64 calls all to one deployment happen once in 2**63)."""
    for _ in range(64):
        call()
        if {request.path for request in llm.requests} == set(SERVED_BY):
            return
    raise AssertionError("the Router never chose one of its two deployments")


def test_a_router_deployment_is_the_provider_that_served_each_call(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    router = two_deployments(llm)
    messages = [{"role": "user", "content": "hi"}]
    routed_calls(llm, lambda: router.completion(model="smart", messages=messages))
    traced.handle.force_flush()
    lines = checked(ledger(tmp_path))
    assert [line["actualProvider"] for line in lines] == [
        SERVED_BY[request.path] for request in llm.requests
    ]
    assert [line["provider"] for line in lines] == [line["actualProvider"] for line in lines]
    assert all("upstreamInferenceCostUsd" not in line for line in lines)


def test_a_router_deployment_is_named_on_the_async_path_too(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    router = two_deployments(llm)
    messages = [{"role": "user", "content": "hi"}]
    routed_calls(llm, lambda: asyncio.run(router.acompletion(model="smart", messages=messages)))
    traced.handle.force_flush()
    assert [line["actualProvider"] for line in checked(ledger(tmp_path))] == [
        SERVED_BY[request.path] for request in llm.requests
    ]


def test_a_router_fallback_names_the_deployment_that_answered_not_the_one_that_failed(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    router = litellm.Router(
        model_list=[
            {
                "model_name": "primary",
                "litellm_params": {
                    "model": "openai/gpt-4o-mini",
                    "api_base": llm.api_base,
                    "api_key": KEY,
                },
            },
            {
                "model_name": "backup",
                "litellm_params": {
                    "model": OPENROUTER_MODEL,
                    "api_base": llm.api_base,
                    "api_key": KEY,
                },
            },
        ],
        fallbacks=[{"primary": ["backup"]}],
        num_retries=0,  # the failure goes to the fallback at once
        retry_after=0,
    )
    llm.reset(Reply(status=500), Reply(provider="Google Vertex", usage=OPENROUTER_USAGE))
    router.completion(model="primary", messages=[{"role": "user", "content": "hi"}])
    traced.handle.force_flush()
    lines = checked(ledger(tmp_path))
    assert [
        (line["status"], line["provider"], line.get("actualProvider"), line["attempt"])
        for line in lines
    ] == [
        ("failed", "openai", None, 1),  # no response: no one says who served it
        ("ok", "openrouter", "Google Vertex", 2),  # what OpenRouter says beats the deployment
    ]
    assert lines[1]["upstreamInferenceCostUsd"] == 0.001


# --- tools -------------------------------------------------------------------------------------


def test_a_tool_s_provider_labels_its_ledger_line_and_its_name_is_the_command(
    traced: Traced, tmp_path: Path
) -> None:
    @agenttrace.tool(provider="acme-search")
    def search(query: str) -> str:
        return f"results for {query}"

    @agenttrace.tool
    def add(a: int, b: int) -> int:
        return a + b

    class Weather:
        name = "weather"

        def __call__(self, city: str) -> str:
            return "sunny"

    agenttrace.instrument_tool(Weather, provider="weather-api")

    @agenttrace.agent("Helper")
    def run() -> None:
        search("cats")
        add(2, 3)
        Weather()("Oslo")

    run()
    traced.handle.force_flush()
    assert attrs(traced.one("execute_tool search"))[sc.TOOL_PROVIDER] == "acme-search"
    assert sc.TOOL_PROVIDER not in attrs(traced.one("execute_tool add"))
    lines = checked(ledger(tmp_path))
    assert [(line["providerLabel"], line["command"], "mcpServer" in line) for line in lines] == [
        ("acme-search", "search", False),
        ("add", "add", False),  # no provider known: the tool's name, as earlier releases wrote
        ("weather-api", "weather", False),
    ]


@pytest.mark.parametrize("provider", ["", "  ", 7])
def test_a_provider_that_is_no_name_is_refused_when_decorating(provider: Any) -> None:
    with pytest.raises(ValueError, match="is not a name"):
        agenttrace.tool(provider=provider)


# --- the format --------------------------------------------------------------------------------

TOOL_ENTRY = {
    "timestamp": 1795393954383,
    "status": "ok",
    "latency": 13.196,
    "type": "tool",
    "originTxnId": "91397038ebfdb98b",
    "txnId": "91397038ebfdb98b",
    "agentId": "agent_001",
    "path": "3.2",
    "providerLabel": "discuss",
    "charactersIn": 85,
    "charactersOut": 58,
    "callPath": "Agent",
}
"""A tool line as earlier releases wrote it (no ``command``): still valid."""

LLM_ENTRY = {
    **{key: TOOL_ENTRY[key] for key in list(TOOL_ENTRY)[:8]},
    "type": "llm",
    "path": "1.1",
    "provider": "openrouter",
    "model": "anthropic/claude-3.5-sonnet",
    "actualModel": "anthropic/claude-3.5-sonnet",
    "attempt": 1,
    "tokens": {
        "inputTokens": 11,
        "outputTokens": 7,
        "cacheReadInputTokens": 0,
        "cacheWriteInputTokens": 0,
        "reasoningTokens": 0,
        "totalTokens": 18,
    },
    "costUsd": 0.0012,
    "callPath": "Agent",
}


def test_older_lines_read_and_new_fields_stay_on_their_own_type_of_entry() -> None:
    checked([TOOL_ENTRY, LLM_ENTRY])
    checked([{**TOOL_ENTRY, "mcpServer": "github", "command": "mcp__github__list_issues"}])
    checked([{**LLM_ENTRY, "actualProvider": "Anthropic", "upstreamInferenceCostUsd": 0.001}])
    validator = entry_validator()
    for entry, key in (
        ({**TOOL_ENTRY, "actualProvider": "Anthropic"}, "actualProvider"),
        ({**TOOL_ENTRY, "upstreamInferenceCostUsd": 0.1}, "upstreamInferenceCostUsd"),
        ({**LLM_ENTRY, "mcpServer": "github"}, "mcpServer"),
        ({**LLM_ENTRY, "command": "search"}, "command"),
    ):
        with pytest.raises(msgspec.ValidationError, match=f"field `{key}`, not for"):
            msgspec.convert(entry, AccountingEntry)
        assert list(validator.iter_errors(entry)), key
