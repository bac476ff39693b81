"""Values read inside ``agenttrace.deterministic()`` in the step journal: a live run journals
each one (a ``value`` step's ``done`` line at its scope's label and ``~n``); a run a replay or a
resume re-enters gets the recorded one back (docs/design/replay.md, "Deterministic values").

What a value's key is and what a re-entered run does with it are decided in
:mod:`agenttrace.model.recorded_values`; this module reads, serves and writes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, TypeVar

from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.runtime import runtime
from agenttrace.model import journal_lines as jl
from agenttrace.model.recorded_values import VALUE_KIND, as_json, plan_value, value_label
from agenttrace.tracing.scopes import current_scope

T = TypeVar("T")

WHERE = "a deterministic value"


def recorded(name: str, read: Callable[[], T]) -> T:
    """The value ``name`` the agent reads now (``read()`` reads it from the world): in a run a
    replay or a resume re-enters, the one recorded at its key if there is one; else read now,
    and journaled if a run records it. Outside a run, or with the journal off, just ``read()``.
    Never raises what ``read`` does not."""
    scope = current_scope()
    recorder = runtime.recorder
    if scope is None or recorder is None or not runtime.settings.journal:
        return read()
    try:
        session = scope.session
        run = session.run
        counter = run.values.get(scope.label)
        if counter is None:  # setdefault: two threads' first reads at a label get one counter
            counter = run.values.setdefault(scope.label, itertools.count(1))
        key = (run.journal_run, value_label(scope.label, next(counter)), 1)
        reentry = run.reentry
        plan = plan_value(reentry, key[1], name) if reentry is not None else None
    except Exception as exc:
        report_internal_error(WHERE, exc)
        return read()
    if plan is not None and plan.what == "serve":
        line = jl.replayed_line(key, agent_id=session.agent_id, kind=VALUE_KIND, name=name)
        _write(session, line)
        return plan.value  # type: ignore[no-any-return]
    value = read()
    if plan is None or plan.what == "record":
        _write(
            session, jl.value_line(key, agent_id=session.agent_id, name=name, value=as_json(value))
        )
    return value


def _write(session: Any, line: jl.Step) -> None:
    """``line``, written before the read returns (one write, as a tool's intent): the stream
    then holds the values in the order they were read among the other steps' lines, so a
    fork's ``until`` serves every value read before its label, and a resume finds each value
    read before a call whose intent is on disk (a uuid in its arguments)."""
    recorder = runtime.recorder
    if recorder is None:
        return
    try:
        recorder.journal(session.run.session, jl.journal_bytes(line))
    except Exception as exc:
        report_internal_error(WHERE, exc)
