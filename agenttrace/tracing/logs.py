"""Logs and reasoning, attached to the op that is running: span events with their path.

The levels: ``VRB`` (verbose), ``WRN``, ``ERR``, ``TRC`` (trace), ``THK`` (thinking),
``FIN`` (final). Reasoning chunks are their own events, so a viewer can rebuild the thinking
text without parsing log lines. Both are kept in the opTree (docs/session-file.md).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace._internal.checks import refuse
from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.redact import recorded_json
from agenttrace._internal.runtime import runtime
from agenttrace.formats.session.schema import LOG_SOURCE_AGENTTRACE
from agenttrace.model.lifecycle import Logged, ReasoningParts
from agenttrace.tracing.outbound import outbound_attributes, outbound_text
from agenttrace.tracing.recording import emit
from agenttrace.tracing.scopes import Scope, current_scope


def log(level: str, message: str, **details: Any) -> None:
    """Attach a log line to the current agenttrace span (op, turn or agent run).

    ``level`` is one of ``VRB WRN ERR TRC THK FIN`` (in any case), and ``message`` a string:
    anything else is a ``TypeError`` or ``ValueError`` here, with agenttrace disabled too. The
    message is capped and redacted, ``details`` are recorded as JSON (redacted, capped). WRN and
    ERR lines also go to the console at once. Outside any agenttrace span, or with agenttrace
    disabled, this does nothing.
    """
    level = _level(level)
    if not isinstance(message, str):
        refuse("agenttrace.log", "message", message, "a string")
    if runtime.disabled:
        return
    try:
        cap = runtime.settings.max_payload_bytes
        attributes: dict[str, AttributeValue] = {
            sc.LOG_LEVEL: level,
            sc.LOG_MESSAGE: str(message),
        }
        if details:
            attributes[sc.LOG_DETAILS] = recorded_json(details, cap)[1]
        _emit(sc.EVENT_LOG, attributes)
    except Exception as exc:
        report_internal_error("log", exc)


def _level(level: object) -> str:
    """``level`` in capitals, if it is one of ``sc.LEVELS`` (a misspelt one would be lost)."""
    if not isinstance(level, str):
        refuse("agenttrace.log", "level", level, f"one of {' '.join(sc.LEVELS)}")
    upper = level.upper()
    if upper not in sc.LEVELS:
        refuse("agenttrace.log", "level", level, f"one of {' '.join(sc.LEVELS)}", ValueError)
    return upper


def thinking(text: str) -> None:
    """Record one chunk of the model's reasoning on the current span (a ``THK`` event);
    ``text`` is a string (else a ``TypeError``)."""
    if not isinstance(text, str):
        refuse("agenttrace.thinking", "text", text, "a string")
    if runtime.disabled:
        return
    try:
        record_reasoning(current_scope(), text)
    except Exception as exc:
        report_internal_error("thinking", exc)


def record_reasoning(
    scope: Scope | None,
    text: str = "",
    *,
    chunks: Sequence[tuple[str, int]] | None = None,
    final: str | None = None,
) -> None:
    """Reasoning on ``scope`` (an LLM attempt whose response carried it): ``text`` as one chunk,
    or ``chunks`` as they came (``(text, time in ns)``: a stream's deltas), and ``final``, the
    provider's summary of it. The opTree's ``reasoning`` keeps them whole, redacted, bounded
    only by ``max_reasoning_bytes``; the span event and the ``THK`` console line get their text
    (the summary when there are no chunks), capped like content."""
    if scope is None:
        scope = current_scope()
    if scope is None:
        return
    now = time.time_ns()
    arrived = list(chunks) if chunks is not None else [(str(text), now)]
    bound = runtime.settings.max_reasoning_bytes
    kept = saved_chunks(arrived, bound)
    summary = outbound_text(final, bound) if final else None
    shown = "".join(part for part, _ in kept) or summary or ""
    attributes: dict[str, AttributeValue] = {sc.REASONING_TEXT: shown, sc.PATH: scope.label}
    # Already scrubbed: only the span's cap is applied to it (scrubbing again changes nothing).
    attributes = outbound_attributes(attributes, runtime.settings.max_payload_bytes)
    span = scope.span
    if span.is_recording():
        span.add_event(sc.EVENT_REASONING, attributes, timestamp=now)
    if runtime.recorder is not None:
        parts = ReasoningParts(tuple(kept), summary)
        emit(Logged(scope.origin, scope.label, sc.EVENT_REASONING, now, attributes, parts))


def saved_chunks(chunks: Sequence[tuple[str, int]], max_bytes: int) -> list[tuple[str, int]]:
    """``chunks`` (``(text, time)``) as the saved state keeps them: their text redacted as a
    whole (a secret may be split across deltas) and in at most ``max_bytes``. They are kept as
    they came up to the first place redaction or the bound changed; from there on the rest is
    one chunk, with the time of the chunk it starts in."""
    whole = "".join(text for text, _ in chunks)
    clean = outbound_text(whole, max_bytes)
    if clean == whole:
        return [(text, ts) for text, ts in chunks if text]
    kept: list[tuple[str, int]] = []
    position = 0
    for text, ts in chunks:
        if clean.startswith(text, position):
            if text:
                kept.append((text, ts))
            position += len(text)
            continue
        kept.append((clean[position:], ts))
        break
    else:
        if position < len(clean) and chunks:
            kept.append((clean[position:], chunks[-1][1]))
    return kept


def _emit(name: str, attributes: dict[str, AttributeValue], scope: Scope | None = None) -> None:
    if scope is None:
        scope = current_scope()
    if scope is None:
        return
    attributes[sc.PATH] = scope.label
    # The span event and the record (console, opTree) carry the same outbound values.
    attributes = outbound_attributes(attributes, runtime.settings.max_payload_bytes)
    now = time.time_ns()
    span = scope.span
    if span.is_recording():
        span.add_event(name, attributes, timestamp=now)
    if runtime.recorder is not None:
        emit(Logged(scope.origin, scope.label, name, now, attributes))


def record_note(level: str, message: str, node: tuple[str, str] | None) -> None:
    """agenttrace's own warning as a log entry on ``node`` (``(origin, label)``), else on the
    running scope: a record only (the opTree and the console take it; the span may have ended),
    marked as agenttrace's (``source``). What :func:`~agenttrace._internal.errors.note_on_node`
    calls once the SDK is set up."""
    recorder = runtime.recorder
    if recorder is None:
        return
    if node is None:
        scope = current_scope()
        if scope is None:
            return
        node = (scope.origin, scope.label)
    origin, label = node
    attributes: dict[str, AttributeValue] = {
        sc.LOG_LEVEL: level,
        sc.LOG_MESSAGE: message,
        sc.PATH: label,
        sc.LOG_SOURCE: LOG_SOURCE_AGENTTRACE,
    }
    attributes = outbound_attributes(attributes, runtime.settings.max_payload_bytes)
    emit(Logged(origin, label, sc.EVENT_LOG, time.time_ns(), attributes))
