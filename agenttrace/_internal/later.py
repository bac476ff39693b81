"""Values recorded later: what cannot change is captured by reference and serialised off the
caller's path.

A tool's arguments and result are recorded as redacted, capped JSON (``recorded_json``), which
costs more than the rest of a tool call's bookkeeping in the caller. When the value cannot
change afterwards (a string, a number, a bool, ``None``, or a tuple or a dict agenttrace built
itself of them), the caller needs only its JSON length now (:func:`json_length`, the op's
``characters`` figure) and keeps the value itself in a :class:`RecordedLater`, whose text is made
on first read, by agenttrace's worker. The text is the one ``recorded_json`` would have made in
the caller.
"""

from __future__ import annotations

import math
from json.encoder import encode_basestring
from typing import Any

from agenttrace._internal.redact import recorded_json

_INT_LIMIT = 10**18
"""Integers up to this size have their length measured here; larger ones take the usual path
(Python refuses to print integers of over 4,300 digits, and ``json.dumps`` with it)."""


def json_length(value: Any) -> int | None:
    """The length of ``json.dumps(value, ensure_ascii=False)`` for a value that cannot change
    (``str``, ``int``, ``float``, ``bool``, ``None``; tuples of them; dicts of them by string
    keys, which must not be changed either); ``None`` for anything else."""
    kind = type(value)
    if kind is str:
        return len(encode_basestring(value))  # the quotes and escapes included
    if kind is int:
        return len(int.__repr__(value)) if -_INT_LIMIT < value < _INT_LIMIT else None
    if kind is bool:
        return 4 if value else 5
    if value is None:
        return 4
    if kind is float:
        if math.isfinite(value):
            return len(float.__repr__(value))
        return 3 if value != value else (8 if value > 0 else 9)  # NaN, Infinity, -Infinity
    if kind is tuple:
        total = 2 * len(value) or 2  # "[" "]" and ", " between items
        for item in value:
            length = json_length(item)
            if length is None:
                return None
            total += length
        return total
    if kind is dict:
        total = 4 * len(value) or 2  # "{" "}", ": " after each key, ", " between items
        for key, item in value.items():
            length = json_length(item)
            if type(key) is not str or length is None:
                return None
            total += len(encode_basestring(key)) + length
        return total
    return None


class RecordedLater:
    """A value that cannot change, recorded (``recorded_json``: redacted, capped JSON text) on
    first read of :attr:`text` rather than when it was captured."""

    __slots__ = ("_text", "max_bytes", "value")

    def __init__(self, value: Any, max_bytes: int) -> None:
        self.value = value
        self.max_bytes = max_bytes
        self._text: str | None = None

    @property
    def text(self) -> str:
        """The recorded text, made once (two threads reading it at once make the same)."""
        text = self._text
        if text is None:
            text = self._text = recorded_json(self.value, self.max_bytes)[1]
        return text


def recorded_text(payload: Any) -> str | None:
    """A payload as recorded (``Ended.payloads``'s values): its text; ``None`` if it is none."""
    if isinstance(payload, str):
        return payload
    if type(payload) is RecordedLater:
        return payload.text
    return None
