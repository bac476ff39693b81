"""The exchange log (docs/how-to/exports.md, "The exchange log"), as lines: ``session_start``, one
``exchange``
per user interaction, ``session_end``, and the session's aggregation.

The format, field for field:

- ``session_start``: ``session_id``, ``ts``, ``model``, ``cwd``, ``tools_available``,
  ``permission_mode``;
- ``exchange``: ``session_id``, ``exchange`` (1-based), ``ts_start``, ``ts_end``,
  ``user_input``, ``messages`` (``{"source": "assistant", "type": "text", "text", "ts"}``,
  ``{"source": "assistant", "type": "tool_use", "tool_use_id", "name", "input", "ts"}``,
  ``{"source": "tool", "type": "result", "tool_use_id", "is_error", "output", "ts"}``) and
  ``stats`` (``num_turns``, ``duration_ms``, ``duration_api_ms``, ``tokens_in``, ``tokens_out``,
  ``cache_creation``, ``cache_read``, ``cost_usd``);
- ``session_end``: ``total_exchanges``, ``total_duration_ms``, ``total_duration_api_ms`` and
  ``total_cost_usd`` summed over the exchanges, ``total_tokens`` (``input``, ``output``,
  ``cache_creation``, ``cache_read``) of the last exchange only (later exchanges carry the
  earlier ones as context, so a sum would count it again), ``tools_used`` counted over all.

What agenttrace adds where the exchange log's format (docs/how-to/exports.md, "The exchange log")
is silent, and
only there: a sub-agent's message carries ``parent_tool_use_id`` (the call that ran it); an exchange
whose result is an error carries ``error`` (the result's text); an exchange that never got its
result (the program stopped, or the SDK raised) is written when the log is closed with ``stats``
``null``; a number nobody reported (a cost the SDK did not give) is ``null``, and so is a total it
is part of, never 0. Timestamps are ISO 8601 UTC to the second, as the format writes them.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import msgspec

COST_DIGITS = 12
"""Costs are rounded to this many decimals: a share computed as the difference of two running
totals (0.560024 - 0.56) would otherwise end in floating-point noise (2.4000000000024e-05)."""


def timestamp(when: float | None = None) -> str:
    """``when`` (seconds since the epoch, default now) as the format's ``2025-11-07T08:45:32Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if when is None else when))


def file_stamp(when: float) -> str:
    """``when`` as the ``YYYYMMDD_HHMMSS`` (UTC) that starts a log's file name."""
    return time.strftime("%Y%m%d_%H%M%S", time.gmtime(when))


def encode(value: Any) -> bytes:
    """``value`` as compact JSON (the format's lines have no spaces), UTF-8; a number JSON has
    none for (NaN, an infinity) as ``null``. Text holding a lone surrogate, which UTF-8 cannot
    encode, is written as its ``\\u`` escape instead."""
    try:
        return msgspec.json.encode(value)
    except UnicodeEncodeError:
        return json.dumps(_finite(value), separators=(",", ":")).encode("ascii")


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities as ``None``, as msgspec writes them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


@dataclass(frozen=True)
class Stats:
    """An exchange's ``stats``: its own share of everything, never a running total."""

    num_turns: int
    duration_ms: float
    duration_api_ms: float | None
    tokens_in: int
    tokens_out: int
    cache_creation: int
    cache_read: int
    cost_usd: float | None

    def line(self) -> dict[str, Any]:
        return {
            "num_turns": self.num_turns,
            "duration_ms": self.duration_ms,
            "duration_api_ms": self.duration_api_ms,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cache_creation": self.cache_creation,
            "cache_read": self.cache_read,
            "cost_usd": _cost(self.cost_usd),
        }


def session_start(
    session_id: str,
    ts: str,
    *,
    model: str | None,
    cwd: str | None,
    tools: list[str] | None,
    permission_mode: str | None,
) -> dict[str, Any]:
    """The ``session_start`` line."""
    return {
        "type": "session_start",
        "session_id": session_id,
        "ts": ts,
        "model": model,
        "cwd": cwd,
        "tools_available": tools,
        "permission_mode": permission_mode,
    }


def text_message(text: str, ts: str, parent_tool_use_id: str | None = None) -> dict[str, Any]:
    """An assistant's text, as an exchange's message."""
    return _message("assistant", "text", {"text": text}, ts, parent_tool_use_id)


def tool_use_message(
    tool_use_id: str, name: str, input: Any, ts: str, parent_tool_use_id: str | None = None
) -> dict[str, Any]:
    """A tool call the assistant asked for."""
    fields = {"tool_use_id": tool_use_id, "name": name, "input": input}
    return _message("assistant", "tool_use", fields, ts, parent_tool_use_id)


def result_message(
    tool_use_id: str, is_error: bool, output: str, ts: str, parent_tool_use_id: str | None = None
) -> dict[str, Any]:
    """A tool's result."""
    fields = {"tool_use_id": tool_use_id, "is_error": is_error, "output": output}
    return _message("tool", "result", fields, ts, parent_tool_use_id)


def _message(
    source: str, kind: str, fields: dict[str, Any], ts: str, parent: str | None
) -> dict[str, Any]:
    message = {"source": source, "type": kind, **fields}
    if parent is not None:
        message["parent_tool_use_id"] = parent
    message["ts"] = ts
    return message


def exchange(
    session_id: str,
    number: int,
    *,
    ts_start: str,
    ts_end: str | None,
    user_input: str | None,
    messages: list[Any],
    stats: Stats | None,
    error: str | None = None,
) -> dict[str, Any]:
    """An ``exchange`` line. ``messages`` may hold pre-encoded ``msgspec.Raw`` items;
    ``ts_end`` is ``None`` only for an exchange whose end nobody saw (an export of a run that
    never ended)."""
    line = {
        "type": "exchange",
        "session_id": session_id,
        "exchange": number,
        "ts_start": ts_start,
        "ts_end": ts_end,
        "user_input": user_input,
        "messages": messages,
        "stats": None if stats is None else stats.line(),
    }
    if error is not None:
        line["error"] = error
    return line


@dataclass
class Totals:
    """The session's aggregation ("Session Aggregation" of the exchange log), fed exchange by
    exchange."""

    exchanges: int = 0
    duration_ms: float | None = 0
    duration_api_ms: float | None = 0
    cost_usd: float | None = 0.0
    last: Stats | None = None
    tools_used: Counter[str] = field(default_factory=Counter)

    def add(self, stats: Stats | None) -> None:
        """Count one exchange (``stats`` ``None`` for one that never got its result)."""
        self.exchanges += 1
        if stats is None:
            return
        self.duration_ms = _sum(self.duration_ms, stats.duration_ms)
        self.duration_api_ms = _sum(self.duration_api_ms, stats.duration_api_ms)
        self.cost_usd = _sum(self.cost_usd, stats.cost_usd)
        self.last = stats

    def tool(self, name: str) -> None:
        """Count one tool call."""
        self.tools_used[name] += 1

    def session_end(self, session_id: str, ts: str) -> dict[str, Any]:
        """The ``session_end`` line."""
        last = self.last
        return {
            "type": "session_end",
            "session_id": session_id,
            "ts": ts,
            "total_exchanges": self.exchanges,
            "total_duration_ms": self.duration_ms,
            "total_duration_api_ms": self.duration_api_ms,
            "total_cost_usd": _cost(self.cost_usd),
            "total_tokens": {
                "input": last.tokens_in if last else 0,
                "output": last.tokens_out if last else 0,
                "cache_creation": last.cache_creation if last else 0,
                "cache_read": last.cache_read if last else 0,
            },
            "tools_used": dict(self.tools_used),
        }


def _sum(total: float | None, value: float | None) -> float | None:
    """``total + value``; unknown (``None``) once either is."""
    return None if total is None or value is None else total + value


def _cost(value: float | None) -> float | None:
    return None if value is None else round(value, COST_DIGITS)
