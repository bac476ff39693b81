"""A lint rule: a stable id and name, one line saying what it catches, and the check that
finds it in a session (:class:`LintContext`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from agenttrace.formats.session.files import LoadedFile
from agenttrace.views.lint.finding import UNKNOWN, Finding, Waste
from agenttrace.views.lint.settings import LintSettings
from agenttrace.views.lint.walk import AgentRun, Node, agent_runs, where


@dataclass
class LintContext:
    """What every rule reads: the session, its agent runs, the settings."""

    loaded: LoadedFile
    settings: LintSettings
    runs: list[AgentRun] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.runs = list(agent_runs([run for run in self.loaded.runs if isinstance(run, dict)]))


Check = Callable[[LintContext], Iterable["Found"]]


@dataclass(frozen=True)
class Found:
    """What a check yields: the finding's message, run, nodes and waste (the rule adds its id
    and name)."""

    message: str
    run: int | None
    nodes: tuple[Node, ...]
    wasted: Waste = UNKNOWN


@dataclass(frozen=True)
class Rule:
    """One rule: ``id`` (``AT101``) and ``name`` (``repeated-tool-call``) never change."""

    id: str
    name: str
    summary: str
    check: Check

    def run(self, context: LintContext) -> Iterator[Finding]:
        for found in self.check(context):
            paths, spans = where(found.nodes)
            yield Finding(self.id, self.name, found.message, found.run, paths, spans, found.wasted)


def label(node: Node) -> str:
    """A node's path label as text, ``?`` when the file has none."""
    path = node.get("path")
    return path if isinstance(path, str) else "?"


def describe(value: Any, limit: int = 60) -> str:
    """A payload shown in a message: one line, capped."""
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
