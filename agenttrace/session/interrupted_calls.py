"""The LLM attempts a kill cut short, put on the bill by the process that takes their session
over (``resume``, ``load_session``): docs/session-file.md, "Accounting entries".

An LLM attempt's ledger line is written as it ends, in its caller's thread. One whose process
was killed while its request was in flight (its journal ``intent``, kind ``llm``, and no
``done`` or ``failed``) never ends, yet the provider may have answered it, and billed it: a
user reconciling the provider's bill with the ledger would find calls the ledger never names.
So the process that takes the session over, holding its lease (no other process writes it),
writes one accounting entry for each such attempt (:func:`~agenttrace.formats.ledger.
interrupted_entry`: status ``interrupted``, ``providerMayHaveBilled``, cost unknown) as the
resolve decision of an in-doubt tool call is written: the entry to the billing ledger, and an
``op_accounted`` line carrying it appended to the session's event stream (so ``tree``,
``stats``, ``list`` and the session file see it).

Exactly once: an attempt whose entry is in the session's files (a stream ``op_accounted``
line, or its op's accounting in the session file) gets none again, whichever process takes the
session over next. The ledger's line is written first: a takeover killed before the stream's
leaves it in the ledger alone, and the next one, finding it there (the ledger's end, back to
when the call started: ``agenttrace.formats.ledger_file.find_lines``), writes the stream's
only.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from msgspec import UNSET

from agenttrace._internal.times import event_ts, ts_ms
from agenttrace.formats.compact_json import compact_json
from agenttrace.formats.ledger import (
    accounted_line,
    interrupted_entry,
    is_interrupted_entry,
    op_accounted,
    parent_of,
)
from agenttrace.formats.ledger_file import append_lines, entry_timestamp, find_lines
from agenttrace.formats.safe_open import open_inside
from agenttrace.formats.session.files import (
    SNAPSHOT_SUFFIX,
    LoadedFile,
    StreamAppender,
    sibling_path,
)
from agenttrace.formats.session.inflight import process_last
from agenttrace.formats.session.optree import hosted_sessions, owner_run, session_ops
from agenttrace.formats.session.rebuilt import with_rebuilt_runs
from agenttrace.model.journal import Journal
from agenttrace.model.journal_lines import Step, StepKey, journal_lines

logger = logging.getLogger("agenttrace")

TAIL_BLOCK = 64 << 10
"""How much of a stream's end is read at a time, looking for its last newline."""


def stream_of(path: Path) -> Path:
    """The event stream of the session ``path`` names (its session file's sibling)."""
    return sibling_path(path) or path if path.name.endswith(SNAPSHOT_SUFFIX) else path


def owed_lines(loaded: LoadedFile, now_ns: int | None = None) -> list[dict[str, Any]]:
    """The ``op_accounted`` lines (decoded) owed to the LLM attempts of ``loaded``'s journal
    that a kill cut short and that no file accounts yet, in the order they started. Call it
    only holding the session's lease, the process that ran them gone."""
    lines = loaded.journal
    done = accounted(loaded) | ended(lines, loaded.accounted)
    cut = [
        step
        for step in Journal(lines).steps.values()
        if step.kind == "llm" and step.state == "intent" and step.key not in done
    ]
    if not cut:
        return []
    started = _intent_times(lines)
    ts = event_ts(time.time_ns() if now_ns is None else now_ns)
    owed = []
    for step in cut:
        run, label, attempt = step.key
        start = started.get(step.key)
        last = process_last(lines, run, label, attempt)
        if start is None:
            start = last if last is not None else int(ts_ms(ts) or 0)
        owner = owner_run(loaded.runs, run, label) or {}
        entry = interrupted_entry(
            origin=run,
            txn_id=_text(owner.get("txnId")) or run,
            agent_id=step.agent_id or _text(owner.get("agentId")) or "",
            path=label,
            model=step.name,
            attempt=attempt,
            started_ms=start,
            ended_ms=max(start, last if last is not None else start),
            call_path=_text(owner.get("callPath")),
            parent_txn_id=parent_of(owner),
        )
        # No trace or span: no span of it ever ended; its run is found by its origin.
        line = accounted_line(op_accounted(entry, "llm", step.name, ts, None, None))
        owed.append(json.loads(line))  # as a reader of the stream reads it back
    return owed


def accounted(loaded: LoadedFile) -> set[StepKey]:
    """The steps (run origin, label, attempt) whose interrupted entry the files hold: a stream
    ``op_accounted`` line, or an op's accounting in the session file's runs."""
    keys: set[StepKey] = set()
    entries = [line.get("accounting") for line in loaded.accounted]
    entries += list(_tree_entries(loaded.runs))
    for entry in entries:
        if not is_interrupted_entry(entry):
            continue
        assert isinstance(entry, Mapping)
        origin, path, attempt = entry.get("originTxnId"), entry.get("path"), entry.get("attempt")
        if isinstance(origin, str) and isinstance(path, str) and type(attempt) is int:
            keys.add((origin, path, attempt))
    return keys


def ended(journal: list[dict[str, Any]], accounted_lines: list[dict[str, Any]]) -> set[StepKey]:
    """The LLM attempts of ``journal`` that ended and were billed, though their ``done`` or
    ``failed`` line is not there: an attempt's ledger and ``op_accounted`` lines are written in
    its caller's thread as it ends, its journal outcome by agenttrace's background thread after,
    so a kill in between leaves an intent alone. Each ``op_accounted`` line of an LLM op is the
    end of the last attempt of its agent at its path label that started before it ended and has
    no line yet."""
    starts: dict[tuple[Any, Any], list[tuple[int, StepKey]]] = {}
    for step in _llm_intents(journal):
        ms = ts_ms(step.ts)
        if ms is not None:
            starts.setdefault((step.agent_id, step.step), []).append((ms, step.key))
    ends: dict[tuple[Any, Any], list[int]] = {}
    for line in accounted_lines:
        entry = line.get("accounting")
        ms = ts_ms(line.get("ts"))
        if line.get("kind") != "llm" or ms is None or is_interrupted_entry(entry):
            continue
        ends.setdefault((line.get("agent_id"), line.get("path")), []).append(ms)
    found: set[StepKey] = set()
    for place, times in ends.items():
        open_steps = sorted(starts.get(place, ()))
        for end in sorted(times):
            begun = [step for step in open_steps if step[0] <= end]
            if begun:
                open_steps.remove(begun[-1])
                found.add(begun[-1][1])
    return found


def _tree_entries(runs: list[dict[str, Any]]) -> Iterator[Any]:
    stack: list[Mapping[str, Any]] = list(runs)
    while stack:
        session = stack.pop()
        for op in session_ops(session):
            accounting = op.get("accounting")
            if isinstance(accounting, list):
                yield from accounting
            stack.extend(hosted_sessions(op))


def _intent_times(lines: list[dict[str, Any]]) -> dict[StepKey, int]:
    """When each LLM attempt's intent was written (ms)."""
    found: dict[StepKey, int] = {}
    for step in _llm_intents(lines):
        ms = ts_ms(step.ts)
        if ms:
            found[step.key] = ms
    return found


def _llm_intents(lines: list[dict[str, Any]]) -> list[Step]:
    """The intent lines of LLM attempts among a journal's ``lines``."""
    return [
        line
        for line in journal_lines(lines)
        if type(line) is Step and line.kind == "llm" and line.state == "intent"
    ]


def lost_to_the_ledger(loaded: LoadedFile, ledger: Path) -> list[dict[str, Any]]:
    """The accounting entries the killed process put in the stream but not in the ledger: an op
    that ends writes its ``op_accounted`` line, then its ledger line, so a kill between the two
    leaves the stream alone holding what the op cost. The stream is the record the ledger is
    made from: the takeover appends them. Only that process's entries can be missing (every
    earlier process's were repaired by the takeover after it): those from its first run on."""
    if Journal(loaded.journal).interrupted_run() is None:
        return []  # its last process ended its runs: what it billed, it billed whole
    since = _last_process_start(loaded.journal)
    if since is None:
        return []
    candidates: list[dict[str, Any]] = []
    for event in loaded.accounted:
        entry, ms = event.get("accounting"), ts_ms(event.get("ts"))
        if not isinstance(entry, dict) or ms is None or ms < since:
            continue
        if not is_interrupted_entry(entry) and "decision" not in entry:  # ledger-first ones
            candidates.append(entry)
    if not candidates:
        return []
    stamps = {entry.get("timestamp") for entry in candidates}
    written: list[Any] = []
    for line in find_lines(ledger, lambda line: entry_timestamp(line) in stamps, since):
        try:
            written.append(json.loads(line))
        except ValueError:
            continue  # a line a kill tore: the entry it was is not there
    return [entry for entry in candidates if entry not in written]


def _last_process_start(journal: list[dict[str, Any]]) -> int | None:
    """When the process of the journal's last run line started its first run (ms)."""
    runs = [
        line
        for line in journal_lines(journal)
        if type(line) is Step and line.kind == "run" and line.state == "intent"
    ]
    if not runs:
        return None
    process = runs[-1].process
    if process is UNSET:  # an earlier release's journal: its last run alone
        return ts_ms(runs[-1].ts)
    return next(ts_ms(line.ts) for line in runs if line.process == process)


def account_interrupted(path: Path, loaded: LoadedFile, ledger: Path) -> LoadedFile:
    """Append to the billing ledger ``ledger`` what the killed process put in the stream and
    not in it (:func:`lost_to_the_ledger`). Write the entries owed to the LLM attempts a kill
    cut short in the session ``loaded`` (read from ``path``; see the module docstring): each to
    the billing ledger
    unless a takeover killed before it finished wrote it there already, then their
    ``op_accounted`` lines to its event stream. Returns ``loaded`` with them (its accounting
    lines and its runs), so the resumed session carries them into the files it writes;
    ``loaded`` itself when none is owed, or when a file cannot be written (a warning says so:
    the next takeover writes them)."""
    lost = lost_to_the_ledger(loaded, ledger)
    owed = owed_lines(loaded)
    if not owed and not lost:
        return loaded
    entries = [event["accounting"] for event in owed]
    keys = {_key(entry) for entry in entries}
    since = min((int(entry["timestamp"] - entry["latency"]) for entry in entries), default=0)
    billed = (
        {
            _key(json.loads(line))
            for line in find_lines(ledger, lambda line: _interrupted_line(line, keys), since)
        }
        if entries
        else set()
    )
    try:
        append_lines(
            ledger,
            [compact_json(e).decode() for e in lost]
            + [compact_json(e).decode() for e in entries if _key(e) not in billed],
        )
    except OSError as exc:
        logger.warning(
            "agenttrace: the billing ledger %s cannot be written (%s): %d LLM call(s) a kill cut "
            "short in session %s are not on it yet; the next resume writes them",
            ledger,
            exc.strerror or exc,
            len(owed),
            loaded.session_id,
        )
        return loaded
    if lost:
        logger.info(
            "agenttrace: %s: %d op(s) its killed process had put in the stream were not in the "
            "billing ledger yet; appended",
            path,
            len(lost),
        )
    if not owed:
        return loaded
    stream = stream_of(path)
    if stream.exists():
        try:
            cut_torn_line(stream)
            appender = StreamAppender(stream)
            try:
                appender.append(b"".join(accounted_line(event) for event in owed))
                appender.sync()
            finally:
                appender.close()
        except OSError as exc:
            logger.warning(
                "agenttrace: %s: cannot write the accounting of %d LLM call(s) its last process "
                "was killed in (%s); they are in the billing ledger",
                stream,
                len(owed),
                exc.strerror or exc,
            )
    logger.info(
        "agenttrace: %s: %d LLM call(s) were in flight when its process was killed; each is in "
        "the billing ledger as interrupted (the provider may have billed it)",
        path,
        len(owed),
    )
    rebuilt = with_rebuilt_runs(dataclasses.replace(loaded, accounted=owed))
    return dataclasses.replace(rebuilt, accounted=[*loaded.accounted, *owed])


def _key(entry: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    return entry.get("originTxnId"), entry.get("path"), entry.get("attempt")


def _interrupted_line(line: bytes, keys: set[tuple[Any, Any, Any]]) -> bool:
    """Whether the ledger line ``line`` is the interrupted entry of one of ``keys``."""
    if b'"providerMayHaveBilled":' not in line:  # most lines: not decoded
        return False
    try:
        entry = json.loads(line)
    except ValueError:
        return False
    return is_interrupted_entry(entry) and _key(entry) in keys


def cut_torn_line(stream: Path) -> None:
    """Cut off what follows the stream's last newline (a write a crash cut off: readers skip it,
    and a resume cuts it off before appending too), so a line appended does not land on its
    bytes and make a line no reader takes. Reads back from the end, a block at a time."""
    fd = open_inside(stream, os.O_RDWR)
    try:
        size = end = os.fstat(fd).st_size
        while end > 0:
            start = max(0, end - TAIL_BLOCK)
            newline = os.pread(fd, end - start, start).rfind(b"\n")
            if newline >= 0:
                end = start + newline + 1
                break
            end = start
        if end < size:
            os.ftruncate(fd, end)
    finally:
        os.close(fd)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
