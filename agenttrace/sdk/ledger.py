"""The billing ledger (docs/session-file.md): one JSON line per accounting record of a run's
whole opTree.

When a run ends (success or failure), or is stopped by a clean exit before it ended, every LLM
attempt and tool call in it, sub-agents included, is appended to the ledger file
(``~/.agenttrace/accounting.jsonl`` by default). A run's lines go in one ``write`` to an
``O_APPEND`` file under an exclusive ``flock``, so two processes appending at once never
interleave. Each line is the op's accounting entry as its opTree node holds it (encoded once
for both), built from its lifecycle records; error texts were scrubbed of secrets when the
failure was recorded.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any

from agenttrace.record.spool import Piece, Spool
from agenttrace.sdk.optree import OpTreeSink, RunTree
from agenttrace.sdk.processor import Sink

logger = logging.getLogger("agenttrace")


def append_lines(path: Path, lines: list[str]) -> None:
    """Append ``lines`` to ``path`` in one write, under an exclusive lock."""
    if lines:
        _append_locked(path, "".join(line + "\n" for line in lines).encode("utf-8"))


def _append_locked(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        _lock(fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            _unlock(fd)
    finally:
        os.close(fd)


# An exclusive lock on the whole ledger, so two processes appending never interleave: flock on
# POSIX; on Windows, msvcrt's lock on the file's first byte (O_APPEND still writes at the end).
if sys.platform == "win32":
    import msvcrt

    def _lock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_LOCK, 1)

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _lock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


class LedgerSink(Sink):
    """Appends each run's accounting to the billing ledger when the run ends (or at exit).

    Each op's record is built when the op ends and held per run (moved to the session's spool
    once it adds up), so a long run's ledger costs no memory and its tree need not be kept.
    """

    def __init__(self, path: Path, optree: OpTreeSink, spill_bytes: int = 64 << 10) -> None:
        self.path = path
        self.optree = optree
        self.spill_bytes = spill_bytes
        self._pending: dict[str, _RunLines] = {}  # origin txn id -> the run's records so far
        self._failed = False
        self._lock = threading.Lock()
        optree.add_listener(self._on_tree)

    def _on_tree(self, what: str, run: RunTree, label: str) -> None:
        if what != "end":
            return
        if label == "0":
            self.bill(run.origin)
            return
        encoded = run.encoded.get(label)  # an op's accounting entry, callPath included
        if encoded is None:
            return
        lines = self._pending.get(run.origin)
        if lines is None:
            lines = self._pending[run.origin] = _RunLines(run.spool)
        lines.add(encoded + b"\n", self.spill_bytes)

    def bill(self, origin: str) -> None:
        """Append the run's records, once."""
        lines = self._pending.pop(origin, None)
        if lines is None or self._failed:
            return
        with self._lock:
            try:
                append_pieces(self.path, lines.pieces, lines.spool)
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
        for origin in list(self._pending):
            self.bill(origin)


class _RunLines:
    """One run's ledger lines so far: bytes, and refs to those moved to the spool."""

    __slots__ = ("pieces", "raw", "spool")

    def __init__(self, spool: Spool | None) -> None:
        self.pieces: list[Piece] = []
        self.raw = 0
        self.spool = spool

    def add(self, line: bytes, spill_bytes: int) -> None:
        self.pieces.append(line)
        self.raw += len(line)
        if self.raw >= spill_bytes and self.spool is not None:
            raw = b"".join(p for p in self.pieces if isinstance(p, bytes))
            self.pieces = [p for p in self.pieces if not isinstance(p, bytes)]
            self.pieces.append(self.spool.add(raw))  # plain text: read back, never gunzipped
            self.raw = 0


def _line(record: dict[str, Any]) -> bytes:
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def append_pieces(path: Path, pieces: list[Piece], spool: Spool | None) -> None:
    """Append ledger lines (bytes, or refs to text in ``spool``) to ``path`` under an exclusive
    lock, so two processes appending at once never interleave."""
    if not pieces:
        return
    data = b"".join(
        piece if isinstance(piece, bytes) else spool.read(piece)  # type: ignore[union-attr]
        for piece in pieces
    )
    _append_locked(path, data)
