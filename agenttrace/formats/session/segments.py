"""A session read whole from its writers' segments (docs/design/cross-process.md).

A session that processes joined has, beside its first writer's files, one segment per joined
writer: ``<session_id>.w/<writer_id>.json.gz`` and ``.events.jsonl``, each read as any
session's pair of files is. :func:`merge_segments` makes one picture of them:

- each joined run (a root of its segment whose ``ingress.joined`` names the op that started it)
  is placed under that op, as the sub-agent run it is: in the op's ``childSession`` (or
  ``childSessions`` once it hosts several), relabelled ``parent_path:k`` (its own labels
  beneath that), with ``parentTxnId`` the op's run. A run whose op no segment holds (its
  writer's files lost) stays a root, its ``ingress.joined`` saying where it belongs;
- the events, the step journal and the ``op_accounted`` lines, each in causal order: each
  writer's in its file's order, the writers' merged by ``ts`` (one machine's clock: a joined
  run starts after the op that started it), ties to the first writer, then by writer id. A
  writer on a host of another clock (its runs' ``ingress.joined`` ``clock`` is not their
  ``parent_clock``) merges at its ``ts`` moved by an ordering offset that puts its runs' lines
  inside the ops that started them (:mod:`agenttrace.formats.session.clocks`); no ``ts`` is
  changed: the picture shows what each writer wrote.

The segments are read, never written: the relabelling is a view (what the joined writer's
console lines and spans said stays in its segment).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import replace
from operator import itemgetter
from typing import Any

import msgspec

from agenttrace._internal.times import ts_ms
from agenttrace.formats.session.clocks import Placement, offsets, skewed
from agenttrace.formats.session.files import LoadedFile
from agenttrace.formats.session.optree import children, hosted_sessions
from agenttrace.model.paths import Address, format_label, parse_label


def merge_segments(first: LoadedFile, segments: list[LoadedFile]) -> LoadedFile:
    """``first`` (the first writer's picture) with the joined writers' ``segments`` (in writer
    id order) merged in, as above; ``first`` itself when there are none."""
    if not segments:
        return first
    runs = _copied(first.runs)
    joined_runs = _copied([run for segment in segments for run in segment.runs])
    writer_of = {id(run): 0 for run in runs}
    writer_of.update(
        zip(
            (id(run) for run in joined_runs),
            (w for w, segment in enumerate(segments, 1) for _ in segment.runs),
            strict=True,
        )
    )
    ops = _Ops()
    for run in (*runs, *joined_runs):
        ops.index(run)
    placed: set[int] = set()
    placements: list[Placement] = []
    orphans: list[dict[str, Any]] = []
    for run in joined_runs:
        op = _place(run, ops)
        if op is not None:
            placed.add(id(run))
            host = writer_of[id(ops.run_of[id(op)])]
            placements.append(Placement(writer_of[id(run)], run, host, op))
        else:
            orphans.append(run)  # its parent op is in no segment: a root, joined elsewhere
    labels = _Labels(runs, placed, orphans)
    runs.extend(orphans)
    joined = [
        replace(
            segment,
            events=labels.lines(segment.events),
            accounted=labels.lines(segment.accounted),
            journal=labels.journal(segment.journal),
        )
        for segment in segments
    ]
    pictures = [first, *joined]
    streams = [(picture.events, picture.accounted, picture.journal) for picture in pictures]
    order = _Order(streams, placements)
    return replace(
        first,
        events=order.merged(0),
        runs=runs,
        accounted=order.merged(1),
        journal=order.merged(2),
    )


class _Order:
    """The writers' lines of each stream (events, ``op_accounted`` lines, the journal) in
    causal order: each writer's in its file's order, the writers' merged by ``ts`` (the first
    writer's first on a tie, then by writer id). One machine's clock orders what causality
    orders: a joined run's lines come after the op that started it began, and a decision
    ``resolve`` journals about a joined writer's step after that step's intent. A writer on a
    host of another clock has its lines merged at their ``ts`` moved by its ordering offset
    (:mod:`agenttrace.formats.session.clocks`); each ``ts`` is parsed once, and only then."""

    def __init__(
        self,
        streams: Sequence[Sequence[list[dict[str, Any]]]],
        placements: list[Placement],
    ) -> None:
        self.streams = streams
        self.keys: list[list[list[float]]] | None = None
        if not skewed(placements):
            return  # one clock (or files that do not say): by ts, as it was written
        parsed = [
            [[ts_ms(line.get("ts")) for line in lines] for lines in writer] for writer in streams
        ]
        stamps = [[ms for lines in writer for ms in lines if ms is not None] for writer in parsed]
        moved = offsets(len(streams), placements, stamps)
        if any(moved):
            self.keys = [
                [_keys(lines, offset) for lines in writer]
                for writer, offset in zip(parsed, moved, strict=True)
            ]

    def merged(self, stream: int) -> list[dict[str, Any]]:
        lines = [writer[stream] for writer in self.streams]
        if self.keys is None:
            return list(heapq.merge(*lines, key=_ts))
        keyed = [
            zip(keys[stream], each, strict=True)
            for keys, each in zip(self.keys, lines, strict=True)
        ]
        return [line for _, line in heapq.merge(*keyed, key=itemgetter(0))]


def _keys(stamps: list[int | None], offset: int) -> list[float]:
    """Where a writer's lines merge: their time moved by ``offset``; a line without a time
    where the line before it is (so it stays after it)."""
    keys: list[float] = []
    last = -math.inf
    for ms in stamps:
        if ms is not None:
            last = ms + offset
        keys.append(last)
    return keys


class _Labels:
    """Where the placed joined runs went, to say the joined writers' lines in the merged
    tree's terms: an event's or ``op_accounted`` line's ``path`` (found by its span), a step's
    ``run`` and labels (found by its run's txn id). Every view then finds a line's node as it
    does in a one-writer session (a running op under its run's root, an event's scope), and
    ``resolve`` journals a decision about a joined writer's step by the key ``doubts`` shows."""

    def __init__(
        self, runs: list[dict[str, Any]], placed: set[int], orphans: list[dict[str, Any]]
    ) -> None:
        self.by_span: dict[str, tuple[str, Address, str] | None] = {}
        """span id -> (its node's label, its joined run's address, its root's origin txn id);
        ``None`` for a node of a joined run left a root (its lines keep their labels)."""
        self.by_run: dict[str, tuple[str, Address]] = {}
        """a placed run's txn id -> (the origin txn id of the root it is under, its address)."""
        for root in runs:
            origin = root.get("originTxnId") or root.get("txnId")
            for session in _sessions(root):
                if id(session) not in placed:
                    continue
                address = _address(session)
                txn = session.get("txnId")
                if address is None or not isinstance(origin, str):
                    continue
                if isinstance(txn, str):
                    self.by_run[txn] = (origin, address)
                for node in _own_nodes(session):
                    span_id, label = _span_id(node), node.get("path")
                    if span_id is not None and isinstance(label, str):
                        self.by_span[span_id] = (label, address, origin)
                    for entry in children(node, "accounting"):
                        # (its origin, its label) names its op, as in a one-writer session
                        entry["originTxnId"] = origin  # type: ignore[index]
        for orphan in orphans:
            for node in _own_nodes(orphan):
                span_id = _span_id(node)
                if span_id is not None:
                    self.by_span[span_id] = None

    def lines(self, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A joined writer's events (or ``op_accounted`` lines) with merged labels: by their
        span, else (a span no file holds: an op a kill cut short) relative to the joined run
        of the last line before it whose span is known, which is the run it was logged in
        (a writer runs one joined run at a time)."""
        result: list[dict[str, Any]] = []
        current: tuple[Address, str] | None = None
        for line in lines:
            label = line.get("path")
            span = line.get("span_id")
            if isinstance(span, str) and span in self.by_span:
                found = self.by_span[span]
                current = None if found is None else (found[1], found[2])
                if found is not None:
                    line = _moved(line, found[0], found[2])
            elif isinstance(label, str) and current is not None:
                line = _moved(line, _prefixed(label, current[0]), current[1])
            result.append(line)
        return result

    def journal(self, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A joined writer's step-journal lines under the root its runs were placed in: a
        step's ``run`` that root's origin, its ``step`` and ``path`` the merged labels. A joined
        run's own lines (its start and end) are left out: the first writer's run lines say
        whether the session runs, and a joined run is re-run by the op that started it, never
        re-entered on its own (docs/design/cross-process.md)."""
        result: list[dict[str, Any]] = []
        for line in lines:
            run = line.get("run")
            found = self.by_run.get(run) if isinstance(run, str) else None
            if found is None:
                result.append(line)
                continue
            if line.get("kind") == "run":
                continue
            origin, address = found
            moved = {**line, "run": origin}
            for key in ("step", "path"):
                value = moved.get(key)
                if isinstance(value, str):
                    moved[key] = _prefixed_step(value, address)
            result.append(moved)
        return result


def _moved(line: dict[str, Any], label: str, origin: str) -> dict[str, Any]:
    """``line`` at ``label``; an ``op_accounted`` line's entry too, of the root's run."""
    moved = {**line, "path": label}
    entry = line.get("accounting")
    if isinstance(entry, Mapping):
        moved["accounting"] = {**entry, "path": label, "originTxnId": origin}
    return moved


def _span_id(node: Mapping[str, Any]) -> str | None:
    span = node.get("span")
    span_id = span.get("spanId") if isinstance(span, Mapping) else None
    return span_id if isinstance(span_id, str) else None


def _address(session: Mapping[str, Any]) -> Address | None:
    try:
        return parse_label(str(session.get("path")))
    except ValueError:
        return None


def _own_nodes(session: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """A run's root, turns and ops, and those of the sub-agent runs under them."""
    for each in _sessions(session):  # type: ignore[arg-type]
        yield each
        for turn in children(each, "turns"):
            yield turn
            yield from children(turn, "ops")


def _prefixed(label: str, prefix: Address) -> str:
    """``label`` (a writer's own) as the merged tree says it, under ``prefix``."""
    try:
        return format_label((*prefix, *parse_label(label)))
    except ValueError:
        return label


def _prefixed_step(step: str, prefix: Address) -> str:
    """A step label (a path label, or one and ``/n`` or ``~n``: docs/journal.md) under
    ``prefix``."""
    label, mark, rest = step.partition("~") if "~" in step else step.partition("/")
    return f"{_prefixed(label, prefix)}{mark}{rest}"


def _copied(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of ``runs`` to place and relabel, the pictures read left as they are (through
    JSON, as they were read: some ten times faster than ``copy.deepcopy`` on an opTree)."""
    copied: list[dict[str, Any]] = msgspec.json.decode(msgspec.json.encode(runs))
    return copied


def _ts(event: Mapping[str, Any]) -> str:
    ts = event.get("ts")
    return ts if isinstance(ts, str) else ""


def _sessions(run: MutableMapping[str, Any]) -> Iterator[MutableMapping[str, Any]]:
    """``run`` and every sub-agent run under it (not recursive: runs nest as deep as agents)."""
    pending = [run]
    while pending:
        session = pending.pop()
        yield session
        for turn in children(session, "turns"):
            for op in children(turn, "ops"):
                pending.extend(hosted_sessions(op))  # type: ignore[arg-type]


class _Ops:
    """Each op of the runs by (its agent run's txn id, its label as its writer wrote it): what
    a joined run's ``ingress.joined`` names its parent op by; and which run each is in, so no
    run is ever placed inside its own tree (a file edited by hand could ask for that)."""

    def __init__(self) -> None:
        self.ops: dict[tuple[str, str], MutableMapping[str, Any]] = {}
        self.run_of: dict[int, MutableMapping[str, Any]] = {}
        """id of an op -> the root run (of its segment) it is in."""
        self.placed_in: dict[int, MutableMapping[str, Any]] = {}
        """id of a placed joined run -> the root run (of its segment) it was placed in."""

    def index(self, run: MutableMapping[str, Any]) -> None:
        for session in _sessions(run):
            txn = session.get("txnId")
            if not isinstance(txn, str):
                continue
            for turn in children(session, "turns"):
                for op in children(turn, "ops"):
                    label = op.get("path")
                    if isinstance(label, str) and (txn, label) not in self.ops:
                        self.ops[(txn, label)] = op  # type: ignore[assignment]
                        self.run_of[id(op)] = run

    def host(self, run: MutableMapping[str, Any], txn: str, label: str) -> Any:
        """The op (``txn``, ``label``) names, unless it is in ``run``'s own tree."""
        op = self.ops.get((txn, label))
        if op is None:
            return None
        top: MutableMapping[str, Any] | None = self.run_of[id(op)]
        seen: set[int] = set()
        while top is not None and id(top) not in seen:
            if top is run:
                return None
            seen.add(id(top))
            top = self.placed_in.get(id(top))
        self.placed_in[id(run)] = self.run_of[id(op)]
        return op


def _place(run: MutableMapping[str, Any], ops: _Ops) -> Any:
    """Put the joined ``run`` under the op its ingress names: that op, ``None`` if not found."""
    attributes = run.get("attributes")
    ingress = attributes.get("ingress") if isinstance(attributes, Mapping) else None
    joined = ingress.get("joined") if isinstance(ingress, Mapping) else None
    if not isinstance(joined, Mapping):
        return None
    parent_txn, parent_path = joined.get("parent_txn_id"), joined.get("parent_path")
    if not isinstance(parent_txn, str) or not isinstance(parent_path, str):
        return None
    op = ops.host(run, parent_txn, parent_path)
    if op is None:
        return None
    try:
        op_address = parse_label(str(op.get("path")))
    except ValueError:
        return None
    hosted = list(hosted_sessions(op))
    address = (*op_address, len(hosted) + 1)
    _relabel(run, address)
    run["parentTxnId"] = parent_txn
    _adopt_entries(run, parent_txn)
    op["kind"] = "session"  # a tool call that ran sub-agents, as one process records it
    if hosted:
        op.pop("childSession", None)
        op["childSessions"] = [*hosted, run]
    else:
        op["childSession"] = run
    return op


def _relabel(run: MutableMapping[str, Any], prefix: Address) -> None:
    """Prefix every label of ``run``'s tree (its nodes, their accounting and log entries) with
    ``prefix``, the address it now has: its root's ``0`` becomes ``prefix``'s label."""
    for session in _sessions(run):
        _prefix_path(session, prefix)
        for turn in children(session, "turns"):
            _prefix_path(turn, prefix)  # type: ignore[arg-type]
            for entry in children(turn, "logs"):  # a failed turn's line, a log made there
                _prefix_path(entry, prefix)  # type: ignore[arg-type]
            for op in children(turn, "ops"):
                _prefix_path(op, prefix)  # type: ignore[arg-type]
                for key in ("accounting", "logs"):
                    for entry in children(op, key):
                        _prefix_path(entry, prefix)  # type: ignore[arg-type]
        for entry in children(session, "logs"):
            _prefix_path(entry, prefix)  # type: ignore[arg-type]


def _adopt_entries(run: Mapping[str, Any], parent_txn: str) -> None:
    """The joined ``run``'s own accounting and log entries name the run it now sits under,
    as its node does (its writer knew of no parent and wrote ``null``). Entries of earlier
    releases (no ``parentTxnId``) and of its sub-agents' runs are left as they are."""
    txn = run.get("txnId")
    entries = list(children(run, "logs"))
    for turn in children(run, "turns"):
        entries += children(turn, "logs")
        for op in children(turn, "ops"):
            entries += [*children(op, "accounting"), *children(op, "logs")]
    for entry in entries:
        own = isinstance(entry, MutableMapping) and entry.get("txnId") == txn
        if own and "parentTxnId" in entry:
            entry["parentTxnId"] = parent_txn  # type: ignore[index]


def _prefix_path(node: MutableMapping[str, Any], prefix: Address) -> None:
    label = node.get("path")
    if isinstance(label, str):  # else not a label (a file edited by hand): left as it is
        node["path"] = _prefixed(label, prefix)
