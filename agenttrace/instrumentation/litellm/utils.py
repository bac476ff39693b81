"""Helpers for the litellm instrumentation: the shared state, names, secrets, prices.

- :data:`state`: whether agenttrace is instrumenting litellm, what it patched, litellm's stream
  type and the names of litellm's settings that hold credentials;
- provider and model names of a call, as the spans report them;
- the secrets a call passes to litellm, remembered so they are never recorded;
- the price of a call from its tokens (litellm's, or its price map's when litellm is not
  loaded), and whether a result is a stream or a call orchestrates
  fallbacks.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from agenttrace import semconv as sc
from agenttrace._internal import price_table
from agenttrace._internal.redact import is_secret_key, remember_secret
from agenttrace.instrumentation.base import PatchState
from agenttrace.model.outcome import Usage
from agenttrace.tracing.llm_attributes import field, provider_name, split_model

WHERE = "litellm instrumentation"


class State(PatchState):
    """What the modules of the instrumentation share: one instance, :data:`state`."""

    __slots__ = ("config_secrets", "stream_type")

    def __init__(self) -> None:
        super().__init__()
        self.stream_type: type | None = None
        self.config_secrets: tuple[str, ...] = ()
        """litellm module settings whose names say they hold a credential (``api_key``...)."""


state = State()


def provider_and_model(model: str, custom_provider: Any) -> tuple[str | None, str]:
    """The provider (its GenAI name) and model of a call: from ``custom_llm_provider``, else a
    ``provider/`` prefix (taken off the model), else litellm's model map."""
    if isinstance(custom_provider, str) and custom_provider:
        return provider_name(custom_provider), model
    if "/" in model:
        return split_model(model)
    litellm = sys.modules.get("litellm")
    entry = getattr(litellm, "model_cost", {}).get(model) if litellm is not None else None
    provider = entry.get("litellm_provider") if isinstance(entry, Mapping) else None
    return provider_name(provider if isinstance(provider, str) else None), model


def is_mocked(operation: str, kwargs: Mapping[str, Any]) -> bool:
    """Whether litellm answers the call itself, with no request sent: ``completion`` does when
    ``mock_response`` or ``mock_tool_calls`` is truthy (a ``mock_timeout`` only fails the call),
    ``embedding`` when ``mock_response`` is given (litellm's own tests, ``main.py``)."""
    if operation == sc.OP_CHAT:
        return bool(kwargs.get("mock_response") or kwargs.get("mock_tool_calls"))
    return kwargs.get("mock_response") is not None


def routed_by_router(kwargs: Mapping[str, Any]) -> bool:
    """Whether a litellm Router chose the deployment a call goes to: the Router passes the
    model group the program asked for in the call's metadata."""
    for key in ("metadata", "litellm_metadata"):
        metadata = kwargs.get(key)
        if isinstance(metadata, Mapping) and metadata.get("model_group") is not None:
            return True
    return False


def remember_secrets(kwargs: Mapping[str, Any]) -> None:
    """Register the credentials a call can use (litellm's key settings, key arguments, auth
    headers) so they are scrubbed from any output."""
    litellm = sys.modules.get("litellm")
    if litellm is not None:  # keys set as litellm config (litellm.api_key = ...): never recorded
        settings = vars(litellm)
        for name in state.config_secrets:
            value = settings.get(name)
            if value is not None:
                remember_secret(value)
    for key, value in kwargs.items():
        if isinstance(value, str):
            if is_secret_key(key):
                remember_secret(value)
        elif key in ("headers", "extra_headers") and isinstance(value, Mapping):
            for header, header_value in value.items():
                if isinstance(header, str) and is_secret_key(header):
                    remember_secret(header_value)
                    if isinstance(header_value, str) and " " in header_value:
                        remember_secret(header_value.split(" ", 1)[1])  # "Bearer <key>"


def is_fallback_orchestration(kwargs: Mapping[str, Any]) -> bool:
    """True if this completion only runs ``fallbacks`` (the call's or litellm's
    ``model_fallbacks``): its attempts are the calls it makes."""
    if kwargs.get("fallbacks"):
        return True
    litellm = sys.modules.get("litellm")
    return bool(getattr(litellm, "model_fallbacks", None))


def is_stream(result: Any) -> bool:
    """True if ``result`` is litellm's stream type (known once litellm is instrumented)."""
    stream_type = state.stream_type
    return stream_type is not None and isinstance(result, stream_type)


def prompt_counts_cache_writes() -> bool:
    """Whether the imported litellm counts cache writes in ``prompt_tokens``.

    Before 1.77.3 litellm counted an Anthropic or Bedrock reply's cache reads in
    ``prompt_tokens`` but kept its cache writes beside it (``cache_creation_input_tokens``), and
    ``cost_per_token`` took ``prompt_tokens`` so. 1.77.3 added the writes, and the field that
    says how many were (``prompt_tokens_details.cache_creation_tokens``): that field tells the
    two apart."""
    types = sys.modules.get("litellm.types.utils")
    wrapper = getattr(types, "PromptTokensDetailsWrapper", None)
    fields = getattr(wrapper, "model_fields", None)
    return not isinstance(fields, Mapping) or "cache_creation_tokens" in fields


def with_cache_writes(usage: Usage | None, reported: Any) -> Usage | None:
    """``usage``, read from the usage block ``reported`` of a litellm response, its input
    counting the cache writes (``Usage.input`` counts every input token) where litellm left
    them out of ``prompt_tokens``: the ones it put in ``cache_creation_input_tokens``."""
    left_out = field(reported, "cache_creation_input_tokens")
    if usage is None or usage.input is None or not isinstance(left_out, int) or left_out <= 0:
        return usage
    if prompt_counts_cache_writes():
        return usage
    return Usage(
        usage.input + left_out,
        usage.output,
        usage.cache_read,
        usage.cache_write,
        usage.reasoning,
    )


def cost_from_tokens(litellm: Any, model: str, usage: Usage | None) -> float | None:
    """The price in USD of the tokens ``usage`` counts, from litellm's price map; None if
    the tokens or the price are unknown."""
    if usage is None:
        return None
    prompt, completion = usage.input, usage.output
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    if not prompt_counts_cache_writes():
        prompt -= usage.cache_write  # that litellm prices the writes on top of prompt_tokens
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=model,
            prompt_tokens=prompt,
            completion_tokens=completion,
            cache_read_input_tokens=usage.cache_read,
            cache_creation_input_tokens=usage.cache_write,
            usage_object=_with_reasoning(prompt, completion, usage),
        )
    except Exception:  # a model without a price in litellm's map
        return None
    return float(prompt_cost + completion_cost)


def _with_reasoning(prompt: int, completion: int, usage: Usage) -> Any:
    """litellm's usage for a call with reasoning tokens (None without): only a usage object
    carries them to ``cost_per_token``, which bills them at a model's reasoning rate."""
    if not usage.reasoning:
        return None
    from litellm.types.utils import Usage as LitellmUsage  # loaded with litellm: no import cost

    return LitellmUsage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        reasoning_tokens=usage.reasoning,
        cache_read_input_tokens=usage.cache_read,
        cache_creation_input_tokens=usage.cache_write,
    )


def price(model: str, usage: Usage | None) -> float | None:
    """The price of a direct SDK call's ``usage``: litellm's when litellm is loaded (it knows
    the prices a program registered with ``litellm.register_model``), else the same price from
    the installed litellm's price map, read without importing litellm (that takes seconds).
    None without litellm installed, without the counts, or for a model the map does not price."""
    litellm = sys.modules.get("litellm")
    if litellm is not None:
        return cost_from_tokens(litellm, model, usage)
    if usage is None or not isinstance(usage.input, int) or not isinstance(usage.output, int):
        return None
    return price_table.cost(
        model, usage.input, usage.output, usage.cache_read, usage.cache_write, usage.reasoning
    )
