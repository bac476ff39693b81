"""Leases without races (issue 22): a holder letting go at the instant a forced taker takes over
never removes the new holder's file (the interleaving is forced, not hoped for), and a new named
session started by ``load_session`` holds its lease, so two processes never start it both."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import agenttrace
from agenttrace.formats.session import lease as leases
from agenttrace.formats.session.lease import Lease, acquire, lease_path, read_holder

from .helpers import ROOT

BOUND = 120
"""Seconds a step of a test may take before it is a failure (never reached when it works)."""


def test_a_holder_letting_go_as_it_is_forced_out_leaves_the_new_holders_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = lease_path(tmp_path, "s1")
    stuck = acquire(path, "stuck")
    stuck_fd = stuck._fd
    reached = threading.Event()  # the taker waits for the holder, or (unguarded) took over
    taken: dict[str, Any] = {}

    def take_over() -> None:
        try:
            taken["lease"] = acquire(path, "taker", force=True)
        except BaseException as error:
            taken["error"] = error
        finally:
            reached.set()

    real_same_file = leases._same_file
    taker = threading.Thread(target=take_over)

    def looked_then_taken_over(fd: int, named: Path) -> bool:
        """The holder letting go has looked at the name: the forced taker comes now."""
        mine = real_same_file(fd, named)
        if fd == stuck_fd and not taker.is_alive() and "lease" not in taken:
            taker.start()
            assert reached.wait(BOUND)
        return mine

    monkeypatch.setattr(leases, "_same_file", looked_then_taken_over)
    monkeypatch.setattr(leases, "_waiting_for_directory", lambda _: reached.set())
    stuck.release()
    taker.join(BOUND)
    assert "error" not in taken, taken.get("error")
    new: Lease = taken["lease"]
    assert new.held
    holder = read_holder(path)  # the new holder's file is the lease's, whole
    assert holder is not None and (holder.owner, holder.token) == ("taker", new.token)
    with pytest.raises(agenttrace.LeaseHeld, match="held by taker"):
        acquire(path)
    new.release()
    assert [p.name for p in tmp_path.iterdir()] == []


def test_letting_go_as_it_is_forced_out_after_the_rename_leaves_the_new_file(
    tmp_path: Path,
) -> None:
    """The other order: the taker renamed its file first; the old holder finds the name leads
    elsewhere and removes nothing."""
    path = lease_path(tmp_path, "s1")
    stuck = acquire(path, "stuck")
    taker = acquire(path, "taker", force=True)
    stuck.release()
    holder = read_holder(path)
    assert holder is not None and holder.token == taker.token
    taker.release()
    assert not path.exists()


STARTER = """
import sys
from pathlib import Path
import agenttrace
agenttrace.init(sessions_dir=Path(sys.argv[1]), console="quiet")
try:
    root, session = agenttrace.load_session("shop")
except agenttrace.LeaseHeld as exc:
    print("refused:", exc, flush=True)
    sys.exit(0)
print("started" if session.restored_count == 0 else "resumed", root.agent_id, flush=True)
if sys.argv[2:] == ["hold"]:
    sys.stdin.readline()  # holds the session until the test says so
agenttrace.shutdown()
"""


def start(sessions: Path, *how: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", STARTER, str(sessions), *how],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_processes_never_start_the_same_named_session(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    first = start(sessions, "hold")
    try:
        assert first.stdout is not None
        said = first.stdout.readline()  # it has started the session, and holds it
        assert said.startswith("started "), said
        holder = read_holder(lease_path(sessions, "shop"))
        assert holder is not None and holder.pid == first.pid
        second = start(sessions)
        out, err = second.communicate(timeout=BOUND)
        assert second.returncode == 0, err
        assert out.startswith("refused: shop.lease: the session is held by "), out
        assert f"(pid {first.pid} on " in out and out.count("\n") == 1
        out, err = first.communicate("go\n", timeout=BOUND)
        assert first.returncode == 0, err
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert not lease_path(sessions, "shop").exists()  # let go at the first one's end
    third = start(sessions)
    out, err = third.communicate(timeout=BOUND)
    assert third.returncode == 0, err
    assert out.startswith("resumed "), out  # what the first one wrote, not a second start


def test_a_new_named_session_holds_its_lease(tmp_path: Path) -> None:
    agenttrace.init(sessions_dir=tmp_path, console="quiet")
    try:
        _, session = agenttrace.load_session("shop")
        lease = session.lease
        assert lease is not None and lease.held
        holder = read_holder(lease_path(tmp_path, "shop"))
        assert holder is not None and (holder.pid, holder.token) == (os.getpid(), lease.token)
    finally:
        agenttrace.shutdown()
    assert not lease_path(tmp_path, "shop").exists()


def test_a_child_forked_while_the_directory_is_locked_does_not_keep_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork while a holder lets go (the directory locked): the child closes its copy, so a
    forced takeover later does not wait for the child to end."""
    path = lease_path(tmp_path, "s1")
    stuck = acquire(path, "stuck")
    stuck_fd = stuck._fd
    real_same_file = leases._same_file
    gate_out, gate_in = os.pipe()
    children: list[int] = []

    def looked_then_forked(fd: int, named: Path) -> bool:
        if fd == stuck_fd and not children:
            pid = os.fork()
            if pid == 0:  # the child: waits for the test, then leaves at once
                os.read(gate_out, 1)
                os._exit(0)
            children.append(pid)
        return real_same_file(fd, named)

    monkeypatch.setattr(leases, "_same_file", looked_then_forked)
    try:
        stuck.release()
        assert children and not path.exists()
        held = acquire(path, "held")
        taken: dict[str, Lease] = {}
        taker = threading.Thread(target=lambda: taken.update(lease=acquire(path, force=True)))
        taker.start()
        taker.join(BOUND)
        assert not taker.is_alive() and taken["lease"].held  # the child kept no lock
        held.release()
        taken["lease"].release()
    finally:
        os.write(gate_in, b"x")
        for pid in children:
            os.waitpid(pid, 0)
        os.close(gate_in)
        os.close(gate_out)


def test_a_taker_that_finds_the_lease_held_names_the_holder_that_is_writing_itself_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holder locks the file, then writes its name in it: a second taker looking between
    the two must not read the name of no one (or of a holder before): it waits for the
    directory's lock, under which the first took the file and wrote itself in."""
    path = lease_path(tmp_path, "s1")
    writing, go_on, waiting = threading.Event(), threading.Event(), threading.Event()
    real_write = leases._write
    first: dict[str, Any] = {}

    def write_slowly(fd: int, holder: Any) -> None:
        if holder.owner == "first":
            writing.set()  # locked the file: the second taker comes now
            assert go_on.wait(BOUND)
        real_write(fd, holder)

    def take_first() -> None:
        first["lease"] = acquire(path, "first")

    monkeypatch.setattr(leases, "_write", write_slowly)
    monkeypatch.setattr(leases, "_waiting_for_directory", lambda _: waiting.set())
    holder = threading.Thread(target=take_first)
    holder.start()
    assert writing.wait(BOUND)
    second: dict[str, Any] = {}

    def take_second() -> None:
        try:
            acquire(path, "second")
        except agenttrace.LeaseHeld as error:
            second["error"] = str(error)

    contender = threading.Thread(target=take_second)
    contender.start()
    assert waiting.wait(BOUND)  # it waits for the directory, not reading a half-taken file
    go_on.set()
    holder.join(BOUND)
    contender.join(BOUND)
    assert "held by first" in second["error"], second
    first["lease"].release()
