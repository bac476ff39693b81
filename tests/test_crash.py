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

import dataclasses
import gzip
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

from .fork_server import Forks
from .helpers import ROOT, canonical_events, child_env, cli_fork_server

pytestmark = pytest.mark.e2e


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with scripted_model() as server:
        yield server


@dataclass(frozen=True)
class Servers:
    """Fork servers for the programs of a crash test: each program forked from an interpreter
    that imported what it imports, in its order, instead of a new interpreter (the cafe's
    litellm alone takes one some seconds, more than the run)."""

    cafe: Forks
    """For tests/crash_child.py and ``agenttrace resume`` of its agents (agenttrace, then the
    cafe and its litellm)."""
    commands: Forks
    """For the ``agenttrace`` commands that read the session (no litellm: as they run)."""


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    cafe = Forks(["agenttrace", "examples.cafe"], child_env(PYTHONPATH=str(ROOT)), ROOT)
    with cafe, cli_fork_server() as commands:
        yield Servers(cafe, commands)


@dataclass
class Crashed:
    """What the killed first run left."""

    sessions: Path
    ledger: Path
    stream: Path
    env: dict[str, str]
    servers: Servers | None = None
    """Where the commands run on it are forked from (None: each in a new interpreter)."""


def crash(
    tmp_path: Path, model: ScriptedModel, at: str = "discuss", servers: Servers | None = None
) -> Crashed:
    """The cafe's first run, SIGKILLed at ``discuss`` or after Jill answered in it (see
    tests/crash_child.py), in a new interpreter or forked from ``servers``."""
    sessions = tmp_path / "sessions"
    ledger = tmp_path / "accounting.jsonl"
    env = child_env(
        CRASH_API_BASE=model.api_base,
        AGENTTRACE_BILLING_FILE=str(ledger),
        PYTHONPATH=str(ROOT),
    )
    argv = ["first", str(sessions), at]
    if servers is not None:
        child = servers.cafe.run("tests.crash_child", argv, env, ROOT)
    else:
        child = subprocess.run(
            [sys.executable, "-m", "tests.crash_child", *argv],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=480,
        )
    assert child.returncode == -9, child.stderr  # killed by SIGKILL, as a crash is
    assert child.stdout.splitlines() == ["killing"]
    (stream,) = sessions.glob("*.events.jsonl")
    return Crashed(sessions, ledger, stream, env, servers)


def agenttrace_cli(crashed: Crashed, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m agenttrace.cli ARGS`` in the crashed run's environment (forked from its
    servers' ``commands``, or ``cafe`` for ``resume``, when it has them)."""
    if crashed.servers is not None:
        servers = crashed.servers
        forks = servers.cafe if args[:1] == ("resume",) else servers.commands
        return forks.run("agenttrace.cli", list(args), crashed.env, ROOT)
    return subprocess.run(
        [sys.executable, "-m", "agenttrace.cli", *args],
        env=crashed.env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=480,
    )


def resume(crashed: Crashed, path: Path) -> subprocess.CompletedProcess[str]:
    """``agenttrace resume PATH`` with the child's agents and the next prompt, which succeeds."""
    resumed = agenttrace_cli(
        crashed,
        "resume",
        str(path),
        "--agent",
        "tests.crash_child:rebuild",
        "--prompt",
        "What will you order?",
    )
    assert resumed.returncode == 0, resumed.stderr
    return resumed


def ledger_lines(crashed: Crashed) -> list[dict[str, Any]]:
    return [json.loads(line) for line in crashed.ledger.read_bytes().splitlines()]


def accounted(stream: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in stream.read_bytes().splitlines()]
    return [line for line in lines if line["event_type"] == "op_accounted"]


def stats(crashed: Crashed) -> dict[str, Any]:
    result = agenttrace_cli(crashed, "stats", "--json", str(crashed.stream))
    assert result.returncode == 0, result.stderr
    totals: dict[str, Any] = json.loads(result.stdout)
    return totals


def test_a_killed_run_has_billed_and_streamed_every_op_that_ended(
    tmp_path: Path, model: ScriptedModel
) -> None:
    """The crash in a new interpreter, as a user's program is killed (the other tests fork
    tests/crash_child.py from the cafe's fork server)."""
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


def test_tree_stats_and_exports_read_a_killed_session_from_its_stream(
    tmp_path: Path, model: ScriptedModel, servers: Servers
) -> None:
    crashed = crash(tmp_path, model, servers=servers)
    totals = stats(crashed)
    assert totals["runs"] == 1
    assert totals["total"]["llm_attempts_ok"] == 3 and totals["total"]["tool_calls"] == 2
    billed = ledger_lines(crashed)
    assert totals["total"]["cost_usd"] == pytest.approx(
        sum(line["costUsd"] for line in billed if line["type"] == "llm")
    )
    tree = agenttrace_cli(crashed, "tree", str(crashed.stream))
    assert tree.returncode == 0, tree.stderr
    assert "0 session Agent [agent_001] interrupted" in tree.stdout
    for label in ("1.1 llm", "1.2 tool task ok", "2.1 llm", "2.2 tool task ok", "3.1 llm"):
        assert label in tree.stdout
    for export in ("jaeger", "otlp-json", "html", "std008", "exchanges"):
        result = agenttrace_cli(crashed, "export", str(crashed.stream), "--format", export)
        assert result.returncode == 0, (export, result.stderr)
        assert result.stdout.strip(), export
    spans = json.loads(agenttrace_cli(crashed, "export", str(crashed.stream), "--format",
                                      "otlp-json").stdout)  # fmt: skip
    names = [
        span["name"]
        for resource in spans["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    assert sum(name.startswith("execute_tool task") for name in names) == 2


def test_a_session_file_written_mid_run_gets_the_ops_that_ended_after_it(
    tmp_path: Path, model: ScriptedModel, servers: Servers
) -> None:
    """The session file was written when Jack's run ended (the root's run unfinished); Jill's
    attempt ended after it. Every command sees both, each once."""
    crashed = crash(tmp_path, model, at="jill", servers=servers)
    (snapshot,) = crashed.sessions.glob("*.json.gz")
    written = json.loads(gzip.decompress(snapshot.read_bytes()))
    assert "endedAt" not in written["runs"][0]
    assert '"3.2:2.1.1"' not in json.dumps(written)  # Jill's attempt ended after the write
    totals = stats(crashed)
    assert totals["runs"] == 1
    assert totals["total"]["llm_attempts_ok"] == len(model.requests) == 5
    assert totals["total"]["tool_calls"] == 2  # the two task calls; discuss never ended
    by_agent = {row["name"]: row["llm_attempts_ok"] for row in totals["by_agent"]}
    assert by_agent == {"Agent": 3, "Jack": 1, "Jill": 1}
    tree = agenttrace_cli(crashed, "tree", str(snapshot))
    assert tree.returncode == 0, tree.stderr
    assert "3.2:2.1.1 llm" in tree.stdout and "3.2.1.1 llm" in tree.stdout


def test_resume_after_the_kill_counts_every_attempt_that_reached_the_model_once(
    tmp_path: Path, model: ScriptedModel, servers: Servers
) -> None:
    crashed = crash(tmp_path, model, servers=servers)
    # agenttrace resume in a new interpreter, as a user runs it: its init() comes before the
    # factory imports litellm (the forked resumes of the other tests have litellm imported).
    resume(dataclasses.replace(crashed, servers=None), crashed.stream)
    reached = len(model.requests)
    assert reached > 3  # the resumed run asked the model too
    billed = ledger_lines(crashed)
    assert sum(line["type"] == "llm" for line in billed) == reached
    assert len({(line["originTxnId"], line["path"]) for line in billed}) == len(billed)
    totals = stats(crashed)
    assert totals["runs"] == 2
    assert totals["total"]["llm_attempts_ok"] == reached
    assert totals["total"]["tool_calls"] == sum(line["type"] == "tool" for line in billed)
    # The session file now holds the killed run, marked, as the stream rebuilt it.
    (snapshot,) = crashed.sessions.glob("*.json.gz")
    first = json.loads(gzip.decompress(snapshot.read_bytes()))["runs"][0]
    assert first["attributes"]["agenttrace.interrupted"] is True
    assert "endedAt" not in first


def test_a_resumed_transcript_answers_every_tool_call_it_sends(
    tmp_path: Path, model: ScriptedModel, servers: Servers
) -> None:
    crashed = crash(tmp_path, model, servers=servers)
    resume(crashed, crashed.stream)
    for request in model.requests:
        assert_every_tool_use_answered(request["messages"])
    # The stream says the call was closed: a tool entry for c3, logged at resume.
    closing = [
        event
        for event in canonical_events(crashed.stream)
        if event.get("role") == "tool" and event.get("tool_call_id") == "c3"
    ]
    assert len(closing) == 1
    assert "interrupted" in closing[0]["content"]


def assert_every_tool_use_answered(messages: list[dict[str, Any]]) -> None:
    """Anthropic's rule (OpenAI's is the same in its shape): each ``tool_use`` of an assistant
    message has its ``tool_result`` in the next message."""
    for index, message in enumerate(messages):
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, list):
            continue
        calls = {block["id"] for block in content if block.get("type") == "tool_use"}
        if not calls:
            continue
        following = messages[index + 1] if index + 1 < len(messages) else {}
        blocks = following.get("content") if isinstance(following.get("content"), list) else []
        answered = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
        assert calls <= answered, (calls, following)


def test_every_view_of_a_killed_session_says_once_that_it_skipped_a_torn_line(
    tmp_path: Path, model: ScriptedModel, servers: Servers
) -> None:
    crashed = crash(tmp_path, model, servers=servers)
    with crashed.stream.open("ab") as handle:  # a kill in the middle of the next write
        handle.write(b'{"message_id": "msg_099", "event_type": "transcript_en')
    path = str(crashed.stream)
    for args in (
        ("dialog", path, "--agents", "Jack,Jill"),
        ("perspective", path, "Jack"),
        ("tree", path),
        ("stats", path),
        ("stats", "--json", path),
        *(("export", path, "--format", export) for export in ("jaeger", "html", "std008")),
    ):
        result = agenttrace_cli(crashed, *args)
        assert result.returncode == 0, (args, result.stderr)
        warnings = result.stderr.splitlines()
        assert len(warnings) == 1, (args, warnings)
        assert "torn line" in warnings[0] and "skipped" in warnings[0], (args, warnings)
        assert crashed.stream.name in warnings[0]


def damage_after_first_run(snapshot: Path) -> bytes:
    """Cut ``snapshot`` (two runs) as a disk that filled up would: its gzip ends in the middle
    of its second run. Returns the damaged bytes."""
    text = gzip.decompress(snapshot.read_bytes()).decode()
    _, first_end = json.JSONDecoder().raw_decode(text, text.index('"runs":[') + len('"runs":['))
    damaged = gzip.compress(text[: first_end + 2000].encode())[:-8]  # no trailer: cut short
    snapshot.write_bytes(damaged)
    return damaged


def test_resume_keeps_a_damaged_session_file_aside_and_recovers_its_whole_runs(
    tmp_path: Path, model: ScriptedModel, servers: Servers
) -> None:
    """A session whose file was damaged after its first run ended, then killed: resuming it
    (by the damaged file's own name: its stream beside it gives the rest) never writes over the
    damaged file, keeps the run that still reads, and says so once."""
    crashed = crash(tmp_path, model, servers=servers)
    resume(crashed, crashed.stream)
    (snapshot,) = crashed.sessions.glob("*.json.gz")
    runs = json.loads(gzip.decompress(snapshot.read_bytes()))["runs"]
    assert len(runs) == 2
    damaged = damage_after_first_run(snapshot)

    again = resume(crashed, snapshot)  # by the damaged file's name
    aside = snapshot.with_name(snapshot.name + ".damaged-1")
    assert aside.read_bytes() == damaged  # kept as it was, beside the new file
    warnings = [line for line in again.stderr.splitlines() if "cannot be read" in line]
    assert len(warnings) == 1, again.stderr
    assert "1 run was recovered" in warnings[0] and str(aside) in warnings[0]
    document = json.loads(gzip.decompress(snapshot.read_bytes()))
    # The first run as it was; the second, lost with the damage, rebuilt from the stream
    # (its ops all ended: accounted there); the third is this resume's.
    assert document["runs"][0] == runs[0]
    assert [run["txnId"] for run in document["runs"][:2]] == [run["txnId"] for run in runs]
    assert len(document["runs"]) == 3
    billed = ledger_lines(crashed)
    totals = stats(crashed)
    assert totals["total"]["llm_attempts_ok"] == len(model.requests)
    assert sum(line["type"] == "llm" for line in billed) == len(model.requests)


def _accounted_line(path: str, **entry: Any) -> str:
    accounting = {
        "timestamp": 1795393954351, "status": "ok", "latency": 1.5, "type": "tool",
        "originTxnId": "91397038ebfdb98b", "txnId": "91397038ebfdb98b", "agentId": "agent_001",
        "path": path, "providerLabel": "t", "charactersIn": 2, "charactersOut": 2,
        "callPath": "Agent", **entry,
    }  # fmt: skip
    return json.dumps(
        {"event_type": "op_accounted", "agent_id": "agent_001", "kind": "tool", "name": "t",
         "accounting": accounting, "ts": "2026-11-23T00:32:34.350Z", "path": path}
    )  # fmt: skip


@pytest.mark.parametrize(
    "lines",
    [
        pytest.param([_accounted_line(".".join(["1"] * 339))], id="deepest label"),
        pytest.param([_accounted_line("1.1", latency=1e300)], id="huge latency"),
        pytest.param([_accounted_line("1.1", latency=-5.0)], id="negative latency"),
        pytest.param([_accounted_line("1.1"), _accounted_line("1.1")], id="the same op twice"),
        pytest.param([_accounted_line("2.1.1.1"), _accounted_line("2.1:3.1.1")], id="sub-runs"),
        pytest.param([_accounted_line("1.1", txnId="aaaaaaaaaaaaaaaa")], id="no root op"),
    ],
)
def test_a_hand_made_stream_of_accounting_lines_reads_in_every_view(
    tmp_path: Path, servers: Servers, lines: list[str]
) -> None:
    """Streams are untrusted: whatever ``op_accounted`` lines the schema lets through, every
    view shows what it can or says in one line why it cannot."""
    stream = tmp_path / "hand.events.jsonl"
    first = {"message_id": "msg_001", "event_type": "agent_created", "agent_id": "agent_001"}
    stream.write_text("".join(line + "\n" for line in [json.dumps(first), *lines]))
    crashed = Crashed(tmp_path, tmp_path / "ledger.jsonl", stream, child_env(), servers)
    for args in (("tree",), ("stats", "--json"), ("export", "--format", "otlp-json")):
        result = agenttrace_cli(crashed, *args[:1], str(stream), *args[1:])
        assert "Traceback" not in result.stderr, (args, result.stderr)
        if result.returncode:
            assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, args
