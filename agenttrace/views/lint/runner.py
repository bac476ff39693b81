"""Running the rules over one session: :func:`lint_session`."""

from __future__ import annotations

import os
from pathlib import Path

from agenttrace.formats.session.files import LoadedFile
from agenttrace.formats.session.fullest import load_fullest
from agenttrace.views.lint import costs, llm_calls, structure, tool_loops
from agenttrace.views.lint.finding import Finding
from agenttrace.views.lint.rule import LintContext, Rule
from agenttrace.views.lint.settings import LintSettings

RULES: tuple[Rule, ...] = (
    *tool_loops.RULES,
    *llm_calls.RULES,
    *structure.RULES,
    *costs.RULES,
)
"""Every rule, in id order (docs/lint.md)."""


def lint_session(
    session: LoadedFile | str | os.PathLike[str], settings: LintSettings | None = None
) -> list[Finding]:
    """The defects lint finds in a session, rule by rule (in id order), each rule's in the
    order it met them.

    ``session`` is a session file or event stream (its fullest picture is read, as
    ``agenttrace doubts`` reads it: both files, the step journal of both), or a session already
    read (:class:`~agenttrace.formats.session.files.LoadedFile`, from
    :func:`~agenttrace.formats.session.fullest.load_fullest` or
    :func:`~agenttrace.formats.session.files.read_session_file`). Raises
    :class:`~agenttrace.formats.session.files.SessionFileError` for a file that is not a
    readable session. ``settings``: the thresholds (:class:`LintSettings`)."""
    loaded = session if isinstance(session, LoadedFile) else load_fullest(Path(session))
    settings = LintSettings() if settings is None else settings
    context = LintContext(loaded, settings)
    skipped = set(settings.ignore)
    findings: list[Finding] = []
    for rule in RULES:
        if rule.id not in skipped and rule.name not in skipped:
            findings.extend(rule.run(context))
    return findings
