"""Two recorded runs compared step by step: ``agenttrace diff``, ``agenttrace.diff_runs``
(docs/how-to/replay-diff.md). What it finds is a :class:`~agenttrace.views.diff.result.RunDiff`;
:func:`to_html` makes it a page (``agenttrace diff --html``).

Only :func:`diff_runs` and :func:`to_html` are here, importing the rest when called:
``import agenttrace`` stays as quick as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agenttrace.views.diff.result import RunDiff


def diff_runs(
    a: str | Path,
    b: str | Path,
    *,
    run_a: int | None = None,
    run_b: int | None = None,
    sessions_dir: str | Path | None = None,
) -> RunDiff:
    """Compare two recorded runs step by step (docs/how-to/replay-diff.md).

    ``a`` and ``b`` name sessions as the ``agenttrace`` command takes them (a session file, an
    event stream, or an id in ``sessions_dir``, by default the configured sessions directory),
    a string with ``:N`` for run N as ``agenttrace tree`` numbers it (or ``run_a``/``run_b``);
    the last run by default. ``a`` and ``b`` may be one session (``"s:1"``, ``"s:2"``).

    Returns a :class:`~agenttrace.views.diff.result.RunDiff`: the first divergence in run order
    (``None`` when the runs did the same), every step of either run, paired where both have it,
    with the divergences found there and its token, cost and latency deltas, the steps only in
    one run, and the totals; ``as_json()`` is ``agenttrace diff --json``'s document. Raises
    ``agenttrace.SessionFileError`` for a session that cannot be read or a run it does not have.
    """
    from agenttrace.views.diff.runs import diff_sessions

    return diff_sessions(a, b, run_a=run_a, run_b=run_b, sessions_dir=sessions_dir)


def to_html(diff: RunDiff, max_rows: int | None = None) -> str:
    """``diff`` as one self-contained HTML page (``agenttrace diff A B --html FILE``): run A
    left and run B right, a row per step, the first divergence marked (``#divergence``, a
    banner linking to it) with its field-level diff; no network, no script. At most
    ``max_rows`` steps are listed (default 2000), the divergence's always."""
    from agenttrace.views.diff.html import MAX_ROWS
    from agenttrace.views.diff.html import to_html as page

    return page(diff, MAX_ROWS if max_rows is None else max_rows)


__all__ = ["diff_runs", "to_html"]
