"""What an expected value in ``assert_tree`` and ``assert_trajectory`` may be, and how it is
shown in a diff.

- ``...`` (Ellipsis): any value;
- a compiled regular expression (``re.compile(...)``): a string it finds a match in
  (``search``: anchor it with ``^``/``$`` for the whole string);
- a type (``int``, ``str``): an instance of it;
- any other callable: a value it returns true for (an exception it raises is a mismatch);
- a dict: a dict with the same keys, each matching; an ``...`` key (``{"city": "Paris", ...:
  ...}``) lets the actual dict have more keys;
- a list: a list of as many matching items, where an ``...`` item stands for any number of
  items (none included);
- anything else: an equal value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def matches(expected: Any, actual: Any) -> bool:
    """Whether ``actual`` is what ``expected`` describes (the module's docstring)."""
    if expected is Ellipsis:
        return True
    if isinstance(expected, re.Pattern):
        return isinstance(actual, str) and expected.search(actual) is not None
    if isinstance(expected, type):
        return isinstance(actual, expected)
    if callable(expected):
        try:
            return bool(expected(actual))
        except Exception:  # a predicate that cannot read the value: it does not match
            return False
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and _mapping(expected, actual)
    if isinstance(expected, list):
        return isinstance(actual, (list, tuple)) and sequence(expected, list(actual), matches)
    return bool(expected == actual)


def _mapping(expected: Mapping[Any, Any], actual: Mapping[Any, Any]) -> bool:
    keys = [key for key in expected if key is not Ellipsis]
    if Ellipsis not in expected and set(actual) != set(keys):
        return False
    return all(key in actual and matches(expected[key], actual[key]) for key in keys)


def sequence(
    expected: Sequence[Any], actual: Sequence[Any], match: Callable[[Any, Any], bool]
) -> bool:
    """Whether ``actual`` matches ``expected`` item by item with ``match``, an ``...`` item of
    ``expected`` standing for any run of items (a glob over lists)."""
    # can[i][j]: expected[i:] matches actual[j:]
    rows, columns = len(expected), len(actual)
    can = [[False] * (columns + 1) for _ in range(rows + 1)]
    can[rows][columns] = True
    for i in range(rows - 1, -1, -1):
        for j in range(columns, -1, -1):
            if expected[i] is Ellipsis:
                can[i][j] = can[i + 1][j] or (j < columns and can[i][j + 1])
            else:
                can[i][j] = j < columns and can[i + 1][j + 1] and match(expected[i], actual[j])
    return can[0][0]


def align(
    expected: Sequence[Any], actual: Sequence[Any], pair_cost: Callable[[Any, Any], int]
) -> list[tuple[str, Any, list[Any]]]:
    """The cheapest pairing of ``expected`` items with ``actual`` ones, in order, to show where
    they differ: a pair costs ``pair_cost(expected, actual)`` (0 when it matches, 1 for a near
    miss, 2 for unrelated items), an item left unpaired 1, and an ``...`` takes any run of
    items for nothing. Steps, in order: ``("pair", e, [a])``, ``("any", ..., [a, ...])`` (the
    items an ``...`` took), ``("missing", e, [])``, ``("extra", None, [a])``."""
    rows, columns = len(expected), len(actual)
    pairs = {
        (i, j): pair_cost(e, a)
        for i, e in enumerate(expected)
        if e is not Ellipsis
        for j, a in enumerate(actual)
    }
    inf = float("inf")
    cost = [[inf] * (columns + 1) for _ in range(rows + 1)]
    cost[rows][columns] = 0
    for i in range(rows, -1, -1):
        for j in range(columns, -1, -1):
            if i == rows and j == columns:
                continue
            options = []
            if i < rows and expected[i] is Ellipsis:
                options.append(cost[i + 1][j])
                if j < columns:
                    options.append(cost[i][j + 1])
            else:
                if i < rows and j < columns:
                    options.append(pairs[i, j] + cost[i + 1][j + 1])
                if i < rows:
                    options.append(1 + cost[i + 1][j])
            if j < columns:
                options.append(1 + cost[i][j + 1])
            cost[i][j] = min(options)
    steps: list[tuple[str, Any, list[Any]]] = []
    i = j = 0
    while i < rows or j < columns:
        here = cost[i][j]
        if i < rows and expected[i] is Ellipsis:
            taken: list[Any] = []
            while j < columns and cost[i][j + 1] == here and cost[i + 1][j] != here:
                taken.append(actual[j])
                j += 1
            if cost[i + 1][j] == cost[i][j]:
                steps.append(("any", expected[i], taken))
                i += 1
                continue
        if (
            i < rows
            and j < columns
            and expected[i] is not Ellipsis
            and here == (pairs[i, j] + cost[i + 1][j + 1])
        ):
            steps.append(("pair", expected[i], [actual[j]]))
            i, j = i + 1, j + 1
        elif i < rows and expected[i] is not Ellipsis and here == 1 + cost[i + 1][j]:
            steps.append(("missing", expected[i], []))
            i += 1
        else:
            steps.append(("extra", None, [actual[j]]))
            j += 1
    return steps


def shown(expected: Any) -> str:
    """How an expected value reads in a diff: a matcher as what it asks for, a value as its
    ``repr``."""
    if expected is Ellipsis:
        return "..."
    if isinstance(expected, re.Pattern):
        return f"re.compile({expected.pattern!r})"
    if isinstance(expected, type):
        return f"<any {expected.__name__}>"
    if callable(expected):
        return f"<{getattr(expected, '__name__', type(expected).__name__)}>"
    if isinstance(expected, Mapping):
        items = ", ".join(
            "..." if key is Ellipsis else f"{key!r}: {shown(value)}"
            for key, value in expected.items()
        )
        return "{" + items + "}"
    if isinstance(expected, list):
        return "[" + ", ".join(shown(item) for item in expected) + "]"
    return repr(expected)
