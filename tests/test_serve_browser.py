"""``agenttrace serve`` in a real browser, following an agent that runs in another process.

The scripted agent (tests/live_agent.py) runs in a process of its own; its Worker sub-agent
calls a tool that blocks until a gate file exists, between its two LLM attempts. ``agenttrace
serve`` runs in a third process, and headless Chromium (Debian's package) opens the session's
page by the link it printed. The page must show the Worker under its tool call while it waits,
and the blocking call itself (it logged nothing but its journal's intent) with how long it has
run, counting on in the page between the server's updates; then the test opens the gate and the
page must show the call ended and the Worker's final tokens, without reloading. Everything waits
on a condition with a generous deadline, never on a duration.

Screenshots of the tree (Worker running, its call in flight) and of the dialog (the hostile
reply as text) are kept in tests/artifacts/ (the README links the copies in docs/screenshots/).
"""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from . import live_agent
from .chromium import Chromium
from .helpers import ROOT, child_env

ARTIFACTS = ROOT / "tests" / "artifacts"
DEADLINE_S = 60.0


def _wait_for_line(path: Path, text: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not (path.exists() and text in path.read_text()):
        assert time.monotonic() < deadline, f"{path} never held {text}"
        time.sleep(0.05)


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=480) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    return width, height


_CALL = f"document.querySelector('li[data-path=\"{live_agent.BLOCKING_CALL}\"]')"
"""The Worker's blocking tool call's node in the page."""


def _check_the_call_in_flight(browser: Chromium, base: str, token: str, session_id: str) -> None:
    """The blocking call is a running tool node under the Worker's turn: its name, its hostile
    argument as text, and a time that counts on in the page while the server sends nothing."""
    browser.wait_for(f"{_CALL} !== null", "the call in flight")
    summary = f"{_CALL}.querySelector(':scope > details > summary')"
    assert browser.evaluate(f"{_CALL}.parentNode.closest('li').dataset.path") == "1.2.1"
    assert browser.evaluate(f"{summary}.querySelector('.kind').textContent") == "tool"
    assert browser.evaluate(f"{summary}.querySelector('.name').textContent") == "read_pages"
    assert browser.evaluate(f"{summary}.querySelector('.status').textContent") == "running"
    argument = browser.evaluate(f"{_CALL}.querySelector('.body').textContent")
    assert live_agent.TITLE in argument.replace('\\"', '"')  # shown as the JSON it is
    assert browser.evaluate(f"{_CALL}.querySelectorAll('img, script').length") == 0
    # Its start is the one the API gives: the time the page shows runs from there.
    status, body = _get(f"{base}/api/runs/{session_id}/tree", {"Authorization": f"Bearer {token}"})
    assert status == 200
    (step,) = [s for s in json.loads(body)["runningSteps"] if s["name"] == "read_pages"]
    since = f"{summary}.querySelector('.since')"
    assert browser.evaluate(f"{since}.dataset.since") == str(step["startedAt"])
    # It counts on between updates (the server pushes only changes): the text changes while
    # no update came. A late write of the agent's may bring one: then look again.
    for _ in range(10):
        before = browser.evaluate(
            f"[{since}.textContent, document.documentElement.dataset.updates]"
        )
        assert re.fullmatch(r"for \d+(\.\d+)? m?s", before[0]), before
        after = browser.wait_for(
            f"(function () {{ var now = [{since}.textContent, "
            "document.documentElement.dataset.updates]; "
            f"return now[0] !== {json.dumps(before[0])} || now[1] !== {json.dumps(before[1])} "
            "? now : null; })()",
            "the call's time counting on",
        )
        if after[1] == before[1]:
            assert _seconds(after[0]) > _seconds(before[0]), (before, after)
            return
    raise AssertionError("the page was updated at each look: no counting seen between updates")


def _seconds(since: str) -> float:
    """``for 2.31 s`` or ``for 950 ms`` in seconds."""
    number, unit = since.split()[1:]
    return float(number) / (1000 if unit == "ms" else 1)


@pytest.mark.e2e
def test_the_page_follows_a_running_agent_in_chromium(browser: Chromium, tmp_path: Path) -> None:
    sessions, gate = tmp_path / "sessions", tmp_path / "gate"
    env = child_env(PYTHONPATH=str(ROOT))
    agent = subprocess.Popen(
        [sys.executable, "-m", "tests.live_agent", str(sessions), str(gate)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    server = subprocess.Popen(
        [
            sys.executable,
            *("-m", "agenttrace.cli", "serve", "--port", "0"),
            *("--sessions-dir", str(sessions)),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert agent.stdout is not None and server.stdout is not None
        session_id = agent.stdout.readline().strip()
        assert server.stdout.readline().startswith("agenttrace serve: sessions in ")
        link = server.stdout.readline().strip()
        match = re.fullmatch(r"open (http://127\.0\.0\.1:\d+)/\?token=([A-Za-z0-9_-]{20,})", link)
        assert match, link
        base, token = match.groups()
        stream = sessions / f"{session_id}.events.jsonl"
        _wait_for_line(stream, '"path": "1.2.1.1"')
        _wait_for_line(stream, f'"step": "{live_agent.BLOCKING_CALL}"')  # its intent

        # Nothing without the token: pages, scripts, the API.
        for path in ("/", f"/session/{session_id}", "/static/page.js", "/api/runs"):
            status, body = _get(base + path)
            assert status == 401, path
            assert token.encode() not in body
        status, body = _get(f"{base}/api/runs", {"Authorization": f"Bearer {token}"})
        assert status == 200 and json.loads(body)["runs"][0]["live"] is True

        # The list: the session, marked live.
        browser.open(f"{base}/?token={token}")
        browser.wait_for(
            f"document.querySelector('tr.live[data-session=\"{session_id}\"]') !== null",
            "the running session in the list",
        )

        # The session's page while the Worker waits: its node under the tool call, running.
        browser.open(f"{base}/session/{session_id}")
        browser.wait_for(
            "document.documentElement.getAttribute('data-status') === 'running' && "
            "document.querySelector('li[data-path=\"1.2:1\"]') !== null",
            "the running Worker",
        )
        assert "?token" not in browser.evaluate("window.location.href")
        worker = "document.querySelector('li[data-path=\"1.2:1\"]')"
        assert browser.evaluate(f"{worker}.parentNode.closest('li').dataset.path") == "1.2"
        assert browser.evaluate(f"{worker}.querySelector('.name').textContent") == "Worker"
        assert browser.evaluate(f"{worker}.querySelector('.status').textContent") == "running"
        assert browser.evaluate(f"{worker}.querySelector('.since') !== null")
        first = "document.querySelector('li[data-path=\"1.2.1.1\"] .metrics').textContent"
        assert "in 30 \u00b7 out 7" in browser.evaluate(first)
        _check_the_call_in_flight(browser, base, token, session_id)
        updates = browser.evaluate("document.documentElement.dataset.updates")
        ARTIFACTS.mkdir(exist_ok=True)
        shot = browser.screenshot(ARTIFACTS / "serve-tree.png")
        assert _png_size(shot) == (1280, 900)
        assert len(shot) > 40_000, len(shot)  # an empty page of that size is a few kB

        # The Worker goes on and ends: the same page (never reloaded) shows its final tokens.
        browser.evaluate("window.stillThisPage = true")
        gate.touch()
        browser.wait_for(
            "document.documentElement.getAttribute('data-status') === 'ended' && "
            "document.querySelector('li[data-path=\"1.2.2.1\"]') !== null",
            "the ended session with the Worker's second attempt",
        )
        assert browser.evaluate("window.stillThisPage") is True
        assert int(browser.evaluate("document.documentElement.dataset.updates")) > int(updates)
        last = "document.querySelector('li[data-path=\"1.2.2.1\"] .metrics').textContent"
        assert "in 40 \u00b7 out 9" in browser.evaluate(last)
        assert browser.evaluate(f"{worker}.querySelector('.status').textContent") == "ok"
        call = f"{_CALL}.querySelector(':scope > details > summary')"
        assert browser.evaluate(f"{call}.querySelector('.status').textContent") == "ok"
        assert browser.evaluate(f"{_CALL}.querySelector('.since')") is None
        assert agent.wait(timeout=DEADLINE_S) == 0

        # The hostile reply is text in the dialog: no element made of it, no script run.
        dialog = browser.evaluate("document.getElementById('dialog-list').textContent")
        assert live_agent.HOSTILE in dialog
        assert browser.evaluate("document.querySelectorAll('main img, main script').length") == 0
        assert browser.evaluate("document.documentElement.hasAttribute('data-pwned')") is False
        assert browser.evaluate("document.documentElement.dataset.errors") == ""
        browser.evaluate("document.getElementById('dialog').scrollIntoView()")
        _png_size(browser.screenshot(ARTIFACTS / "serve-dialog.png"))
        refused = [line for line in browser.console if re.search(r"Refused|uncaught", line)]
        assert not refused, refused
    finally:
        agent.kill()
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        agent.wait()
