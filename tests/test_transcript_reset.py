"""Transcripts match what was sent (issue 11, item 5), and LLM spans carry history deltas.

A framework that rewrites its history (tests/rewriting_agent.py: tool calls kept as text, a
rejected reply dropped, a changed system prompt) runs through real litellm against the local
server: the stream records each rewrite as a ``transcript_reset`` to what was sent, the session
restores exactly the last request and its reply, and ``agenttrace resume`` goes on from there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import litellm
import pytest

import agenttrace
from agenttrace import semconv as sc
from agenttrace._internal.config import Settings
from agenttrace.formats.session.files import SessionFileError, read_session_file
from agenttrace.model import events as ev
from agenttrace.views.viewer import SessionViewer, format_dialog

from .conftest import Traced, attrs
from .helpers import NOT_EVENTS, ROOT, canonical_events, is_event_line
from .llm_server import LLMServer, Reply
from .rewriting_agent import API_BASE_VARIABLE, SYSTEM, Rewriter

PLAN = "PLAN: recommend one tea."
REPLIES = (
    Reply(
        content="",
        tool_calls=[
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "search", "arguments": json.dumps({"query": "black tea"})},
            }
        ],
    ),
    Reply(content="Oops, I forgot."),
    Reply(content=PLAN),
    Reply(content="Earl grey."),
)
CALLING = 'Calling tools: search({"query": "black tea"})'
OBSERVATION = "Observation: black tea: Earl grey, Assam, Sencha"


def run_rewriter(llm: LLMServer) -> Rewriter:
    llm.reset(*REPLIES)
    agent = Rewriter("Rewriter", {"api_base": llm.api_base, "api_key": "test-key"})
    agent.harken("Which tea?")
    assert agent.response() == "Earl grey."
    return agent


def stream_of(tmp_path: Path) -> Path:
    (stream,) = (tmp_path / "sessions").glob("*.events.jsonl")
    return stream


def shape(event: dict[str, Any]) -> tuple[Any, ...]:
    """An event as (type, role or kept, content, substance): what the assertions compare."""
    if event["event_type"] == ev.TRANSCRIPT_RESET:
        return ("reset", event["kept"])
    if event["event_type"] == ev.AGENT_CREATED:
        return ("created", event.get("name"))
    return ("entry", event["role"], event.get("content"), event.get("substance"))


# --- the stream -----------------------------------------------------------------------------------


def test_a_rewritten_history_is_recorded_as_it_was_sent(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    agent = run_rewriter(llm)
    traced.handle.force_flush()
    events = canonical_events(stream_of(tmp_path))
    assert [e["message_id"] for e in events] == [ev.message_id(n) for n in range(1, 17)]
    plan_system = f"{SYSTEM}\n{PLAN}"
    assert [shape(e) for e in events] == [
        ("created", "Rewriter"),
        ("entry", "system", SYSTEM, None),  # msg_002, logged with the agent
        ("entry", "user", "Which tea?", None),  # heard without @hears: logged when sent
        ("entry", "assistant", "", None),  # msg_004: the reply asks for search
        ("entry", "tool", "black tea: Earl grey, Assam, Sencha", None),  # @tool's result
        # Step 2 sent the call as text and the result as a user message: from the third
        # entry on, the transcript is what was sent.
        ("reset", 2),
        ("entry", "assistant", CALLING, None),
        ("entry", "user", OBSERVATION, None),
        ("entry", "assistant", "Oops, I forgot.", None),  # msg_009
        # Step 3 dropped the rejected reply and asked again.
        ("reset", 4),
        ("entry", "user", "Error: no answer. Again.", None),
        ("entry", "assistant", PLAN, None),  # msg_012
        # Step 4 changed the system prompt: the new one, then the entries it sent again,
        # referred to by their ids (not logged again), then what is new.
        ("reset", 0),
        ("entry", "system", plan_system, None),
        ("entry", "user", "Now answer.", None),  # where the plan was
        ("entry", "assistant", "Earl grey.", None),
    ]
    last_reset = events[12]
    assert last_reset["reused"] == [1, ["msg_003", "msg_011"], 1]
    assert last_reset["entries"] == 2
    assert ["reused" in e for e in events if e["event_type"] == ev.TRANSCRIPT_RESET] == [
        False,  # nothing after the kept entries was sent again as it was: no reuse
        False,
        True,
    ]
    # A reset is written with the entries that follow it, in one write (a crash leaves the
    # transcript as it was, not half rewritten): every line of the write but the last ends
    # in a space.
    lines = [  # the events' lines: less the op_accounted lines
        line for line in stream_of(tmp_path).read_bytes().splitlines() if is_event_line(line)
    ]
    assert [line.endswith(b" ") for line in lines[12:16]] == [True, True, False, False]
    # Every reset was logged in the LLM call whose request it records, and is on its span.
    resets = [e for e in events if e["event_type"] == ev.TRANSCRIPT_RESET]
    assert [e["path"] for e in resets] == ["2.1", "3.1", "4.1"]
    (step_2,) = [s for s in traced.by_name("chat gpt-4o-mini") if attrs(s)[sc.PATH] == "2.1"]
    (span_event,) = [
        e for e in step_2.events if (e.attributes or {}).get(sc.EVENT_TYPE) == ev.TRANSCRIPT_RESET
    ]
    assert dict(span_event.attributes or {})[sc.EVENT_KEPT] == 2
    # The model got exactly what the agent sent.
    assert [r.body["messages"] for r in llm.requests] == agent.sent
    # Text that repeats a reply links to the reply, not to a reset's copy of it.
    assert agenttrace.current_session().reply_saying(CALLING) == "msg_007"


def test_the_session_restores_exactly_the_last_request_and_its_reply(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    agent = run_rewriter(llm)
    traced.handle.force_flush()
    last = [*agent.sent[-1], {"role": "assistant", "content": "Earl grey."}]
    live = agenttrace.current_session()
    assert live.revivify("agent_001").messages() == last
    stream = stream_of(tmp_path)
    snapshot = stream.with_name(stream.name.replace(".events.jsonl", ".json.gz"))
    for path in (stream, snapshot):
        agenttrace.use_session(None)
        root, session = agenttrace.load_session(path)
        assert root.agent_id == "agent_001"
        assert root.messages() == last
        assert session.message_counter == 16
    # Read back from the session file, the reset events are as the stream has them.
    resets = [
        e for e in read_session_file(snapshot).events if e["event_type"] == "transcript_reset"
    ]
    assert [e["kept"] for e in resets] == [2, 4, 0]


def test_resumed_in_process_the_agent_goes_on_from_what_it_last_sent(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    first = run_rewriter(llm)
    traced.handle.force_flush()
    stream = stream_of(tmp_path)
    agenttrace.use_session(None)
    options = {"api_base": llm.api_base, "api_key": "test-key"}
    root, session = agenttrace.load_session(stream, lambda r, s: Rewriter.revive(r, options))
    llm.reset(Reply(content="With milk."))
    root.harken("And milk?")
    assert root.response() == "With milk."
    expected = [*first.sent[-1], {"role": "assistant", "content": "Earl grey."}]
    assert llm.requests[0].body["messages"] == [*expected, {"role": "user", "content": "And milk?"}]
    new = session.events[session.restored_count :]
    assert [shape(e) for e in new] == [
        ("entry", "user", "And milk?", None),  # the request extends the restored transcript
        ("entry", "assistant", "With milk.", None),
    ]


@pytest.mark.e2e
def test_agenttrace_resume_continues_from_what_was_last_sent(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    from .test_cli import agenttrace as run_cli
    from .test_cli import ok

    first = run_rewriter(llm)
    traced.handle.shutdown()  # this process lets the session go: another one may resume it
    stream = stream_of(tmp_path)
    before = stream.read_bytes()
    llm.reset(Reply(content="With milk."))
    result = run_cli(
        tmp_path / "cli",
        "resume",
        str(stream),
        "--prompt",
        "And milk?",
        "--agent",
        "tests.rewriting_agent:rebuild",
        cwd=ROOT,
        timeout=480,
        **{API_BASE_VARIABLE: llm.api_base},
    )
    assert "Answer: With milk.\n" in ok(result)
    # The resumed agent's first request: the transcript as it was last sent, the reply, the
    # new prompt; and it extended what was logged, so no reset.
    expected = [*first.sent[-1], {"role": "assistant", "content": "Earl grey."}]
    assert llm.requests[0].body["messages"] == [*expected, {"role": "user", "content": "And milk?"}]
    after = stream.read_bytes()
    assert after.startswith(before)
    new = [json.loads(line) for line in after[len(before) :].splitlines()]
    new = [event for event in new if event["event_type"] not in NOT_EVENTS]
    assert [shape(e) for e in new] == [
        ("entry", "user", "And milk?", None),
        ("entry", "assistant", "With milk.", None),
    ]
    assert [e["message_id"] for e in new] == ["msg_017", "msg_018"]


# --- the views ------------------------------------------------------------------------------------


def test_views_show_each_reset(traced: Traced, llm: LLMServer, tmp_path: Path) -> None:
    run_rewriter(llm)
    traced.handle.force_flush()
    viewer = SessionViewer(stream_of(tmp_path))
    perspective = viewer.extract_agent_perspective("agent_001").splitlines()
    resets = [line for line in perspective if line.startswith("[Reset]: ")]
    assert resets == [
        "[Reset]: history rewritten: kept 2 entries, dropped 2, then what it was sent",
        "[Reset]: history rewritten: kept 4 entries, dropped 1, then what it was sent",
        "[Reset]: history rewritten: kept 0 entries, sent 4 again, dropped 2, then what it was "
        "sent",
    ]
    assert perspective[perspective.index(resets[0]) + 1] == f"[Said]: {CALLING}"
    dialog = format_dialog(viewer.extract_dialog(["agent_001"])).splitlines()
    assert (
        "(Rewriter's history rewritten: kept 0 entries, sent 4 again, dropped 2, then what it "
        "was sent)"
    ) in dialog
    # What a reset repeats (with a substance) is shown once: "Which tea?" appears once.
    assert sum(line.endswith("Which tea?") for line in dialog) == 1
    # get_transcript is every entry ever logged, the current transcript is what was sent last.
    assert len(viewer.get_transcript("agent_001")) == 12


def test_the_html_page_shows_the_resets(traced: Traced, llm: LLMServer, tmp_path: Path) -> None:
    from agenttrace.views.exports.html import to_html

    run_rewriter(llm)
    traced.handle.force_flush()
    page = to_html(stream_of(tmp_path))
    assert page.count("[Reset]: history rewritten") == 3  # the agent's perspective
    assert '"role": "reset"' in page or '"role":"reset"' in page  # in the dialog


# --- what "extends" means ---------------------------------------------------------------------


def entry(message: dict[str, Any]) -> dict[str, Any]:
    return ev.transcript_entry("msg_001", "agent_001", message)


def test_what_counts_as_the_same_message() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    logged = entry({"role": "assistant", "content": None, "tool_calls": [call]})
    # The same message as the model returned it (an object), or as a framework keeps it.
    reply = litellm.Message(content=None, role="assistant", tool_calls=[call])
    assert ev.same_entry(reply, logged)
    assert ev.same_entry({"role": "assistant", "content": "", "tool_calls": [call]}, logged)
    arguments = {**call, "function": {"name": "f", "arguments": '{"a": 1}'}}
    assert not ev.same_entry({"role": "assistant", "tool_calls": [arguments]}, logged)
    assert not ev.same_entry({"role": "assistant", "content": "Calling f"}, logged)
    # Arguments sent back re-serialised (pydantic-ai 2.78 compacts them) are the same call;
    # different values, another function or text that is not JSON are not.
    spaced = entry({"role": "assistant", "tool_calls": [arguments]})
    compact = {**call, "function": {"name": "f", "arguments": '{"a":1}'}}
    assert ev.same_entry({"role": "assistant", "tool_calls": [compact]}, spaced)
    other = {**call, "function": {"name": "f", "arguments": '{"a":2}'}}
    assert not ev.same_entry({"role": "assistant", "tool_calls": [other]}, spaced)
    renamed = {**call, "function": {"name": "g", "arguments": '{"a":1}'}}
    assert not ev.same_entry({"role": "assistant", "tool_calls": [renamed]}, spaced)
    broken = entry(
        {
            "role": "assistant",
            "tool_calls": [{**call, "function": {"name": "f", "arguments": "{a"}}],
        }
    )
    unjson = {**call, "function": {"name": "f", "arguments": "{a "}}
    assert not ev.same_entry({"role": "assistant", "tool_calls": [unjson]}, broken)
    # Ids and names as the stream writes them; a missing role is a user's.
    result = entry({"role": "tool", "tool_call_id": 5, "content": "ok"})
    assert ev.same_entry({"role": "tool", "tool_call_id": "5", "content": "ok"}, result)
    assert not ev.same_entry({"role": "tool", "tool_call_id": "6", "content": "ok"}, result)
    assert ev.same_entry({"content": "hi"}, entry({"role": "user", "content": "hi"}))
    parts = [{"type": "text", "text": "hi"}]
    assert ev.same_entry(
        {"role": "user", "content": parts}, entry({"role": "user", "content": parts})
    )
    assert not ev.same_entry(
        {"role": "user", "content": "hi"}, entry({"role": "user", "content": parts})
    )


def test_instructions_sent_beside_a_transcript_are_not_a_rewrite() -> None:
    heard = [entry({"role": "user", "content": "Approve?"})]
    system = {"role": "system", "content": "You are a hook."}
    # A transcript without instructions: the system message ahead of it is sent beside it.
    assert ev.alignment([system, {"role": "user", "content": "Approve?"}], heard) == (1, 1)
    # A transcript that starts with instructions: they are part of it, and compared.
    told = [entry(system), *heard]
    changed = {"role": "system", "content": "You are a strict hook."}
    assert ev.alignment([changed, {"role": "user", "content": "Approve?"}], told) == (0, 0)
    # An empty transcript takes everything the request holds.
    assert ev.alignment([system], []) == (0, 0)


def test_a_long_history_costs_a_comparison_per_new_message(
    traced: Traced, llm: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Messages an earlier request matched, sent again unchanged, are known by identity: only
    what is new since the agent's previous request is compared in full."""
    history: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    for number in range(250):
        history.append({"role": "user", "content": f"question {number}"})
        history.append({"role": "assistant", "content": f"answer {number}"})
    session = agenttrace.current_session()

    @agenttrace.agent("Long")
    def ask(question: str) -> None:
        history.append({"role": "user", "content": question})
        reply = litellm.completion(model="gpt-4o-mini", messages=history, mock_response="ok")
        history.append({"role": "assistant", "content": reply.choices[0].message.content})

    ask("first")  # logs the 500-message history
    assert len(session.revivify("agent_001").transcript) == 503
    compared = []
    real = ev.same_entry
    monkeypatch.setattr(ev, "same_entry", lambda m, e: compared.append(1) or real(m, e))
    ask("next")
    # The previous reply, appended to the history after it was logged, is the one message
    # compared in full; the question after it was logged from this request, and is known.
    assert len(compared) == 1
    assert [e.get("event_type") for e in session.events[-2:]] == ["transcript_entry"] * 2
    history[5]["content"] = "question 2, edited in place"
    compared.clear()
    ask("after an edit")
    # An edited message no longer equals the copy taken when it matched: compared in full (at
    # request and at reply time), and the request, which no longer extends the transcript,
    # resets it there; the reset compares each entry it logs with the one it replaces.
    reset = [e for e in session.events if e.get("event_type") == "transcript_reset"][-1]
    assert reset["kept"] == 5
    assert reset["entries"] <= len(compared) <= 2 + reset["entries"]  # not 2 x 6 + entries
    assert session.revivify("agent_001").messages()[5]["content"] == "question 2, edited in place"


# --- history deltas on spans ------------------------------------------------------------------


def chat(history: list[dict[str, Any]], questions: list[str]) -> None:
    @agenttrace.agent("Chatty")
    def run() -> None:
        for question in questions:
            history.append({"role": "user", "content": question})
            reply = litellm.completion(model="gpt-4o-mini", messages=history, mock_response="ok")
            history.append({"role": "assistant", "content": reply.choices[0].message.content})

    run()


QUESTIONS = ["one", "two", "three", "four", "five", "six"]


@pytest.mark.init(capture_content=True)
def test_span_inputs_are_deltas_after_the_previous_reply(traced: Traced) -> None:
    history: list[dict[str, Any]] = [{"role": "system", "content": "be brief " * 20}]
    chat(history, QUESTIONS)
    spans = [attrs(s) for s in traced.by_name("chat gpt-4o-mini")]
    replies = [
        e["message_id"] for e in agenttrace.current_session().events if e.get("role") == "assistant"
    ]
    first, rest = spans[0], spans[1:]
    assert json.loads(first[sc.GEN_AI_INPUT_MESSAGES]) == history[:2]
    assert first[sc.INPUT_MESSAGES_SKIPPED] == 0 and sc.INPUT_AFTER not in first
    for number, span in enumerate(rest, 1):
        # The question after the previous reply: the history before it is on earlier spans.
        assert json.loads(span[sc.GEN_AI_INPUT_MESSAGES]) == [history[2 * number + 1]]
        assert span[sc.INPUT_MESSAGES_SKIPPED] == 2 * number + 1
        assert span[sc.INPUT_AFTER] == replies[number - 1]
        assert span[sc.REQUEST_MESSAGES] == 2 * number + 2
        assert sc.INPUT_REWRITTEN not in span
    # Sizes: the deltas against the whole request on every span.
    deltas = sum(len(span[sc.GEN_AI_INPUT_MESSAGES]) for span in spans)
    whole = sum(len(json.dumps(history[: 2 * n + 2])) for n in range(len(QUESTIONS)))
    assert deltas * 4 < whole


@pytest.mark.init(capture_content=True, input_deltas=False)
def test_input_deltas_can_be_switched_off(traced: Traced) -> None:
    history: list[dict[str, Any]] = [{"role": "system", "content": "be brief " * 20}]
    chat(history, QUESTIONS)
    spans = [attrs(s) for s in traced.by_name("chat gpt-4o-mini")]
    for number, span in enumerate(spans):
        assert json.loads(span[sc.GEN_AI_INPUT_MESSAGES]) == history[: 2 * number + 2]
        assert span[sc.INPUT_MESSAGES_SKIPPED] == 0 and sc.INPUT_AFTER not in span
    assert Settings.resolve(env={}).input_deltas is True
    assert Settings.resolve(env={"AGENTTRACE_INPUT_DELTAS": "false"}).input_deltas is False
    assert Settings.resolve(env={"AGENTTRACE_INPUT_DELTAS": "0"}, input_deltas=True).input_deltas


@pytest.mark.init(capture_content=True)
def test_a_span_after_a_rewrite_carries_the_whole_request(traced: Traced, llm: LLMServer) -> None:
    agent = run_rewriter(llm)
    spans = [attrs(s) for s in traced.by_name("chat gpt-4o-mini")]
    assert len(spans) == len(agent.sent) == 4
    for span, sent in zip(spans, agent.sent, strict=True):
        assert json.loads(span[sc.GEN_AI_INPUT_MESSAGES]) == sent
        assert span[sc.INPUT_MESSAGES_SKIPPED] == 0
    assert [span.get(sc.INPUT_REWRITTEN, False) for span in spans] == [False, True, True, True]


def test_an_anthropic_style_system_prompt_opens_the_transcript(traced: Traced) -> None:
    @agenttrace.agent("Claude")
    def run() -> None:
        reply_to(system="You are terse.", messages=[{"role": "user", "content": "hi"}])
        reply_to(
            system="You are terse.",
            messages=[
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "Hello."},
                {"role": "user", "content": "bye"},
            ],
        )

    @agenttrace.llm(model="anthropic/claude-x")
    def reply_to(**kwargs: Any) -> dict[str, Any]:
        answer = "Hello." if len(kwargs["messages"]) == 1 else "Bye."
        return {"choices": [{"message": {"role": "assistant", "content": answer}}]}

    run()
    (record,) = agenttrace.current_session().agents.values()
    assert [(e["role"], e["content"]) for e in record.transcript] == [
        ("system", "You are terse."),
        ("user", "hi"),
        ("assistant", "Hello."),
        ("user", "bye"),
        ("assistant", "Bye."),
    ]


# --- reading resets back ----------------------------------------------------------------------


def write(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def test_a_stream_with_resets_restores_the_transcripts(tmp_path: Path) -> None:
    events = [
        {"message_id": "msg_001", "event_type": "agent_created", "agent_id": "agent_001"},
        *(
            {
                "message_id": f"msg_00{n}",
                "event_type": "transcript_entry",
                "agent_id": "agent_001",
                "role": "user",
                "content": f"m{n}",
            }
            for n in (2, 3, 4)
        ),
        {
            "message_id": "msg_005",
            "event_type": "transcript_reset",
            "agent_id": "agent_001",
            "kept": 1,
        },
        {
            "message_id": "msg_006",
            "event_type": "transcript_entry",
            "agent_id": "agent_001",
            "role": "user",
            "content": "m6",
        },
        # More kept than there are entries keeps them all.
        {
            "message_id": "msg_007",
            "event_type": "transcript_reset",
            "agent_id": "agent_001",
            "kept": 9,
        },
    ]
    session = agenttrace.Session.load(write(tmp_path / "s.events.jsonl", events))
    assert [m["content"] for m in session.revivify("agent_001").messages()] == ["m2", "m6"]
    assert session.message_counter == 7


@pytest.mark.parametrize(
    "reset",
    [
        {"kept": -1},
        {"kept": "1"},
        {},
        {"kept": 1, "content": "x"},
        {"kept": 1, "entries": -1},
        {"kept": 1, "entries": "1"},
    ],
)
def test_a_malformed_reset_is_refused(tmp_path: Path, reset: dict[str, Any]) -> None:
    events = [
        {"message_id": "msg_001", "event_type": "agent_created", "agent_id": "agent_001"},
        {
            "message_id": "msg_002",
            "event_type": "transcript_reset",
            "agent_id": "agent_001",
            **reset,
        },
    ]
    with pytest.raises(SessionFileError, match="line 2 is not a canonical event"):
        read_session_file(write(tmp_path / "s.events.jsonl", events))


def test_views_of_what_happened_skip_the_entries_a_reset_restated() -> None:
    from agenttrace.model.resets import as_it_happened

    def entry(n: int, agent: str = "agent_001") -> dict[str, Any]:
        return {"message_id": f"msg_{n:03}", "event_type": "transcript_entry", "agent_id": agent}

    reset = {
        "message_id": "msg_002",
        "event_type": "transcript_reset",
        "agent_id": "agent_001",
        "kept": 0,
        "entries": 2,
    }
    older = {**reset, "message_id": "msg_009"}
    del older["entries"]  # a stream that does not say: nothing is skipped
    events = [
        entry(1),
        reset,
        entry(3, "agent_002"),
        entry(4),
        entry(5),
        entry(6),
        older,
        entry(10),
    ]
    assert [e["message_id"] for e in as_it_happened(events)] == [
        "msg_001",
        "msg_002",
        "msg_003",  # another agent's entry in between is not one of them
        "msg_006",
        "msg_009",
        "msg_010",
    ]


@pytest.mark.init(capture_content=True)
def test_a_sliding_window_records_what_follows_the_previous_reply(traced: Traced) -> None:
    """A window that drops the oldest exchange each call rewrites the history every time; the
    span still records only what follows the agent's previous reply, which it still holds."""
    history: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    for number in range(20):
        history += [
            {"role": "user", "content": f"question {number}"},
            {"role": "assistant", "content": f"answer {number}"},
        ]

    sent: list[dict[str, Any]] = []

    @agenttrace.agent("Windowed")
    def run() -> None:
        for question in QUESTIONS:
            history.append({"role": "user", "content": question})
            sent[:] = [dict(m) for m in history]
            reply = litellm.completion(model="gpt-4o-mini", messages=history, mock_response="ok")
            history.append({"role": "assistant", "content": reply.choices[0].message.content})
            del history[1:3]  # the oldest exchange; the system prompt stays

    run()
    spans = [attrs(s) for s in traced.by_name("chat gpt-4o-mini")]
    session = agenttrace.current_session()
    events = {e["message_id"]: e for e in session.events}
    assert len(spans) == len(QUESTIONS)
    assert sc.INPUT_REWRITTEN not in spans[0]
    afters = []
    for number, span in enumerate(spans[1:], 1):
        assert span[sc.INPUT_REWRITTEN] is True
        assert json.loads(span[sc.GEN_AI_INPUT_MESSAGES]) == [
            {"role": "user", "content": QUESTIONS[number]}
        ]
        after = events[span[sc.INPUT_AFTER]]  # the reply the previous call logged
        assert (after["role"], after["content"]) == ("assistant", "ok")
        afters.append(after["message_id"])
        assert span[sc.INPUT_MESSAGES_SKIPPED] == span[sc.REQUEST_MESSAGES] - 1
    assert afters == sorted(set(afters))  # a new reply each time
    # What the last request was is in the stream: resume gives it and its reply.
    (record,) = session.agents.values()
    assert record.messages() == [*sent, {"role": "assistant", "content": "ok"}]
