"""The opTree of a run no session file holds whole, rebuilt from its event stream.

A process killed before its run ended may have written no session file at all, or one from
before most of the run. Its stream has more: a canonical event for everything said, and an
``op_accounted`` line for every LLM attempt and tool call that ended (docs/events.md), each with
the op's trace id, span id and path label. :func:`with_rebuilt_runs` puts those ops into the
runs of what was read: a run the session file lacks is built from them (its root marked
``agenttrace.interrupted``), and a run the session file holds unfinished gets the ops that ended
after that file was written. So does a run whose root had ended while an op in it still ran (a
tool left in a thread, a framework's handoff): the ops that ended after it land in it too. A run
of the session file with everything in it ended is complete and left alone; an op that ended
there is never replaced, so no op is ever counted twice.

What a rebuilt node cannot know is left out, as the format allows: no ``span`` (the exports make
one from the node's fields, as for files of the first release), no ``endedAt`` on a run or a
turn, an empty ``ingress``. Ops that never ended (the one the kill interrupted) are not there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from agenttrace._internal.config import ReadLimits
from agenttrace._internal.times import ts_ms
from agenttrace.formats.session.files import LoadedFile
from agenttrace.formats.session.optree import hosted_sessions, session_ops
from agenttrace.formats.session.schema import OP_ACCOUNTED
from agenttrace.model.paths import format_label, parse_label

INTERRUPTED = "agenttrace.interrupted"
"""The attribute of a run's root that never ended as far as its files say: rebuilt from the
stream, or resumed after its process was gone."""

Node = dict[str, Any]

_LEVELS_OF_ROOT_OP = 8
"""Levels of JSON from the document down to an op of a run's root (document, runs, run, turns,
turn, ops, op, accounting...)."""
_LEVELS_PER_RUN = 6
"""Levels each sub-agent run adds below its host op (childSessions, run, turns, turn, ops, op)."""


def with_rebuilt_runs(loaded: LoadedFile, max_depth: int | None = None) -> LoadedFile:
    """``loaded`` with every op its stream's ``op_accounted`` lines give that its runs lack
    (see the module docstring); ``loaded`` itself when there is none. An op whose place would
    nest the tree deeper than ``max_depth`` levels (``AGENTTRACE_MAX_NESTING_DEPTH``, the
    limit every session file is read with) is left out, as a file that deep would be refused."""
    if not loaded.accounted:
        return loaded
    if max_depth is None:
        max_depth = ReadLimits.from_env().nesting_depth
    runs = [dict(run) for run in loaded.runs]
    by_origin = {run.get("originTxnId") or run.get("txnId"): run for run in runs}
    session_id = loaded.session_id or _text(loaded.meta.get("session_id"))
    builder = _Builder(loaded.events, max_depth)
    added = False
    for origin, lines in _by_origin(loaded.accounted).items():
        run = by_origin.get(origin)
        if run is not None and run.get("endedAt") is not None and _whole(run):
            continue  # a finished run of the session file: it has every op
        if run is None:
            run = builder.root(origin, lines, session_id or origin)
            if run is None:
                continue
            runs.append(run)
            by_origin[origin] = run
        if builder.merge(run, lines):
            added = True
    if not added:
        return loaded
    _name_from_journal(runs, loaded.journal)
    runs.sort(key=lambda run: run.get("startedAt") or 0)
    return dataclasses.replace(loaded, runs=runs)


def _whole(run: Mapping[str, Any]) -> bool:
    """Whether every op under ``run``, in its sub-agent runs too, has ended."""
    pending: list[Mapping[str, Any]] = [run]
    while pending:  # not recursive: runs nest as deep as agents
        for op in session_ops(pending.pop()):
            if op.get("endedAt") is None:
                return False
            pending.extend(hosted_sessions(op))
    return True


def _name_from_journal(runs: Iterable[Node], journal: Iterable[Mapping[str, Any]]) -> None:
    """Each op rebuilt without a name (one known only as the host of a sub-agent run, or by an
    event logged in it: its own ``op_accounted`` line never came, its process was killed) gets
    the name its journal step says (a tool's name, an LLM call's model), found by its root
    run's origin and its label."""
    names: dict[tuple[str, str], str] = {}
    for line in journal:
        run, label, name = line.get("run"), line.get("step"), line.get("name")
        if isinstance(run, str) and isinstance(label, str) and isinstance(name, str) and name:
            names.setdefault((run, label), name)
    if not names:
        return
    for run in runs:
        origin = run.get("originTxnId") or run.get("txnId")
        if not isinstance(origin, str):
            continue
        pending: list[Mapping[str, Any]] = [run]
        while pending:  # not recursive: runs nest as deep as agents
            for op in session_ops(pending.pop()):
                if op.get("name") == "" and isinstance(op, dict):
                    op["name"] = names.get((origin, str(op.get("path"))), "")
                pending.extend(hosted_sessions(op))


def with_started_nodes(loaded: LoadedFile, max_depth: int | None = None) -> LoadedFile:
    """``loaded`` with a node for every agent run, turn and op that its events were logged in
    and its runs lack: what has started and not ended yet, for a live view of a running
    session (``agenttrace serve``, ``agenttrace tree --follow``). Apply it after
    :func:`with_rebuilt_runs`, which places every op that ended.

    Every event carries the path label and trace id of the scope it was logged in
    (docs/events.md), so a sub-agent run appears under its tool call with the first thing it
    hears, before any of its ops ends. Such a node has no end and a ``startedAt`` no later than
    its first event's ``ts`` (the stream says when it was seen, not when it began); an op that
    has logged nothing yet is not there. A run no file holds is made from its events (its
    agent the first one logged at its root level). Finished runs are left alone; nothing is
    written back: the other commands and ``resume`` never see these nodes."""
    if max_depth is None:
        max_depth = ReadLimits.from_env().nesting_depth
    runs = [dict(run) for run in loaded.runs]
    by_trace = {run.get("traceId"): run for run in runs if run.get("path", "0") == "0"}
    builder = _Builder(loaded.events, max_depth)
    root_agents = _root_agents(loaded.events)
    session_id = loaded.session_id or _text(loaded.meta.get("session_id"))
    added = False
    for event in loaded.events:
        trace, agent = event.get("trace_id"), event.get("agent_id")
        started = ts_ms(event.get("ts"))
        if not isinstance(trace, str) or not isinstance(agent, str) or started is None:
            continue
        try:
            address = parse_label(str(event.get("path")))
        except ValueError:
            continue
        if _LEVELS_PER_RUN * (len(address) // 3) + _LEVELS_OF_ROOT_OP > max_depth:
            continue  # deeper than any file may nest
        run = by_trace.get(trace)
        if run is None:
            root_agent = root_agents.get(trace, agent)
            name = builder.names.get(root_agent, root_agent)
            run = {
                "id": None,
                "traceId": trace,
                "spanId": builder.root_spans.get(trace),
                "path": "0",
                "agentId": root_agent,
                "agentName": name,
                "callPath": name,
                "txnId": None,
                "originTxnId": None,
                "parentTxnId": None,
                "sessionId": session_id,
                "startedAt": started,
                "attributes": {"ingress": {}},
                "turns": [],
            }
            runs.append(run)
            by_trace[trace] = run
            added = True
        if run.get("endedAt") is not None:
            continue  # a finished run has every node
        if _seen(run, address, started, agent, builder.names):
            added = True
    if not added:
        return loaded
    runs.sort(key=lambda run: run.get("startedAt") or 0)
    return dataclasses.replace(loaded, runs=runs)


def _root_agents(events: list[dict[str, Any]]) -> dict[str, str]:
    """trace id -> the agent whose run it is, as far as the events say: the agent of its first
    event at the run's own level (an ``agent_created`` logged in an op is a sub-agent's
    creation, not the run's), else the root agent created last, outside any run (it has no
    trace), before the trace's first event."""
    roots: dict[str, str] = {}
    guessed: dict[str, str] = {}
    created: str | None = None  # the last agent created outside any run
    for event in events:
        trace, agent = event.get("trace_id"), event.get("agent_id")
        if not isinstance(agent, str):
            continue
        kind = event.get("event_type")
        if not isinstance(trace, str):
            if kind == "agent_created":
                created = agent
            continue
        if created is not None:
            guessed.setdefault(trace, created)
        try:
            address = parse_label(str(event.get("path")))
        except ValueError:
            continue
        if len(address) == 2 and kind == "agent_created":
            continue  # logged in an op of the run: a sub-agent was made there
        if len(address) <= 2:
            roots.setdefault(trace, agent)
    return {**guessed, **roots}


def _seen(
    run: Node, address: tuple[int, ...], started: int, agent: str, names: dict[str, str]
) -> bool:
    """Make the nodes on the way to ``address`` under ``run`` that are missing, seen at
    ``started`` by an event of ``agent``; True if any was made."""
    session = run
    depth = 0
    made = False
    while len(address) > depth:
        _earliest(session, started)
        turns = len(session.get("turns") or [])
        turn = _child(session, "turns", address[: depth + 1], _turn, started)
        made = made or len(session["turns"]) != turns
        if len(address) == depth + 1:
            break
        ops = len(turn.get("ops") or [])
        op = _child(turn, "ops", address[: depth + 2], _started_op, started)
        made = made or len(turn["ops"]) != ops
        if len(address) == depth + 2:
            break
        hosted = list(hosted_sessions(op))
        entry = {  # what _hosted reads of an op's accounting, as far as an event says it
            "agentId": agent,
            "txnId": None,
            "originTxnId": run.get("originTxnId"),
            "timestamp": started,
            "latency": 0,
        }
        session = _hosted(op, address[: depth + 3], session, entry, names)
        made = made or len(list(hosted_sessions(op))) != len(hosted)
        depth += 3
    return made


def running_op(
    run: Node,
    address: tuple[int, ...],
    started: int,
    agent: str,
    names: dict[str, str],
    max_depth: int,
) -> Node | None:
    """The op at ``address`` (an op's: its length 2, 5, 8, ...) under ``run``, known to run
    there since ``started`` in ``agent`` (a step journal's ``intent``: ``record.inflight``):
    made with the turns, host ops and sub-agent runs on the way when missing, as an event
    logged in it would make them (:func:`with_started_nodes`). ``None`` when that op has ended
    (its node is whole) or its place would nest deeper than ``max_depth`` levels."""
    if len(address) % 3 != 2:
        return None
    if _LEVELS_PER_RUN * (len(address) // 3) + _LEVELS_OF_ROOT_OP > max_depth:
        return None
    known = _node_at(run, address)
    if known is not None and known.get("endedAt") is not None:
        return None  # checked first: an ended op's start is its own, never moved
    _seen(run, address, started, agent, names)
    return _node_at(run, address)


def _node_at(run: Node, address: tuple[int, ...]) -> Node | None:
    """The node at ``address`` under ``run``, if it is there (nothing is made)."""
    node: Node = run
    for depth in range(len(address)):
        label = format_label(address[: depth + 1])
        if depth % 3 == 2:
            found = [
                child
                for child in hosted_sessions(node)
                if isinstance(child, dict) and child.get("path") == label
            ]
        else:
            key = "turns" if depth % 3 == 0 else "ops"
            found = [
                child
                for child in node.get(key) or []
                if isinstance(child, dict) and child.get("path") == label
            ]
        if not found:
            return None
        node = found[0]
    return node


def _started_op(address: tuple[int, ...], label: str) -> Node:
    """An op known only because an event was logged in it: not ended, its kind not known
    until it ends (then its ``op_accounted`` line says it)."""
    return {
        "opId": None,
        "path": label,
        "kind": "op",
        "name": "",
        "startedAt": 0,
        "attributes": {},
        "logs": [],
        "accounting": [],
    }


def mark_interrupted(runs: Iterable[Node]) -> None:
    """Mark each run that never ended as interrupted (a resumed session's earlier process is
    gone: its runs will not end)."""
    for run in runs:
        if run.get("endedAt") is None and isinstance(run.get("attributes"), dict):
            run["attributes"][INTERRUPTED] = True


def _by_origin(accounted: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The ``op_accounted`` lines by the run they belong to, in stream order."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for line in accounted:
        if line.get("event_type") != OP_ACCOUNTED:
            continue
        origin = line["accounting"]["originTxnId"]
        grouped.setdefault(origin, []).append(line)
    return grouped


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _started(entry: Mapping[str, Any]) -> int:
    """When an op started (ms), from when it ended and how long it took."""
    return max(0, int(entry["timestamp"] - entry["latency"]))


class _Builder:
    """Builds and fills runs from ``op_accounted`` lines, with the events for names."""

    def __init__(self, events: list[dict[str, Any]], max_depth: int) -> None:
        self.max_depth = max_depth
        self.names: dict[str, str] = {}
        self.root_spans: dict[str, str] = {}  # trace id -> the span id of its run's root
        self.first_agent: dict[str, str] = {}  # trace id -> the agent of its first event
        for event in events:
            agent = event.get("agent_id")
            if event.get("event_type") == "agent_created" and isinstance(agent, str):
                name = event.get("name")
                if isinstance(name, str) and name:
                    self.names[agent] = name
            trace = event.get("trace_id")
            if not isinstance(trace, str):
                continue
            if event.get("path") == "0" and isinstance(event.get("span_id"), str):
                self.root_spans.setdefault(trace, event["span_id"])
            if isinstance(agent, str) and _root_level(event.get("path")):
                self.first_agent.setdefault(trace, agent)

    def root(self, origin: str, lines: list[dict[str, Any]], session_id: str) -> Node | None:
        """A run's root node for ``origin``, from its ops' lines (``None`` if nothing in them
        names its agent)."""
        own = [line for line in lines if line["accounting"]["txnId"] == origin]
        trace = next((line["trace_id"] for line in lines if "trace_id" in line), None)
        agent = own[0]["agent_id"] if own else self.first_agent.get(trace or "")
        if agent is None:
            return None
        call_path: str | None = next(
            (entry["callPath"] for line in own if (entry := line["accounting"]).get("callPath")),
            None,
        )
        name = self.names.get(agent) or (call_path.rsplit("/", 1)[-1] if call_path else agent)
        call_path = call_path or name
        return {
            "id": origin,
            "traceId": trace,
            "spanId": self.root_spans.get(trace or ""),
            "path": "0",
            "agentId": agent,
            "agentName": name,
            "callPath": call_path,
            "txnId": origin,
            "originTxnId": origin,
            "parentTxnId": None,
            "sessionId": session_id,
            "startedAt": min(_started(line["accounting"]) for line in lines),
            "attributes": {"ingress": {}, INTERRUPTED: True},
            "turns": [],
        }

    def merge(self, run: Node, lines: list[dict[str, Any]]) -> bool:
        """Put each op of ``lines`` that ``run`` lacks (or holds unfinished) in its place;
        True if any was."""
        changed = False
        for line in lines:
            try:
                address = parse_label(line["path"])
            except ValueError:
                continue
            if len(address) % 3 != 2:
                continue  # not an op's label
            if _LEVELS_PER_RUN * (len(address) // 3) + _LEVELS_OF_ROOT_OP > self.max_depth:
                continue  # deeper than any file may nest
            if _place(run, address, line, self.names):
                changed = True
        return changed


def _root_level(path: Any) -> bool:
    """Whether an event's path is the root run's own (its root, a turn or an op of it)."""
    if not isinstance(path, str):
        return False
    try:
        return len(parse_label(path)) <= 2
    except ValueError:
        return False


def _place(
    run: Node, address: tuple[int, ...], line: dict[str, Any], names: dict[str, str]
) -> bool:
    """Put the op of ``line`` at ``address`` under ``run``, making the turns, host ops and
    sub-agent runs on the way; False if it is there, ended, already."""
    entry = line["accounting"]
    started = _started(entry)
    session = run
    depth = 0
    while True:
        _earliest(session, started)
        turn = _child(session, "turns", address[: depth + 1], _turn, started)
        op_address = address[: depth + 2]
        if len(op_address) == len(address):
            return _complete(turn, op_address, line)
        host = _child(turn, "ops", op_address, _host_op, started)
        session = _hosted(host, address[: depth + 3], session, entry, names)
        depth += 3


def _earliest(node: Node, started: int) -> None:
    """``node`` started no later than ``started``, when it is a rebuilt node."""
    if not node.get("startedAt") or started < node["startedAt"]:
        node["startedAt"] = started


def _child(parent: Node, key: str, address: tuple[int, ...], make: Any, started: int) -> Node:
    """The node at ``address`` in ``parent[key]`` (made, in order, if missing), started no
    later than ``started``."""
    label = format_label(address)
    children = parent.setdefault(key, [])
    for child in children:
        if isinstance(child, dict) and child.get("path") == label:
            _earliest(child, started)
            return child
    node: Node = make(address, label)
    node["startedAt"] = started
    index = address[-1]
    at = len(children)
    for position, child in enumerate(children):
        if isinstance(child, dict) and _position(child) > index:
            at = position
            break
    children.insert(at, node)
    return node


def _position(node: Node) -> int:
    try:
        return parse_label(str(node.get("path")))[-1]
    except (ValueError, IndexError):
        return 0


def _turn(address: tuple[int, ...], label: str) -> Node:
    return {
        "id": None,
        "index": address[-1],
        "path": label,
        "startedAt": 0,
        "attributes": {},
        "ops": [],
    }


def _host_op(address: tuple[int, ...], label: str) -> Node:
    """An op known only because the sub-agent runs it hosted had ops that ended."""
    return {
        "opId": None,
        "path": label,
        "kind": "session",
        "name": "",
        "startedAt": 0,
        "attributes": {},
        "logs": [],
        "accounting": [],
    }


def _hosted(
    op: Node,
    address: tuple[int, ...],
    parent: Node,
    entry: Mapping[str, Any],
    names: dict[str, str],
) -> Node:
    """The sub-agent run at ``address`` hosted by ``op`` (made if missing, from the op of it
    whose ``entry`` led here); ``op`` keeps one run as ``childSession``, several as
    ``childSessions``."""
    label = format_label(address)
    hosted = op.get("childSessions") or ([op["childSession"]] if "childSession" in op else [])
    for known in hosted:
        if isinstance(known, dict) and known.get("path") == label:
            return known
    call_path = entry.get("callPath")
    agent = entry["agentId"]
    name = names.get(agent) or (call_path.rsplit("/", 1)[-1] if call_path else agent)
    run: Node = {
        "id": entry["txnId"],
        "traceId": parent.get("traceId"),
        "spanId": None,
        "path": label,
        "agentId": agent,
        "agentName": name,
        "callPath": call_path or name,
        "txnId": entry["txnId"],
        "originTxnId": entry["originTxnId"],
        "parentTxnId": parent.get("txnId"),
        "sessionId": parent.get("sessionId"),
        "startedAt": _started(entry),
        "attributes": {"ingress": {"source": "sub-agent"}},
        "turns": [],
    }
    hosted = [*hosted, run]
    hosted.sort(key=_position)
    op.pop("childSession", None)
    op.pop("childSessions", None)
    if len(hosted) == 1:
        op["childSession"] = run
    else:
        op["childSessions"] = hosted
    op["kind"] = "session"
    return run


def _complete(turn: Node, address: tuple[int, ...], line: dict[str, Any]) -> bool:
    """The op at ``address`` in ``turn`` as its ``op_accounted`` line says it ended."""
    entry = line["accounting"]
    started = _started(entry)
    op = _child(turn, "ops", address, _host_op, started)
    if op.get("endedAt") is not None:
        return False
    op["opId"] = line.get("span_id")
    op["kind"] = line["kind"]
    op["name"] = line["name"]
    op["startedAt"] = started
    if entry.get("errorType"):
        op["attributes"] = {**op.get("attributes", {}), "errorType": entry["errorType"]}
    op["accounting"] = [entry]
    op["endedAt"] = entry["timestamp"]
    # An LLM attempt a kill cut short, put on the bill by a later process (status
    # interrupted): an op that failed, as a decision not to run a tool call is.
    op["status"] = "failed" if entry["status"] == "interrupted" else entry["status"]
    op["latencyMs"] = entry["latency"]
    if entry.get("error"):
        op["error"] = entry["error"]
    return True
