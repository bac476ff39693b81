"""The proof of issue 35 (item 5): one session across processes, recorded, read whole and
resumed from a shared store.

The root agent runs in one process (``tests/proof_root.py``); its tools hand work to a spawn
worker of ``agenttrace.ProcessPoolExecutor`` (a sub-agent), to a subprocess started with
``agenttrace.subprocess_env()`` (the same sub-agent) and to an MCP server over stdio (the
``mcp`` SDK's ``MCPServer``, ``tests/mcp_tool_server.py``); a last sub-agent has its worker
killed in its tool call. Every process is real, with a tracer provider of its own exporting
every span to one file, records into one sessions directory and ships to one directory store
(``AGENTTRACE_SESSIONS_URL=file://...``). Then, from the store alone: one trace, one opTree with
each part under the call that started it, no orphan root; the session resumed in a fresh
process with an empty sessions directory (every writer's transcripts, the id counters, the
killed call in doubt); two resumers of it, one of which wins.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agenttrace.formats.session.fullest import load_pair
from agenttrace.formats.session.optree import hosted_sessions, session_ops
from agenttrace.formats.stores.local import LocalStore
from agenttrace.formats.stores.materialize import materialize
from tests import travel_child
from tests.helpers import ROOT, child_env

pytest.importorskip("mcp")

ANSWER = "notes on tides; notes on winds; 42; lost die"
"""What the root agent returns: each part's answer (the killed worker's task is lost)."""


@dataclass(frozen=True)
class Recorded:
    """The session the root process recorded, as the store holds it."""

    session_id: str
    store: Path
    spans: str
    root_pid: int


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """Run the root process once for the module: its session is in the store."""
    where = tmp_path_factory.mktemp("proof")
    store = LocalStore(where / "store")
    spans = str(where / "spans.jsonl")
    done = subprocess.run(
        [sys.executable, "-m", "tests.proof_root", spans, str(where / "sessions")],
        env=child_env(AGENTTRACE_SESSIONS_URL=store.url, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=480,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    answer, session_id, pid = done.stdout.splitlines()
    assert answer == ANSWER
    # Every process has ended (the pool's, the subprocess's, the MCP server's): what they
    # wrote locally is gone with the host, and everything below reads the store alone.
    shutil.rmtree(where / "sessions")
    return Recorded(session_id, store.root, spans, int(pid))


@pytest.fixture
def store(recorded: Recorded, tmp_path: Path) -> Iterator[LocalStore]:
    """A copy of the store the root shipped to, for a test that writes to it (a resume)."""
    copy = LocalStore(tmp_path / "store")
    shutil.copytree(recorded.store, copy.root, dirs_exist_ok=True)
    yield copy
    copy.close()


def _cli(store: LocalStore, sessions: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """An ``agenttrace`` command on the store, with the sessions directory ``sessions``."""
    return subprocess.run(
        [sys.executable, "-m", "agenttrace.cli", *args],
        env=child_env(
            AGENTTRACE_SESSIONS_URL=store.url,
            AGENTTRACE_SESSIONS_DIR=str(sessions),
            XDG_CACHE_HOME=str(sessions.parent / "cache"),
        ),
        capture_output=True,
        text=True,
        timeout=480,
        cwd=ROOT,
    )


def _empty(path: Path) -> Path:
    path.mkdir()
    return path


def test_every_process_exports_its_spans_into_one_trace(recorded: Recorded) -> None:
    spans = travel_child.read_spans(recorded.spans)
    # One trace over every span of every process: the MCP server's spans of the client's
    # notifications too (notifications/initialized: the mcp SDK sends none with a trace
    # context; agenttrace's instrumentation of it does).
    assert len({span["trace_id"] for span in spans}) == 1
    by_id = {span["span_id"]: span for span in spans}
    # The root, the spawn worker, the subprocess, the MCP server: each exported its spans.
    assert len({span["pid"] for span in spans}) == 4
    tools = {
        span["attributes"]["agenttrace.path"]: span["name"]
        for span in spans
        if span["pid"] == recorded.root_pid and span["name"].startswith("execute_tool ")
    }
    assert tools == {
        "1.1": "execute_tool fan_out",
        "1.2": "execute_tool shell",
        "1.3": "execute_tool ask",
        "1.4": "execute_tool fan_out",
    }
    # Each part's first span in another process is under the tool span that started it (the
    # MCP server's is the SDK's server span of the request, the helper's run under it); the
    # killed worker's second run never ended, so it exported nothing.
    placed = {}
    for span in spans:
        parent = by_id.get(span["parent_span_id"])
        if span["pid"] == recorded.root_pid or (
            parent is not None and parent["pid"] != recorded.root_pid
        ):
            continue
        assert parent is not None, f"{span['name']} in pid {span['pid']} is a root"
        placed[span["name"], parent["attributes"]["agenttrace.path"]] = span["pid"]
    assert sorted(placed) == [
        ("initialize", "1.3"),  # the MCP server's spans of the messages the call sent
        ("invoke_agent researcher", "1.1"),
        ("invoke_agent researcher", "1.2"),
        ("notifications/initialized", "1.3"),
        ("tools/call research", "1.3"),
        ("tools/list", "1.3"),
    ]
    assert len(set(placed.values())) == 3  # three processes
    [helper] = [span for span in spans if span["name"] == "invoke_agent helper"]
    assert by_id[helper["parent_span_id"]]["name"] == "tools/call research"


def test_the_store_holds_one_optree_with_each_part_under_its_call(
    recorded: Recorded, tmp_path: Path
) -> None:
    store = LocalStore(recorded.store)
    rebuilt = tmp_path / "rebuilt"
    materialize(store, recorded.session_id, rebuilt)
    loaded, up_to_date = load_pair(rebuilt / f"{recorded.session_id}.json.gz")
    assert not up_to_date  # the killed worker's session file lags its stream, as a kill leaves it
    [root] = loaded.runs  # no orphan root: every other process's run is placed
    assert root["agentName"] == "boss"
    ops = list(session_ops(root))
    assert [(op["path"], op["name"]) for op in ops] == [
        ("1.1", "fan_out"), ("1.2", "shell"), ("1.3", "ask"), ("1.4", "fan_out"),
    ]  # fmt: skip
    placed = {}
    for op in ops:
        [child] = hosted_sessions(op)
        assert child["parentTxnId"] == root["txnId"]
        assert child["attributes"]["ingress"]["joined"]["parent_path"] == op["path"]
        placed[child["path"]] = (
            child["agentName"],
            [(inner["path"], inner["name"]) for inner in session_ops(child)],
        )
    assert placed == {
        "1.1:1": ("researcher", [("1.1.1.1", "look_up")]),
        "1.2:1": ("researcher", [("1.2.1.1", "look_up")]),
        "1.3:1": ("helper", [("1.3.1.1", "double")]),
        "1.4:1": ("researcher", []),  # killed in its call: the op never ended
    }
    # One session in the store: no process recorded one of its own.
    assert store.sessions() == [recorded.session_id]
    # The command line says the same, from the store alone (an empty sessions directory).
    empty = _empty(tmp_path / "empty")
    stats = _cli(store, empty, "stats", recorded.session_id, "--json")
    assert stats.returncode == 0, stats.stderr
    figures = json.loads(stats.stdout)
    assert figures["runs"] == 1
    # The boss's four calls and each sub-agent's one (the killed call never ended).
    assert sorted((agent["name"], agent["tool_calls"]) for agent in figures["by_agent"]) == [
        ("boss", 4), ("helper", 1), ("researcher", 1), ("researcher", 1),
    ]  # fmt: skip
    tree = _cli(store, empty, "tree", recorded.session_id)
    assert tree.returncode == 0, tree.stderr
    lines = tree.stdout.splitlines()
    assert sum(line.startswith("run ") for line in lines) == 1
    for label, name, agent, inner in (
        ("1.1", "fan_out", "researcher", "tool look_up"),
        ("1.2", "shell", "researcher", "tool look_up"),
        ("1.3", "ask", "helper", "tool double"),
    ):
        op = _line(lines, f"{label} session {name} ok")
        child = _line(lines, f"{label}:1 session {agent}")
        called = _line(lines, f"{label}.1.1 {inner}")
        assert op < child < called
        assert _indent(lines[op]) < _indent(lines[child]) < _indent(lines[called])


def _line(lines: list[str], text: str) -> int:
    [index] = [i for i, line in enumerate(lines) if text in line]
    return index


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip("│ ├└─"))


RESUME = textwrap.dedent(
    """
    import json, sys, agenttrace
    agenttrace.init(console="quiet", sessions_dir=sys.argv[1],
                    billing_file=sys.argv[1] + "/accounting.jsonl")
    try:
        session = agenttrace.resume(sys.argv[2])
    except agenttrace.LeaseHeld as held:
        print(json.dumps({"held": str(held)}), flush=True)
        sys.exit(0)
    names = session.list_agents()
    transcripts = {
        names[agent]: [entry["content"] for entry in session.revivify(agent).transcript]
        for agent in names
    }
    print(json.dumps({"names": names, "transcripts": transcripts,
                      "next": session.allocate_agent_id()}), flush=True)
    sys.stdin.readline()  # holds the session until the test says
    agenttrace.shutdown()
    """
)


def _resumer(store: LocalStore, sessions: Path, session_id: str) -> subprocess.Popen[str]:
    """A fresh process resuming ``session_id`` from ``store`` into ``sessions``: it prints
    what it restored (or the ``LeaseHeld`` it got) and holds the session until a line comes on
    its stdin."""
    return subprocess.Popen(
        [sys.executable, "-c", RESUME, str(sessions), session_id],
        env=child_env(AGENTTRACE_SESSIONS_URL=store.url),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def _said(process: subprocess.Popen[str]) -> dict[str, Any]:
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, process.communicate(timeout=480)[1]
    return dict(json.loads(line))


def _let_go(process: subprocess.Popen[str]) -> None:
    _, errors = process.communicate("\n", timeout=480)
    assert process.returncode == 0, errors


def test_the_session_resumes_from_the_store_in_a_fresh_process(
    recorded: Recorded, store: LocalStore, tmp_path: Path
) -> None:
    fresh = _empty(tmp_path / "fresh")
    resumer = _resumer(store, fresh, recorded.session_id)
    state = _said(resumer)
    _let_go(resumer)
    names = state["names"]
    # Every writer's agents: each writer's function agents (one per name: the worker's two
    # runs are its one "researcher") and those each made, the killed worker's too.
    writers = {agent.rpartition("_")[0] for agent in names}
    assert len(writers) == 4  # the root's, the worker's, the subprocess's, the MCP server's
    assert sorted(names.values()) == [
        "boss", "boss-agent", "helper", "researcher", "researcher", "researcher-die",
        "researcher-tides", "researcher-winds",
    ]  # fmt: skip
    assert {name: said for name, said in state["transcripts"].items() if said} == {
        "boss-agent": ["find out", ANSWER],
        "researcher-tides": ["research tides", "notes on tides"],
        "researcher-winds": ["research winds", "notes on winds"],
        "researcher-die": ["research die"],  # what it had heard when it was killed
    }
    # The first writer's counter goes on past its own agents.
    [boss] = [agent for agent, name in names.items() if name == "boss-agent"]
    assert state["next"] == f"agent_{int(boss.removeprefix('agent_')) + 1:03d}"
    # The killed call is in doubt, from the store alone.
    listed = _cli(store, _empty(tmp_path / "empty"), "doubts", recorded.session_id, "--json")
    assert listed.returncode == 0, listed.stderr
    assert [(d["step"], d["tool"]) for d in json.loads(listed.stdout)] == [("1.4.1.1", "look_up")]


def test_of_two_resumers_of_the_session_one_wins(
    recorded: Recorded, store: LocalStore, tmp_path: Path
) -> None:
    here = _empty(tmp_path / "here")
    first = _resumer(store, here, recorded.session_id)
    try:
        assert "names" in _said(first)
        # On this machine (the same sessions directory): the lease is held.
        second = _resumer(store, here, recorded.session_id)
        said = _said(second)
        _let_go(second)
        assert "held" in said and len(said["held"].splitlines()) == 1, said
        # So does the command: one line, exit status 2.
        command = subprocess.run(
            [sys.executable, "-m", "agenttrace.cli", "resume", recorded.session_id,
             "--prompt", "go on", "--agent", "tests.writer_agent:rebuild",
             "--sessions-dir", str(here), "--sessions-url", store.url],
            env=child_env(PYTHONPATH=str(ROOT)),
            capture_output=True,
            text=True,
            timeout=480,
            cwd=ROOT,
        )  # fmt: skip
        assert command.returncode == 2, command.stderr
        assert len(command.stderr.splitlines()) == 1 and " held by " in command.stderr
        # On another host (its own empty directory), the same store: the lease is the store's.
        elsewhere = _resumer(store, _empty(tmp_path / "elsewhere"), recorded.session_id)
        said = _said(elsewhere)
        _let_go(elsewhere)
        assert "held" in said, said
        assert len(said["held"].splitlines()) == 1
    finally:
        _let_go(first)
