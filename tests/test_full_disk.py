"""A disk that fills up during a run and frees up again: nothing logged is lost.

The disk is real: a small tmpfs mounted for the test (root only; elsewhere these tests skip),
filled to the last byte by a filler file, freed by removing it. Every write agenttrace makes
there fails with ENOSPC as it would on a full disk: the event stream, the session file and its
temporary file, the spool's temporary file, the billing ledger.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import random
import re
import shutil
import string
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

import agenttrace
from agenttrace.formats.session.files import (
    StreamAppender,
    read_session_file,
    snapshot_path,
    stream_path,
)
from agenttrace.formats.session.spool import Ref, Spool, gzip_member
from agenttrace.model import events as ev
from agenttrace.recorder.ledger import append_lines

from .helpers import child_env
from .test_faults import check_stream, writer


@dataclass
class Disk:
    """A mounted tmpfs of a few MB, to fill up and free."""

    path: Path

    @property
    def filler(self) -> Path:
        return self.path / "filler"

    def fill(self, leave: int = 0) -> None:
        """Fill the disk to the last byte, then free ``leave`` bytes of it."""
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            for size in (1 << 16, 1 << 12, 1):
                chunk = b"\0" * size
                while True:
                    try:
                        os.write(fd, chunk)
                    except OSError as exc:
                        assert exc.errno == errno.ENOSPC, exc
                        break
            if leave:
                os.ftruncate(fd, os.fstat(fd).st_size - leave)
        finally:
            os.close(fd)

    def free(self) -> None:
        self.filler.unlink()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Disk]:
    """A 4 MB tmpfs at ``tmp_path/disk``, unmounted afterwards."""
    point = tmp_path / "disk"
    point.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command: cannot make a small disk to fill up")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(point)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill up (needs root): {mounted.stderr.strip()}")
    try:
        yield Disk(point)
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


def random_text(rng: random.Random, size: int) -> str:
    """Text that compresses poorly (so the spool outgrows memory and moves to its file)."""
    return "".join(rng.choices(string.ascii_letters + string.digits + " äö漢🙂", k=size))


def ledger_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def test_a_full_disk_loses_no_event_once_space_comes_back(
    small_disk: Disk, caplog: pytest.LogCaptureFixture
) -> None:
    """501 events (50 agent runs, each a sub-agent created with its system prompt, entries and
    a tool call) logged on a full disk: every write fails, the agent runs on, one warning per
    output says what waits. The disk is freed; the next force_flush writes it all: the stream,
    the session file and the ledger hold every event and record, and say so once each."""
    caplog.set_level(logging.WARNING, logger="agenttrace")
    sessions = small_disk.path / "sessions"
    ledger = small_disk.path / "accounting.jsonl"
    provider = TracerProvider()
    handle = agenttrace.init(
        tracer_provider=provider,
        console="quiet",
        sessions_dir=sessions,
        billing_file=ledger,
        instrument_litellm=False,
    )
    rng = random.Random(11)
    try:
        session = agenttrace.new_session("full")
        small_disk.fill()
        boss = session.allocate_agent_id()
        session.log_agent_created(boss, name="Boss")
        for run in range(50):
            with agenttrace.agent(f"Worker{run}"):
                agent = session.allocate_agent_id()
                prompt = {"role": "system", "content": random_text(rng, 1500)}
                session.log_agent_created(agent, name=f"Worker{run}", initial=[prompt])
                for _ in range(7):
                    entry = {"role": "user", "content": random_text(rng, 1500)}
                    session.log_transcript_entry(agent, entry)
                with agenttrace.tool("look_up"):
                    pass
        assert len(session.events) == 501
        handle.force_flush()
        stream = stream_path(sessions, "full")
        assert not stream.exists() or stream.read_bytes() == b""
        assert not snapshot_path(sessions, "full").exists()
        assert not ledger.exists() or ledger.read_bytes() == b""
        while_full = [r.getMessage() for r in caplog.records]
        assert len(while_full) == 3, while_full
        for path, waiting in (
            (stream, "1 event of session full waits"),
            (snapshot_path(sessions, "full"), "session full (11 events not saved yet)"),
            # Free tool calls: the worker writes those that ended by then in one write.
            (ledger, " accounting record"),
        ):
            [warning] = [m for m in while_full if str(path) in m]
            assert "(No space left on device)" in warning and waiting in warning, warning
            assert warning.endswith("The agent keeps running."), warning
        caplog.clear()

        small_disk.free()
        assert handle.force_flush()
        on_disk = check_stream(stream, "after the disk was freed")
        assert [e["message_id"] for e in on_disk.events] == [
            e["message_id"] for e in session.events
        ]
        assert on_disk.torn == b"" and not on_disk.cut_short
        saved = read_session_file(snapshot_path(sessions, "full"))
        assert saved.events == [dict(e) for e in session.events]
        assert len(saved.runs) == 50
        rows = ledger_rows(ledger)
        assert [row["providerLabel"] for row in rows] == ["look_up"] * 50
        recovered = [r.getMessage() for r in caplog.records]
        assert len(recovered) == 3, recovered
        assert all(m.startswith("agenttrace: writing works again") for m in recovered)
        assert "the 501 events that waited are in " + str(stream) in recovered[0]
        caplog.clear()
    finally:
        handle.shutdown()
        provider.shutdown()
    assert caplog.records == []  # nothing is missing at exit
    print("disk full, then freed: 501 events logged, 0 lost from the stream or the session file")


def test_an_intent_refused_on_an_open_stream_waits_and_is_written_in_its_place(
    small_disk: Disk, caplog: pytest.LogCaptureFixture
) -> None:
    """An undeclared tool's intent goes straight to its session's open stream, in the
    caller's thread. The disk fills after the stream opened: the intent's own write is
    refused, the tool runs on, one warning says a line waits; what comes after waits behind it.
    Space comes back: the next force_flush writes every step line, each intent before its
    outcome, and the session file has every step too."""
    caplog.set_level(logging.WARNING, logger="agenttrace")
    sessions = small_disk.path / "sessions"
    provider = TracerProvider()
    handle = agenttrace.init(
        tracer_provider=provider,
        console="quiet",
        sessions_dir=sessions,
        billing_file=small_disk.path / "accounting.jsonl",
        instrument_litellm=False,
    )

    @agenttrace.tool
    def look_up(query: str) -> str:
        return query.upper()

    try:
        agenttrace.new_session("refused")
        with agenttrace.agent("Boss"):
            assert look_up("open") == "OPEN"
            handle.force_flush()  # the stream is open, its lines on disk
            stream = stream_path(sessions, "refused")
            before = stream.read_bytes()
            small_disk.fill()
            # Longer than a page: the stream's last page has no room left for it.
            assert look_up("full" * 2000) == "FULL" * 2000
            assert look_up("still full") == "STILL FULL"
            handle.force_flush()
            assert stream.read_bytes() == before
            [warning] = [r.getMessage() for r in caplog.records if str(stream) in r.getMessage()]
            assert "(No space left on device)" in warning, warning
            small_disk.free()
            assert handle.force_flush()
        handle.force_flush()
        steps = [
            (line["name"], line["step"], line["state"])
            for line in (json.loads(raw) for raw in stream.read_bytes().splitlines())
            if line["event_type"] == "step" and line["kind"] == "tool"
        ]
        for step in ("1.1", "1.2", "1.3"):
            states = [state for _, at, state in steps if at == step]
            assert states == ["intent", "done"], (step, steps)
        assert [at for _, at, state in steps if state == "intent"] == ["1.1", "1.2", "1.3"]
        saved = read_session_file(snapshot_path(sessions, "refused"))
        saved_steps = {(s["step"], s["state"]) for s in saved.journal if s["kind"] == "tool"}
        assert saved_steps == {(at, state) for _, at, state in steps}
    finally:
        handle.shutdown()
        provider.shutdown()


@pytest.mark.e2e
def test_a_process_on_a_full_disk_catches_up_by_itself_and_exits_clean(small_disk: Disk) -> None:
    """A process runs 25 agent runs on a full disk and pauses; the disk is freed. Without logging
    anything more it catches up (the retry timer on the worker writes what waited), runs 25
    more and exits: the stream, the session file and the ledger hold everything, and stderr is
    the three warnings of the failures and the three of the recovery, nothing at exit."""
    sessions = small_disk.path / "sessions"
    sessions.mkdir()
    small_disk.fill()
    child = subprocess.Popen(
        writer("outage", sessions, "outage", 25),
        env=child_env(PYTHONUNBUFFERED="1"),
        cwd=small_disk.path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        paused = child.stdout.readline().split()
        assert paused[0] == "paused", paused
        stream = stream_path(sessions, "outage")
        assert not stream.exists() or stream.read_bytes() == b""
        small_disk.free()
        child.stdin.write("freed\n")
        child.stdin.flush()
        stdout, stderr = child.communicate(timeout=480)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, stderr
    assert stdout.splitlines()[0] == "caught up", stdout
    [total] = [int(line.split()[1]) for line in stdout.splitlines() if line.startswith("done ")]
    assert total == 2 * int(paused[1]) == 2 * 25 * 6  # the run's agent, a sub-agent + 4 events
    on_disk = check_stream(stream, "after the disk was freed")
    assert len(on_disk.events) == total and on_disk.torn == b"" and not on_disk.cut_short
    saved = read_session_file(snapshot_path(sessions, "outage"))
    assert [e["message_id"] for e in saved.events] == [
        ev.message_id(n) for n in range(1, total + 1)
    ]
    assert [row["providerLabel"] for row in ledger_rows(small_disk.path / "accounting.jsonl")] == [
        "look_up"
    ] * 50
    lines = stderr.splitlines()
    assert "Traceback" not in stderr and len(lines) == 6, stderr
    assert (
        sum(bool(re.match(r"^agenttrace: cannot write .*\(No space left", x)) for x in lines) == 3
    )
    assert sum(x.startswith("agenttrace: writing works again") for x in lines) == 3, stderr
    print(f"full disk in a child process: {total} events logged, 0 lost")


def test_a_stream_write_cut_short_by_a_full_disk_is_taken_back(small_disk: Disk) -> None:
    """An append that only partly fits fails and leaves the file as it was (ends in a whole
    line), so the same line can be appended again once there is room."""
    path = small_disk.path / "s.events.jsonl"
    appender = StreamAppender(path)
    appender.append(b'{"n": 1}\n')
    small_disk.fill(leave=20_000)
    big = b'{"n": 2, "pad": "' + b"x" * 200_000 + b'"}\n'
    with pytest.raises(OSError) as raised:
        appender.append(big)
    assert raised.value.errno == errno.ENOSPC
    assert path.read_bytes() == b'{"n": 1}\n'
    small_disk.free()
    appender.append(big)
    appender.close()
    assert path.read_bytes() == b'{"n": 1}\n' + big


def test_a_ledger_write_cut_short_by_a_full_disk_is_taken_back(small_disk: Disk) -> None:
    path = small_disk.path / "accounting.jsonl"
    append_lines(path, [json.dumps({"n": 1})])
    small_disk.fill(leave=20_000)
    big = [json.dumps({"n": n, "pad": "x" * 9_000}) for n in range(2, 30)]
    with pytest.raises(OSError) as raised:
        append_lines(path, big)
    assert raised.value.errno == errno.ENOSPC
    assert ledger_rows(path) == [{"n": 1}]
    small_disk.free()
    append_lines(path, big)
    assert [row["n"] for row in ledger_rows(path)] == list(range(1, 30))


def test_a_spool_keeps_everything_in_memory_while_its_file_cannot_grow(small_disk: Disk) -> None:
    """Members that cannot move to the spool's temporary file stay in memory, readable; once the
    disk has room they move, and every member reads back as it was added."""
    rng = random.Random(3)
    spool = Spool(small_disk.path, spill_bytes=64 << 10)
    members = [gzip_member(random_text(rng, 20_000).encode()) for _ in range(60)]
    refs = [spool.add(member) for member in members[:10]]
    assert spool.on_disk
    small_disk.fill()
    refs += [spool.add(member) for member in members[10:40]]
    small_disk.free()
    refs += [spool.add(member) for member in members[40:]]
    assert [spool.read(ref) for ref in refs] == members
    assert spool.read(Ref(0, spool.size)) == b"".join(members)  # across file and memory
    target = small_disk.path / "copy"
    with open(target, "wb") as handle:
        for ref in refs:
            spool.copy_to(handle, ref)
    assert target.read_bytes() == b"".join(members)
    spool.close()
