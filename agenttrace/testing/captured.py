"""``CapturedRun``: what a test traced, read back (the ``agent_trace`` fixture yields one).

Every reader flushes agenttrace first, so what it returns includes everything that ended before
the call: a test reads after its agent ran, with no waiting of its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agenttrace.testing.span_query import check_query, matches
from agenttrace.testing.span_tree import (
    ALL_ATTRIBUTES,
    DEFAULT_ATTRIBUTES,
    SpanNode,
    build_tree,
)

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agenttrace.sdk.setup import Tracing
    from agenttrace.session.state import Session
    from agenttrace.testing.span_query import SpanQuery
    from agenttrace.views.lint import Finding, LintSettings


class CapturedRun:
    """The spans, events, session and ledger of the agent code a test ran under agenttrace.

    Made by :func:`agenttrace.testing.capture.capturing` (the ``agent_trace`` fixture): spans go
    to ``exporter``, session files to ``sessions_dir``, ledger lines to ``billing_file``.
    """

    def __init__(
        self,
        tracing: Tracing,
        exporter: InMemorySpanExporter,
        session: Session,
        sessions_dir: Path,
        billing_file: Path,
    ) -> None:
        self.tracing = tracing
        """The handle ``agenttrace.init`` returned (its ``settings`` say how it was set up)."""
        self.exporter = exporter
        self.sessions_dir = sessions_dir
        """Where the session files and event streams are written (a temporary directory)."""
        self.billing_file = billing_file
        """The ledger file (a temporary one)."""
        self._session = session
        self._kept = False
        self._closed = False
        self.lint_settings: LintSettings | None = None
        """The thresholds :meth:`lint` uses by default (the fixture's: ``--agenttrace-lint-set``,
        the ``agenttrace_lint_set`` ini option); ``None``: the rules' defaults."""

    def use_session(self, session: Session) -> None:
        """Describe ``session`` from now on, whichever session is current (a cassette's, which
        is current only inside the cassette's block)."""
        self._session = session
        self._kept = True

    def close(self) -> None:
        """agenttrace is being shut down (which writes everything out): the session is kept as
        it is now, reading goes on, flushing stops."""
        self._session = self.session
        self._closed = True

    def flush(self) -> None:
        """Write out everything agenttrace holds: spans, events, ledger lines."""
        if not self._closed:
            self.tracing.force_flush()

    @property
    def spans(self) -> list[ReadableSpan]:
        """The finished spans, in the order they ended."""
        self.flush()
        return list(self.exporter.get_finished_spans())

    @property
    def session(self) -> Session:
        """The session the test's runs were recorded in: the cassette's (:meth:`use_session`),
        else the fixture's, or the one the test made current since (``agenttrace.new_session``,
        ``resume``)."""
        from agenttrace.session.state import session_if_any

        if self._closed or self._kept:
            return self._session
        return session_if_any() or self._session

    @property
    def events(self) -> list[dict[str, Any]]:
        """The session's canonical events (``agent_created``, ``transcript_entry``, ...), as its
        event stream holds them, in message-id order (docs/events.md)."""
        self.flush()
        return [dict(event) for event in self.session.events]

    @property
    def ledger(self) -> list[dict[str, Any]]:
        """The billing ledger's entries, one per LLM attempt and tool call, in the order they
        ended (docs/session-file.md, "The ledger")."""
        self.flush()
        if not self.billing_file.exists():
            return []
        lines = self.billing_file.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def lint(self, settings: LintSettings | None = None, **thresholds: Any) -> list[Finding]:
        """The trace lint's findings on the session (docs/lint.md), its file written out first.
        ``settings``: a :class:`~agenttrace.views.lint.LintSettings` (by default the fixture's,
        else the rules' defaults); ``thresholds`` change some of them
        (``lint(repeat_min_calls=4)``). A session that recorded nothing has no finding."""
        import dataclasses

        from agenttrace.formats.session.files import snapshot_path, stream_path
        from agenttrace.views.lint import LintSettings, lint_session

        base = settings or self.lint_settings or LintSettings()
        chosen = dataclasses.replace(base, **thresholds) if thresholds else base
        self.flush()
        session_id = self.session.session_id
        for path in (
            snapshot_path(self.sessions_dir, session_id),
            stream_path(self.sessions_dir, session_id),
        ):
            if path.exists():
                return lint_session(path, chosen)
        return []

    def transcript(self, agent: str) -> list[dict[str, Any]]:
        """The chat messages of ``agent`` (a name, the latest agent of that name, or an agent id
        such as ``agent_002``): what it was told, said and heard, ready to send to a model.
        A ``KeyError`` naming the session's agents when there is none such."""
        self.flush()
        session = self.session
        record = session.agents.get(agent) or session.agent_named(agent)
        if record is None:
            known = ", ".join(f"{i} ({n})" for i, n in session.list_agents().items()) or "none"
            raise KeyError(f"no agent {agent!r} in the session; its agents: {known}")
        return record.messages()

    def nodes(self) -> list[SpanNode]:
        """The span tree's roots (:class:`~agenttrace.testing.span_tree.SpanNode`), each with
        its parent and children linked, siblings in a deterministic order."""
        return build_tree(self.spans)

    def tree(self, attributes: Iterable[str] | str = DEFAULT_ATTRIBUTES) -> list[dict[str, Any]]:
        """Every root's normal form (one per run, in start order): nested dicts of ``kind``,
        ``name``, ``label``, ``status``, ``attributes`` and ``children``, no ids and no times.
        ``attributes``: which span attributes to keep (the default:
        :data:`~agenttrace.testing.span_tree.DEFAULT_ATTRIBUTES`; ``"*"``: all of them)."""
        return [root.normal(attributes) for root in self.nodes()]

    def find(self, query: SpanQuery | dict[str, Any]) -> list[SpanNode]:
        """The spans that match ``query``, a pydantic-evals ``SpanQuery`` (a dict: see
        :class:`~agenttrace.testing.span_query.SpanQuery`), in tree order (depth first). A key
        that is no field of a query is a ``ValueError``."""
        check_query(query)
        return [node for root in self.nodes() for node in root.walk() if matches(node, query)]

    def snapshot(
        self, attributes: Iterable[str] | str = DEFAULT_ATTRIBUTES, *, text: bool = False
    ) -> list[dict[str, Any]] | str:
        """The normal-form tree for a snapshot library (inline-snapshot's ``snapshot()``,
        syrupy's ``snapshot`` fixture): :meth:`tree` as plain data, or with ``text=True`` as
        indented lines (one node a line, its attributes under it), which reads better in a
        snapshot file. Stable from run to run: no ids, no times, deterministic order."""
        roots = self.tree(attributes)
        return as_text(roots) if text else roots


def as_text(roots: list[dict[str, Any]]) -> str:
    """Normal-form roots as indented lines: ``kind name [label] status``, then each attribute
    as ``@ key = value`` (its JSON), then the children, two spaces deeper."""
    lines: list[str] = []

    def add(node: dict[str, Any], depth: int) -> None:
        indent = "  " * depth
        failed = "" if node["status"] == "ok" else f" {node['status']}"
        label = f" [{node['label']}]" if node["label"] is not None else ""
        lines.append(f"{indent}{node['kind'] or 'span'} {node['name']}{label}{failed}")
        for key, value in node["attributes"].items():
            lines.append(f"{indent}  @ {key} = {json.dumps(value, sort_keys=True)}")
        for child in node["children"]:
            add(child, depth + 1)

    for root in roots:
        add(root, 0)
    return "\n".join(lines) + "\n"


__all__ = ["ALL_ATTRIBUTES", "CapturedRun", "as_text"]
