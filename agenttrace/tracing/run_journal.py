"""A root run's own lines in the step journal (docs/journal.md): one when it starts, with how
many events the session had logged before it (so a re-entry can set each agent's transcript
back to what the run found), and one when it ends. A run whose start is journaled and whose end
is not was interrupted: the run ``agenttrace.resume`` re-enters."""

from __future__ import annotations

import os
import secrets
from typing import Any

from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.runtime import runtime
from agenttrace.model import journal_lines as jl
from agenttrace.model.journal_lines import journal_bytes

WHERE = "step journal"

_process = secrets.token_hex(8)
"""This process's token on its runs' lines (a new one in a forked child)."""


def _new_process_token() -> None:
    global _process
    _process = secrets.token_hex(8)


if hasattr(os, "register_at_fork"):  # not on Windows, where nothing forks
    os.register_at_fork(after_in_child=_new_process_token)


def journal_run_start(
    session: Any,
    run: str,
    attempt: int,
    agent_id: str,
    name: str,
    arguments_fingerprint: str | None = None,
    implicit: bool = False,
) -> None:
    """Journal that the root run ``run`` (this attempt at it) started now: its entry point
    ``name``, the fingerprint of its arguments, or that it is ``implicit``."""
    recorder = runtime.recorder
    if recorder is None or not runtime.settings.journal:
        return
    try:
        line = jl.run_line(
            run,
            attempt,
            agent_id=agent_id,
            name=name,
            messages=session.message_counter,
            arguments_fingerprint=arguments_fingerprint,
            implicit=implicit,
            process=_process,
            pid=os.getpid(),
        )
        recorder.journal(session, journal_bytes(line))
    except Exception as exc:
        report_internal_error(WHERE, exc)


def journal_run_end(session: Any, run: str, attempt: int, agent_id: str, name: str) -> None:
    """Journal that the root run ``run`` ended (in the background, after its steps' lines)."""
    recorder = runtime.recorder
    if recorder is None or not runtime.settings.journal:
        return
    try:
        line = jl.done_line((run, jl.RUN_LABEL, attempt), agent_id=agent_id, kind="run", name=name)
        recorder.journal(session, jl.encoded_later(line), later=True)
    except Exception as exc:
        report_internal_error(WHERE, exc)
