"""The captured spans as a tree, and its normal form: what a test compares.

:func:`build_tree` nests finished spans under their parents; :meth:`SpanNode.normal` writes a
node as plain data with no ids and no times (kind, name, label, status, chosen attributes,
children), so two runs of the same agent give equal normal forms whatever their clocks and
random ids. Siblings are ordered by their path label (``docs/path-labels.md``: start order
within their turn or run), spans without one after them by name, roots by start time.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from agenttrace import semconv as sc
from agenttrace.model.paths import parse_label

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

DEFAULT_ATTRIBUTES: tuple[str, ...] = (
    sc.GEN_AI_TOOL_CALL_ARGUMENTS,
    sc.ATTEMPT,
    sc.ERROR_TYPE,
)
"""The attributes a normal form keeps unless told otherwise: what a tool was called with, an
LLM call's attempt number, what failed. Tokens, cost and model answers' ids are left out: they
change with the price table and the provider, not the agent. So is ``agenttrace.replayed``
(:data:`REPLAY_MARKERS`): a test that records a cassette and the same test replaying it must
take the same snapshot (ask for it by name to see what a replay answered)."""

REPLAY_MARKERS: tuple[str, ...] = (sc.REPLAYED,)
"""The attributes a replay's spans have and the recording's do not, which the default normal
form leaves out: ``tree([*DEFAULT_ATTRIBUTES, *REPLAY_MARKERS])`` keeps them."""

ALL_ATTRIBUTES = "*"
"""``tree(attributes=ALL_ATTRIBUTES)``: every attribute of every span."""

JSON_ATTRIBUTES = frozenset({sc.GEN_AI_TOOL_CALL_ARGUMENTS})
"""Attributes recorded as JSON text that the normal form shows decoded (a tool's arguments are
always a JSON object; its result is text as returned, so it stays text)."""

_KINDS_BY_OPERATION = {
    sc.OP_EXECUTE_TOOL: sc.KIND_TOOL,
    sc.OP_CHAT: sc.KIND_LLM,
    sc.OP_EMBEDDINGS: sc.KIND_LLM,
}


@dataclass(eq=False)
class SpanNode:
    """One finished span in the tree, with links to its parent and children (as pydantic-evals'
    ``SpanNode`` has them, so a ``SpanQuery`` reads the same over both)."""

    span: ReadableSpan
    name: str
    kind: str | None
    """``session`` (an agent run), ``turn``, ``llm`` or ``tool`` (a tool call that ran a
    sub-agent too, though its ``agenttrace.kind`` attribute says ``session``); ``None`` for a
    span agenttrace did not make."""
    label: str | None
    """Its path label (``agenttrace.path``), ``None`` for a span agenttrace did not make."""
    status: str
    """``failed`` when the span's status is ERROR, else ``ok``."""
    attributes: dict[str, Any]
    parent: SpanNode | None = field(default=None, repr=False)
    children: list[SpanNode] = field(default_factory=list, repr=False)

    @property
    def duration(self) -> timedelta:
        """The span's wall time (its own clock readings, which the normal form leaves out)."""
        nanoseconds = (self.span.end_time or 0) - (self.span.start_time or 0)
        return timedelta(microseconds=nanoseconds / 1e3)

    @property
    def ancestors(self) -> list[SpanNode]:
        """Its parent, the parent's parent, ..., up to its root."""
        found: list[SpanNode] = []
        node = self.parent
        while node is not None:
            found.append(node)
            node = node.parent
        return found

    @property
    def descendants(self) -> list[SpanNode]:
        """Everything under it, depth first, in tree order."""
        return [node for child in self.children for node in child.walk()]

    def walk(self) -> Iterator[SpanNode]:
        """It, then its descendants, depth first, in tree order."""
        yield self
        for child in self.children:
            yield from child.walk()

    def normal(self, attributes: Iterable[str] | str = DEFAULT_ATTRIBUTES) -> dict[str, Any]:
        """Its normal form: ``{"kind", "name", "label", "status", "attributes", "children"}``,
        no ids and no times, ``attributes`` holding those of ``attributes`` the span has (all of
        them for ``"*"``), JSON-text ones decoded."""
        return {
            "kind": self.kind,
            "name": self.name,
            "label": self.label,
            "status": self.status,
            "attributes": chosen(self.attributes, attributes),
            "children": [child.normal(attributes) for child in self.children],
        }


def chosen(values: Mapping[str, Any], keys: Iterable[str] | str) -> dict[str, Any]:
    """The attributes of ``values`` that ``keys`` names (every one for ``"*"``), sorted by key,
    tuples as lists and JSON text decoded where :data:`JSON_ATTRIBUTES` says, as plain data."""
    names = sorted(values) if keys == ALL_ATTRIBUTES else sorted(set(keys) & set(values))
    return {name: _plain(name, values[name]) for name in names}


def _plain(name: str, value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if name in JSON_ATTRIBUTES and isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:  # capped or redacted text: shown as recorded
            return value
    return value


def build_tree(spans: Sequence[ReadableSpan]) -> list[SpanNode]:
    """The roots of ``spans`` nested by parent (a span whose parent was not captured is a root),
    siblings in their deterministic order (the module's docstring)."""
    nodes = {span.context.span_id: _node(span) for span in spans if span.context is not None}
    roots: list[SpanNode] = []
    for node in nodes.values():
        parent_id = node.span.parent.span_id if node.span.parent is not None else None
        parent = nodes.get(parent_id) if parent_id is not None else None
        if parent is None:
            roots.append(node)
        else:
            node.parent = parent
            parent.children.append(node)
    for node in nodes.values():
        node.children.sort(key=_sibling_order)
    roots.sort(key=lambda node: (node.span.start_time or 0, _sibling_order(node)))
    return roots


def _node(span: ReadableSpan) -> SpanNode:
    attributes = dict(span.attributes or {})
    kind = attributes.get(sc.KIND)
    operation = attributes.get(sc.GEN_AI_OPERATION_NAME)
    if kind is not None and operation in _KINDS_BY_OPERATION:
        kind = _KINDS_BY_OPERATION[operation]
    label = attributes.get(sc.PATH)
    return SpanNode(
        span=span,
        name=span.name,
        kind=str(kind) if kind is not None else None,
        label=str(label) if label is not None else None,
        status="failed" if span.status.status_code.name == "ERROR" else "ok",
        attributes=attributes,
    )


def _sibling_order(node: SpanNode) -> tuple[Any, ...]:
    """Labelled spans by their address, then the others by name (and start, between spans of
    one name): never by an id."""
    if node.label is not None:
        try:
            return (0, parse_label(node.label), "", 0)
        except ValueError:  # a label agenttrace would not write: among the unlabelled
            pass
    return (1, (), node.name, node.span.start_time or 0)
