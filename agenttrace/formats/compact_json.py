"""Compact JSON (no spaces, UTF-8) as agenttrace writes opTree nodes and accounting entries.

msgspec encodes it several times faster than ``json.dumps``, in the same form but for two
details that do not change what a reader gets: an exponent is written without ``+`` (``1e16``),
and a NaN or an infinity, which JSON has no number for, as ``null`` (``json.dumps`` wrote
``NaN``, which no strict reader takes). What msgspec refuses (text holding a lone surrogate,
which UTF-8 cannot encode) is written as ``json.dumps`` writes it, the surrogate as its
backslash escape; objects of other types as their ``str``. A struct (an accounting entry), alone
or inside a value, is written as its fields, in order, those left unset out.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec


def _default(value: Any) -> Any:
    # A struct inside a value (an accounting entry in an opTree node) as its fields, as msgspec
    # writes it; anything else as its ``str``.
    if isinstance(value, msgspec.Struct):
        return msgspec.to_builtins(value, enc_hook=str)
    return str(value)


_FALLBACK = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_default)


def compact_json(value: Any) -> bytes:
    """``value`` as compact JSON, UTF-8 (see the module docstring)."""
    try:
        return msgspec.json.encode(value, enc_hook=str)
    except (UnicodeEncodeError, TypeError, ValueError, OverflowError):
        if isinstance(value, msgspec.Struct):  # its fields as a dict, in order, unset ones left out
            value = msgspec.to_builtins(value, enc_hook=str)
        return _FALLBACK.encode(value).encode("utf-8", "backslashreplace")
