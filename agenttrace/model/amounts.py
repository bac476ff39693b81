"""The precision costs and latencies are written with: the session file's opTree, the billing
ledger and ``stats`` print ``0.000123``, not ``0.00012300000000000001``.

Costs are rounded to 1e-12 USD: the cheapest per-token price in litellm's map is 1.3e-10 USD,
so even one token of it keeps two significant digits, while a float's noise (about 1e-16 of the
value) is cut off for any cost under 10,000 USD. Latencies are milliseconds rounded to 3
decimals (a microsecond): far finer than any LLM or tool call is measured to mean, and the spans
keep their exact nanosecond times besides.
"""

from __future__ import annotations

from typing import TypeVar

COST_DECIMALS = 12
"""Decimals of a USD amount as written (1e-12 USD)."""
LATENCY_DECIMALS = 3
"""Decimals of a latency in milliseconds as written (a microsecond)."""

_Amount = TypeVar("_Amount", int, float, None)


def cost_written(usd: _Amount) -> _Amount:
    """``usd`` to :data:`COST_DECIMALS` places; ``None`` (no price) and ints as they are."""
    return round(usd, COST_DECIMALS) if isinstance(usd, float) else usd


def latency_written(ms: float) -> float:
    """``ms`` to :data:`LATENCY_DECIMALS` places."""
    return round(ms, LATENCY_DECIMALS)
