"""``agenttrace doubts`` and ``agenttrace resolve``: the tool calls a killed run left in doubt
(docs/journal.md), and a person's decision about each.

An in-doubt call started (its ``intent`` is in the journal) and left no outcome: nothing says
whether its effect happened. ``doubts`` lists them with their arguments (redacted, capped);
``resolve`` appends the decision to the session's event stream as a ``step_decision`` line,
holding the session's lease while it does, so it cannot race a resume; with it, the call's
``op_accounted`` line as decided (``--done``: status ok; else failed, the decision saying why),
and the same entry to the billing ledger: the ledger, ``tree`` and ``stats`` say what happened.

Both read the journal of both of the session's files, every line of either once (a decision
appended to a stream that was behind its session file is kept): a session whose stream is gone
keeps its journal in its session file, and ``resolve`` then writes the stream again from that
file (its events and journal) before appending the decision.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenttrace._internal.config import Settings
from agenttrace._internal.redact import cap_text, scrub_json_text
from agenttrace._internal.times import event_ts
from agenttrace.formats.compact_json import compact_json
from agenttrace.formats.ledger import accounted_line, decided_entry, op_accounted, parent_of
from agenttrace.formats.ledger_file import append_lines
from agenttrace.formats.safe_open import open_regular
from agenttrace.formats.session.files import (
    STREAM_SUFFIX,
    LoadedFile,
    StreamAppender,
    sibling_path,
    write_atomically,
)
from agenttrace.formats.session.fullest import load_fullest, load_pair
from agenttrace.formats.session.lease import acquire, lease_path
from agenttrace.formats.session.schema import AccountingEntry
from agenttrace.model.journal import Journal, Step
from agenttrace.model.journal_lines import Decisions, decision_line, journal_bytes
from agenttrace.session.interrupted_calls import cut_torn_line
from agenttrace.session.interrupted_calls import stream_of as stream_of
from agenttrace.views.account import Account, owner_run, session_account

SHOWN_ARGUMENT_BYTES = 2048
"""How much of a call's arguments ``doubts`` shows (redacted first, then capped)."""
MAX_RESULT_BYTES = 16 << 20
"""The largest result file ``resolve --done`` takes."""
TAIL_BLOCK = 64 << 10
"""How much of a stream's end is read at a time, looking for its last newline."""


class ResolveError(Exception):
    """What ``resolve`` refused, in one line."""


@dataclass(frozen=True)
class Doubt:
    """One in-doubt tool call, as ``doubts`` shows it."""

    run: str
    label: str
    attempt: int
    agent_id: str | None
    tool: str
    effect: str
    arguments: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "step": self.label,
            "attempt": self.attempt,
            "agent_id": self.agent_id,
            "tool": self.tool,
            "effect": self.effect,
            "arguments": self.arguments,
        }


def read_journal(path: Path) -> Journal:
    """The journal of the session ``path`` names: the union of its event stream's and its
    session file's (bounded reads)."""
    return Journal(load_fullest(path).journal)


def doubts(path: Path) -> list[Doubt]:
    """The in-doubt calls of the session at ``path``, in the order they started."""
    return doubts_of(load_fullest(path))


def doubts_of(loaded: LoadedFile) -> list[Doubt]:
    """The in-doubt calls of the session ``loaded`` (its fullest picture), in the order they
    started."""
    return [_doubt(step) for step in Journal(loaded.journal).in_doubt()]


def _doubt(step: Step) -> Doubt:
    run, label, attempt = step.key
    arguments = step.arguments
    if arguments is not None:
        arguments = cap_text(arguments, SHOWN_ARGUMENT_BYTES, scrub_json_text)
    return Doubt(run, label, attempt, step.agent_id, step.name, step.effect, arguments)


def resolve(
    path: Path,
    label: str,
    decision: Decisions,
    *,
    result_file: Path | None = None,
    evidence: str | None = None,
    run: str | None = None,
    force: bool = False,
) -> Step:
    """Journal ``decision`` about the in-doubt call at ``label`` (of ``run``, else of the last
    run that left one there); returns the step decided. Holds the session's lease meanwhile."""
    stream = stream_of(path)
    session_id = stream.name[: -len(STREAM_SUFFIX)] if stream.name.endswith(STREAM_SUFFIX) else ""
    if not session_id:
        raise ResolveError(f"{path}: not a session's event stream or session file")
    result = _result(result_file) if decision == "done" else None
    with acquire(lease_path(stream.parent, session_id), "agenttrace resolve", force=force):
        lost = not stream.exists()  # the session file alone is left
        loaded, up_to_date = load_pair((sibling_path(stream) or stream) if lost else stream)
        journal = Journal(loaded.journal)
        matching = [
            step
            for step in journal.in_doubt()
            if step.key[1] == label and (run is None or step.key[0] == run)
        ]
        if not matching:
            raise ResolveError(_nothing_to_decide(journal, label, run))
        step = matching[-1]
        now_ns = time.time_ns()
        line = decision_line(step.key, decision, result=result, evidence=evidence)
        decided_line = journal_bytes(line, now_ns)
        # What the call came to, as decided: its op's accounting line in the stream (every view
        # shows the call so, under its op) and its line in the billing ledger, the same entry.
        account = session_account(loaded, up_to_date=up_to_date, updated_ns=0, now=now_ns / 1e9)
        entry, accounted = _decided(account, step, decision, result, evidence, event_ts(now_ns))
        decided = decided_line + accounted
        if lost:
            write_atomically(stream, _stream_bytes(loaded, decided))
        else:
            cut_torn_line(stream)
            appender = StreamAppender(stream)
            try:
                appender.append(decided)
                appender.sync()
            finally:
                appender.close()
    ledger = Settings.resolve().billing_file
    try:
        append_lines(ledger, [compact_json(entry).decode()])
    except OSError as exc:
        raise ResolveError(
            f"the decision is journaled, but the billing ledger {ledger} cannot be written: "
            f"{exc.strerror or exc}"
        ) from None
    return step


def _decided(
    account: Account,
    step: Step,
    decision: Decisions,
    result: str | None,
    evidence: str | None,
    ts: str,
) -> tuple[AccountingEntry, bytes]:
    """The accounting entry of the call ``step`` as decided, and its ``op_accounted`` line."""
    run, label, _ = step.key
    cut = [c for c in account.cut_short if (c.run, c.step or c.path) == (run, label)]
    last = account.last_record_ms or 0
    started = cut[-1].started_at if cut else last
    ran = int(cut[-1].ran_ms) if cut else 0
    # Its op's place: a step a re-entry gave a label of its own (2.1/2) was made at 2.1.
    path = cut[-1].path if cut else label.partition("/")[0]
    owner = owner_run(account.runs, run, path) or {}
    entry = decided_entry(
        origin=run,
        txn_id=_text(owner.get("txnId")) or run,
        agent_id=step.agent_id or _text(owner.get("agentId")) or "",
        path=path,
        name=step.name,
        decision=decision,
        arguments=step.arguments,
        result=result,
        evidence=evidence,
        started_ms=started,
        ended_ms=started + ran,
        call_path=_text(owner.get("callPath")),
        parent_txn_id=parent_of(owner),
    )
    # No trace or span: no span was ever ended for it; its run is found by its origin.
    return entry, accounted_line(op_accounted(entry, "tool", step.name, ts, None, None))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _nothing_to_decide(journal: Journal, label: str, run: str | None) -> str:
    """Why there is no call to decide at ``label``: none in doubt there, or one decided already
    (said so, with the decision: a user who wants another one learns it is taken once)."""
    where = f"{label}" + (f" in run {run}" if run else "")
    decided = [
        step
        for step in journal.steps.values()
        if step.kind == "tool"
        and step.state == "intent"
        and step.decision is not None
        and step.key[1] == label
        and (run is None or step.key[0] == run)
    ]
    if decided:
        decision = (decided[-1].decision or "").replace("_", " ")
        return f"the call at {where} was decided already ({decision}): a decision is taken once"
    return f"no call in doubt at {where}"


def _stream_bytes(loaded: LoadedFile, decided: bytes) -> bytes:
    """An event stream holding what a session file holds of one (its events, then its journal)
    and the ``decided`` lines last: the stream of a session whose stream was lost, written
    again."""
    lines = [*loaded.events, *loaded.journal]
    return (
        b"".join(
            json.dumps(line, ensure_ascii=False).encode("utf-8", "backslashreplace") + b"\n"
            for line in lines
        )
        + decided
    )


def _result(result_file: Path | None) -> str:
    if result_file is None:
        raise ResolveError("--done needs the result the call would have returned (a file)")
    try:
        fd = open_regular(result_file)  # not a FIFO or a device: a file
        try:
            data = os.read(fd, MAX_RESULT_BYTES + 1)
        finally:
            os.close(fd)
    except OSError as exc:
        raise ResolveError(f"{result_file}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_RESULT_BYTES:
        raise ResolveError(f"{result_file}: more than {MAX_RESULT_BYTES >> 20} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ResolveError(f"{result_file}: not UTF-8 text") from None
