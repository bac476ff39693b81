"""The one place agenttrace's own failures go.

Instrumentation must never break the host program: every wrapper catches our exceptions at its
boundary and hands them here. A failure is reported once per place and exception type as a
one-line warning on the ``agenttrace`` logger (the traceback at debug level), and the user's code
runs on with less telemetry. Under agenttrace's own test suite (``AGENTTRACE_RAISE_INTERNAL_ERRORS``
set) it is re-raised instead, so a test never hides an instrumentation bug.
"""

from __future__ import annotations

import logging
import os
import threading

logger = logging.getLogger("agenttrace")

_lock = threading.Lock()
_reported: set[tuple[str, type[BaseException]]] = set()
raise_internal_errors = os.environ.get("AGENTTRACE_RAISE_INTERNAL_ERRORS", "") not in ("", "0")
"""Re-raise internal errors instead of logging them (set by the test suite)."""


def report_internal_error(where: str, exc: BaseException) -> None:
    """Log ``exc`` (raised inside agenttrace at ``where``) once, or re-raise it under the tests."""
    if raise_internal_errors:
        raise exc
    if _first_report(where, exc):
        logger.warning(
            "agenttrace: internal error in %s, your code still runs with less telemetry: %s: %s",
            where,
            type(exc).__name__,
            exc,
        )
    logger.debug("agenttrace: internal error in %s", where, exc_info=exc)


def report_misuse(where: str, exc: BaseException) -> None:
    """Log ``exc``, a mistake found in what the user gave agenttrace but only when their code
    runs (a callable option that returns the wrong thing), once per place and type; re-raise
    it under the tests. Not called an internal error: the message says what to fix."""
    if raise_internal_errors:
        raise exc
    if _first_report(where, exc):
        logger.warning("agenttrace: %s (your code still runs)", exc)


def _first_report(where: str, exc: BaseException) -> bool:
    """Whether this is the first failure of ``exc``'s type at ``where`` (and remember it)."""
    key = (where, type(exc))
    with _lock:
        first = key not in _reported
        _reported.add(key)
    return first


def reset_reported() -> None:
    """Forget which failures were reported (for tests)."""
    with _lock:
        _reported.clear()
