"""Refusing every network connection for a while (an offline replay: docs/design/replay.md).

``socket.socket``'s ``connect`` and ``connect_ex`` are patched for the duration, and so are its
and ``ssl.SSLSocket``'s methods that send and receive: an HTTP client keeps connections open
from before (litellm's does), and a request on one of them connects nothing. Not an audit hook:
``sys.addaudithook`` cannot be removed, and the host program goes on after the replay. The
patch is process-wide (every thread, every asyncio loop: they connect through the same
methods), counts nested uses, and leaves Unix-domain sockets alone (local IPC is not the
network)."""

from __future__ import annotations

import contextlib
import functools
import socket
import ssl
import threading
from collections.abc import Iterator
from typing import Any


class OfflineRefused(ConnectionRefusedError):
    """A connection refused because the program runs offline (``replaying(offline=True)``):
    a ``ConnectionRefusedError``, so clients fail as they do when nothing listens."""


_lock = threading.Lock()
_depth = 0
_saved: list[tuple[type, str, Any]] = []
"""(class, method name, the method it had) of each method patched."""

_IO = ("send", "sendall", "sendto", "sendmsg", "recv", "recv_into", "recvfrom", "recvmsg")
_PATCHED = (
    (socket.socket, ("connect", "connect_ex", *_IO, "recvfrom_into")),
    (ssl.SSLSocket, (*_IO, "read", "write")),
)
"""Reads too: an HTTP client whose write fails reads the reply all the same (the server may
have answered before the request was whole: httpcore), and would wait for it forever."""


def _refusing(original: Any) -> Any:
    """``original`` (a socket method), refused on any socket but a Unix-domain one."""

    @functools.wraps(original)
    def refused(self: socket.socket, *args: Any, **kwargs: Any) -> Any:
        if self.family == getattr(socket, "AF_UNIX", None):
            return original(self, *args, **kwargs)
        try:
            peer: Any = self.getpeername()
        except OSError:
            peer = args[0] if args else "?"
        raise OfflineRefused(f"agenttrace: offline: the connection to {peer!r} is refused")

    return refused


@contextlib.contextmanager
def offline() -> Iterator[None]:
    """Refuse every network connection (any family but ``AF_UNIX``) inside the block."""
    global _depth
    with _lock:
        if _depth == 0:
            for cls, names in _PATCHED:
                for name in names:
                    original = getattr(cls, name)
                    _saved.append((cls, name, cls.__dict__.get(name)))
                    setattr(cls, name, _refusing(original))
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for cls, name, had in reversed(_saved):
                    if had is None:  # inherited: the class's own attribute goes again
                        delattr(cls, name)
                    else:
                        setattr(cls, name, had)
                _saved.clear()
