"""Size caps on recorded text: a string cut to a number of UTF-8 bytes, JSON cut to stay JSON.

Every cap is idempotent, at any depth: what a cap made fits that cap, so capping it again gives
it back unchanged (a payload capped on the span, then capped again by an export, is what was
sent). The marker a cut leaves says how big the original was, and cutting a cut string to a
smaller cap keeps that figure: ``…[truncated, N bytes]`` after a cut text, ``…[+N chars]`` after
a string shortened inside JSON.

The policy that decides what is scanned for secrets, and in which order, is
:mod:`agenttrace._internal.redact`; this module only measures and cuts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_TRUNCATED = re.compile(r"…\[truncated, (\d{1,20}) bytes\]\Z")
_SHORTENED = re.compile(r"…\[\+(\d{1,20}) chars\]\Z")
_MARKER_TAIL = 48
"""Characters at the end of a string that can hold a marker (the longest is ~36)."""
_MIN_LIMIT = 16
"""The shortest a string inside capped JSON is cut to (``[REDACTED]`` stays whole)."""


class Long(str):
    """The start of a longer string, with the length of the whole (in characters).

    Only the start of an over-long string can be kept by a cap, so only the start is scanned
    and carried around; ``whole`` lets the marker still say how long the original was.
    """

    whole: int

    def __new__(cls, start: str, whole: int) -> Long:
        made = super().__new__(cls, start)
        made.whole = whole
        return made


def utf8_size(text: str) -> int:
    """``text``'s size in UTF-8 bytes (lone surrogates counted as three, as they are written)."""
    return len(text.encode("utf-8", "surrogatepass"))


def fits(text: str, max_bytes: int) -> bool:
    """Whether ``text`` is at most ``max_bytes`` UTF-8 bytes, measuring only when it must.

    A character is 1-4 bytes: ``max_bytes // 4`` characters always fit, more than
    ``max_bytes`` never do; only in between is the text encoded (and then it is small).
    """
    if len(text) <= max_bytes // 4:
        return True
    if len(text) > max_bytes:
        return False
    return utf8_size(text) <= max_bytes


def original_size(text: str) -> int:
    """The UTF-8 size of the text ``text`` stands for: the size a cut text's marker gives, else
    its own."""
    cut = _TRUNCATED.search(text, max(0, len(text) - _MARKER_TAIL))
    return int(cut.group(1)) if cut is not None else utf8_size(text)


def truncate_utf8(text: str, max_bytes: int, whole_bytes: int | None = None) -> str:
    """``text`` in at most ``max_bytes`` UTF-8 bytes, the marker included: as much of its start
    as fits (never half a character), then ``…[truncated, N bytes]``, N the original's size.

    ``whole_bytes``: the original's size when ``text`` is only its start (the part that was
    scanned). A text this cut before is returned as it is if it fits; cut to a smaller cap it
    keeps its marker's N. (Below the marker's own size, ~30 bytes, only the marker is kept.)
    """
    if whole_bytes is None and fits(text, max_bytes):
        return text
    start = max(0, len(text) - _MARKER_TAIL)
    cut = _TRUNCATED.search(text, start)
    if cut is not None:  # cut before: its marker knows the original's size
        text, whole_bytes = text[: cut.start()], int(cut.group(1))
    elif whole_bytes is None:
        whole_bytes = utf8_size(text)
    marker = f"…[truncated, {whole_bytes} bytes]"
    budget = max(0, max_bytes - utf8_size(marker))
    # At most ``budget`` characters are at most 4 * budget bytes: only those are encoded.
    kept = text[:budget].encode("utf-8", "surrogatepass")[:budget].decode("utf-8", "ignore")
    return kept + marker


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters plus ``…[+N chars]`` (N: how many the original had
    past them), or as it is if it is no longer; a string shortened before keeps its N."""
    whole = text.whole if isinstance(text, Long) else None
    if whole is None:
        cut = _SHORTENED.search(text, max(0, len(text) - _MARKER_TAIL))
        if cut is not None:
            if cut.start() <= limit:
                return text  # shortened before, to this limit or a smaller one
            whole = cut.start() + int(cut.group(1))
            text = text[: cut.start()]
        elif len(text) <= limit:
            return text
        else:
            whole = len(text)
    return f"{text[:limit]}…[+{whole - limit} chars]"


def capped_json(value: Any, max_bytes: int) -> str:
    """``value`` (JSON types, :class:`Long` strings allowed) as JSON of at most about
    ``max_bytes``, still valid JSON when cut.

    Long strings inside are shortened (each with a marker) until the whole fits, so a reader can
    always parse what we recorded. If even that is too big (a huge list), the JSON text itself is
    cut and recorded as one JSON string, which fits.
    """
    text = json.dumps(value, ensure_ascii=False, default=str)
    if fits(text, max_bytes):
        return text
    limit = max_bytes
    while limit > _MIN_LIMIT:
        limit = max(_MIN_LIMIT, limit // 2)
        text = json.dumps(_shorten_strings(value, limit), ensure_ascii=False, default=str)
        if fits(text, max_bytes):
            return text
    return json_string_within(text, max_bytes)


def json_string_within(text: str, max_bytes: int) -> str:
    """``text`` cut and written as one JSON string of at most ``max_bytes`` bytes (escapes
    counted), so that capping it again leaves it as it is."""
    budget = max_bytes - 2  # the quotes
    while True:
        written = json.dumps(truncate_utf8(text, max(0, budget)), ensure_ascii=False)
        excess = utf8_size(written) - max_bytes
        if excess <= 0 or budget <= 0:
            return written
        budget -= excess  # escapes took more room than the characters they stand for


def _shorten_strings(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return shorten(value, limit)
    if isinstance(value, Mapping):
        return {k: _shorten_strings(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_shorten_strings(v, limit) for v in value]
    return value
