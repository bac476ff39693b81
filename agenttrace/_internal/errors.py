"""The one place agenttrace's own failures go.

Instrumentation must never break the host program: every wrapper catches our exceptions at its
boundary and hands them here. A failure is reported once per place and exception type as a
one-line warning on the ``agenttrace`` logger (the traceback at debug level), and the user's code
runs on with less telemetry. Under agenttrace's own test suite (``AGENTTRACE_RAISE_INTERNAL_ERRORS``
set) it is re-raised instead, so a test never hides an instrumentation bug.

A warning that concerns an op or an agent run known where it is raised also becomes a log entry
on that node (:func:`note_on_node`): the session file, ``serve`` and ``tree`` show it where it
happened, with its txn and path. The recorder's sinks name the node they were writing for
(:func:`concerning`); elsewhere it is the agenttrace scope that is running.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar

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
    # On the node every time (the logger says it once): it is about this op or run.
    note_on_node(
        "WRN",
        f"agenttrace: internal error in {where}, your code still runs with less telemetry: "
        f"{type(exc).__name__}: {exc}",
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
    note_on_node("WRN", f"agenttrace: {exc} (your code still runs)")


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


# --- warnings on the node they concern ---------------------------------------------------------

NodeKey = tuple[str, str]
"""A node of the opTree: its run's origin txn id and its path label."""

NoteHook = Callable[[str, str, "NodeKey | None"], None]
"""Records ``(level, message, node)`` as a log entry on ``node`` (``None``: the running scope's)."""

_note_hook: NoteHook | None = None
_concerned: ContextVar[NodeKey | None] = ContextVar("agenttrace_concerned", default=None)
_noting = threading.local()


def set_note_hook(hook: NoteHook | None) -> None:
    """Install what records a warning on its node (the SDK's setup does; ``None`` removes it)."""
    global _note_hook
    _note_hook = hook


@contextlib.contextmanager
def concerning(origin: str, label: str) -> Iterator[None]:
    """While it is open, agenttrace's warnings concern the node ``label`` of the run
    ``origin`` (a sink writing what that node's end recorded)."""
    token = _concerned.set((origin, label))
    try:
        yield
    finally:
        _concerned.reset(token)


def note_on_node(level: str, message: str) -> None:
    """Record agenttrace's own warning as a ``level`` log entry on the node it concerns: the
    one :func:`concerning` names, else the running agenttrace scope; nothing when neither is
    known or agenttrace is not set up (the Python logger has it either way). Never raises."""
    hook = _note_hook
    if hook is None or getattr(_noting, "busy", False):
        return  # a warning raised while one is recorded is not recorded again
    _noting.busy = True
    try:
        hook(level, message, _concerned.get())
    except Exception:
        logger.debug("agenttrace: a warning could not be put on its node", exc_info=True)
    finally:
        _noting.busy = False
