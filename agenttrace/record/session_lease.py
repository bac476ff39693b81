"""The lease a resumed session holds while this process records it (docs/journal.md, "Leases").

``resume`` (the API and ``agenttrace resume``) takes the session's lease beside the files it
resumes from and, if it is written elsewhere (``init(sessions_dir=...)``), there too, so that
two processes never continue the same session at once: the second one fails at once with
:class:`~agenttrace.record.lease.LeaseHeld`. The lease is held for as long as
the session can be recorded: until ``shutdown()``, the process's end, or the moment nothing
refers to the session any more (nothing can write to it then).

Within one process a session resumed again takes over the lease its earlier ``Session`` held
(one process writes its files in order, whichever object it records through): the lease is let
go when the last of them goes.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from pathlib import Path
from typing import Any

from agenttrace.record.lease import Lease, acquire, lease_path
from agenttrace.record.session_files import sibling_path


class _Holding:
    """A lease of this process and how many live sessions record under it."""

    __slots__ = ("lease", "users")

    def __init__(self, lease: Lease) -> None:
        self.lease = lease
        self.users = 0


_lock = threading.RLock()  # a finalizer may run inside hold(), in a collection
_held: dict[Path, _Holding] = {}


def hold(session: Any, *directories: Path, force: bool = False) -> Lease:
    """Take the lease of ``session`` (its ``session_id``) in each of ``directories`` (where it
    will be written first, then where it was read from, if elsewhere) for as long as the session
    lives (or until :func:`release_all`); the first is ``session.lease``, whose token its journal
    lines carry. Raises ``LeaseHeld`` naming the holder if another process has one (``force``:
    see ``acquire``); the leases taken before it are let go again."""
    paths = list(dict.fromkeys(lease_path(d.absolute(), session.session_id) for d in directories))
    taken: list[_Holding] = []
    with _lock:
        try:
            for path in paths:
                holding = _held.get(path)
                if holding is None or not holding.lease.held:
                    holding = _held[path] = _Holding(acquire(path, _owner(), force=force))
                holding.users += 1
                taken.append(holding)
        except BaseException:
            for path, holding in zip(paths, taken, strict=False):
                _let_go(path, holding)
            raise
        session.lease = taken[0].lease
    for path, holding in zip(paths, taken, strict=True):
        weakref.finalize(session, _let_go, path, holding).atexit = False
    return taken[0].lease


def token(session: Any) -> str | None:
    """The token of the lease ``session`` records under, while it is held (``None``: none)."""
    lease = getattr(session, "lease", None)
    return lease.token if isinstance(lease, Lease) and lease.held else None


def release_all() -> None:
    """Let every lease this process holds go (``shutdown()``: nothing records any more)."""
    with _lock:
        holdings = list(_held.values())
        _held.clear()
    for holding in holdings:
        holding.lease.release()


def _let_go(path: Path, holding: _Holding) -> None:
    """A session that held ``holding`` is gone: the lease goes with the last one."""
    with _lock:
        holding.users -= 1
        if holding.users > 0:
            return
        if _held.get(path) is holding:
            del _held[path]
    holding.lease.release()


def files_state(path: Path) -> tuple[tuple[int, int, int] | None, ...]:
    """What ``path`` and the other file of its pair look like now (inode, size, modification
    time): a resume compares it before reading and once it holds the lease."""
    return tuple(_state(each) for each in (path, sibling_path(path)) if each is not None)


def _state(path: Path) -> tuple[int, int, int] | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns


def _owner() -> str:
    """Who holds the lease, for the one line a second taker gets: the program's name."""
    program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return program or "python"
