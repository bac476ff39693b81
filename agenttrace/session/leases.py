"""The lease a resumed session holds while this process records it (docs/journal.md, "Leases").

``resume`` (the API and ``agenttrace resume``) takes the session's lease beside the files it
resumes from and, if it is written elsewhere (``init(sessions_dir=...)``), there too, so that
two processes never continue the same session at once: the second one fails at once with
:class:`~agenttrace.formats.session.lease.LeaseHeld`. The lease is held for as long as
the session can be recorded: until ``shutdown()``, the process's end, or the moment nothing
refers to the session any more (nothing can write to it then).

Within one process a session resumed again takes over the lease its earlier ``Session`` held
(one process writes its files in order, whichever object it records through): the lease is let
go when the last of them goes.
"""

from __future__ import annotations

import atexit
import errno
import os
import sys
import threading
import weakref
from pathlib import Path
from typing import Any

from agenttrace.formats.session.files import (
    SNAPSHOT_SUFFIX,
    STREAM_SUFFIX,
    SessionFileError,
    check_session_id,
)
from agenttrace.formats.session.lease import Lease, LeaseError, acquire, lease_path


class _Holding:
    """A lease of this process and how many live sessions record under it."""

    __slots__ = ("lease", "users")

    def __init__(self, lease: Lease) -> None:
        self.lease = lease
        self.users = 0


_lock = threading.RLock()  # a finalizer may run inside hold(), in a collection
_held: dict[Path, _Holding] = {}


class Taken:
    """Leases this process took for one user (a session, or a resume while it reads)."""

    __slots__ = ("holdings",)

    def __init__(self, holdings: list[tuple[Path, _Holding]]) -> None:
        self.holdings = holdings

    @property
    def lease(self) -> Lease:
        """The first lease taken."""
        return self.holdings[0][1].lease

    def give_back(self) -> None:
        """This user is done with them: each goes when its last user does."""
        holdings, self.holdings = self.holdings, []
        for path, holding in holdings:
            _let_go(path, holding)


def take(session_id: str, *directories: Path, force: bool = False, required: int = 1) -> Taken:
    """Take the lease of ``session_id`` in each of ``directories`` (one this process holds
    already is shared), or raise ``LeaseHeld`` naming the holder if another process has one
    (``force``: see ``acquire``); those taken before it are let go again. A directory past the
    first ``required`` that takes no file (read-only: only read from, never written) is
    skipped; one that must be written is a ``LeaseError``."""
    paths = list(dict.fromkeys(lease_path(d.absolute(), session_id) for d in directories))
    taken = Taken([])
    with _lock:
        try:
            for index, path in enumerate(paths):
                holding = _held.get(path)
                if holding is None or not holding.lease.held:
                    try:
                        lease = acquire(path, _owner(), force=force)
                    except LeaseError as exc:
                        if index >= required and _read_only(exc):
                            continue
                        raise
                    holding = _held[path] = _Holding(lease)
                holding.users += 1
                taken.holdings.append((path, holding))
        except BaseException:
            taken.give_back()
            raise
    return taken


def _read_only(error: LeaseError) -> bool:
    """Whether ``error`` says the directory takes no new file (permissions, a read-only disk)."""
    cause = error.__cause__
    return isinstance(cause, OSError) and cause.errno in (errno.EACCES, errno.EPERM, errno.EROFS)


def hold(session: Any, *directories: Path, force: bool = False, required: int = 1) -> None:
    """Take the lease of ``session`` (its ``session_id``) in each of ``directories`` (where it
    will be written first, then where it was read from, if elsewhere) for as long as the session
    lives (or until :func:`release_all`); the first taken is ``session.lease``, whose token its
    journal lines carry. Raises as :func:`take` does."""
    taken = take(session.session_id, *directories, force=force, required=required)
    session.lease = taken.lease if taken.holdings else None
    weakref.finalize(session, taken.give_back).atexit = False


def file_session_id(path: Path) -> str | None:
    """The session id the name of a session's file gives (``abc`` for ``abc.events.jsonl`` or
    ``abc.json.gz``), if it is one: a resume takes its lease before it reads the file."""
    for suffix in (STREAM_SUFFIX, SNAPSHOT_SUFFIX):
        if path.name.endswith(suffix):
            try:
                return check_session_id(path.name[: -len(suffix)])
            except SessionFileError:
                return None
    return None


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


def _owner() -> str:
    """Who holds the lease, for the one line a second taker gets: the program's name."""
    program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return program or "python"


# At the exit of a process that resumed without init() (or never shut down): the files go with
# their holder. Registered at import, so it runs after init()'s shutdown, which writes the last
# lines first.
atexit.register(release_all)
