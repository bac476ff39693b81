"""Rules on the shape of the tree: a step that never ended in a run that did (AT301), a run
that names a parent it is not under (AT302), a sub-agent run whose trace or parent is not its
caller's (AT303)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from agenttrace.formats.session.optree import children, hosted_sessions
from agenttrace.views.lint.rule import Found, LintContext, Rule, label
from agenttrace.views.lint.walk import AgentRun, Node, span_id


def _ended(node: Node) -> bool:
    return node.get("endedAt") is not None


def unended(context: LintContext) -> Iterator[Found]:
    """AT301: a run, turn or op with no end under a parent that ended. A root run a kill cut
    short is not one (nothing above it ended), and a call a kill left in doubt is AT402; the
    run of a joined process that died while its caller went on is one (said so)."""
    for number, root in enumerate(context.loaded.runs, 1):
        if not isinstance(root, Mapping) or not _ended(root):
            continue
        open_nodes: list[Node] = []
        pending: list[Node] = [root]
        while pending:
            node = pending.pop()
            below = [*children(node, "turns"), *children(node, "ops")]
            below += list(hosted_sessions(node))
            for child in below:
                if _ended(child):
                    pending.append(child)
                else:
                    open_nodes.append(child)  # its own children: the one finding says it
        for node in sorted(open_nodes, key=lambda node: str(node.get("path"))):
            joined = ""
            if _source(node) == "joined":
                joined = " (a joined process's: it died, or never flushed)"
            yield Found(
                f"{_kind(node)} {label(node)}{joined} never ended, though the run it is in ended",
                number,
                (node,),
            )


def _kind(node: Node) -> str:
    if "opId" in node:
        name = node.get("name")
        return f"{node.get('kind', 'op')} op" + (f" {name}" if isinstance(name, str) else "")
    return "agent run" if "txnId" in node or "agentId" in node else "turn"


def _source(run: Node) -> str | None:
    attributes = run.get("attributes")
    ingress = attributes.get("ingress") if isinstance(attributes, Mapping) else None
    source = ingress.get("source") if isinstance(ingress, Mapping) else None
    return source if isinstance(source, str) else None


def _joined_here(context: LintContext, root: Node) -> bool:
    """Whether a joined run's ingress names this session as its caller's: a process that
    recorded into another sessions directory made a session of its own, whose caller is in
    another session (not lost)."""
    attributes = root.get("attributes")
    ingress = attributes.get("ingress") if isinstance(attributes, Mapping) else None
    joined = ingress.get("joined") if isinstance(ingress, Mapping) else None
    named = joined.get("session_id") if isinstance(joined, Mapping) else None
    return named is not None and named == context.loaded.session_id


def orphan_roots(context: LintContext) -> Iterator[Found]:
    """AT302: a root run whose ingress says another run of this session started it (a
    sub-agent's, or a joined process's naming this session: docs/session-file.md) though no op
    of the session holds it. Joined runs are placed under their op when the session is read;
    one left a root has lost its caller."""
    for number, root in enumerate(context.loaded.runs, 1):
        if not isinstance(root, Mapping):
            continue
        source = _source(root)
        if source == "sub-agent" or (source == "joined" and _joined_here(context, root)):
            yield Found(
                f"run {number} ({root.get('agentName', '?')}) has a {source} ingress but is a "
                "root: no op of the session ran it",
                number,
                (root,),
            )


def _mismatches(agent: AgentRun) -> list[str]:
    """What about sub-agent run ``agent`` is not its caller's."""
    run, op, caller = agent.node, agent.host, agent.caller
    if op is None or caller is None:
        return []
    wrong: list[str] = []
    checks: list[tuple[str, Any, Any]] = [
        ("trace id", run.get("traceId"), caller.node.get("traceId")),
        ("parent run", run.get("parentTxnId"), caller.node.get("txnId")),
    ]
    if _source(run) != "joined":  # a joined process's run keeps its own origin in its file
        checks.append(("origin run", run.get("originTxnId"), caller.node.get("originTxnId")))
    span = run.get("span")
    if isinstance(span, Mapping) and isinstance(op.get("span"), Mapping):
        checks.append(("parent span", span.get("parentSpanId"), span_id(op)))
    for what, own, expected in checks:
        if isinstance(expected, str) and own != expected:
            wrong.append(f"{what} {own} instead of {expected}")
    path, host = run.get("path"), op.get("path")
    if (
        isinstance(path, str)
        and isinstance(host, str)
        and not path.startswith((host + ":", host + "."))
    ):
        wrong.append(f"label {path} not under {host}")
    return wrong


def sub_agent_mismatch(context: LintContext) -> Iterator[Found]:
    """AT303: a sub-agent run whose trace, parent run, origin or parent span is not that of the
    tool call that ran it."""
    for agent in context.runs:
        wrong = _mismatches(agent)
        if wrong and agent.host is not None:
            yield Found(
                f"sub-agent run {label(agent.node)} ({agent.node.get('agentName', '?')}) under "
                f"{agent.host.get('name')} at {label(agent.host)}: {'; '.join(wrong)}",
                agent.run,
                (agent.node, agent.host),
            )


RULES = (
    Rule("AT301", "unended-span", "a step with no end in a run that ended", unended),
    Rule("AT302", "orphan-root", "a root run that names a parent", orphan_roots),
    Rule(
        "AT303", "sub-agent-mismatch", "a sub-agent not in its caller's trace", sub_agent_mismatch
    ),
)
