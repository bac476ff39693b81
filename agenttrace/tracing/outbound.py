"""The boundary of what a scope sends out: the redaction policy and the size cap, applied once.

Everything a scope puts on its span (its name, attributes, span events, status) passes here,
and the lifecycle records carry the same values, so the opTree, the session file's ops, the
ledger and the console get what the span got. Each string is capped
(:func:`~agenttrace._internal.redact.cap_text`) and scrubbed of secrets
(:func:`~agenttrace._internal.redact.scrub_json_text`; short ones through
:func:`~agenttrace._internal.redact.scrub_short`, since names and ids recur). Two kinds of
value are only capped: recorded content (:data:`RECORDED_CONTENT`), serialised, capped and
scrubbed once where it was made (``recorded_json``) for every output it goes to, and the values
agenttrace makes itself (:data:`MADE_HERE`: path labels, txn ids, kinds).
"""

from __future__ import annotations

from typing import Any

from agenttrace import semconv as sc
from agenttrace._internal.caps import fits
from agenttrace._internal.masking import ID_MARK, is_id_key, masking
from agenttrace._internal.redact import (
    SHORT_TEXT,
    cap_text,
    scrub_json_text,
    scrub_short,
)

RECORDED_CONTENT = frozenset(
    {
        sc.GEN_AI_INPUT_MESSAGES,
        sc.GEN_AI_OUTPUT_MESSAGES,
        sc.GEN_AI_TOOL_CALL_ARGUMENTS,
        sc.GEN_AI_TOOL_CALL_RESULT,
        sc.EVENT_CONTENT,
        sc.EVENT_TOOL_CALLS,
        sc.LOG_DETAILS,
    }
)
"""Attributes whose text is recorded content: ``recorded_json`` made it (serialised, capped,
scrubbed), so scanning it again would change nothing and cost as much as the first time."""

MADE_HERE = frozenset(
    {
        sc.PATH,
        sc.TXN_ID,
        sc.TXN_ORIGIN,
        sc.TXN_PARENT,
        sc.KIND,
        sc.GEN_AI_OPERATION_NAME,
        sc.OPENINFERENCE_SPAN_KIND,
    }
)
"""Attributes whose values agenttrace makes from counters, random ids and its own constants
(path labels, txn ids, kinds): nothing of the user's is in them to scrub."""

_ONLY_CAPPED = RECORDED_CONTENT | MADE_HERE


def outbound_text(text: str, max_bytes: int) -> str:
    """``text`` as it may leave the process: scrubbed, in at most ``max_bytes`` UTF-8 bytes."""
    if len(text) <= SHORT_TEXT and fits(text, max_bytes):
        clean = scrub_short(text)
        if fits(clean, max_bytes):  # a replacement can make a text longer
            return clean
    return cap_text(text, max_bytes, scrub_json_text)


def outbound_value(key: str | None, value: Any, max_bytes: int) -> Any:
    """An attribute's value (or, with ``key`` ``None``, a span's name) as it may leave the
    process: each string :func:`outbound_text`, except under :data:`RECORDED_CONTENT` and
    :data:`MADE_HERE`, which are only capped; other values as they are."""
    if isinstance(value, str):
        if key in _ONLY_CAPPED:
            return value if fits(value, max_bytes) else cap_text(value, max_bytes, _as_is)
        return outbound_text(value, max_bytes)
    if isinstance(value, (list, tuple)) and any(isinstance(item, str) for item in value):
        return [
            outbound_value(key, item, max_bytes) if isinstance(item, str) else item
            for item in value
        ]
    return value


def outbound_attributes(attributes: dict[str, Any], max_bytes: int) -> dict[str, Any]:
    """Span or span event attributes, each value :func:`outbound_value`; ``attributes`` itself
    when that changes nothing (the common case costs a look-up per string)."""
    short = min(SHORT_TEXT, max_bytes // 4)  # text this short fits the cap: no measuring
    changed: dict[str, Any] | None = None
    masked = masking()
    for key, value in attributes.items():
        if masked and type(value) is str and is_id_key(key):
            clean = ID_MARK  # gen_ai.response.id: the provider's id, whatever its shape
        elif type(value) is str and len(value) <= short:  # the common case, inlined
            if key in _ONLY_CAPPED:
                continue
            clean = scrub_short(value)
            if len(clean) > short:
                clean = outbound_text(value, max_bytes)
        elif isinstance(value, (str, list, tuple)):
            clean = outbound_value(key, value, max_bytes)
        else:
            continue
        if clean is not value and clean != value:
            if changed is None:
                changed = dict(attributes)
            changed[key] = clean
    return attributes if changed is None else changed


def _as_is(text: str) -> str:
    return text
