"""Resuming a session that lives in a session store, on any host, under the store's lease
(``agenttrace.session.store_leases``; docs/how-to/session-stores.md, "Leases across hosts"):
of two resumers one wins, a killed holder's lease is taken over only once it expired (or with
``--force``), and what the killed holder writes after the takeover is not part of the session.

Every resumer is a process of its own with its own sessions directory (another host, as far as
the store can tell); the clock is moved by hand, never waited for.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import agenttrace
from agenttrace._internal.runtime import runtime
from agenttrace.formats.stores import SessionStore
from agenttrace.formats.stores.layout import parse
from agenttrace.formats.stores.lease import LeaseLost, accepted, segment_name
from agenttrace.formats.stores.lease import take as take_lease
from agenttrace.formats.stores.local import LocalStore
from agenttrace.formats.stores.materialize import materialize
from agenttrace.formats.stores.shipping import Shipper
from agenttrace.session import store_leases
from tests.conftest import Traced
from tests.helpers import child_env

from .store_servers import STORES, postgres_server, stop_store_servers

ROOT = Path(__file__).resolve().parent.parent

RESUMER = textwrap.dedent(
    """
    import json, sys, agenttrace
    directory, session_id, force = sys.argv[1], sys.argv[2], sys.argv[3] == "force"
    agenttrace.init(console="quiet", sessions_dir=directory,
                    billing_file=directory + "/accounting.jsonl")
    try:
        session = agenttrace.resume(session_id, force=force)
    except agenttrace.LeaseHeld as held:
        print(json.dumps({"held": str(held)}), flush=True)
        sys.exit(2)
    lease = session.store_lease
    print(json.dumps({"epoch": lease.epoch, "holder": lease.holder}), flush=True)
    sys.stdin.readline()  # the session is held until the test says
    agent = session.allocate_agent_id()
    session.log_agent_created(agent, name="resumed")
    session.log_transcript_entry(agent, {"role": "user", "content": "by " + lease.holder})
    agenttrace.shutdown()
    """
)


@pytest.fixture(scope="module", autouse=True)
def store_servers() -> Iterator[None]:
    """Stop the servers the stores' tests started (each on first use) when the module ends."""
    yield
    stop_store_servers()


def _seed(store: SessionStore, tmp_path: Path) -> str:
    """Seed 001's Example 1, shipped to ``store`` from a host that is gone; its id."""
    from tests.test_session_files import EXAMPLE_1, jsonl

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "example1.events.jsonl").write_text(jsonl(EXAMPLE_1))
    Shipper(store, elsewhere).ship("example1")
    return "example1"


def _resumer(
    url: str, directory: Path, session_id: str, force: bool = False, **env: str
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", RESUMER, str(directory), session_id, "force" if force else "-"],
        env=child_env(AGENTTRACE_SESSIONS_URL=url, **env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def _said(process: subprocess.Popen[str]) -> dict[str, object]:
    """The first line a resumer printed: it resumed (its epoch) or was refused (why)."""
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        process.wait(60)
        raise AssertionError(process.stderr.read() if process.stderr else "no output")
    said: dict[str, object] = json.loads(line)
    return said


def _finish(process: subprocess.Popen[str]) -> int:
    """Let a holding resumer go on: it records one entry, ships it and exits."""
    _, errors = process.communicate("\n", timeout=480)
    assert process.returncode == 0, errors
    return process.returncode


def _stream(store: SessionStore, session_id: str, where: Path) -> str:
    materialize(store, session_id, where)
    return (where / f"{session_id}.events.jsonl").read_text()


@pytest.mark.parametrize("kind", sorted(STORES))
def test_of_two_hosts_resuming_one_store_session_at_once_exactly_one_does(
    kind: str, tmp_path: Path
) -> None:
    with STORES[kind](tmp_path) as (store, _):
        session_id = _seed(store, tmp_path)
        # The store's URL leaves its password out; libpq takes it from the environment.
        env = {"PGPASSWORD": postgres_server().password} if kind == "postgres" else {}
        first = _resumer(store.url, tmp_path / "host-a", session_id, **env)
        second = _resumer(store.url, tmp_path / "host-b", session_id, **env)
        # Each says first whether it resumed; the winner holds the session until told, so
        # whichever order they ran in, the other found it held.
        said = {first: _said(first), second: _said(second)}
        [winner] = [p for p, s in said.items() if "epoch" in s]
        [loser] = [p for p, s in said.items() if "held" in s]
        assert loser.wait(60) == 2
        refusal = str(said[loser]["held"])
        assert "\n" not in refusal
        assert f"held by {socket.gethostname()}:{winner.pid} (epoch 1)" in refusal
        _finish(winner)
        # The winner's run is in the store, under its epoch.
        assert f"by {said[winner]['holder']}" in _stream(store, session_id, tmp_path / "rebuilt")
        shipped = [p for p in map(parse, store.segments(session_id)) if p]
        assert {p.kind for p in shipped if p.epoch == 1} == {"events", "session"}
        assert {p.epoch for p in shipped} == {0, 1}  # the seed's, and the winner's


def test_a_killed_holders_lease_is_refused_until_forced_and_its_late_writes_are_left_out(
    tmp_path: Path,
) -> None:
    from tests.test_cli import FACTORIES

    store = LocalStore(tmp_path / "store")
    session_id = _seed(store, tmp_path)
    holder = _resumer(store.url, tmp_path / "host-a", session_id, AGENTTRACE_LEASE_TTL="600")
    assert _said(holder)["epoch"] == 1
    os.kill(holder.pid, signal.SIGKILL)  # gone without letting the lease go
    holder.wait(60)
    code = tmp_path / "code"
    code.mkdir()
    (code / "factories.py").write_text(FACTORIES)

    def resume(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agenttrace.cli", "resume", session_id, "--prompt", "Hello?",
             "--agent", "factories:rebuild", "--sessions-dir", str(tmp_path / "host-b"),
             "--sessions-url", store.url, *extra],
            env=child_env(PYTHONPATH=str(ROOT)),
            capture_output=True,
            text=True,
            timeout=480,
            cwd=code,
        )  # fmt: skip

    # Its lease has not expired: refused, in one line naming the killed holder.
    refused = resume()
    assert refused.returncode == 2, refused.stderr
    [line] = refused.stderr.splitlines()
    assert f"is held by {socket.gethostname()}:{holder.pid} (epoch 1)" in line
    # The holder's AGENTTRACE_LEASE_TTL (600 s, minus however long the machine took since it
    # renewed), not the default 60 s: a bound, not a time the test could miss on a slow host.
    left = re.search(r"\(in (\d+)s\)", line)
    assert left is not None and 60 < int(left.group(1)) <= 600, line
    assert line.endswith("take it over after that, or with --force"), line  # the command's
    # --force takes it at once: epoch 2.
    forced = resume("--force")
    assert forced.returncode == 0, forced.stderr
    manifest = json.loads(store.manifest(session_id).data)  # type: ignore[union-attr]
    assert [entry["epoch"] for entry in manifest["epochs"]] == [1, 2]
    start = manifest["epochs"][1]["from_seq"]["main/events"]
    # The killed holder's late write, of its epoch, after the takeover: never counted.
    late = segment_name("main", "events", 1, start)
    store.append(session_id, late, b'{"late": true}\n')
    kept = [s.name for s in accepted(store.segments(session_id), store.manifest(session_id))]
    assert late not in kept
    stream = _stream(store, session_id, tmp_path / "rebuilt")
    assert '"late"' not in stream and '"Hello?"' in stream
    # What the forced resume shipped carries its epoch, and goes on from where epoch 1 ended.
    ours = [p for p in map(parse, store.segments(session_id)) if p and p.epoch == 2]
    assert ours and min(p.seq for p in ours if p.kind == "events") == start
    assert (tmp_path / "rebuilt" / f"{session_id}.events.jsonl").read_text() == (
        tmp_path / "host-b" / f"{session_id}.events.jsonl"
    ).read_text()


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LocalStore:
    """A directory store in ``tmp_path``, named by ``AGENTTRACE_SESSIONS_URL`` (so this
    process's ``init`` ships to it)."""
    store = LocalStore(tmp_path / "store")
    monkeypatch.setenv("AGENTTRACE_SESSIONS_URL", store.url)
    return store


@pytest.fixture
def traced(store: LocalStore, traced: Traced) -> Iterator[Traced]:
    """The suite's ``traced``, its ``init`` shipping to :func:`store`."""
    yield traced


def test_a_killed_holders_lease_is_taken_over_once_expired_and_ships_the_new_epoch(
    traced: Traced, store: LocalStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = _seed(store, tmp_path)
    holder = _resumer(store.url, tmp_path / "host-a", session_id)
    assert _said(holder)["epoch"] == 1
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(60)
    with pytest.raises(agenttrace.LeaseHeld, match=f":{holder.pid} \\(epoch 1\\)"):
        agenttrace.resume(session_id)
    assert store_leases.of(session_id) is None  # refused: nothing held here
    # The killed holder's ttl later (the clock moved, not waited for): taken over, no force.
    ttl = runtime.settings.lease_ttl
    monkeypatch.setattr(store_leases, "now", lambda: time.time() + ttl + 1)
    session = agenttrace.resume(session_id)
    assert session.store_lease is not None and session.store_lease.epoch == 2
    agent = session.allocate_agent_id()
    session.log_agent_created(agent, name="taken over")
    agenttrace.force_flush()
    ours = [p for p in map(parse, store.segments(session_id)) if p and p.epoch == 2]
    assert {p.kind for p in ours} == {"events", "session"}
    assert '"taken over"' in _stream(store, session_id, tmp_path / "rebuilt")
    # Its journal lines carry the store lease's token (one token wherever it is resumed).

    @agenttrace.tool(name="look_up")
    def look_up(topic: str) -> str:
        return f"notes on {topic}"

    @agenttrace.agent("clerk")
    def clerk() -> str:
        return look_up("tides")

    clerk()
    agenttrace.force_flush()
    local = (tmp_path / "sessions" / f"{session_id}.events.jsonl").read_text()
    assert f'"lease": "{session.store_lease.token}"' in local
    # Renewing (what the renewer's thread does) keeps it; another host is refused meanwhile.
    session.store_lease.renew()
    with pytest.raises(agenttrace.LeaseHeld):
        take_lease(store, session_id, "host-c:1", ttl=30, now=lambda: time.time() + ttl + 1)


def _converse() -> str:
    """A root agent that says one thing; the session's id."""

    @agenttrace.agent("clerk")
    def clerk() -> str:
        session = agenttrace.current_session()
        agent = session.allocate_agent_id()
        session.log_agent_created(agent, name="clerk-agent")
        session.log_transcript_entry(agent, {"role": "user", "content": "ask"})
        return "done"

    clerk()
    return agenttrace.current_session().session_id


def test_a_recording_process_holds_its_sessions_lease_and_stops_shipping_once_it_is_lost(
    traced: Traced, store: LocalStore, tmp_path: Path
) -> None:
    session_id = _converse()
    traced.handle.force_flush()
    lease = store_leases.held(store.url, session_id)  # taken at the first ship
    assert lease is not None and lease.epoch == 1
    # Another host is refused while this process records the session.
    other = _resumer(store.url, tmp_path / "host-b", session_id)
    assert f"held by {socket.gethostname()}:{os.getpid()} (epoch 1)" in str(_said(other)["held"])
    assert other.wait(60) == 2
    # Taken over by force: this process's next renewal finds it lost (what the renewer's thread
    # does, then tells the shipper), and nothing it records later reaches the store.
    taker = take_lease(store, session_id, "host-c:1", ttl=30, force=True)
    with pytest.raises(LeaseLost, match="lost to host-c:1"):
        lease.renew()
    store_leases.lost(store.url, session_id)
    before = sorted(s.name for s in store.segments(session_id))
    session = agenttrace.current_session()
    session.log_transcript_entry("agent_001", {"role": "user", "content": "late"})
    traced.handle.force_flush()
    local = (tmp_path / "sessions" / f"{session_id}.events.jsonl").read_text()
    assert '"late"' in local  # written here, as always
    assert sorted(s.name for s in store.segments(session_id)) == before
    assert store_leases.held(store.url, session_id) is None
    taker.release()


def test_the_lease_ttl_is_seconds_above_zero_and_anything_else_is_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from agenttrace._internal.config import Settings

    assert Settings.resolve(env={}).lease_ttl == 60.0
    assert Settings.resolve(env={"AGENTTRACE_LEASE_TTL": "2.5"}).lease_ttl == 2.5
    with caplog.at_level(logging.WARNING, logger="agenttrace"):
        for bad in ("0", "soon", "-3", "1e12"):
            caplog.clear()
            assert Settings.resolve(env={"AGENTTRACE_LEASE_TTL": bad}).lease_ttl == 60.0
            [record] = caplog.records
            assert f"AGENTTRACE_LEASE_TTL={bad!r} is not seconds above 0" in record.getMessage()


def test_a_late_write_between_the_takeover_and_the_first_ship_leaves_a_gap_not_a_mix(
    tmp_path: Path,
) -> None:
    store = LocalStore(tmp_path / "store")
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    stream = sessions / "s1.events.jsonl"
    stream.write_bytes(b'{"n":1}\n')
    Shipper(store, sessions).ship("s1")  # the old holder's, epoch 0
    lease = take_lease(store, "s1", "host-b:2", ttl=30)
    start = lease.from_seq["main/events"]
    assert start == 1
    # The old holder, not yet knowing, ships its next chunk after the takeover.
    store.append("s1", segment_name("main", "events", 0, start), b'{"late":true}\n')
    with stream.open("ab") as handle:
        handle.write(b'{"n":2}\n')
    shipper = Shipper(store, sessions)
    shipper.set_epoch("s1", lease.epoch, lease.from_seq)
    shipper.ship("s1")
    # Past every seq the store holds (from_seq is only a floor), and under the new epoch.
    ours = [p for p in map(parse, store.segments("s1")) if p and p.epoch == lease.epoch]
    assert [(p.kind, p.seq) for p in ours] == [("events", start + 1)]
    assert _stream(store, "s1", tmp_path / "rebuilt") == '{"n":1}\n{"n":2}\n'
    lease.release()
