"""Sessions recorded into a session store and read from it (``AGENTTRACE_SESSIONS_URL``,
docs/how-to/session-stores.md): the recorder writes its files locally and ships them as
segments; the commands and ``resume`` rebuild them from the store.

Everything is real: the directory store (``file://`` in ``tmp_path``), the recorder's files,
the command line and resumed runs in processes of their own.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import agenttrace
from agenttrace.formats.session.fullest import load_pair
from agenttrace.formats.stores import StoreError
from agenttrace.formats.stores.layout import parse
from agenttrace.formats.stores.local import LocalStore
from agenttrace.formats.stores.materialize import materialize
from agenttrace.formats.stores.shipping import Shipper
from tests.conftest import Traced
from tests.helpers import agenttrace_command, child_env

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LocalStore:
    """A directory store in ``tmp_path``, named by ``AGENTTRACE_SESSIONS_URL`` (so ``init``,
    and the processes the test starts, ship to it)."""
    store = LocalStore(tmp_path / "store")
    monkeypatch.setenv("AGENTTRACE_SESSIONS_URL", store.url)
    return store


@pytest.fixture
def traced(store: LocalStore, traced: Traced) -> Iterator[Traced]:
    """The suite's ``traced``, its ``init`` shipping to :func:`store`."""
    yield traced


def _converse(turns: int = 2) -> str:
    """A root agent that logs a transcript and calls a tool each turn; the session's id."""

    @agenttrace.tool(name="look_up")
    def look_up(topic: str) -> str:
        return f"notes on {topic}"

    @agenttrace.agent("clerk")
    def clerk() -> str:
        session = agenttrace.current_session()
        agent = session.allocate_agent_id()
        session.log_agent_created(agent, name="clerk-agent")
        for turn in range(turns):
            session.log_transcript_entry(agent, {"role": "user", "content": f"ask {turn}"})
            session.log_transcript_entry(agent, {"role": "assistant", "content": look_up(turn)})
        return "done"

    clerk()
    return agenttrace.current_session().session_id


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return agenttrace_command(*args, timeout=480, **env)


def _names(store: LocalStore, session_id: str) -> list[str]:
    return [segment.name for segment in store.segments(session_id)]


def test_a_recorded_session_is_in_the_store_and_reads_as_its_local_files(
    traced: Traced, store: LocalStore, tmp_path: Path
) -> None:
    session_id = _converse()
    traced.handle.force_flush()
    local = tmp_path / "sessions"
    names = _names(store, session_id)
    # Shipped under the lease its first ship took: epoch 1, the store's first.
    assert names[0] == "main/events/000001-0000000000"
    assert any(name.startswith("main/session/000001-") for name in names)
    # The store's chunks are the local stream, byte for byte; its last copy the session file.
    rebuilt = tmp_path / "rebuilt"
    materialize(store, session_id, rebuilt)
    for name in (f"{session_id}.events.jsonl", f"{session_id}.json.gz"):
        assert (rebuilt / name).read_bytes() == (local / name).read_bytes(), name
    traced.handle.shutdown()
    # The commands, by id, from the URL alone (an empty sessions directory), say what they
    # say of the local files.
    empty = tmp_path / "empty"
    empty.mkdir()
    cache = str(tmp_path / "cache")
    for command in (["tree"], ["stats", "--json"], ["export", "--format", "otlp-json"]):
        mine = _cli(*command, session_id, AGENTTRACE_SESSIONS_DIR=str(local))
        stored = _cli(
            *command,
            session_id,
            AGENTTRACE_SESSIONS_DIR=str(empty),
            AGENTTRACE_SESSIONS_URL=store.url,
            XDG_CACHE_HOME=cache,
        )
        assert mine.returncode == stored.returncode == 0, stored.stderr
        assert stored.stdout == mine.stdout, command
    assert list(empty.iterdir()) == []
    listed = _cli("list", "--json", AGENTTRACE_SESSIONS_URL=store.url, XDG_CACHE_HOME=cache)
    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)
    assert row["session_id"] == session_id and row["runs"] == 1


def test_a_joined_writers_segment_is_shipped_and_read_back_merged(
    traced: Traced, store: LocalStore, tmp_path: Path
) -> None:
    from tests.test_session_writers import _record

    sessions, session_id = _record(traced, tmp_path)
    writers = {part.writer for part in map(parse, store.segments(session_id)) if part}
    assert len(writers) == 3 and "main" in writers  # the parent and its two joined writers
    rebuilt = tmp_path / "rebuilt"
    materialize(store, session_id, rebuilt)
    here, _ = load_pair(sessions / f"{session_id}.json.gz")
    there, up_to_date = load_pair(rebuilt / f"{session_id}.json.gz")
    assert up_to_date
    assert [e["message_id"] for e in there.events] == [e["message_id"] for e in here.events]
    assert len(there.events) == 4 + 2 * 4
    assert json.dumps(there.runs, sort_keys=True) == json.dumps(here.runs, sort_keys=True)


def test_a_store_unreachable_mid_run_loses_nothing_once_it_is_back(
    traced: Traced, store: LocalStore, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    session_id = _converse(1)
    traced.handle.force_flush()
    shipped = len(_names(store, session_id))
    # The store goes away: a file where its directory was (every write to it fails).
    away = tmp_path / "store-away"
    store.root.rename(away)
    store.root.write_text("not a directory")
    with caplog.at_level(logging.WARNING, logger="agenttrace"):
        session = agenttrace.current_session()
        agent = session.allocate_agent_id()
        session.log_agent_created(agent, name="while-away")
        session.log_transcript_entry(agent, {"role": "user", "content": "logged while away"})
        traced.handle.force_flush()
        traced.handle.force_flush()
        failures = [r for r in caplog.records if "cannot ship" in r.getMessage()]
        assert len(failures) == 1  # said once, however many flushes fail
        assert (tmp_path / "sessions" / f"{session_id}.events.jsonl").exists()
        # Back: the backlog is shipped at the next flush, and nothing twice.
        store.root.unlink()
        away.rename(store.root)
        traced.handle.force_flush()
    assert any("works again" in r.getMessage() for r in caplog.records)
    assert len(_names(store, session_id)) > shipped
    rebuilt = tmp_path / "rebuilt"
    materialize(store, session_id, rebuilt)
    local = tmp_path / "sessions" / f"{session_id}.events.jsonl"
    assert (rebuilt / local.name).read_bytes() == local.read_bytes()
    assert b"logged while away" in (rebuilt / local.name).read_bytes()


def test_a_session_resumed_from_the_store_in_a_fresh_directory_goes_on_in_it(
    traced: Traced, store: LocalStore, tmp_path: Path
) -> None:
    session_id = _converse()
    traced.handle.shutdown()
    first = _names(store, session_id)
    fresh = tmp_path / "elsewhere"
    script = textwrap.dedent(
        """
        import json, sys, agenttrace
        agenttrace.init(console="quiet", sessions_dir=sys.argv[1],
                        billing_file=sys.argv[1] + "/accounting.jsonl")
        session = agenttrace.resume(sys.argv[2])
        [agent] = [a for a, name in session.list_agents().items() if name == "clerk-agent"]
        before = [entry["content"] for entry in session.revivify(agent).transcript]
        new = session.allocate_agent_id()
        session.log_agent_created(new, name="second-run")
        session.log_transcript_entry(new, {"role": "user", "content": "resumed elsewhere"})
        print(json.dumps({"before": before, "new": new}))
        agenttrace.shutdown()
        """
    )
    resumed = subprocess.run(
        [sys.executable, "-c", script, str(fresh), session_id],
        env=child_env(AGENTTRACE_SESSIONS_URL=store.url),
        capture_output=True,
        text=True,
        timeout=480,
        cwd=ROOT,
    )
    assert resumed.returncode == 0, resumed.stderr
    state = json.loads(resumed.stdout)
    assert state["before"] == ["ask 0", "notes on 0", "ask 1", "notes on 1"]
    assert state["new"] == "agent_003"  # the counter goes on past the first run's agents
    # The store holds both runs: the first's segments untouched, the second's after them.
    names = _names(store, session_id)
    assert names[: len(first)] == first or set(first) <= set(names)
    chunks = [p for p in map(parse, store.segments(session_id)) if p and p.kind == "events"]
    assert [p.seq for p in sorted(chunks, key=lambda p: p.seq)] == list(range(len(chunks)))
    rebuilt = tmp_path / "rebuilt"
    materialize(store, session_id, rebuilt)
    assert (rebuilt / f"{session_id}.events.jsonl").read_bytes() == (
        fresh / f"{session_id}.events.jsonl"
    ).read_bytes()
    loaded, _ = load_pair(rebuilt / f"{session_id}.json.gz")
    ids = [e["message_id"] for e in loaded.events]
    assert ids == [f"msg_{n:03d}" for n in range(1, len(ids) + 1)]
    assert any(e.get("content") == "resumed elsewhere" for e in loaded.events)


@pytest.mark.parametrize("url", ["ftp://example.invalid/sessions", "file:///dev/null/not-a-store"])
def test_a_bad_or_unreachable_store_is_one_line_and_exit_2(url: str, tmp_path: Path) -> None:
    for command in (["tree", "abc"], ["list"], ["stats", "abc"]):
        done = _cli(*command, "--sessions-url", url, XDG_CACHE_HOME=str(tmp_path / "cache"))
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert len(done.stderr.splitlines()) == 1, done.stderr
        assert done.stderr.startswith("agenttrace: error: ")


# --- the shipper alone: what it ships, and that it never ships a byte twice --------------------


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as handle:
        handle.write(data)


def test_the_shipper_ships_whole_lines_once_and_a_new_one_goes_on_from_the_store(
    tmp_path: Path,
) -> None:
    store = LocalStore(tmp_path / "store")
    sessions = tmp_path / "sessions"
    stream = sessions / "s1.events.jsonl"
    _write(stream, b'{"a":1}\n{"a":2}\n{"a":')  # the last line is being written
    shipper = Shipper(store, sessions)
    assert shipper.ship("s1") == 16
    assert shipper.ship("s1") == 0  # nothing new: nothing shipped
    _write(stream, b'3}\n{"a":4}\n')
    # A shipper that starts anew (a resumed run, a command) goes on after the store's chunks.
    assert Shipper(store, sessions).ship("s1") == len(b'{"a":3}\n{"a":4}\n')
    assert _names(store, "s1") == ["main/events/000000-0000000000", "main/events/000000-0000000001"]
    # A chunk the store took but whose answer was lost is not shipped again.
    _write(stream, b'{"a":5}\n')
    lost = Shipper(store, sessions)
    store.append("s1", "main/events/000000-0000000002", b'{"a":5}\n')
    _write(stream, b'{"a":6}\n')
    assert lost.ship("s1") == len(b'{"a":6}\n')
    rebuilt = tmp_path / "rebuilt"
    materialize(store, "s1", rebuilt)
    assert (rebuilt / "s1.events.jsonl").read_bytes() == stream.read_bytes()
    # Another writer's chunk where ours would go is never shipped over.
    _write(stream, b'{"a":7}\n')
    store.append("s1", "main/events/000000-0000000004", b'{"b":0}\n')
    with pytest.raises(StoreError, match="another writer"):
        lost.ship("s1")


def test_a_damaged_segment_is_one_line(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    store.append("s2", "main/events/000000-0000000000", b'{"a":1}\n{"a":')
    with pytest.raises(StoreError, match="damaged"):
        materialize(store, "s2", tmp_path / "rebuilt")
    env = {"AGENTTRACE_SESSIONS_URL": store.url, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    shown = _cli("tree", "s2", **env)
    assert shown.returncode == 2 and len(shown.stderr.splitlines()) == 1
    assert "segment main/events/000000-0000000000 is damaged" in shown.stderr
    # list leaves it out, and says why, once.
    listed = _cli("list", "--json", **env)
    assert listed.returncode == 0 and json.loads(listed.stdout) == []
    assert listed.stderr.count("session s2 is left out") == 1, listed.stderr


def test_doubts_and_resolve_from_the_store_reach_the_store(tmp_path: Path) -> None:
    from agenttrace.formats.stores.lease import take
    from tests import writers_child

    # A run killed in a tool call (its call left in doubt), its files shipped as a later run
    # that ships the session would.
    sessions = tmp_path / "sessions"
    killed = subprocess.run(
        [sys.executable, writers_child.__file__, str(sessions), "die"],
        env=child_env(),
        capture_output=True,
        timeout=480,
        cwd=ROOT,
    )
    assert killed.returncode == 9, killed.stderr
    [stream] = sessions.glob("*.events.jsonl")
    session_id = stream.name.removesuffix(".events.jsonl")
    store = LocalStore(tmp_path / "store")
    Shipper(store, sessions).ship(session_id)
    # Its lease was taken and let go (as a recorder's first ship takes it): the decision is
    # shipped under a lease of its own, or it would be fenced out.
    take(store, session_id, "recorder:1", ttl=30).release()
    env = {"AGENTTRACE_SESSIONS_URL": store.url, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    listed = _cli("doubts", session_id, "--json", **env)
    assert listed.returncode == 0, listed.stderr
    [doubt] = json.loads(listed.stdout)
    decided = _cli("resolve", session_id, doubt["step"], "--not-applied", **env)
    assert decided.returncode == 0, decided.stderr
    # The decision is the store's stream's next chunk: every reader of the store sees it.
    chunks = [p for p in map(parse, store.segments(session_id)) if p and p.kind == "events"]
    newest = max(chunks, key=lambda p: p.seq)
    assert b'"step_decision"' in store.read(session_id, newest.name, 1 << 20)
    again = _cli("doubts", session_id, "--json", **env)
    assert again.returncode == 0 and json.loads(again.stdout) == [], again.stderr


def test_the_resume_command_takes_the_session_from_the_store_and_goes_on_in_it(
    tmp_path: Path,
) -> None:
    from tests.test_cli import FACTORIES
    from tests.test_session_files import EXAMPLE_1, jsonl

    # Seed 001's Example 1, shipped to the store from a host that is gone.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "example1.events.jsonl").write_text(jsonl(EXAMPLE_1))
    store = LocalStore(tmp_path / "store")
    Shipper(store, elsewhere).ship("example1")
    code = tmp_path / "code"
    code.mkdir()
    (code / "factories.py").write_text(FACTORIES)
    here = tmp_path / "here"
    result = subprocess.run(
        [sys.executable, "-m", "agenttrace.cli", "resume", "example1", "--prompt", "Hello?",
         "--agent", "factories:rebuild", "--sessions-dir", str(here),
         "--sessions-url", store.url],
        env=child_env(PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=480,
        cwd=code,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "New messages msg_021..msg_021" in result.stdout
    # Resumed in this host's sessions directory; what it added is in the store after the
    # first host's lines.
    rebuilt = tmp_path / "rebuilt"
    materialize(store, "example1", rebuilt)
    stream = (rebuilt / "example1.events.jsonl").read_bytes()
    assert stream == (here / "example1.events.jsonl").read_bytes()
    assert stream.startswith(jsonl(EXAMPLE_1).encode()) and b'"Hello?"' in stream
    assert (rebuilt / "example1.json.gz").exists()


def test_init_refuses_a_store_url_no_store_takes_and_the_variable_only_warns(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(ValueError, match="sessions_url: not a store URL"):
        agenttrace.init(sessions_url="ftp://example.invalid/sessions")
    monkeypatch.setenv("AGENTTRACE_SESSIONS_URL", "ftp://example.invalid/sessions")
    from opentelemetry.sdk.trace import TracerProvider

    with caplog.at_level(logging.WARNING, logger="agenttrace"):
        handle = agenttrace.init(
            tracer_provider=TracerProvider(),
            sessions_dir=tmp_path / "sessions",
            billing_file=tmp_path / "accounting.jsonl",
        )
    try:
        assert any("AGENTTRACE_SESSIONS_URL" in r.getMessage() for r in caplog.records)
        assert handle.processor is not None
        assert not any(type(s).__name__ == "ShipperSink" for s in handle.processor.sinks)
    finally:
        handle.shutdown()


def test_a_forked_worker_ships_its_own_writers_files_never_its_parents(
    traced: Traced, store: LocalStore, tmp_path: Path
) -> None:
    import multiprocessing

    session_id = agenttrace.current_session().session_id
    _converse(1)  # the parent has shipped its files before the fork
    traced.handle.force_flush()
    pool = agenttrace.ProcessPoolExecutor(
        max_workers=1, mp_context=multiprocessing.get_context("fork")
    )

    @agenttrace.tool(name="fan_out")
    def fan_out(topic: str) -> list[str]:
        return pool.submit(_shipped_in_worker, topic).result(60)

    @agenttrace.agent("boss")
    def boss() -> list[str]:
        return fan_out("tides")

    with pool:
        shipped_there = boss()
    traced.handle.force_flush()
    parts = [p for p in map(parse, store.segments(session_id)) if p]
    [joined] = {p.writer for p in parts} - {"main"}
    # The worker shipped its own writer's files only (the parent's it forgot at the fork).
    assert shipped_there == [f"{session_id}.w/{joined}"]
    # Each series is the one process's: seqs 0, 1, 2... with no gap and no name twice.
    for writer in ("main", joined):
        chunks = sorted(p.seq for p in parts if p.writer == writer and p.kind == "events")
        assert chunks == list(range(len(chunks))), (writer, chunks)
    rebuilt = tmp_path / "rebuilt"
    materialize(store, session_id, rebuilt)
    local = tmp_path / "sessions"
    for name in (f"{session_id}.events.jsonl", f"{session_id}.w/{joined}.events.jsonl"):
        assert (rebuilt / name).read_bytes() == (local / name).read_bytes(), name


def _shipped_in_worker(topic: str) -> list[str]:
    """A forked pool worker's task: the researcher, then the writers its shipper ships."""
    from agenttrace._internal.runtime import runtime
    from agenttrace.recorder.shipper import ShipperSink
    from tests import writers_child

    writers_child.researcher(topic)
    recorder = runtime.recorder
    assert recorder is not None
    recorder.force_flush()
    [sink] = [s for s in recorder.sinks if isinstance(s, ShipperSink)]  # type: ignore[attr-defined]
    return sorted(sink.writers)


def test_a_shipper_told_of_a_new_lease_epoch_names_its_segments_by_it_and_goes_on(
    tmp_path: Path,
) -> None:
    from agenttrace.formats.stores.lease import accepted, take

    store = LocalStore(tmp_path / "store")
    sessions = tmp_path / "sessions"
    stream = sessions / "s3.events.jsonl"
    _write(stream, b'{"a":1}\n')
    shipper = Shipper(store, sessions)
    shipper.ship("s3")  # before any lease: epoch 0
    lease = take(store, "s3", "host-a:1", ttl=30)
    shipper.set_epoch("s3", lease.epoch)
    _write(stream, b'{"a":2}\n')
    shipper.ship("s3")
    names = [n for n in _names(store, "s3") if "/events/" in n]
    assert names == ["main/events/000000-0000000000", f"main/events/{lease.epoch:06d}-0000000001"]
    # Both count (the epoch-0 chunk was the store's when the lease was taken): the stream whole.
    kept = accepted(store.segments("s3"), store.manifest("s3"))
    assert [s.name for s in kept if "/events/" in s.name] == names
    rebuilt = tmp_path / "rebuilt"
    materialize(store, "s3", rebuilt)
    assert (rebuilt / "s3.events.jsonl").read_bytes() == stream.read_bytes()
    lease.release()


def test_the_recorder_ships_on_its_own_without_a_flush(traced: Traced, store: LocalStore) -> None:
    import threading

    from agenttrace.recorder.shipper import ShipperSink

    assert traced.handle.processor is not None
    [sink] = [s for s in traced.handle.processor.sinks if isinstance(s, ShipperSink)]
    shipped = threading.Event()
    ship = sink.shipper.ship

    def noted(stem: str) -> int:
        sent = ship(stem)
        if sent:
            shipped.set()
        return sent

    sink.shipper.ship = noted  # type: ignore[method-assign]
    session = agenttrace.current_session()
    agent = session.allocate_agent_id()
    session.log_agent_created(agent, name="unflushed")
    # No flush: the shipper's thread ships within its interval (a second).
    assert shipped.wait(30)
    [chunk] = [
        p for p in map(parse, store.segments(session.session_id)) if p and p.kind == "events"
    ]
    assert b'"unflushed"' in store.read(session.session_id, chunk.name, 1 << 20)


def test_a_joined_writer_killed_before_it_shipped_is_shipped_by_the_first_writer(
    traced: Traced, store: LocalStore, tmp_path: Path
) -> None:
    """A child killed in a tool call leaves lines its shipper never shipped (its tool call's
    intent among them); the first writer's flush ships them once the child is gone, so the
    store holds the session whole and its doubt is listed from the store."""
    from tests.test_session_writers import boss_whose_child_dies

    sessions = tmp_path / "sessions"
    session_id = agenttrace.current_session().session_id
    assert boss_whose_child_dies(sessions) == 9
    traced.handle.force_flush()
    [segment] = (sessions / f"{session_id}.w").glob("*.events.jsonl")
    rebuilt = tmp_path / "rebuilt"
    materialize(store, session_id, rebuilt)
    assert (rebuilt / f"{session_id}.w" / segment.name).read_bytes() == segment.read_bytes()
    listed = _cli(
        "doubts",
        session_id,
        "--json",
        AGENTTRACE_SESSIONS_URL=store.url,
        AGENTTRACE_SESSIONS_DIR=str(tmp_path / "empty"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
    )
    assert listed.returncode == 0, listed.stderr
    assert [(d["step"], d["tool"]) for d in json.loads(listed.stdout)] == [("1.1.1.1", "look_up")]


CARRIES = textwrap.dedent(
    """
    import multiprocessing, os, sys
    from opentelemetry.sdk.trace import TracerProvider
    import agenttrace

    def set_up():
        pass

    def url_here():
        return os.environ.get("AGENTTRACE_SESSIONS_URL")

    if __name__ == "__main__":
        agenttrace.init(tracer_provider=TracerProvider(), console="quiet",
                        sessions_dir=sys.argv[1], sessions_url=sys.argv[2])
        assert "AGENTTRACE_SESSIONS_URL" not in os.environ

        @agenttrace.tool
        def hand_over():
            pool = agenttrace.ProcessPoolExecutor(
                max_workers=1, mp_context=multiprocessing.get_context("spawn"), initializer=set_up
            )
            with pool:
                in_worker = pool.submit(url_here).result()
            return agenttrace.subprocess_env().get("AGENTTRACE_SESSIONS_URL"), in_worker

        @agenttrace.agent("boss")
        def boss():
            return hand_over()

        print(*boss())
    """
)


def test_a_store_named_by_init_reaches_the_processes_a_tool_hands_work_to(tmp_path: Path) -> None:
    """init(sessions_url=...) is not in the environment: subprocess_env() and a pool's workers
    get it anyway, so a child that joins as a writer ships its segment to the same store."""
    script = tmp_path / "carries.py"
    script.write_text(CARRIES)
    url = (tmp_path / "store").as_uri()
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "sessions"), url],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=480,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [url, url]


def test_a_process_on_another_host_joins_the_session_through_the_store(
    traced: Traced, store: LocalStore, tmp_path: Path
) -> None:
    """Another host has a sessions directory of its own (its carrier names none it can reach:
    baggage over HTTP or MCP), and ships to the same store: the baggage's store identity makes
    it a writer of the session there, so the store's copy has its run under the op that asked."""
    from agenttrace.formats.session.optree import hosted_sessions, session_ops
    from tests import writers_child

    elsewhere = tmp_path / "another-host"

    @agenttrace.tool(name="remote")
    def remote(topic: str) -> str:
        env = agenttrace.subprocess_env()
        env.pop("AGENTTRACE_JOIN_SESSIONS_DIR")  # only a carrier to this machine names it
        assert env["AGENTTRACE_SESSIONS_URL"] == store.url
        done = subprocess.run(
            [sys.executable, writers_child.__file__, str(elsewhere), topic],
            env=env,
            capture_output=True,
            text=True,
            timeout=480,
            check=True,
        )
        return done.stdout.strip()

    @agenttrace.agent("boss")
    def boss() -> str:
        return remote("tides")

    assert boss() == "notes on tides"
    session_id = agenttrace.current_session().session_id
    traced.handle.force_flush()
    # The other host wrote a segment of this session, not a session of its own.
    assert list(elsewhere.glob("*.json.gz")) == []
    assert len(list((elsewhere / f"{session_id}.w").glob("*.json.gz"))) == 1
    rebuilt = tmp_path / "rebuilt"
    materialize(store, session_id, rebuilt)
    loaded, _ = load_pair(rebuilt / f"{session_id}.json.gz")
    [root] = loaded.runs
    [op] = session_ops(root)
    [joined] = hosted_sessions(op)
    assert (op["name"], joined["agentName"], joined["path"]) == ("remote", "researcher", "1.1:1")
