"""The fingerprint of the arguments a root run's entry point was called with, journaled on the
run's line (docs/journal.md) so that a resume re-enters the interrupted run only for a call with
the same ones (``agenttrace.session.reentry_match``).

Only the digest is kept, never the arguments. An object that is not data (a client, a
connection) counts as its kind, as in an LLM call's fingerprint, so the same call made by
another process has the same fingerprint; the agent a method runs for is not an argument."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.runtime import runtime
from agenttrace.model import journal as j

NO_ARGUMENTS: tuple[tuple[Any, ...], Mapping[str, Any]] = ((), {})
"""What a run whose arguments are not known (a ``with agenttrace.run(...)`` block) counts as:
such runs match by their name alone."""


def arguments_fingerprint(arguments: tuple[tuple[Any, ...], Mapping[str, Any]] | None) -> str:
    """``sha256:`` and the digest of ``arguments`` (positional, keyword) as data, every key of
    them counting."""
    args, kwargs = arguments if arguments is not None else NO_ARGUMENTS
    request = {
        "args": [j.as_data(value) for value in args],
        "kwargs": {str(key): j.as_data(value) for key, value in kwargs.items()},
    }
    return j.fingerprint(request, frozenset())


def root_run_fingerprint(
    session: Any, arguments: tuple[tuple[Any, ...], Mapping[str, Any]] | None, implicit: bool
) -> str | None:
    """The fingerprint a root run of ``session`` journals and is matched by: ``None`` for an
    implicit run (it has no entry point), and when nothing would use it (the journal off and no
    re-entry armed)."""
    armed = session.reentry is not None or session.replay_runs is not None
    if implicit or not (runtime.settings.journal or armed):
        return None
    try:
        return arguments_fingerprint(arguments)
    except Exception as exc:
        report_internal_error("run fingerprint", exc)
        return None
