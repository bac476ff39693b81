"""One session, many writers (docs/design/cross-process.md): a process that joins an op of a
session recorded in the same sessions directory writes its own segment of that session,
``<session_id>.w/<writer_id>.*``; readers merge the segments, the joined runs under the ops
that started them; ``resume`` restores every writer's agents.

Every process is real: a spawn pool's worker and a subprocess (``tests/writers_child.py``),
each with a tracer provider and ``init()`` of its own, recording into the parent's sessions
directory.
"""

from __future__ import annotations

import gzip
import json
import logging
import multiprocessing
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import agenttrace
from agenttrace.formats.session.files import LoadedFile
from agenttrace.formats.session.fullest import load_pair
from agenttrace.formats.session.optree import hosted_sessions, session_ops
from agenttrace.formats.session.segments import merge_segments
from agenttrace.tracing import travel
from agenttrace.views.account import read_account
from agenttrace.views.doubts import doubts, resolve
from agenttrace.views.listing import list_sessions
from agenttrace.views.live import files_state
from tests import writers_child
from tests.conftest import Traced
from tests.helpers import child_env

CHILD = Path(writers_child.__file__)
ROOT = CHILD.parent.parent


def _boss(sessions: Path, pool: agenttrace.ProcessPoolExecutor) -> str:
    """The parent's root agent: a tool that hands a sub-agent to the pool, another that runs
    one in a subprocess; the boss's own agent logs a transcript too."""

    @agenttrace.tool(name="fan_out")
    def fan_out(topic: str) -> str:
        return str(pool.submit(writers_child.pool_task, topic).result(60)[0])

    @agenttrace.tool(name="shell")
    def shell(topic: str) -> str:
        done = subprocess.run(
            [sys.executable, str(CHILD), str(sessions), topic],
            env=agenttrace.subprocess_env(),
            capture_output=True,
            text=True,
            timeout=480,
            check=True,
        )
        return done.stdout.strip()

    @agenttrace.agent("boss")
    def boss() -> str:
        session = agenttrace.current_session()
        agent = session.allocate_agent_id()
        session.log_agent_created(agent, name="boss-agent")
        session.log_transcript_entry(agent, {"role": "user", "content": "find out"})
        found = [fan_out("tides"), shell("winds")]
        session.log_transcript_entry(agent, {"role": "assistant", "content": "; ".join(found)})
        return "; ".join(found)

    return boss()


def _record(traced: Traced, tmp_path: Path) -> tuple[Path, str]:
    """The session the boss records, with its two joined writers: its sessions directory and
    its id."""
    sessions = tmp_path / "sessions"
    session_id = agenttrace.current_session().session_id
    pool = agenttrace.ProcessPoolExecutor(
        max_workers=1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=writers_child.set_up,
        initargs=(str(sessions),),
    )
    with pool:
        assert _boss(sessions, pool) == "notes on tides; notes on winds"
    traced.handle.force_flush()
    return sessions, session_id


def boss_whose_child_dies(sessions: Path) -> int:
    """A boss whose ``shell`` tool runs the researcher in a subprocess recording into
    ``sessions``, killed in its tool call (``die``): the child's exit status (9)."""

    @agenttrace.tool(name="shell")
    def shell() -> int:
        return subprocess.run(
            [sys.executable, str(CHILD), str(sessions), "die"],
            env=agenttrace.subprocess_env(),
            capture_output=True,
            timeout=480,
        ).returncode

    @agenttrace.agent("boss")
    def boss() -> int:
        return shell()

    return boss()


def _document(path: Path) -> dict[str, Any]:
    return json.loads(gzip.decompress(path.read_bytes()))


def test_joined_processes_write_segments_of_the_session(traced: Traced, tmp_path: Path) -> None:
    sessions, session_id = _record(traced, tmp_path)
    # One session in the directory: the first writer's files, and its writers' segments.
    assert sorted(p.name for p in sessions.glob("*.json.gz")) == [f"{session_id}.json.gz"]
    segments = sessions / f"{session_id}.w"
    streams = sorted(segments.glob("*.events.jsonl"))
    assert len(streams) == 2
    writers = {p.name.removesuffix(".events.jsonl") for p in streams}
    assert travel.writer_id() not in writers
    for stream in streams:
        writer = stream.name.removesuffix(".events.jsonl")
        document = _document(stream.with_name(f"{writer}.json.gz"))
        assert document["session_id"] == session_id
        [run] = document["runs"]
        assert run["agentName"] == "researcher" and run["sessionId"] == session_id
        assert run["txnId"] != session_id  # a joined writer's run never takes the session id
        assert run["attributes"]["ingress"]["joined"]["writer_id"] == writer
        # Its ids carry its writer id: they never collide with another writer's.
        events = [json.loads(line) for line in stream.read_text().splitlines()]
        ids = [e["message_id"] for e in events if "message_id" in e]
        assert ids and all(i.startswith(f"msg_{writer}_") for i in ids)
        agents = {e["agent_id"] for e in events if "agent_id" in e}  # events, op_accounted
        assert agents and all(agent.startswith(f"agent_{writer}_") for agent in agents)
    # The first writer's files hold only its own events.
    own = _document(sessions / f"{session_id}.json.gz")
    assert [e["message_id"] for e in own["events"]] == ["msg_001", "msg_002", "msg_003", "msg_004"]


def _merged(sessions: Path, session_id: str) -> LoadedFile:
    loaded, up_to_date = load_pair(sessions / f"{session_id}.json.gz")
    assert up_to_date
    return loaded


def test_readers_merge_the_joined_runs_under_the_ops_that_started_them(
    traced: Traced, tmp_path: Path
) -> None:
    sessions, session_id = _record(traced, tmp_path)
    loaded = _merged(sessions, session_id)
    [root] = loaded.runs  # no orphan root: both joined runs are placed
    ops = {op["name"]: op for op in session_ops(root)}
    assert [ops[name]["path"] for name in ("fan_out", "shell")] == ["1.1", "1.2"]
    for name, topic in (("fan_out", "tides"), ("shell", "winds")):
        [child] = hosted_sessions(ops[name])
        assert ops[name]["kind"] == "session"  # a tool call that ran a sub-agent
        assert child["agentName"] == "researcher"
        assert child["path"] == f"{ops[name]['path']}:1"
        assert child["parentTxnId"] == root["txnId"]
        [look_up] = session_ops(child)
        assert look_up["path"] == f"{ops[name]['path']}.1.1"  # relabelled under the op
        # Its accounting entry names its op as a one-writer session's would: root, label, and
        # the run whose op started it (its writer knew of none).
        entries = [(a["originTxnId"], a["path"], a["parentTxnId"]) for a in look_up["accounting"]]
        assert entries == [(root["originTxnId"], look_up["path"], root["txnId"])]
        assert child["attributes"]["ingress"]["joined"]["parent_path"] == ops[name]["path"]
        del topic
    # The events: every writer's, each writer's in its order, by time across writers.
    messages = [e["message_id"] for e in loaded.events]
    assert len(messages) == len(set(messages)) == 4 + 2 * 4
    assert messages[:3] == ["msg_001", "msg_002", "msg_003"] and messages[-1] == "msg_004"
    stamps = [e["ts"] for e in loaded.events]
    assert stamps == sorted(stamps)
    # The joined writers' events say where they were logged in the merged tree's labels.
    joined = [e for e in loaded.events if e["message_id"].count("_") > 1]
    assert {e["path"] for e in joined if "path" in e} == {"1.1:1", "1.2:1"}
    # So do their journal lines, under the root's run: each call a step of the one run.
    steps = {(line["run"], line["step"]) for line in loaded.journal if line["kind"] != "run"}
    assert steps >= {(root["txnId"], "1.1.1.1"), (root["txnId"], "1.2.1.1")}
    assert {line["run"] for line in loaded.journal} == {root["txnId"]}


def test_tree_shows_one_tree_and_resume_restores_every_writers_agents(
    traced: Traced, tmp_path: Path
) -> None:
    sessions, session_id = _record(traced, tmp_path)
    traced.handle.shutdown()
    # One row in the list, counting every writer's agents: each run's and those they made.
    [row] = list_sessions(sessions).rows
    assert (row.session_id, row.agents, row.runs) == (session_id, 6, 1)
    tree = subprocess.run(
        [sys.executable, "-m", "agenttrace.cli", "tree", session_id],
        env={**child_env(), "AGENTTRACE_SESSIONS_DIR": str(sessions)},
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert tree.returncode == 0, tree.stderr
    lines = tree.stdout.splitlines()
    assert sum(line.startswith("run ") for line in lines) == 1
    for label, name in (("1.1", "fan_out"), ("1.2", "shell")):
        op = next(i for i, line in enumerate(lines) if f"{label} session {name} ok" in line)
        child = next(i for i, line in enumerate(lines) if f"{label}:1 session researcher" in line)
        look_up = next(i for i, line in enumerate(lines) if f"{label}.1.1 tool look_up" in line)
        assert look_up > child
        assert child > op and _indent(lines[child]) > _indent(lines[op])
    # Resumed in a fresh process: every writer's agents and transcripts, and the counters.
    script = textwrap.dedent(
        """
        import json, sys, agenttrace
        agenttrace.init(console="quiet", sessions_dir=sys.argv[1])
        session = agenttrace.resume(sys.argv[2])
        agents = {
            agent: [entry["content"] for entry in session.revivify(agent).transcript]
            for agent in session.list_agents()
        }
        print(json.dumps({"agents": agents, "names": session.list_agents(),
                          "next": session.allocate_agent_id()}))
        agenttrace.shutdown()
        """
    )
    resumed = subprocess.run(
        [sys.executable, "-c", script, str(sessions), session_id],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=480,
        cwd=ROOT,
    )
    assert resumed.returncode == 0, resumed.stderr
    state = json.loads(resumed.stdout)
    names = state["names"]
    # Each run's agent (the boss, a researcher in each joined writer) and the agents it made.
    assert sorted(names.values()) == [
        "boss", "boss-agent", "researcher", "researcher", "researcher-tides", "researcher-winds"
    ]  # fmt: skip
    transcripts = {names[agent]: entries for agent, entries in state["agents"].items() if entries}
    assert transcripts == {
        "boss-agent": ["find out", "notes on tides; notes on winds"],
        "researcher-tides": ["research tides", "notes on tides"],
        "researcher-winds": ["research winds", "notes on winds"],
    }
    # The first writer's counter goes on past its own agents.
    [boss] = [agent for agent, name in names.items() if name == "boss-agent"]
    assert state["next"] == f"agent_{int(boss.removeprefix('agent_')) + 1:03d}"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip("│ ├└─"))


# --- the merge, on trees made by hand (what a file edited or cut short can hold) ----------------


def _run(
    txn: str, name: str, ops: list[dict[str, Any]], joined: dict[str, str] | None = None
) -> dict[str, Any]:
    ingress: dict[str, Any] = {"source": "joined", "joined": joined} if joined else {}
    return {
        "txnId": txn,
        "path": "0",
        "agentName": name,
        "attributes": {"ingress": ingress},
        "turns": [{"path": "1", "ops": ops}],
    }


def _op(label: str, name: str) -> dict[str, Any]:
    return {"path": label, "name": name, "accounting": [{"path": label}]}


def _picture(runs: list[dict[str, Any]], events: tuple[dict[str, Any], ...] = ()) -> LoadedFile:
    return LoadedFile(Path("x.json.gz"), "snapshot", list(events), runs)


def test_a_joined_run_whose_op_is_in_no_segment_stays_a_root() -> None:
    orphan = _run("c1", "lost", [_op("1.1", "t")], {"parent_txn_id": "gone", "parent_path": "1.1"})
    merged = merge_segments(_picture([_run("p", "boss", [_op("1.1", "t")])]), [_picture([orphan])])
    assert [run["agentName"] for run in merged.runs] == ["boss", "lost"]
    assert merged.runs[1]["path"] == "0" and "parentTxnId" not in merged.runs[1]


def test_a_second_joined_run_under_one_op_and_a_grandchild_are_relabelled() -> None:
    boss = _run("p", "boss", [_op("1.1", "fan_out")])
    first = _run("c1", "one", [_op("1.1", "spawn")], {"parent_txn_id": "p", "parent_path": "1.1"})
    second = _run("c2", "two", [_op("1.1", "t")], {"parent_txn_id": "p", "parent_path": "1.1"})
    grandchild = _run(
        "g", "three", [_op("1.1", "t")], {"parent_txn_id": "c1", "parent_path": "1.1"}
    )
    merged = merge_segments(
        _picture([boss]), [_picture([grandchild]), _picture([first]), _picture([second])]
    )
    [root] = merged.runs
    [fan_out] = session_ops(root)
    one, two = hosted_sessions(fan_out)
    assert "childSession" not in fan_out
    assert (one["path"], two["path"]) == ("1.1:1", "1.1:2")
    [spawn] = session_ops(one)
    assert spawn["path"] == "1.1.1.1"
    assert spawn["accounting"] == [{"path": "1.1.1.1", "originTxnId": "p"}]
    assert [op["path"] for op in session_ops(two)] == ["1.1:2.1.1"]
    [three] = hosted_sessions(spawn)
    assert three["path"] == "1.1.1.1:1" and three["parentTxnId"] == "c1"
    assert [op["path"] for op in session_ops(three)] == ["1.1.1.1.1.1"]
    # A view: what the segments hold is not changed.
    assert first["path"] == "0" and "childSession" not in first["turns"][0]["ops"][0]


def test_joined_runs_that_name_each_other_stay_roots_instead_of_a_cycle() -> None:
    a = _run("a", "a", [_op("1.1", "t")], {"parent_txn_id": "b", "parent_path": "1.1"})
    b = _run("b", "b", [_op("1.1", "t")], {"parent_txn_id": "a", "parent_path": "1.1"})
    merged = merge_segments(_picture([]), [_picture([a]), _picture([b])])
    [top] = merged.runs  # a went under b's op; b cannot go under a's, inside its own tree
    assert top["agentName"] == "b"
    assert [child["agentName"] for child in hosted_sessions(next(session_ops(top)))] == ["a"]


def test_events_of_the_writers_merge_by_time_each_writers_in_its_order() -> None:
    first = _picture([], ({"message_id": "m1", "ts": "1"}, {"message_id": "m3", "ts": "3"}))
    joined = _picture([], ({"message_id": "w1", "ts": "2"}, {"message_id": "w0", "ts": "0"}))
    merged = merge_segments(first, [joined])
    assert [e["message_id"] for e in merged.events] == ["m1", "w1", "w0", "m3"]


def test_a_segment_that_cannot_be_read_is_left_out_with_a_warning(
    traced: Traced, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sessions, session_id = _record(traced, tmp_path)
    broken = sessions / f"{session_id}.w" / "0-1.json.gz"
    broken.write_bytes(b"not gzip")
    with caplog.at_level(logging.WARNING, logger="agenttrace"):
        loaded, _ = load_pair(sessions / f"{session_id}.json.gz")
    assert len(list(hosted_sessions(next(session_ops(loaded.runs[0]))))) == 1
    assert any("segment is left out" in r.getMessage() for r in caplog.records)


def test_a_joined_process_killed_mid_run_is_placed_resumed_and_its_doubt_resolved(
    traced: Traced, tmp_path: Path
) -> None:
    sessions = tmp_path / "sessions"
    session_id = agenttrace.current_session().session_id

    assert boss_whose_child_dies(sessions) == 9
    traced.handle.force_flush()
    # The joined run's first snapshot was written as it started; the stream went on.
    [snapshot] = (sessions / f"{session_id}.w").glob("*.json.gz")
    [written] = _document(snapshot)["runs"]
    assert "endedAt" not in written and written["attributes"]["ingress"]["source"] == "joined"
    loaded, _ = load_pair(sessions / f"{session_id}.json.gz")
    [root] = loaded.runs
    [shell_op] = session_ops(root)
    [child] = hosted_sessions(shell_op)
    assert child["path"] == "1.1:1" and child["agentName"] == "researcher"
    assert "endedAt" not in child  # never ended: its op, the one killed, is not there
    assert list(session_ops(child)) == []
    assert [e["content"] for e in loaded.events if e.get("role") == "user"] == ["research die"]
    # Resumed: the killed writer's agent comes back with what it had said and heard.
    session = agenttrace.resume(session_id)
    [agent] = [a for a, name in session.list_agents().items() if name == "researcher-die"]
    assert [entry["content"] for entry in session.revivify(agent).transcript] == ["research die"]
    # Its tool call in doubt is listed with the session's, and settled from the first
    # writer's files: the decision merges after the intent it is about.
    traced.handle.shutdown()  # the resumed session's lease goes: resolve takes it
    path = sessions / f"{session_id}.json.gz"
    # Every view: one run (no orphan made from the child's journal), the killed call under
    # the researcher by the label the tree gives it (its writer called it 1.1 of its own run).
    [account_run] = read_account(path).runs
    [shell_op] = session_ops(account_run)
    [researcher] = hosted_sessions(shell_op)
    [killed] = session_ops(researcher)
    assert killed["path"] == "1.1.1.1" and killed["name"] == "look_up"
    [doubt] = doubts(path)
    assert (doubt.run, doubt.label, doubt.tool) == (root["txnId"], "1.1.1.1", "look_up")
    resolve(path, "1.1.1.1", "not_applied")
    assert doubts(path) == []
    own = [json.loads(line) for line in (sessions / f"{session_id}.events.jsonl").open()]
    decided = [line["step"] for line in own if line.get("event_type") == "step_decision"]
    assert decided == ["1.1.1.1"]  # in the first writer's stream, never the segment


def test_a_live_view_reads_again_when_a_writer_appends_to_its_segment(tmp_path: Path) -> None:
    """``tree --follow`` and ``serve`` poll :func:`files_state`: a segment counts."""
    sessions = tmp_path / "sessions"
    (sessions / "s1.w").mkdir(parents=True)
    (sessions / "s1.events.jsonl").write_text("")
    segment = sessions / "s1.w" / "ab12cd34-7.events.jsonl"
    segment.write_text("")
    before = files_state(sessions, "s1")
    with segment.open("a") as stream:
        stream.write('{"message_id": "msg_ab12cd34-7_001"}\n')
    assert files_state(sessions, "s1") != before
    assert files_state(tmp_path, "none")[2] == ()  # one writer: nothing more to look at


def test_a_segment_written_later_is_when_the_session_was_last_updated(tmp_path: Path) -> None:
    """A child still recording keeps its parent's session active: the account's "last written"
    (what says running or interrupted when no process can be probed) counts its segment."""
    from agenttrace.views.account import _updated_ns

    sessions = tmp_path / "sessions"
    (sessions / "s1.w").mkdir(parents=True)
    own = sessions / "s1.events.jsonl"
    own.write_text("")
    os.utime(own, ns=(1_000_000_000, 1_000_000_000))
    assert _updated_ns(own) == 1_000_000_000
    segment = sessions / "s1.w" / "ab12cd34-7.events.jsonl"
    segment.write_text("")
    os.utime(segment, ns=(5_000_000_000, 5_000_000_000))
    assert _updated_ns(own) == 5_000_000_000
