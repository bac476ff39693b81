"""The context variable that holds the innermost agenttrace scope.

It lives down here so that the session layer can link a canonical event to the scope it was
logged in (trace id, span id, path label), and hand the event to that scope, without importing
the tracing layer that makes scopes.
asyncio tasks and threads that copy the context see the scope of the code that started them.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Protocol


class Linkable(Protocol):
    """What the session layer knows of a scope: its label and its span's ids, and where the
    canonical events logged in it go."""

    label: str
    origin: str

    def link_ids(self) -> tuple[str | None, str | None]:
        """The scope's trace and span ids as hex (``None`` without a span context)."""
        ...

    def event_logged(self, session: Any, event: dict[str, Any], line: bytes, more: int) -> None:
        """A canonical event was logged in this scope (``line``: as the stream stores it;
        ``more``: how many logged with it follow): put it on the span and record it."""
        ...


current_scope_var: ContextVar[Any] = ContextVar("agenttrace_scope", default=None)
"""The innermost scope (a ``tracing.scopes`` scope, which is :class:`Linkable`), or ``None``."""


def current_linkable() -> Linkable | None:
    """The innermost scope, as the session layer sees it."""
    scope: Linkable | None = current_scope_var.get()
    return scope


implicit_run_var: ContextVar[Any] = ContextVar("agenttrace_implicit_run", default=None)
"""The innermost implicit agent run (``tracing.implicit``) this context's bare LLM calls go into,
or ``None``. Set by the call that opened it and left set, so the rest of the program's context
(and the tasks and threads it hands work to) sees it; read only by duck typing down here."""


def implicit_run_open() -> bool:
    """True if an implicit run is open in this context (work handed to a thread carries it)."""
    run = implicit_run_var.get()
    while run is not None:
        if run.is_open:
            return True
        run = run.parent
    return False
