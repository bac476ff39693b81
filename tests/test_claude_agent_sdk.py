"""The Claude Agent SDK, traced: the real SDK and its bundled Claude Code CLI against a scripted
Anthropic-compatible server on 127.0.0.1 (tests/anthropic_server.py).

The CLI runs with ``HOME`` and ``TMPDIR`` in the test's temporary directory and the settings
that keep it off every other host (``AnthropicServer.env``). Each test starts the CLI (a real
process, a second or two), so they are marked e2e.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    query,
)
from claude_agent_sdk._errors import ResultError
from opentelemetry.sdk.trace import ReadableSpan

import agenttrace
from agenttrace import semconv as sc

from .anthropic_server import AnthropicServer, Reply, asked, not_asked, text, thinking, tool_use
from .conftest import Traced, attrs, outcome
from .helpers import ROOT, child_env

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

MODEL = "claude-opus-5-5"  # the CLI's default model: what its requests name
CHAT = f"chat {MODEL}"
SESSION_ID = "claude_agent_sdk.session_id"


@pytest.fixture(scope="module")
def anthropic_server() -> Iterator[AnthropicServer]:
    server = AnthropicServer().start()
    yield server
    server.stop()


@pytest.fixture
def model(anthropic_server: AnthropicServer) -> AnthropicServer:
    """The scripted model, with an empty script and no recorded requests."""
    anthropic_server.reset()
    return anthropic_server


@pytest.fixture
def claude(traced: Traced) -> Iterator[None]:
    """The SDK instrumented (after the traced fixture's init), undone afterwards."""
    undo = agenttrace.instrument_claude_agent_sdk()
    yield
    undo()


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """The agent's working directory."""
    path = tmp_path / "work"
    path.mkdir()
    return path


def usage(input: int, output: int, write: int = 0, read: int = 0) -> dict[str, int]:
    return {
        "input_tokens": input,
        "output_tokens": output,
        "cache_creation_input_tokens": write,
        "cache_read_input_tokens": read,
    }


def options(model: AnthropicServer, work: Path, **more: Any) -> ClaudeAgentOptions:
    return ClaudeAgentOptions(
        permission_mode="acceptEdits",
        cwd=str(work),
        env=model.env(work.parent / "home"),
        **more,
    )


async def collect(stream: AsyncIterator[Any]) -> list[Any]:
    return [message async for message in stream]


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


async def prompts(*texts: str) -> AsyncIterator[dict[str, Any]]:
    for value in texts:
        yield {"type": "user", "message": {"role": "user", "content": value}}


def named(traced: Traced, name: str) -> list[ReadableSpan]:
    return [s for s in traced.ours() if s.name == name]


def parent_of(traced: Traced, span: ReadableSpan) -> ReadableSpan:
    assert span.parent is not None
    (found,) = [s for s in traced.spans() if s.context.span_id == span.parent.span_id]
    return found


def results(received: list[Any]) -> list[ResultMessage]:
    return [m for m in received if isinstance(m, ResultMessage)]


# --- the seed's poem exchange -------------------------------------------------------------------

POEM = "# Roses\n\nRoses are red,\nthe sky is blue.\n"


def test_poem_exchange_is_one_run_with_an_attempt_per_message_and_a_write(
    claude: None, traced: Traced, model: AnthropicServer, work: Path
) -> None:
    model.reset(
        Reply(
            [
                thinking("The user wants a poem in poem.md."),
                text("I'll write a poem to poem.md."),
                tool_use("Write", {"file_path": str(work / "poem.md"), "content": POEM}),
            ],
            usage=usage(3, 120, write=11530),
        ),
        Reply(
            [text("Perfect! poem.md holds the poem.")], usage=usage(6, 24, write=373, read=11530)
        ),
    )
    received = run(collect(query(prompt="write a poem to poem.md", options=options(model, work))))

    assert (work / "poem.md").read_text() == POEM
    # The program receives the SDK's messages, nothing added: a block per AssistantMessage.
    kinds = [type(m).__name__ for m in received if not isinstance(m, SystemMessage)]
    assert kinds == [
        "AssistantMessage",
        "AssistantMessage",
        "AssistantMessage",
        "UserMessage",
        "AssistantMessage",
        "ResultMessage",
    ]
    (result,) = results(received)
    first, second = model.sent
    (write_id,) = first.tool_ids

    assert traced.tree() == [
        "invoke_agent claude-code [0]",
        "  turn 1 [1]",
        f"    {CHAT} [1.1]",
        "    execute_tool Write [1.2]",
        "  turn 2 [2]",
        f"    {CHAT} [2.1]",
    ]
    (run_span,) = named(traced, "invoke_agent claude-code")
    a = attrs(run_span)
    assert a[sc.GEN_AI_CONVERSATION_ID] == result.session_id
    assert a[SESSION_ID] == result.session_id
    assert a["claude_agent_sdk.num_turns"] == 2
    assert a["claude_agent_sdk.result.subtype"] == "success"
    assert a["claude_agent_sdk.duration_ms"] == result.duration_ms
    assert a["claude_agent_sdk.duration_api_ms"] == result.duration_api_ms
    assert a[sc.COST_USD] == pytest.approx(result.total_cost_usd)
    # The exchange's usage, as the result sums it: the server's counts, added up.
    assert a[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 144
    assert a[sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] == 11903
    assert outcome(run_span) == "ok"

    chat1, chat2 = named(traced, CHAT)
    c1, c2 = attrs(chat1), attrs(chat2)
    # One attempt per message id, with the final output count of message_delta (not 1).
    assert c1[sc.GEN_AI_RESPONSE_ID] == first.message_id
    assert c1[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 120
    assert c1[sc.GEN_AI_USAGE_INPUT_TOKENS] == 3 + 11530
    assert c1[sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] == 11530
    assert c1[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_use",)
    assert c1[sc.GEN_AI_PROVIDER_NAME] == "anthropic"
    assert c2[sc.GEN_AI_RESPONSE_ID] == second.message_id
    assert c2[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 24
    assert c2[sc.GEN_AI_USAGE_INPUT_TOKENS] == 6 + 373 + 11530
    assert c2[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 11530
    assert chat1.start_time <= chat1.end_time <= chat2.start_time  # type: ignore[operator]
    # The thinking block is the model's reasoning on the attempt that thought it.
    assert [
        e.attributes[sc.REASONING_TEXT]  # type: ignore[index]
        for e in chat1.events
        if e.name == sc.EVENT_REASONING
    ] == ["The user wants a poem in poem.md."]

    (write,) = named(traced, "execute_tool Write")
    assert attrs(write)[sc.GEN_AI_TOOL_CALL_ID] == write_id
    assert outcome(write) == "ok"
    assert parent_of(traced, write) is parent_of(traced, chat1)  # a sibling in turn 1

    # The transcript, as the session file and event stream keep it.
    (record,) = agenttrace.current_session().agents.values()
    entries = record.transcript
    assert [(e["role"], e.get("content")) for e in entries] == [
        ("user", "write a poem to poem.md"),
        ("assistant", "I'll write a poem to poem.md."),
        ("tool", entries[2]["content"]),
        ("assistant", "Perfect! poem.md holds the poem."),
    ]
    assert entries[1]["tool_calls"][0]["id"] == write_id
    assert entries[2]["tool_call_id"] == write_id
    assert entries[2]["content"].startswith("File created successfully")


def test_final_output_counts_come_from_stream_events_when_the_program_asks_for_them(
    claude: None, traced: Traced, model: AnthropicServer, work: Path
) -> None:
    model.reset(
        Reply([text("Hello"), text("world")], usage=usage(5, 42, read=7)),
    )
    received = run(
        collect(query(prompt="hi", options=options(model, work, include_partial_messages=True)))
    )

    events = [m.event["type"] for m in received if isinstance(m, StreamEvent)]
    # The program's stream events are all there, as the server sent them.
    assert events.count("message_start") == events.count("message_stop") == 1
    assert events.count("content_block_start") == 2
    (chat,) = named(traced, CHAT)
    assert attrs(chat)[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 42
    assert attrs(chat)[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 7


# --- sessions of several exchanges -------------------------------------------------------------


def test_two_exchanges_of_streaming_input_are_two_runs_of_one_conversation(
    claude: None, traced: Traced, model: AnthropicServer, work: Path
) -> None:
    model.reset(
        Reply([text("one")], usage=usage(1, 1)),
        Reply([text("two")], usage=usage(1, 1)),
    )
    received = run(collect(query(prompt=prompts("first", "second"), options=options(model, work))))

    # Each exchange starts with an init message of its own and ends with a result.
    assert sum(1 for m in received if isinstance(m, SystemMessage) and m.subtype == "init") == 2
    first, second = results(received)
    runs = named(traced, "invoke_agent claude-code")
    assert len(runs) == 2
    assert {attrs(r)[sc.GEN_AI_CONVERSATION_ID] for r in runs} == {first.session_id}
    one_run = ["invoke_agent claude-code [0]", "  turn 1 [1]", f"    {CHAT} [1.1]"]
    assert traced.tree() == one_run * 2
    # Cost and API time are running totals of the session: each run has its own share.
    one, two = (attrs(r) for r in runs)
    assert first.total_cost_usd is not None and second.total_cost_usd is not None
    assert second.total_cost_usd > first.total_cost_usd
    assert one[sc.COST_USD] == pytest.approx(first.total_cost_usd)
    assert two[sc.COST_USD] == pytest.approx(second.total_cost_usd - first.total_cost_usd)
    assert two["claude_agent_sdk.duration_api_ms"] == pytest.approx(
        second.duration_api_ms - first.duration_api_ms
    )
    assert two["claude_agent_sdk.duration_ms"] == second.duration_ms  # its own already
    # One agent across the exchanges, its transcript whole.
    (record,) = agenttrace.current_session().agents.values()
    assert [(e["role"], e.get("content")) for e in record.transcript] == [
        ("user", "first"),
        ("assistant", "one"),
        ("user", "second"),
        ("assistant", "two"),
    ]
    assert {attrs(r)[sc.AGENT_ID] for r in runs} == {record.agent_id}


def test_a_client_session_is_a_run_per_response_until_it_disconnects(
    claude: None, traced: Traced, model: AnthropicServer, work: Path
) -> None:
    model.reset(
        Reply([text("Paris.")], usage=usage(4, 2)),
        Reply([text("About 2.1 million.")], usage=usage(9, 6)),
    )

    async def conversation() -> list[Any]:
        received = []
        async with ClaudeSDKClient(options(model, work)) as client:
            await client.query("Capital of France?")
            received += [m async for m in client.receive_response()]
            await client.query("Its population?")
            received += [m async for m in client.receive_response()]
        return received

    received = run(conversation())
    first, second = results(received)
    runs = named(traced, "invoke_agent claude-code")
    assert [attrs(r)[sc.GEN_AI_CONVERSATION_ID] for r in runs] == [first.session_id] * 2
    assert [attrs(c)[sc.GEN_AI_USAGE_OUTPUT_TOKENS] for c in named(traced, CHAT)] == [2, 6]
    assert attrs(runs[1])[sc.COST_USD] == pytest.approx(
        second.total_cost_usd - first.total_cost_usd  # type: ignore[operator]
    )
    (record,) = agenttrace.current_session().agents.values()
    assert [e.get("content") for e in record.transcript] == [
        "Capital of France?",
        "Paris.",
        "Its population?",
        "About 2.1 million.",
    ]


def test_a_resumed_session_counts_on_from_its_totals_and_goes_on_in_the_same_agent(
    claude: None, traced: Traced, model: AnthropicServer, work: Path, tmp_path: Path
) -> None:
    model.reset(Reply([text("Noted: blue.")], usage=usage(3, 4)))
    first = results(run(collect(query(prompt="My colour is blue.", options=options(model, work)))))
    (before,) = first
    ours = agenttrace.current_session().session_id
    traced.handle.shutdown()  # this process lets the session go: another one may resume it

    # `agenttrace resume` hands the SDK session id back to the SDK (resume=), in a new process.
    model.reset(Reply([text("Your colour is blue.")], usage=usage(8, 5)))
    home = work.parent / "home"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "agenttrace.cli",
            "resume",
            ours,
            "--agent",
            "agenttrace.instrumentation.claude_agent_sdk:rebuild",
            "--prompt",
            "What is my colour?",
            "--sessions-dir",
            str(tmp_path / "sessions"),
        ],
        env=child_env(PYTHONPATH=str(ROOT), **model.env(home)),
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert result.returncode == 0, result.stderr
    assert "Answer: Your colour is blue." in result.stdout
    # The CLI got the conversation back: the earlier exchange is in the resumed request.
    (request,) = model.message_requests()
    assert "My colour is blue." in str(request.body["messages"])
    assert "Noted: blue." in str(request.body["messages"])

    session = agenttrace.load_session(tmp_path / "sessions" / f"{ours}.json.gz")[1]
    (record,) = session.agents.values()  # the same agent, not a new one
    assert [e.get("content") for e in record.transcript] == [
        "My colour is blue.",
        "Noted: blue.",
        "What is my colour?",
        "Your colour is blue.",
    ]
    runs = session.runs
    assert len(runs) == 2
    resumed = runs[1]["span"]["attributes"]
    assert resumed[SESSION_ID] == before.session_id
    # The resumed CLI's total goes on from the first process's: the run has its share only.
    total = resumed["claude_agent_sdk.total_cost_usd"]
    assert total > before.total_cost_usd  # type: ignore[operator]
    assert resumed[sc.COST_USD] == pytest.approx(total - before.total_cost_usd)


# --- sub-agents --------------------------------------------------------------------------------

NOTES = "write notes.md"


def subagent_script(work: Path, background: bool) -> list[Reply]:
    call: dict[str, Any] = {
        "description": "Write notes",
        "prompt": NOTES,
        "subagent_type": "general-purpose",
    }
    if not background:
        call["run_in_background"] = False
    sub, main = asked(NOTES), not_asked(NOTES)
    return [
        Reply([text("Delegating."), tool_use("Agent", call)], usage=usage(11, 21), when=main),
        Reply(
            [
                text("Writing it."),
                tool_use("Write", {"file_path": str(work / "notes.md"), "content": "notes\n"}),
            ],
            usage=usage(12, 22),
            when=sub,
        ),
        Reply([text("Sub-agent done: notes.md written.")], usage=usage(13, 23), when=sub),
        Reply([text("All done.")], usage=usage(14, 24), when=main),
    ]


def test_an_agent_subagent_is_a_session_under_its_tool_call(
    claude: None, traced: Traced, model: AnthropicServer, work: Path
) -> None:
    model.reset(*subagent_script(work, background=False))
    received = run(collect(query(prompt="delegate the notes", options=options(model, work))))

    assert (work / "notes.md").read_text() == "notes\n"
    delegate, sub_write, sub_done, _ = model.sent
    (agent_call,) = delegate.tool_ids
    (write_call,) = sub_write.tool_ids
    assert traced.tree() == [
        "invoke_agent claude-code [0]",
        "  turn 1 [1]",
        f"    {CHAT} [1.1]",
        "    execute_tool Agent [1.2]",
        "      invoke_agent general-purpose [1.2:1]",
        "        turn 1 [1.2.1]",
        f"          {CHAT} [1.2.1.1]",
        "          execute_tool Write [1.2.1.2]",
        "        turn 2 [1.2.2]",
        f"          {CHAT} [1.2.2.1]",
        "  turn 2 [2]",
        f"    {CHAT} [2.1]",
    ]
    (agent_span,) = named(traced, "execute_tool Agent")
    assert attrs(agent_span)[sc.GEN_AI_TOOL_CALL_ID] == agent_call
    assert attrs(agent_span)[sc.KIND] == sc.KIND_SESSION
    (sub,) = named(traced, "invoke_agent general-purpose")
    (result,) = results(received)
    assert attrs(sub)[sc.GEN_AI_CONVERSATION_ID] == result.session_id
    assert "claude_agent_sdk.background" not in attrs(sub)
    (write,) = named(traced, "execute_tool Write")
    assert attrs(write)[sc.GEN_AI_TOOL_CALL_ID] == write_call
    # The sub-agent's attempts, with the server's usage: the last one the SDK never yields
    # (its final report) comes from the CLI's transcript of the sub-agent.
    sub_chats = [c for c in named(traced, CHAT) if attrs(c)[sc.AGENT_ID] == attrs(sub)[sc.AGENT_ID]]
    assert [attrs(c)[sc.GEN_AI_RESPONSE_ID] for c in sub_chats] == [
        sub_write.message_id,
        sub_done.message_id,
    ]
    assert [attrs(c)[sc.GEN_AI_USAGE_OUTPUT_TOKENS] for c in sub_chats] == [22, 23]
    assert [attrs(c)[sc.GEN_AI_USAGE_INPUT_TOKENS] for c in sub_chats] == [12, 13]

    session = agenttrace.current_session()
    main_record, sub_record = session.agents.values()
    assert sub_record.name == "general-purpose"
    # Created by the assistant entry holding the Agent call, as any sub-agent.
    assert sub_record.cause == main_record.transcript[1]["message_id"]
    assert main_record.transcript[1]["tool_calls"][0]["id"] == agent_call
    assert [(e["role"], e.get("content")) for e in sub_record.transcript] == [
        ("user", NOTES),
        ("assistant", None),  # the SDK yields its tool call, not its text
        ("tool", sub_record.transcript[2]["content"]),
        ("assistant", "Sub-agent done: notes.md written."),
    ]
    assert sub_record.transcript[1]["tool_calls"][0]["id"] == write_call


def test_a_background_subagent_is_a_session_under_the_call_that_launched_it(
    claude: None, traced: Traced, model: AnthropicServer, work: Path
) -> None:
    model.reset(*subagent_script(work, background=True))
    received = run(collect(query(prompt="delegate the notes", options=options(model, work))))

    assert (work / "notes.md").read_text() == "notes\n"
    (agent_span,) = named(traced, "execute_tool Agent")
    (sub,) = named(traced, "invoke_agent general-purpose")
    assert parent_of(traced, sub) is agent_span
    assert attrs(sub)["claude_agent_sdk.background"] is True
    (write,) = named(traced, "execute_tool Write")
    assert (
        attrs(parent_of(traced, parent_of(traced, write)))[sc.AGENT_ID] == attrs(sub)[sc.AGENT_ID]
    )
    sub_chats = [c for c in named(traced, CHAT) if attrs(c)[sc.AGENT_ID] == attrs(sub)[sc.AGENT_ID]]
    assert [attrs(c)[sc.GEN_AI_USAGE_OUTPUT_TOKENS] for c in sub_chats] == [22, 23]
    # The CLI may take the sub-agent's completion notice as an exchange of its own: a run each.
    assert len(named(traced, "invoke_agent claude-code")) == len(results(received))


def test_subagents_prompts_and_answers_link_by_the_call_ids_whatever_their_text(
    claude: None, traced: Traced, model: AnthropicServer, work: Path
) -> None:
    # Two sub-agents, one after the other, both answer "Yes.": too short for any content
    # rule, and said twice. The Agent calls' ids say which answer is which.
    def delegate(prompt: str) -> dict[str, Any]:
        return {
            "description": prompt,
            "prompt": prompt,
            "subagent_type": "general-purpose",
            "run_in_background": False,
        }

    main = not_asked("is it ")
    model.reset(
        Reply([tool_use("Agent", delegate("is it red?"))], usage=usage(1, 1), when=main),
        Reply([text("Yes.")], usage=usage(2, 2), when=asked("is it red?")),
        Reply([tool_use("Agent", delegate("is it round?"))], usage=usage(3, 3), when=main),
        Reply([text("Yes.")], usage=usage(4, 4), when=asked("is it round?")),
        Reply([text("Red and round.")], usage=usage(5, 5), when=main),
    )
    run(collect(query(prompt="look at the ball", options=options(model, work))))

    session = agenttrace.current_session()
    events = {e["message_id"]: e for e in session.events}
    order = list(events)
    main_record, red, round_ = session.agents.values()
    calls = [e for e in main_record.transcript if e.get("tool_calls")]
    results = [e for e in main_record.transcript if e.get("role") == "tool"]
    assert len(calls) == len(results) == 2
    for sub, call, result, prompt in zip(
        (red, round_), calls, results, ("is it red?", "is it round?"), strict=True
    ):
        # The prompt the sub-agent heard is the text the call passed on.
        heard = sub.transcript[0]
        piece = events[heard["substance"]]
        assert (heard["role"], heard["content"]) == ("user", prompt)
        assert (piece["event_type"], piece["agent_id"], piece["content"], piece["cause"]) == (
            "piece_of_text",
            main_record.agent_id,
            prompt,
            call["message_id"],
        )
        # The call's result stands for this sub-agent's own final reply, logged before it.
        assert result["tool_call_id"] == call["tool_calls"][0]["id"]
        reply = events[result["substance"]]
        assert (reply["agent_id"], reply["role"], reply["content"]) == (
            sub.agent_id,
            "assistant",
            "Yes.",
        )
        assert order.index(reply["message_id"]) < order.index(result["message_id"])
        # Logged once: the transcript read afterwards gave the same message, not a second one.
        assert [e.get("content") for e in sub.transcript if e["role"] == "assistant"] == ["Yes."]


def test_a_subagents_final_reply_of_two_texts_is_whole_in_its_transcript(
    claude: None, traced: Traced, model: AnthropicServer, work: Path
) -> None:
    # The SDK's completion notice, from which the reply is logged when its call returns, says
    # only its last text block: the transcript read afterwards gives the whole reply.
    call = {
        "description": "check",
        "prompt": "is it red?",
        "subagent_type": "general-purpose",
        "run_in_background": False,
    }
    model.reset(
        Reply([tool_use("Agent", call)], usage=usage(1, 1), when=not_asked("is it red?")),
        Reply([text("I looked."), text("Yes.")], usage=usage(2, 2), when=asked("is it red?")),
        Reply([text("It is red.")], usage=usage(3, 3), when=not_asked("is it red?")),
    )
    run(collect(query(prompt="look at the ball", options=options(model, work))))

    session = agenttrace.current_session()
    main_record, sub = session.agents.values()
    (result,) = [e for e in main_record.transcript if e.get("role") == "tool"]
    linked = next(e for e in session.events if e["message_id"] == result["substance"])
    assert (linked["agent_id"], linked["role"]) == (sub.agent_id, "assistant")
    # What the sub-agent's transcript ends with, to send again, is the whole reply, standing
    # for the reply its call's result stands for.
    final = sub.transcript[-1]
    assert final["content"] == "I looked.\nYes."
    assert final.get("substance", final["message_id"]) == linked["message_id"]
    assert [e["role"] for e in sub.transcript] == ["user", "assistant"]


# --- failures ----------------------------------------------------------------------------------


def test_a_tool_error_is_a_failed_tool_call_in_a_run_that_goes_on(
    claude: None, traced: Traced, model: AnthropicServer, work: Path
) -> None:
    model.reset(
        Reply([tool_use("Read", {"file_path": str(work / "missing.txt")})], usage=usage(2, 3)),
        Reply([text("That file does not exist.")], usage=usage(4, 5)),
    )
    run(collect(query(prompt="read missing.txt", options=options(model, work))))

    (read,) = named(traced, "execute_tool Read")
    assert outcome(read) == "failed"
    assert attrs(read)[sc.ERROR_TYPE] == "ToolError"
    assert attrs(read)[sc.GEN_AI_TOOL_CALL_ID] == model.sent[0].tool_ids[0]
    assert "does not exist" in (read.status.description or "")
    (run_span,) = named(traced, "invoke_agent claude-code")
    assert outcome(run_span) == "ok"


def test_an_sdk_error_result_fails_the_run_and_reaches_the_program_unchanged(
    claude: None, traced: Traced, model: AnthropicServer, work: Path
) -> None:
    model.reset(Reply(status=403, error_message="scripted refusal"))
    received: list[Any] = []

    async def consume() -> None:
        async for message in query(prompt="hi", options=options(model, work)):
            received.append(message)

    with pytest.raises(ResultError) as raised:
        run(consume())
    assert "scripted refusal" in str(raised.value)  # the SDK's own exception

    (result,) = results(received)
    assert result.is_error
    (run_span,) = named(traced, "invoke_agent claude-code")
    assert outcome(run_span) == "failed"
    assert attrs(run_span)[sc.ERROR_TYPE] == "api_error"
    assert attrs(run_span)["claude_agent_sdk.api_error_status"] == 403
    # The request that failed is a failed attempt: the CLI's message for it is no model output.
    (chat,) = named(traced, CHAT)
    assert outcome(chat) == "failed"
    assert attrs(chat)[sc.ERROR_TYPE] == "auth"
    assert sc.GEN_AI_USAGE_OUTPUT_TOKENS not in attrs(chat)


def test_a_turn_limit_is_an_error_result(
    claude: None, traced: Traced, model: AnthropicServer, work: Path
) -> None:
    model.reset(Reply([tool_use("Read", {"file_path": str(work / "x")})], usage=usage(2, 3)))
    with pytest.raises(ResultError):
        run(collect(query(prompt="hi", options=options(model, work, max_turns=1))))

    (run_span,) = named(traced, "invoke_agent claude-code")
    assert outcome(run_span) == "failed"
    assert attrs(run_span)[sc.ERROR_TYPE] == "error_max_turns"
    assert attrs(run_span)["claude_agent_sdk.result.subtype"] == "error_max_turns"


def test_a_request_the_cli_retries_is_a_failed_attempt_before_the_one_that_worked(
    claude: None, traced: Traced, model: AnthropicServer, work: Path
) -> None:
    model.reset(
        Reply(status=429, error_message="slow down", headers={"retry-after": "0"}),
        Reply([text("Hello after the retry.")], usage=usage(3, 7)),
    )
    run(collect(query(prompt="hi", options=options(model, work))))

    assert len(model.sent) == 2
    failed, worked = named(traced, CHAT)
    assert (outcome(failed), attrs(failed)[sc.ATTEMPT], attrs(failed)[sc.ERROR_TYPE]) == (
        "failed",
        1,
        "quota",
    )
    assert (outcome(worked), attrs(worked)[sc.ATTEMPT]) == ("ok", 2)
    assert parent_of(traced, failed) is parent_of(traced, worked)  # one turn, two attempts
    assert attrs(worked)[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 7


# --- the exchange log seam ---------------------------------------------------------------------


class Recording:
    """An exchange log that keeps what it is fed."""

    logs: ClassVar[list[Recording]] = []

    def __init__(self) -> None:
        self.fed: list[Any] = []
        self.closed = 0
        Recording.logs.append(self)

    def log(self, message: Any) -> None:
        self.fed.append(message)

    def log_user_input(self, text: str) -> None:
        self.fed.append(("input", text))

    def close(self) -> None:
        self.closed += 1


def test_the_exchange_log_gets_the_input_then_every_message_and_is_closed_once(
    traced: Traced, model: AnthropicServer, work: Path
) -> None:
    Recording.logs = []
    undo = agenttrace.instrument_claude_agent_sdk(exchange_log=Recording)
    try:
        model.reset(Reply([text("one")]), Reply([text("two")]))
        stream = query(prompt=prompts("first", "second"), options=options(model, work))
        received = run(collect(stream))
    finally:
        undo()
    (log,) = Recording.logs
    assert log.closed == 1
    inputs = [i for i, item in enumerate(log.fed) if isinstance(item, tuple)]
    assert [log.fed[i] for i in inputs] == [("input", "first"), ("input", "second")]
    assert [m for m in log.fed if not isinstance(m, tuple)] == received
    # Each input comes just before the init message of the exchange it starts.
    for i in inputs:
        following = log.fed[i + 1]
        assert isinstance(following, SystemMessage) and following.subtype == "init"


def test_subagents_nest_to_any_depth(
    claude: None, traced: Traced, model: AnthropicServer, work: Path
) -> None:
    # The SDK yields the messages of the first sub-agent only; deeper ones come from the
    # CLI's transcripts of each sub-agent, read when the exchange ends.
    def delegate(name: str) -> dict[str, Any]:
        return {
            "description": name,
            "prompt": f"{name} task",
            "subagent_type": "general-purpose",
            "run_in_background": False,
        }

    def main(body: dict[str, Any]) -> bool:
        return all(not asked(f"{name} task")(body) for name in ("ONE", "TWO", "THREE"))

    deep = str(work / "deep.md")
    model.reset(
        Reply([tool_use("Agent", delegate("ONE"))], usage=usage(1, 1), when=main),
        Reply([tool_use("Agent", delegate("TWO"))], usage=usage(2, 2), when=asked("ONE task")),
        Reply([tool_use("Agent", delegate("THREE"))], usage=usage(3, 3), when=asked("TWO task")),
        Reply(
            [tool_use("Write", {"file_path": deep, "content": "deep\n"})],
            usage=usage(4, 4),
            when=asked("THREE task"),
        ),
        Reply([text("three done")], usage=usage(5, 5), when=asked("THREE task")),
        Reply([text("two done")], usage=usage(6, 6), when=asked("TWO task")),
        Reply([text("one done")], usage=usage(7, 7), when=asked("ONE task")),
        Reply([text("all done")], usage=usage(8, 8), when=main),
    )
    run(collect(query(prompt="go deep", options=options(model, work))))

    assert Path(deep).read_text() == "deep\n"
    assert traced.tree() == [
        "invoke_agent claude-code [0]",
        "  turn 1 [1]",
        f"    {CHAT} [1.1]",
        "    execute_tool Agent [1.2]",
        "      invoke_agent general-purpose [1.2:1]",
        "        turn 1 [1.2.1]",
        f"          {CHAT} [1.2.1.1]",
        "          execute_tool Agent [1.2.1.2]",
        "            invoke_agent general-purpose [1.2.1.2:1]",
        "              turn 1 [1.2.1.2.1]",
        f"                {CHAT} [1.2.1.2.1.1]",
        "                execute_tool Agent [1.2.1.2.1.2]",
        "                  invoke_agent general-purpose [1.2.1.2.1.2:1]",
        "                    turn 1 [1.2.1.2.1.2.1]",
        f"                      {CHAT} [1.2.1.2.1.2.1.1]",
        "                      execute_tool Write [1.2.1.2.1.2.1.2]",
        "                    turn 2 [1.2.1.2.1.2.2]",
        f"                      {CHAT} [1.2.1.2.1.2.2.1]",
        "              turn 2 [1.2.1.2.2]",
        f"                {CHAT} [1.2.1.2.2.1]",
        "        turn 2 [1.2.2]",
        f"          {CHAT} [1.2.2.1]",
        "  turn 2 [2]",
        f"    {CHAT} [2.1]",
    ]
    # Each attempt with the usage the server sent for its message, call ids as sent.
    by_id = {attrs(c)[sc.GEN_AI_RESPONSE_ID]: attrs(c) for c in named(traced, CHAT)}
    for number, sent in enumerate(model.sent, 1):
        assert by_id[sent.message_id][sc.GEN_AI_USAGE_OUTPUT_TOKENS] == number
    calls = {attrs(s)[sc.GEN_AI_TOOL_CALL_ID] for s in traced.ours() if s.name.startswith("exec")}
    assert calls == {sent.tool_ids[0] for sent in model.sent if sent.tool_ids}
    # Each sub-agent was created by the entry of its parent that holds its Agent call.
    records = list(agenttrace.current_session().agents.values())
    assert [r.name for r in records] == ["claude-code"] + ["general-purpose"] * 3
    for parent, child in itertools.pairwise(records):
        holder = next(e for e in parent.transcript if e.get("tool_calls"))
        assert child.cause == holder["message_id"]
        assert child.parent_id == parent.agent_id
    # The Agent call's result stands for the sub-agent's final reply, logged before it: the
    # main agent's (the SDK yields the sub-agent's messages) and those of calls read from a
    # transcript (the deepest); not the one the SDK yields for a call whose sub-agent's
    # messages come from a transcript read later (the order would be wrong): no link there.
    order = [e["message_id"] for e in agenttrace.current_session().events]
    linked = []
    for parent, child in itertools.pairwise(records):
        call_id = next(e for e in parent.transcript if e.get("tool_calls"))["tool_calls"][0]["id"]
        (result,) = [e for e in parent.transcript if e.get("tool_call_id") == call_id]
        final = child.transcript[-1]
        assert final["role"] == "assistant"
        if "substance" in result:
            assert result["substance"] == final["message_id"]
            assert order.index(final["message_id"]) < order.index(result["message_id"])
        linked.append("substance" in result)
    assert linked == [True, False, True]
    # Each sub-agent's transcript in the order it happened: its prompt first, its reply last.
    for child in records[1:]:
        assert child.transcript[0]["role"] == "user"
        assert child.transcript[-1]["content"].endswith("done")
    assert [e.get("content") for e in records[3].transcript][-1] == "three done"


def test_exchange_log_true_writes_seed_004s_log_beside_the_sessions(
    traced: Traced, model: AnthropicServer, work: Path, tmp_path: Path
) -> None:
    undo = agenttrace.instrument_claude_agent_sdk(exchange_log=True)
    try:
        model.reset(
            Reply(
                [
                    text("I'll write a poem to poem.md."),
                    tool_use("Write", {"file_path": str(work / "poem.md"), "content": POEM}),
                ],
                usage=usage(3, 120, write=11530),
            ),
            Reply([text("Perfect!")], usage=usage(6, 24, write=373, read=11530)),
        )
        received = run(collect(query(prompt="write a poem", options=options(model, work))))
    finally:
        undo()
    (result,) = results(received)
    (log,) = (tmp_path / "sessions").glob(f"*_{result.session_id[:8]}.jsonl")
    start, exchange, end = (json.loads(line) for line in log.read_text().splitlines())
    assert (start["type"], start["session_id"], start["permission_mode"]) == (
        "session_start",
        result.session_id,
        "acceptEdits",
    )
    assert exchange["user_input"] == "write a poem"
    assert [(m["source"], m["type"]) for m in exchange["messages"]] == [
        ("assistant", "text"),
        ("assistant", "tool_use"),
        ("tool", "result"),
        ("assistant", "text"),
    ]
    assert exchange["messages"][1]["tool_use_id"] == model.sent[0].tool_ids[0]
    assert exchange["stats"] == {
        "num_turns": 2,
        "duration_ms": result.duration_ms,
        "duration_api_ms": result.duration_api_ms,
        "tokens_in": 9,
        "tokens_out": 144,
        "cache_creation": 11903,
        "cache_read": 11530,
        "cost_usd": result.total_cost_usd,
    }
    assert (end["type"], end["total_exchanges"], end["tools_used"]) == (
        "session_end",
        1,
        {"Write": 1},
    )


def test_a_tool_of_an_mcp_server_is_billed_to_that_server(
    claude: None, traced: Traced, model: AnthropicServer, work: Path, tmp_path: Path
) -> None:
    """An in-process MCP server's tool, as the CLI names it (``mcp__<server>__<tool>``): its
    ledger line names the server as the tool's provider and the tool as the command; the CLI's
    own tools keep their name as the label."""
    from claude_agent_sdk import create_sdk_mcp_server
    from claude_agent_sdk import tool as sdk_tool

    @sdk_tool("add", "Add two numbers", {"a": int, "b": int})
    async def add(args: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": str(args["a"] + args["b"])}]}

    calculator = create_sdk_mcp_server("calculator", tools=[add])
    model.reset(
        Reply([tool_use("mcp__calculator__add", {"a": 2, "b": 3})], usage=usage(2, 3)),
        Reply([tool_use("Read", {"file_path": str(work / "missing.txt")})], usage=usage(4, 5)),
        Reply([text("2 + 3 = 5.")], usage=usage(6, 7)),
    )
    run(
        collect(
            query(
                prompt="add 2 and 3",
                options=options(
                    model,
                    work,
                    mcp_servers={"calculator": calculator},
                    allowed_tools=["mcp__calculator__add", "Read"],
                ),
            )
        )
    )
    traced.handle.force_flush()

    (call,) = named(traced, "execute_tool mcp__calculator__add")
    assert outcome(call) == "ok"
    assert attrs(call)[sc.TOOL_MCP_SERVER] == "calculator"
    answered = model.sent[1].request.body["messages"][-1]["content"]
    assert [(b["type"], b["content"]) for b in answered if b["type"] == "tool_result"] == [
        ("tool_result", [{"type": "text", "text": "5"}])
    ]  # the MCP server really ran
    lines = [json.loads(line) for line in (tmp_path / "accounting.jsonl").read_text().splitlines()]
    tools = [line for line in lines if line["type"] == "tool"]
    labels = [(t["providerLabel"], t.get("mcpServer"), t["command"], t["status"]) for t in tools]
    assert labels == [
        ("calculator", "calculator", "mcp__calculator__add", "ok"),
        ("Read", None, "Read", "failed"),
    ]
