"""``on_optree`` shows a sub-agent's subtree while the sub-agent is still running: a UI sees it
work. The sub-agent waits, on a ``threading.Event``, until a subscriber has seen it mid-run."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, ClassVar

import agenttrace
from agenttrace.model.lifecycle import Ended, Started
from agenttrace.recorder.optree_builder import OpTreeSink
from agenttrace.recorder.sink import RecordwiseSink

from .conftest import Traced

HANG_GUARD = 60.0
"""Seconds before a broken handshake fails the test instead of hanging it (never reached when
the subscriber works; nothing here depends on how fast anything runs)."""


def child_run(root: dict[str, Any]) -> dict[str, Any] | None:
    """The Worker's run under the Boss's ``delegate`` op, if the tree has it yet."""
    for turn in root.get("turns") or []:
        for op in turn.get("ops") or []:
            if op.get("name") == "delegate" and isinstance(op.get("childSession"), dict):
                return dict(op["childSession"])
    return None


def test_a_running_sub_agent_subtree_is_delivered_before_it_ends(traced: Traced) -> None:
    mid_run = threading.Event()
    snapshots: list[dict[str, Any]] = []
    finals: list[dict[str, Any]] = []

    def watch(root: dict[str, Any]) -> None:
        tree = json.loads(json.dumps(root))  # a copy: the live tree goes on changing
        if "endedAt" in tree:
            finals.append(tree)
            return
        child = child_run(tree)
        if mid_run.is_set() or child is None or "endedAt" in child:
            return
        ops = [op for turn in child.get("turns") or [] for op in turn.get("ops") or []]
        if [op["name"] for op in ops] == ["read"] and "endedAt" in ops[0]:
            snapshots.append(tree)
            mid_run.set()  # the Worker may go on

    @agenttrace.tool
    def read() -> str:
        return "page 1"

    @agenttrace.tool
    def write() -> str:
        return "done"

    @agenttrace.agent("Worker")
    def worker() -> str:
        read()
        # Still running: wait until the subscriber has seen this run with its finished op.
        assert mid_run.wait(HANG_GUARD), "no live tree showed the running Worker"
        return write()

    @agenttrace.tool
    def delegate() -> str:
        return worker()

    @agenttrace.agent("Boss")
    def boss() -> str:
        return delegate()

    unsubscribe = agenttrace.on_optree(watch, min_interval=0)
    try:
        assert boss() == "done"
        traced.handle.force_flush()
    finally:
        unsubscribe()

    (live,) = snapshots
    child = child_run(live)
    assert child is not None
    assert (child["agentName"], child["path"]) == ("Worker", "1.1:1")
    assert "endedAt" not in child and "success" not in child
    (turn,) = child["turns"]
    (op,) = turn["ops"]
    # Its op's label: op 1.1 of the first child run of op 1.1 (docs/path-labels.md).
    assert (op["name"], op["kind"], op["path"]) == ("read", "tool", "1.1.1.1")
    assert "endedAt" in op
    # The Boss's op hosting it is running too.
    (delegating,) = live["turns"][0]["ops"]
    assert delegating["kind"] == "session" and "endedAt" not in delegating

    (final,) = finals
    done = child_run(final)
    assert done is not None and done["success"] is True and "endedAt" in done
    assert [op["name"] for turn in done["turns"] for op in turn["ops"]] == ["read", "write"]


class _Kept(RecordwiseSink):
    """Keeps the scopes' starts and ends, to replay them in another order."""

    handlers: ClassVar[dict[type, str]] = {Started: "_keep", Ended: "_keep"}

    def __init__(self) -> None:
        self.records: list[Any] = []

    def _keep(self, record: Any) -> None:
        self.records.append(record)


def test_an_op_that_ends_before_the_run_it_hosts_stays_json_in_the_live_tree(
    traced: Traced, tmp_path: Path
) -> None:
    # A node folded as it ends keeps its accounting entry as the struct the ledger line was
    # encoded from; one that stays in the tree (a sub-agent it hosted still runs) has it as
    # JSON values, as the tree gives subscribers and the session file writes it.
    kept = _Kept()
    traced.handle.processor.add_sink(kept)
    records = kept.records

    @agenttrace.tool
    def read() -> str:
        return "page 1"

    @agenttrace.agent("Worker")
    def worker() -> str:
        return read()

    @agenttrace.tool
    def delegate() -> str:
        return worker()

    @agenttrace.agent("Boss")
    def boss() -> str:
        return delegate()

    assert boss() == "page 1"
    traced.handle.force_flush()
    ends = {r.label: r for r in records if isinstance(r, Ended)}
    starts = [r for r in records if isinstance(r, Started)]
    delegating = next(r.label for r in starts if r.name == "execute_tool delegate")
    under = (delegating + ":", delegating + ".")
    hosted = [r for r in records if isinstance(r, Ended) and r.label.startswith(under)]
    assert len(hosted) == 3  # the Worker's run, its turn and its op, under the delegate op
    # Replayed with the delegate op ending first (as when the Worker runs in a thread).
    sink = OpTreeSink(spool_dir=tmp_path)
    for record in starts:
        sink.consume([record])
    sink.consume([ends[delegating]])
    (run,) = sink.runs.values()
    node = run.nodes[delegating]
    assert "endedAt" in node  # ended, waiting for the run it hosts
    (entry,) = node["accounting"]
    assert entry == json.loads(ends[delegating].accounted.entry_json)
    assert json.loads(json.dumps(run.root))  # the live tree is plain JSON values
    for record in hosted:
        sink.consume([record])
    assert delegating not in run.nodes  # folded once the Worker's run ended
