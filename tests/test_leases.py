"""Resuming takes the session's lease (issue 22 item 6): one process at a time continues a
session, a second one fails at once with one line, a dead holder's lease is taken over, a live
one only with force; the journal lines written under the lease carry its token."""

from __future__ import annotations

import gc
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import agenttrace
from agenttrace._internal import finalizers
from agenttrace.formats.session.lease import acquire, lease_path, read_holder

from .conftest import Traced
from .helpers import ROOT
from .test_cli import AGENTTRACE, env_for, one_error_line
from .test_doubts import session_with_a_doubt
from .test_journal import hold_in_child

RESUME_ARGS = ("resume", "--agent", "tests.lease_agent:rebuild", "--prompt", "go on")

TAKER = """
import sys
import agenttrace
try:
    agenttrace.resume(sys.argv[1])
except agenttrace.LeaseHeld as exc:
    print(exc)
else:
    print("resumed")
"""


def take_in_child(stream: Path) -> str:
    """What ``agenttrace.resume(stream)`` says in another process."""
    child = subprocess.run(
        [sys.executable, "-c", TAKER, str(stream)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert child.returncode == 0, child.stderr
    return child.stdout.strip()


def test_a_resume_holds_the_lease_until_shutdown_and_its_journal_lines_carry_the_token(
    traced: Traced, tmp_path: Path
) -> None:
    stream = session_with_a_doubt(tmp_path / "sessions")
    path = lease_path(stream.parent, "s1")
    session = agenttrace.resume(stream)
    lease = session.lease
    assert lease is not None and lease.held
    holder = read_holder(path)
    assert holder is not None and (holder.pid, holder.token) == (os.getpid(), lease.token)

    @agenttrace.tool
    def charge(amount: int) -> str:
        return "ch_1"

    agenttrace.agent("Shop")(charge)(5)
    traced.handle.force_flush()
    lines = [json.loads(line) for line in stream.read_text().splitlines()]
    ours = [line for line in lines if line["event_type"] == "step" and "lease" in line]
    assert [(line["state"], line["lease"]) for line in ours] == [
        ("intent", lease.token),
        ("done", lease.token),
    ]
    said = take_in_child(stream)
    assert said.startswith("s1.lease: the session is held by ")
    assert f"(pid {os.getpid()} on " in said and "--force" in said and "\n" not in said

    traced.handle.shutdown()  # nothing records any more: the lease is let go, its file too
    assert not lease.held and not path.exists()
    assert take_in_child(stream) == "resumed"
    assert not path.exists()  # that process let it go at its exit


def test_a_second_resume_in_the_same_process_takes_the_lease_over(tmp_path: Path) -> None:
    stream = session_with_a_doubt(tmp_path / "sessions")
    first = agenttrace.resume(stream, sessions_dir=stream.parent)
    second = agenttrace.resume(stream, sessions_dir=stream.parent)
    assert second.lease is first.lease and first.lease is not None and first.lease.held
    lease = first.lease
    del first
    assert lease.held  # the second session still records under it
    agenttrace.use_session(None)  # no longer the current session either
    del second
    gc.collect()
    assert finalizers.drain(60)  # a lease is let go on the finalizer thread
    assert not lease.held  # nothing can record into the session any more


def test_a_dead_holders_lease_is_taken_over_and_a_live_one_only_by_force(tmp_path: Path) -> None:
    stream = session_with_a_doubt(tmp_path / "sessions")
    path = lease_path(stream.parent, "s1")
    holder = hold_in_child(path)
    try:
        with pytest.raises(agenttrace.LeaseHeld) as refused:
            agenttrace.resume(stream)
        message = str(refused.value)
        assert message.startswith(
            f"s1.lease: the session is held by resume of the test (pid {holder.pid} on "
        )
        assert message.endswith("(--force takes it over from a process that is stuck)")
        forced = agenttrace.resume(stream, force=True)
        assert forced.lease is not None
        taken = read_holder(path)
        assert taken is not None and (taken.pid, taken.token) == (os.getpid(), forced.lease.token)
        forced.lease.release()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    killed = hold_in_child(path)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    resumed = agenttrace.resume(stream)  # its holder died: taken over, nothing to clean up
    assert resumed.lease is not None and resumed.lease.held
    resumed.lease.release()


def test_a_resume_written_elsewhere_holds_the_lease_where_it_was_read_too(
    tmp_path: Path,
) -> None:
    stream = session_with_a_doubt(tmp_path / "sessions")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    agenttrace.init(sessions_dir=elsewhere, console="quiet")
    try:
        # By its id in another sessions directory: written to init's (a path would be written
        # beside itself, as load_session writes it).
        session = agenttrace.resume("s1", sessions_dir=stream.parent)
        for directory in (elsewhere, stream.parent):
            holder = read_holder(lease_path(directory, "s1"))
            assert holder is not None and holder.pid == os.getpid()
        assert session.lease is not None and session.lease.path.parent == elsewhere.absolute()
        with pytest.raises(agenttrace.LeaseHeld):
            acquire(lease_path(stream.parent, "s1"))
    finally:
        agenttrace.shutdown()
    with acquire(lease_path(stream.parent, "s1")):
        pass


def test_two_resumes_of_one_session_at_once_one_proceeds(tmp_path: Path) -> None:
    """Two ``agenttrace resume`` processes started together: the one that took the lease runs
    its agent (which waits for the test), the other fails at once with one line."""
    stream = session_with_a_doubt(tmp_path / "sessions")
    ready, go = tmp_path / "ready", tmp_path / "go"
    os.mkfifo(ready)
    os.mkfifo(go)
    env = env_for(tmp_path, LEASE_AGENT_READY=str(ready), LEASE_AGENT_GO=str(go))
    env["PYTHONPATH"] = str(ROOT)
    command = [*AGENTTRACE, *RESUME_ARGS, str(stream)]
    both = [
        subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    try:
        with open(ready) as said:  # the one that holds the session runs its agent
            winner_pid = int(said.readline())
        (winner,) = [p for p in both if p.pid == winner_pid]
        (loser,) = [p for p in both if p is not winner]
        out, err = loser.communicate(timeout=480)
        error = one_error_line(subprocess.CompletedProcess(command, loser.returncode, out, err))
        assert re.fullmatch(
            rf"s1\.lease: the session is held by \S+ \(pid {winner_pid} on .*\); wait for it to "
            r"end \(--force takes it over from a process that is stuck\)",
            error,
        ), error
        with open(go, "w") as release:
            release.write("go\n")
        out, err = winner.communicate(timeout=480)
        assert winner.returncode == 0, err
        assert "Answer: resumed" in out
    finally:
        for process in both:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert not lease_path(stream.parent, "s1").exists()  # the winner let it go when it ended


def test_a_holder_forced_out_leaves_the_new_holders_file_alone(tmp_path: Path) -> None:
    path = lease_path(tmp_path, "s1")
    stuck = acquire(path, "stuck")
    with pytest.raises(agenttrace.LeaseHeld, match="held by stuck"):
        acquire(path)
    taker = acquire(path, "taker", force=True)  # a new file, renamed over the stuck one's
    holder = read_holder(path)
    assert holder is not None and (holder.owner, holder.token) == ("taker", taker.token)
    with pytest.raises(agenttrace.LeaseHeld, match="held by taker"):
        acquire(path)
    stuck.release()  # its file is no longer the lease's: the taker's stays, locked
    assert read_holder(path) == taker.holder
    with pytest.raises(agenttrace.LeaseHeld, match="held by taker"):
        acquire(path)
    taker.release()
    assert not path.exists()
    assert [p.name for p in tmp_path.iterdir()] == []  # no temporary file left either


def test_a_link_planted_as_the_lease_file_is_refused_in_one_line(tmp_path: Path) -> None:
    stream = session_with_a_doubt(tmp_path / "sessions")
    elsewhere = tmp_path / "elsewhere.txt"
    lease_path(stream.parent, "s1").symlink_to(elsewhere)
    result = subprocess.run(
        [*AGENTTRACE, *RESUME_ARGS, str(stream)],
        cwd=ROOT,
        env={**env_for(tmp_path), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=480,
    )
    error = one_error_line(result)
    assert error.startswith(f"{lease_path(stream.parent, 's1')}: cannot hold the session's lease")
    assert not elsewhere.exists()  # never followed


@pytest.mark.parametrize(
    "content",
    [
        b'{"owner": "x", "pid": 1e999, "host": "h", "token": "t", "since": 1}',
        b'{"owner": "x", "pid": 1, "host": "h", "token": "t", "since": 1e999}',
        b'{"owner": "x", "pid": 1, "host": "h", "token": "t", "since": -1e300}',
        b'{"owner": "x", "pid": 1, "host": "h", "token": "t", "since": NaN}',
        b"1.5",
        b'["owner"]',
    ],
)
def test_a_lease_file_naming_no_holder_is_taken_over(content: bytes, tmp_path: Path) -> None:
    """A lease file whose content names no holder a message can print (a pid or a time past
    any number, not an object) is no holder's: taken, never a traceback (an infinite pid once
    raised OverflowError out of resume and resolve)."""
    path = tmp_path / "s1.lease"
    path.write_bytes(content)
    assert read_holder(path) is None
    lease = acquire(path)
    assert lease.held
    lease.release()
