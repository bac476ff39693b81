"""The redaction policy for everything that leaves the process, and its size caps.

What is replaced by ``[REDACTED]``:

- values under keys that name a secret (``api_key``, ``Authorization``, ``x-api-key``,
  ``password``, ``token``, ...), in mappings and in JSON text, JSON inside strings included
  (tool-call arguments); ordinary words such as ``session`` or ``max_tokens`` are left alone;
- secret values agenttrace has seen (an ``api_key`` passed to litellm, a credential in the
  environment), wherever they appear, and bearer credentials and API-key-shaped tokens;
- in every URL in any text (an ``api_base``, an error message, a tool's arguments or result):
  query and fragment parameters that carry a credential (``key``, ``api_key``, ``token``,
  ``sig``, ``signature``, ``X-Amz-Signature``, ``access_token``, ``password``, ... in any case)
  and the userinfo of ``scheme://user:password@host`` (all of it: a token is often the "user").

Cap, then scan: a value over the cap is first cut to its *window*, the cap plus
:data:`SCAN_MARGIN` characters, and only the window is scanned, so a 20 MB tool result costs what
cutting it costs. The margin means a secret that the final cut goes through was seen whole (and
replaced) before the cut. Caps are idempotent (:mod:`agenttrace._internal.caps`), and so is the
scrubbing: an export or a console line made from recorded text leaves it as it is.

Where it applies: at the boundary of each output (docs/architecture.md, "Content and
redaction"): what a scope sends out (``agenttrace.tracing.outbound``: span attributes, events,
status, and the records that feed the opTree, the ledger and the console), the console's line
writer, the views and exports (:mod:`agenttrace.views.public`); content once, where it is
recorded (:func:`recorded_json`). The event stream and the session file's events are the
agent's saved state: they keep transcript content verbatim unless ``redacted_save`` is on,
which runs :func:`scrub_json_text` over each line (:func:`saved_line`).

With ``mask_sensitive`` on (:mod:`agenttrace._internal.masking`), the policy also masks IP
addresses and provider request ids, and the saved state is masked too, redacted or not.
"""

from __future__ import annotations

import functools
import json
import os
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

from agenttrace._internal.caps import Long, capped_json, fits, original_size, truncate_utf8
from agenttrace._internal.masking import ID_MARK, is_id_key, mask_text, masking

REDACTED = "[REDACTED]"
MIN_SECRET_LENGTH = 8
"""Shorter values are not scrubbed from free text: they would eat ordinary words."""
SCAN_MARGIN = 4096
"""Characters scanned past a cap, so that a secret the cut goes through is replaced whole."""

_SECRET_WORDS = (
    r"api[-_]?key|apikey|authorization|auth|password|passwd|passphrase|secret|"
    r"client[-_]secret|token|access[-_]?token|refresh[-_]?token|id[-_]?token|auth[-_]?token|"
    r"session[-_]?token|bearer|credentials?|private[-_]?key|secret[-_]?key|access[-_]?key|"
    r"signature|cookie|set[-_]cookie"
)
_SECRET_KEY = re.compile(rf"(?:^|[^a-z0-9])(?:{_SECRET_WORDS})$", re.IGNORECASE)
# The start of a "key": "value" pair in JSON text whose key names a secret, also inside an
# escaped JSON string (\"password\": \"x\"), e.g. tool-call arguments inside a message; where
# its value ends is found by _string_end.
_JSON_SECRET_PAIR = re.compile(
    rf'(\\*")(?:[A-Za-z0-9_.\-]*[_.\-])?(?:{_SECRET_WORDS})\1\s*:\s*\1',
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")
_KEY_SHAPES = re.compile(
    r"\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}|xox[abpr]-[A-Za-z0-9-]{10,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|AKIA[0-9A-Z]{16})"
)

# Cheap tests that decide which of the (slower) patterns above can match at all.
# A key in JSON text, at any depth of JSON inside JSON strings (backslashes before its quote).
_JSON_KEY = re.compile(r'"([A-Za-z0-9_.\-]{1,64})\\*"\s*:')
_MARKS = (
    *("sk-", "xox", "AKIA", "ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    *("Bearer", "bearer", "BEARER", "Basic ", "basic ", "BASIC "),
)
"""Substrings one of which the bearer and key-shape patterns need (a few ``in`` tests are faster
than a regular expression with alternatives)."""
_SHORTEST_SHAPE = 14
"""No text shorter than this matches the bearer or key-shape patterns (``basic`` and a space
before 8 characters is the shortest), so ids and names skip the test for their marks."""

# --- credentials in URLs ---------------------------------------------------------------------
# Characters that cannot stand unescaped in a URL's query (RFC 3986), and its delimiters, end a
# parameter's value; ``[`` among them, so ``[REDACTED]`` is never redacted again, and the cut
# marker's ``…``. A quote (') does not: a password may hold one, and eating a closing quote
# is better than leaving the rest of a password.
_URL_VALUE_END = r"\s&#\"<>\\\[\]{}|^`…"
_URL_SECRET_NAMES = r"key|sig|jwt|pwd|pass|authkey|subscription-key"
"""Whole parameter names that carry a credential in URLs though they are not secret-named keys
elsewhere (Google's ``?key=``, Azure SAS's ``sig``); the secret words name the rest."""
# A credential-carrying parameter's name after ``?``, ``&`` or ``#`` (also as written in HTML,
# ``&amp;``, or escaped in JSON, ``\u0026``): a secret word ending the name, as for keys, or
# one of the names above. Only names are matched, values are found after, so a URL inside
# another parameter's value (``?next=https://x/?key=...``) is found too.
_URL_PARAM = re.compile(
    rf"(?:[?&#]|&amp;|\\u0026)"
    rf"(?:(?:[A-Za-z0-9_.\-]*[_.\-])?(?:{_SECRET_WORDS})|{_URL_SECRET_NAMES})=",
    re.IGNORECASE,
)
_URL_VALUE = re.compile(rf"[^{_URL_VALUE_END}]*")
_URL_PARAM_HINTS = tuple(
    f"{word}="
    for word in (
        *("key", "auth", "authorization", "password", "passwd", "passphrase", "secret", "token"),
        *("bearer", "credential", "credentials", "signature", "cookie", "sig", "jwt", "pwd"),
        "pass",
    )
)
"""How every name :data:`_URL_PARAM` matches ends, lower-cased: text with none of them (most
text, even with many URLs) is not scanned for parameters at all."""
# ``://userinfo@``: the userinfo holds no ``/?#@`` (RFC 3986) and, here, no space, quote or
# bracket, so it never reaches past the host or into ``[REDACTED]``.
_URL_USERINFO = re.compile(r"://[^\s/?#@\"'<>\\\[\]{}|^`]{1,1024}@")
# The start of a "key": "value" pair whose key names a request id (masking), as above.
_JSON_ID_PAIR = re.compile(
    r'(\\*")(?:x-)?(?:[A-Za-z]+-)?(?:request[-_]?id|requestid)\1\s*:\s*\1'
    r'|(\\*")(?:x-amzn-requestid|gen_ai\.response\.id)\2\s*:\s*\2',
    re.IGNORECASE,
)


@functools.lru_cache(maxsize=4096)
def is_secret_key(key: str) -> bool:
    """True if a mapping key names a credential (``x-api-key``) rather than data (``session``)."""
    return bool(_SECRET_KEY.search(key))


def scrub_urls(text: str) -> str:
    """``text`` with the credentials in its URLs replaced: the values of credential-carrying
    query and fragment parameters, and any ``user:password@`` (other parameters are kept)."""
    if "=" in text:
        lowered = text.lower()
        if any(hint in lowered for hint in _URL_PARAM_HINTS):
            text = _scrub_parameters(text)
    if "://" in text:
        text = _URL_USERINFO.sub(f"://{REDACTED}@", text)
    return text


def _scrub_parameters(text: str) -> str:
    return _replace_values(text, _URL_PARAM, _url_value_end)


def _url_value_end(text: str, match: re.Match[str]) -> int | None:
    value = _URL_VALUE.match(text, match.end())
    return value.end() if value is not None else None


def _replace_values(
    text: str,
    names: re.Pattern[str],
    value_end: Callable[[str, re.Match[str]], int | None],
    mark: str = REDACTED,
) -> str:
    """``text`` with the value after each match of ``names`` replaced by ``mark``; the
    value ends where ``value_end`` says (``None``, or an empty value: nothing to replace)."""
    pieces: list[str] = []
    done = 0
    for match in names.finditer(text):
        if match.start() < done:
            continue  # inside a value just replaced
        end = value_end(text, match)
        if end is not None and end > match.end():  # "" is no secret
            pieces += (text[done : match.end()], mark)
            done = end
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


# --- secret values seen at run time -------------------------------------------------------------


class _SecretValues:
    """Secret strings seen at run time, scrubbed from all recorded text."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: frozenset[str] = frozenset()
        self._pattern: re.Pattern[str] | None = None
        self.generation = 0
        """Counts the changes to the values, so text scrubbed before one is not reused."""

    def add(self, value: object) -> None:
        if not isinstance(value, str) or len(value) < MIN_SECRET_LENGTH or value in self._values:
            return
        with self._lock:
            values = self._values | {value}
            # Longest first, so a key that contains another is replaced whole.
            alternatives = "|".join(re.escape(v) for v in sorted(values, key=len, reverse=True))
            self._pattern = re.compile(alternatives)
            self._values = values
            self.generation += 1

    def scrub(self, text: str) -> str:
        pattern = self._pattern
        if pattern is not None and len(text) >= MIN_SECRET_LENGTH:  # else none fits in it
            for value in self._values:
                if value in text:  # substring tests are far cheaper than the regex
                    return pattern.sub(REDACTED, text)
        return text

    def clear(self) -> None:
        with self._lock:
            self._values = frozenset()
            self._pattern = None
            self.generation += 1


secret_values = _SecretValues()


def remember_secret(value: object) -> None:
    """Register a secret value (an API key, a header value) so it is scrubbed from any output."""
    secret_values.add(value)


def remember_environment_secrets(environ: Mapping[str, str] | None = None) -> None:
    """Register the values of environment variables whose names say they hold a credential."""
    for name, value in (os.environ if environ is None else environ).items():
        if is_secret_key(name.lower()):
            secret_values.add(value)


# --- scanning ----------------------------------------------------------------------------------


def scrub_text(text: str) -> str:
    """Replace known secret values, bearer credentials, API-key-shaped tokens and credentials
    in URLs in ``text`` (all of it: see :func:`cap_text` for text that may be long)."""
    text = secret_values.scrub(text)
    # Short text (ids, names) cannot hold a mark's pattern; map: no Python frame per mark.
    if len(text) >= _SHORTEST_SHAPE and any(map(text.__contains__, _MARKS)):
        text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
        text = _KEY_SHAPES.sub(REDACTED, text)
    text = scrub_urls(text)
    return mask_text(text) if masking() else text


def scrub_json_text(text: str) -> str:
    """:func:`scrub_text` for JSON: also replaces the values of secret-named keys in it."""
    text = scrub_text(text)
    if '"' in text:  # no quote, no key
        keys = _JSON_KEY.findall(text)
        if any(map(is_secret_key, keys)):
            text = _scrub_secret_pairs(text)
        if masking() and any(map(is_id_key, keys)):
            text = _replace_values(text, _JSON_ID_PAIR, _json_value_end, ID_MARK)
    return text


def mask_json_text(text: str) -> str:
    """JSON text with its IP addresses and provider ids masked, and the values of its
    request-id keys (:mod:`agenttrace._internal.masking`), whatever the setting says."""
    text = mask_text(text)
    if '"' in text and any(map(is_id_key, _JSON_KEY.findall(text))):
        text = _replace_values(text, _JSON_ID_PAIR, _json_value_end, ID_MARK)
    return text


def saved_line(line: bytes, redacted: bool) -> bytes:
    """A line of the saved state (event stream, session file) as it is written: scrubbed with
    ``redacted_save``, masked with ``mask_sensitive``, else as it is."""
    if redacted:
        return scrub_json_text(line.decode()).encode()
    if masking():
        return mask_json_text(line.decode()).encode()
    return line


SHORT_TEXT = 256
"""Text up to this many characters is scrubbed through :func:`scrub_short`'s memory."""


def scrub_short(text: str) -> str:
    """:func:`scrub_json_text` of a short text (at most :data:`SHORT_TEXT` characters),
    remembered: names and ids recur on every span. What was scrubbed before a secret was
    remembered is not reused after (an entry is keyed by the secrets' generation it was made
    in)."""
    # read first: the scrub may see newer values only; masking changes the text as a secret does
    return _scrub_short(text, secret_values.generation, masking())


_SHORT_MEMORY = 4096


@functools.lru_cache(maxsize=_SHORT_MEMORY)
def _scrub_short(text: str, generation: int, masked: bool) -> str:
    # Least recently used out, rather than all at once: texts made up per call (a prompt, an
    # index) pass through while the names and ids that recur stay, and the memory stays full
    # at its bound instead of rising and falling.
    del generation, masked  # the key only
    return scrub_json_text(text)


def _scrub_secret_pairs(text: str) -> str:
    return _replace_values(text, _JSON_SECRET_PAIR, _json_value_end)


def _json_value_end(text: str, match: re.Match[str]) -> int | None:
    # group 1 (or 2): the quote that opens the value, with the backslashes of its JSON depth
    quote = match.group(1) or match.group(match.lastindex or 1)
    return _string_end(text, match.end(), len(quote) - 1)


def _string_end(text: str, start: int, depth: int) -> int | None:
    """Where the content of a JSON string that starts at ``start`` ends (where its closing
    quote's backslashes begin), or None if it does not. ``depth``: the backslashes before each
    of the string's own quotes (0 in JSON, 1 in JSON inside a JSON string, 3 a level deeper).

    A quote closes it when the backslashes before it are ``depth`` modulo ``2 * (depth + 1)``.
    More are a quote inside it (``\\"`` in JSON); a count that ``depth + 1`` does not divide
    closes a string it is inside of, so this one never ends there.
    """
    period = 2 * (depth + 1)
    quote = text.find('"', start)
    while quote != -1:
        slashes = 0
        while quote - slashes > start and text[quote - slashes - 1] == "\\":
            slashes += 1
        if (slashes + 1) % (depth + 1):
            return None
        if slashes % period == depth:
            return quote - depth
        quote = text.find('"', quote + 1)
    return None


# --- cap, then scan ----------------------------------------------------------------------------


def cap_text(text: str, max_bytes: int, scrub: Callable[[str], str] = scrub_json_text) -> str:
    """``text`` as it may leave the process: scrubbed, in at most ``max_bytes`` UTF-8 bytes.

    Capped before it is scanned: over the cap, only its window (the cap plus
    :data:`SCAN_MARGIN` characters) is scrubbed, then cut to the cap with a marker that gives
    the whole text's size. Recorded text capped again comes back unchanged.
    """
    if fits(text, max_bytes):
        clean = scrub(text)
        return clean if fits(clean, max_bytes) else truncate_utf8(clean, max_bytes)
    window = text[: max_bytes + SCAN_MARGIN]
    clean = scrub(window)
    if len(window) == len(text) and fits(clean, max_bytes):
        return clean  # a secret replaced was what made it too big
    return truncate_utf8(clean, max_bytes, original_size(text))


_RECORDED = json.JSONEncoder(ensure_ascii=False, default=lambda value: jsonable(value))
"""One encoder for every recorded value: ``json.dumps`` with options builds a new one per call."""


def recorded_json(value: Any, max_bytes: int) -> tuple[int, str]:
    """``value`` as JSON: (its length in characters, the text to record: redacted and capped).

    A string is recorded as it is (:func:`cap_text`). Anything else is serialised once (its
    length is the op's ``characters`` figure); if that fits the cap the text is scrubbed, else
    the value is walked, each long string cut to its window before it is scanned, and recorded
    as capped JSON (:func:`~agenttrace._internal.caps.capped_json`), which stays valid JSON.
    """
    if isinstance(value, str):
        return len(value), cap_text(value, max_bytes)
    text = _RECORDED.encode(value)
    if fits(text, max_bytes):
        clean = scrub_json_text(text)
        if fits(clean, max_bytes):
            return len(text), clean
    window = max_bytes + SCAN_MARGIN

    def windowed(string: str) -> str:
        if len(string) > window:
            return Long(scrub_json_text(string[:window]), len(string))
        return scrub_json_text(string)

    return len(text), capped_json(_redacted(value, windowed, as_json=True), max_bytes)


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

    Strings are scrubbed as JSON too: tool-call arguments travel as JSON inside strings. Every
    string is scanned whole: for what leaves the process use :func:`redacted_copy` with a cap.
    """
    return _redacted(value, scrub_json_text, as_json=False)


def redacted_copy(value: Any, max_bytes: int | None = None) -> Any:
    """:func:`redact` for what leaves the process: each string also capped at ``max_bytes``
    (:func:`cap_text`: cut first, so only what is kept is scanned)."""
    if max_bytes is None:
        return redact(value)
    limit = max_bytes
    return _redacted(value, lambda text: cap_text(text, limit), as_json=False)


def _redacted(value: Any, clean: Callable[[str], str], as_json: bool) -> Any:
    """``value`` with ``clean`` applied to each string and secret-named keys' values replaced;
    ``as_json``: other objects as the recorded JSON has them (:func:`jsonable`)."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, Mapping):
        masked = masking()
        return {
            key: (
                REDACTED
                if isinstance(key, str) and is_secret_key(key) and item
                else ID_MARK
                if masked and isinstance(key, str) and isinstance(item, str) and is_id_key(key)
                else _redacted(item, clean, as_json)
            )
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_redacted(item, clean, as_json) for item in value]
    if as_json and not (value is None or isinstance(value, (bool, int, float))):
        return _redacted(jsonable(value), clean, as_json)
    return value
