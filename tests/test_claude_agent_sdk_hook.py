"""The Claude Agent SDK's tool calls journal their intent before the CLI runs them (issue 22):
agenttrace's ``PreToolUse`` hook, answered through the SDK's control protocol, by the real SDK
and its bundled CLI against the scripted model server (as tests/test_claude_agent_sdk.py).

Each tool body is the CLI's own ``Bash`` running a command that first copies the session's
event stream aside (what was on disk when the body started) and then makes its side effect
(a line appended to a file)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ClaudeSDKClient, HookMatcher, SystemMessage, TaskStartedMessage, query

import agenttrace
from agenttrace.formats.session.files import stream_path

from .anthropic_server import AnthropicServer, Reply, asked, not_asked, text, tool_use
from .conftest import Traced, attrs
from .helpers import ROOT, child_env
from .test_claude_agent_sdk import (  # noqa: F401  (its fixtures, used by name)
    anthropic_server,
    claude,
    collect,
    model,
    named,
    options,
    run,
    usage,
    work,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def charge(stream: Path, snapshot: Path, side: Path, what: str = "charged") -> dict[str, Any]:
    """A Bash call whose body copies the stream to ``snapshot``, then appends ``what`` to
    ``side``."""
    command = f"cp '{stream}' '{snapshot}'; echo {what} >> '{side}'"
    return {"command": command, "description": "charge"}


async def side_effect(side: Path) -> None:
    """Hold the program's loop until the tool's side effect is there: the CLI goes on
    meanwhile, asking the hook, which never waits for the loop."""
    for _ in range(1200):
        if side.exists():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the tool never ran: {side} is not there")


def steps(path: Path) -> list[dict[str, Any]]:
    """The tool steps' journal lines in an event stream (or a copy of one)."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [x for x in lines if x.get("event_type") == "step" and x.get("kind") == "tool"]


def bash_options(model: AnthropicServer, work: Path, **more: Any) -> Any:  # noqa: F811
    return options(model, work, allowed_tools=["Bash", "Agent"], **more)


def stream_of_session(traced: Traced) -> Path:
    session_id = agenttrace.current_session().session_id
    return stream_path(Path(traced.handle.settings.sessions_dir), session_id)


@pytest.mark.parametrize("loop", ["reading", "busy"])
def test_a_cli_tool_calls_intent_is_on_disk_before_its_body_runs(
    claude: None,  # noqa: F811  (the fixtures of tests/test_claude_agent_sdk.py)
    traced: Traced,
    model: AnthropicServer,  # noqa: F811
    work: Path,  # noqa: F811
    loop: str,
) -> None:
    """``reading``: the loop has received the call when the CLI asks the hook; ``busy``: it is
    held on the init message until the tool's side effect is there, so the hook journals a call
    the program has not received, at the label its op then gets."""
    stream, snapshot, side = stream_of_session(traced), work / "snapshot.jsonl", work / "side.txt"
    model.reset(
        Reply([text("Charging."), tool_use("Bash", charge(stream, snapshot, side))], usage(2, 3)),
        Reply([text("Charged.")], usage=usage(4, 5)),
    )

    async def consume() -> None:
        async for message in query(prompt="charge", options=bash_options(model, work)):
            if loop == "busy" and isinstance(message, SystemMessage) and message.subtype == "init":
                await side_effect(side)

    run(consume())
    assert side.read_text() == "charged\n"
    (call_id,) = model.sent[0].tool_ids
    (span,) = named(traced, "execute_tool Bash")
    label = attrs(span)["agenttrace.path"]
    # What the body found on disk: the call's intent, at its op's label.
    (before,) = [s for s in steps(snapshot) if s.get("call_id") == call_id]
    assert (before["state"], before["step"], before["effect"]) == ("intent", label, "effect")
    # One step for the call, ended under the same key.
    traced.handle.force_flush()
    lines = [s for s in steps(stream) if (s["run"], s["step"]) == (before["run"], label)]
    assert [s["state"] for s in lines] == ["intent", "done"]


def test_a_subagents_tool_call_is_journaled_before_its_body_runs(
    claude: None,  # noqa: F811  (the fixtures of tests/test_claude_agent_sdk.py)
    traced: Traced,
    model: AnthropicServer,  # noqa: F811
    work: Path,  # noqa: F811
) -> None:
    """The CLI yields a sub-agent's tool call only after it started it: the hook places it in
    the sub-agent's run (the hook's ``agent_id`` is the sub-agent's task id). The loop is held
    once the sub-agent started, so the call is one the program has not received."""
    stream, snapshot, side = stream_of_session(traced), work / "snapshot.jsonl", work / "side.txt"
    call = {
        "description": "Charge",
        "prompt": "CHARGE IT",
        "subagent_type": "general-purpose",
        "run_in_background": False,
    }
    sub, main = asked("CHARGE IT"), not_asked("CHARGE IT")
    model.reset(
        Reply([tool_use("Agent", call)], usage=usage(1, 1), when=main),
        Reply([tool_use("Bash", charge(stream, snapshot, side))], usage=usage(2, 2), when=sub),
        Reply([text("Charged.")], usage=usage(3, 3), when=sub),
        Reply([text("All done.")], usage=usage(4, 4), when=main),
    )

    async def consume() -> None:
        prompt = "delegate the charge"
        async for message in query(prompt=prompt, options=bash_options(model, work)):
            if isinstance(message, TaskStartedMessage):  # held: the sub-agent's call comes next
                await side_effect(side)

    run(consume())
    assert side.read_text() == "charged\n"
    (bash_id,) = model.sent[1].tool_ids
    (span,) = named(traced, "execute_tool Bash")
    label = attrs(span)["agenttrace.path"]
    assert label == "1.2.1.2"  # op 2 of the sub-agent's turn 1, under the Agent call 1.2
    (before,) = [s for s in steps(snapshot) if s.get("call_id") == bash_id]
    assert (before["state"], before["step"]) == ("intent", label)
    assert before["agent_id"] == attrs(span)["agenttrace.agent.id"]
    traced.handle.force_flush()
    assert [s["state"] for s in steps(stream) if s["step"] == label] == ["intent", "done"]


def test_the_users_hooks_still_run_and_their_denial_wins(
    claude: None,  # noqa: F811  (the fixtures of tests/test_claude_agent_sdk.py)
    traced: Traced,
    model: AnthropicServer,  # noqa: F811
    work: Path,  # noqa: F811
) -> None:
    """A ``ClaudeSDKClient`` whose options have a ``PreToolUse`` hook of the program's: it is
    called for each call as before, a call it denies does not run, and its options object is
    left as the program made it."""
    side = work / "side.txt"
    seen: list[str] = []

    async def guard(data: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        command = data["tool_input"]["command"]
        seen.append(command)
        if "forbidden" not in command:
            return {}
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "not this one",
            }
        }

    allowed = f"echo allowed >> '{side}'"
    forbidden = f"echo forbidden >> '{side}'"
    model.reset(
        Reply([tool_use("Bash", {"command": allowed, "description": "a"})], usage=usage(1, 1)),
        Reply([tool_use("Bash", {"command": forbidden, "description": "f"})], usage=usage(2, 2)),
        Reply([text("Done.")], usage=usage(3, 3)),
    )
    hooks: dict[Any, list[HookMatcher]] = {"PreToolUse": [HookMatcher("Bash", [guard])]}
    mine = bash_options(model, work, hooks=hooks)

    async def conversation() -> None:
        async with ClaudeSDKClient(mine) as client:
            await client.query("run both")
            async for _ in client.receive_response():
                pass

    run(conversation())
    assert seen == [allowed, forbidden]
    assert side.read_text() == "allowed\n"  # the program's denial won
    # The program's options and hooks are as it made them: ours went to the SDK in a copy.
    assert mine.hooks is hooks and [m.hooks for m in hooks["PreToolUse"]] == [[guard]]
    traced.handle.force_flush()
    first = model.sent[0].tool_ids[0]
    journal = steps(stream_of_session(traced))
    (intent,) = [s for s in journal if s.get("call_id") == first]
    assert [s["state"] for s in journal if s["step"] == intent["step"]] == ["intent", "done"]


def child(*args: str) -> tuple[int, list[dict[str, Any]]]:
    """Run tests/claude_hook_child.py; its return code and the JSON lines it printed."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.claude_hook_child", *args],
        env=child_env(PYTHONPATH=str(ROOT)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=480,
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done.returncode, lines


def doubts(stream: Path) -> list[str]:
    """``agenttrace doubts STREAM``: each call in doubt's label, tool and class."""
    listed = subprocess.run(
        [sys.executable, "-m", "agenttrace.cli", "doubts", str(stream)],
        env=child_env(PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert listed.returncode == 0, listed.stderr
    return [line.split("  run ")[0] for line in listed.stdout.splitlines()]


@pytest.mark.parametrize("resume", ["resume", "resume-busy"])
def test_a_call_killed_in_its_body_is_in_doubt_and_a_reentered_run_is_denied_it(
    model: AnthropicServer,  # noqa: F811
    work: Path,  # noqa: F811
    tmp_path: Path,
    resume: str,
) -> None:
    """The process is killed inside the CLI's ``Bash`` body, after its side effect: the call's
    intent was on disk, so ``agenttrace doubts`` lists it. Resumed, the run is re-entered and
    the model asks for the same call: the hook denies it, naming the call and ``agenttrace
    resolve``, and the side effect is not made again: whether the program received the call
    before the CLI asked (``resume``) or not (``resume-busy``: its loop is held)."""
    sessions, side = tmp_path / "sessions", work / "side.txt"
    command = f"echo charged >> '{side}'; kill -9 $(cat '{work / 'pid'}')"
    call = {"command": command, "description": "charge"}

    def resumed(body: dict[str, Any]) -> bool:
        return "go on" in json.dumps(body.get("messages"))

    model.reset(
        Reply([tool_use("Bash", call)], usage=usage(1, 1), when=lambda b: not resumed(b)),
        Reply([tool_use("Bash", call)], usage=usage(2, 2), when=resumed),
        Reply([text("Not charged again.")], usage=usage(3, 3), when=resumed),
    )
    env = json.dumps(model.env(tmp_path / "home"))
    code, printed = child("first", str(sessions), str(work), env)
    assert code == -9, printed  # killed in the tool's body
    assert side.read_text() == "charged\n"
    session = printed[0]["session"]
    sdk_session = printed[1]["sdk_session"]
    stream = stream_path(sessions, session)

    assert doubts(stream) == ["1.2  Bash (effect)"]

    code, printed = child(resume, str(sessions), str(work), env, str(stream), sdk_session)
    assert code == 0, printed
    (results,) = [p["results"] for p in printed if "results" in p]
    (denied,) = [r for r in results if r["is_error"]]
    reason = json.dumps(denied["content"])
    assert "1.2 Bash" in reason and "agenttrace resolve" in reason
    assert side.read_text() == "charged\n"  # not charged twice
    assert doubts(stream) == ["1.2  Bash (effect)"]  # still for the user to decide
