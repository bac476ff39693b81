"""Every writer holds the session (issue 31 item 1): a plain ``init()`` program takes the
session's lease at its first record and holds it until it shuts down or dies, so ``resume``,
``resolve`` and re-entry refuse a session still being written, naming its holder; a holder
that stopped beating is reported as hung; the views still read the live session.

The holders are real processes (``tests.writer_agent``) paying through a real payment server,
killed with SIGKILL or stopped with SIGSTOP; every wait is on a FIFO, a file or a process."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

import agenttrace
from agenttrace.formats.session import heartbeat
from agenttrace.formats.session.lease import acquire, lease_path, read_holder

from .conftest import Traced
from .helpers import ROOT
from .payment_server import PaymentServer
from .test_cli import AGENTTRACE, env_for, one_error_line
from .test_journal import hold_in_child

BOUND = 120.0
"""Seconds any wait on a condition may take before the test fails (never a pace)."""
FACTORY = "tests.writer_agent:rebuild"


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until it holds (the process or file it asks about changes on its
    own time); fail after ``BOUND`` seconds."""
    deadline = time.monotonic() + BOUND
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.02)


@dataclass
class Writer:
    """A running ``tests.writer_agent``, inside its charge."""

    process: subprocess.Popen[str]
    session_id: str
    sessions: Path
    go: Path
    worker: int | None = None
    """The pid of the worker it forked (``fork=True``)."""

    @property
    def stream(self) -> Path:
        return self.sessions / f"{self.session_id}.events.jsonl"

    @property
    def lease(self) -> Path:
        return lease_path(self.sessions, self.session_id)

    def finish(self) -> str:
        """Let the charge return; what the agent printed (it exited 0)."""
        with open(self.go, "w") as go:
            go.write("go\n")
        out, err = self.process.communicate(timeout=BOUND)
        assert self.process.returncode == 0, err
        return out


@pytest.fixture
def payments() -> Iterator[PaymentServer]:
    server = PaymentServer().start()
    yield server
    server.stop()


@contextmanager
def writer_in_a_call(
    tmp_path: Path, payments: PaymentServer, fork: bool = False
) -> Iterator[Writer]:
    """A plain ``init()`` agent whose charge went through and is still running (``fork``: it
    forked a worker there, which the test kills)."""
    sessions = tmp_path / "sessions"
    ready, go = tmp_path / "ready", tmp_path / "go"
    os.mkfifo(ready)
    os.mkfifo(go)
    env = env_for(
        tmp_path,
        PAYMENTS_URL=payments.url,
        WRITER_AGENT_READY=str(ready),
        WRITER_AGENT_GO=str(go),
        WRITER_AGENT_FORK="1" if fork else "0",
        PYTHONPATH=str(ROOT),
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.writer_agent", str(sessions)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    worker = None
    try:
        with open(ready) as said:
            pid, session_id, *forked = said.readline().split()
        assert int(pid) == process.pid
        worker = int(forked[0]) if forked else None
        yield Writer(process, session_id, sessions, go, worker)
    finally:
        if worker is not None:
            os.kill(worker, signal.SIGKILL)  # not our child: nothing to wait for
        if process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)  # a stopped one too
            process.kill()
            process.communicate()


def cli(tmp_path: Path, payments: PaymentServer, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AGENTTRACE, *args],
        cwd=ROOT,
        env=env_for(tmp_path, PAYMENTS_URL=payments.url, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=BOUND,
    )


def held_line(writer: Writer) -> str:
    """The pattern of the one line a taker gets while the writer runs (and beats)."""
    return (
        rf"{re.escape(writer.lease.name)}: the session is held by writer_agent\.py "
        rf"\(pid {writer.process.pid} on [^)]*\); wait for it to end "
        r"\(--force takes it over from a process that is stuck\)"
    )


@pytest.mark.e2e  # whole programs in child processes
def test_a_plain_init_run_holds_its_session_until_it_ends(
    tmp_path: Path, payments: PaymentServer
) -> None:
    with writer_in_a_call(tmp_path, payments) as writer:
        holder = read_holder(writer.lease)
        assert holder is not None and holder.pid == writer.process.pid
        # The call in flight is journaled under the writer's lease.
        lines = [json.loads(line) for line in writer.stream.read_text().splitlines()]
        steps = [line for line in lines if line["event_type"] == "step" and line["kind"] == "tool"]
        assert [(s["state"], s.get("lease")) for s in steps] == [("intent", holder.token)]

        for args in (
            ("resume", str(writer.stream), "--agent", FACTORY, "--prompt", "again"),
            ("resume", str(writer.stream), "--agent", FACTORY),  # re-entry
            ("resolve", str(writer.stream), steps[0]["step"], "--not-applied"),
        ):
            error = one_error_line(cli(tmp_path, payments, *args))
            assert re.fullmatch(held_line(writer), error), (args, error)

        with pytest.raises(agenttrace.LeaseHeld) as refused:
            agenttrace.resume(writer.stream)
        assert re.fullmatch(held_line(writer), str(refused.value))
        assert refused.value.holder == holder and not refused.value.hung

        # The views read the live session freely.
        listed = cli(tmp_path, payments, "list", "--json", "--sessions-dir", str(writer.sessions))
        assert listed.returncode == 0, listed.stderr
        (row,) = json.loads(listed.stdout)
        assert row["status"] == "running", row
        shown = cli(tmp_path, payments, "doubts", str(writer.stream))
        assert shown.returncode == 0, shown.stderr

        assert writer.finish() == "paid ch_1\n"
    assert not writer.lease.exists()  # let go at its shutdown
    resumed = cli(
        tmp_path, payments, "resume", str(writer.stream), "--agent", FACTORY, "--prompt", "again"
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "Answer: resumed" in resumed.stdout
    assert len(payments.charges) == 1
    # Nothing was decided behind the writer's back: its call ended, nothing is in doubt.
    assert cli(tmp_path, payments, "doubts", str(writer.stream)).stdout == "no call in doubt\n"


@pytest.mark.e2e  # whole programs in child processes
def test_a_killed_writers_session_is_resumed_and_its_call_re_entered(
    tmp_path: Path, payments: PaymentServer
) -> None:
    """The writer had forked a worker inside its call: the worker, still alive, does not keep
    the dead writer's lease."""
    with writer_in_a_call(tmp_path, payments, fork=True) as writer:
        writer.process.send_signal(signal.SIGKILL)
        writer.process.wait()
        assert writer.worker is not None
        os.kill(writer.worker, 0)  # alive
        assert writer.lease.exists()  # the dead holder's file: its lock went with it
        resumed = cli(tmp_path, payments, "resume", str(writer.stream), "--agent", FACTORY)
        assert resumed.returncode == 0, resumed.stderr
    # The idempotent charge ran again with its key: the payment server made it once.
    assert "Answer: paid ch_1" in resumed.stdout
    assert len(payments.charges) == 1
    assert not writer.lease.exists()


def stopped(pid: int) -> bool:
    """Whether ``pid`` is stopped (SIGSTOP took effect: it runs no more code)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] in "Tt"


@pytest.mark.e2e  # whole programs in child processes
def test_a_stopped_writer_is_reported_as_hung_and_still_refuses(
    tmp_path: Path, payments: PaymentServer
) -> None:
    with writer_in_a_call(tmp_path, payments) as writer:
        pid = writer.process.pid
        os.kill(pid, signal.SIGSTOP)
        wait_until(lambda: stopped(pid), "the writer is stopped")
        # Its heartbeat stopped with it: its file's time is what it was then. Ten minutes of
        # silence, without waiting them: the holder can touch the file no more.
        silent_since = time.time() - 600
        os.utime(writer.lease, (silent_since, silent_since))

        error = one_error_line(
            cli(tmp_path, payments, "resume", str(writer.stream), "--agent", FACTORY)
        )
        assert re.fullmatch(
            rf"{re.escape(writer.lease.name)}: the session is held by writer_agent\.py "
            rf"\(pid {pid} on [^)]*\), which looks hung: alive, but no heartbeat for 6\d\d s "
            r"\(--force takes it over from a process that is stuck\)",
            error,
        ), error
        with pytest.raises(agenttrace.LeaseHeld) as refused:
            agenttrace.resume(writer.stream)
        assert refused.value.hung
        assert refused.value.silent_for is not None and refused.value.silent_for >= 600

        os.kill(pid, signal.SIGCONT)  # it beats again: no longer hung, still held
        wait_until(
            lambda: writer.lease.stat().st_mtime > silent_since + 300, "the writer beats again"
        )
        with pytest.raises(agenttrace.LeaseHeld) as refused:
            agenttrace.resume(writer.stream)
        assert not refused.value.hung
        assert re.fullmatch(held_line(writer), str(refused.value))
        assert writer.finish() == "paid ch_1\n"
    assert len(payments.charges) == 1


def lease_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.lease")) if directory.exists() else []


def test_the_lease_is_taken_at_the_first_record_and_let_go_at_shutdown(
    traced: Traced, tmp_path: Path
) -> None:
    sessions = tmp_path / "sessions"
    assert lease_files(sessions) == []  # init alone records nothing, holds nothing

    @agenttrace.tool(effect="effect")
    def charge(amount: int) -> str:
        return "ch_1"

    agenttrace.agent("Shop")(charge)(5)
    session = agenttrace.current_session()
    lease = session.lease
    assert lease is not None and lease.held
    assert lease_files(sessions) == [lease_path(sessions, session.session_id)]
    holder = read_holder(lease.path)
    assert holder is not None and (holder.pid, holder.token) == (os.getpid(), lease.token)
    traced.handle.force_flush()
    stream = sessions / f"{session.session_id}.events.jsonl"
    lines = [json.loads(line) for line in stream.read_text().splitlines()]
    steps = [line for line in lines if line["event_type"] == "step" and line["kind"] == "tool"]
    assert [(step["state"], step.get("lease")) for step in steps] == [
        ("intent", lease.token),
        ("done", lease.token),
    ]

    traced.handle.shutdown()
    assert not lease.held and lease_files(sessions) == []


def test_a_writer_whose_session_another_process_holds_warns_and_keeps_recording(
    traced: Traced, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    other = hold_in_child(lease_path(sessions, "shop"))
    try:
        agenttrace.use_session(agenttrace.Session("shop"))
        with caplog.at_level(logging.WARNING, logger="agenttrace"):
            agenttrace.agent("Shop")(lambda: "done")()
            agenttrace.agent("Shop")(lambda: "again")()
        warnings = [r.getMessage() for r in caplog.records if "another process" in r.getMessage()]
        assert len(warnings) == 1, warnings  # once per session, not per record
        assert f"(pid {other.pid} on " in warnings[0]
        traced.handle.force_flush()
        assert (sessions / "shop.events.jsonl").read_text().count('"agent_created"') >= 1
    finally:
        other.send_signal(signal.SIGKILL)
        other.wait()


def test_the_heartbeat_touches_a_held_lease_and_stops_with_the_last(tmp_path: Path) -> None:
    path = lease_path(tmp_path, "s1")
    lease = acquire(path, "beating")
    long_ago = time.time() - 600
    os.utime(path, (long_ago, long_ago))
    wait_until(lambda: path.stat().st_mtime > long_ago + 300, "the heartbeat touches the file")
    lease.release()

    def beating() -> bool:
        return any(t.name == "agenttrace-lease-heartbeat" for t in threading.enumerate())

    wait_until(lambda: not beating(), "the heartbeat stops with nothing held")
    assert heartbeat.INTERVAL * 5 < heartbeat.STALE_AFTER  # a late beat is not a hung holder
