"""The boundary of what a scope sends out: the redaction policy and the size cap, applied once.

Everything a scope puts on its span (its name, attributes, span events, status) passes here,
and the lifecycle records carry the same values, so the opTree, the session file's ops, the
ledger and the console get what the span got. Each string is capped
(:func:`~agenttrace._internal.redact.cap_text`) and scrubbed of secrets
(:func:`~agenttrace._internal.redact.scrub_json_text`; short ones through
:func:`~agenttrace._internal.redact.scrub_short`, since names, labels and ids recur). The only
exception is recorded content (:data:`RECORDED_CONTENT`): it was serialised, capped and
scrubbed once where it was made (``recorded_json``), for every output it goes to, and is only
capped here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agenttrace import semconv as sc
from agenttrace._internal.caps import fits
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


def outbound_text(text: str, max_bytes: int) -> str:
    """``text`` as it may leave the process: scrubbed, in at most ``max_bytes`` UTF-8 bytes."""
    if len(text) <= SHORT_TEXT and fits(text, max_bytes):
        return scrub_short(text)
    return cap_text(text, max_bytes, scrub_json_text)


def outbound_value(key: str | None, value: Any, max_bytes: int) -> Any:
    """An attribute's value (or, with ``key`` ``None``, a span's name) as it may leave the
    process: each string :func:`outbound_text`, recorded content only capped; other values as
    they are."""
    if isinstance(value, str):
        if key in RECORDED_CONTENT:
            return value if fits(value, max_bytes) else cap_text(value, max_bytes, _as_is)
        return outbound_text(value, max_bytes)
    if isinstance(value, (list, tuple)) and any(isinstance(item, str) for item in value):
        return [
            outbound_value(key, item, max_bytes) if isinstance(item, str) else item
            for item in value
        ]
    return value


def outbound_attributes(attributes: Mapping[str, Any], max_bytes: int) -> dict[str, Any]:
    """Span or span event attributes, each value :func:`outbound_value` (a new dict)."""
    return {key: outbound_value(key, value, max_bytes) for key, value in attributes.items()}


def _as_is(text: str) -> str:
    return text
