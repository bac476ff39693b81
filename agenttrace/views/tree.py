"""The opTree as a text tree (``agenttrace tree``, the demo's report), rendered with rich."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console as RichConsole
from rich.text import Text
from rich.tree import Tree

from agenttrace._internal.escapes import escaped
from agenttrace.formats.session.inflight import PROCESS_GONE
from agenttrace.formats.session.optree import (
    children,
    cost_unknown,
    finite_number,
    has_usage,
    hosted_sessions,
    op_parents,
)
from agenttrace.formats.session.rebuilt import INTERRUPTED
from agenttrace.semconv import REPLAYED
from agenttrace.views.account import IN_DOUBT


def optree_tree(runs: Sequence[Mapping[str, Any]], running_at: int | None = None) -> Tree:
    """Every run's opTree as a rich ``Tree``: path label, kind, name, status, tokens, cost,
    latency; sub-agents under the tool call that ran them.

    ``running_at``: the session's process still runs, and this is now (ms since the epoch):
    a node without an end is ``running for`` the time since it started (``tree --follow``)."""
    root = Tree("session", hide_root=True)
    for number, run in enumerate(runs, 1):
        branch = root.add(
            _line(f"run {number}: trace {run.get('traceId')} (txn {run.get('txnId')})")
        )
        _add_session(branch, run, running_at)
    return root


def render_optree(runs: Sequence[Mapping[str, Any]], width: int = 160) -> list[str]:
    """:func:`optree_tree` as plain text lines (no colour, no terminal needed)."""
    buffer = io.StringIO()
    RichConsole(file=buffer, width=width, color_system=None, no_color=True).print(
        optree_tree(runs), markup=False, highlight=False
    )
    return buffer.getvalue().rstrip("\n").split("\n")


def _add_session(parent: Tree, node: Mapping[str, Any], running_at: int | None) -> None:
    attributes = node.get("attributes")
    latency = _latency(node)
    if node.get("endedAt") is None and running_at is not None and not _gone(node):
        status = _running(node, running_at)
        latency = ""  # how long it has run says it: its wall time so far would say it twice
    elif node.get("endedAt") is None:
        interrupted = isinstance(attributes, Mapping) and attributes.get(INTERRUPTED) is True
        status = "interrupted" if interrupted else "in progress"
    else:
        status = "ok" if node.get("success") else "failed"
    branch = parent.add(
        _line(
            f"{node.get('path')} session {node.get('agentName')} [{node.get('agentId')}] "
            f"{status}{latency}"
        )
    )
    _add_warnings(branch, node)
    for turn in children(node, "turns"):
        running = ""
        if turn.get("endedAt") is None and running_at:
            running = "interrupted" if _gone(turn) else _running(turn, running_at)
        turn_branch = branch.add(
            _line(f"{turn.get('path')} turn {turn.get('index')}{' ' if running else ''}{running}")
        )
        _add_warnings(turn_branch, turn)
        ops = list(children(turn, "ops"))
        branches: list[Tree] = []
        # An op called by another op of the turn (a tool a tool called, or a code agent's
        # code) goes under it, as its span is under that op's span.
        for op, caller in zip(ops, op_parents(ops), strict=True):
            parent = turn_branch if caller is None else branches[caller]
            branches.append(_add_op(parent, op, running_at))


def _running(node: Mapping[str, Any], now: int) -> str:
    """``running for 12s`` (``running`` when its start is not known)."""
    started = finite_number(node.get("startedAt"))
    if not started:
        return "running"
    return f"running for {max(0.0, (now - started) / 1000):.0f}s"


def _gone(node: Mapping[str, Any]) -> bool:
    """Whether ``node`` has not ended and its process is gone (a live view's mark): it is
    interrupted, not running."""
    attributes = node.get("attributes")
    return isinstance(attributes, Mapping) and attributes.get(PROCESS_GONE) is True


def _add_op(parent: Tree, op: Mapping[str, Any], running_at: int | None = None) -> Tree:
    doubt = _attribute(op, IN_DOUBT)
    if op.get("endedAt") is None and isinstance(doubt, str):
        status = f"in doubt ({doubt})"  # a tool call the kill cut short, maybe with its effect
    elif op.get("endedAt") is None and (_gone(op) or _attribute(op, INTERRUPTED) is True):
        status = "interrupted"
    elif op.get("endedAt") is None and running_at is not None:
        status = _running(op, running_at)
    else:
        status = op.get("status") or "in progress"
    details = ""
    accounting = list(children(op, "accounting"))
    if accounting:
        entry = accounting[-1]
        if entry.get("type") == "llm":
            details += _usage(entry)
        cost = finite_number(entry.get("costUsd"))
        if cost is not None:
            details += f" ${cost:.6f}"
        elif cost_unknown(entry):  # never shown as $0: the model has no price
            details += " cost unknown"
        elif entry.get("status") == "interrupted":  # a kill cut it short, maybe billed
            details += " interrupted, cost unknown (the provider may have billed it)"
        if entry.get("type") == "tool":
            details += _sizes(entry)
    elif _replayed(op):
        details += " replayed"
    branch = parent.add(
        _line(f"{op.get('path')} {op.get('kind')} {op.get('name')} {status}{_latency(op)}{details}")
    )
    _add_warnings(branch, op)
    for child in hosted_sessions(op):
        _add_session(branch, child, running_at)
    return branch


_SHOWN_LEVELS = ("WRN", "ERR")
_MAX_SHOWN = 300


def _add_warnings(branch: Tree, node: Mapping[str, Any]) -> None:
    """The node's WRN and ERR log entries (its failure, agenttrace's own warnings about it,
    the program's), each a line under it: the tree says where they happened."""
    for entry in children(node, "logs"):
        level = entry.get("level")
        if level in _SHOWN_LEVELS:
            message = str(entry.get("message"))
            if len(message) > _MAX_SHOWN:  # the file has it whole; a tree line stays a line
                message = message[:_MAX_SHOWN] + "..."
            branch.add(_line(f"{level} {message}"))


def _attribute(node: Mapping[str, Any], key: str) -> Any:
    attributes = node.get("attributes")
    return attributes.get(key) if isinstance(attributes, Mapping) else None


def _replayed(op: Mapping[str, Any]) -> bool:
    """Whether ``op`` was answered from the journal by a re-entered run (nothing ran or was
    bought: it has no accounting entry)."""
    span = op.get("span")
    attributes = span.get("attributes") if isinstance(span, Mapping) else None
    return isinstance(attributes, Mapping) and attributes.get(REPLAYED) is True


def _sizes(entry: Mapping[str, Any]) -> str:
    """`` chars 13/4``: a tool call's input and output sizes; `` chars 13`` for a call that
    returned nothing (a failed one), never ``13/None``."""
    chars_in, chars_out = (
        finite_number(entry.get("charactersIn")),
        finite_number(entry.get("charactersOut")),
    )
    if chars_in is None and chars_out is None:
        return ""
    text = f" chars {_count(chars_in)}"
    return text if chars_out is None else f"{text}/{_count(chars_out)}"


def _line(text: str) -> Text:
    """One node's line, plain text: names come from agents and tools, and a terminal escape or
    a newline in one is shown as its escape, never obeyed."""
    return Text(escaped(text))


def _usage(entry: Mapping[str, Any]) -> str:
    """`` in 11 out 7 (cache r 3 w 20)`` (the cache part only when it read or wrote any);
    `` no usage`` for an attempt that reported none (a failed one), never ``in None out None``."""
    if not has_usage(entry):
        return " no usage"
    tokens = entry["tokens"]
    counts = [
        f"{label} {_count(tokens.get(key))}"
        for label, key in (("in", "inputTokens"), ("out", "outputTokens"))
    ]
    text = " " + " ".join(counts)
    read = finite_number(tokens.get("cacheReadInputTokens"))
    written = finite_number(tokens.get("cacheWriteInputTokens"))
    if read or written:  # what the cache did costs differently: both, or a write looks free
        text += f" (cache r {_count(read or 0)} w {_count(written or 0)})"
    return text


def _count(value: Any) -> str:
    number = finite_number(value)
    return "?" if number is None else f"{number:.0f}"


def _latency(node: Mapping[str, Any]) -> str:
    latency = finite_number(node.get("latencyMs"))
    return f" {latency:.0f}ms" if latency is not None else ""
