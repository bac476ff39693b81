"""The Claude Agent SDK instrumentation without the CLI: switching it on and off, the CLI's
transcript as untrusted input, and how messages in the SDK's own types become runs (the
orderings the real CLI produces only now and then, made certain here)."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeSDKClient,
    ResultMessage,
    SystemMessage,
    TextBlock,
)
from claude_agent_sdk._internal.client import InternalClient
from opentelemetry.instrumentation.instrumentor import (  # type: ignore[attr-defined]
    BaseInstrumentor,
)

import agenttrace
from agenttrace import semconv as sc
from agenttrace.instrumentation.claude_agent_sdk import transcript as tr
from agenttrace.instrumentation.claude_agent_sdk.tracker import SdkSession

from .conftest import Traced, attrs, outcome
from .helpers import ROOT

PATCHED = [
    (InternalClient, "process_query"),
    (ClaudeSDKClient, "connect"),
    (ClaudeSDKClient, "query"),
    (ClaudeSDKClient, "receive_messages"),
    (ClaudeSDKClient, "disconnect"),
]


def originals() -> list[Any]:
    return [vars(owner)[name] for owner, name in PATCHED]


# --- on and off ---------------------------------------------------------------------------------


@pytest.mark.init(instrument=["claude_agent_sdk"])
def test_init_instruments_the_sdk_by_name_and_shutdown_puts_it_back(traced: Traced) -> None:
    wrapped = originals()
    assert all(hasattr(function, "__wrapped__") for function in wrapped)
    traced.handle.shutdown()
    assert originals() == [function.__wrapped__ for function in wrapped]


def test_an_unknown_library_name_is_refused_before_anything_is_set_up() -> None:
    before = originals()
    with pytest.raises(
        ValueError, match="cannot instrument 'claude_sdk': it knows anthropic, claude_agent"
    ):
        agenttrace.init(instrument=["claude_sdk"])
    assert originals() == before


def test_instrument_and_undo_restore_the_very_functions(traced: Traced) -> None:
    before = originals()
    undo = agenttrace.instrument_claude_agent_sdk(agent_name="poet")
    assert all(a is not b for a, b in zip(originals(), before, strict=True))
    undo()
    assert originals() == before


def test_the_entry_point_names_an_opentelemetry_instrumentor() -> None:
    (line,) = [
        line
        for line in (ROOT / "pyproject.toml").read_text().splitlines()
        if line.startswith("agenttrace_claude_agent_sdk = ")
    ]
    module_name, _, name = line.split('"')[1].partition(":")
    instrumentor = getattr(importlib.import_module(module_name), name)
    assert issubclass(instrumentor, BaseInstrumentor)
    assert list(instrumentor().instrumentation_dependencies()) == ["claude-agent-sdk >= 0.2.180"]


# --- the CLI's transcript, read as untrusted input ---------------------------------------------


def test_transcript_lines_are_read_whole_once_and_bad_ones_skipped(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    assistant = (
        '{"type":"assistant","timestamp":"2026-11-23T04:05:32.777Z","message":{"id":"msg_1",'
        '"model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn",'
        '"usage":{"input_tokens":3,"output_tokens":7}}}\n'
    )
    path.write_text(
        "not json\n"
        '["a list"]\n'
        '{"type":"assistant","message":"no id"}\n' + assistant + '{"type":"user","message":'
    )
    reader = tr.TranscriptReader(path)
    (entry,) = reader.read()
    assert isinstance(entry, tr.AssistantEntry)
    assert (entry.message_id, entry.usage, entry.stop_reason) == (
        "msg_1",
        {"input_tokens": 3, "output_tokens": 7},
        "end_turn",
    )
    assert entry.ts_ns == 1795406732777000000
    assert reader.read() == []  # the unfinished last line waits
    with path.open("a") as file:
        file.write('{"role":"user","content":"x"}}\n')
    assert reader.read() == [tr.UserEntry(None, [])]  # finished now
    path.write_text(assistant)  # rewritten shorter: read again from its start
    assert [e.message_id for e in reader.read()] == ["msg_1"]  # type: ignore[union-attr]


def test_a_transcript_that_is_not_a_regular_file_is_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    reader = tr.TranscriptReader(fifo)
    assert reader.read() == []  # no wait on the pipe
    assert reader.failed
    assert tr.TranscriptReader(tmp_path / "missing.jsonl").read() == []


def test_a_line_longer_than_a_read_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tr, "MAX_READ", 64)
    path = tmp_path / "session.jsonl"
    path.write_text("x" * 200 + "\n" + '{"type":"cost-state","totalCostUSD":0.5}\n')
    reader = tr.TranscriptReader(path)
    while not (entries := reader.read()) and reader.offset < path.stat().st_size:
        pass
    assert entries == [tr.CostState(0.5, None)]


def test_a_resumed_transcript_gives_its_last_totals_and_is_read_from_its_end(
    tmp_path: Path,
) -> None:
    path = tmp_path / "session.jsonl"
    path.write_text(
        '{"type":"cost-state","totalCostUSD":0.1,"totalAPIDuration":10}\n'
        '{"type":"cost-state","totalCostUSD":0.25,"totalAPIDuration":30}\n'
    )
    reader = tr.TranscriptReader(path)
    assert reader.skip_to_end() == tr.CostState(0.25, 30.0)
    assert reader.read() == []


def test_only_ids_that_name_a_file_are_looked_up(tmp_path: Path) -> None:
    project = tmp_path / "projects" / "-work"
    project.mkdir(parents=True)
    (project / "abc-123.jsonl").write_text("{}\n")
    assert tr.session_file(tmp_path, "/work", "abc-123") == project / "abc-123.jsonl"
    assert tr.session_file(tmp_path, "/elsewhere", "abc-123") == project / "abc-123.jsonl"
    assert tr.session_file(tmp_path, "/work", "../../etc/passwd") is None
    assert tr.subagent_file(project / "abc-123.jsonl", "../x") is None
    assert tr.config_dir({"CLAUDE_CONFIG_DIR": "/c"}) == Path("/c")
    assert tr.config_dir({"HOME": "/h"}) == Path("/h/.claude")


# --- messages in the SDK's types ----------------------------------------------------------------


class Options:
    """The options fields the instrumentation reads (no CLI runs in these tests)."""

    include_partial_messages = False
    env: dict[str, str] = {}  # noqa: RUF012


def init(session_id: str = "s-1") -> SystemMessage:
    return SystemMessage(
        "init", {"type": "system", "subtype": "init", "session_id": session_id, "model": "m"}
    )


def said(text: str, message_id: str) -> AssistantMessage:
    return AssistantMessage(
        [TextBlock(text)], "m", usage={"input_tokens": 2, "output_tokens": 1}, message_id=message_id
    )


def result(total: float, api_ms: int, text: str = "done") -> ResultMessage:
    return ResultMessage("success", 5, api_ms, False, 1, "s-1", total_cost_usd=total, result=text)


def test_a_held_result_ends_the_oldest_exchange_and_messages_go_to_the_newest(
    traced: Traced,
) -> None:
    # A background sub-agent's notice starts an exchange before the CLI lets the first
    # exchange's result go: both results come at the end, in order.
    session = SdkSession(Options())
    for message in (
        init(),
        said("first", "msg_a"),
        init(),
        said("second", "msg_b"),
        result(0.5, 100, "first"),
        result(0.75, 140, "second"),
    ):
        session.observe(message)
    session.close()

    runs = [s for s in traced.ours() if s.name == "invoke_agent claude-code"]
    assert [attrs(r)[sc.COST_USD] for r in runs] == [0.5, 0.25]
    assert [attrs(r)["claude_agent_sdk.duration_api_ms"] for r in runs] == [100, 40]
    chats = [s for s in traced.ours() if s.name == "chat m"]
    assert [c.parent.span_id for c in chats] != [None, None]  # type: ignore[union-attr]
    turn_of = {s.context.span_id: s for s in traced.ours()}
    assert [
        turn_of[turn_of[c.parent.span_id].parent.span_id].context.span_id  # type: ignore[union-attr]
        for c in chats
    ] == [r.context.span_id for r in runs]
    # Without a transcript the final output counts are unknown, never message_start's 1.
    assert all(sc.GEN_AI_USAGE_OUTPUT_TOKENS not in attrs(c) for c in chats)
    assert all(attrs(c)["claude_agent_sdk.output_tokens_final"] is False for c in chats)


def test_a_total_lower_than_the_last_is_counted_afresh(traced: Traced) -> None:
    session = SdkSession(Options())
    for message in (init(), result(0.5, 100), init(), result(0.2, 30)):
        session.observe(message)
    runs = [s for s in traced.ours() if s.name == "invoke_agent claude-code"]
    assert [attrs(r)[sc.COST_USD] for r in runs] == [0.5, 0.2]


def test_a_stream_the_program_stops_reading_ends_its_run_when_the_last_message_came(
    traced: Traced,
) -> None:
    session = SdkSession(Options())
    session.user_input("hi")
    session.observe(init())
    session.observe(said("partial", "msg_a"))
    last = session.last_seen_ns
    session.close()
    (run,) = [s for s in traced.ours() if s.name == "invoke_agent claude-code"]
    assert outcome(run) == "ok"
    assert attrs(run)[sc.STREAM_ABANDONED] is True
    assert run.end_time == last
    assert "claude_agent_sdk.result.subtype" not in attrs(run)
