"""STD-008 multi-agent session documents (seed 003): export, validation and import.

The sessions are real: the cafe demo run in-process on its scripted model, and agents written
here with agenttrace's decorators. Documents are checked against the seed's rules and its
section 7.1 example, word for word.
"""

from __future__ import annotations

import asyncio
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import litellm
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider

import agenttrace
from agenttrace.cli import main
from agenttrace.formats.documents import read_document
from agenttrace.formats.session import schema
from agenttrace.formats.session.files import (
    LoadedFile,
    SessionFileError,
    read_session_file,
    snapshot_path,
)
from agenttrace.formats.session.totals import session_stats
from agenttrace.formats.std008 import schema as std008_schema
from agenttrace.formats.std008.rules import validate
from agenttrace.views.exports import to_jaeger, to_otlp_json, to_std008, write_std008
from agenttrace.views.tree import render_optree
from agenttrace.views.viewer import format_dialog
from examples.cafe import SCRIPTS, run_first, run_resumed
from examples.scripted_model import ScriptedModel

from .conftest import Traced


@dataclass
class Recorded:
    """A session recorded for the module, and its session file."""

    snapshot: Path
    loaded: LoadedFile


@pytest.fixture(scope="module")
def cafe(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """The cafe scenario: a root agent creates Jack and Jill and runs them under ``discuss``."""
    return record_cafe(tmp_path_factory.mktemp("std008"))


def record_cafe(directory: Path) -> Recorded:
    """Run the cafe scenario in-process on its scripted model, its session into
    ``directory``."""
    provider = TracerProvider()
    agenttrace.use_session(None)
    handle = agenttrace.init(
        tracer_provider=provider,
        sessions_dir=directory / "sessions",
        billing_file=directory / "accounting.jsonl",
        console_stream=io.StringIO(),
    )
    try:
        session = agenttrace.new_session()
        with ScriptedModel(SCRIPTS) as model:
            asyncio.run(run_first({"api_key": "offline-test-key", "api_base": model.api_base}))
        handle.force_flush()
    finally:
        handle.shutdown()
        provider.shutdown()
        agenttrace.use_session(None)
    snapshot = snapshot_path(directory / "sessions", session.session_id)
    return Recorded(snapshot, read_session_file(snapshot))


def cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


# --- export --------------------------------------------------------------------------------------


def test_the_cafe_exports_as_a_master_worker_document_with_two_participants(
    cafe: Recorded,
) -> None:
    document = to_std008(cafe.snapshot)
    collaboration = document["collaboration"]
    assert collaboration["mode"] == "multi_agent" and collaboration["pattern"] == "master_worker"
    assert collaboration["orchestrator"]["agent_type"] == "architect"
    participants = collaboration["participants"]
    assert [(p.get("name"), p["agent_type"]) for p in participants] == [
        ("Jack", "developer"),
        ("Jill", "developer"),
    ]
    calls = {call["tool_name"]: call for call in document["tool_calls"]}
    assert [call["tool_name"] for call in document["tool_calls"]] == ["task", "task", "discuss"]
    discuss = calls["discuss"]
    assert discuss["tool_category"] == "interaction"
    info = discuss["subagent_info"]
    subs = document["sub_sessions"]
    assert [s["agent"]["name"] for s in subs] == ["Jack", "Jill"]
    assert info["sub_session_ids"] == [s["sub_session_id"] for s in subs]
    assert info["sub_session_id"] == subs[0]["sub_session_id"]
    assert info["tokens_used"] > 0 and info["tool_uses"] == 0
    for sub in subs:
        assert sub["triggered_by_call_id"] == discuss["call_id"]
        assert sub["parent_session_id"] == document["session_id"]
        assert sub["task"]["description"] == "You meet in a cafe. Introduce yourselves."
        assert sub["status"] == "success" and sub["tool_calls"] == []
    assert subs[0]["output"]["summary"] == "Hi, I'm Jack. *extends hand*"
    assert [m["message_type"] for m in document["messages"]] == [
        "task_assignment",
        "task_completion",
        "task_assignment",
        "task_completion",
    ]
    assert [m["sequence_number"] for m in document["messages"]] == [1, 2, 3, 4]
    summary = document["summary"]
    assert summary["tasks"] == {"total": 2, "completed": 2, "failed": 0}
    assert summary["agents"]["architect"]["tool_calls_count"] == 3
    assert [d["agent_id"] for d in summary["agents"]["developers"]] == [
        p["agent_id"] for p in participants
    ]
    assert document["user_prompt"] == "Create Jack and Jill for a cafe discussion"


def test_a_single_agent_session_exports_in_the_single_agent_form(
    traced: Traced, tmp_path: Path
) -> None:
    @agenttrace.tool
    def read_notes(topic: str) -> str:
        return f"notes on {topic}"

    @agenttrace.agent("Solo")
    def solo() -> str:
        return read_notes("cafes")

    session = agenttrace.new_session()
    solo()
    traced.handle.force_flush()
    document = to_std008(snapshot_path(tmp_path / "sessions", session.session_id))
    assert document["collaboration"] == {
        "mode": "single",
        "pattern": "master_worker",
        "orchestrator": {"agent_id": "agent_001", "agent_type": "architect", "name": "Solo"},
        "participants": [],
    }
    assert document["sub_sessions"] == [] and document["messages"] == []
    (call,) = document["tool_calls"]
    assert call["tool_name"] == "read_notes" and call["tool_category"] == "perception"
    assert call["input"] == {"params": {"topic": "cafes"}}
    assert call["output"] == {"status": "success", "result": "notes on cafes"}


def test_export_into_a_directory_names_the_file_as_section_2_1_says(
    cafe: Recorded, tmp_path: Path
) -> None:
    first = write_std008(cafe.snapshot, tmp_path)
    second = write_std008(cafe.snapshot, tmp_path)
    date = to_std008(cafe.snapshot)["created_at"][:10]
    assert first.name == f"{date}-001-create-jack-and-jill-for-multi.json"
    assert second.name == f"{date}-002-create-jack-and-jill-for-multi.json"
    assert json.loads(first.read_text()) == to_std008(cafe.snapshot)

    result = cli("export", str(cafe.snapshot), "--format", "std008", "-o", str(tmp_path))
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / f"{date}-003-create-jack-and-jill-for-multi.json").is_file()
    result = cli("export", str(cafe.snapshot), "--format", "std008")
    assert result.exit_code == 0 and json.loads(result.stdout) == to_std008(cafe.snapshot)


def test_only_document_formats_write_into_a_directory(cafe: Recorded, tmp_path: Path) -> None:
    result = cli("export", str(cafe.snapshot), "--format", "jaeger", "-o", str(tmp_path))
    assert result.exit_code == 2
    assert result.stderr.strip().endswith(": is a directory (only --format std008 names files)")


# --- validation -----------------------------------------------------------------------------------

EXAMPLE = Path(__file__).parent / "data" / "std008_example_7_1.json"
"""The seed's section 7.1 example, word for word."""


def example() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(EXAMPLE.read_text())
    return document


def write(tmp_path: Path, document: Any, name: str = "doc-multi.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


def test_the_seed_example_validates_by_the_rules_and_the_published_schema() -> None:
    assert validate(example()) == []
    assert validate(example(), strict=True) == []
    assert list(published_validator().iter_errors(example())) == []


def test_the_published_schema_is_generated_from_the_structs() -> None:
    assert std008_schema.published_text() == std008_schema.schema_text()
    docs = Path(__file__).parent.parent / "docs" / std008_schema.SCHEMA_RESOURCE
    assert docs.read_text() == std008_schema.schema_text()


def published_validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(std008_schema.published_text()))


def _no_trigger(document: dict[str, Any]) -> None:
    document["sub_sessions"][0]["triggered_by_call_id"] = "tool-999"


def _trigger_not_a_task(document: dict[str, Any]) -> None:
    document["sub_sessions"][0]["triggered_by_call_id"] = "tool-001"  # the Read call


def _missing_sub_session(document: dict[str, Any]) -> None:
    document["tool_calls"][2]["subagent_info"]["sub_session_id"] = "sub-999"


def _unknown_sender(document: dict[str, Any]) -> None:
    document["messages"][1]["from_agent"]["agent_id"] = "developer-99"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (_no_trigger, "sub_session sub-001 has invalid trigger"),
        (_trigger_not_a_task, "sub_session sub-001 has invalid trigger"),
        (_missing_sub_session, "Task call tool-003 references missing sub_session"),
        (_unknown_sender, "Message msg-002 from unknown agent"),
    ],
)
def test_each_consistency_rule_reports_the_seeds_message(
    mutate: Any, message: str, tmp_path: Path
) -> None:
    document = example()
    mutate(document)
    assert validate(document) == [message]
    assert validate(document, strict=True) == [message]
    result = cli("validate", str(write(tmp_path, document)))
    assert (result.exit_code, result.stdout) == (1, message + "\n")


def _without(*path: Any) -> Any:
    def mutate(document: dict[str, Any]) -> None:
        target = document
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return mutate


def _no_sub_sessions(document: dict[str, Any]) -> None:
    document["sub_sessions"] = []
    document["tool_calls"] = document["tool_calls"][:1]


MISSING = "Object missing required field"
ISO = "Expected an ISO 8601 time with its offset (2026-01-26T10:00:05Z)"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (_without("collaboration", "pattern"), f"$.collaboration: {MISSING} `pattern`"),
        (_without("collaboration", "orchestrator"), f"$.collaboration: {MISSING} `orchestrator`"),
        (_without("messages"), f"$: {MISSING} `messages` (a multi_agent session)"),
        (_without("sub_sessions"), f"$: {MISSING} `sub_sessions` (a multi_agent session)"),
        (_no_sub_sessions, "multi_agent session has no sub_session (section 6.1: at least one)"),
    ],
)
def test_the_required_fields_of_section_6_1(mutate: Any, message: str) -> None:
    document = example()
    mutate(document)
    assert message in validate(document)
    if not message.startswith("multi_agent"):  # the schema says the same
        assert list(published_validator().iter_errors(document))


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("sub_sessions.0.task.priority", "urgent", "Invalid enum value 'urgent'"),
        ("collaboration.participants.0.agent_type", "tester", "Invalid enum value 'tester'"),
        ("messages.0.message_type", "chat", "Invalid enum value 'chat'"),
        ("messages.0.timestamp", "10:00 on Monday", ISO),
        ("created_at", "2026-01-26T10:00:00", ISO),
        ("sub_sessions.1.output.verdict", "meh", "Invalid enum value 'meh' (a ReviewerOutput)"),
        (
            "sub_sessions.0.output.changes",
            [],
            "Expected `object`, got `array` (a DeveloperOutput)",
        ),
        ("summary.tasks.total", -1, "Expected `int` >= 0"),
    ],
)
def test_types_enums_and_times_are_checked(path: str, value: Any, message: str) -> None:
    document = example()
    keys = [int(key) if key.isdigit() else key for key in path.split(".")]
    target = document
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value
    where = "$" + "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in keys)
    assert validate(document) == [f"{where}: {message}"]
    assert list(published_validator().iter_errors(document)), "the schema agrees"


def test_agenttraces_own_checks_report_broken_links() -> None:
    document = example()
    document["messages"][0]["to_agent"]["agent_id"] = "nobody"
    document["sub_sessions"][1]["sub_session_id"] = "sub-001"
    document["sub_sessions"][1]["tool_calls"][0]["call_id"] = "tool-001"
    assert validate(document) == [
        "sub_session_id sub-001 is not unique",
        "call_id tool-001 is not unique",
        "Task call tool-003 references missing sub_session",  # sub-002 is gone
        "Message msg-001 to unknown agent",
    ]


def test_a_cafe_export_validates_and_strict_mode_wants_task_calls(
    cafe: Recorded, tmp_path: Path
) -> None:
    path = write_std008(cafe.snapshot, tmp_path)
    result = cli("validate", str(path))
    assert result.exit_code == 0, result.stdout
    assert (
        result.stdout
        == f"{path}: valid STD-008 document (multi_agent, 2 sub-session(s), 4 message(s))\n"
    )
    assert list(published_validator().iter_errors(json.loads(path.read_text()))) == []
    result = cli("validate", "--strict", str(path))
    subs = [sub["sub_session_id"] for sub in json.loads(path.read_text())["sub_sessions"]]
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [f"sub_session {sub} has invalid trigger" for sub in subs]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file, not a JSON document"),
        (b"{not json", "not JSON, not a JSON document"),
        (b"\x1f\x8b\x08\x00", "a gzip file, not a JSON document"),
        (b"[" * 300 + b"]" * 300, "nested more than 200 levels deep"),
    ],
)
def test_validate_an_unreadable_file_exits_2_with_one_line(
    content: bytes, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    result = cli("validate", str(path))
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"agenttrace: error: {path}: ") and message in line


def test_validate_reads_no_more_than_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTTRACE_MAX_DECOMPRESSED_BYTES", "100")
    result = cli("validate", str(write(tmp_path, example())))
    assert result.exit_code == 2
    assert "a document of more than 100 bytes, the limit" in result.stderr


# --- a team with roles and categories ----------------------------------------------------------


def say(text: str) -> str:
    """What an agent says through its model (litellm's own offline mock)."""
    messages = [{"role": "user", "content": "go on"}]
    reply = litellm.completion(model="gpt-4o-mini", messages=messages, mock_response=text)
    return str(reply.choices[0].message.content)


@agenttrace.tool
def read_file(path: str) -> str:
    return f"contents of {path}"


@agenttrace.tool(category="action")
def write_file(path: str, text: str) -> int:
    return len(text)


@agenttrace.tool(category="reasoning")
def plan(goal: str) -> str:
    return f"plan for {goal}"


@agenttrace.agent("Coder")
def coder(task: str) -> str:
    read_file("spec.md")
    write_file("auth.py", "code")
    if "fail" in task:
        raise RuntimeError("the build broke")
    return say("Implemented the auth component")


@agenttrace.agent("Checker", role="reviewer")
def checker(task: str) -> str:
    read_file("auth.py")
    return say("Changes requested: add tests" if "first" in task else "APPROVED: tests pass")


@agenttrace.agent("Helper")
def helper(task: str) -> str:
    return say(f"helped with {task}")


@agenttrace.tool
def delegate(prompt: str) -> str:
    return coder(prompt)


@agenttrace.tool
def review(prompt: str) -> str:
    return checker(prompt)


@agenttrace.tool
def ask_helper(prompt: str) -> str:
    return helper(prompt)


@agenttrace.agent("Lead", role="architect")
def lead() -> None:
    plan("auth")
    delegate("Implement auth")
    review("Review auth, first pass")
    review("Review auth again")
    with pytest.raises(RuntimeError):
        delegate("Implement auth, fail this time")


@pytest.fixture
def team(traced: Traced, tmp_path: Path) -> Path:
    return run_team(traced, tmp_path)


def run_team(traced: Traced, tmp_path: Path) -> Path:
    """Run the team (a lead, a coder, a reviewer twice, a coder that fails): its file."""
    session = agenttrace.new_session()
    lead()
    traced.handle.force_flush()
    return snapshot_path(tmp_path / "sessions", session.session_id)


def test_roles_and_categories_given_in_code_reach_the_document(team: Path) -> None:
    document = to_std008(team)
    assert validate(document) == []
    types = {p["name"]: p["agent_type"] for p in document["collaboration"]["participants"]}
    assert types == {"Coder": "developer", "Checker": "reviewer"}
    categories = {c["tool_name"]: c["tool_category"] for c in document["tool_calls"]}
    assert categories == {"plan": "reasoning", "delegate": "interaction", "review": "interaction"}
    coder_calls = document["sub_sessions"][0]["tool_calls"]
    assert [(c["tool_name"], c["tool_category"]) for c in coder_calls] == [
        ("read_file", "perception"),
        ("write_file", "action"),
    ]


def test_reviews_failures_and_totals_follow_from_the_runs(team: Path) -> None:
    document = to_std008(team)
    kinds = [(m["message_type"], m["from_agent"]["name"]) for m in document["messages"]]
    assert kinds == [
        ("task_assignment", "Lead"),
        ("task_completion", "Coder"),
        ("review_request", "Lead"),
        ("review_result", "Checker"),
        ("review_request", "Lead"),
        ("review_result", "Checker"),
        ("task_assignment", "Lead"),
        ("abort", "Coder"),
    ]
    results = [m["payload"] for m in document["messages"] if m["message_type"] == "review_result"]
    first_task = document["sub_sessions"][0]["task"]["task_id"]
    assert [(r["verdict"], r["task_id"]) for r in results] == [
        ("changes_requested", first_task),
        ("approved", first_task),
    ]
    abort = document["messages"][-1]["payload"]
    assert abort["status"] == "failed" and abort["reason"] == "RuntimeError: the build broke"
    failed = document["sub_sessions"][-1]
    assert failed["status"] == "failed" and failed["output"]["status"] == "failed"
    assert document["tool_calls"][-1]["output"]["status"] == "error"
    summary = document["summary"]
    assert summary["tasks"] == {"total": 2, "completed": 1, "failed": 1}
    assert summary["review_iterations"] == 2 and summary["final_verdict"] == "approved"
    assert summary["agents"]["reviewer"]["agent_type"] == "reviewer"
    assert summary["agents"]["reviewer"]["tool_calls_count"] == 2
    (developer,) = summary["agents"]["developers"]
    assert developer["status"] == "failed" and developer["tool_calls_count"] == 4
    tokens = document["tool_calls"][1]["subagent_info"]["tokens_used"]
    assert tokens > 0 and document["tool_calls"][1]["subagent_info"]["tool_uses"] == 2


def test_a_sub_agent_of_a_sub_agent_links_to_the_call_inside_its_parent(
    traced: Traced, tmp_path: Path
) -> None:
    @agenttrace.agent("Middle")
    def middle(task: str) -> str:
        return ask_helper(task)

    @agenttrace.tool
    def hand_over(prompt: str) -> str:
        return middle(prompt)

    @agenttrace.agent("Top")
    def top() -> None:
        hand_over("find the bug")

    session = agenttrace.new_session()
    top()
    traced.handle.force_flush()
    document = to_std008(snapshot_path(tmp_path / "sessions", session.session_id))
    outer, inner = document["sub_sessions"]
    (call,) = outer["tool_calls"]
    assert inner["parent_session_id"] == outer["sub_session_id"]
    assert inner["triggered_by_call_id"] == call["call_id"]
    assert call["subagent_info"]["sub_session_id"] == inner["sub_session_id"]
    assert inner["output"]["summary"] == "helped with find the bug"
    assert validate(document) == []
    assert validate(document, strict=True) == [
        f"sub_session {outer['sub_session_id']} has invalid trigger",
        f"sub_session {inner['sub_session_id']} has invalid trigger",
    ]


def test_a_role_that_std008_does_not_know_is_refused_when_decorating() -> None:
    with pytest.raises(ValueError, match="role 'tester' is not one of architect, developer"):
        agenttrace.agent("Tester", role="tester")
    with pytest.raises(ValueError, match="category '' is not a name"):
        agenttrace.tool("x", category="")


# --- import ------------------------------------------------------------------------------------


def opened_in_every_view(path: Path) -> LoadedFile | None:
    """The document at ``path`` read and put through every view (a session file's schema, the
    tree, stats, the Jaeger and OTLP exports, the dialog); ``None`` if it was refused, in one
    line."""
    try:
        loaded = read_document(path)
    except SessionFileError as exc:
        assert "\n" not in str(exc)
        return None
    schema.check_document(session_document(loaded), 200)
    render_optree(loaded.runs)
    session_stats(loaded.runs)
    to_jaeger(loaded)
    to_otlp_json(loaded)
    viewer = agenttrace.SessionViewer(loaded.events)
    format_dialog(viewer.extract_dialog(viewer.list_agents()))
    return loaded


def session_document(loaded: LoadedFile) -> dict[str, Any]:
    """``loaded`` as the JSON document inside a session file."""
    return {
        "format": "agenttrace.session",
        "version": 1,
        "session_id": loaded.session_id,
        "runs": loaded.runs,
        "meta": loaded.meta,
        "events": loaded.events,
    }


def test_the_seed_example_imports_as_a_session_of_agenttraces_own_format() -> None:
    loaded = read_document(EXAMPLE)
    schema.check_document(session_document(loaded), 200)  # what a session file may hold
    assert loaded.session_id == "2026-01-26-001-implement-feature-multi"
    (root,) = loaded.runs
    assert (root["agentId"], root["startedAt"], root["endedAt"]) == (
        "architect-main",
        1769421600000,
        1769422500000,
    )
    ops = root["turns"][0]["ops"]
    assert [(op["path"], op["kind"], op["name"]) for op in ops] == [
        ("1.1", "tool", "Read"),
        ("1.2", "session", "Task"),
        ("1.3", "session", "Task"),
    ]
    developer = ops[1]["childSession"]
    assert developer["agentId"] == "developer-01" and developer["txnId"] == "sub-001"
    assert [op["name"] for op in developer["turns"][0]["ops"]] == ["Read", "Write"]
    heard = [e for e in loaded.events if e.get("agent_id") == "developer-01"]
    assert heard[1]["role"] == "user" and heard[1]["content"] == "Implement auth component"


def test_the_seed_example_opens_in_tree_stats_dialog_and_the_exports(tmp_path: Path) -> None:
    tree = cli("tree", str(EXAMPLE))
    assert tree.exit_code == 0, tree.stderr
    assert "1.2:1 session developer-01 [developer-01] ok 270000ms" in tree.stdout
    assert "1.3.1.2 tool Bash ok 30000ms" in tree.stdout
    stats = json.loads(cli("stats", str(EXAMPLE), "--json").stdout)
    assert stats["total"]["tool_calls"] == 7 and stats["wall_time_ms"] == 900000
    agents = {row["agent_id"]: row["tool_calls"] for row in stats["by_agent"]}
    assert agents == {"architect-main": 3, "developer-01": 2, "reviewer-01": 2}
    dialog = cli("dialog", str(EXAMPLE), "--agents", "architect-main,developer-01")
    assert dialog.stdout.splitlines()[:2] == [
        "(architect-main) Add login functionality",
        "(architect-main) Implement auth component",
    ]
    jaeger = json.loads(cli("export", str(EXAMPLE), "--format", "jaeger").stdout)
    (trace,) = jaeger["data"]
    names = sorted(span["operationName"] for span in trace["spans"])
    root = ["invoke_agent architect-main", "turn 1", "execute_tool Read"]
    developer = ["invoke_agent developer-01", "turn 1", "execute_tool Read", "execute_tool Write"]
    reviewer = ["invoke_agent reviewer-01", "turn 1", "execute_tool Read", "execute_tool Bash"]
    assert names == sorted([*root, "execute_tool Task", "execute_tool Task", *developer, *reviewer])
    tags = {
        tag["key"]: tag["value"]
        for span in trace["spans"]
        if span["operationName"] == "execute_tool Write"
        for tag in span["tags"]
    }
    assert tags["gen_ai.tool.call.id"] == "sub-tool-002"
    assert tags["agenttrace.tool.category"] == "action"
    otlp = cli("export", str(EXAMPLE), "--format", "otlp-json")
    assert otlp.exit_code == 0 and json.loads(otlp.stdout)["resourceSpans"]
    page = cli("export", str(EXAMPLE), "--format", "html", "-o", str(tmp_path / "page.html"))
    assert (
        page.exit_code == 0 and "Implement auth component" in (tmp_path / "page.html").read_text()
    )


def test_the_seed_example_exported_again_keeps_its_ids_types_and_counts() -> None:
    document = to_std008(EXAMPLE)
    assert validate(document, strict=True) == []
    original = example()
    assert document["session_id"] == original["session_id"]
    assert document["collaboration"] == original["collaboration"]
    assert document["tool_calls"] == [
        {**call, "started_at": _ms_time(call["started_at"]), "ended_at": _ms_time(call["ended_at"])}
        for call in original["tool_calls"]
    ]
    for ours, theirs in zip(document["sub_sessions"], original["sub_sessions"], strict=True):
        for key in ("sub_session_id", "parent_session_id", "agent", "triggered_by_call_id"):
            assert ours[key] == theirs[key], key
        assert ours["task"] == theirs["task"] and ours["output"] == theirs["output"]
        assert [c["call_id"] for c in ours["tool_calls"]] == [
            c["call_id"] for c in theirs["tool_calls"]
        ]
    assert [m["message_type"] for m in document["messages"]] == [
        "task_assignment",
        "task_completion",
        "review_request",
        "review_result",
    ]
    assert document["summary"]["final_verdict"] == "approved"
    assert document["summary"]["tasks"] == original["summary"]["tasks"]


def _ms_time(text: str) -> str:
    """The seed's whole-second time as agenttrace writes times: with milliseconds."""
    return text.replace("Z", ".000Z")


def roundtrip(source: Path, tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The document exported from ``source``, and that document imported and exported."""
    first = write_std008(source, tmp_path)
    return json.loads(first.read_text()), to_std008(first)


def test_export_import_export_is_stable_for_the_cafe(cafe: Recorded, tmp_path: Path) -> None:
    first, second = roundtrip(cafe.snapshot, tmp_path)
    assert second == first


def test_export_import_export_is_stable_for_a_team_with_reviews_and_a_failure(
    team: Path, tmp_path: Path
) -> None:
    first, second = roundtrip(team, tmp_path)
    assert second == first
    assert validate(second) == []


def test_a_document_with_broken_links_still_opens(tmp_path: Path) -> None:
    document = example()
    document["sub_sessions"][0]["triggered_by_call_id"] = "tool-999"  # no such call
    document["sub_sessions"][1]["parent_session_id"] = "sub-001"  # not where its trigger is
    loaded = read_document(write(tmp_path, document))
    schema.check_document(session_document(loaded), 200)
    ops = loaded.runs[0]["turns"][0]["ops"]
    assert [(op["name"], op["kind"]) for op in ops] == [
        ("Read", "tool"),
        ("Task", "tool"),  # tool-002 triggers nothing now
        ("Task", "session"),  # tool-003, found where it is: the reviewer's trigger
        ("developer-01", "session"),  # an op of its own, as for a run outside a tool call
    ]


def test_sub_sessions_whose_parents_loop_hang_on_the_root(tmp_path: Path) -> None:
    document = example()
    document["sub_sessions"][0]["parent_session_id"] = "sub-002"
    document["sub_sessions"][0]["triggered_by_call_id"] = "rev-tool-001"
    document["sub_sessions"][1]["parent_session_id"] = "sub-001"
    document["sub_sessions"][1]["triggered_by_call_id"] = "sub-tool-001"
    loaded = read_document(write(tmp_path, document))
    schema.check_document(session_document(loaded), 200)
    names = [op["name"] for op in loaded.runs[0]["turns"][0]["ops"]]
    assert names == ["Read", "Task", "Task", "developer-01", "reviewer-01"]


def test_sub_sessions_nested_past_the_limit_are_refused(tmp_path: Path) -> None:
    document = example()
    subs = []
    for number in range(30):  # each run by a call of the one before
        parent = f"sub-{number - 1}" if number else document["session_id"]
        subs.append(
            {
                **document["sub_sessions"][0],
                "sub_session_id": f"sub-{number}",
                "parent_session_id": parent,
                "triggered_by_call_id": f"call-{number - 1}" if number else "tool-002",
                "tool_calls": [{"call_id": f"call-{number}", "tool_name": "Task"}],
            }
        )
    document["sub_sessions"] = subs
    result = cli("tree", str(write(tmp_path, document)))
    assert result.exit_code == 2
    assert result.stderr.strip().endswith(
        "sub-sessions nested more than 25 levels deep (AGENTTRACE_MAX_NESTING_DEPTH)"
    )


def test_a_document_that_is_not_std008_is_one_line_and_exit_2(tmp_path: Path) -> None:
    document = example()
    document["collaboration"]["mode"] = "swarm"
    path = write(tmp_path, document)
    for command in (["tree"], ["stats"], ["export", "--format", "jaeger"]):
        result = cli(*command, str(path))
        assert result.exit_code == 2
        assert result.stderr == (
            f"agenttrace: error: {path}: not a STD-008 document: $.collaboration.mode: "
            "Invalid enum value 'swarm' (agenttrace validate lists every problem)\n"
        )
    other = write(tmp_path, {"hello": "world"}, "other.json")
    result = cli("tree", str(other))
    assert result.exit_code == 2 and "neither a STD-008 session nor an ATIF trajectory" in (
        result.stderr
    )


@pytest.mark.parametrize("content", [b"1.5", b"-1", b'"text"', b"null", b"true"])
def test_a_document_that_is_a_scalar_is_one_line(content: bytes, tmp_path: Path) -> None:
    """JSON that is a number, text, null or a boolean nests nothing: it is no document of any
    format (exit 2), and ``validate`` lists it as a problem (exit 1), never a traceback."""
    path = tmp_path / "scalar.json"
    path.write_bytes(content)
    for command in (["tree"], ["stats"], ["export", "--format", "jaeger"]):
        result = cli(*command, str(path))
        assert result.exit_code == 2, result.output
        (line,) = result.stderr.splitlines()
        assert "neither a STD-008 session nor an ATIF trajectory" in line
    result = cli("validate", str(path))
    assert result.exit_code == 1 and result.stdout.startswith("$: Expected `object`, got `")


def test_the_python_views_take_a_document_path() -> None:
    viewer = agenttrace.SessionViewer(EXAMPLE)
    assert viewer.list_agents() == {
        "architect-main": "architect-main",
        "developer-01": "developer-01",
        "reviewer-01": "reviewer-01",
    }
    assert to_jaeger(EXAMPLE)["data"][0]["spans"]


# --- hostile documents -------------------------------------------------------------------------


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in _leaves(item, (*path, key))] + [path]
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _leaves(item, (*path, i))] + [path]
    return [path]


_LEAVES = [path for path in _leaves(example()) if path]
DELETE = object()
_VALUES = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.booleans(),
    st.none(),
    st.sampled_from(
        [
            "0001-01-01T00:00:00+23:59",
            "9999-12-31T23:59:59-23:59",
            "2026-02-30T10:00:00Z",
            "2026-01-26T10:00:00.123456789+05:30",
            "in_progress",
            "failed",
            "Task",
            "sub-001",
            "tool-002",
            "architect-main",
            "..",
            "a\nb",
            "\ud800",
        ]
    ),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["summary", "result", "verdict"]), st.text(max_size=5)),
)


def _at(document: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        document = document[key]
    return document


_SPECIAL = _VALUES.filter(lambda value: isinstance(value, str))


def _like(path: tuple[Any, ...]) -> Any:
    """A value of the kind the example has at ``path`` (so the change reaches the import)."""
    original = _at(example(), path)
    if isinstance(original, bool):
        kind: Any = st.booleans()
    elif isinstance(original, int):
        kind = st.integers(min_value=0, max_value=2**63)
    elif isinstance(original, str):
        kind = st.one_of(_SPECIAL, st.text(max_size=8), st.sampled_from(_IDS))
    else:
        kind = _VALUES
    return st.tuples(st.just(path), kind)


_IDS = sorted(
    {
        value
        for path in _LEAVES
        if isinstance(value := _at(example(), path), str) and value.count("-") and len(value) < 20
    }
)


def changed(document: Any, changes: list[tuple[tuple[Any, ...], Any]]) -> Any:
    """``document`` with each (path, value) change made where the path still leads (a value
    of :data:`DELETE` removes the key or item)."""
    for path, value in changes:
        target: Any = document
        for key in path[:-1]:
            inside = isinstance(target, dict) and key in target
            listed = isinstance(target, list) and isinstance(key, int) and 0 <= key < len(target)
            if not inside and not listed:
                break
            target = target[key]
        else:
            last = path[-1]
            if isinstance(target, dict) or (
                isinstance(target, list) and isinstance(last, int) and last < len(target)
            ):
                if value is DELETE:
                    target.pop(last, None) if isinstance(target, dict) else target.pop(last)
                else:
                    target[last] = value
    return document


_SCALARS = [path for path in _LEAVES if not isinstance(_at(example(), path), (dict, list))]
_CHANGE = st.one_of(
    st.sampled_from(_SCALARS).flatmap(_like),  # the same kind: most such documents import
    st.sampled_from(_SCALARS).flatmap(_like),
    st.tuples(st.sampled_from(_LEAVES), st.one_of(_VALUES, st.just(DELETE))),
)


@pytest.mark.fuzz  # hostile documents by the hundred: in make test, not make check
@settings(
    max_examples=200,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(changes=st.lists(_CHANGE, min_size=1, max_size=4))
def test_any_document_opens_or_is_refused_in_one_line(
    changes: list[tuple[tuple[Any, ...], Any]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    document = changed(example(), changes)
    path = tmp_path_factory.mktemp("hostile") / "doc-multi.json"
    path.write_text(json.dumps(document), errors="surrogatepass")
    loaded = opened_in_every_view(path)
    if loaded is None:
        return
    again = to_std008(loaded)
    assert validate(again) == [], again


async def cafe_then_resumed(traced: Traced, tmp_path: Path) -> Path:
    """The cafe's first run, then a second resumed from its session file, in a new session of
    this process; the session file's path."""
    agenttrace.new_session()
    with ScriptedModel(SCRIPTS) as model:
        options = {"api_key": "offline-test-key", "api_base": model.api_base}
        await run_first(options)
        traced.handle.force_flush()
        (path,) = (tmp_path / "sessions").glob("*.json.gz")
        agenttrace.use_session(None)
        await run_resumed(str(path), "What will you order?", options)
    traced.handle.force_flush()
    return path


async def test_a_resumed_session_exports_every_run_with_ids_kept_apart(
    traced: Traced, tmp_path: Path
) -> None:
    """Two runs (the cafe, then a resume): the second run's calls follow the first's."""
    path = await cafe_then_resumed(traced, tmp_path)
    document = to_std008(path)
    assert validate(document) == []
    calls = [(c["tool_name"], c["call_id"]) for c in document["tool_calls"]]
    assert calls == [("task", "c1"), ("task", "c2"), ("discuss", "c3"), ("discuss", "c4")]
    assert len(document["sub_sessions"]) == 4
    assert document["summary"]["agents"]["architect"]["tool_calls_count"] == 4
    first, second = roundtrip(path, tmp_path)
    assert second == first

    # A call id the model gave twice (or none at all) is made from the run and the path label.
    loaded = read_session_file(path)
    (again,) = [op for turn in loaded.runs[1]["turns"] for op in turn["ops"] if op["kind"] != "llm"]
    again["span"]["attributes"]["gen_ai.tool.call.id"] = "c1"
    del loaded.runs[0]["turns"][1]["ops"][1]["span"]["attributes"]["gen_ai.tool.call.id"]
    calls = [c["call_id"] for c in to_std008(loaded)["tool_calls"]]
    assert calls == ["c1", "tool-2.2", "c3", f"tool-r2-{again['path']}"]


def test_single_agent_exports_validate_and_survive_a_round_trip(
    traced: Traced, tmp_path: Path
) -> None:
    @agenttrace.agent("Solo")
    def solo() -> str:
        read_file("notes.md")
        return say("done")

    session = agenttrace.new_session()
    solo()
    traced.handle.force_flush()
    snapshot = snapshot_path(tmp_path / "sessions", session.session_id)
    first, second = roundtrip(snapshot, tmp_path)
    assert first["collaboration"]["mode"] == "single" and validate(first) == []
    assert second == first
