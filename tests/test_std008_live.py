"""The STD-008 document written as the session runs (``init(std008_dir=...)``; seed 003,
sections 5.1 and 5.2; docs/std008.md, "Written live").

Real runs: agents written with agenttrace's decorators, talking to the local LLM server over
HTTP. The live file is read from inside the agents, at the points the document must already
say what happened, and compared at the end with the export of the same session.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import litellm
import pytest
from opentelemetry.sdk.trace import TracerProvider

import agenttrace
from agenttrace._internal import errors as internal_errors
from agenttrace._internal.config import Settings
from agenttrace.formats.session.files import snapshot_path
from agenttrace.formats.std008 import schema as std008_schema
from agenttrace.formats.std008.live import live_path, single_task_form
from agenttrace.formats.std008.rules import validate
from agenttrace.recorder.std008_live import Std008LiveSink
from agenttrace.views.exports import to_std008

from .llm_server import LLMServer, Reply


class Live:
    """A traced process that writes STD-008 documents live into ``directory``."""

    def __init__(self, handle: agenttrace.Tracing, directory: Path, sessions: Path) -> None:
        self.handle = handle
        self.directory = directory
        self.sessions = sessions
        self.session_id = ""

    def read(self) -> dict[str, Any]:
        """The live document now (after the recorder's worker has caught up)."""
        self.handle.force_flush()
        path = live_path(self.directory, self.session_id)
        document: dict[str, Any] = json.loads(path.read_text())
        return document

    def export(self) -> dict[str, Any]:
        """What ``agenttrace export --format std008`` writes for the session."""
        return to_std008(snapshot_path(self.sessions, self.session_id))


def traced_into(provider: TracerProvider, tmp_path: Path, std008_dir: Path) -> agenttrace.Tracing:
    """agenttrace on ``provider``, a new session, files under ``tmp_path``, the live STD-008
    document in ``std008_dir``."""
    agenttrace.use_session(None)
    return agenttrace.init(
        tracer_provider=provider,
        console_stream=io.StringIO(),
        sessions_dir=tmp_path / "sessions",
        billing_file=tmp_path / "accounting.jsonl",
        std008_dir=std008_dir,
    )


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    provider = TracerProvider()
    handle = traced_into(provider, tmp_path, tmp_path / "std008")
    try:
        yield Live(handle, tmp_path / "std008", tmp_path / "sessions")
    finally:
        handle.shutdown()
        provider.shutdown()
        agenttrace.use_session(None)


@pytest.fixture(scope="module")
def published() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(std008_schema.published_text()))


def valid(document: dict[str, Any], published: jsonschema.Draft202012Validator) -> bool:
    """Whether ``document`` passes the published schema and section 6's rules."""
    published.validate(document)
    assert validate(document) == []
    return True


def ask(server: LLMServer, text: str) -> str:
    """One model call over HTTP to the local LLM server."""
    reply = litellm.completion(
        model="openai/gpt-4o-mini",
        messages=[{"role": "user", "content": text}],
        api_base=server.api_base,
        api_key="sk-agenttrace-test-key-0001",
        max_retries=0,
    )
    return str(reply.choices[0].message.content)


def team(
    live: Live, server: LLMServer, seen: list[dict[str, Any]], calls: int
) -> Callable[[], None]:
    """A lead whose ``task`` tool runs a helper sub-agent, ``calls`` times; what the live file
    says is appended to ``seen`` at the lead's start, as each helper starts and after each
    helper ran (inside the tool call, which has not ended)."""

    @agenttrace.agent("Helper")
    def helper(prompt: str) -> str:
        seen.append(live.read())  # the sub-session has started
        return ask(server, prompt)

    @agenttrace.tool
    def task(prompt: str) -> str:
        answer = helper(prompt)
        seen.append(live.read())  # the sub-session has ended, its call has not
        return answer

    @agenttrace.agent("Lead")
    def lead() -> None:
        seen.append(live.read())  # the session has started
        ask(server, "Plan the work")
        for number in range(1, calls + 1):
            task(f"Write part {number}")

    return lead


def run(live: Live, server: LLMServer, calls: int) -> list[dict[str, Any]]:
    server.reset(*(Reply(content=f"answer {n}") for n in range(1, 2 * calls + 2)))
    seen: list[dict[str, Any]] = []
    lead = team(live, server, seen, calls)
    live.session_id = agenttrace.new_session().session_id
    lead()
    seen.append(live.read())
    return seen


def test_a_single_task_call_is_written_live_in_the_single_task_form(
    live: Live, llm_server: LLMServer, published: jsonschema.Draft202012Validator
) -> None:
    started, sub_started, sub_ended, final = run(live, llm_server, calls=1)
    assert started["collaboration"]["mode"] == "single" and started["tool_calls"] == []
    assert started["status"] == "in_progress" and valid(started, published)
    # Section 5.1: one Task call is STD-001 with SubagentInfo, from the moment it starts.
    for document in (sub_started, sub_ended, final):
        assert valid(document, published)
        assert document["collaboration"]["mode"] == "single"
        assert document["sub_sessions"] == [] and document["messages"] == []
        (call,) = document["tool_calls"]
        assert call["tool_name"] == "task"
        assert call["subagent_info"]["subagent_type"] == "developer"
        assert "sub_session_id" not in call["subagent_info"]
    assert "ended_at" not in sub_ended["tool_calls"][0]
    assert final["tool_calls"][0]["subagent_info"]["tokens_used"] > 0
    assert final["status"] != "in_progress"
    # The export writes STD-008 for the same session; the live file is its single-task form.
    export = live.export()
    assert export["collaboration"]["mode"] == "multi_agent"
    assert final == single_task_form(export)


def test_a_second_task_call_switches_the_live_file_to_std008(
    live: Live, llm_server: LLMServer, published: jsonschema.Draft202012Validator
) -> None:
    seen = run(live, llm_server, calls=2)
    *_, second_started, second_ended, final = seen
    for document in seen:
        assert valid(document, published)
    assert [d["collaboration"]["mode"] for d in seen] == [
        "single",
        "single",
        "single",
        "multi_agent",
        "multi_agent",
        "multi_agent",
    ]
    first, second = second_started["sub_sessions"]
    assert first["status"] == "success" and second["status"] == "in_progress"
    assert [m["message_type"] for m in second_started["messages"]] == [
        "task_assignment",
        "task_completion",
        "task_assignment",
    ]
    assert second_ended["sub_sessions"][1]["output"]["summary"] == "answer 3"
    assert [s["task"]["description"] for s in final["sub_sessions"]] == [
        "Write part 1",
        "Write part 2",
    ]
    assert final == live.export()


def test_a_single_task_call_with_a_review_is_std008(live: Live, llm_server: LLMServer) -> None:
    llm_server.reset(Reply(content="APPROVED: it works"))

    @agenttrace.agent("Checker", role="reviewer")
    def checker(prompt: str) -> str:
        return ask(llm_server, prompt)

    @agenttrace.tool
    def review(prompt: str) -> str:
        return checker(prompt)

    @agenttrace.agent("Lead")
    def lead() -> None:
        review("Review part 1")

    live.session_id = agenttrace.new_session().session_id
    lead()
    final = live.read()
    # Section 5.1: a Task with a review cycle is STD-008, even with one call.
    assert final["collaboration"]["mode"] == "multi_agent"
    assert [m["message_type"] for m in final["messages"]] == ["review_request", "review_result"]
    assert final == live.export()


def shouting_task() -> Callable[[str], str]:
    """A ``task`` tool whose Helper sub-agent answers its prompt in capitals, with no model."""

    @agenttrace.agent("Helper")
    def helper(prompt: str) -> str:
        return prompt.upper()

    @agenttrace.tool
    def task(prompt: str) -> str:
        return helper(prompt)

    return task


def test_a_directory_that_cannot_be_written_leaves_the_agent_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(internal_errors, "raise_internal_errors", False)
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    provider = TracerProvider()
    handle = traced_into(provider, tmp_path, blocked)

    task = shouting_task()

    @agenttrace.agent("Lead")
    def lead() -> str:
        return task("a") + task("b")

    try:
        with caplog.at_level(logging.WARNING, logger="agenttrace"):
            session = agenttrace.new_session()
            assert lead() == "AB"
            handle.force_flush()
    finally:
        handle.shutdown()
        provider.shutdown()
        agenttrace.use_session(None)
    warnings = [r.getMessage() for r in caplog.records if "live STD-008" in r.getMessage()]
    assert len(warnings) == 1
    assert snapshot_path(tmp_path / "sessions", session.session_id).exists()


def test_changes_closer_than_the_interval_are_written_once_and_flush_writes_them(
    live: Live,
) -> None:
    """The document is made from the whole session, so it is not made at every sub-session
    start and end (a session of many sub-agents would cost the square of their number): a
    change within ``min_interval`` of the last write waits, and ``force_flush`` writes it."""
    processor = live.handle.processor
    assert processor is not None
    (sink,) = [s for s in processor.sinks if isinstance(s, Std008LiveSink)]
    sink.throttle.min_interval = 3600.0  # every change after the first write waits for the flush
    live.session_id = agenttrace.new_session().session_id
    path = live_path(live.directory, live.session_id)
    inside: list[dict[str, Any]] = []

    def worker_caught_up() -> None:  # the records so far consumed, no sink flushed
        assert processor.worker.flush(30)

    task = shouting_task()

    @agenttrace.agent("Lead")
    def lead() -> None:
        for part in range(5):
            task(f"part {part}")
            worker_caught_up()
            inside.append(json.loads(path.read_text()))

    lead()
    worker_caught_up()
    # Written once, at the lead's start: five sub-sessions started and ended since.
    assert [(d["status"], d["tool_calls"]) for d in inside] == [("in_progress", [])] * 5
    assert json.loads(path.read_text()) == inside[0]
    final = live.read()  # force_flush
    assert final["status"] != "in_progress"
    assert [s["task"]["description"] for s in final["sub_sessions"]] == [
        f"part {part}" for part in range(5)
    ]
    assert final == live.export()


def test_the_setting_comes_from_agenttrace_std008_dir() -> None:
    assert Settings.resolve({}).std008_dir is None
    assert Settings.resolve({"AGENTTRACE_STD008_DIR": "~/docs"}).std008_dir == (
        Path("~/docs").expanduser()
    )
    given = Settings.resolve({"AGENTTRACE_STD008_DIR": "/a"}, std008_dir="/b")
    assert given.std008_dir == Path("/b")
