"""A canonical event of the session's stream as the attributes of its ``agenttrace.event`` span
event.

Everything about the span event follows from the event, so a session file does not store it
twice: the scope that logs the event adds it to its span with these attributes
(``agenttrace.tracing.recording``), and an export rebuilds it from the file with the same ones
(``agenttrace.views.exports``). It lives with the session format, below both, because it is a
projection of the format's events and needs nothing from either.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from agenttrace import semconv as sc
from agenttrace._internal.redact import recorded_json

if TYPE_CHECKING:  # a type only: the session format needs no OpenTelemetry to run
    from opentelemetry.util.types import AttributeValue


def span_event_attributes(
    event: Mapping[str, Any], capture_content: bool, max_payload_bytes: int
) -> dict[str, AttributeValue]:
    """A canonical event as the attributes of its span event (content, if ``capture_content``,
    capped at ``max_payload_bytes`` and redacted). The ids and names are as the event has them:
    the span event's boundary (``tracing.outbound``) scrubs them, an export's (``views.public``)
    did."""
    attributes: dict[str, AttributeValue] = {}
    for key, attribute in sc.EVENT_FIELD_ATTRIBUTES:
        value = event.get(key)
        # ids and names (scrubbed where the span event is added), a reset's ``kept``
        if isinstance(value, str) or type(value) is int:
            attributes[attribute] = value
    reused = event.get("reused")
    if isinstance(reused, list):  # a reset's pieces: ids and counts, only JSON keeps them apart
        attributes[sc.EVENT_REUSED] = json.dumps(reused, separators=(",", ":"))
    cause = event.get("cause")
    if isinstance(cause, list):  # a piece of text compiled from several messages
        attributes[sc.EVENT_CAUSE] = [str(c) for c in cause]
    if capture_content:
        content = event.get("content")
        if isinstance(content, str):
            attributes[sc.EVENT_CONTENT] = recorded_json(content, max_payload_bytes)[1]
        calls = event.get("tool_calls")
        if calls:
            attributes[sc.EVENT_TOOL_CALLS] = recorded_json(calls, max_payload_bytes)[1]
    elif isinstance(event.get("content"), str):
        attributes[sc.EVENT_CONTENT_CHARS] = len(event["content"])
    return attributes
