"""The LLM calls a kill cut short are on the bill (issue 31 item 4): the process that takes a
killed session over writes one ``interrupted`` line to the billing ledger (and its
``op_accounted`` line to the event stream) for each LLM attempt the kill left in flight, once,
however many processes resume it after; ``stats`` counts it as interrupted, not as paid.

A real agent process (tests/interrupted_billing_child.py) asks the real scripted model server
(tests/llm_server.py), which holds its request until the test has SIGKILLed it.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agenttrace.formats.session.files import read_session_file
from agenttrace.model.journal import Journal

from .fork_server import Forked, Forks
from .helpers import ROOT, child_env
from .llm_server import LLMServer, Reply
from .test_cli import agenttrace as agenttrace_command
from .test_cli import ok

MODEL = "openai/gpt-4o-mini"


def _env() -> dict[str, str]:
    return child_env(PYTHONPATH=str(ROOT), AGENTTRACE_RAISE_INTERNAL_ERRORS="1")


@pytest.fixture(scope="module")
def forks() -> Iterator[Forks]:
    """The agent's processes (two to four a test), forked from one interpreter that imported
    what tests/interrupted_billing_child.py imports, in its order: a new interpreter spends
    seconds on litellm's import alone."""
    preload = ["litellm", "agenttrace", "agenttrace.formats.session.files"]
    started = Forks(preload, _env(), ROOT)
    yield started
    started.close()


def _child(forks: Forks, tmp_path: Path, llm: LLMServer, mode: str) -> Forked:
    """``python -m tests.interrupted_billing_child`` in ``mode`` (forked), started."""
    arguments = [str(tmp_path / "sessions"), str(_ledger(tmp_path)), llm.api_base, mode]
    out, err = tmp_path / f"{mode}-stdout.txt", tmp_path / f"{mode}-stderr.txt"
    return forks.popen("tests.interrupted_billing_child", arguments, _env(), ROOT, out, err)


def _finish(child: Forked) -> str:
    out, err = child.communicate(timeout=480)
    assert child.returncode == 0, err
    assert "Traceback" not in err, err
    return out


def _ledger(tmp_path: Path) -> Path:
    return tmp_path / "accounting.jsonl"


def _ledger_lines(tmp_path: Path) -> list[dict[str, Any]]:
    ledger = _ledger(tmp_path)
    text = ledger.read_text() if ledger.exists() else ""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _stream(tmp_path: Path) -> Path:
    (stream,) = (tmp_path / "sessions").glob("*.events.jsonl")
    return stream


def _killed_in_flight(forks: Forks, tmp_path: Path, llm: LLMServer) -> None:
    """Run the agent and SIGKILL it while the server holds its request."""
    received, gate = threading.Event(), threading.Event()
    llm.reset(Reply(received=received, gate=gate))
    child = _child(forks, tmp_path, llm, "run")
    try:
        assert received.wait(60), "the agent's request never reached the server"
        os.kill(child.pid, signal.SIGKILL)
        child.communicate(timeout=480)
    finally:
        gate.set()  # the server's thread answers a client that is gone
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL


def _accounted(tmp_path: Path) -> list[dict[str, Any]]:
    """The stream's ``op_accounted`` lines."""
    return [
        json.loads(text)
        for text in _stream(tmp_path).read_text().splitlines()
        if text.startswith('{"event_type": "op_accounted"')
    ]


def _interrupted(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line["type"] == "llm" and line["status"] == "interrupted"]


def test_a_call_killed_in_flight_is_billed_once_as_interrupted(
    tmp_path: Path, llm: LLMServer, forks: Forks
) -> None:
    _killed_in_flight(forks, tmp_path, llm)
    assert [line for line in _ledger_lines(tmp_path) if line["type"] == "llm"] == []
    journal = Journal(read_session_file(_stream(tmp_path)).journal)
    (cut,) = [s for s in journal.steps.values() if s.kind == "llm" and s.state == "intent"]

    # A second process takes the session over: the call it was killed in is on the bill.
    _finish(_child(forks, tmp_path, llm, "take-over"))
    (line,) = _interrupted(_ledger_lines(tmp_path))
    run, label, attempt = cut.key
    assert (line["originTxnId"], line["path"], line["attempt"]) == (run, label, attempt)
    assert line["model"] == cut.name == MODEL.split("/")[1]  # as an ok line names it
    assert line["agentId"] == cut.agent_id
    assert line["providerMayHaveBilled"] is True
    assert line["costUsd"] is None  # unknown: never a number made up
    assert line["tokens"]["inputTokens"] is None and line["tokens"]["outputTokens"] is None
    assert line["latency"] >= 0 and line["errorType"] == "InterruptedLLMCall"
    accounted = _accounted(tmp_path)
    assert [event["accounting"] for event in accounted] == [line]  # the very same entry

    # A third process resumes it and runs the agent again (its run re-entered: the model is
    # asked again, and answers): the interrupted call is not billed twice.
    llm.reset()
    out = _finish(_child(forks, tmp_path, llm, "resume"))
    assert json.loads(out)["answer"] == "Hello!"
    llm_lines = [entry for entry in _ledger_lines(tmp_path) if entry["type"] == "llm"]
    assert _interrupted(llm_lines) == [line]
    assert [entry["status"] for entry in llm_lines] == ["interrupted", "ok"]
    assert {entry["model"] for entry in llm_lines} == {line["model"]}
    assert llm.answered == 1

    # A fourth takes it over again: nothing more is owed.
    _finish(_child(forks, tmp_path, llm, "take-over"))
    assert len(_interrupted(_ledger_lines(tmp_path))) == 1

    # stats counts it as an interrupted call, not as paid tokens or an unknown cost.
    stream = str(_stream(tmp_path))
    totals = json.loads(ok(agenttrace_command(tmp_path, "stats", stream, "--json")))["total"]
    assert totals["llm_attempts_interrupted"] == 1
    assert totals["llm_attempts_ok"] == 1
    assert totals["llm_attempts_failed"] == 0
    assert totals["llm_attempts_cost_unknown"] == 0
    paid = [entry for entry in llm_lines if entry["status"] == "ok"]
    assert totals["input_tokens"] == sum(entry["tokens"]["inputTokens"] for entry in paid)
    table = ok(agenttrace_command(tmp_path, "stats", stream))
    assert "llm interrupted" in table
    # list derives its totals from the same account.
    sessions = str(tmp_path / "sessions")
    (row,) = json.loads(
        ok(agenttrace_command(tmp_path, "list", "--sessions-dir", sessions, "--json"))
    )
    assert row["cost_usd"] == totals["cost_usd"]
    tree = ok(agenttrace_command(tmp_path, "tree", stream))
    assert "may have billed it" in tree


def test_a_takeover_killed_between_the_ledger_and_the_stream_bills_once(
    tmp_path: Path, llm: LLMServer, forks: Forks
) -> None:
    """The ledger's line is written first: a takeover killed before the stream's line leaves
    it in the ledger alone, and the next takeover finds it there and writes the stream's only."""
    _killed_in_flight(forks, tmp_path, llm)
    killed = _child(forks, tmp_path, llm, "take-over-killed")
    killed.communicate(timeout=480)
    assert killed.returncode == -signal.SIGKILL
    (line,) = _interrupted(_ledger_lines(tmp_path))
    assert _accounted(tmp_path) == []
    _finish(_child(forks, tmp_path, llm, "take-over"))
    assert _interrupted(_ledger_lines(tmp_path)) == [line]
    (event,) = _accounted(tmp_path)
    assert {**event["accounting"], "timestamp": 0} == {**line, "timestamp": 0}


def test_a_call_billed_before_the_kill_is_not_billed_again(
    tmp_path: Path, llm: LLMServer, forks: Forks
) -> None:
    """Killed the moment its reply was back: the attempt was billed as it ended (its ledger
    and stream lines are written before it returns), though its journal ``done`` line, written
    after by agenttrace's background thread, may be lost. It owes no interrupted line."""
    llm.reset()
    killed = _child(forks, tmp_path, llm, "replied-killed")
    killed.communicate(timeout=480)
    assert killed.returncode == -signal.SIGKILL
    _finish(_child(forks, tmp_path, llm, "take-over"))
    lines = _ledger_lines(tmp_path)
    assert [entry["status"] for entry in lines if entry["type"] == "llm"] == ["ok"]


def test_a_session_with_no_call_in_flight_owes_nothing(
    tmp_path: Path, llm: LLMServer, forks: Forks
) -> None:
    """A run that ended: its resume writes no interrupted line."""
    llm.reset()
    _finish(_child(forks, tmp_path, llm, "run"))
    _finish(_child(forks, tmp_path, llm, "take-over"))
    lines = _ledger_lines(tmp_path)
    assert [entry["status"] for entry in lines if entry["type"] == "llm"] == ["ok"]


def test_a_call_killed_between_the_stream_and_the_ledger_is_billed_by_the_takeover(
    tmp_path: Path, llm: LLMServer, forks: Forks
) -> None:
    """Killed where its ended LLM call's ledger line would be written, its ``op_accounted`` line
    in the stream: the stream holds what it cost, the ledger not. The takeover appends it from
    the stream, once: a second takeover finds it there."""
    llm.reset()
    killed = _child(forks, tmp_path, llm, "billed-killed")
    killed.communicate(timeout=480)
    assert killed.returncode == -signal.SIGKILL
    (event,) = _accounted(tmp_path)
    assert [entry for entry in _ledger_lines(tmp_path) if entry["type"] == "llm"] == []
    _finish(_child(forks, tmp_path, llm, "take-over"))
    _finish(_child(forks, tmp_path, llm, "take-over"))
    billed = [entry for entry in _ledger_lines(tmp_path) if entry["type"] == "llm"]
    assert billed == [event["accounting"]]
