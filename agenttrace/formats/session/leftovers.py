"""Temporary files that a killed process left in the sessions directory, and removing them.

A session file is written to ``.<name>.<random>.tmp`` beside it and renamed over it
(:func:`agenttrace.formats.session.spool.atomic_file`); a process killed before the rename leaves
that file behind, and with it the space of a whole session file. A spool's temporary file has no
name where the system allows it (Linux); elsewhere it has one for an instant after creation.

:func:`remove_leftovers` removes such a file only if all of these hold:

- its name is one agenttrace gives its temporary files: ``.<session id>.json.gz.<8>.tmp`` and
  ``.<session id>.events.jsonl.<8>.tmp`` (a session file, a stream rewritten whole), or
  ``.agenttrace-spool-<8>``, each ``<8>`` eight of the characters ``tempfile`` draws from, in
  the directory or in a session's segments directory (``<session id>.w``, a joined writer's
  ``.<writer id>.json.gz.<8>.tmp``). Nothing else is touched;
- it is a regular file (not a symbolic link) owned by this user;
- no process holds its lock: :func:`atomic_file` holds an exclusive ``flock`` on its temporary
  file until the rename, and the system releases it when the process ends, however it ends, so
  a file that another process sharing the directory is writing right now is left alone;
- it was last modified more than ``min_age`` seconds ago (a file made an instant ago may not
  be locked yet), or an hour ago where the file system has no locks.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import sys
import time
from pathlib import Path

from agenttrace.formats.session.files import SEGMENTS_SUFFIX, SNAPSHOT_SUFFIX, STREAM_SUFFIX
from agenttrace.formats.session.spool import SPOOL_PREFIX, TEMP_SUFFIX

logger = logging.getLogger("agenttrace")

MIN_AGE = 60.0
"""Seconds since its last change before an unlocked temporary file counts as left over."""

_AGE_WITHOUT_LOCKS = 3600.0

_RANDOM = r"[a-z0-9_]{8}"  # tempfile's names: 8 of "abcdefghijklmnopqrstuvwxyz0123456789_"
_LEFTOVER = re.compile(
    r"^\.(?:"
    rf"[A-Za-z0-9][A-Za-z0-9_.-]{{0,127}}(?:{re.escape(SNAPSHOT_SUFFIX)}|{re.escape(STREAM_SUFFIX)})"
    rf"\.{_RANDOM}{re.escape(TEMP_SUFFIX)}"
    rf"|{re.escape(SPOOL_PREFIX[1:])}{_RANDOM}"
    r")$"
)


def is_temporary_name(name: str) -> bool:
    """True for the names agenttrace gives its temporary files in a sessions directory."""
    return _LEFTOVER.match(name) is not None


def remove_leftovers(directory: Path, min_age: float = MIN_AGE) -> list[Path]:
    """Remove the temporary files killed processes left in ``directory`` (see the module
    docstring); returns the files removed. Never raises: tidying is never worth a failure."""
    entries = _temporary_entries(directory)
    now = time.time()
    removed: list[Path] = []
    size = 0
    for entry in entries:
        try:
            freed = _remove_if_left(entry, now, min_age)
        except OSError:  # gone meanwhile, not ours to open, a directory that cannot be written
            continue
        if freed is not None:
            removed.append(Path(entry.path))
            size += freed
    if removed:
        logger.info(
            "agenttrace: removed %d temporary file(s) that killed processes left in %s (%d bytes)",
            len(removed),
            directory,
            size,
        )
    return removed


def _temporary_entries(directory: Path) -> list[os.DirEntry[str]]:
    """The entries of ``directory`` named as agenttrace's temporary files, and those of each
    session's segments directory in it (``<id>.w``: a joined writer killed mid-write leaves its
    temporary file there). A segments directory that is a symbolic link is not followed."""
    try:
        top = list(os.scandir(directory))
    except OSError:
        return []
    found = [entry for entry in top if is_temporary_name(entry.name)]
    for entry in top:
        try:
            if not entry.name.endswith(SEGMENTS_SUFFIX) or not entry.is_dir(follow_symlinks=False):
                continue
            found.extend(inner for inner in os.scandir(entry.path) if is_temporary_name(inner.name))
        except OSError:
            continue
    return found


def _remove_if_left(entry: os.DirEntry[str], now: float, min_age: float) -> int | None:
    """Remove ``entry`` if it was left over; its size if removed, else ``None``."""
    if not entry.is_file(follow_symlinks=False):
        return None
    seen = entry.stat(follow_symlinks=False)
    if hasattr(os, "geteuid") and seen.st_uid != os.geteuid():
        return None
    age = now - seen.st_mtime
    if age < min_age:
        return None
    fd = os.open(entry.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (seen.st_dev, seen.st_ino):
            return None  # replaced since it was looked at
        held = _held(fd)
        if held or (held is None and age < _AGE_WITHOUT_LOCKS):
            return None
        os.unlink(entry.path)
        return opened.st_size
    finally:
        os.close(fd)


if sys.platform == "win32":

    def _held(fd: int) -> bool | None:
        """Unknown: no advisory locks (and a file open on Windows cannot be removed)."""
        return None

else:
    import fcntl

    def _held(fd: int) -> bool | None:
        """True if another open file holds the file's lock, False if not, None if unknown."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return True
            return None  # a file system without locks
        return False
