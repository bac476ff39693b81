"""Token prices from litellm's bundled price map, read without importing litellm.

litellm ships its price map as a JSON file inside its package
(``model_prices_and_context_window_backup.json``). Importing litellm takes seconds, so a
program that calls the OpenAI or Anthropic SDK directly prices its calls from that file:
found with :func:`importlib.util.find_spec` (which locates the package without running its
``__init__``), read once on first use, and applied with the rules ``litellm.cost_per_token``
applies to the counts we have: input (cache reads and writes included), output, cache reads,
cache writes and reasoning tokens, at the model's per-token rates and the rates above a
prompt-size threshold (``input_cost_per_token_above_200k_tokens``). A model priced otherwise
(``tiered_pricing``, off-peak hours) has no price here rather than a wrong one. Nothing is
ever fetched. Without litellm installed there is no table, and no price.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

FILE_NAME = "model_prices_and_context_window_backup.json"

MAX_BYTES = 64 * 1024 * 1024
"""The largest price map read (litellm's is about 3 MB): a bigger file is not a price map."""

_TIER_SUFFIXES = ("_flex", "_balanced", "_priority", "_fast", "_ultrafast", "_auto", "_batches")
"""Threshold keys for a service tier or batches (``..._above_200k_tokens_priority``): litellm
reads them only for a call made at that tier, which a direct SDK call's usage does not say."""

_UNMODELLED = ("tiered_pricing", "off_peak_pricing")
"""Pricing schemes this module does not apply: a model that has one gets no price."""

_INCLUSIVE_PROVIDERS = frozenset({"xai"})
"""Providers whose higher rate starts at the threshold itself (litellm's rule)."""

_FIREWORKS_CACHE_READ_RATIO = 0.5
"""Fireworks bills a cache read at half the input rate when the map gives no cache rate
(litellm's ``FIREWORKS_AI_DEFAULT_CACHE_READ_RATE_RATIO``)."""

_lock = threading.Lock()
_table: dict[str, Mapping[str, Any]] | None = None
_loaded = False


def locate() -> Path | None:
    """The installed litellm's price map file, or None (litellm not installed, or no file)."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / FILE_NAME
        if path.is_file():
            return path
    return None


def read(path: Path) -> dict[str, Mapping[str, Any]] | None:
    """The price map at ``path``: model name to its entry (entries that are not objects are
    left out), or None if the file is too big, not JSON, or not an object of objects."""
    with path.open("rb") as file:
        size = os.fstat(file.fileno()).st_size
        # read(n) allocates n bytes up front: ask for the file's size, not the bound
        data = file.read(size + 1) if size <= MAX_BYTES else b""
    if size > MAX_BYTES or len(data) > MAX_BYTES:
        logger.warning("agenttrace: %s is over %d bytes; not read as a price map", path, MAX_BYTES)
        return None
    try:
        parsed = json.loads(data)
    except ValueError:
        logger.warning("agenttrace: %s is not JSON; no prices from it", path)
        return None
    if not isinstance(parsed, dict):
        logger.warning("agenttrace: %s is not a JSON object; no prices from it", path)
        return None
    prices: dict[str, Mapping[str, Any]] = {
        k: v for k, v in parsed.items() if isinstance(k, str) and isinstance(v, dict)
    }
    return prices or None


def table() -> dict[str, Mapping[str, Any]] | None:
    """The installed litellm's price map, read on first use (None without one)."""
    global _table, _loaded
    if _loaded:
        return _table
    with _lock:
        if not _loaded:
            path = locate()
            try:
                _table = read(path) if path is not None else None
            except OSError as exc:
                logger.warning("agenttrace: cannot read %s (%s); no prices", path, exc)
                _table = None
            _loaded = True
    return _table


def entry(model: str) -> Mapping[str, Any] | None:
    """The price map's entry for ``model`` as litellm finds it: the name as given
    (``azure/gpt-4o``, ``gpt-4o``), else without its provider prefix."""
    prices = table()
    if prices is None:
        return None
    found = prices.get(model)
    if found is None and "/" in model:
        found = prices.get(model.split("/", 1)[1])
    return found


def cost(
    model: str,
    input: int,
    output: int,
    cache_read: int = 0,
    cache_write: int = 0,
    reasoning: int = 0,
) -> float | None:
    """The price in USD of one call's tokens (``input`` counts every input token, cache
    reads and writes included; ``output`` counts reasoning tokens too), or None if the
    model has no per-token price in the map."""
    found = entry(model)
    if found is None or any(key in found for key in _UNMODELLED):
        return None
    rates = _rates(found, input, model.split("/", 1)[0] if "/" in model else "")
    if rates is None:
        return None
    input_rate, output_rate, read_rate, write_rate = rates
    uncached = max(input - cache_read - cache_write, 0)
    prompt = uncached * input_rate + cache_read * read_rate + cache_write * write_rate
    reasoning_rate = _rate(found, "output_cost_per_reasoning_token")
    if reasoning and reasoning_rate is not None:
        completion = max(output - reasoning, 0) * output_rate + reasoning * reasoning_rate
    else:
        completion = output * output_rate
    return float(prompt + completion)


def _rates(
    found: Mapping[str, Any], prompt_tokens: int, provider: str
) -> tuple[float, float, float, float] | None:
    """The input, output, cache-read and cache-write rates for a prompt of ``prompt_tokens``
    to ``provider``: the highest threshold the prompt passes sets every rate it names
    (litellm's rule), and an absent cache rate is the input rate."""
    input_rate = _rate(found, "input_cost_per_token")
    if input_rate is None:
        return None  # priced per character, second or image: not from token counts
    output_rate = _rate(found, "output_cost_per_token") or 0.0
    read_rate = _rate(found, "cache_read_input_token_cost")
    if read_rate is None and provider == "fireworks_ai":
        read_rate = input_rate * _FIREWORKS_CACHE_READ_RATIO
    write_rate = _rate(found, "cache_creation_input_token_cost")
    inclusive = provider in _INCLUSIVE_PROVIDERS
    thresholds: list[tuple[float, str]] = []
    for key in found:
        if key.startswith("input_cost_per_token_above_") and not key.endswith(_TIER_SUFFIXES):
            size = _threshold(key)
            if size is not None:
                thresholds.append((size, key))
    for threshold, key in sorted(thresholds, reverse=True):
        above_input = _rate(found, key)
        if above_input is None:
            continue
        if prompt_tokens > threshold or (inclusive and prompt_tokens == threshold):
            above = key.split("_above_", 1)[1]  # "200k_tokens"
            input_rate = above_input
            output_above = _rate(found, f"output_cost_per_token_above_{above}")
            output_rate = output_rate if output_above is None else output_above
            write_rate = _or(
                _rate(found, f"cache_creation_input_token_cost_above_{above}"), write_rate
            )
            read_rate = _or(_rate(found, f"cache_read_input_token_cost_above_{above}"), read_rate)
            break
    return (
        input_rate,
        output_rate,
        input_rate if read_rate is None else read_rate,
        input_rate if write_rate is None else write_rate,
    )


def _threshold(key: str) -> float | None:
    """The prompt size in ``input_cost_per_token_above_200k_tokens`` (200000), or None."""
    text = key.split("_above_", 1)[1].split("_tokens", 1)[0]
    try:
        return float(text.replace("k", "")) * (1000 if "k" in text else 1)
    except ValueError:
        return None


def _rate(found: Mapping[str, Any], key: str) -> float | None:
    """A per-token rate as litellm reads one: a number, or a number's text."""
    value = found.get(key)
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _or(value: float | None, default: float | None) -> float | None:
    return default if value is None else value
