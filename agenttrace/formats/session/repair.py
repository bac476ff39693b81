"""Making an event stream whole before appending to it: what a crash cut short.

A process killed in the middle of a write leaves a torn last line, or the first lines of a
write of many (:mod:`agenttrace.formats.session.unfinished` tells them apart); a session resumed
from its session file alone, or whose stream stopped on a full disk, has a stream with fewer
events than it restored. The event-stream sink (``agenttrace.recorder.store``) calls
:func:`repair_stream` once per session, before its first append, so the next line never lands on
a torn one and the event ids stay contiguous in both files.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agenttrace.formats.safe_open import open_inside
from agenttrace.formats.session.files import STREAM_SUFFIX, is_journal_line, write_atomically
from agenttrace.formats.session.unfinished import ACCOUNTED_PREFIX

logger = logging.getLogger("agenttrace")


def repair_stream(
    path: Path, restored: int, cut_short: bool, restored_stream: Callable[[], bytes]
) -> None:
    """Before appending to an existing stream, make it a whole prefix of its session (which
    restored ``restored`` events from its files; ``cut_short``: and left out the events of a
    write a crash cut short, :mod:`agenttrace.formats.session.unfinished`).

    A torn last line (a write cut off by a crash) is dropped, so the next event does not land
    on its bytes; so is an agent's creation that a crash cut short (resume left it out: the
    events that replace it take its ids), unless journal lines came after it (the stream is
    then written again from the session, which keeps them). A resumed session whose stream has
    fewer events than were restored (the stream stopped on a full disk while the session file
    went on, or is gone: resumed from its session file alone) gets the stream written again from
    the restored events, its accounting and its step journal, so the ids stay contiguous in both
    files and the stream holds the whole journal again (``restored_stream()``: those lines,
    :func:`restored_stream`).

    The file is opened as the appender opens it (a regular file inside the sessions directory,
    else ``UnsafeFile``, an ``OSError``) and read in blocks, never whole.
    """
    try:
        fd = open_inside(path, os.O_RDWR)
    except FileNotFoundError:  # nothing yet, or a resumed session's stream is gone
        if restored:
            write_atomically(path, restored_stream())
        return
    try:
        lines, size, keep, restored_end = _scan_lines(fd, restored)
        if restored and lines < restored:
            write_atomically(path, restored_stream())
            logger.warning(
                "agenttrace: %s had fewer events than session %s; rewritten from the restored "
                "session before appending",
                path,
                path.name.removesuffix(STREAM_SUFFIX),
            )
        elif cut_short and restored_end < size:  # keep the first ``restored`` lines
            if _journal_line_past(fd, restored_end):
                # Journaled or accounted after the write the crash cut short (a decision
                # ``agenttrace resolve`` appended, an interrupted LLM call's accounting a
                # resume appended): the session restored it, so the stream is written again
                # from the session, atomically, rather than cut back to before it.
                write_atomically(path, restored_stream())
            else:
                os.ftruncate(fd, restored_end)
        elif keep < size:
            os.ftruncate(fd, keep)
            logger.warning(
                "agenttrace: %s ended in a torn line (%d bytes, a write cut off by a crash); "
                "dropped before appending",
                path,
                size - keep,
            )
    finally:
        os.close(fd)


def restored_stream(
    event_lines: Sequence[bytes],
    accounted_lines: Iterable[bytes],
    journal: Iterable[Mapping[str, Any]],
) -> bytes:
    """The stream of what a session restored: its events' lines, their ``op_accounted`` lines
    (``agenttrace.formats.ledger.accounted_line``), its step journal, each line as the stream
    writes its lines."""
    lines = list(accounted_lines)
    steps = [
        json.dumps(step, ensure_ascii=False).encode("utf-8", "backslashreplace") + b"\n"
        for step in journal
    ]
    return b"".join([*event_lines, *lines, *steps])


def _journal_line_past(fd: int, offset: int, block: int = 1 << 20) -> bool:
    """Whether a whole step-journal or ``op_accounted`` line (the accounting of an LLM call a
    kill cut short, a resume appended it) lies past ``offset`` in the stream open at ``fd``
    (read in blocks; of a long line only its start is kept, which is all that tells)."""
    carry = b""
    while chunk := os.pread(fd, block, offset):
        offset += len(chunk)
        lines = (carry + chunk).split(b"\n")
        carry = lines.pop()[:64]
        if any(is_journal_line(line) or line.startswith(ACCOUNTED_PREFIX) for line in lines):
            return True
    return False


def _scan_lines(fd: int, nth: int, block: int = 1 << 20) -> tuple[int, int, int, int]:
    """(events, size, where the last whole line ends, where event ``nth`` ends) of the stream
    open at ``fd``. ``op_accounted`` and step-journal lines are no events: they are not counted,
    and those right after event ``nth`` belong to it (they stay when the file is cut back to
    it). The last is the size when the file has fewer events, 0 (or past the lines that
    belong to no event at its start) when ``nth`` is 0."""
    events = size = keep = 0
    nth_end = 0 if nth == 0 else -1  # event 0 ends where the file starts
    carry = b""
    while chunk := os.pread(fd, block, size):
        size += len(chunk)
        lines = (carry + chunk).split(b"\n")
        carry = lines.pop()  # after the last newline: part of a line, or nothing
        end = size - len(carry) - sum(len(line) + 1 for line in lines)
        for line in lines:
            end += len(line) + 1
            if line.startswith(ACCOUNTED_PREFIX) or is_journal_line(line):
                if nth_end == end - len(line) - 1:  # right after event ``nth``
                    nth_end = end
                continue
            events += 1
            if events == nth:
                nth_end = end
        if lines:
            keep = end
    return events, size, keep, (size if nth_end < 0 else nth_end)
