"""One account of a crash (issue 31 item 3): ``list``, ``serve``, ``tree``, ``stats``, the
exports and the billing ledger tell a session alike (agenttrace/views/account.py), live or dead.

Real child processes are SIGKILLed mid-call: the cafe demo inside its ``discuss`` tool, after a
session file was written mid-run (tests/crash_child.py, ``jill``), or before any session file
(``discuss``); the shop agent inside its ``charge`` after the payment server charged
(tests/journal_child.py). Each view is asked as a user asks it (the ``agenttrace`` command) or,
for ``serve``, as its page asks (``GET /api/runs``, ``GET /api/runs/ID/tree``).
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from msgspec import to_builtins
from starlette.testclient import TestClient

import agenttrace
from agenttrace._internal.times import event_ts
from agenttrace.model import journal_lines as jl
from agenttrace.views import listing
from agenttrace.views.account import IN_DOUBT
from agenttrace.views.live import read_live, session_document
from agenttrace.views.serve.app import create_app

from . import live_agent
from .conftest import Traced
from .fork_server import Forks
from .helpers import run_journal_child
from .payment_server import PaymentServer
from .test_cli import forked_agenttrace, ok
from .test_crash import (  # noqa: F401
    Crashed,
    Servers,
    agenttrace_cli,
    crash,
    ledger_lines,
    model,
    servers,
)

TOKEN = "test-token-of-this-server"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


def _walk(nodes: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every node under ``nodes`` (runs, turns, ops, sub-agent runs)."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        yield node
        for key in ("turns", "ops", "childSessions"):
            stack.extend(node.get(key) or [])
        if isinstance(node.get("childSession"), dict):
            stack.append(node["childSession"])


def _node(runs: list[dict[str, Any]], path: str) -> dict[str, Any]:
    (found,) = [node for node in _walk(runs) if node.get("path") == path and "kind" in node]
    return found


def _cli(crashed: Crashed, *args: str) -> str:
    result = agenttrace_cli(crashed, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _views(crashed: Crashed) -> dict[str, Any]:
    """What each view says of the killed session."""
    session_id = crashed.stream.name.removesuffix(".events.jsonl")
    (row,) = json.loads(_cli(crashed, "list", "--json", "--sessions-dir", str(crashed.sessions)))
    client = TestClient(create_app(crashed.sessions, TOKEN), base_url="http://127.0.0.1")
    (served,) = client.get("/api/runs", headers=BEARER).json()["runs"]
    page = client.get(f"/api/runs/{session_id}/tree", headers=BEARER).json()
    return {
        "row": row,
        "served": served,
        "page": page,
        "stats": json.loads(_cli(crashed, "stats", "--json", str(crashed.stream))),
        "tree": _cli(crashed, "tree", str(crashed.stream)),
        "otlp": _cli(crashed, "export", str(crashed.stream), "--format", "otlp-json"),
        "billed": ledger_lines(crashed),
    }


def _agree_on_the_totals(views: dict[str, Any]) -> None:
    """Runs, tokens and cost: the same in ``list``, the serve index, ``stats`` and the ledger
    (every attempt that reached the model billed as it ended)."""
    row, served, totals = views["row"], views["served"], views["stats"]
    llm = [line for line in views["billed"] if line["type"] == "llm"]
    assert row["runs"] == served["runs"] == totals["runs"] == 1
    for key, field in (("input_tokens", "inputTokens"), ("output_tokens", "outputTokens")):
        billed = sum(line["tokens"][field] for line in llm)
        assert row[key] == served[key] == totals["total"][key] == billed
    assert row["cost_usd"] == served["cost_usd"] == totals["total"]["cost_usd"]
    assert totals["total"]["cost_usd"] == pytest.approx(sum(line["costUsd"] for line in llm))
    assert totals["total"]["llm_attempts_ok"] == len(llm)


@pytest.mark.e2e
def test_every_view_tells_a_run_killed_in_a_sub_agent_call_alike(
    tmp_path: Path,
    model: Any,  # noqa: F811
    servers: Servers,  # noqa: F811
) -> None:
    crashed = crash(tmp_path, model, at="jill", servers=servers)  # a session file written mid-run
    views = _views(crashed)
    _agree_on_the_totals(views)
    page = views["page"]
    assert views["row"]["status"] == views["served"]["status"] == page["status"] == "interrupted"

    # The call the kill cut short: under its op, in doubt with its effect class, with the time
    # it had run, in the tree, the page and the export.
    discuss = _node(page["tree"], "3.2")
    assert discuss["name"] == "discuss" and discuss.get("endedAt") is None
    assert discuss["attributes"].get(IN_DOUBT) == "effect", (discuss, views["tree"])
    assert discuss["latencyMs"] > 0  # Jack and Jill answered inside it before the kill
    tree = views["tree"]
    assert re.search(r"^.*0 session Agent \[agent_001\] interrupted \d+ms$", tree, re.M), tree
    assert re.search(r"^.*3\.2 session discuss in doubt \(effect\) \d+ms$", tree, re.M), tree
    assert "in progress" not in tree
    spans = json.loads(views["otlp"])["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert any("discuss" in span["name"] for span in spans)
    doubts = agenttrace_cli(crashed, "doubts", "--json", str(crashed.stream))
    assert [(d["step"], d["effect"]) for d in json.loads(doubts.stdout)] == [("3.2", "effect")]

    # A turn runs only while an op of it runs: the root's first two turns and each sub-agent's
    # turn ended with their last op; only the turn holding the cut-short call did not.
    turns = [node for node in _walk(page["tree"]) if "index" in node and "ops" in node]
    unended = [turn["path"] for turn in turns if turn.get("endedAt") is None]
    assert unended == ["3"]

    # A run's wall time counts to its last record.
    (run,) = page["tree"]
    assert run["latencyMs"] > 0 and views["stats"]["wall_time_ms"] == run["latencyMs"]
    assert run["startedAt"] + run["latencyMs"] >= discuss["startedAt"] + discuss["latencyMs"]


@pytest.mark.e2e
def test_a_run_killed_before_any_session_file_is_interrupted_at_once(
    tmp_path: Path,
    model: Any,  # noqa: F811
    servers: Servers,  # noqa: F811
) -> None:
    # Killed as the root is about to run discuss, in a new interpreter: the process its journal
    # names is one that started as a user's does (a forked one gets its name from agenttrace's
    # at-fork handler); the views are forked.
    crashed = dataclasses.replace(crash(tmp_path, model), servers=servers)
    assert not list(crashed.sessions.glob("*.json.gz"))
    views = _views(crashed)
    # Its journal names the process: gone now, so the session is interrupted, not running for
    # the ten minutes after its last write.
    assert views["row"]["status"] == views["served"]["status"] == "interrupted"
    assert views["page"]["status"] == "interrupted"
    _agree_on_the_totals(views)
    assert views["stats"]["wall_time_ms"] > 0
    assert "interrupted" in views["tree"].splitlines()[1]


@pytest.fixture(scope="module")
def payments() -> Iterator[PaymentServer]:
    server = PaymentServer().start()
    yield server
    server.stop()


def _shop_killed_after_paying(
    tmp_path: Path, payments: PaymentServer, forks: Forks
) -> tuple[Path, Path]:
    """The shop's run killed inside ``charge`` once the payment server charged, then resumed
    (both forked from ``forks``): the re-entry refuses the call in doubt. Returns the stream
    and the ledger (the one the ``agenttrace`` command of tests/test_cli.py bills to)."""
    ledger = tmp_path / "accounting.jsonl"
    sessions = tmp_path / "sessions"
    env = {"AGENTTRACE_BILLING_FILE": str(ledger)}
    killed = run_journal_child(sessions, payments.url, "effect", "inside", forks=forks, **env)
    assert killed.returncode == -9, killed.stderr
    resumed = run_journal_child(
        sessions, payments.url, "effect", "inside", "resume", forks=forks, **env
    )
    assert json.loads(resumed.stdout.splitlines()[-1])["in_doubt"] == [["1.2", "charge"]]
    (stream,) = sessions.glob("*.events.jsonl")
    return stream, ledger


def _ledger(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


@pytest.mark.e2e
def test_the_ledger_and_every_view_say_what_resolve_decided(
    tmp_path: Path, payments: PaymentServer, journal_forks: Forks, cli_forks: Forks
) -> None:
    stream, ledger = _shop_killed_after_paying(tmp_path, payments, journal_forks)

    sessions = stream.parent
    charges = [line for line in _ledger(ledger) if line.get("command") == "charge"]
    assert [(line["status"], line.get("decision")) for line in charges] == [("failed", None)]
    (row,) = json.loads(
        ok(
            forked_agenttrace(
                cli_forks, tmp_path, "list", "--json", "--sessions-dir", str(sessions)
            )
        )
    )
    assert (row["status"], row["runs"]) == ("failed", 2)  # the re-entry failed: not "ended"

    result = tmp_path / "result.json"
    result.write_text(json.dumps(payments.charges[-1]["charge"]))
    ok(forked_agenttrace(cli_forks, tmp_path, "resolve", str(stream), "1.2", "--done", str(result)))

    charges = [line for line in _ledger(ledger) if line.get("command") == "charge"]
    assert [(line["status"], line.get("decision")) for line in charges] == [
        ("failed", None),  # the re-entry that refused it
        ("ok", "done"),  # what happened, as decided
    ]
    decided = charges[-1]
    assert decided["charactersOut"] == len(result.read_text())
    # The call is in the killed run's tree as decided, and counted as the ledger counts it.
    tree = ok(forked_agenttrace(cli_forks, tmp_path, "tree", str(stream)))
    first_run = tree.split("run 2:")[0]
    assert re.search(r"^.*1\.2 tool charge ok \d+ms", first_run, re.M), tree
    totals = json.loads(ok(forked_agenttrace(cli_forks, tmp_path, "stats", "--json", str(stream))))
    tools = [line for line in _ledger(ledger) if line["type"] == "tool"]
    assert totals["total"]["tool_calls"] == len(tools)
    assert totals["total"]["tool_calls_failed"] == sum(line["status"] == "failed" for line in tools)
    assert ok(forked_agenttrace(cli_forks, tmp_path, "doubts", str(stream))) == "no call in doubt\n"


@pytest.mark.e2e
@pytest.mark.parametrize("decision", ["--abandon", "--retry", "--not-applied"])
def test_the_ledger_says_a_call_was_abandoned_or_is_to_be_run_again(
    tmp_path: Path, payments: PaymentServer, journal_forks: Forks, cli_forks: Forks, decision: str
) -> None:
    stream, ledger = _shop_killed_after_paying(tmp_path, payments, journal_forks)
    ok(forked_agenttrace(cli_forks, tmp_path, "resolve", str(stream), "1.2", decision))
    last = _ledger(ledger)[-1]
    assert (last["command"], last["status"]) == ("charge", "failed")
    assert last["decision"] == decision.removeprefix("--").replace("-", "_")
    assert decision.removeprefix("--") in last["error"]


def test_a_turn_runs_only_while_an_op_of_it_runs(traced: Traced) -> None:
    """Live: while turn 2's tool runs, turn 1 (its LLM call and its tool ended) has ended."""
    sessions = traced.handle.settings.sessions_dir
    session_id = agenttrace.current_session().session_id
    seen: list[dict[str, Any]] = []

    @agenttrace.llm(model="openai/gpt-4o-mini")
    def chat(messages: list[dict[str, Any]]) -> dict[str, Any]:
        return live_agent._reply("Look it up.", (5, 2))

    @agenttrace.tool
    def search(query: str) -> str:
        return "tea"

    @agenttrace.tool
    def look() -> str:
        traced.handle.force_flush()  # turn 1's lines on disk, as the background writes them
        seen.append(session_document(read_live(sessions, session_id)))
        return "seen"

    @agenttrace.agent("Boss")
    def boss() -> str:
        chat([{"role": "user", "content": "Hi"}])
        search("tea")
        chat([{"role": "user", "content": "And?"}])
        return look()

    boss()
    (document,) = seen
    assert document["status"] == "running"
    first, second = _node_turns(document["tree"])
    assert first["endedAt"] is not None and second.get("endedAt") is None
    (step,) = document["runningSteps"]
    assert step["path"].startswith(second["path"] + ".")


def _node_turns(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    (run,) = runs
    turns: list[dict[str, Any]] = run["turns"]
    return turns


def test_list_reads_a_session_again_only_when_its_files_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``list`` (and the serve index, which lists every few seconds) keeps a session's row while
    its files keep their size and mtime; its state is decided each time: a process that dies
    writes nothing, and its session is interrupted at the next look."""
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        run = "0123456789abcdef"
        started = event_ts(time.time_ns())  # after the child started: the run is its
        created = {"message_id": "msg_001", "event_type": "agent_created", "agent_id": "agent_001"}
        begun = to_builtins(
            jl.run_line(
                run, 1, agent_id="agent_001", name="shop", messages=1, process="p1", pid=child.pid
            )
        )
        charge = to_builtins(
            jl.intent_line(
                (run, "1.1", 1),
                agent_id="agent_001",
                name="charge",
                effect="effect",
                request_fingerprint="sha256:" + "0" * 64,
            )
        )
        lines = [created, {**begun, "ts": started}, {**charge, "ts": started}]
        stream = sessions / f"{run}.events.jsonl"
        stream.write_text("".join(json.dumps(line) + "\n" for line in lines))

        reads: list[Path] = []
        real = listing.read_session_file

        def counted(path: Path, *args: Any, **kwargs: Any) -> Any:
            reads.append(path)
            return real(path, *args, **kwargs)

        monkeypatch.setattr(listing, "read_session_file", counted)
        (row,) = listing.list_sessions(sessions).rows
        assert (row.status, row.runs, reads) == ("running", 1, [stream])
        (row,) = listing.list_sessions(sessions).rows
        assert (row.status, reads) == ("running", [stream])  # not read again
        child.kill()
        child.wait(timeout=480)
        (row,) = listing.list_sessions(sessions).rows
        assert (row.status, reads) == ("interrupted", [stream])  # nothing was written
        with stream.open("a") as appended:  # a file that changes is read again
            appended.write(json.dumps({**created, "message_id": "msg_002"}) + "\n")
        (row,) = listing.list_sessions(sessions).rows
        assert (row.status, reads) == ("interrupted", [stream, stream])
    finally:
        child.kill()
        child.wait(timeout=480)
