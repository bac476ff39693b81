"""``assert_tree`` and ``assert_trajectory``: a captured run against what a test expects, with
a diff that says where they differ when they do (docs/how-to/testing.md).

Both raise ``AssertionError`` with the diff as its message, which pytest prints as the
failure, and hide their own frames from pytest's traceback.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agenttrace.testing.captured import CapturedRun
from agenttrace.testing.span_tree import ALL_ATTRIBUTES, SpanNode
from agenttrace.testing.trajectory import MODES, compare, expected_calls, tool_calls
from agenttrace.testing.tree_match import check_expected, diff_forest, forest_matches

Tree = CapturedRun | Sequence[Mapping[str, Any]] | Mapping[str, Any]


def assert_tree(captured: Tree, expected: Mapping[str, Any] | Sequence[Any]) -> None:
    """Fail unless the captured tree is what ``expected`` describes.

    ``captured``: the ``agent_trace`` fixture's run, or a normal form (``captured.tree(...)``,
    one root or a list of them). ``expected``: a node (for a run with one root) or a list of
    nodes (every root, in order), each a dict of any of ``kind``, ``name``, ``label``,
    ``status``, ``attributes`` (a subset: any attribute of the span may be named) and
    ``children``; a key left out is not compared. A value may be ``...`` (anything), a
    ``re.compile(...)`` pattern, a type, a predicate, or the value itself; in a list of
    children ``...`` stands for any number of nodes (``agenttrace.testing.tree_match``).
    """
    __tracebackhide__ = True
    check_expected(expected)
    wanted = list(expected) if isinstance(expected, list) else [expected]
    roots: list[Mapping[str, Any]]
    if isinstance(captured, CapturedRun):
        roots = list(captured.tree(attributes=ALL_ATTRIBUTES))
    elif isinstance(captured, Mapping):
        roots = [captured]
    else:
        roots = list(captured)
    if forest_matches(wanted, roots):
        return
    raise AssertionError(
        "the captured tree is not the one expected:\n" + diff_forest(wanted, roots).text()
    )


def assert_trajectory(
    captured: CapturedRun | Sequence[SpanNode],
    calls: Sequence[Any],
    mode: str = "strict",
    *,
    agent: str | None = None,
) -> None:
    """Fail unless the tool calls the run made are ``calls`` under ``mode``.

    ``calls``: each a tool name (any arguments), ``(name, arguments)`` or ``{"name": ...,
    "arguments": ...}``; a name may be a matcher, ``arguments`` a dict of matchers (the same
    keys as the call's unless it has an ``...`` key: ``{"city": "Paris", ...: ...}``), and in
    ``strict`` mode an ``...`` item stands for any calls. ``mode``: ``strict`` (the same calls in
    order), ``unordered`` (the same calls, any order), ``subset`` (every call made is expected),
    ``superset`` (every call expected was made). ``agent``: only the calls an agent of that name
    made itself (not its sub-agents'). The calls are in tree order
    (``agenttrace.testing.trajectory``).
    """
    __tracebackhide__ = True
    if mode not in MODES:
        raise ValueError(f"mode is one of {', '.join(MODES)}, not {mode!r}")
    roots = captured.nodes() if isinstance(captured, CapturedRun) else list(captured)
    problem = compare(expected_calls(calls), tool_calls(roots, agent), mode)
    if problem is not None:
        raise AssertionError(problem)
