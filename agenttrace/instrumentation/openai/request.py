"""What one ``chat.completions.create`` call asks, as its attempt's span describes it.

The model is the request's; the provider is read from the client: its class (Azure) or the host
of its base URL (api.openai.com, OpenRouter, DeepSeek, ...), or Ollama's port. Any other host
speaks the OpenAI API (vLLM, a local server): its provider is ``openai``, as litellm reports an
``openai/`` model sent to a custom ``api_base``. The price comes from litellm's price map (the
same table the litellm path prices with), for the model as that map names it: through litellm
when it is loaded, else from the installed litellm's map file, without importing litellm.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agenttrace import semconv as sc
from agenttrace._internal.redact import remember_secret
from agenttrace.instrumentation.base import PatchState
from agenttrace.instrumentation.litellm.attempt import Request
from agenttrace.instrumentation.litellm.utils import price as price_of
from agenttrace.model.outcome import Usage
from agenttrace.tracing.llm_attributes import provider_name, request_attributes, request_outcome

WHERE = "openai instrumentation"

_HOSTS = {
    "api.openai.com": "openai",
    "openrouter.ai": "openrouter",
    "api.deepseek.com": "deepseek",
    "api.groq.com": "groq",
    "api.mistral.ai": "mistral",
    "api.x.ai": "xai",
    "api.together.xyz": "together_ai",
    "api.fireworks.ai": "fireworks_ai",
    "generativelanguage.googleapis.com": "gemini",
}
"""Hosts whose provider is not ``openai``, by litellm's provider names (``provider_name`` turns
them into the GenAI conventions' names, as on the litellm path)."""


state = PatchState()
"""Whether the OpenAI SDK is patched, and what was patched."""


_AZURE_HOSTS = (".openai.azure.com", ".cognitiveservices.azure.com")
"""The hosts of Azure OpenAI resources (an ``OpenAI`` client on Azure's ``/openai/v1`` API)."""

_OLLAMA_PORT = 11434
"""Ollama's port: its OpenAI-compatible API is ``http://localhost:11434/v1``. Other local
servers (vLLM on 8000, LM Studio, llama.cpp) have no port or path of their own to tell them by:
they are ``openai``, as litellm reports an ``openai/`` model sent to a custom ``api_base``."""


def litellm_provider(client: Any) -> str:
    """The provider ``client`` (the SDK's ``OpenAI``/``AsyncOpenAI``/Azure client) sends to,
    as litellm names providers: Azure by the client's class or its host, the hosted providers
    by their hosts, Ollama by its port, else ``openai``."""
    if "Azure" in type(client).__name__:
        return "azure"
    url = getattr(client, "base_url", None)
    host = getattr(url, "host", None)
    if isinstance(host, str):
        if host in _HOSTS:
            return _HOSTS[host]
        if host.endswith(_AZURE_HOSTS):
            return "azure"
        if getattr(url, "port", None) == _OLLAMA_PORT:
            return "ollama"
    return "openai"


def describe(client: Any, kwargs: Mapping[str, Any]) -> Request:
    """What a ``create`` call on ``client`` asks (the SDK takes keyword arguments only)."""
    model = str(kwargs.get("model") or "unknown")
    provider = litellm_provider(client)
    key = getattr(client, "api_key", None)
    if isinstance(key, str) and key:
        remember_secret(key)  # never recorded, wherever it would show up
    # The name litellm's price map knows the model by: OpenAI's bare, the others prefixed.
    priced_as = model if provider == "openai" else f"{provider}/{model}"
    return Request(
        sc.OP_CHAT,
        sc.SPAN_LLM.format(model=model),
        request_attributes(bool(kwargs.get("stream")), kwargs),
        model,
        priced_as,
        kwargs.get("messages"),
        request_outcome(model, provider_name(provider), None),
        where=WHERE,
    )


def price(priced_as: str, usage: Usage | None) -> float | None:
    """The price of ``usage`` from litellm's price map: litellm's own when litellm is loaded,
    else read from the installed litellm's map file without importing it (which takes
    seconds); None when litellm is not installed."""
    return price_of(priced_as, usage)
