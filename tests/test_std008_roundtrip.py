"""STD-008 fidelity: a document others wrote, imported and exported again, is the same
document; a recorded session's acknowledgments, progress reports and feedback become those
message types.

The documents are the specification's own (section 7.1's example, its messages of section
5.3's table, section 8.1's single-agent form); the sessions are agents written here with
agenttrace's decorators, recorded on a real TracerProvider.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import litellm
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import agenttrace
from agenttrace._internal.times import MAX_MS, iso_ms
from agenttrace.formats.imported import plain_id
from agenttrace.formats.session.files import SessionFileError, snapshot_path
from agenttrace.formats.std008.rules import validate
from agenttrace.views.exports import to_std008, write_std008

from .conftest import Traced
from .test_std008 import (
    _CHANGE,
    cafe_then_resumed,
    changed,
    example,
    published_validator,
    write,
)

TIMES = ("created_at", "completed_at", "started_at", "ended_at", "timestamp")
"""The fields that hold times: agenttrace writes them with milliseconds (``10:00:05.000Z``),
the same instant as the specification's ``10:00:05Z``."""


def instants(value: Any) -> Any:
    """``value`` with every time as the instant it names (ms since the epoch)."""
    if isinstance(value, dict):
        return {
            key: iso_ms(item) if key in TIMES and isinstance(item, str) else instants(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [instants(item) for item in value]
    return value


def every_message_type() -> dict[str, Any]:
    """Section 7.1's example with the messages of section 5.3's table and a feedback (each
    with a payload of its own, a ``correlation_id`` and a ``reply_to``), and section 4.1's
    ``tokens_used``."""
    document = example()
    document["tool_calls"][1]["subagent_info"]["tokens_used"] = 15000
    architect = document["collaboration"]["orchestrator"]
    developer, reviewer = document["collaboration"]["participants"]

    def message(number: int, time: str, sender: Any, receiver: Any, kind: str, payload: Any) -> Any:
        return {
            "message_id": f"msg-{number:03d}",
            "timestamp": f"2026-01-26T{time}Z",
            "sequence_number": number,
            "from_agent": sender,
            "to_agent": receiver,
            "message_type": kind,
            "payload": payload,
        }

    assignment, completion, request, result = document["messages"]
    messages = [
        assignment,
        message(2, "10:00:31", developer, architect, "acknowledgment", {"task_id": "task-001"}),
        message(3, "10:02:00", developer, architect, "task_progress", {"percent": 50}),
        {**completion, "sequence_number": 4, "message_id": "msg-004"},
        {**request, "sequence_number": 5, "message_id": "msg-005", "correlation_id": "sub-002"},
        {**result, "sequence_number": 6, "message_id": "msg-006", "reply_to": "msg-005"},
        message(7, "10:08:30", architect, developer, "feedback", "Looks good, ship it"),
        message(8, "10:09:00", reviewer, architect, "abort", {"reason": None, "codes": [1, 2]}),
    ]
    document["messages"] = messages
    return document


def single_agent_form() -> dict[str, Any]:
    """Section 8.1: a single-agent session seen as a multi-agent one (``mode: "single"``)."""
    original = example()
    document = {
        key: original[key]
        for key in ("task_title", "user_prompt", "created_at", "completed_at", "status", "agent")
    }
    document["session_id"] = "2026-01-26-002-read-the-spec"
    document["collaboration"] = {
        "mode": "single",
        "pattern": "master_worker",
        "orchestrator": {"agent_id": "main", "agent_type": "architect"},
        "participants": [],
    }
    document["tool_calls"] = original["tool_calls"][:1]
    document["sub_sessions"] = []
    document["messages"] = []
    document["summary"] = {
        "total_duration_ms": 900000,
        "tool_calls_count": 1,
        "files_created": [],
        "files_modified": [],
    }
    return document


def a_pipeline() -> dict[str, Any]:
    """Section 3.1's other fields: a ``pipeline``, agents with an ``instance_id``, participants
    in an order of their own, one of whom does nothing in the session."""
    document = example()
    collaboration = document["collaboration"]
    collaboration["pattern"] = "pipeline"
    collaboration["participants"].reverse()
    collaboration["participants"][0]["instance_id"] = "reviewer-01#1"
    collaboration["participants"].append({"agent_id": "idle-01", "agent_type": "developer"})
    document["sub_sessions"][0]["agent"]["instance_id"] = "developer-01#7"
    return document


SPEC_DOCUMENTS: dict[str, Callable[[], dict[str, Any]]] = {
    "section 7.1": example,
    "section 5.3's messages": every_message_type,
    "section 8.1": single_agent_form,
    "section 3.1's pipeline": a_pipeline,
}


@pytest.mark.parametrize("make", SPEC_DOCUMENTS.values(), ids=SPEC_DOCUMENTS.keys())
def test_a_spec_document_imported_and_exported_again_is_the_same_document(
    make: Callable[[], dict[str, Any]], tmp_path: Path
) -> None:
    original = make()
    assert validate(original) == []
    exported = to_std008(write(tmp_path, original))
    assert instants(exported) == instants(original)
    assert validate(exported) == []
    assert list(published_validator().iter_errors(exported)) == []
    again = to_std008(write_std008(write(tmp_path, original), tmp_path / "again-multi.json"))
    assert again == exported


def in_its_own_words() -> dict[str, Any]:
    """Section 7.1's example with statuses in other words, a result that is an object, a
    failed call, a failed reviewer with its output, sub-sessions listed in an order of their
    own, a sub-agent type of Claude Code's, counts left out, and keys STD-008 does not name
    (STD-001's, anyone's)."""
    document = example()
    document["status"] = "completed"
    document["agent"]["provider"] = "anthropic"
    document["tags"] = ["auth", {"sprint": 12}]
    read, task, review = document["tool_calls"]
    read["output"] = {"status": "success", "result": {"lines": 120, "truncated": False}}
    read["reasoning"] = "the spec first"
    task["subagent_info"] = {"subagent_type": "general-purpose", "sub_session_id": "sub-001"}
    review["subagent_info"]["model"] = "haiku"
    developer = document["sub_sessions"][0]
    developer["status"] = "completed"
    developer["task"]["deadline"] = "2026-01-27"
    developer["notes"] = None
    developer["tool_calls"][1]["output"] = {"status": "failed", "error": "disk full"}
    reviewer = document["sub_sessions"][1]
    reviewer["status"] = "error"  # failed, its output says more than that
    document["sub_sessions"].reverse()  # not in the order they started
    return document


def with_what_it_left_out() -> dict[str, Any]:
    """Section 7.1's example without what STD-008 lets a document leave out (a title, a
    call's times and category), an empty prompt, and a call that still runs yet has an end."""
    document = example()
    del document["task_title"]
    document["user_prompt"] = ""
    read = document["tool_calls"][0]
    for key in ("tool_category", "started_at", "ended_at", "duration_ms", "input", "output"):
        del read[key]
    document["sub_sessions"][0]["tool_calls"][0]["output"]["status"] = "in_progress"
    return document


@pytest.mark.parametrize("make", [in_its_own_words, with_what_it_left_out])
def test_a_document_in_its_own_words_comes_back_in_them(
    make: Callable[[], dict[str, Any]], tmp_path: Path
) -> None:
    original = make()
    assert validate(original) == []
    exported = to_std008(write(tmp_path, original))
    assert instants(exported) == instants(original)
    assert validate(exported) == []


def test_what_the_reader_keeps_is_on_the_spans_and_the_figures_are_the_documents(
    tmp_path: Path,
) -> None:
    """The title, summary and messages are kept as they came, not made again from the runs:
    the example's figures (8 tool uses where it lists 2 calls) are not agenttrace's."""
    original = example()
    exported = to_std008(write(tmp_path, original))
    assert exported["task_title"] == "Implement user authentication"  # not the user prompt
    assert exported["summary"]["agents"]["developers"][0]["tool_calls_count"] == 8
    assert exported["summary"]["agents"]["architect"]["duration_ms"] == 420000
    assert exported["messages"][2]["payload"]["files"] == ["components/Auth.tsx"]
    assert "duration_ms" not in exported["sub_sessions"][0]  # the document gave none

    # A sub-session that says how long it ran keeps it.
    original["sub_sessions"][0]["duration_ms"] = 269000
    assert to_std008(write(tmp_path, original))["sub_sessions"][0]["duration_ms"] == 269000


def test_an_agent_only_in_messages_takes_part_in_the_export(tmp_path: Path) -> None:
    original = example()
    observer = {"agent_id": "observer-01", "agent_type": "reviewer"}
    original["collaboration"]["participants"].append(observer)
    original["messages"][3]["to_agent"] = observer
    exported = to_std008(write(tmp_path, original))
    assert instants(exported) == instants(original)
    assert validate(exported) == []


def test_what_no_longer_fits_the_document_exported_is_made_again(tmp_path: Path) -> None:
    """A document that calls itself single-agent yet has sub-sessions (the format allows it,
    the consistency checks do not) exports as multi-agent: its summary without the figures
    that needs is made from the runs."""
    original = example()
    original["collaboration"]["mode"] = "single"
    original["summary"] = {"total_duration_ms": 900000}
    exported = to_std008(write(tmp_path, original))
    assert exported["collaboration"]["mode"] == "multi_agent"
    assert exported["summary"]["tasks"] == {"total": 1, "completed": 1, "failed": 0}
    assert validate(exported) == []


def test_a_payload_cut_by_the_cap_is_kept_as_its_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exports cap each string (AGENTTRACE_MAX_PAYLOAD_BYTES): a payload cut short is no JSON
    any more, and goes out as the text that is left, still a valid message."""
    original = example()
    original["messages"][0]["payload"]["notes"] = "x" * 3000
    monkeypatch.setenv("AGENTTRACE_MAX_PAYLOAD_BYTES", "1024")
    exported = to_std008(write(tmp_path, original))
    payload = exported["messages"][0]["payload"]
    assert isinstance(payload, str) and payload.startswith('{"task": {"task_id": "task-001"')
    assert [m["message_id"] for m in exported["messages"]] == [
        m["message_id"] for m in original["messages"]
    ]
    assert validate(exported) == []


# --- acknowledgments, progress and feedback from a recorded session ----------------------------


def say(history: list[dict[str, Any]], text: str) -> str:
    """The agent's model answers ``history`` with ``text`` (litellm's own offline mock)."""
    reply = litellm.completion(model="gpt-4o-mini", messages=history, mock_response=text)
    return str(reply.choices[0].message.content)


class Lead:
    """An architect that hands tasks to its developer, who reports back as it works."""

    name = "Lead"

    def __init__(self, developer: Developer) -> None:
        self.developer = developer
        self.heard: list[str] = []

    @agenttrace.hears
    def harken(self, text: str) -> None:
        self.heard.append(text)

    @agenttrace.agent(role="architect")
    def run(self) -> None:
        self.delegate("Implement the auth component")
        self.delegate("Add the tests you left out")  # its reply to the developer's result

    @agenttrace.tool
    def delegate(self, prompt: str) -> str:
        return self.developer.work(prompt, self)


class Developer:
    """A developer that keeps one conversation with its model across the tasks it gets."""

    name = "Dev"

    def __init__(self) -> None:
        self.history: list[dict[str, Any]] = []

    @agenttrace.agent(role="developer")
    def work(self, task: str, lead: Lead) -> str:
        lead.harken(f"On it: {task}")  # before its model said anything: it acknowledges
        self.history.append({"role": "user", "content": task})
        plan = say(self.history, f"Plan for: {task}")
        self.history.append({"role": "assistant", "content": plan})
        lead.harken("Halfway there: the plan is made")  # after: a progress report
        self.history.append({"role": "user", "content": "Go on"})
        done = say(self.history, f"Done: {task}")
        self.history.append({"role": "assistant", "content": done})
        return done


@pytest.fixture
def reported(traced: Traced, tmp_path: Path) -> Path:
    """The lead and its developer, run once: the session file."""
    session = agenttrace.new_session()
    Lead(Developer()).run()
    traced.handle.force_flush()
    return snapshot_path(tmp_path / "sessions", session.session_id)


def test_acknowledgments_progress_and_feedback_reach_the_document(reported: Path) -> None:
    document = to_std008(reported)
    assert validate(document) == []
    assert list(published_validator().iter_errors(document)) == []
    messages = document["messages"]
    assert [(m["message_type"], m["from_agent"]["name"]) for m in messages] == [
        ("task_assignment", "Lead"),
        ("acknowledgment", "Dev"),
        ("task_progress", "Dev"),
        ("task_completion", "Dev"),
        ("feedback", "Lead"),
        ("acknowledgment", "Dev"),
        ("task_progress", "Dev"),
        ("task_completion", "Dev"),
    ]
    first, second = document["sub_sessions"]
    assert [m["payload"] for m in messages[1:3]] == [
        {
            "task_id": first["task"]["task_id"],
            "status": "accepted",
            "message": "On it: Implement the auth component",
        },
        {
            "task_id": first["task"]["task_id"],
            "status": "in_progress",
            "message": "Halfway there: the plan is made",
        },
    ]
    feedback = messages[4]
    assert feedback["payload"] == {
        "task_id": second["task"]["task_id"],
        "feedback": "Add the tests you left out",
    }
    assert feedback["reply_to"] == messages[3]["message_id"]  # the first task's completion
    assert feedback["correlation_id"] == second["sub_session_id"]
    assert messages[3]["payload"]["summary"] == "Done: Implement the auth component"


def test_a_fresh_developer_for_each_task_gets_assignments(traced: Traced, tmp_path: Path) -> None:
    """Feedback needs the same conversation: a new developer each time (or one that forgets
    its history) is assigned a new task."""

    class Forgetful(Developer):
        @agenttrace.agent(role="developer")
        def work(self, task: str, lead: Lead) -> str:
            self.history = []
            return super().work(task, lead)

    session = agenttrace.new_session()
    Lead(Forgetful()).run()
    traced.handle.force_flush()
    document = to_std008(snapshot_path(tmp_path / "sessions", session.session_id))
    kinds = [m["message_type"] for m in document["messages"]]
    assert kinds.count("task_assignment") == 2 and "feedback" not in kinds
    assert validate(document) == []


async def test_a_parent_that_heard_its_user_in_between_assigns_anew(
    traced: Traced, tmp_path: Path
) -> None:
    """The cafe resumed: Jack and Jill still hold their first answers, but the root asks them
    what its user asked it, not a reply to those answers."""
    path = await cafe_then_resumed(traced, tmp_path)
    kinds = [m["message_type"] for m in to_std008(path)["messages"]]
    assert kinds == ["task_assignment", "task_completion"] * 4


def test_a_session_with_feedback_survives_export_import_export(
    reported: Path, tmp_path: Path
) -> None:
    first = write_std008(reported, tmp_path)
    once = json.loads(first.read_text())
    again = to_std008(first)
    assert again == once
    assert again["messages"][4]["message_type"] == "feedback"


@agenttrace.agent("Worker")
def worker(task: str) -> Iterator[str]:
    """A sub-agent that streams its reports as it works."""
    yield f"Accepted: {task}"  # before its model said anything: it acknowledges
    found = say([{"role": "user", "content": task}], "Found two failing tests")
    yield f"Progress: {found}"
    yield "All tests pass"  # its last word: the call's result


@agenttrace.tool
def hand_off(prompt: str) -> Iterator[str]:
    """A tool that runs the worker and streams what it says to the model that called it."""
    yield from worker(prompt)


@agenttrace.agent("Boss", role="architect")
def boss() -> list[str]:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "hand_off", "arguments": '{"prompt": "Fix the tests"}'},
    }
    litellm.completion(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "Make the build green"}],
        mock_response="",
        mock_tool_calls=[call],
    )
    return list(hand_off("Fix the tests"))


def test_what_a_delegating_tool_streams_before_its_result_is_acknowledgment_and_progress(
    traced: Traced, tmp_path: Path
) -> None:
    session = agenttrace.new_session()
    assert boss() == [
        "Accepted: Fix the tests",
        "Progress: Found two failing tests",
        "All tests pass",
    ]
    traced.handle.force_flush()
    document = to_std008(snapshot_path(tmp_path / "sessions", session.session_id))
    assert validate(document) == []
    (call,) = document["tool_calls"]
    assert call["call_id"] == "call_1"
    assert [
        (m["message_type"], m["from_agent"]["name"], m["payload"].get("message"))
        for m in document["messages"]
    ] == [
        ("task_assignment", "Boss", None),
        ("acknowledgment", "Worker", "Accepted: Fix the tests"),
        ("task_progress", "Worker", "Progress: Found two failing tests"),
        ("task_completion", "Worker", None),
    ]


# --- any valid document ------------------------------------------------------------------------

LEEWAY = {
    ("~", "sub_sessions", "[]", "parent_session_id"),  # a parent that is no session: relinked
    *(
        difference
        for where in (("tool_calls", "[]"), ("sub_sessions", "[]", "tool_calls", "[]"))
        for difference in (
            ("~", *where, "tool_category"),  # an empty category: the export gives one
            ("+", *where, "subagent_info", "sub_session_id"),  # the link to the run it started
            # A sub-session that names another call as its trigger: the call it names gets the
            # subagent_info (with the link), the call that claimed it loses it.
            ("-", *where, "subagent_info"),
            ("+", *where, "subagent_info", "sub_session_ids"),
        )
    ),
}
"""What a valid document may lose on the way: links the export makes from the runs, and
fields the export always writes."""


def differences(ours: Any, theirs: Any, where: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Where ``ours`` differs from ``theirs``: ``+`` a key only ours has, ``-`` one only
    theirs has, ``~`` another value (list positions as ``[]``)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        found = {("+", *where, key) for key in ours.keys() - theirs.keys()}
        found |= {("-", *where, key) for key in theirs.keys() - ours.keys()}
        for key in ours.keys() & theirs.keys():
            found |= differences(ours[key], theirs[key], (*where, key))
        return found
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return {
            d for a, b in zip(ours, theirs, strict=True) for d in differences(a, b, (*where, "[]"))
        }
    same = ours == theirs and type(ours) is type(theirs)
    return set() if same else {("~", *where)}


def holdable(document: Any) -> bool:
    """Whether ``document``'s ids, times and durations are ones an opTree holds as they are:
    a session id that names a file, times from 1970 to OTLP's last, durations within it, and
    nothing that ends before it starts."""
    if not isinstance(document, dict) or plain_id(document.get("session_id"), "") != document.get(
        "session_id"
    ):
        return False

    def fits(value: Any, key: Any = None) -> bool:
        if isinstance(value, dict):
            started, ended = (
                iso_ms(value[k]) if isinstance(value.get(k), str) else None
                for k in ("started_at", "ended_at")
            )
            if started is not None and ended is not None and ended < started:
                return False  # an op cannot end before it starts (its latency: negative)
            return all(fits(item, name) for name, item in value.items())
        if isinstance(value, list):
            return all(fits(item) for item in value)
        if key in TIMES and isinstance(value, str):
            ms = iso_ms(value)
            return ms is not None and 0 < ms < MAX_MS
        if key == "duration_ms" and isinstance(value, (int, float)):
            return 0 <= value < MAX_MS
        return True

    return fits(document)


@pytest.mark.fuzz  # documents by the hundred: in make test, not make check
@settings(
    max_examples=300,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(changes=st.lists(_CHANGE, min_size=1, max_size=3))
def test_any_valid_document_comes_back_but_for_links_and_fields_the_export_writes(
    changes: list[tuple[tuple[Any, ...], Any]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    document = changed(example(), changes)
    assume(holdable(document) and validate(document) == [])
    path = tmp_path_factory.mktemp("valid") / "doc-multi.json"
    path.write_text(json.dumps(document), errors="surrogatepass")
    try:
        exported = to_std008(path)
    except SessionFileError:  # refused in one line: a limit, not a loss
        return
    assert differences(instants(exported), instants(document)) <= LEEWAY
    assert validate(exported) == []
