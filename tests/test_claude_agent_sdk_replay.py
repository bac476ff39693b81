"""A Claude Agent SDK run replayed (docs/design/replay.md): the CLI's tool calls follow the
replay's rules through agenttrace's ``PreToolUse`` hook, with the real SDK and its bundled CLI
against the scripted model server (as tests/test_claude_agent_sdk_hook.py).

The run's one tool call is the CLI's ``Bash`` appending a line to a file: the file says whether
its body ran again. A served call is denied by the hook with the recorded result as the reason
(the protocol has no other way to answer a call without running it)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ResultMessage, SystemMessage, ToolResultBlock, UserMessage, query

import agenttrace
from agenttrace.model.replay import ReplayMode

from .anthropic_server import AnthropicServer, Reply, text, tool_use
from .conftest import Traced, attrs
from .test_claude_agent_sdk import (  # noqa: F401  (its fixtures, used by name)
    anthropic_server,
    claude,
    model,
    named,
    run,
    usage,
    work,
)
from .test_claude_agent_sdk_hook import bash_options, stream_of_session

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def charge(side: Path, what: str = "charged") -> dict[str, Any]:
    """A Bash call whose body appends ``what`` to ``side`` and prints it."""
    return {"command": f"echo {what} | tee -a '{side}'", "description": "charge"}


def script(call: dict[str, Any]) -> list[Reply]:
    return [
        Reply([text("Charging."), tool_use("Bash", call)], usage=usage(2, 3)),
        Reply([text("Charged.")], usage=usage(4, 5)),
    ]


def exchange(model: AnthropicServer, work: Path, busy: bool = False) -> list[Any]:  # noqa: F811
    """One exchange; ``busy``: the loop is held on the init message until the CLI has the
    hook's answer, so the hook decides a call the program has not received."""

    async def consume() -> list[Any]:
        received = []
        async for message in query(prompt="charge", options=bash_options(model, work)):
            if busy and isinstance(message, SystemMessage) and message.subtype == "init":
                await answered(work.parent / "home", message.data["session_id"])
            received.append(message)
        return received

    return run(consume())  # type: ignore[no-any-return]


async def answered(home: Path, session_id: str) -> None:
    """Wait until the CLI's transcript of ``session_id`` holds a hook's denial."""
    for _ in range(1200):
        for path in (home / ".claude" / "projects").glob(f"*/{session_id}.jsonl"):
            if "hook error" in path.read_text(errors="replace"):
                return
        await asyncio.sleep(0.05)
    raise AssertionError("the CLI never got the hook's answer")


def record(
    traced: Traced,
    model: AnthropicServer,  # noqa: F811
    work: Path,  # noqa: F811
) -> tuple[str, str, str]:
    """Run the exchange live; the session's id, the tool step's label and its result."""
    side = work / "side.txt"
    model.reset(*script(charge(side)))
    exchange(model, work)
    assert side.read_text() == "charged\n"
    traced.handle.force_flush()
    lines = [json.loads(x) for x in stream_of_session(traced).read_text().splitlines()]
    (done,) = [
        x
        for x in lines
        if x.get("event_type") == "step" and x.get("kind") == "tool" and x["state"] == "done"
    ]
    result = json.loads(done["result"])
    assert "charged" in result
    return agenttrace.current_session().session_id, done["step"], result


def tool_result(model: AnthropicServer) -> dict[str, Any]:  # noqa: F811
    """The tool result the model got in the exchange's second request."""
    body = model.message_requests()[1].body
    (result,) = [
        block
        for message in body["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    return result  # type: ignore[no-any-return]


@pytest.mark.parametrize("loop", ["reading", "busy"])
def test_a_replayed_sdk_run_is_served_its_tool_calls(
    claude: None,  # noqa: F811  (the fixtures of tests/test_claude_agent_sdk.py)
    traced: Traced,
    model: AnthropicServer,  # noqa: F811
    work: Path,  # noqa: F811
    loop: str,
) -> None:
    side = work / "side.txt"
    source, label, recorded = record(traced, model, work)
    model.reset(*script(charge(side)))
    with agenttrace.replaying(source) as replay:
        exchange(model, work, busy=loop == "busy")
    assert side.read_text() == "charged\n"  # the body did not run again
    assert replay.report.clean and replay.report.served == 1, replay.report.lines()
    # The model got the recorded result (the hook's denial carries it).
    # The model got the recorded result, as the reason of the hook's denial (the CLI says
    # where it came from before it, and marks it an error).
    got = tool_result(model)
    assert got["is_error"] and got["content"].endswith(f": {recorded}")
    served = [s for s in named(traced, "execute_tool Bash") if attrs(s).get("agenttrace.replayed")]
    assert [attrs(s)["agenttrace.path"] for s in served] == [label]


@pytest.mark.parametrize(
    ("mode", "loop"), [("strict", "reading"), ("strict", "busy"), ("lenient", "reading")]
)
def test_an_edited_tool_input_diverges_under_strict_and_runs_live_under_lenient(
    claude: None,  # noqa: F811  (the fixtures of tests/test_claude_agent_sdk.py)
    traced: Traced,
    model: AnthropicServer,  # noqa: F811
    work: Path,  # noqa: F811
    mode: ReplayMode,
    loop: str,
) -> None:
    """``busy``: the hook decides the call before the program has received it (a call run
    live gets no hook answer to wait for: only strict is held)."""
    side = work / "side.txt"
    source, label, _ = record(traced, model, work)
    model.reset(*script(charge(side, "recharged")))
    with agenttrace.replaying(source, mode=mode) as replay:
        received = exchange(model, work, busy=loop == "busy")
    report = replay.report
    assert report.served == 0 and report.divergence is not None, report.lines()
    assert (report.divergence.label, report.divergence.kind) == (label, "tool")
    assert "request differs" in report.divergence.why
    if mode == "strict":
        assert side.read_text() == "charged\n"  # denied: not run
        # Denied with the divergence, and the hook stopped the exchange there: the model was
        # not asked again.
        (denied,) = [
            block
            for message in received
            if isinstance(message, UserMessage) and isinstance(message.content, list)
            for block in message.content
            if isinstance(block, ToolResultBlock)
        ]
        assert denied.is_error and f"replay diverged at {label}" in str(denied.content)
        assert len(model.message_requests()) == 1
        assert isinstance(received[-1], ResultMessage)
    else:
        assert side.read_text() == "charged\nrecharged\n"  # run live
        assert [(n.label, n.why) for n in report.live] == [(label, "diverged here")]


def test_a_call_at_until_runs_live(
    claude: None,  # noqa: F811  (the fixtures of tests/test_claude_agent_sdk.py)
    traced: Traced,
    model: AnthropicServer,  # noqa: F811
    work: Path,  # noqa: F811
) -> None:
    side = work / "side.txt"
    source, label, _ = record(traced, model, work)
    model.reset(*script(charge(side)))
    with agenttrace.replaying(source, until=label) as replay:
        exchange(model, work)
    assert side.read_text() == "charged\ncharged\n"  # the same call, run again live
    report = replay.report
    assert report.divergence is None and report.served == 0
    assert [(n.label, n.why) for n in report.live] == [(label, "until")]
    assert not [
        s for s in named(traced, "execute_tool Bash") if attrs(s).get("agenttrace.replayed")
    ]
