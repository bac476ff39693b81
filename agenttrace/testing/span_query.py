"""``SpanQuery``: pydantic-evals' serialisable span query, read over the captured tree.

The same dictionary a test gives pydantic-evals' ``SpanTree.find`` (``pydantic_evals.otel``)
selects the same spans here, with no dependency on it or on Logfire: queries carry between the
two. Where pydantic-evals reads a falsy bound as "no condition" (``max_child_count=0``,
``max_depth=0``), this reads it as the bound it says; a key it does not know is refused, so a
misspelt condition never matches everything.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, TypedDict

from agenttrace.testing.span_tree import SpanNode


class SpanQuery(TypedDict, total=False):
    """Conditions on a span, all of which must hold (pydantic-evals' fields, in its order)."""

    name_equals: str
    name_contains: str
    name_matches_regex: str
    """Matched at the start of the name (``re.match``), as pydantic-evals does."""
    has_attributes: dict[str, Any]
    """Each attribute present with that value (its raw value: JSON text stays text)."""
    has_attribute_keys: list[str]
    min_duration: timedelta | float
    """Seconds, or a ``timedelta``."""
    max_duration: timedelta | float
    not_: SpanQuery
    and_: list[SpanQuery]
    or_: list[SpanQuery]
    """Any of them; alone at its level, as in pydantic-evals."""
    min_child_count: int
    max_child_count: int
    some_child_has: SpanQuery
    all_children_have: SpanQuery
    no_child_has: SpanQuery
    stop_recursing_when: SpanQuery
    """Descendant and ancestor conditions do not look past a span that matches this."""
    min_descendant_count: int
    max_descendant_count: int
    some_descendant_has: SpanQuery
    all_descendants_have: SpanQuery
    no_descendant_has: SpanQuery
    min_depth: int
    """How many ancestors at least (a root's depth is 0)."""
    max_depth: int
    some_ancestor_has: SpanQuery
    all_ancestors_have: SpanQuery
    no_ancestor_has: SpanQuery


FIELDS = frozenset(SpanQuery.__annotations__)


def check_query(query: Any) -> None:
    """Refuse (``ValueError``, ``TypeError``) what is not a query: not a mapping, a key that is
    no field (a typo would otherwise match every span), ``or_`` beside other keys."""
    if not isinstance(query, Mapping):
        raise TypeError(f"a SpanQuery is a dict of conditions, not {query!r}")
    unknown = sorted(set(query) - FIELDS)
    if unknown:
        raise ValueError(
            f"not SpanQuery fields: {', '.join(unknown)} (the fields: {', '.join(sorted(FIELDS))})"
        )
    if "or_" in query and len(query) > 1:
        raise ValueError("'or_' cannot be combined with other conditions at the same level")
    for key in (
        "not_",
        "some_child_has",
        "all_children_have",
        "no_child_has",
        "stop_recursing_when",
        "some_descendant_has",
        "all_descendants_have",
        "no_descendant_has",
        "some_ancestor_has",
        "all_ancestors_have",
        "no_ancestor_has",
    ):
        if key in query:
            check_query(query[key])
    for key in ("and_", "or_"):
        for inner in query.get(key, ()):
            check_query(inner)


def matches(node: SpanNode, query: Mapping[str, Any]) -> bool:
    """Whether ``node`` meets every condition of ``query`` (checked by :func:`check_query`)."""
    if "or_" in query:
        return any(matches(node, inner) for inner in query["or_"])
    if "not_" in query and matches(node, query["not_"]):
        return False
    if not all(matches(node, inner) for inner in query.get("and_", ())):
        return False
    return all(check(node, query) for check in _CHECKS)


def _name(node: SpanNode, query: Mapping[str, Any]) -> bool:
    if "name_equals" in query and node.name != query["name_equals"]:
        return False
    if "name_contains" in query and query["name_contains"] not in node.name:
        return False
    return "name_matches_regex" not in query or bool(
        re.match(query["name_matches_regex"], node.name)
    )


def _attributes(node: SpanNode, query: Mapping[str, Any]) -> bool:
    wanted = query.get("has_attributes", {})
    if not all(k in node.attributes and _same(node.attributes[k], v) for k, v in wanted.items()):
        return False
    return all(key in node.attributes for key in query.get("has_attribute_keys", ()))


def _same(actual: Any, wanted: Any) -> bool:
    """Attribute values compare as plain data: OpenTelemetry keeps sequences as tuples."""
    if isinstance(actual, tuple) and isinstance(wanted, list):
        return list(actual) == wanted
    return bool(actual == wanted)


def _seconds(value: timedelta | float) -> timedelta:
    return value if isinstance(value, timedelta) else timedelta(seconds=value)


def _duration(node: SpanNode, query: Mapping[str, Any]) -> bool:
    if "min_duration" in query and node.duration < _seconds(query["min_duration"]):
        return False
    return "max_duration" not in query or node.duration <= _seconds(query["max_duration"])


def _bounds(count: int, query: Mapping[str, Any], least: str, most: str) -> bool:
    lowest: int = query.get(least, count)
    highest: int = query.get(most, count)
    return lowest <= count <= highest


def _children(node: SpanNode, query: Mapping[str, Any]) -> bool:
    children = node.children
    if not _bounds(len(children), query, "min_child_count", "max_child_count"):
        return False
    return _quantified(children, query, "some_child_has", "all_children_have", "no_child_has")


def _quantified(
    nodes: list[SpanNode], query: Mapping[str, Any], some: str, all_: str, none: str
) -> bool:
    if some in query and not any(matches(n, query[some]) for n in nodes):
        return False
    if all_ in query and not all(matches(n, query[all_]) for n in nodes):
        return False
    return none not in query or not any(matches(n, query[none]) for n in nodes)


def _descendants(node: SpanNode, query: Mapping[str, Any]) -> bool:
    if not _bounds(len(node.descendants), query, "min_descendant_count", "max_descendant_count"):
        return False
    keys = ("some_descendant_has", "all_descendants_have", "no_descendant_has")
    if not any(key in query for key in keys):
        return True
    stop = query.get("stop_recursing_when")
    pruned: list[SpanNode] = []
    pending = list(node.children)
    while pending:
        child = pending.pop(0)
        pruned.append(child)
        if stop is None or not matches(child, stop):
            pending[:0] = child.children
    return _quantified(pruned, query, *keys)


def _ancestors(node: SpanNode, query: Mapping[str, Any]) -> bool:
    ancestors = node.ancestors
    if not _bounds(len(ancestors), query, "min_depth", "max_depth"):
        return False
    stop = query.get("stop_recursing_when")
    if stop is not None:
        for i, ancestor in enumerate(ancestors):
            if matches(ancestor, stop):  # it is looked at, those above it are not
                ancestors = ancestors[: i + 1]
                break
    keys = ("some_ancestor_has", "all_ancestors_have", "no_ancestor_has")
    return _quantified(ancestors, query, *keys)


_CHECKS: tuple[Callable[[SpanNode, Mapping[str, Any]], bool], ...] = (
    _name,
    _attributes,
    _duration,
    _children,
    _descendants,
    _ancestors,
)
