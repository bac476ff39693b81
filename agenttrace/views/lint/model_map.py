"""What litellm's offline model map says of a model: its context window and whether it is
free. Read from the JSON file litellm ships (its backup map, the one
``LITELLM_LOCAL_MODEL_COST_MAP=True`` makes litellm use), never fetched, and without importing
litellm (seconds, for one file): lint works offline, and without litellm installed it only
knows what the settings say."""

from __future__ import annotations

import functools
import importlib.util
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MAP_FILE = "model_prices_and_context_window_backup.json"


@functools.lru_cache(maxsize=1)
def model_map() -> Mapping[str, Any]:
    """litellm's offline model map, or an empty one without litellm (or an unreadable map)."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return {}
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        try:
            loaded = json.loads((Path(location) / MAP_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(loaded, dict):
            return loaded
    return {}


def model_entry(model: str, provider: str | None = None) -> Mapping[str, Any] | None:
    """The map's entry for ``model`` (as an accounting entry names it: ``gpt-4o-mini``, or
    ``openai/gpt-4o-mini``), also looked up as ``provider/model`` and without its provider."""
    known = model_map()
    names = [model]
    if provider:
        names.append(f"{provider}/{model}")
    if "/" in model:
        names.append(model.split("/", 1)[1])
    for name in names:
        entry = known.get(name)
        if isinstance(entry, Mapping):
            return entry
    return None


def context_window(model: str, provider: str | None = None) -> int | None:
    """The model's input window in tokens (``max_input_tokens``, else ``max_tokens``), or
    ``None`` when the map does not say."""
    entry = model_entry(model, provider)
    if entry is None:
        return None
    for key in ("max_input_tokens", "max_tokens"):
        value = entry.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return int(value)
    return None


def free(model: str, provider: str | None = None) -> bool | None:
    """Whether the map prices the model at 0 for input and output tokens (``True``), at more
    (``False``), or ``None`` when it does not price it."""
    entry = model_entry(model, provider)
    if entry is None:
        return None
    prices = [entry.get(key) for key in ("input_cost_per_token", "output_cost_per_token")]
    numbers = [
        float(price)
        for price in prices
        if isinstance(price, (int, float)) and not isinstance(price, bool)
    ]
    if not numbers or not all(math.isfinite(number) for number in numbers):
        return None
    return all(number == 0 for number in numbers)
