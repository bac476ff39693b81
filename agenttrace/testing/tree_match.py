"""An expected tree against a normal-form tree: whether it matches, and if not, a readable diff.

An expected node is a dict with any of the normal form's keys (``kind``, ``name``, ``label``,
``status``, ``attributes``, ``children``); a key left out is not compared. Values are matchers
(``agenttrace.testing.matchers``). ``attributes`` is a subset: each attribute named must be
there and match, others are ignored. ``children`` is a list in which an ``...`` item stands for
any number of nodes (``[..., {"name": "execute_tool lookup"}, ...]``: somewhere among them);
``children: ...`` accepts any children.

The diff shows both trees as indented text with only what the expected tree asks about: the
actual tree is *projected* onto it (a value that matches is shown as it was expected, ``...``
and all), so the lines that differ are the mismatches and nothing else.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from agenttrace.testing.matchers import align, matches, sequence, shown

HEAD_KEYS = ("name", "kind", "label", "status")
NODE_KEYS = frozenset({*HEAD_KEYS, "attributes", "children"})
MISSING = "<missing>"


def check_expected(expected: Any) -> None:
    """Refuse (``TypeError``, ``ValueError``) an expected tree that is not one: a node that is
    not a dict, a key no node has (a typo would otherwise never be compared)."""
    if expected is Ellipsis:
        return
    if isinstance(expected, list):
        for item in expected:
            check_expected(item)
        return
    if not isinstance(expected, Mapping):
        raise TypeError(f"an expected node is a dict (or ...), not {expected!r}")
    unknown = sorted(set(expected) - NODE_KEYS)
    if unknown:
        raise ValueError(
            f"not keys of a tree node: {', '.join(map(repr, unknown))} "
            f"(they are {', '.join(sorted(NODE_KEYS))})"
        )
    attributes = expected.get("attributes", ...)
    if attributes is not Ellipsis and not isinstance(attributes, Mapping):
        raise TypeError(f"'attributes' is a dict of attribute matchers, not {attributes!r}")
    children = expected.get("children", ...)
    if children is not Ellipsis and not isinstance(children, list):
        raise TypeError(f"'children' is a list of nodes (or ...), not {children!r}")
    if isinstance(children, list):
        check_expected(children)


def node_matches(expected: Any, actual: Mapping[str, Any]) -> bool:
    """Whether the normal-form node ``actual`` is what ``expected`` describes."""
    if expected is Ellipsis:
        return True
    for key in HEAD_KEYS:
        if key in expected and not matches(expected[key], actual.get(key)):
            return False
    attributes = expected.get("attributes", ...)
    if attributes is not Ellipsis:
        present = actual.get("attributes") or {}
        for key, wanted in attributes.items():
            if key not in present or not matches(wanted, present[key]):
                return False
    children = expected.get("children", ...)
    return children is Ellipsis or sequence(children, actual.get("children") or [], node_matches)


def forest_matches(expected: list[Any], actual: list[Mapping[str, Any]]) -> bool:
    """Whether the roots ``actual`` are what the list ``expected`` describes."""
    return sequence(expected, actual, node_matches)


class Diff:
    """The two renderings of a comparison that failed, and the mismatches found on the way."""

    def __init__(self) -> None:
        self.expected: list[str] = []
        self.actual: list[str] = []
        self.problems: list[str] = []

    def text(self, limit: int = 20) -> str:
        """The mismatches (at most ``limit``), then a unified diff of the two renderings."""
        lines = [f"  {problem}" for problem in self.problems[:limit]]
        if len(self.problems) > limit:
            lines.append(f"  ... and {len(self.problems) - limit} more")
        context = max(len(self.expected), len(self.actual))
        lines += difflib.unified_diff(
            self.expected, self.actual, "expected", "actual", lineterm="", n=context
        )
        return "\n".join(lines)


def diff_forest(expected: list[Any], actual: list[Mapping[str, Any]]) -> Diff:
    """The diff of the roots ``actual`` against the list ``expected``."""
    diff = Diff()
    _children(diff, expected, actual, depth=0, where="the roots")
    return diff


def _where(actual: Mapping[str, Any]) -> str:
    label = actual.get("label")
    return f"{actual.get('name')!r}" + (f" [{label}]" if label is not None else "")


def _node(diff: Diff, expected: Any, actual: Mapping[str, Any], depth: int) -> None:
    indent = "  " * depth
    if expected is Ellipsis:
        diff.expected.append(indent + "...")
        diff.actual.append(indent + "...")
        return
    wanted, got = [], []
    for key in HEAD_KEYS:
        if key not in expected:
            continue
        wanted.append(f"{key}={shown(expected[key])}")
        if matches(expected[key], actual.get(key)):
            got.append(wanted[-1])
        else:
            got.append(f"{key}={actual.get(key)!r}")
            diff.problems.append(
                f"{_where(actual)}: {key}: expected {shown(expected[key])}, got {actual.get(key)!r}"
            )
    diff.expected.append(indent + " ".join(wanted or ["(node)"]))
    diff.actual.append(indent + " ".join(got or ["(node)"]))
    attributes = expected.get("attributes", ...)
    if attributes is not Ellipsis:
        present = actual.get("attributes") or {}
        for key, value in attributes.items():
            diff.expected.append(f"{indent}  @ {key} = {shown(value)}")
            if key in present and matches(value, present[key]):
                diff.actual.append(diff.expected[-1])
                continue
            got_value = repr(present[key]) if key in present else MISSING
            diff.actual.append(f"{indent}  @ {key} = {got_value}")
            diff.problems.append(
                f"{_where(actual)}: attribute {key}: expected {shown(value)}, got {got_value}"
            )
    children = expected.get("children", ...)
    if children is Ellipsis:
        return
    _children(diff, children, actual.get("children") or [], depth + 1, _where(actual))


def _children(
    diff: Diff,
    expected: Sequence[Any],
    actual: Sequence[Mapping[str, Any]],
    depth: int,
    where: str,
) -> None:
    indent = "  " * depth
    for step, wanted, got in align(expected, actual, _pair_cost):
        if step == "pair":
            _node(diff, wanted, got[0], depth)
        elif step == "any":
            diff.expected.append(indent + "...")
            diff.actual.append(indent + "...")
        elif step == "missing":
            diff.expected += _rendered(wanted, depth)
            diff.problems.append(f"{where}: no node for expected {_summary(wanted)}")
        else:
            diff.actual.append(indent + _head(got[0]) + _more(got[0]))
            diff.problems.append(f"{where}: unexpected node {_where(got[0])}")


def _summary(expected: Any) -> str:
    return " ".join(f"{k}={shown(expected[k])}" for k in HEAD_KEYS if k in expected) or "node"


def _head(actual: Mapping[str, Any]) -> str:
    return " ".join(f"{key}={actual.get(key)!r}" for key in HEAD_KEYS)


def _more(actual: Mapping[str, Any]) -> str:
    count = len(actual.get("children") or [])
    return f"  (+{count} {'child' if count == 1 else 'children'})" if count else ""


def _rendered(expected: Any, depth: int) -> list[str]:
    """The lines of an expected node that nothing matched, as the diff shows them."""
    scratch = Diff()
    _node(scratch, expected, {}, depth)
    return scratch.expected


def _pair_cost(expected: Any, actual: Mapping[str, Any]) -> int:
    """0 for a node that matches, 1 for a near miss (its name, kind, label and status as
    expected: an attribute or a child differs), 2 for another node."""
    if node_matches(expected, actual):
        return 0
    head = all(matches(expected[k], actual.get(k)) for k in HEAD_KEYS if k in expected)
    return 1 if head else 2
