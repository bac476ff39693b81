"""A damaged session file beside a readable stream: what is read from it, and where it goes.

The session file is the only place earlier runs' opTrees are kept whole; a resumed session
rewrites it. So when it cannot be read (truncated by a full disk or a copy cut short, a byte
flipped), a resume must not write over it: :func:`keep_aside` renames it to
``<id>.json.gz.damaged-<n>`` in the same directory (the first ``n`` free, nothing replaced), and
:func:`recover_runs` takes every whole run that can still be read from its start, so the
resumed session keeps them. Both read the file as every reader does: a regular file only,
within the read limits (``ReadLimits``), and never raise anything but ``OSError`` for the
rename; a file nothing can be recovered from gives no run.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import zlib
from pathlib import Path
from typing import Any

from agenttrace._internal.config import ReadLimits
from agenttrace.formats.session import schema
from agenttrace.formats.session.files import SessionFileError, open_untrusted

DAMAGED_INFIX = ".damaged-"
_STEP = 1 << 20


def recover_runs(path: Path, limits: ReadLimits | None = None) -> list[dict[str, Any]]:
    """The runs of the session file at ``path`` that can be read whole from the part of it that
    decompresses, each valid as the schema says; ``[]`` when there is none."""
    limits = ReadLimits.from_env() if limits is None else limits
    try:
        text = _readable_prefix(path, limits)
    except (SessionFileError, OSError):
        return []
    runs: list[dict[str, Any]] = []
    for run in _whole_runs(text):
        try:
            schema.check_run(run, limits.nesting_depth)
        except (schema.FormatError, RecursionError):
            continue
        runs.append(run)
    return runs


def _readable_prefix(path: Path, limits: ReadLimits) -> str:
    """What the gzip members of ``path`` decompress to, up to the first damage or the cap."""
    out = bytearray()
    cap = limits.decompressed_bytes
    with open_untrusted(path, "a session file") as handle:
        decompressor = zlib.decompressobj(31)
        read = 0
        while read < limits.compressed_bytes and (chunk := handle.read(_STEP)):
            read += len(chunk)
            try:
                while chunk and len(out) <= cap:
                    out += decompressor.decompress(chunk, cap + 1 - len(out))
                    if decompressor.eof:  # the next member starts after this one
                        chunk = decompressor.unused_data
                        decompressor = zlib.decompressobj(31)
                    else:
                        chunk = decompressor.unconsumed_tail
            except zlib.error:
                break
            if len(out) > cap:
                break
        with contextlib.suppress(zlib.error):
            out += decompressor.flush()
    return out[:cap].decode("utf-8", "replace")


_RUNS = re.compile(r'"runs"\s*:\s*\[')
_DECODER = json.JSONDecoder()


def _whole_runs(text: str) -> list[Any]:
    """The elements of the document's ``runs`` array that are whole JSON in ``text``."""
    found = _RUNS.search(text, 0, 4096)  # after the format, version and session id
    if found is None:
        return []
    runs: list[Any] = []
    position = found.end()
    while True:
        while position < len(text) and text[position] in " \t\r\n":
            position += 1
        if position >= len(text) or text[position] == "]":
            return runs
        try:
            run, position = _DECODER.raw_decode(text, position)
        except (ValueError, RecursionError):
            return runs  # the damage starts in this run
        runs.append(run)
        while position < len(text) and text[position] in " \t\r\n":
            position += 1
        if position < len(text) and text[position] == ",":
            position += 1
            continue
        return runs


def keep_aside(path: Path) -> Path:
    """Rename ``path`` to ``<name>.damaged-<n>`` beside it, the first ``n`` not taken; returns
    the new path. Never replaces a file (a hard link made, then the old name removed)."""
    for number in range(1, 10_000):
        target = path.with_name(f"{path.name}{DAMAGED_INFIX}{number}")
        try:
            os.link(path, target, follow_symlinks=False)
        except FileExistsError:
            continue
        except OSError:  # no hard links here: a rename, once the name is seen to be free
            if target.exists():
                continue
            os.rename(path, target)
            return target
        os.unlink(path)
        return target
    raise OSError(f"{path}: no free name to keep it aside")
