"""A server process a test starts on a free port of 127.0.0.1, waits for, and stops."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tests.helpers import ROOT, child_env


def free_port() -> int:
    """A port of 127.0.0.1 nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def listening(command: Callable[[int], list[str]]) -> Iterator[int]:
    """Run ``command(port)`` (from the repository's root, as a user's process) until it
    listens on ``port`` of 127.0.0.1; yields the port, and stops the server after the block
    (SIGTERM: it exits as it would when stopped, writing what it writes at exit)."""
    port = free_port()
    server = subprocess.Popen(
        command(port),
        cwd=ROOT,
        env=child_env(PYTHONPATH=str(ROOT)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120  # a loaded machine imports a server's stack slowly
        while True:
            assert server.poll() is None, server.stderr.read() if server.stderr else ""
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not listen"
                time.sleep(0.05)  # polling a port the child is still opening
        yield port
    finally:
        server.terminate()
        server.wait(60)
