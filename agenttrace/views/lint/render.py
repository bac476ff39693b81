"""``agenttrace lint``'s output: a line per finding and a summary, or one JSON document
(its shape: docs/lint.md, "JSON")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agenttrace.views.lint.finding import Finding, total_waste
from agenttrace.views.lint.settings import LintSettings

JSON_FORMAT = "agenttrace.lint"
JSON_VERSION = 1


def _tokens(value: int | None) -> str:
    return "? tokens" if value is None else f"{value:,} tokens"


def _cost(value: float | None) -> str:
    return "$?" if value is None else f"${value:.6f}"


def finding_line(finding: Finding) -> str:
    """``run 1 1.2,2.2,3.2  AT101 repeated-tool-call  <message>  (wasted 340 tokens, $0.001)``."""
    where = f"run {finding.run}" if finding.run is not None else "session"
    wasted = f"wasted {_tokens(finding.wasted.tokens)}, {_cost(finding.wasted.cost_usd)}"
    return f"{where}  {finding.title}  {finding.message}  ({wasted})"


def summary_line(findings: Sequence[Finding]) -> str:
    """What the findings add up to; the total says when some waste was unknown."""
    if not findings:
        return "no finding"
    tokens, cost, unknown = total_waste(findings)
    if not unknown:
        return f"{len(findings)} finding(s); wasted {tokens:,} tokens, ${cost:.6f}"
    return (
        f"{len(findings)} finding(s); wasted at least {tokens:,} tokens, ${cost:.6f} "
        f"({unknown} finding(s) of unknown waste not counted)"
    )


def text_lines(findings: Sequence[Finding]) -> list[str]:
    """The text report: a line per finding, then the summary."""
    return [*(finding_line(finding) for finding in findings), summary_line(findings)]


def json_document(
    findings: Sequence[Finding], session_id: str | None, settings: LintSettings
) -> dict[str, Any]:
    """The ``--json`` document."""
    tokens, cost, unknown = total_waste(findings)
    return {
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "session_id": session_id,
        "findings": [finding.as_json() for finding in findings],
        "total": {
            "findings": len(findings),
            "wasted_tokens": tokens,
            "wasted_cost_usd": cost,
            "unknown_waste": unknown,
        },
        "settings": settings.as_json(),
    }
