"""The Claude Agent SDK's ``PreToolUse`` hook without the CLI: the hook's calls and the SDK's
messages in the orders the real CLI produces only now and then, made certain here (messages in
the SDK's own types, the hook called as the SDK calls it). tests/test_claude_agent_sdk_hook.py
runs the real CLI."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    HookMatcher,
    ResultMessage,
    SystemMessage,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)
from msgspec import to_builtins

import agenttrace
from agenttrace.formats.session.files import stream_path
from agenttrace.instrumentation.claude_agent_sdk import utils
from agenttrace.instrumentation.claude_agent_sdk.hooks import PreToolUse, with_hook
from agenttrace.instrumentation.claude_agent_sdk.tracker import SdkSession
from agenttrace.model import journal as j
from agenttrace.model import journal_lines as jl
from agenttrace.model.journal import Journal
from agenttrace.model.reentry import DEFAULT_POLICY, Reentry

from .conftest import Traced, attrs


@pytest.fixture
def hooked(traced: Traced) -> Iterator[tuple[SdkSession, PreToolUse]]:
    """An SDK session (the SDK instrumented) and the hook agenttrace gives it."""
    undo = agenttrace.instrument_claude_agent_sdk()
    session = SdkSession(ClaudeAgentOptions())
    try:
        yield session, PreToolUse(session)
    finally:
        session.close()
        undo()


def init() -> SystemMessage:
    return SystemMessage("init", {"type": "system", "subtype": "init", "session_id": "s-1"})


def calls(message_id: str, *call_ids: str) -> list[AssistantMessage]:
    """A message whose blocks each call Bash, one ``AssistantMessage`` per block (as the CLI
    yields them)."""
    return [
        AssistantMessage(
            [ToolUseBlock(call_id, "Bash", {"command": f"echo {call_id}"})],
            "m",
            usage={"input_tokens": 2, "output_tokens": 1},
            message_id=message_id,
        )
        for call_id in call_ids
    ]


def results(*call_ids: str) -> UserMessage:
    return UserMessage([ToolResultBlock(call_id, "ok", False) for call_id in call_ids])


def ask(hook: PreToolUse, call_id: str) -> dict[str, Any]:
    """The CLI asks the hook before it runs ``call_id``."""
    data = {
        "hook_event_name": "PreToolUse",
        "session_id": "s-1",
        "tool_name": "Bash",
        "tool_input": {"command": f"echo {call_id}"},
        "tool_use_id": call_id,
    }
    answer: dict[str, Any] = asyncio.run(hook(data, call_id, {"signal": None}))
    return answer


def journal(traced: Traced) -> list[tuple[str, str, str]]:
    """(call id or step label, step label, state) of each tool step line, in order."""
    traced.handle.force_flush()
    session_id = agenttrace.current_session().session_id
    path = stream_path(Path(traced.handle.settings.sessions_dir), session_id)
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [
        (line.get("call_id", ""), line["step"], line["state"])
        for line in lines
        if line.get("event_type") == "step" and line.get("kind") == "tool"
    ]


def labels(traced: Traced) -> dict[str, str]:
    return {
        attrs(s)["gen_ai.tool.call.id"]: attrs(s)["agenttrace.path"]
        for s in traced.ours()
        if s.name == "execute_tool Bash"
    }


def test_parallel_calls_hooked_before_their_message_get_the_labels_their_ops_get(
    traced: Traced, hooked: tuple[SdkSession, PreToolUse]
) -> None:
    session, hook = hooked
    session.observe(init())
    assert ask(hook, "call_a") == {} and ask(hook, "call_b") == {}
    # On disk before either body ran, at op 2 and 3 of the turn the message opens.
    assert journal(traced) == [("call_a", "1.2", "intent"), ("call_b", "1.3", "intent")]
    for message in (*calls("msg_1", "call_a", "call_b"), results("call_a", "call_b")):
        session.observe(message)
    session.observe(ResultMessage("success", 5, 4, False, 1, "s-1"))
    assert labels(traced) == {"call_a": "1.2", "call_b": "1.3"}
    assert journal(traced) == [
        ("call_a", "1.2", "intent"),
        ("call_b", "1.3", "intent"),
        ("", "1.2", "done"),
        ("", "1.3", "done"),
    ]


def test_a_call_hooked_after_its_message_began_is_the_next_op_of_its_turn(
    traced: Traced, hooked: tuple[SdkSession, PreToolUse]
) -> None:
    session, hook = hooked
    first, second = calls("msg_1", "call_a", "call_b")
    session.observe(init())
    session.observe(first)  # journaled as the program receives it
    assert ask(hook, "call_a") == {}  # found: nothing more to write
    assert ask(hook, "call_b") == {}  # not received yet: the next op of the message's turn
    for message in (second, results("call_a", "call_b")):
        session.observe(message)
    session.observe(ResultMessage("success", 5, 4, False, 1, "s-1"))
    assert labels(traced) == {"call_a": "1.2", "call_b": "1.3"}
    assert [(c, label, state) for c, label, state in journal(traced) if state == "intent"] == [
        ("call_a", "1.2", "intent"),
        ("call_b", "1.3", "intent"),
    ]


def test_a_call_in_an_agent_not_received_yet_is_left_to_its_message(
    traced: Traced,
    hooked: tuple[SdkSession, PreToolUse],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No exchange is open (the loop has not read its init message): the hook cannot tell the
    call's run, writes nothing, says so, and the call is journaled when it is received."""
    session, hook = hooked
    monkeypatch.setattr(utils, "_told", set())  # said once per process: this test hears it
    assert ask(hook, "call_a") == {}
    assert journal(traced) == []
    assert "was not journaled before it ran" in caplog.text
    session.observe(init())
    for message in (*calls("msg_1", "call_a"), results("call_a")):
        session.observe(message)
    assert journal(traced) == [("call_a", "1.2", "intent"), ("", "1.2", "done")]


def test_the_programs_hooks_are_kept_and_its_options_unchanged(
    traced: Traced, hooked: tuple[SdkSession, PreToolUse]
) -> None:
    session, _ = hooked

    async def mine(data: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        return {}

    theirs = HookMatcher("Bash", [mine])
    options = ClaudeAgentOptions(hooks={"PreToolUse": [theirs], "Stop": [theirs]})
    given = with_hook(options, session)
    assert options.hooks == {"PreToolUse": [theirs], "Stop": [theirs]}
    assert given.hooks["Stop"] == [theirs]
    first, ours = given.hooks["PreToolUse"]
    assert first is theirs
    assert ours.matcher is None and [type(h) for h in ours.hooks] == [PreToolUse]


@pytest.mark.init(journal=False)
def test_no_hook_is_added_with_the_journal_off(
    traced: Traced, hooked: tuple[SdkSession, PreToolUse]
) -> None:
    session, _ = hooked
    options = ClaudeAgentOptions()
    assert with_hook(options, session) is options


# --- a re-entered run ---------------------------------------------------------------------------


def origin() -> str:
    """The interrupted run the test's session re-enters (one of its own: the hook's claims
    are kept by run)."""
    return "r-" + agenttrace.current_session().session_id


def reenter(*tool_lines: dict[str, Any]) -> None:
    """Arm the current session to re-enter run :func:`origin`, whose journal holds ``tool_lines``
    (the tool steps of ``call_a``'s request at 1.2)."""
    lines = [
        to_builtins(jl.run_line(origin(), 1, agent_id="agent_001", name="claude-code", messages=0))
    ]
    journal = Journal([*lines, *tool_lines])
    agenttrace.current_session().reentry = Reentry(origin(), 2, journal, DEFAULT_POLICY)


def intent_of_call_a() -> dict[str, Any]:
    request = j.tool_fingerprint("Bash", {"command": "echo call_a"})
    return to_builtins(
        jl.intent_line(
            (origin(), "1.2", 1),
            agent_id="agent_001",
            name="Bash",
            effect="effect",
            request_fingerprint=request,
            call_id="call_old",
        )
    )


def denial(answer: dict[str, Any]) -> str:
    output = answer["hookSpecificOutput"]
    assert (output["hookEventName"], output["permissionDecision"]) == ("PreToolUse", "deny")
    reason: str = output["permissionDecisionReason"]
    return reason


@pytest.mark.parametrize("received", [False, True])
def test_a_reentered_runs_call_in_doubt_is_denied_and_nothing_is_journaled(
    traced: Traced, hooked: tuple[SdkSession, PreToolUse], received: bool
) -> None:
    session, hook = hooked
    reenter(intent_of_call_a())
    session.observe(init())
    (message,) = calls("msg_1", "call_a")
    if received:
        session.observe(message)
    reason = denial(ask(hook, "call_a"))
    assert "1.2 Bash" in reason and "agenttrace resolve" in reason
    if not received:
        session.observe(message)
    session.observe(UserMessage([ToolResultBlock("call_a", reason, True)]))
    assert journal(traced) == []  # the CLI ran nothing: no step for the denied call


def test_a_reentered_runs_abandoned_call_is_denied_as_abandoned(
    traced: Traced, hooked: tuple[SdkSession, PreToolUse]
) -> None:
    session, hook = hooked
    reenter(intent_of_call_a(), to_builtins(jl.decision_line((origin(), "1.2", 1), "abandon")))
    session.observe(init())
    assert "abandoned" in denial(ask(hook, "call_a"))


def test_a_reentered_runs_call_done_before_runs_as_its_next_attempt(
    traced: Traced, hooked: tuple[SdkSession, PreToolUse]
) -> None:
    """The resumed CLI's transcript gave the model the result already: the same call asked
    again is the model's new request, run and journaled as the step's attempt 2."""
    session, hook = hooked
    done = to_builtins(
        jl.done_line((origin(), "1.2", 1), agent_id="agent_001", kind="tool", name="Bash")
    )
    reenter(intent_of_call_a(), done)
    session.observe(init())
    assert ask(hook, "call_a") == {}
    for message in (*calls("msg_1", "call_a"), results("call_a")):
        session.observe(message)
    traced.handle.force_flush()
    path = stream_path(
        Path(traced.handle.settings.sessions_dir), agenttrace.current_session().session_id
    )
    steps = [json.loads(line) for line in path.read_text().splitlines()]
    tool = [
        (s["run"], s["step"], s["attempt"], s["state"])
        for s in steps
        if s.get("event_type") == "step" and s["kind"] == "tool"
    ]
    assert tool == [(origin(), "1.2", 2, "intent"), (origin(), "1.2", 2, "done")]
