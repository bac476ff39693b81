"""The session file's ``meta.pricingSnapshot``, kept as the session bills: the first priced
LLM attempt of each model adds the model's per-token prices and their source
(``agenttrace._internal.price_snapshot``), on agenttrace's worker, off the caller's path.

A resumed session starts from the snapshot of the file it was resumed from (its ``meta`` is
carried over), so a model it billed before keeps the prices it was billed at then.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from typing import Any

from msgspec import UNSET

from agenttrace._internal.price_snapshot import model_prices
from agenttrace.formats.session.schema import AccountingEntry

logger = logging.getLogger("agenttrace")

SNAPSHOT_KEY = "pricingSnapshot"
"""The key of the snapshot in the session file's ``meta``."""


def note_prices(meta: MutableMapping[str, Any], entry: AccountingEntry) -> bool:
    """Add the prices of ``entry``'s model to ``meta``'s snapshot if it is an LLM attempt that
    was priced (a cost, not made up by litellm's ``mock_response``) and its model is not in
    it yet; True if the snapshot changed. The snapshot is replaced, never changed in place: a
    write on another thread may be reading the one it holds."""
    if entry.type != "llm" or entry.costUsd is None or entry.mocked is not UNSET:
        return False
    model = entry.model
    if not isinstance(model, str) or not model:
        return False
    snapshot = meta.get(SNAPSHOT_KEY)
    if isinstance(snapshot, Mapping) and model in snapshot:
        return False
    actual = entry.actualModel if isinstance(entry.actualModel, str) else None
    prices = model_prices(model, actual)
    if prices is None:
        logger.debug("agenttrace: no per-token prices for %s in the price map", model)
        return False
    earlier = dict(snapshot) if isinstance(snapshot, Mapping) else {}
    meta[SNAPSHOT_KEY] = {**earlier, model: prices}
    return True
