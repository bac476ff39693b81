"""Opening files users hand us, and files we write beside them, without being led astray.

Reading takes regular files only: a named pipe would block the reader forever, a character
device (``/dev/zero``, also behind a symlink) would feed it without end. The file is opened
non-blocking and checked with ``fstat`` on the open descriptor, so what is checked is what is read.

Writing stays inside the directory: a name there that is a symlink leading elsewhere is refused
rather than followed, so a link planted in the sessions directory under a session's file name
cannot make agenttrace write to another file.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO opens at once instead of waiting
_COMMON = _NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
_READ_FLAGS = os.O_RDONLY | _COMMON
_WRITE_EXTRA = getattr(os, "O_NOFOLLOW", 0) | _COMMON
"""O_NOFOLLOW: the name was resolved and checked; a link swapped in since is not followed."""


class UnsafeFile(OSError):
    """A file agenttrace will not open: not a regular file, or a link out of its directory.
    ``strerror`` says which, in words; ``kind`` is what the file is when it is not regular."""

    def __init__(self, path: str | Path, reason: str, kind: str | None = None) -> None:
        super().__init__(errno.EPERM, reason, str(path))
        self.kind = kind


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is, in words (``a FIFO``)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _require_regular(path: str | Path, mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = kind_of(mode)
        raise UnsafeFile(path, f"is {kind}, not a regular file", kind)


def open_regular(path: str | Path) -> int:
    """A descriptor of ``path`` open for reading, if it is a regular file (symlinks followed);
    else :class:`UnsafeFile`. Never blocks on a FIFO or reads a device."""
    _require_regular(path, os.stat(path).st_mode)  # devices are never even opened
    fd = os.open(path, _READ_FLAGS)
    try:
        _require_regular(path, os.fstat(fd).st_mode)  # what was opened, if swapped meanwhile
    except BaseException:
        os.close(fd)
        raise
    return fd


def inside(path: Path) -> Path:
    """``path`` with symlinks resolved, if that stays inside ``path.parent`` (resolved too);
    else :class:`UnsafeFile`. ``path`` need not exist."""
    try:
        directory = path.parent.resolve()
        target = path.resolve()
    except RuntimeError:  # a symlink loop (Python before 3.13 says so this way)
        raise UnsafeFile(path, "is a symlink loop") from None
    if target == directory or not target.is_relative_to(directory):
        raise UnsafeFile(path, f"is a symlink that leads out of {path.parent}")
    return target


def check_writable(path: Path) -> Path:
    """Where writing ``path`` would write (its symlinks resolved); refuses
    (:class:`UnsafeFile`) a link out of its directory and an existing file that is not a
    regular one."""
    target = inside(path)
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return target
    _require_regular(path, mode)
    return target


def open_inside(path: Path, flags: int, mode: int = 0o600) -> int:
    """``os.open(path, flags, mode)`` for writing, only to a regular file inside ``path``'s
    directory (:func:`check_writable`); a symlink is followed only when it stays inside."""
    fd = os.open(check_writable(path), flags | _WRITE_EXTRA, mode)
    try:
        _require_regular(path, os.fstat(fd).st_mode)
        if _NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd
