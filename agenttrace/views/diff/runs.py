"""``agenttrace.diff_runs``'s work: two recorded runs compared step by step (``agenttrace diff``).

A run is named as ``agenttrace tree`` numbers it: ``SESSION:N`` is run N of SESSION (a path or
an id in the sessions directory), ``SESSION`` its last run.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agenttrace._internal.config import Settings
from agenttrace.formats.session.files import LoadedFile, SessionFileError, find_session
from agenttrace.formats.session.optree import journal_origin
from agenttrace.formats.session.totals import session_stats
from agenttrace.views.diff.result import RunDiff, RunRef
from agenttrace.views.diff.steps import JournalIndex, usage
from agenttrace.views.diff.walk import Walk

_RUN = re.compile(r"^(?P<session>.+):(?P<run>[^:/\\]*)$")


def split_run(reference: str) -> tuple[str, int | None]:
    """``SESSION[:RUN]`` as (session, run number or ``None`` for the last run). A reference
    naming an existing file is that file whole, whatever colon it holds; a RUN that is not a
    positive number raises ``SessionFileError`` (bad input, one line)."""
    match = _RUN.match(reference)
    if match is None or Path(reference).exists():
        return reference, None
    run = match.group("run")
    if not run.isascii() or not run.isdigit() or int(run) < 1:
        raise SessionFileError(
            f"{reference}: RUN must be a run number (1 or more, as `tree` prints)"
        )
    return match.group("session"), int(run)


def select_run(loaded: LoadedFile, run: int | None, name: str) -> tuple[dict[str, Any], int]:
    """Run ``run`` of ``loaded`` (1 is its first; ``None``: its last) and its number; raises
    ``SessionFileError`` naming ``name`` when the session has no such run."""
    runs = [each for each in loaded.runs if isinstance(each, dict)]
    if not runs:
        raise SessionFileError(f"{name}: no run recorded in it")
    number = len(runs) if run is None else run
    if number > len(runs):
        raise SessionFileError(f"{name}: no run {number} (it has {len(runs)})")
    return runs[number - 1], number


def diff_loaded(
    a: tuple[LoadedFile, int | None, str],
    b: tuple[LoadedFile, int | None, str],
    max_bytes: int | None = None,
) -> RunDiff:
    """Run A of the session ``a`` and run B of ``b`` compared (each a loaded session, a run
    number or ``None`` for its last, and how to name it); ``max_bytes``: each string shown is
    capped so (default: the ``max_payload_bytes`` setting)."""
    if max_bytes is None:
        max_bytes = Settings.resolve().max_payload_bytes
    run_a, number_a = select_run(a[0], a[1], a[2])
    run_b, number_b = select_run(b[0], b[1], b[2])
    walk = Walk(
        (JournalIndex(a[0].journal), JournalIndex(b[0].journal)),
        (journal_origin(run_a), journal_origin(run_b)),
        max_bytes,
    )
    walk.run(run_a, run_b)
    return RunDiff(
        _ref(a[0], run_a, number_a, a[2]),
        _ref(b[0], run_b, number_b, b[2]),
        walk.first,
        walk.steps,
        walk.only_in_a,
        walk.only_in_b,
        _totals(run_a),
        _totals(run_b),
        walk.divergences,
    )


def diff_sessions(
    a: str | Path,
    b: str | Path,
    *,
    run_a: int | None = None,
    run_b: int | None = None,
    sessions_dir: str | Path | None = None,
) -> RunDiff:
    """:func:`agenttrace.diff_runs` (its docstring says what it does)."""
    from agenttrace.formats.documents import is_document, read_document
    from agenttrace.views.account import read_account

    directory = None if sessions_dir is None else Path(sessions_dir)
    sides = []
    for reference, run in ((a, run_a), (b, run_b)):
        if isinstance(reference, Path):
            path, number = reference, run
        else:
            name, number = split_run(reference)
            number = run if run is not None else number
            path = find_session(name, directory)
        # A STD-008 session or an ATIF trajectory is read as the session it describes, as the
        # command reads it.
        loaded = read_document(path) if is_document(path) else read_account(path).loaded
        sides.append((loaded, number, str(reference)))
    return diff_loaded(sides[0], sides[1])


def _ref(loaded: LoadedFile, run: dict[str, Any], number: int, name: str) -> RunRef:
    trace, txn = run.get("traceId"), run.get("txnId")
    return RunRef(
        loaded.session_id or name,
        number,
        trace if isinstance(trace, str) else None,
        txn if isinstance(txn, str) else None,
    )


def _totals(run: dict[str, Any]) -> dict[str, float | None]:
    """The run's totals as ``stats`` counts them, and its wall time."""
    total = session_stats([run])["total"]
    attempts = sum(
        total[key] for key in ("llm_attempts_ok", "llm_attempts_failed", "llm_attempts_interrupted")
    )
    return {
        "input_tokens": total["input_tokens"],
        "output_tokens": total["output_tokens"],
        "cost_usd": total["cost_usd"],
        "llm_attempts": attempts,
        "tool_calls": total["tool_calls"],
        "latency_ms": usage(run, "session").latency_ms,
    }
