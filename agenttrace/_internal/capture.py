"""What content goes to each output: decided here, once.

Content is what was said: an LLM attempt's input and output messages, a tool call's arguments
and result, the text and tool calls of a canonical event, the user's input to an exchange. It
is recorded once where it is made (as redacted, capped text: ``redact.recorded_json``), and
each output asks :func:`captures` whether it carries that text, as OpenTelemetry's GenAI
utilities ask ``get_content_attributes``:

========================  ======================================================================
output                    content
========================  ======================================================================
span attributes           with ``capture_content`` (``AGENTTRACE_CAPTURE_CONTENT``, or the GenAI
                          conventions' ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``:
                          ``true``, ``SPAN_ONLY``, ``SPAN_AND_EVENT``); else its size only
span events               the same rule as span attributes (an ``agenttrace.event``'s content
                          and tool calls; else the content's length)
log records               with ``content_events`` (``EVENT_ONLY``, ``SPAN_AND_EVENT``): the
                          ``gen_ai.client.inference.operation.details`` event's messages
opTree nodes              always (the session file's ops keep their payloads, redacted, capped)
console                   with ``console="trace"`` (the bodies, capped again to the line's cap)
event stream              always and verbatim: the stream and the session file's events are the
                          agent's saved state (``redacted_save`` scrubs them on the way out)
========================  ======================================================================

Redaction is not decided here: it is applied at each output's boundary (docs/architecture.md,
"Content and redaction").
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TypeVar

from agenttrace._internal.config import Settings

T = TypeVar("T")


class Output(enum.Enum):
    """Where recorded content can go."""

    SPAN = "span attributes"
    SPAN_EVENT = "span events"
    LOG = "log records"
    OPTREE = "opTree nodes"
    CONSOLE = "console"
    STREAM = "event stream"


def captures(output: Output, settings: Settings) -> bool:
    """Whether content goes to ``output`` under ``settings`` (the one rule: see the table)."""
    if output is Output.SPAN or output is Output.SPAN_EVENT:
        return settings.capture_content
    if output is Output.LOG:
        return settings.content_events
    if output is Output.CONSOLE:
        return settings.console == "trace"
    return True  # the opTree and the stream: the saved state keeps what was said


def content_attributes(
    output: Output, contents: Mapping[str, T], settings: Settings
) -> dict[str, T]:
    """The part of ``contents`` (recorded content by attribute name) that goes to ``output``:
    all of it or none."""
    return dict(contents) if captures(output, settings) else {}
