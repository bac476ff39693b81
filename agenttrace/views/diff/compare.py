"""Field-level differences between two JSON values: where they differ (a JSON path such as
``$.messages[0].content``), with both values, capped in size so a report stays readable
whatever the runs sent; two long texts are shown as a unified diff of their lines.

Standard library only (``difflib``): a general deep-diff library would give paths in its own
notation and no size caps, which a report read from untrusted files needs anyway.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MAX_CHANGES = 20
"""Changes listed per divergence; the rest are counted (``more``)."""
MAX_VALUE_CHARS = 400
"""A value is shown up to this many characters of its JSON text, then cut with ``…``."""
LONG_TEXT_CHARS = 200
"""Two strings this long (or either of several lines) are shown as a unified diff."""
MAX_DIFF_LINES = 60
"""Lines of a unified diff shown; the rest are counted in a last line."""
MAX_DEPTH = 64
"""Values nested deeper than this are compared whole (a hostile file may nest thousands)."""

ABSENT: Any = object()
"""The value on the side where a key or item is not there."""


@dataclass(frozen=True)
class Change:
    """One place where the two values differ: its JSON path, what it is on each side
    (``None`` with ``a_present`` or ``b_present`` false where it is not there), and, for two
    long texts, a unified diff of their lines."""

    path: str
    a: Any
    b: Any
    a_present: bool = True
    b_present: bool = True
    text_diff: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        """The documented JSON shape (docs/how-to/replay-diff.md)."""
        result: dict[str, Any] = {"path": self.path}
        if self.a_present:
            result["a"] = self.a
        if self.b_present:
            result["b"] = self.b
        if self.text_diff:
            result["text_diff"] = list(self.text_diff)
        return result


@dataclass(frozen=True)
class FieldDiff:
    """The changes between two values, at most :data:`MAX_CHANGES` of them (``more``: how many
    more there were)."""

    changes: tuple[Change, ...]
    more: int = 0

    def __bool__(self) -> bool:
        return bool(self.changes)

    def as_json(self) -> dict[str, Any]:
        return {"changes": [change.as_json() for change in self.changes], "more": self.more}


def field_diff(a: Any, b: Any) -> FieldDiff:
    """Where ``a`` and ``b`` (JSON values) differ, in document order."""
    found: list[Change] = []
    count = _walk(a, b, "$", 0, found)
    return FieldDiff(tuple(found), max(0, count - len(found)))


def _walk(a: Any, b: Any, path: str, depth: int, found: list[Change]) -> int:
    """Adds the changes under ``path`` to ``found`` (up to the cap); returns how many there are."""
    if _same(a, b):
        return 0
    if depth < MAX_DEPTH and isinstance(a, Mapping) and isinstance(b, Mapping):
        count = 0
        keys = list(a) + [key for key in b if key not in a]
        for key in keys:
            there = f"{path}.{key}" if _plain_key(key) else f"{path}[{json.dumps(str(key))}]"
            count += _walk(a.get(key, ABSENT), b.get(key, ABSENT), there, depth + 1, found)
        return count
    if depth < MAX_DEPTH and _is_list(a) and _is_list(b):
        count = 0
        for index in range(max(len(a), len(b))):
            left = a[index] if index < len(a) else ABSENT
            right = b[index] if index < len(b) else ABSENT
            count += _walk(left, right, f"{path}[{index}]", depth + 1, found)
        return count
    if len(found) < MAX_CHANGES:
        found.append(_change(path, a, b))
    return 1


def _same(a: Any, b: Any) -> bool:
    if a is ABSENT or b is ABSENT:
        return a is b
    if type(a) is not type(b) and not (_is_list(a) and _is_list(b)):
        return False  # 1 == True == 1.0 in Python, not in JSON
    try:
        return bool(a == b)
    except Exception:  # a value whose == raises: different as far as a report can tell
        return False


def _is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray))


def _plain_key(key: Any) -> bool:
    return isinstance(key, str) and key.isidentifier()


def _change(path: str, a: Any, b: Any) -> Change:
    text_diff: tuple[str, ...] = ()
    if isinstance(a, str) and isinstance(b, str) and _long(a, b):
        text_diff = unified(a, b)
    return Change(
        path,
        None if a is ABSENT else capped(a),
        None if b is ABSENT else capped(b),
        a is not ABSENT,
        b is not ABSENT,
        text_diff,
    )


def _long(a: str, b: str) -> bool:
    return max(len(a), len(b)) >= LONG_TEXT_CHARS or "\n" in a or "\n" in b


def unified(a: str, b: str) -> tuple[str, ...]:
    """A unified diff of two texts' lines (``a`` then ``b``), cut at :data:`MAX_DIFF_LINES`."""
    lines = list(difflib.unified_diff(a.splitlines(), b.splitlines(), "a", "b", n=2, lineterm=""))
    if len(lines) > MAX_DIFF_LINES:
        more = len(lines) - MAX_DIFF_LINES
        lines = [*lines[:MAX_DIFF_LINES], f"... {more} more line(s)"]
    return tuple(_cut(line) for line in lines)


def capped(value: Any) -> Any:
    """``value`` as it is shown: as it is when its JSON text is short, else that text cut at
    :data:`MAX_VALUE_CHARS` characters (a string is cut as itself)."""
    if isinstance(value, str):
        return _cut(value)
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return _cut(repr(value))
    return value if len(text) <= MAX_VALUE_CHARS else _cut(text)


def was_cut(value: Any) -> bool:
    """Whether ``value`` as :func:`capped` gives it was cut (it ends with the ``…`` added)."""
    return isinstance(value, str) and len(value) == MAX_VALUE_CHARS + 1 and value.endswith("…")


def _cut(text: str) -> str:
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS] + "…"
