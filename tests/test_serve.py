"""``agenttrace serve``'s API and safety rules, on real sessions in real files (Starlette's
TestClient), and ``agenttrace tree --follow``. The page in a browser: tests/test_serve_browser.py.

The running session is the scripted agent of tests/live_agent.py: its Worker sub-agent waits,
between its two LLM attempts, in a tool call, for a gate the test opens once it has looked at the
files. Calls in flight: tests/test_inflight.py."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from starlette.testclient import TestClient

import agenttrace
from agenttrace.views.serve.app import CONTENT_SECURITY_POLICY, Token, create_app

from . import live_agent
from .conftest import Traced
from .helpers import ROOT, child_env

TOKEN = "test-token-of-this-server"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


def _client(sessions: Path) -> TestClient:
    return TestClient(create_app(sessions, TOKEN), base_url="http://127.0.0.1")


def _node(runs: list[dict[str, Any]], path: str) -> dict[str, Any]:
    """The node labelled ``path`` in the first run's tree."""
    stack: list[dict[str, Any]] = [runs[0]]
    while stack:
        node = stack.pop()
        if node.get("path") == path:
            return node
        for turn in node.get("turns") or []:
            stack.append(turn)
        for op in node.get("ops") or []:
            stack.append(op)
        stack.extend(node.get("childSessions") or [])
        if isinstance(node.get("childSession"), dict):
            stack.append(node["childSession"])
    raise AssertionError(f"no node {path}")


def _tokens(op: dict[str, Any]) -> tuple[int, int]:
    tokens = op["accounting"][-1]["tokens"]
    return tokens["inputTokens"], tokens["outputTokens"]


def test_the_tree_shows_a_running_sub_agent_then_its_final_tokens(traced: Traced) -> None:
    sessions = traced.handle.settings.sessions_dir
    session_id = agenttrace.current_session().session_id
    client = _client(sessions)
    seen: list[dict[str, Any]] = []

    def look() -> None:  # the Worker runs: one attempt ended, the second not begun
        response = client.get(f"/api/runs/{session_id}/tree", headers=BEARER)
        assert response.status_code == 200, response.text
        seen.append(response.json())

    live_agent.run(look)
    (running,) = seen
    assert running["status"] == "running"
    worker = _node(running["tree"], "1.2:1")
    assert worker["agentName"] == "Worker"
    assert worker.get("endedAt") is None  # under its tool call while it still runs
    delegate = _node(running["tree"], "1.2")
    assert delegate.get("endedAt") is None and delegate["kind"] == "session"
    assert delegate["name"] == "delegate"  # from its journal's intent, before it ends
    blocking = _node(running["tree"], live_agent.BLOCKING_CALL)
    assert (blocking["kind"], blocking["name"], blocking.get("endedAt")) == (
        "tool",
        "read_pages",
        None,
    )
    assert [step["path"] for step in running["runningSteps"]] == ["1.2", live_agent.BLOCKING_CALL]
    assert _tokens(_node(running["tree"], "1.2.1.1")) == live_agent.WORKER_TOKENS[0]
    assert {entry["path"] for entry in running["accounting"]} == {"1.1", "1.2.1.1"}
    assert "agent_002" in running["conversations"]  # the Worker's transcript
    assert isinstance(running["now"], int)

    traced.handle.force_flush()
    ended = client.get(f"/api/runs/{session_id}/tree", headers=BEARER).json()
    assert ended["status"] == "ended"
    assert _tokens(_node(ended["tree"], "1.2.2.1")) == live_agent.WORKER_TOKENS[1]
    assert _node(ended["tree"], "1.2:1")["endedAt"] is not None
    assert _node(ended["tree"], live_agent.BLOCKING_CALL)["status"] == "ok"
    assert ended["runningSteps"] == []
    assert [m["content"] for m in ended["conversation"]][-1] == live_agent.HOSTILE

    listed = client.get("/api/runs", headers=BEARER).json()
    (row,) = listed["runs"]
    assert (row["session_id"], row["status"], row["live"], row["agents"]) == (
        session_id,
        "ended",
        False,
        2,
    )
    assert row["tokens"] == 11 + 3 + 30 + 7 + 40 + 9 + 12 + 5


def test_a_sub_agent_shows_from_its_first_event_before_any_op_ends(traced: Traced) -> None:
    """No op of the Worker has ended, so no ``op_accounted`` line places it: the event it
    logged in its own run does (``with_started_nodes``), and its tool call and turn run too."""
    sessions = traced.handle.settings.sessions_dir
    session = agenttrace.current_session()
    client = _client(sessions)
    seen: list[dict[str, Any]] = []
    drawn: list[str] = []

    @agenttrace.agent("Worker")
    def worker() -> str:
        heard = {"role": "user", "content": "Count the pages."}
        session.log_transcript_entry(session.agent_named("Worker").agent_id, heard)
        seen.append(client.get(f"/api/runs/{session.session_id}/tree", headers=BEARER).json())
        drawn.extend(_follow_lines(sessions, session.session_id))
        return "12"

    @agenttrace.tool
    def delegate() -> str:
        return worker()

    @agenttrace.agent("Boss")
    def boss() -> str:
        return delegate()

    boss()
    (running,) = seen
    assert running["status"] == "running"
    (run,) = running["tree"]
    assert (run["agentName"], run.get("endedAt")) == ("Boss", None)
    op = _node(running["tree"], "1.1")
    assert (op["kind"], op.get("endedAt")) == ("session", None)
    child = _node(running["tree"], "1.1:1")
    assert (child["agentName"], child.get("endedAt"), child["turns"]) == ("Worker", None, [])
    assert isinstance(child["startedAt"], int) and child["startedAt"] >= run["startedAt"]
    assert running["accounting"] == []  # nothing has ended
    # tree --follow's drawing of the same moment: each running node says for how long.
    assert re.fullmatch(r"0 session Boss \[agent_001\] running for \d+s", drawn[1].strip(" └├│─"))
    assert re.search(r"1\.1:1 session Worker \[agent_002\] running for \d+s$", drawn[-1])

    traced.handle.force_flush()  # the run ended: the session file's tree, nothing added
    ended = client.get(f"/api/runs/{session.session_id}/tree", headers=BEARER).json()
    assert ended["status"] == "ended"
    assert _node(ended["tree"], "1.1")["name"] == "delegate"
    assert _node(ended["tree"], "1.1:1")["endedAt"] is not None


@contextlib.contextmanager
def _served(sessions: Path) -> Iterator[str]:
    """The app on a real port of 127.0.0.1 (uvicorn in a thread); yields its base URL."""
    import uvicorn

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    config = uvicorn.Config(create_app(sessions, TOKEN), log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(60)
        listener.close()


def _trees(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """The documents of the ``tree`` events of a server-sent event stream, as they come."""
    event = None
    for line in lines:
        if line.startswith("event:"):
            event = line.partition(":")[2].strip()
        elif line.startswith("data:") and event == "tree":
            yield json.loads(line.partition(":")[2])
        elif not line:
            event = None


def test_the_event_stream_sends_the_tree_again_as_the_files_change(traced: Traced) -> None:
    """Over real HTTP: the first event is the running tree; once the run has ended and its
    files are written, an event brings the ended one (read with a generous deadline)."""
    sessions = traced.handle.settings.sessions_dir
    session_id = agenttrace.current_session().session_id
    with _served(sessions) as base, httpx.Client(timeout=480) as http:
        opened: list[Any] = []

        def look() -> None:  # the Worker runs: connect, and read the first tree
            response = http.send(
                http.build_request("GET", f"{base}/api/runs/{session_id}/events", headers=BEARER),
                stream=True,
            )
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            trees = _trees(response.iter_lines())
            first = next(trees)
            assert first["status"] == "running"
            assert _node(first["tree"], "1.2:1").get("endedAt") is None
            opened.extend((response, trees))

        live_agent.run(look)
        traced.handle.force_flush()
        response, trees = opened
        try:
            for document in trees:
                if document["status"] == "ended":
                    break
            assert _tokens(_node(document["tree"], "1.2.2.1")) == live_agent.WORKER_TOKENS[1]
        finally:
            response.close()


def _follow_lines(sessions: Path, session_id: str) -> list[str]:
    """``tree --follow``'s drawing of the session now, as plain lines."""
    from rich.console import Console

    from agenttrace.views.live import read_live
    from agenttrace.views.tree import optree_tree

    live = read_live(sessions, session_id)
    assert live.running
    buffer = io.StringIO()
    console = Console(file=buffer, width=200, color_system=None)
    console.print(optree_tree(live.loaded.runs, running_at=live.read_at_ms), markup=False)
    return buffer.getvalue().splitlines()


@pytest.fixture
def ended_session(traced: Traced) -> tuple[Path, str]:
    live_agent.run(lambda: None)
    traced.handle.force_flush()
    return traced.handle.settings.sessions_dir, agenttrace.current_session().session_id


def test_every_request_without_the_token_gets_401(ended_session: tuple[Path, str]) -> None:
    sessions, session_id = ended_session
    client = _client(sessions)
    paths = (
        "/",
        f"/session/{session_id}",
        "/static/page.js",
        "/static/live.js",
        "/api/runs",
        f"/api/runs/{session_id}/tree",
        f"/api/runs/{session_id}/events",
    )
    for path in paths:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            response = client.get(path, headers=headers)
            assert response.status_code == 401, (path, headers)
            assert TOKEN not in response.text
            assert response.headers["www-authenticate"].startswith("Bearer")
        response = client.get(path, params={"token": "wrong"}, follow_redirects=False)
        assert response.status_code == 401
    assert client.get("/api/runs", headers=BEARER).status_code == 200


def test_the_link_with_the_token_sets_a_cookie_and_drops_it_from_the_url(
    ended_session: tuple[Path, str],
) -> None:
    sessions, session_id = ended_session
    client = _client(sessions)
    response = client.get(f"/session/{session_id}?token={TOKEN}", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == f"/session/{session_id}"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{Token(TOKEN).cookie}={TOKEN}")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert _location(sessions, "//evil.example/x") == "/evil.example/x?a=1"  # not that host
    page = client.get(f"/session/{session_id}")  # the client keeps the cookie
    assert page.status_code == 200
    assert '<script src="/static/page.js"></script>' in page.text
    assert client.get(f"/api/runs/{session_id}/tree").status_code == 200


def _location(sessions: Path, path: str) -> str:
    """Where the app sends a request for ``path`` with the token and ``a=1`` in its query (the
    path as a browser may send it, which an HTTP client would take for a host)."""
    app = create_app(sessions, TOKEN)
    sent: list[dict[str, Any]] = []
    scope = {
        "type": "http",
        "method": "GET",
        "path": path,
        "raw_path": path.encode(),
        "query_string": f"token={TOKEN}&a=1".encode(),
        "headers": [],
        "scheme": "http",
        "server": ("127.0.0.1", 8377),
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    anyio.run(app, scope, receive, send)
    headers = dict(sent[0]["headers"])
    assert sent[0]["status"] == 303
    return str(headers[b"location"].decode())


def test_no_request_reads_outside_the_sessions_directory(
    ended_session: tuple[Path, str], tmp_path: Path
) -> None:
    sessions, session_id = ended_session
    outside = tmp_path / "outside"
    outside.mkdir()
    stream = (sessions / f"{session_id}.events.jsonl").read_text()
    (outside / "secret.events.jsonl").write_text(stream)
    client = _client(sessions)
    for reference in ("../outside/secret", "..%2Foutside%2Fsecret", "%2Fetc%2Fpasswd", "..", "a b"):
        response = client.get(f"/api/runs/{reference}/tree", headers=BEARER)
        assert response.status_code == 404, reference
        assert "outside" not in response.text or "not a session id" in response.text
    for name in ("../app.py", "page.html", "..%2F__init__.py", "index.html"):
        assert client.get(f"/static/{name}", headers=BEARER).status_code == 404, name
    missing = client.get("/api/runs/0123456789abcdef/tree", headers=BEARER)
    assert missing.status_code == 404
    assert missing.json()["error"].startswith("no session 0123456789abcdef")


def test_content_is_json_text_and_pages_forbid_inline_script(
    ended_session: tuple[Path, str],
) -> None:
    sessions, session_id = ended_session
    client = _client(sessions)
    tree = client.get(f"/api/runs/{session_id}/tree", headers=BEARER)
    assert tree.headers["content-type"] == "application/json"
    assert "<script>" not in tree.text and "<img" not in tree.text  # \u003c in the JSON
    assert tree.json()["conversation"][-1]["content"] == live_agent.HOSTILE  # as said
    for path in ("/", f"/session/{session_id}", "/static/live.js", "/api/runs"):
        response = client.get(path, headers=BEARER)
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert response.headers["x-content-type-options"] == "nosniff"
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY
    assert "unsafe-inline" not in CONTENT_SECURITY_POLICY
    for page in ("/", f"/session/{session_id}"):
        text = client.get(page, headers=BEARER).text
        assert "<script>" not in text and "<style>" not in text  # only src= and href= files
        assert not re.search(r"\son[a-z]+=", text)  # no inline handlers either


@pytest.mark.parametrize("release", ["first-b85ec2f", "previous-619d4d5"])
@pytest.mark.parametrize("scenario", ["cafe", "features"])
def test_sessions_of_earlier_releases_are_served(
    release: str, scenario: str, tmp_path: Path
) -> None:
    from agenttrace.formats.session.fullest import load_fullest

    sessions = tmp_path / "sessions"
    sessions.mkdir()
    source = ROOT / "tests" / "data" / "releases" / release / scenario
    for file in source.glob("*.events.jsonl"):
        shutil.copy2(file, sessions / file.name)
    for file in source.glob("*.json.gz"):
        shutil.copy2(file, sessions / file.name)
        session_id = file.name.removesuffix(".json.gz")
    client = _client(sessions)
    response = client.get(f"/api/runs/{session_id}/tree", headers=BEARER)
    assert response.status_code == 200, response.text
    document = response.json()
    # The features scenario's last run fails on purpose: its session failed, not ended.
    assert document["status"] == ("failed" if scenario == "features" else "ended")
    expected = load_fullest(sessions / f"{session_id}.json.gz")
    assert [run["path"] for run in document["tree"]] == ["0"] * len(expected.runs)
    assert len(document["accounting"]) == sum(
        1 for line in (source / "accounting.jsonl").read_text().splitlines() if line.strip()
    )
    (row,) = client.get("/api/runs", headers=BEARER).json()["runs"]
    assert row["status"] == document["status"] and row["tokens"] > 0


def test_a_damaged_session_file_is_one_line(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    (sessions / "broken.json.gz").write_bytes(b"\x1f\x8b not gzip at all")
    client = _client(sessions)
    response = client.get("/api/runs/broken/tree", headers=BEARER)
    assert response.status_code == 422
    assert "broken.json.gz" in response.json()["error"]
    (row,) = client.get("/api/runs", headers=BEARER).json()["runs"]
    assert row["status"] == "damaged"


def test_tree_follow_draws_the_tree_until_the_session_ends(tmp_path: Path) -> None:
    """A scripted agent in a process of its own, followed by ``tree --follow`` in another;
    the gate opens once the follower has started, and the follower exits when the run ends."""
    sessions, gate = tmp_path / "sessions", tmp_path / "gate"
    env = child_env(PYTHONPATH=str(ROOT))
    agent = subprocess.Popen(
        [sys.executable, "-m", "tests.live_agent", str(sessions), str(gate)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert agent.stdout is not None
        session_id = agent.stdout.readline().strip()
        stream = sessions / f"{session_id}.events.jsonl"
        _wait_for_line(stream, '"path": "1.2.1.1"')  # the Worker's first attempt ended
        follower = subprocess.Popen(
            [sys.executable, "-m", "agenttrace.cli", "tree", "--follow", session_id],
            cwd=tmp_path,
            env={**env, "AGENTTRACE_SESSIONS_DIR": str(sessions), "COLUMNS": "200"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        gate.touch()
        out, err = follower.communicate(timeout=480)
        assert agent.wait(timeout=480) == 0
    finally:
        agent.kill()
    assert follower.returncode == 0, err
    assert "session Worker" in out and "1.2:1" in out
    assert "1.2.2.1 llm gpt-4o-mini ok" in out and "in 40 out 9" in out
    assert out.rstrip().endswith(f"session {session_id}: ended")


def _wait_for_line(path: Path, text: str) -> None:
    """Until ``path`` holds ``text`` (written by another process; a generous deadline)."""
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never held {text}")


def test_serve_without_the_extra_names_it(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "for name in ('starlette', 'uvicorn', 'sse_starlette'):\n"
        "    sys.modules[name] = None  # how Python marks a module as missing\n"
        "from agenttrace.cli import main\n"
        "main(['serve'])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=child_env(PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert result.returncode == 2
    assert result.stderr == (
        "agenttrace: error: `agenttrace serve` needs starlette, uvicorn, sse_starlette: "
        "pip install 'starlette>=0.41,<2' 'uvicorn>=0.30,<1' 'sse-starlette>=2.1,<4' "
        "(the [serve] extra)\n"
    )


def test_serve_takes_its_token_from_the_environment(tmp_path: Path) -> None:
    """The command as a user starts it: loopback, the token of AGENTTRACE_SERVE_TOKEN in the
    link it prints, 401 without it."""
    env = child_env(PYTHONPATH=str(ROOT), AGENTTRACE_SERVE_TOKEN=TOKEN)
    server = subprocess.Popen(
        [sys.executable, "-m", "agenttrace.cli", "serve", "--port", "0"],
        cwd=tmp_path,
        env={**env, "AGENTTRACE_SESSIONS_DIR": str(tmp_path / "sessions")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        assert server.stdout.readline() == f"agenttrace serve: sessions in {tmp_path}/sessions\n"
        link = server.stdout.readline().strip()
        match = re.fullmatch(rf"open (http://127\.0\.0\.1:\d+)/\?token={TOKEN}", link)
        assert match, link
        with httpx.Client(timeout=480) as http:
            assert http.get(f"{match[1]}/api/runs").status_code == 401
            listed = http.get(f"{match[1]}/api/runs", headers=BEARER)
            assert listed.status_code == 200 and listed.json()["runs"] == []
    finally:
        server.terminate()
        _, err = server.communicate(timeout=480)
    assert "Traceback" not in err
