"""What a running tool call can ask about its own step in the journal (docs/journal.md)."""

from __future__ import annotations

from agenttrace import semconv as sc
from agenttrace.record.journal import idempotency_key as key_of
from agenttrace.tracing.scopes import OpScope, current_scope


def idempotency_key() -> str | None:
    """The idempotency key of the tool call running now: the same for each of its attempts and
    on every resume of its run (session, run, step label and tool), so an API that honours an
    ``Idempotency-Key`` header does the call's effect once however often it is sent. ``None``
    outside a tool call agenttrace traces (or with agenttrace off): send none then.

    The key stays yours and the journal's: agenttrace never puts it on a span, a log, a console
    line, a metric or an export.
    """
    scope = current_scope()
    if not isinstance(scope, OpScope) or scope.kind == sc.KIND_LLM:
        return None
    return key_of(scope.session.run.session_id, scope.origin, scope.label, scope.name)
