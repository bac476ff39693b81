"""A lease on a session: at most one process resumes it at a time (docs/journal.md, "Leases").

The lease is a file beside the session's (``<session>.lease``) that the holder keeps locked
(``flock``) for as long as it holds it, and whose content says who holds it: owner, pid, host,
a random token (which the holder's journal lines carry) and since when. So:

- a second process that wants the session fails at once, with one line naming the holder;
- a holder that died (killed, crashed) lost its lock with its process: the next one takes the
  lease over, on this host, with nothing to clean up;
- a holder that lets it go removes the file (while it still holds the lock: a taker that opened
  the file meanwhile finds, once it has the lock, that the name no longer leads to it, and
  opens it again), so a session leaves no lease file behind;
- a lease whose file says another host holds it is not taken over (that host's lock is not
  visible here: a shared directory) unless the taker says ``force``;
- a live holder on this host keeps it unless the taker says ``force`` (that process is stuck):
  a new lease file, locked, is renamed over the old one, whose holder keeps a lock on a file
  no one reads any more (its later journal lines carry its own token, so they can be told apart);
- a holder letting go and a forced taker renaming its file in never interleave: each holds a
  lock on the directory for the while (``flock`` on the directory itself: no file is left), so
  the holder's look at which file the name leads to and its removal of it are one step, and it
  never removes the new holder's file.

A forked child closes its copy of the descriptor (the lock stays with the parent): a worker the
holder forked must not keep the lease once the holder is gone.

While it holds a lease, the holder touches its file every few seconds (``heartbeat``): a taker
that finds it locked but long untouched says the holder looks hung (stopped, or stuck), and
still refuses without ``force``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import socket
import stat
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenttrace.formats.safe_open import open_regular
from agenttrace.formats.session import heartbeat

LEASE_SUFFIX = ".lease"
MAX_LEASE_BYTES = 4096
"""A lease file is a few hundred bytes; more is not one agenttrace wrote (read no further)."""


class LeaseError(RuntimeError):
    """The session's lease cannot be taken; the message is one line saying why."""


class LeaseHeld(LeaseError):
    """Another process holds the session's lease; the message is one line saying which.

    ``holder``: who, as the lease file says (``None``: it could not be read); ``silent_for``:
    the seconds since a live holder's last heartbeat, when that is long enough for it to look
    hung (``None``: it beats, or the lease is another host's)."""

    def __init__(
        self, message: str, holder: Holder | None = None, silent_for: float | None = None
    ) -> None:
        super().__init__(message)
        self.holder = holder
        self.silent_for = silent_for

    @property
    def hung(self) -> bool:
        """Whether the holder is alive but has not beaten for ``heartbeat.STALE_AFTER`` s."""
        return self.silent_for is not None


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) a lease, as its file says."""

    owner: str
    pid: int
    host: str
    token: str
    since: float

    def describe(self) -> str:
        return f"{self.owner} (pid {self.pid} on {self.host}, since {time.ctime(self.since)})"


class Lease:
    """A held lease; :meth:`release` (or the process's end) lets it go."""

    def __init__(self, path: Path, fd: int, holder: Holder) -> None:
        self.path = path
        self.holder = holder
        self._fd: int | None = fd
        # Taken by the heartbeat around its touch and by release around the close: a touch
        # never lands on a descriptor number closed and reused meanwhile for another file.
        self._lock = threading.Lock()
        # Closing the descriptor drops the lock: on release, or when the lease is dropped (not
        # for release itself: a finalizer does nothing once the interpreter is exiting).
        # Inline in the collector's thread: it takes no lock of ours, only the directory's
        # flock, which _renames_held never waits for on a thread that holds it already.
        self._dropped = weakref.finalize(self, _let_go, path, fd)
        self._dropped.atexit = False  # the process's end drops the lock anyway
        _open_leases.add(self)
        _heartbeat.start()

    @property
    def token(self) -> str:
        """The token the holder's journal lines carry."""
        return self.holder.token

    @property
    def held(self) -> bool:
        """Whether this process still holds it (not released, not a forked child's copy)."""
        return self._fd is not None

    def release(self) -> None:
        """Let the lease go, and remove its file (if it is still this lease's)."""
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            self._dropped.detach()
            _let_go(self.path, fd)

    def _beat(self) -> bool:
        """Touch the lease's file (the heartbeat); whether it is still held."""
        with self._lock:
            if self._fd is None:
                return False
            with contextlib.suppress(OSError):  # a full disk, say: the lock says it is alive
                heartbeat.touch(self._fd)
            return True

    def _forget(self) -> None:
        """Close this copy of the descriptor, leaving the file and the lock (a forked child's
        copy: the parent's descriptor keeps the lock). In the child only: the lock is a new
        one (the parent's heartbeat may have held it at the fork)."""
        self._lock = threading.Lock()
        fd, self._fd = self._fd, None
        if fd is not None:
            self._dropped.detach()
            _close_quietly(fd)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *_: Any) -> None:
        self.release()


def lease_path(sessions_dir: str | Path, session_id: str) -> Path:
    """Where ``session_id``'s lease is (beside its files)."""
    return Path(sessions_dir) / f"{session_id}{LEASE_SUFFIX}"


MAX_TRIES = 16
"""How often :func:`acquire` opens the file again when another taker replaced it meanwhile."""


def acquire(path: str | Path, owner: str = "agenttrace resume", *, force: bool = False) -> Lease:
    """Take the lease at ``path``: now, or a :class:`LeaseHeld` naming who has it. A lease its
    dead holder left on this host is taken over; one a live process holds, or another host's
    file names, needs ``force``. A file that cannot be made there is a :class:`LeaseError`."""
    path = Path(path)
    for _ in range(MAX_TRIES):
        try:
            lease = _try(path, owner, force)
        except OSError as exc:  # a directory that takes no file, a link under the name
            raise LeaseError(
                f"{path}: cannot hold the session's lease there: {exc.strerror or exc}"
            ) from exc
        if lease is not None:
            return lease
    raise LeaseHeld(f"{path.name}: the lease file keeps being replaced; try again")


def _try(path: Path, owner: str, force: bool) -> Lease | None:
    """The lease, or ``None`` if the file was replaced between its opening and its lock.

    Under the directory's lock (:func:`_renames_held`), as every change of a lease file is: a
    taker locks the file and writes its name in it before another taker can look, so one that
    finds the file locked reads who holds it, never the name of the holder before (or none)."""
    with _renames_held(path):
        return _try_held(path, owner, force)


def _try_held(path: Path, owner: str, force: bool) -> Lease | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise LeaseHeld(f"{path.name}: not a regular file; cannot hold a lease there")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                raise
            previous = read_holder(path)
            if not force:
                raise _held_by(path, previous, heartbeat.silent_for(fd)) from None
            os.close(fd)
            return _replace(path, owner)
        if not _same_file(fd, path):
            os.close(fd)  # a forced taker renamed a new file over it: lock that one
            return None
        previous = _holder_of(fd)
        host = socket.gethostname()
        if previous is not None and previous.host != host and not force:
            raise LeaseHeld(
                f"{path.name}: the session is held by {previous.describe()}, another host; "
                "take it over with --force only if that process is gone",
                previous,
            )
        holder = _new_holder(owner)
        _write(fd, holder)
        return Lease(path, fd, holder)
    except BaseException:
        with contextlib.suppress(OSError):  # closed already before a forced takeover
            os.close(fd)
        raise


def _held_by(path: Path, holder: Holder | None, silent: float) -> LeaseHeld:
    """The one line a taker gets when a live process holds the lease: who, and, if its
    heartbeat stopped long enough ago, that it looks hung."""
    who = holder.describe() if holder is not None else "another process"
    if silent <= heartbeat.STALE_AFTER or (holder is not None and holder.host != _host()):
        return LeaseHeld(
            f"{path.name}: the session is held by {who}; wait for it to end "
            "(--force takes it over from a process that is stuck)",
            holder,
        )
    return LeaseHeld(
        f"{path.name}: the session is held by {who}, which looks hung: alive, but no "
        f"heartbeat for {silent:.0f} s (--force takes it over from a process that is stuck)",
        holder,
        silent,
    )


def _host() -> str:
    return socket.gethostname()


def _replace(path: Path, owner: str) -> Lease:
    """Take the lease from a live holder (``force``): a new file, locked and written, renamed
    over the old one. The old holder keeps its lock on a file no one reads any more."""
    holder = _new_holder(owner)
    fresh = path.with_name(f".{path.name}.{holder.token}")
    fd = os.open(fresh, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: no one else has it
        _write(fd, holder)
        with _renames_held(path):  # not while a holder letting go looks at the name
            os.replace(fresh, path)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(fresh)
        raise
    return Lease(path, fd, holder)


def _new_holder(owner: str) -> Holder:
    return Holder(owner, os.getpid(), socket.gethostname(), secrets.token_hex(16), time.time())


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file ``fd`` has open."""
    try:
        named = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    mine = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (mine.st_dev, mine.st_ino)


def read_holder(path: str | Path) -> Holder | None:
    """Who the lease file at ``path`` names (``None``: no file, or not a lease)."""
    try:
        fd = open_regular(Path(path))
    except OSError:
        return None
    try:
        return _parse(os.read(fd, MAX_LEASE_BYTES + 1))
    except OSError:
        return None
    finally:
        os.close(fd)


def _holder_of(fd: int) -> Holder | None:
    os.lseek(fd, 0, os.SEEK_SET)
    return _parse(os.read(fd, MAX_LEASE_BYTES + 1))


def _parse(data: bytes) -> Holder | None:
    if not data or len(data) > MAX_LEASE_BYTES:
        return None
    try:
        fields = json.loads(data)
        holder = Holder(
            str(fields["owner"]),
            int(fields["pid"]),
            str(fields["host"]),
            str(fields["token"]),
            float(fields["since"]),
        )
    except (ValueError, KeyError, TypeError, OverflowError):  # 1e999 is JSON, no pid
        return None
    if not 0 <= holder.since <= _LAST_SECOND:  # no time a message can print: not a holder's
        return None
    return holder


_LAST_SECOND = 253_402_300_799
"""9999-12-31T23:59:59Z: the last time ``time.ctime`` prints on every platform."""


def _write(fd: int, holder: Holder) -> None:
    data = json.dumps(holder.__dict__).encode() + b"\n"
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    os.fsync(fd)


_open_leases: weakref.WeakSet[Lease] = weakref.WeakSet()


def _beat_all() -> bool:
    """The heartbeat: touch every lease this process holds; whether it holds any."""
    return any([lease._beat() for lease in list(_open_leases)])


_heartbeat = heartbeat.Heartbeat(_beat_all)


def _close_in_child() -> None:
    """In a forked child: close the copies of the parent's lease descriptors, which would keep
    its locks alive after it died (the parent's own descriptors keep them while it lives), and
    of a directory a thread of the parent held locked at the fork."""
    for lease in list(_open_leases):
        lease._forget()
    for directory in list(_directories_locked):
        _close_quietly(directory)
    _directories_locked.clear()


def _let_go(path: Path, fd: int) -> None:
    """Remove the lease file while its lock is held, if ``path`` still names it (a taker that
    opened it meanwhile finds it gone once it has the lock, and opens a new one), then drop the
    lock. So a session leaves no lease file behind once its last holder let it go.

    A forced taker renames its file over ``path`` only while no holder is between its look at
    the name and its removal (:func:`_renames_held`): the file removed is this holder's own."""
    try:
        with _renames_held(path):
            if _same_file(fd, path):
                os.unlink(path)
    except OSError:  # the directory or the name is gone: nothing of this lease to remove
        pass
    _close_quietly(fd)


@contextlib.contextmanager
def _renames_held(path: Path) -> Iterator[None]:
    """While this holds, no other process (or thread) takes a lease file in ``path``'s
    directory, renames a file over one, nor removes one: a lock on the directory itself. A
    directory that cannot be opened (no read permission) is not locked: the name is then
    looked at and removed in two steps, as it is without this."""
    if getattr(_holding_here, "directory", None) == path.parent:
        # This thread holds it already: a lease dropped in a collection while it renames.
        # Taken again, a lock on a second descriptor would wait for this one forever.
        yield
        return
    try:
        directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        yield
        return
    _directories_locked.add(directory)
    try:
        try:
            fcntl.flock(directory, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                raise
            _waiting_for_directory(path)
            fcntl.flock(directory, fcntl.LOCK_EX)  # held for a look and a rename: short
        _holding_here.directory = path.parent
        try:
            yield
        finally:
            _holding_here.directory = None
    finally:
        if directory in _directories_locked:  # else a forked child closed its copy already
            _directories_locked.discard(directory)
            os.close(directory)  # drops the lock


_holding_here = threading.local()
_directories_locked: set[int] = set()
"""The descriptors of the directories a thread of this process holds locked now: a child
forked meanwhile closes its copies (the lock would last as long as the child)."""


def _waiting_for_directory(path: Path) -> None:
    """Another holder of the directory's lock is letting go or taking over: this one waits.
    (Nothing to do; a test replaces it to know the wait began.)"""


def _close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_in_child)
