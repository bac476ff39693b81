"""The exchange log's files: their names, creating one safely, and what earlier logs of a session
say about it.

A log is ``<sessions_dir>/YYYYMMDD_HHMMSS_<first 8 of the session id>.jsonl`` (UTC, when the
session's first line was written), mode 0600 in a directory made with mode 0700. The id is
checked before it names a file (:func:`~agenttrace.formats.session.files.check_session_id`), the
file is created, never reused: a name taken in the same second, by a file or by a symlink planted
there, gets ``_2``, ``_3``, ... (a link is never written through:
:func:`~agenttrace.formats.safe_open.open_inside`).

A session resumed by a later program (``resume=`` the SDK's session id) gets a log of its own. The
CLI carries its running totals of cost and API time over to the resumed session, so the new log
needs to know how much of them the session's earlier logs already account for:
:func:`earlier_totals` reads that back from them (regular files only, bounded, any line that is
not what this module writes skipped).
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from agenttrace._internal.config import ReadLimits
from agenttrace.formats.exchange_log.lines import file_stamp
from agenttrace.formats.safe_open import UnsafeFile, open_inside, open_regular
from agenttrace.formats.session.files import check_session_id

SUFFIX = ".jsonl"
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND
_MAX_SAME_NAME = 1000


def create_log(directory: Path, session_id: str, when: float) -> tuple[Path, int]:
    """A new log file for ``session_id`` (checked: a ``SessionFileError`` if it is not a plain
    name), created at ``when``: its path and a descriptor open for appending."""
    stem = f"{file_stamp(when)}_{check_session_id(session_id)[:8]}"
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    for number in range(1, _MAX_SAME_NAME + 1):
        path = directory / (stem + (f"_{number}" if number > 1 else "") + SUFFIX)
        try:
            return path, open_inside(path, _CREATE, 0o600)
        except (FileExistsError, UnsafeFile):  # taken, by a file or a link planted there
            continue
    raise FileExistsError(f"{directory / stem}*{SUFFIX}: {_MAX_SAME_NAME} logs already")


class _Stats(msgspec.Struct, gc=False):
    cost_usd: float | None = None
    duration_api_ms: float | None = None


class _Line(msgspec.Struct, gc=False):
    type: str
    session_id: str | None = None
    stats: _Stats | None = None


_decode_line = msgspec.json.Decoder(_Line).decode


def earlier_totals(
    directory: Path, session_id: str, exclude: Path | None, limits: ReadLimits | None = None
) -> tuple[float, float]:
    """The cost and API time (ms) the exchanges of ``session_id``'s logs in ``directory`` add up
    to, ``exclude`` (the log being written) left out; ``(0, 0)`` when there is none."""
    limits = limits or ReadLimits.from_env()
    cost = api_ms = 0.0
    prefix = check_session_id(session_id)[:8]
    names = {*directory.glob(f"*_{prefix}{SUFFIX}"), *directory.glob(f"*_{prefix}_*{SUFFIX}")}
    for path in sorted(names):
        if exclude is not None and path == exclude:
            continue
        for stats in _exchange_stats(path, session_id, limits):
            cost += stats.cost_usd or 0.0
            api_ms += stats.duration_api_ms or 0.0
    return cost, api_ms


def _exchange_stats(path: Path, session_id: str, limits: ReadLimits) -> list[_Stats]:
    """The stats of the exchanges in ``path``, if it is a log of ``session_id``."""
    try:
        fd = open_regular(path)
    except OSError:
        return []
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(limits.stream_bytes + 1)
    if len(data) > limits.stream_bytes:
        return []
    found: list[_Stats] = []
    for number, line in enumerate(data.split(b"\n")):
        try:
            decoded = _decode_line(line)
        except msgspec.DecodeError:  # a torn last line, or not a line of this format
            if number == 0:
                return []
            continue
        if number == 0 and (decoded.type != "session_start" or decoded.session_id != session_id):
            return []
        if decoded.type == "exchange" and decoded.stats is not None:
            found.append(decoded.stats)
    return found
