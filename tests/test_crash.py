"""A crash loses nothing: the cafe demo SIGKILLed half-way (tests/crash_child.py), its files
read and resumed as a user would, with the ``agenttrace`` command.

The child is killed when the root agent is about to run ``discuss``: three LLM attempts and two
tool calls ended, the model's ``tool_calls`` for ``discuss`` are in the root's transcript with
no tool result, no run ended, so no session file was ever written. What must hold afterwards:

- every attempt that reached the model is billed in the ledger and accounted in the stream at
  once, not when the run ends: 3 after the kill, all of them after the resume, none twice;
- ``tree``, ``stats`` and the exports read the stream alone, the killed run rebuilt from it and
  marked interrupted;
- the resumed transcript answers every tool call it sends (a ``tool`` entry saying the call
  was interrupted), as OpenAI's and Anthropic's APIs require, and the stream records it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from examples.cafe import scripted_model
from examples.scripted_model import ScriptedModel

from .helpers import ROOT, child_env

pytestmark = pytest.mark.e2e


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with scripted_model() as server:
        yield server


@dataclass
class Crashed:
    """What the killed first run left."""

    sessions: Path
    ledger: Path
    stream: Path
    env: dict[str, str]


def crash(tmp_path: Path, model: ScriptedModel) -> Crashed:
    """The cafe's first run, SIGKILLed at ``discuss`` (see tests/crash_child.py)."""
    sessions = tmp_path / "sessions"
    ledger = tmp_path / "accounting.jsonl"
    env = child_env(
        CRASH_API_BASE=model.api_base,
        AGENTTRACE_BILLING_FILE=str(ledger),
        PYTHONPATH=str(ROOT),
    )
    child = subprocess.run(
        [sys.executable, "-m", "tests.crash_child", "first", str(sessions)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -9, child.stderr  # killed by SIGKILL, as a crash is
    assert child.stdout.splitlines() == ["killing"]
    (stream,) = sessions.glob("*.events.jsonl")
    return Crashed(sessions, ledger, stream, env)


def agenttrace_cli(crashed: Crashed, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agenttrace.cli", *args],
        env=crashed.env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def ledger_lines(crashed: Crashed) -> list[dict[str, Any]]:
    return [json.loads(line) for line in crashed.ledger.read_bytes().splitlines()]


def accounted(stream: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in stream.read_bytes().splitlines()]
    return [line for line in lines if line["event_type"] == "op_accounted"]


def test_a_killed_run_has_billed_and_streamed_every_op_that_ended(
    tmp_path: Path, model: ScriptedModel
) -> None:
    crashed = crash(tmp_path, model)
    assert len(model.requests) == 3
    assert not list(crashed.sessions.glob("*.json.gz"))  # no run ended: no session file
    billed = ledger_lines(crashed)
    assert [(line["type"], line["path"]) for line in billed] == [
        ("llm", "1.1"), ("tool", "1.2"), ("llm", "2.1"), ("tool", "2.2"), ("llm", "3.1"),
    ]  # fmt: skip
    # The stream has the same entries, each with its op's linkage.
    lines = accounted(crashed.stream)
    assert [line["accounting"] for line in lines] == billed
    assert all(line["trace_id"] and line["span_id"] and line["path"] for line in lines)
    assert all(line["accounting"]["tokens"]["inputTokens"] for line in lines[::2])
