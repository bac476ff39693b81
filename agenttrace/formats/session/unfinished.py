"""Writes a crash cut short, told by the lines they left.

Events logged together (an agent's creation and the entries its transcript starts with: its
instructions) go to the event stream in one write, and every line of such a write but its last
ends in a space before its newline: *more of this write follows*. JSON ignores the space, so
the events read the same. A write of many kilobytes is not atomic: a process killed in the
middle of it (the system copies a write a page at a time, and a kill stops it between pages)
leaves its first lines whole, the last whole one still ending in that space, and perhaps a torn
line after it. :func:`unfinished_tail` finds those lines at the end of a stream, so a resume
can leave their events out: the call that logged them never returned, and an agent without its
instructions is not what anyone created. Step-journal lines after them were appended later, by
another process (``agenttrace resolve`` deciding about a call the crash left in doubt, with the
call's ``op_accounted`` line as decided): they are passed over, not taken for the end of a write
that finished.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from agenttrace.formats.session.files import (
    SNAPSHOT_SUFFIX,
    STREAM_SUFFIX,
    LoadedFile,
    is_journal_line,
    sibling_path,
)

CONTINUED = b" \n"
"""How a line that is not the last of its write ends."""

_BLOCK = 64 << 10
ACCOUNTED_PREFIX = b'{"event_type": "op_accounted"'
"""How an ``op_accounted`` line starts (``agenttrace.formats.ledger.ACCOUNTED_PREFIX``): after a
write a kill cut short, one comes from ``agenttrace resolve``, never from the killed process."""


def continued(line: bytes) -> bytes:
    """``line`` (ending in a newline) marked as followed by more lines of the same write."""
    return line[:-1] + CONTINUED


def unfinished_tail(path: Path) -> list[bytes]:
    """The whole lines at the end of the stream at ``path`` that belong to a write that never
    finished, oldest first (none if its last write finished, or it cannot be read); step-journal
    lines appended after that write are not among them.

    Reads the file backwards from its end, no further than the start of that write.
    """
    try:
        with open(path, "rb") as handle:
            end = os.fstat(handle.fileno()).st_size
            tail = b""
            block = _BLOCK
            while True:
                start = max(0, end - block)
                handle.seek(start)
                tail = handle.read(end - start) + tail
                end, block = start, 2 * block  # doubling: a long write costs one pass
                found = _unfinished(tail, whole_file=start == 0)
                if found is not None:
                    return found
    except OSError:
        return []


def _unfinished(tail: bytes, whole_file: bool) -> list[bytes] | None:
    """The unfinished lines at the end of ``tail`` (the last bytes of a file), or None if more
    of the file must be read to tell."""
    lines = tail.split(b"\n")
    last = lines.pop()  # after the last newline: nothing, a torn line, or a whole last line
    if last and _whole(last):
        lines.append(last)  # a write cut just before its last newline
    if not whole_file:
        lines = lines[1:]  # the first piece may be the end of a longer line
    found: list[bytes] = []
    for line in reversed(lines):
        if not found and (is_journal_line(line) or line.startswith(ACCOUNTED_PREFIX)):
            continue  # appended after the last write (a decision), by another process
        if not line.endswith(b" "):  # the end of a write that finished
            return found[::-1]
        found.append(line)
    return found[::-1] if whole_file else None


def _whole(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def without_unfinished(path: Path, loaded: LoadedFile) -> tuple[LoadedFile, list[dict[str, Any]]]:
    """``loaded`` without the events at its end whose write never finished, and those events."""
    cut_short = _unfinished_events(path, loaded)
    if cut_short:
        loaded = dataclasses.replace(loaded, events=loaded.events[: -len(cut_short)])
    return loaded, cut_short


def _unfinished_events(path: Path, loaded: LoadedFile) -> list[dict[str, Any]]:
    """The events at the end of ``loaded`` whose write to the session's stream never finished
    (see ``agenttrace.formats.session.unfinished``), if its events came from that stream."""
    name = path.name
    stream = path
    if name.endswith(SNAPSHOT_SUFFIX):
        stream = sibling_path(path) or path
    elif not name.endswith(STREAM_SUFFIX) and loaded.kind != "stream":
        return []
    lines = unfinished_tail(stream) if stream.is_file() else []
    if not lines or len(lines) > len(loaded.events):
        return []
    tail = loaded.events[-len(lines) :]
    try:
        ids = [json.loads(line).get("message_id") for line in lines]
    except (ValueError, AttributeError):
        return []
    return tail if ids == [event.get("message_id") for event in tail] else []
