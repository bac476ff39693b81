"""The lease a session holds while this process records it (docs/journal.md, "Leases").

Every process that writes a session's files holds its lease, however the session began:
``resume`` (the API and ``agenttrace resume``) takes it beside the files it resumes from and, if
it is written elsewhere (``init(sessions_dir=...)``), there too, before it reads them; a session
a plain ``init()`` program records takes it where it is written at its first record
(:func:`writing`, called by the recorder's sinks once per session, not per record: a program
that records nothing holds none). So a process never continues a session another one is still
writing: it fails at once with :class:`~agenttrace.formats.session.lease.LeaseHeld`. The lease
is held for as long as the session can be recorded: until ``shutdown()``, the process's end, or
the moment nothing refers to the session any more (nothing can write to it then) and its last
snapshot is written (:func:`share`).

Within one process a session resumed again takes over the lease its earlier ``Session`` held
(one process writes its files in order, whichever object it records through): the lease is let
go when the last of them goes.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import logging
import os
import sys
import threading
import weakref
from pathlib import Path
from typing import Any

from agenttrace._internal.finalizers import on_collect
from agenttrace.formats.session.files import (
    SNAPSHOT_SUFFIX,
    STREAM_SUFFIX,
    SessionFileError,
    check_session_id,
)
from agenttrace.formats.session.lease import Lease, LeaseError, LeaseHeld, acquire, lease_path
from agenttrace.session import store_leases

logger = logging.getLogger("agenttrace")


class _Holding:
    """A lease of this process and how many live sessions record under it."""

    __slots__ = ("lease", "session_id", "users")

    def __init__(self, lease: Lease, session_id: str) -> None:
        self.lease = lease
        self.session_id = session_id
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
                    holding = _held[path] = _Holding(lease, session_id)
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
    _give_back_when_collected(session, taken)


_refused: weakref.WeakSet[Any] = weakref.WeakSet()
"""Sessions whose lease a writer could not take: not tried again (once per session)."""


def writing(session: Any, directory: Path) -> bool:
    """Before this process first writes ``session``'s files in ``directory``: make sure it
    holds the session's lease there, taking it if not (held then as :func:`hold` holds it, and
    the session's journal lines carry its token). Whether it holds it.

    A lease another process holds is not taken: instrumentation never stops the program it
    traces, so the session is still written, and one warning names the holder (none in a
    forked child, whose parent holds it). A directory that takes no lease file (it takes no
    session file either: the store says so) is not tried again for the session either."""
    if getattr(session, "writer", None) is not None:
        # A joined writer writes its own segment only, never the files the lease guards; the
        # first writer (or the process resuming the session) holds the lease.
        return False
    directory = directory.absolute()
    lease = getattr(session, "lease", None)
    if isinstance(lease, Lease) and lease.held and lease.path.parent == directory:
        return True
    if session in _refused:
        return False
    with contextlib.suppress(OSError):  # else the lease says where and why
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        taken = take(session.session_id, directory)
    except LeaseError as exc:
        _refused.add(session)
        if isinstance(exc, LeaseHeld) and not _held_by_parent(exc):
            logger.warning(
                "agenttrace: session %s is written by another process too: %s",
                session.session_id,
                exc,
            )
        return False
    session.lease = taken.lease
    _give_back_when_collected(session, taken)
    return True


def _give_back_when_collected(session: Any, taken: Taken) -> None:
    """Give ``taken`` back once ``session`` is collected: on the finalizer thread, since letting
    a lease go takes this module's lock and may ask the session store, over the network, to let
    its lease go too. Not at exit: :func:`release_all` lets every lease go then."""
    on_collect(session, taken.give_back).atexit = False


def _held_by_parent(refusal: LeaseHeld) -> bool:
    """Whether the holder is this process's parent (a forked child writing its session)."""
    return refusal.holder is not None and refusal.holder.pid == os.getppid()


def share(session: Any, directory: Path) -> Taken | None:
    """One more user of the lease ``session`` holds in ``directory`` (``None``: it holds
    none there), until :meth:`Taken.give_back`: the session file's writer keeps the lease until
    its last snapshot is written, which may be after the session object is gone."""
    path = lease_path(directory.absolute(), session.session_id)
    with _lock:
        holding = _held.get(path)
        if holding is None or not holding.lease.held:
            return None
        holding.users += 1
        return Taken([(path, holding)])


def held_here(session_id: str, directory: Path) -> bool:
    """Whether this process holds the lease of ``session_id`` in ``directory`` already (it
    records the session: a call it has in flight is running, not cut short)."""
    path = lease_path(directory.absolute(), session_id)
    with _lock:
        holding = _held.get(path)
        return holding is not None and holding.lease.held


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
    """The token of the lease ``session`` records under, while it is held (``None``: none): its
    lease in the store, for a session the store holds (one token wherever it is resumed), else
    its lease beside its files."""
    stored = getattr(session, "store_lease", None)
    if stored is not None and stored.held:
        return str(stored.token)
    lease = getattr(session, "lease", None)
    return lease.token if isinstance(lease, Lease) and lease.held else None


def release_all() -> None:
    """Let every lease this process holds go (``shutdown()``: nothing records any more)."""
    with _lock:
        holdings = list(_held.values())
        _held.clear()
    for holding in holdings:
        holding.lease.release()
    store_leases.release_all()  # after the sessions' last segments were shipped (shutdown)


def _let_go(path: Path, holding: _Holding) -> None:
    """A session that held ``holding`` is gone: the lease goes with the last one."""
    with _lock:
        holding.users -= 1
        if holding.users > 0:
            return
        if _held.get(path) is holding:
            del _held[path]
        # The session's lease in the store goes with the last of its leases here.
        last = not any(other.session_id == holding.session_id for other in _held.values())
    holding.lease.release()
    if last:
        store_leases.let_go(holding.session_id)


def _owner() -> str:
    """Who holds the lease, for the one line a second taker gets: the program's name."""
    program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if program in ("-c", "-m"):  # ``python -c``: no program file to name
        return f"python {program}"
    if program == "__main__.py":  # ``python -m package``: the package names it
        return os.path.basename(os.path.dirname(sys.argv[0])) or program
    return program or "python"


# At the exit of a process that resumed without init() (or never shut down): the files go with
# their holder. Registered at import, so it runs after init()'s shutdown, which writes the last
# lines first.
atexit.register(release_all)
