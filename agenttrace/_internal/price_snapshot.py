"""The per-token prices a model was billed at, and where they came from: one entry of a
session file's ``meta.pricingSnapshot`` (docs/session-file.md, "Pricing snapshot").

A cost in the ledger is a price times token counts. The counts are in the ledger; the price
is litellm's, which changes between litellm releases (its bundled map), with the day (litellm
fetches its map from GitHub unless ``LITELLM_LOCAL_MODEL_COST_MAP`` is set) and with the
program (``litellm.register_model`` overrides a model's prices). So the session keeps, per
model it billed, the rates as they were when it billed it, and their source, and a cost can be
checked against them later.

The rates are read where the call was priced: ``litellm.model_cost`` when litellm is imported
(it holds the program's overrides), else the map the installed litellm ships
(``agenttrace._internal.price_table``, read without importing litellm). Reading them never
raises: a model without per-token rates gets no entry.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import sys
from collections.abc import Mapping
from typing import Any

from agenttrace._internal import price_table

SOURCE_LITELLM = "litellm"
"""The rates are litellm's cost map's, as the installed release has it (or fetched it)."""
SOURCE_OVERRIDE = "override"
"""The program set the rates itself (``litellm.register_model``): they differ from the map."""

_RATE_MARKERS = ("cost_per_token", "token_cost", "cost_per_reasoning_token")
"""What the name of a per-token rate in litellm's map contains (``input_cost_per_token``,
``cache_read_input_token_cost``, ``output_cost_per_reasoning_token``, and their
``_above_200k_tokens`` and tier variants)."""


def model_prices(*names: str | None) -> dict[str, Any] | None:
    """The snapshot entry of the first of ``names`` (the requested model, then the model the
    response names) that has per-token rates: ``{"source", "pricedAs", "prices", ...}``, or
    ``None`` if none has (a model the map does not price, or no litellm)."""
    try:
        for name in names:
            if name:
                found = _entry(name)
                if found is not None:
                    return found
    except Exception:  # a price map of an unexpected shape: no snapshot, never a failed run
        return None
    return None


def _entry(name: str) -> dict[str, Any] | None:
    litellm = sys.modules.get("litellm")
    live = getattr(litellm, "model_cost", None) if litellm is not None else None
    key, rates = _lookup(live, name) if isinstance(live, Mapping) else (None, None)
    shipped = rates is None  # litellm not loaded (or not knowing it): the map it ships priced it
    if shipped:
        key, rates = _lookup(price_table.table(), name)
    if rates is None or key is None:
        return None
    prices = _rates(rates)
    if "input_cost_per_token" not in prices:
        return None  # priced per character, second or image: not from token counts
    overridden = not shipped and (
        _registered(rates) or _differs_from_shipped(litellm, name, prices)
    )
    snapshot: dict[str, Any] = {
        "source": SOURCE_OVERRIDE if overridden else SOURCE_LITELLM,
        "pricedAs": key,
        "prices": prices,
    }
    version = _litellm_version()
    if version is not None:
        snapshot["litellmVersion"] = version
    revision = _map_revision(litellm) if not shipped else None
    if revision is not None or shipped:  # read from the file the installed litellm ships
        snapshot["costMap"] = revision or {"source": "local"}
    return snapshot


def _lookup(
    table: Mapping[str, Any] | None, name: str
) -> tuple[str | None, Mapping[str, Any] | None]:
    """The key and entry of ``name`` in ``table`` as litellm finds it: the name as given, else
    without its provider prefix."""
    if table is None:
        return None, None
    for key in (name, name.split("/", 1)[1] if "/" in name else None):
        if key is not None:
            found = table.get(key)
            if isinstance(found, Mapping):
                return key, found
    return None, None


def _rates(entry: Mapping[str, Any]) -> dict[str, float]:
    """The per-token rates of a map entry, under litellm's names, in its order."""
    return {
        key: float(value)
        for key, value in entry.items()
        if isinstance(key, str)
        and any(marker in key for marker in _RATE_MARKERS)
        and isinstance(value, int | float)
        and not isinstance(value, bool)
    }


def _differs_from_shipped(litellm: Any, name: str, prices: Mapping[str, float]) -> bool:
    """Whether litellm's rates for ``name`` differ from those of the map it ships, when that
    map is the one it uses (only then is a difference the program's doing). The shipped map is
    read here, on first need only (about 3 MB)."""
    if not _fetched_locally(litellm):
        return False
    _, shipped = _lookup(price_table.table(), name)
    return prices != _rates(shipped or {})


def _registered(entry: Mapping[str, Any]) -> bool:
    """Whether litellm says the program registered a rate of ``entry`` (litellm releases that
    keep track of it: ``registered_fields``)."""
    fields = getattr(entry, "registered_fields", None)
    return bool(fields) and any(
        isinstance(field, str) and any(marker in field for marker in _RATE_MARKERS)
        for field in fields  # type: ignore[union-attr]
    )


def _fetched_locally(litellm: Any) -> bool:
    """Whether litellm's map is the one it ships (so a rate that differs from it was set by the
    program): a map fetched from GitHub differs from it on its own."""
    info = _map_info(litellm)
    if info is not None:
        return info.get("source") == "local"
    return os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "").strip().lower() == "true"


def _map_revision(litellm: Any) -> dict[str, Any] | None:
    """Which map litellm priced with, where it says (``get_model_cost_map_source_info``):
    ``{"source": "local"|"remote", "revision": git blob id}``."""
    info = _map_info(litellm)
    if info is None:
        return None
    described = {
        key: info[name]
        for key, name in (("source", "source"), ("revision", "source_revision"))
        if isinstance(info.get(name), str)
    }
    return described or None


def _map_info(litellm: Any) -> Mapping[str, Any] | None:
    if litellm is None:
        return None
    module = sys.modules.get("litellm.litellm_core_utils.get_model_cost_map")
    describe = getattr(module, "get_model_cost_map_source_info", None)
    if describe is None:
        return None
    info = describe()
    return info if isinstance(info, Mapping) else None


@functools.cache
def _litellm_version() -> str | None:
    """The installed litellm's version (its map is the one that release ships)."""
    try:
        return importlib.metadata.version("litellm")
    except importlib.metadata.PackageNotFoundError:
        return None
