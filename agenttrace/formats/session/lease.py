"""A lease on a session: at most one process resumes it at a time (docs/journal.md, "Leases").

The lease is a file beside the session's (``<session>.lease``) that the holder keeps locked
(``flock``) for as long as it holds it, and whose content says who holds it: owner, pid, host,
a random token (which the holder's journal lines carry) and since when. So:

- a second process that wants the session fails at once, with one line naming the holder;
- a holder that died (killed, crashed) lost its lock with its process: the next one takes the
  lease over, on this host, with nothing to clean up;
- a lease whose file says another host holds it is not taken over (that host's lock is not
  visible here: a shared directory) unless the taker says ``force``.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import secrets
import socket
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenttrace.formats.safe_open import open_regular

LEASE_SUFFIX = ".lease"
MAX_LEASE_BYTES = 4096
"""A lease file is a few hundred bytes; more is not one agenttrace wrote (read no further)."""


class LeaseHeld(RuntimeError):
    """Another process holds the session's lease; the message is one line saying which."""


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
        self._fd: int | None = fd
        self.holder = holder

    @property
    def token(self) -> str:
        """The token the holder's journal lines carry."""
        return self.holder.token

    def release(self) -> None:
        """Let the lease go (the file stays: the next holder rewrites it)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the lock

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *_: Any) -> None:
        self.release()


def lease_path(sessions_dir: str | Path, session_id: str) -> Path:
    """Where ``session_id``'s lease is (beside its files)."""
    return Path(sessions_dir) / f"{session_id}{LEASE_SUFFIX}"


def acquire(path: str | Path, owner: str = "agenttrace resume", *, force: bool = False) -> Lease:
    """Take the lease at ``path``: now, or a :class:`LeaseHeld` naming who has it. A lease its
    dead holder left on this host is taken over; one another host's file names needs ``force``."""
    path = Path(path)
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
            who = previous.describe() if previous is not None else "another process"
            raise LeaseHeld(f"{path.name}: the session is held by {who}") from None
        previous = _holder_of(fd)
        host = socket.gethostname()
        if previous is not None and previous.host != host and not force:
            raise LeaseHeld(
                f"{path.name}: the session is held by {previous.describe()}, another host; "
                "take it over with --force only if that process is gone"
            )
        holder = Holder(owner, os.getpid(), host, secrets.token_hex(16), time.time())
        _write(fd, holder)
        return Lease(path, fd, holder)
    except BaseException:
        os.close(fd)
        raise


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
    except (ValueError, KeyError, TypeError):
        return None
    return holder


def _write(fd: int, holder: Holder) -> None:
    data = json.dumps(holder.__dict__).encode() + b"\n"
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    os.fsync(fd)
