"""The provider of an OpenAI SDK call, from its client: Azure, OpenRouter, Ollama and any other
OpenAI-compatible server, each called over real HTTP on 127.0.0.1. The client keeps the base
URL the provider uses (its host, port and path); an httpx transport sends its requests to the
local scripted server instead (offline), which sees the path the SDK built."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import litellm
import openai
import pytest

from agenttrace import semconv as sc

from .conftest import Traced, attrs
from .llm_server import LLMServer, Reply
from .test_openai_sdk import HI, KEY, llm_spans


def _to_local(request: httpx.Request, llm: LLMServer) -> None:
    """Send ``request`` to the local server: same path and query, another host (the Host
    header the SDK set is kept)."""
    request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=llm.port)


class Loopback(httpx.HTTPTransport):
    """Every request to the local server."""

    def __init__(self, llm: LLMServer) -> None:
        super().__init__()
        self.llm = llm

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        _to_local(request, self.llm)
        return super().handle_request(request)


class AsyncLoopback(httpx.AsyncHTTPTransport):
    """Every request to the local server (async)."""

    def __init__(self, llm: LLMServer) -> None:
        super().__init__()
        self.llm = llm

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        _to_local(request, self.llm)
        return await super().handle_async_request(request)


def _options(llm: LLMServer, is_async: bool) -> dict[str, Any]:
    transport = AsyncLoopback(llm) if is_async else Loopback(llm)
    http_client = (httpx.AsyncClient if is_async else httpx.Client)(transport=transport)
    return {"api_key": KEY, "max_retries": 0, "http_client": http_client}


def test_an_azure_client_is_azure_and_asks_its_deployment(traced: Traced, llm: LLMServer) -> None:
    azure = openai.AzureOpenAI(
        azure_endpoint="https://my-resource.openai.azure.com",
        api_version="2024-06-01",
        **_options(llm, False),
    )
    azure.chat.completions.create(model="gpt-4o-mini", messages=HI)
    azure.responses.create(model="gpt-4o-mini", input="hi")
    chat, response = (llm.requests[0], llm.requests[1])
    assert chat.path == "/openai/deployments/gpt-4o-mini/chat/completions?api-version=2024-06-01"
    assert response.path.startswith("/openai/responses")
    assert chat.headers["Host"] == "my-resource.openai.azure.com"
    assert [attrs(span)[sc.GEN_AI_RESPONSE_ID] for span in llm_spans(traced)] == [
        "chatcmpl-test",
        "resp_test",
    ]
    for span in llm_spans(traced):
        assert attrs(span)[sc.GEN_AI_PROVIDER_NAME] == "azure.ai.openai"
        prompt, completion = litellm.cost_per_token(
            model="azure/gpt-4o-mini", prompt_tokens=11, completion_tokens=7
        )
        assert attrs(span)[sc.COST_USD] == pytest.approx(prompt + completion)


def test_an_openai_client_on_azure_s_v1_api_is_azure(traced: Traced, llm: LLMServer) -> None:
    for host in ("my-resource.openai.azure.com", "my-resource.cognitiveservices.azure.com"):
        sdk = openai.OpenAI(base_url=f"https://{host}/openai/v1/", **_options(llm, False))
        sdk.chat.completions.create(model="gpt-4o-mini", messages=HI)
    assert [r.path for r in llm.requests] == ["/openai/v1/chat/completions"] * 2
    assert [attrs(s)[sc.GEN_AI_PROVIDER_NAME] for s in llm_spans(traced)] == ["azure.ai.openai"] * 2


def test_openrouter_is_openrouter_and_the_provider_that_served_it_is_recorded(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(Reply(provider="Anthropic"))

    async def ask() -> None:
        sdk = openai.AsyncOpenAI(base_url="https://openrouter.ai/api/v1", **_options(llm, True))
        await sdk.chat.completions.create(model="anthropic/claude-3.5-haiku", messages=HI)

    asyncio.run(ask())
    assert llm.requests[0].path == "/api/v1/chat/completions"
    (span,) = llm_spans(traced)
    assert attrs(span)[sc.GEN_AI_PROVIDER_NAME] == "openrouter"
    assert attrs(span)[sc.GEN_AI_REQUEST_MODEL] == "anthropic/claude-3.5-haiku"
    assert attrs(span)[sc.RESPONSE_PROVIDER] == "Anthropic"


@pytest.mark.parametrize(
    ("base_url", "provider"),
    [
        ("http://localhost:11434/v1", "ollama"),  # Ollama's port: its models cost nothing
        ("http://localhost:8000/v1", "openai"),  # vLLM: nothing in the URL says so
        ("http://127.0.0.1:1234/v1", "openai"),  # LM Studio, llama.cpp, any other server
    ],
)
def test_a_local_server_s_provider(
    traced: Traced, llm: LLMServer, base_url: str, provider: str
) -> None:
    sdk = openai.OpenAI(base_url=base_url, **_options(llm, False))
    sdk.chat.completions.create(model="llama3", messages=HI)
    assert llm.requests[0].path == "/v1/chat/completions"
    (span,) = llm_spans(traced)
    assert attrs(span)[sc.GEN_AI_PROVIDER_NAME] == provider
    if provider == "ollama":  # litellm's price map: a local model is free
        assert attrs(span)[sc.COST_USD] == 0
