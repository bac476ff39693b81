"""Calls in flight in the live views (agenttrace/formats/session/inflight.py): an LLM attempt or
tool call whose journal ``intent`` has no outcome yet is a running node of ``agenttrace serve``'s
tree (``GET /api/runs/{id}/tree``, with ``runningSteps``) and of ``agenttrace tree --follow``,
though it logged nothing else; when it ends, it is the node its files give.

The page in a browser: tests/test_serve_browser.py. Each call here blocks by running the test's
look at the files in its own body (in this process), or, in another process, until the test
creates a gate file (tests/live_agent.py)."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import litellm
import pytest
from msgspec import to_builtins
from starlette.testclient import TestClient

import agenttrace
from agenttrace._internal.runtime import runtime
from agenttrace._internal.times import event_ts
from agenttrace.formats.session.files import LoadedFile
from agenttrace.formats.session.inflight import PROCESS_GONE, running_steps, with_running_steps
from agenttrace.model import journal as j
from agenttrace.model import journal_lines as jl
from agenttrace.tracing.scopes import OpScope, current_scope
from agenttrace.views.live import read_live
from agenttrace.views.serve.app import create_app
from agenttrace.views.tree import optree_tree, render_optree

from . import live_agent
from .conftest import Traced
from .helpers import ROOT, child_env
from .llm_server import LLMServer, Reply
from .test_litellm import http

TOKEN = "test-token-of-this-server"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
T0 = "2026-11-27T14:02:11.120Z"
T0_MS = 1795788131120
HOSTILE = "<img src=x onerror=alert(1)><script>alert(2)</script>"


def _intent(
    label: str,
    *,
    kind: str = "tool",
    name: str = "charge",
    attempt: int = 1,
    agent: str = "agent_001",
    run: str = "run-1",
    ts: str | None = T0,
) -> dict[str, Any]:
    """An intent line as the journal writes it (``journal.intent_line``; ``kind`` ``llm`` as an
    LLM attempt's intent is)."""
    line = to_builtins(
        jl.intent_line(
            (run, label, attempt),
            agent_id=agent,
            name=name,
            effect="effect",
            request_fingerprint=j.fingerprint({"x": 1}),
            arguments=json.dumps({"amount": 5}) if kind == "tool" else None,
        )
    )
    line["kind"] = kind
    if ts is not None:
        line["ts"] = ts
    return line


def _node(runs: list[dict[str, Any]], path: str) -> dict[str, Any]:
    """The node labelled ``path`` in the last run's tree."""
    stack: list[dict[str, Any]] = [runs[-1]]
    while stack:
        node = stack.pop()
        if node.get("path") == path:
            return node
        stack.extend(node.get("turns") or [])
        stack.extend(node.get("ops") or [])
        stack.extend(node.get("childSessions") or [])
        if isinstance(node.get("childSession"), dict):
            stack.append(node["childSession"])
    raise AssertionError(f"no node {path}")


def _loaded(journal: list[dict[str, Any]], runs: list[dict[str, Any]] | None = None) -> LoadedFile:
    events = [
        {"event_type": "agent_created", "agent_id": "agent_001", "name": "Boss", "ts": T0},
        {"event_type": "agent_created", "agent_id": "agent_002", "name": "Worker", "ts": T0},
    ]
    return LoadedFile(
        Path("s.events.jsonl"), "stream", events, runs or [], session_id="s", journal=journal
    )


# --- the journal's steps in flight -------------------------------------------------------------


def test_a_step_runs_from_its_intent_until_its_outcome_or_a_decision() -> None:
    key = ("run-1", "1.1", 1)
    done = to_builtins(
        jl.done_line(key, agent_id="agent_001", kind="tool", name="charge", result="{}")
    )
    failed = to_builtins(
        jl.failed_line(
            ("run-1", "1.2", 1), agent_id="a", kind="tool", name="x", error="E", applied="unknown"
        )
    )
    decided = to_builtins(jl.decision_line(("run-1", "1.3", 1), "not_applied"))
    lines = [
        _intent("1.1"),
        done,
        _intent("1.2"),
        failed,
        _intent("1.3"),
        decided,
        _intent("1.4", attempt=1),  # retried: only the last attempt at a place counts
        _intent("1.4", attempt=2, ts="2026-11-27T14:02:12.000Z"),
        _intent("2.1", kind="llm", name="openai/gpt-4o-mini"),
        _intent("2.2", ts=None),  # says nothing of when it started
        {"event_type": "step", "run": "run-1", "step": "2.3", "state": "intent"},  # no attempt
    ]
    steps = running_steps(lines)
    assert [(s.path, s.attempt, s.kind, s.name) for s in steps] == [
        ("1.4", 2, "tool", "charge"),
        ("2.1", 1, "llm", "openai/gpt-4o-mini"),
    ]
    assert steps[0].started_at == T0_MS + 880
    assert steps[0].arguments == '{"amount": 5}' and steps[1].arguments is None
    assert steps[1].as_json() == {
        "run": "run-1",
        "path": "2.1",
        "attempt": 1,
        "kind": "llm",
        "name": "openai/gpt-4o-mini",
        "agentId": "agent_001",
        "startedAt": T0_MS,
        "arguments": None,
    }
    retried = to_builtins(
        jl.done_line(("run-1", "1.4", 2), agent_id="a", kind="tool", name="x", result="{}")
    )
    assert [step.path for step in running_steps([*lines, retried])] == ["2.1"]


def test_calls_in_flight_of_a_run_no_file_holds_make_its_tree() -> None:
    """Only the journal says anything: a tool call of the Boss that hosts the Worker, and the
    Worker's LLM attempt. The run, its turn, the sub-agent run and its turn are made."""
    loaded = _loaded(
        [
            _intent("1.1", name="delegate"),
            _intent("1.1.1.1", kind="llm", name="openai/gpt-4o-mini", agent="agent_002"),
        ]
    )
    shown, steps = with_running_steps(loaded)
    assert [step.path for step in steps] == ["1.1", "1.1.1.1"]
    (run,) = shown.runs
    assert (run["agentName"], run["txnId"], run.get("endedAt")) == ("Boss", "run-1", None)
    delegate = _node(shown.runs, "1.1")
    # A tool that hosts a sub-agent is a session op, as its session file will say.
    assert (delegate["kind"], delegate["name"], delegate["startedAt"]) == (
        "session",
        "delegate",
        T0_MS,
    )
    assert delegate["request"] == {"payload": '{"amount": 5}', "size": 13, "kind": "tool"}
    assert _node(shown.runs, "1.1:1")["agentName"] == "Worker"
    attempt = _node(shown.runs, "1.1.1.1")
    assert (attempt["kind"], attempt["name"], attempt.get("endedAt")) == (
        "llm",
        "openai/gpt-4o-mini",
        None,
    )
    lines = render_optree(shown.runs)
    assert lines[-1].endswith("1.1.1.1 llm openai/gpt-4o-mini in progress")
    assert loaded.runs == []  # nothing is written back into what was read


def test_an_ended_op_or_run_is_left_as_its_files_give_it() -> None:
    ended_op = {
        "path": "1.1",
        "kind": "tool",
        "name": "charge",
        "startedAt": 5,
        "endedAt": 9,
        "status": "ok",
        "attributes": {},
        "logs": [],
        "accounting": [],
    }
    run = {
        "path": "0",
        "txnId": "run-1",
        "originTxnId": "run-1",
        "agentId": "agent_001",
        "startedAt": 1,
        "attributes": {"ingress": {}},
        "turns": [{"path": "1", "index": 1, "startedAt": 1, "ops": [ended_op]}],
    }
    loaded = _loaded([_intent("1.1")], [run])
    assert with_running_steps(loaded) == (loaded, [])  # its done line is late: it ended
    assert ended_op["startedAt"] == 5
    finished = {**run, "endedAt": 20, "turns": []}
    loaded = _loaded([_intent("1.2")], [finished])
    assert with_running_steps(loaded) == (loaded, [])  # a run that ended has every node


def test_a_name_from_an_agent_is_one_line_of_text_in_the_terminal_tree() -> None:
    loaded = _loaded([_intent("1.1", name="read\x1b[2J<b>pages</b>\nok")])
    shown, _ = with_running_steps(loaded)
    lines = render_optree(shown.runs)
    assert lines[-1].endswith("1.1 tool read\\x1b[2J<b>pages</b>\\nok in progress")
    assert "\x1b" not in "".join(lines)


def _started_run(trace: str, started: int) -> dict[str, Any]:
    """A run as ``with_started_nodes`` makes it from events: no file says its origin."""
    return {
        "path": "0",
        "traceId": trace,
        "txnId": None,
        "originTxnId": None,
        "agentId": "agent_001",
        "agentName": "Boss",
        "startedAt": started,
        "attributes": {"ingress": {}},
        "turns": [],
    }


def test_a_step_goes_to_the_one_running_run_whose_origin_is_not_known() -> None:
    loaded = _loaded([_intent("1.2")], [_started_run("t1", T0_MS - 5)])
    shown, steps = with_running_steps(loaded)
    assert [step.path for step in steps] == ["1.2"]
    (run,) = shown.runs
    assert (run["traceId"], run["txnId"], run["originTxnId"]) == ("t1", "run-1", "run-1")
    assert _node(shown.runs, "1.2")["name"] == "charge"
    # Two such runs: which one is not guessed; the step gets a run of its own.
    loaded = _loaded([_intent("1.2")], [_started_run("t1", 1), _started_run("t2", 2)])
    shown, steps = with_running_steps(loaded)
    assert len(steps) == 1
    assert [run["traceId"] for run in shown.runs] == ["t1", "t2", None]
    assert shown.runs[-1]["txnId"] == "run-1" and shown.runs[-1]["turns"][0]["path"] == "1"


def test_a_step_too_deep_for_any_file_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTTRACE_MAX_NESTING_DEPTH", "16")
    deep = "1.1." * 3 + "1.1"
    loaded = _loaded([_intent(deep, agent="agent_002")])
    assert with_running_steps(loaded) == (loaded, [])  # and no empty run made for it
    assert with_running_steps(loaded, max_depth=64)[1][0].path == deep


def _run_line(run: str, process: str | None, attempt: int = 1) -> dict[str, Any]:
    line = to_builtins(
        jl.run_line(run, attempt, agent_id="agent_001", name="Boss", messages=0, process=process)
    )
    line["ts"] = T0
    return line


def test_a_call_whose_process_is_gone_is_interrupted_not_running() -> None:
    """A run line from another process after a call's intent: the process that made the call is
    gone (a resume's new run), so the call will never end."""
    killed = [_run_line("run-1", "p1"), _intent("1.1"), _intent("1.2", kind="llm", name="m")]
    (first, second) = running_steps(killed)
    assert not first.interrupted and not second.interrupted
    resumed = [*killed, _run_line("run-2", "p2")]
    assert [step.interrupted for step in running_steps(resumed)] == [True, True]
    shown, steps = with_running_steps(_loaded(resumed))
    assert steps == []  # none in flight
    (run,) = shown.runs
    for node in (run, _node(shown.runs, "1"), _node(shown.runs, "1.1"), _node(shown.runs, "1.2")):
        assert node["attributes"][PROCESS_GONE] is True and node.get("endedAt") is None
    lines = render_optree(shown.runs)
    assert lines[-2].endswith("1.1 tool charge interrupted")
    assert lines[-1].endswith("1.2 llm m interrupted")
    followed = _text(optree_tree(shown.runs, running_at=T0_MS + 5000))
    assert "running" not in followed and followed.count("interrupted") == 4


def test_a_later_run_of_the_same_process_leaves_its_calls_running() -> None:
    concurrent = [_run_line("run-1", "p1"), _intent("1.1"), _run_line("run-2", "p1")]
    assert [step.interrupted for step in running_steps(concurrent)] == [False]
    # Run lines of an earlier release name no process: only a re-entry of the run says so.
    unnamed = [_run_line("run-1", None), _intent("1.1"), _run_line("run-2", None)]
    assert [step.interrupted for step in running_steps(unnamed)] == [False]
    reentered = [*unnamed, _run_line("run-1", None, attempt=2)]
    assert [step.interrupted for step in running_steps(reentered)] == [True]


def test_a_re_entered_runs_call_is_shown_in_the_run_that_re_enters() -> None:
    """The re-entry runs the call at 1.1 again (attempt 2), where the killed run's tree has an
    op that ended (its first attempt failed): it is shown running in the run that re-enters,
    and the killed run's call left at 1.2 is interrupted."""
    ended_op = {
        "path": "1.1",
        "kind": "tool",
        "name": "charge",
        "startedAt": 5,
        "endedAt": 9,
        "status": "failed",
        "attributes": {},
    }
    killed_run = {
        "path": "0",
        "txnId": "run-1",
        "originTxnId": "run-1",
        "agentId": "agent_001",
        "startedAt": 1,
        "attributes": {"ingress": {}},
        "turns": [{"path": "1", "index": 1, "startedAt": 1, "ops": [ended_op]}],
    }
    again = {
        **_started_run("t2", T0_MS),
        "txnId": "run-2",
        "originTxnId": "run-2",
        "attributes": {"ingress": {}, "agenttrace.reenters": "run-1"},
    }
    failed = to_builtins(jl.failed_line(
        ("run-1", "1.1", 1), agent_id="agent_001", kind="tool", name="charge", error="E",
        applied="no",
    ))  # fmt: skip
    journal = [
        _run_line("run-1", "p1"),
        _intent("1.1"),
        failed,
        _intent("1.2", name="refund"),
        _run_line("run-1", "p2", attempt=2),
        _intent("1.1", attempt=2),
    ]
    shown, steps = with_running_steps(_loaded(journal, [killed_run, again]))
    assert [(step.path, step.attempt, step.run_attempt) for step in steps] == [("1.1", 2, 2)]
    killed, reentering = shown.runs
    assert _node([reentering], "1.1").get("endedAt") is None  # running where it runs now
    assert _node([killed], "1.1")["endedAt"] == 9  # the first attempt, as its file says
    assert _node([killed], "1.2")["attributes"][PROCESS_GONE] is True
    assert killed["attributes"][PROCESS_GONE] is True
    assert PROCESS_GONE not in reentering["attributes"]
    # Known from its events only, the run that re-enters is the one running run without an origin.
    unnamed = _started_run("t2", T0_MS)
    shown, steps = with_running_steps(_loaded(journal, [killed_run, unnamed]))
    assert len(steps) == 1 and _node([shown.runs[1]], "1.1").get("endedAt") is None
    assert shown.runs[1]["txnId"] is None  # its origin is its own, not the one it re-enters


# --- the live state and the JSON API, on a real session ------------------------------------------


def _client(sessions: Path) -> TestClient:
    return TestClient(create_app(sessions, TOKEN), base_url="http://127.0.0.1")


def test_a_tool_call_that_blocks_is_running_until_it_ends(traced: Traced) -> None:
    sessions = traced.handle.settings.sessions_dir
    session_id = agenttrace.current_session().session_id
    client = _client(sessions)
    seen: list[Any] = []

    @agenttrace.tool
    def read_pages(title: str) -> int:
        # It logs nothing: only its intent says it runs. Looked at from inside, it blocks.
        live = read_live(sessions, session_id)
        response = client.get(f"/api/runs/{session_id}/tree", headers=BEARER)
        drawn = optree_tree(live.loaded.runs, running_at=live.read_at_ms)
        seen.append((live, response, drawn))
        return 12

    @agenttrace.agent("Boss")
    def boss() -> int:
        return read_pages(HOSTILE)

    boss()
    ((live, response, drawn),) = seen
    (step,) = live.running_steps
    assert (step["path"], step["kind"], step["name"], step["agentId"]) == (
        "1.1",
        "tool",
        "read_pages",
        "agent_001",
    )
    assert step["arguments"] == json.dumps({"title": HOSTILE}, separators=(",", ":"))
    assert step["run"] == session_id  # a fresh session's first run is named by it

    assert response.status_code == 200
    assert "<img" not in response.text and "<script>" not in response.text  # \u003c
    document = response.json()
    assert document["status"] == "running"
    assert document["runningSteps"] == [step]
    op = _node(document["tree"], "1.1")
    assert (op["kind"], op["name"], op.get("endedAt")) == ("tool", "read_pages", None)
    assert op["startedAt"] == step["startedAt"] <= document["now"]
    assert HOSTILE in op["request"]["payload"]
    turn = _node(document["tree"], "1")
    assert turn.get("endedAt") is None and turn["startedAt"] <= op["startedAt"]

    text = _text(drawn)
    assert re.search(r"^ *└── 1\.1 tool read_pages running for \d+s$", text, re.M), text

    traced.handle.force_flush()
    ended = client.get(f"/api/runs/{session_id}/tree", headers=BEARER).json()
    assert ended["status"] == "ended" and ended["runningSteps"] == []
    op = _node(ended["tree"], "1.1")
    assert (op["name"], op["status"]) == ("read_pages", "ok") and op["endedAt"] is not None


def test_an_llm_attempt_in_flight_shows_as_its_model(traced: Traced) -> None:
    """The intent of an LLM attempt (kind ``llm``, its name the model), written as the journal
    writes a tool's: the attempt is a running ``llm`` node though it logged nothing."""
    sessions = traced.handle.settings.sessions_dir
    session_id = agenttrace.current_session().session_id
    client = _client(sessions)
    seen: list[dict[str, Any]] = []

    @agenttrace.llm(model="openai/gpt-4o-mini")
    def chat(messages: list[dict[str, Any]]) -> dict[str, Any]:
        scope = current_scope()
        assert isinstance(scope, OpScope)
        line = _intent(
            scope.label,
            kind="llm",
            name="openai/gpt-4o-mini",
            run=scope.origin,
            agent=scope.session.agent_id,
            ts=event_ts(time.time_ns()),
        )
        assert runtime.recorder is not None
        runtime.recorder.journal(scope.session.run.session, (json.dumps(line) + "\n").encode())
        seen.append(client.get(f"/api/runs/{session_id}/tree", headers=BEARER).json())
        return live_agent._reply("Hello.", (5, 2))

    @agenttrace.agent("Boss")
    def boss() -> dict[str, Any]:
        return chat([{"role": "user", "content": "Hi"}])

    boss()
    (document,) = seen
    (step,) = document["runningSteps"]
    assert (step["path"], step["kind"], step["name"]) == ("1.1", "llm", "openai/gpt-4o-mini")
    op = _node(document["tree"], "1.1")
    assert (op["kind"], op["name"], op.get("endedAt")) == ("llm", "openai/gpt-4o-mini", None)
    assert op["startedAt"] == step["startedAt"] and "request" not in op
    lines = render_optree(document["tree"])
    assert lines[-1].endswith("1.1 llm openai/gpt-4o-mini in progress")


def test_a_litellm_call_that_hangs_is_running_until_its_answer_comes(
    traced: Traced, llm: LLMServer
) -> None:
    """A real LLM call the model server holds: its journal intent (written as the attempt
    starts) makes it a running ``llm`` node in the live tree and the JSON API while nothing else
    says it exists; once the answer comes it is the ended attempt."""
    sessions = traced.handle.settings.sessions_dir
    session_id = agenttrace.current_session().session_id
    client = _client(sessions)
    received, gate = threading.Event(), threading.Event()
    llm.reset(Reply(content="Here.", received=received, gate=gate))
    answers: list[Any] = []

    @agenttrace.agent("Boss")
    def boss() -> None:
        answers.append(litellm.completion(**http(llm)))

    caller = threading.Thread(target=boss)
    caller.start()
    try:
        assert received.wait(timeout=480)  # the request is at the server, which holds it
        traced.handle.force_flush()  # what the call has journaled so far is on disk
        document = client.get(f"/api/runs/{session_id}/tree", headers=BEARER).json()
        drawn = _text(optree_tree(read_live(sessions, session_id).loaded.runs, running_at=None))
    finally:
        gate.set()
        caller.join(timeout=480)
    assert answers and not caller.is_alive()
    (step,) = document["runningSteps"]
    assert (step["path"], step["kind"], step["name"]) == ("1.1", "llm", "gpt-4o-mini")
    op = _node(document["tree"], "1.1")
    assert (op["kind"], op.get("endedAt")) == ("llm", None)
    assert re.search(r"1\.1 llm gpt-4o-mini in progress", drawn), drawn

    traced.handle.force_flush()
    ended = client.get(f"/api/runs/{session_id}/tree", headers=BEARER).json()
    assert ended["runningSteps"] == []
    op = _node(ended["tree"], "1.1")
    assert op["kind"] == "llm" and op["endedAt"] is not None and op["status"] == "ok"


@pytest.mark.e2e
def test_a_call_a_killed_process_left_is_interrupted_once_a_resumed_process_runs(
    tmp_path: Path, llm_server: LLMServer
) -> None:
    from .payment_server import PaymentServer
    from .test_reentry import _match_child, match_fork_server

    charge_5 = {"name": "charge", "arguments": '{"amount": 5}'}
    call = {"id": "c1", "type": "function", "function": charge_5}
    llm_server.reset(Reply(content="", tool_calls=[call]))
    sessions = tmp_path / "sessions"
    payments = PaymentServer().start()
    forks = match_fork_server()
    try:
        killed = _match_child(forks, sessions, llm_server, payments, "run")
        assert killed.returncode == -9, killed.stderr
        (stream,) = sessions.glob("*.events.jsonl")
        session_id = stream.name.split(".")[0]
        before = read_live(sessions, session_id)
        llm_server.reset(Reply(content="Green."))
        resumed = _match_child(forks, sessions, llm_server, payments, "other", "Is the tea green?")
        assert resumed.returncode == 0, resumed.stderr
    finally:
        payments.stop()
        forks.close()
    # Its journal names its process, gone at once: the call is cut short, not in flight.
    assert before.status == "interrupted" and before.running_steps == ()
    cut = _node(before.loaded.runs, "1.2")
    assert (cut["name"], cut.get("endedAt"), cut["attributes"][PROCESS_GONE]) == (
        "charge",
        None,
        True,
    )
    after = read_live(sessions, session_id)
    assert after.running_steps == ()
    killed_run = next(run for run in after.loaded.runs if run["txnId"] == session_id)
    charge = _node([killed_run], "1.2")
    assert charge.get("endedAt") is None and charge["attributes"][PROCESS_GONE] is True
    served = _client(sessions).get(f"/api/runs/{session_id}/tree", headers=BEARER).json()
    assert served["runningSteps"] == []
    text = _text(optree_tree(after.loaded.runs, running_at=after.read_at_ms))
    # Cut short by the kill, and a call that may have had its effect: in doubt, with its class.
    assert "1.2 tool charge in doubt (idempotent)" in text and "running" not in text, text


def _text(tree: Any) -> str:
    import io

    from rich.console import Console

    buffer = io.StringIO()
    Console(file=buffer, width=200, color_system=None).print(tree, markup=False)
    return buffer.getvalue()


# --- tree --follow on a terminal ----------------------------------------------------------------

DEADLINE_S = 60.0


def test_tree_follow_shows_the_blocking_call_counting_then_its_end(tmp_path: Path) -> None:
    """``tree --follow`` on a real terminal (a pty, so rich draws live) follows the scripted
    agent of another process: the Worker's blocking tool call is drawn running, its time going
    up from one drawing to the next; once the test opens the gate, it is drawn ``ok``."""
    sessions, gate = tmp_path / "sessions", tmp_path / "gate"
    env = child_env(PYTHONPATH=str(ROOT))
    agent = subprocess.Popen(
        [sys.executable, "-m", "tests.live_agent", str(sessions), str(gate)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    terminal, their_end = pty.openpty()
    follower = None
    try:
        assert agent.stdout is not None
        session_id = agent.stdout.readline().strip()
        stream = sessions / f"{session_id}.events.jsonl"
        _wait_for(lambda: stream.exists() and live_agent.BLOCKING_CALL in stream.read_text())
        follower = subprocess.Popen(
            [sys.executable, "-m", "agenttrace.cli", "tree", "--follow", session_id],
            cwd=tmp_path,
            env={
                **env,
                "AGENTTRACE_SESSIONS_DIR": str(sessions),
                "COLUMNS": "200",
                "LINES": "60",
                "TERM": "xterm-256color",
            },
            stdin=subprocess.DEVNULL,
            stdout=their_end,
            stderr=subprocess.PIPE,
        )
        os.close(their_end)
        their_end = -1
        drawn = _Screen(terminal)
        running = re.compile(r"1\.2\.1\.2 tool read_pages running for (\d+)s")
        first = int(drawn.until(running)[1])
        later = drawn.until(re.compile(rf"{running.pattern}(?<!for {first}s)"))
        assert int(later[1]) > first  # counted on while nothing was written
        gate.touch()
        drawn.until(re.compile(r"1\.2\.1\.2 tool read_pages ok \d+ms"))
        assert follower.wait(timeout=DEADLINE_S) == 0
        assert agent.wait(timeout=DEADLINE_S) == 0
        drawn.until(re.compile(rf"session {session_id}: ended"))
    finally:
        agent.kill()
        if follower is not None:
            follower.kill()
            follower.wait()
        agent.wait()
        os.close(terminal)
        if their_end >= 0:
            os.close(their_end)


class _Screen:
    """What a program wrote on a pty, read as it comes (its escape codes kept)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.text = ""
        self.seen = 0  # what a match already used: each until() looks at what came after

    def until(self, pattern: re.Pattern[str]) -> re.Match[str]:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            match = pattern.search(self.text, self.seen)
            if match:
                self.seen = match.end()
                return match
            left = deadline - time.monotonic()
            assert left > 0, f"the terminal never showed {pattern.pattern}: {self.text[-2000:]}"
            if select.select([self.fd], [], [], min(left, 1.0))[0]:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:  # the program ended and closed its side
                    chunk = b""
                if not chunk:
                    raise AssertionError(
                        f"no {pattern.pattern} before the end: {self.text[-2000:]}"
                    )
                self.text += chunk.decode("utf-8", "replace")


def _wait_for(condition: Any) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.05)
