"""Trace lint: the defects a saved session shows (a tool called in a loop, a retry storm, a
sub-agent that lost its parent, ...), each with its rule id, the steps involved and the tokens
and cost it wasted. ``agenttrace lint SESSION``; docs/lint.md lists the rules."""

from agenttrace.views.lint.finding import Finding, Waste
from agenttrace.views.lint.render import json_document, text_lines
from agenttrace.views.lint.rule import Rule
from agenttrace.views.lint.runner import RULES, lint_session
from agenttrace.views.lint.settings import LintSettingError, LintSettings

__all__ = [
    "RULES",
    "Finding",
    "LintSettingError",
    "LintSettings",
    "Rule",
    "Waste",
    "json_document",
    "lint_session",
    "text_lines",
]
