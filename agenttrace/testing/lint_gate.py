"""The lint the pytest plugin runs after each test that used ``agent_trace``
(``--agenttrace-lint=warn|error``, docs/how-to/testing.md): :func:`lint_gate`."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agenttrace.views.lint import LintSettings, text_lines

if TYPE_CHECKING:
    from agenttrace.testing.captured import CapturedRun

LINT_MODES = ("off", "warn", "error")


class TraceLintWarning(UserWarning):
    """``--agenttrace-lint=warn``: the lint found defects in a test's session (the message
    lists them)."""


class TraceLintFailure(AssertionError):
    """``--agenttrace-lint=error``: the lint found defects in a test's session (the message
    lists them, as ``agenttrace lint`` prints them)."""


@dataclass(frozen=True)
class LintGate:
    """What :func:`agenttrace.testing.capture.capturing` does with the lint: the thresholds a
    run's ``lint()`` uses, and, called with the run at the end of the block, ``mode``:
    ``off`` nothing, ``warn`` warn with the findings (:class:`TraceLintWarning`), ``error``
    raise them (:class:`TraceLintFailure`)."""

    mode: str
    settings: LintSettings

    def __call__(self, captured: CapturedRun) -> None:
        if self.mode == "off":
            return
        findings = captured.lint(self.settings)
        if not findings:
            return
        report = "\n".join(
            [f"agenttrace lint found defects in session {captured.session.session_id}:"]
            + [f"  {line}" for line in text_lines(findings)]
        )
        if self.mode == "error":
            raise TraceLintFailure(report)
        warnings.warn(TraceLintWarning(report), stacklevel=2)


def lint_gate(mode: str, assignments: Sequence[str] = ()) -> LintGate:
    """The gate of ``--agenttrace-lint=mode`` with the thresholds ``assignments`` (``NAME=VALUE``
    each, applied to the defaults). Raises ``ValueError`` for another mode,
    :class:`~agenttrace.views.lint.LintSettingError` for a bad threshold."""
    if mode not in LINT_MODES:
        raise ValueError(f"lint mode must be one of {', '.join(LINT_MODES)}, not {mode!r}")
    return LintGate(mode, LintSettings().updated(assignments))
