"""The billing ledger (seed 002): one JSON line per accounting record of a run's whole opTree.

When a run ends (success or failure), or is stopped by a clean exit before it ended, every LLM
attempt and tool call in it, sub-agents included, is appended to the ledger file
(``~/.agenttrace/accounting.jsonl`` by default). A run's lines go in one ``write`` to an
``O_APPEND`` file under an exclusive ``flock``, so two processes appending at once never
interleave. The records are derived from the spans, which were redacted before they were
recorded; error texts are scrubbed again on the way out.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from agenttrace._internal.redact import scrub_text
from agenttrace.record.optree import children, hosted_sessions, session_ops
from agenttrace.sdk.optree import Node, OpTreeSink, RunTree
from agenttrace.sdk.processor import Sink

logger = logging.getLogger("agenttrace")


def records(session: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The ledger records of a run: each accounting entry of each op, at any depth (an op's
    sub-agents right after it)."""
    call_path = session.get("callPath")
    for op in session_ops(session):
        for entry in children(op, "accounting"):
            yield _record(entry, call_path, op)
        for child in hosted_sessions(op):
            yield from records(child)


def _record(entry: Mapping[str, Any], call_path: Any, op: Mapping[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = {
        "timestamp": entry.get("timestamp"),
        "status": entry.get("status"),
        "latency": entry.get("latency"),
        "type": entry.get("type"),
        "originTxnId": entry.get("originTxnId"),
        "txnId": entry.get("txnId"),
        "agentId": entry.get("agentId"),
        "callPath": call_path,
        "path": entry.get("path"),
    }
    if entry.get("type") == "llm":
        for key in ("provider", "model", "actualModel", "attempt", "tokens", "costUsd"):
            record[key] = entry.get(key)
    else:
        record["providerLabel"] = entry.get("providerLabel") or op.get("name")
        record["charactersIn"] = entry.get("charactersIn")
        record["charactersOut"] = entry.get("charactersOut")
    if entry.get("error"):
        record["error"] = scrub_text(str(entry["error"]))
        record["errorType"] = entry.get("errorType")
    return record


def append_lines(path: Path, lines: list[str]) -> None:
    """Append ``lines`` to ``path`` in one write, under an exclusive lock."""
    if not lines:
        return
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class LedgerSink(Sink):
    """Appends each run's accounting to the billing ledger when the run ends (or at exit)."""

    def __init__(self, path: Path, optree: OpTreeSink) -> None:
        self.path = path
        self.optree = optree
        self._billed: set[str] = set()
        self._failed = False
        self._lock = threading.Lock()
        optree.add_listener(self._on_tree)

    def _on_tree(self, what: str, run: RunTree, label: str) -> None:
        if what == "end" and label == "0" and run.root is not None:
            self.bill(run.origin, run.root)

    def bill(self, origin: str, root: Node) -> None:
        """Append the run's records once."""
        with self._lock:
            if origin in self._billed or self._failed:
                return
            self._billed.add(origin)
            lines = [
                json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in records(root)
            ]
            try:
                append_lines(self.path, lines)
            except OSError as exc:
                self._failed = True
                logger.warning(
                    "agenttrace: cannot write the billing ledger %s (%s): accounting is not "
                    "being recorded. The agent keeps running.",
                    self.path,
                    exc.strerror or exc,
                )

    def shutdown(self) -> None:
        # Runs a clean exit stopped before they ended: bill what they did.
        for run in list(self.optree.runs.values()):
            if run.root is not None and not run.finished:
                self.bill(run.origin, run.root)
