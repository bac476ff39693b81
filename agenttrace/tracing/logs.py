"""Logs and reasoning, attached to the op that is running: span events with their path.

The levels: ``VRB`` (verbose), ``WRN``, ``ERR``, ``TRC`` (trace), ``THK`` (thinking),
``FIN`` (final). Reasoning chunks are their own events, so a viewer can rebuild the thinking
text without parsing log lines. Both are kept in the opTree (docs/session-file.md).
"""

from __future__ import annotations

import time
from typing import Any

from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace._internal.checks import refuse
from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.redact import recorded_json
from agenttrace._internal.runtime import runtime
from agenttrace.model.lifecycle import Logged
from agenttrace.tracing.outbound import outbound_attributes
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


def record_reasoning(scope: Scope | None, text: str) -> None:
    """One chunk of reasoning on ``scope`` (an LLM attempt whose response carried it): capped
    and redacted like content, a span event, a ``THK`` console line and the op's opTree
    ``reasoning``."""
    _emit(sc.EVENT_REASONING, {sc.REASONING_TEXT: str(text)}, scope)


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
