"""A run's trajectory: the tool calls it made, and how one is compared with expected calls.

The calls are the tool spans in tree order (depth first: a call before the calls made inside
it, calls of one turn in the order they started), each with its name and its arguments as the
span records them (decoded from ``gen_ai.tool.call.arguments``, which needs content on spans:
the ``agent_trace`` fixture turns it on).

Modes, as agentevals names them:

- ``strict``: the same calls in the same order (an ``...`` item stands for any calls);
- ``unordered``: the same calls in any order, as many of each;
- ``subset``: every call made is one expected (the agent called nothing else; calls expected
  may be missing);
- ``superset``: every call expected was made (others may have been made too).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agenttrace import semconv as sc
from agenttrace.testing.matchers import align, matches, sequence, shown
from agenttrace.testing.span_tree import SpanNode

MODES = ("strict", "unordered", "subset", "superset")
NO_ARGUMENTS = object()
"""The arguments of a call whose span does not carry them (content off)."""


@dataclass(frozen=True)
class ToolCall:
    """A tool call the run made."""

    name: str
    arguments: Any
    """The arguments as recorded (a dict), or :data:`NO_ARGUMENTS`."""
    node: SpanNode

    def __str__(self) -> str:
        shown_arguments = "<not recorded>" if self.arguments is NO_ARGUMENTS else self.arguments
        return f"{self.name!r} {shown_arguments!r}"


@dataclass(frozen=True)
class Expected:
    """An expected call: a name matcher and an arguments matcher (``...``: any)."""

    name: Any
    arguments: Any = Ellipsis

    def __str__(self) -> str:
        return f"{shown(self.name)} {shown(self.arguments)}"

    def matches(self, call: ToolCall) -> bool:
        if not matches(self.name, call.name):
            return False
        if self.arguments is Ellipsis:
            return True
        return call.arguments is not NO_ARGUMENTS and matches(self.arguments, call.arguments)


def tool_calls(roots: Sequence[SpanNode], agent: str | None = None) -> list[ToolCall]:
    """The tool calls under ``roots`` in tree order; ``agent``: only those an agent of that name
    made itself (not its sub-agents')."""
    calls = []
    for root in roots:
        for node in root.walk():
            if node.kind != sc.KIND_TOOL:
                continue
            if agent is not None and _caller(node) != agent:
                continue
            calls.append(_call(node))
    return calls


def _caller(node: SpanNode) -> Any:
    """The name of the agent whose run ``node`` is in: its nearest agent-run ancestor's."""
    for ancestor in node.ancestors:
        if ancestor.kind == sc.KIND_SESSION:
            return ancestor.attributes.get(sc.GEN_AI_AGENT_NAME)
    return None


def _call(node: SpanNode) -> ToolCall:
    name = node.attributes.get(sc.GEN_AI_TOOL_NAME) or node.name.removeprefix("execute_tool ")
    raw = node.attributes.get(sc.GEN_AI_TOOL_CALL_ARGUMENTS)
    arguments: Any = NO_ARGUMENTS
    if isinstance(raw, str):
        try:
            arguments = json.loads(raw)
        except ValueError:  # capped or redacted: compared as the text recorded
            arguments = raw
    return ToolCall(str(name), arguments, node)


def expected_calls(calls: Sequence[Any]) -> list[Any]:
    """Each expected call as an :class:`Expected` (``...`` items kept): a name (or a name
    matcher), ``(name, arguments)``, or ``{"name": ..., "arguments": ...}``."""
    found: list[Any] = []
    for call in calls:
        if call is Ellipsis or isinstance(call, Expected):
            found.append(call)
        elif isinstance(call, tuple) and len(call) == 2:
            found.append(Expected(call[0], call[1]))
        elif isinstance(call, Mapping):
            unknown = set(call) - {"name", "arguments"}
            if "name" not in call or unknown:
                raise ValueError(f"an expected call is {{'name': ..., 'arguments': ...}}: {call!r}")
            found.append(Expected(call["name"], call.get("arguments", Ellipsis)))
        else:
            found.append(Expected(call))
    return found


def compare(expected: list[Any], actual: list[ToolCall], mode: str) -> str | None:
    """``None`` when ``actual`` is what ``expected`` describes under ``mode``, else why not,
    as lines to print."""
    if mode == "strict":
        if sequence(expected, actual, lambda e, a: e.matches(a)):
            return None
        return _strict_diff(expected, actual)
    if Ellipsis in expected:
        raise ValueError(f"'...' stands for any calls in strict mode only, not {mode!r}")
    pairs = _matching(expected, actual)
    lonely_expected = [e for i, e in enumerate(expected) if i not in pairs]
    paired = set(pairs.values())
    lonely_actual = [a for j, a in enumerate(actual) if j not in paired]
    missing = mode in ("unordered", "superset") and lonely_expected
    extra = mode in ("unordered", "subset") and lonely_actual
    if not missing and not extra:
        return None
    lines = [f"the tool calls ({mode}) differ:"]
    if missing:
        lines += ["  expected, not made:", *(f"    {e}" for e in lonely_expected)]
    if extra:
        lines += ["  made, not expected:", *(f"    {a}" for a in lonely_actual)]
    lines += ["  the calls made, in order:", *(f"    {a}" for a in actual)]
    if not actual:
        lines.append("    (none)")
    return "\n".join(lines)


def _matching(expected: list[Expected], actual: list[ToolCall]) -> dict[int, int]:
    """The most expected calls paired each with a distinct call it matches (expected index ->
    actual index): augmenting paths, so an early greedy pairing never hides a full one."""
    pairs: dict[int, int] = {}
    owner: dict[int, int] = {}

    def place(i: int, seen: set[int]) -> bool:
        for j, call in enumerate(actual):
            if j in seen or not expected[i].matches(call):
                continue
            seen.add(j)
            if j not in owner or place(owner[j], seen):
                owner[j], pairs[i] = i, j
                return True
        return False

    for i in range(len(expected)):
        place(i, set())
    return pairs


def _strict_diff(expected: list[Any], actual: list[ToolCall]) -> str:
    def cost(e: Expected, a: ToolCall) -> int:
        return 0 if e.matches(a) else 1 if matches(e.name, a.name) else 2

    lines = ["the tool calls (strict) differ (- expected, + made):"]
    for step, wanted, got in align(expected, actual, cost):
        if step == "any":
            lines.append("    ..." + (f" ({len(got)} calls)" if got else ""))
        elif step == "pair" and wanted.matches(got[0]):
            lines.append(f"    {got[0]}")
        elif step == "pair":
            lines += [f"  - {wanted}", f"  + {got[0]}"]
        elif step == "missing":
            lines.append(f"  - {wanted}")
        else:
            lines.append(f"  + {got[0]}")
    return "\n".join(lines)
