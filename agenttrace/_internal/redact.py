"""Secret redaction and size caps for everything that leaves the process.

One policy: values under keys that name a secret (``api_key``, ``Authorization``, ``x-api-key``,
``password``, ``token``, ...) are replaced, ordinary words such as ``session`` or ``max_tokens``
are left alone, and secret values agenttrace has seen (an ``api_key`` passed to litellm, a
credential in the environment) are scrubbed from any text, wherever they appear.
"""

from __future__ import annotations

import functools
import json
import os
import re
import threading
from collections.abc import Mapping
from typing import Any

REDACTED = "[REDACTED]"
MIN_SECRET_LENGTH = 8
"""Shorter values are not scrubbed from free text: they would eat ordinary words."""

_SECRET_WORDS = (
    r"api[-_]?key|apikey|authorization|auth|password|passwd|passphrase|secret|"
    r"client[-_]secret|token|access[-_]?token|refresh[-_]?token|id[-_]?token|auth[-_]?token|"
    r"session[-_]?token|bearer|credentials?|private[-_]?key|secret[-_]?key|access[-_]?key|"
    r"signature|cookie|set[-_]cookie"
)
_SECRET_KEY = re.compile(rf"(?:^|[^a-z0-9])(?:{_SECRET_WORDS})$", re.IGNORECASE)
# A "key": "value" pair in JSON text whose key names a secret, also inside an escaped JSON
# string (\"password\": \"x\"), e.g. tool-call arguments inside a message.
_JSON_SECRET_PAIR = re.compile(
    rf'(\\*")((?:[A-Za-z0-9_.\-]*[_.\-])?(?:{_SECRET_WORDS}))\1(\s*:\s*)\1((?:(?!\1).)*)\1',
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")
_KEY_SHAPES = re.compile(
    r"\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}|xox[abpr]-[A-Za-z0-9-]{10,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|AKIA[0-9A-Z]{16})"
)

# Cheap tests that decide which of the (slower) patterns above can match at all.
_JSON_KEY = re.compile(r'"([A-Za-z0-9_.\-]{1,64})\\?"\s*:')
_MARKS = re.compile(r"sk-|xox|AKIA|gh[pousr]_|[Bb]earer|BEARER|[Bb]asic |BASIC ")


@functools.lru_cache(maxsize=4096)
def is_secret_key(key: str) -> bool:
    """True if a mapping key names a credential (``x-api-key``) rather than data (``session``)."""
    return bool(_SECRET_KEY.search(key))


class _SecretValues:
    """Secret strings seen at run time, scrubbed from all recorded text."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: frozenset[str] = frozenset()
        self._pattern: re.Pattern[str] | None = None

    def add(self, value: object) -> None:
        if not isinstance(value, str) or len(value) < MIN_SECRET_LENGTH or value in self._values:
            return
        with self._lock:
            values = self._values | {value}
            # Longest first, so a key that contains another is replaced whole.
            alternatives = "|".join(re.escape(v) for v in sorted(values, key=len, reverse=True))
            self._pattern = re.compile(alternatives)
            self._values = values

    def scrub(self, text: str) -> str:
        pattern = self._pattern
        if pattern is not None:
            for value in self._values:
                if value in text:  # substring tests are far cheaper than the regex
                    return pattern.sub(REDACTED, text)
        return text

    def clear(self) -> None:
        with self._lock:
            self._values = frozenset()
            self._pattern = None


secret_values = _SecretValues()


def remember_secret(value: object) -> None:
    """Register a secret value (an API key, a header value) so it is scrubbed from any output."""
    secret_values.add(value)


def remember_environment_secrets(environ: Mapping[str, str] | None = None) -> None:
    """Register the values of environment variables whose names say they hold a credential."""
    for name, value in (os.environ if environ is None else environ).items():
        if is_secret_key(name.lower()):
            secret_values.add(value)


def scrub_text(text: str) -> str:
    """Replace known secret values, bearer credentials and API-key-shaped tokens in ``text``."""
    text = secret_values.scrub(text)
    if _MARKS.search(text) is not None:
        text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
        text = _KEY_SHAPES.sub(REDACTED, text)
    return text


def scrub_json_text(text: str) -> str:
    """:func:`scrub_text` for JSON: also replaces the values of secret-named keys in it."""
    text = scrub_text(text)
    for key in _JSON_KEY.findall(text):
        if is_secret_key(key):
            return _JSON_SECRET_PAIR.sub(rf"\1\2\1\3\1{REDACTED}\1", text)
    return text


_RECORDED = json.JSONEncoder(ensure_ascii=False, default=lambda value: jsonable(value))
"""One encoder for every recorded value: ``json.dumps`` with options builds a new one per call."""


def recorded_json(value: Any, max_bytes: int) -> tuple[int, str]:
    """``value`` as JSON: (its length in characters, the text to record: redacted and capped).

    The fast path serialises once and redacts the text; only an over-long value is walked
    again to shorten its strings so that the recorded text stays valid JSON.
    """
    text = value if isinstance(value, str) else _RECORDED.encode(value)
    length = len(text)
    clean = scrub_json_text(text)
    if len(clean) > max_bytes // 4 and len(clean.encode("utf-8")) > max_bytes:
        if isinstance(value, str):
            return length, truncate_utf8(clean, max_bytes)
        clean = capped_json(json.loads(clean), max_bytes)
    return length, clean


def jsonable(value: Any) -> Any:
    """``json.dumps`` default: pydantic models and plain objects as dicts, anything else as str."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return dump(exclude_none=True)
        except Exception:  # not pydantic after all
            pass
    if hasattr(value, "__dict__"):
        return {k: v for k, v in vars(value).items() if not k.startswith("_")}
    return str(value)


def redact(value: Any) -> Any:
    """A copy of ``value`` (dicts, lists, strings) with secrets replaced; other values as is.

    Strings are scrubbed as JSON too: tool-call arguments travel as JSON inside strings.
    """
    if isinstance(value, str):
        return scrub_json_text(value)
    if isinstance(value, Mapping):
        return {
            k: (REDACTED if isinstance(k, str) and is_secret_key(k) and v else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value


def truncate_utf8(text: str, max_bytes: int) -> str:
    """``text`` cut to at most ``max_bytes`` UTF-8 bytes (plus a marker saying how long it was)."""
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= max_bytes:
        return text
    kept = encoded[:max_bytes].decode("utf-8", "ignore")
    return f"{kept}…[truncated, {len(encoded)} bytes]"


def capped_json(value: Any, max_bytes: int) -> str:
    """``value`` as JSON of at most about ``max_bytes``, still valid JSON when cut.

    Long strings inside are shortened (each with a marker) until the whole fits, so a reader
    can always parse what we recorded.
    """
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= max_bytes // 4 or len(text.encode("utf-8")) <= max_bytes:
        return text
    limit = max_bytes
    while limit > 16:
        limit //= 2
        shortened = _shorten_strings(value, limit)
        text = json.dumps(shortened, ensure_ascii=False, default=str)
        if len(text.encode("utf-8")) <= max_bytes:
            return text
    return json.dumps(truncate_utf8(text, max_bytes), ensure_ascii=False)


def _shorten_strings(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= limit else f"{value[:limit]}…[+{len(value) - limit} chars]"
    if isinstance(value, Mapping):
        return {k: _shorten_strings(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_shorten_strings(v, limit) for v in value]
    return value


def redacted_copy(value: Any, max_bytes: int | None = None) -> Any:
    """:func:`redact` for exported data: also caps each long string at ``max_bytes``."""
    clean = redact(value)
    if max_bytes is None:
        return clean
    return _cap_strings(clean, max_bytes)


def _cap_strings(value: Any, max_bytes: int) -> Any:
    if isinstance(value, str):
        return truncate_utf8(value, max_bytes)
    if isinstance(value, Mapping):
        return {k: _cap_strings(v, max_bytes) for k, v in value.items()}
    if isinstance(value, list):
        return [_cap_strings(v, max_bytes) for v in value]
    return value
