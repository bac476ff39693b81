"""A rewritten history records what changed (issue 19, items 2 and 4).

An agent loop around a mocked ``litellm.completion`` keeps a sliding window (the oldest exchange
dropped each call) or compacts its history (a summary in place of the old messages): each
rewrite is a ``transcript_reset`` that refers to the entries already recorded by their message
ids and carries in full only what is new, so the stream grows by what is new; ``resume`` and
the views rebuild exactly what was sent; redaction applies to every new message, and a secret
in an old message that is sent again is not recorded again.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import litellm
import pytest

import agenttrace
from agenttrace import semconv as sc
from agenttrace.formats.session.files import read_session_file
from agenttrace.model import events as ev
from agenttrace.model.resets import as_it_happened
from agenttrace.views.viewer import SessionViewer

from .conftest import Traced
from .helpers import canonical_events, is_event_line

SECRET = "hunter2-canary-7f3a"


def history_of(length: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}]
    while len(history) < length:
        number = len(history)
        role = "user" if number % 2 else "assistant"
        history.append({"role": role, "content": f"{role} message {number} " + "x" * 200})
    return history


def window_loop(history: list[dict[str, Any]], calls: int, name: str = "Windowed") -> list[Any]:
    """Run ``calls`` calls of a sliding-window agent; the request of each call, as sent."""
    sent: list[Any] = []

    @agenttrace.agent(name)
    def run() -> None:
        for number in range(calls):
            history.append({"role": "user", "content": f"question {number} of {name}"})
            sent.append([dict(m) for m in history])
            reply = litellm.completion(
                model="gpt-4o-mini", messages=history, mock_response=f"answer {number}"
            )
            history.append({"role": "assistant", "content": reply.choices[0].message.content})
            del history[1:3]  # the oldest exchange; the system prompt stays

    run()
    return sent


def stream_of(tmp_path: Path) -> Path:
    (stream,) = (tmp_path / "sessions").glob("*.events.jsonl")
    return stream


def event_lines(stream: Path) -> list[bytes]:
    return [line for line in stream.read_bytes().splitlines() if is_event_line(line)]


def test_a_window_loop_logs_only_what_is_new(traced: Traced, tmp_path: Path) -> None:
    history = history_of(40)
    sent = window_loop(history, 6)
    traced.handle.force_flush()
    events = canonical_events(stream_of(tmp_path))
    first_reply = next(
        i
        for i, e in enumerate(events)
        if e.get("role") == "assistant" and e["content"] == "answer 0"
    )
    # After the first call (the agent, its whole first request and its reply), each call logs
    # a reset, the one new question and the reply: nothing of the window again.
    later = events[first_reply + 1 :]
    assert [e["event_type"] for e in later] == [
        "transcript_reset", "transcript_entry", "transcript_entry"
    ] * 5  # fmt: skip
    triples = [later[i : i + 3] for i in range(0, len(later), 3)]
    for number, (reset, question, reply) in enumerate(triples, 1):
        assert reset["kept"] == 1  # the system prompt
        assert reset["entries"] == 1
        first, last = reset["reused"][0]
        assert reset["reused"][1] == 1  # the question, after what was sent before
        assert question["content"] == f"question {number} of Windowed"
        assert reply["content"] == f"answer {number}"
        assert ev.id_number(first, "msg_") < ev.id_number(last, "msg_")
    # Every message of the first window is in the stream once, whatever was sent again.
    text = stream_of(tmp_path).read_text()
    for message in sent[0]:
        assert text.count(json.dumps(message["content"])) == 1


def test_the_stream_grows_by_what_is_new_whatever_the_window(tmp_path: Path) -> None:
    """The bytes a call adds to the stream do not depend on how long the window is."""
    grown = {}
    for length in (10, 200):
        directory = tmp_path / str(length)
        handle = agenttrace.init(sessions_dir=directory, console="quiet")
        try:
            agenttrace.new_session()
            history = history_of(length)
            window_loop(history, 1, name="Sizer")  # the first request logs the whole window
            agenttrace.force_flush()
            (stream,) = directory.glob("*.events.jsonl")
            before = len(b"\n".join(event_lines(stream)))
            window_loop(history, 4, name="Sizer")
            agenttrace.force_flush()
            grown[length] = len(b"\n".join(event_lines(stream))) - before
        finally:
            handle.shutdown()
            agenttrace.use_session(None)
    # The same calls, a window 20 times longer: the same lines but for a few digits of ids and
    # times (a run of reused entries is named by its first and last ids, whatever its length).
    assert abs(grown[200] - grown[10]) < 0.05 * grown[10], grown


def test_resume_and_the_views_give_what_was_sent(traced: Traced, tmp_path: Path) -> None:
    history = history_of(12)
    sent = window_loop(history, 5)
    traced.handle.force_flush()
    last = [*sent[-1], {"role": "assistant", "content": "answer 4"}]
    assert agenttrace.current_session().revivify("agent_001").messages() == last
    stream = stream_of(tmp_path)
    snapshot = stream.with_name(stream.name.replace(".events.jsonl", ".json.gz"))
    for path in (stream, snapshot):
        agenttrace.use_session(None)
        root, _ = agenttrace.load_session(path)
        assert root.messages() == last, path.name
    # The session file holds the resets as the stream has them.
    with gzip.open(snapshot) as handle:
        assert b'"reused"' in handle.read()
    assert [e.get("reused") for e in read_session_file(snapshot).events if "kept" in e] == [
        e.get("reused") for e in canonical_events(stream) if "kept" in e
    ]
    # The perspective shows each rewrite, what it sent again, and what was new after it.
    perspective = SessionViewer(stream).extract_agent_perspective("agent_001").splitlines()
    resets = [line for line in perspective if line.startswith("[Reset]")]
    assert (
        resets
        == [
            "[Reset]: history rewritten: kept 1 entry, sent 11 again, dropped 2, then what it was "
            "sent"  # the window's 10 older messages and the previous reply
        ]
        * 4
    )
    after = perspective.index(resets[0]) + 1
    assert perspective[after : after + 2] == ["[Heard]: question 1 of Windowed", "[Said]: answer 1"]
    # A view of what happened has each question and answer once, the reused entries not at all.
    happened = [e for e in as_it_happened(canonical_events(stream)) if e.get("role") == "user"]
    questions = [e["content"] for e in happened if e["content"].startswith("question")]
    assert questions == [f"question {n} of Windowed" for n in range(5)]


def test_a_compaction_reuses_what_it_kept_and_logs_its_summary(traced: Traced) -> None:
    history = history_of(20)

    @agenttrace.agent("Compactor")
    def run() -> None:
        litellm.completion(model="gpt-4o-mini", messages=history, mock_response="first")
        history.append({"role": "assistant", "content": "first"})
        # Compaction: a summary replaces the oldest messages; the recent ones stay as they were.
        history[1:15] = [{"role": "user", "content": "Summary of the conversation so far."}]
        history.append({"role": "user", "content": "go on"})
        litellm.completion(model="gpt-4o-mini", messages=history, mock_response="second")

    run()
    session = agenttrace.current_session()
    reset = next(e for e in session.events if e.get("event_type") == ev.TRANSCRIPT_RESET)
    assert reset["kept"] == 1
    # The summary (new), the recent messages and the reply (reused), the new question.
    assert reset["entries"] == 2
    count, (first, last), new = reset["reused"]
    assert (count, new) == (1, 1)
    record = session.revivify("agent_001")
    by_id = {e["message_id"]: e for e in session.events if "message_id" in e}
    assert by_id[first]["content"] == history[2]["content"]
    assert by_id[last]["content"] == "first"
    assert record.messages() == [*history, {"role": "assistant", "content": "second"}]
    # The summary restates the context; the question after the reused run is new.
    shown = [e.get("content") for e in as_it_happened(session.events) if e.get("role") == "user"]
    assert "Summary of the conversation so far." not in shown and "go on" in shown


@pytest.mark.init(capture_content=True, redacted_save=True)
def test_redaction_applies_to_new_messages_and_an_old_secret_is_not_recorded_again(
    traced: Traced, tmp_path: Path
) -> None:
    history = history_of(8)
    history[3]["content"] = f'{{"password": "{SECRET}"}}'  # an old message with a secret
    window_loop(history, 1)
    history.append({"role": "user", "content": f'{{"api_key": "{SECRET}"}}'})  # a new one
    del history[1:3]
    window_loop(history, 2)  # the old secret is sent again, twice
    traced.handle.force_flush()
    stream_text = stream_of(tmp_path).read_text()
    assert SECRET not in stream_text
    span_texts = [
        json.dumps(dict(event.attributes or {})) for span in traced.spans() for event in span.events
    ] + [json.dumps(dict(span.attributes or {})) for span in traced.spans()]
    assert not any(SECRET in text for text in span_texts)
    # The old message is on one span event, when it was first logged; sending it again adds none.
    old = [
        text
        for text in span_texts
        if ("password" in text or "api_key" in text)
        and "[REDACTED]" in text
        and sc.EVENT_CONTENT in text
    ]
    assert len(old) == 2  # the old message once, the new message once


# --- reading resets that reuse entries: files are untrusted ------------------------------------


def entry(number: int, content: str) -> dict[str, Any]:
    return {
        "message_id": ev.message_id(number),
        "event_type": "transcript_entry",
        "agent_id": "agent_001",
        "role": "user",
        "content": content,
    }


def reset(number: int, kept: int, entries: int, reused: list[Any]) -> dict[str, Any]:
    return {
        "message_id": ev.message_id(number),
        "event_type": "transcript_reset",
        "agent_id": "agent_001",
        "kept": kept,
        "entries": entries,
        "reused": reused,
    }


def write(path: Path, events: list[dict[str, Any]]) -> Path:
    created = {"message_id": "msg_001", "event_type": "agent_created", "agent_id": "agent_001"}
    path.write_text("".join(json.dumps(e) + "\n" for e in [created, *events]))
    return path


def contents(path: Path) -> list[str]:
    session = agenttrace.Session.load(path)
    return [m["content"] for m in session.revivify("agent_001").messages()]


def test_a_reset_places_new_entries_between_the_runs_it_reuses(tmp_path: Path) -> None:
    events = [entry(n, f"m{n}") for n in range(2, 8)]  # m2 .. m7
    events += [
        reset(8, 1, 2, [1, ["msg_004", "msg_005"], 1, ["msg_007", "msg_007"]]),
        entry(9, "new a"),
        entry(10, "new b"),
    ]
    assert contents(write(tmp_path / "a.events.jsonl", events)) == [
        "m2", "new a", "m4", "m5", "new b", "m7"
    ]  # fmt: skip


def test_a_reset_cut_short_keeps_what_it_reuses_and_runs_it_cannot_find_are_dropped(
    tmp_path: Path,
) -> None:
    events = [entry(n, f"m{n}") for n in range(2, 6)]  # m2 .. m5
    # Its new entry never came (the file ends): the reused run is still placed.
    cut = [*events, reset(6, 0, 1, [["msg_003", "msg_004"], 1])]
    assert contents(write(tmp_path / "cut.events.jsonl", cut)) == ["m3", "m4"]
    # A run naming entries the transcript does not hold (or out of order) is left out.
    odd = [*events, reset(6, 0, 0, [["msg_099", "msg_100"], ["msg_005", "msg_005"]])]
    assert contents(write(tmp_path / "odd.events.jsonl", odd)) == ["m5"]
    backwards = [*events, reset(6, 0, 0, [["msg_004", "msg_004"], ["msg_002", "msg_003"]])]
    assert contents(write(tmp_path / "back.events.jsonl", backwards)) == ["m4"]


@pytest.mark.parametrize(
    "reused",
    [
        [2],  # counts that do not add up to entries
        [["msg_002"]],
        [["msg_002", "msg_003", "msg_004"]],
        [-1],
        [["msg_002", 3]],
        "msg_002",
    ],
)
def test_a_malformed_reused_is_refused(tmp_path: Path, reused: Any) -> None:
    from agenttrace.formats.session.files import SessionFileError

    path = write(tmp_path / "bad.events.jsonl", [entry(2, "m2"), reset(3, 0, 1, reused)])
    with pytest.raises(SessionFileError, match="line 3 is not a canonical event"):
        read_session_file(path)


def test_the_work_a_file_of_resets_asks_for_is_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each reset may reuse the whole transcript: a small file could ask for a lot of copying.
    Past a bound (``MAX_MOVED``, 200 million entries in all) the file is refused."""
    from agenttrace.formats.session.files import SessionFileError
    from agenttrace.session import state as session_module

    events = [entry(n, f"m{n}") for n in range(2, 12)]  # ten entries
    events += [reset(12 + n, 0, 0, [["msg_002", "msg_011"]]) for n in range(20)]
    path = write(tmp_path / "many.events.jsonl", events)
    assert len(contents(path)) == 10  # 200 entries placed: under any bound
    monkeypatch.setattr(session_module, "MAX_MOVED", 150)
    with pytest.raises(SessionFileError, match="reuse more than 150 entries"):
        agenttrace.Session.load(path)


def test_a_window_after_a_compaction_reads_back_as_sent(traced: Traced, tmp_path: Path) -> None:
    """A compaction puts its new summary before the entries it reuses, so the transcript's
    message ids no longer increase along it; a later reset must still find its runs."""
    history = history_of(20)

    @agenttrace.agent("Compactor")
    def run() -> None:
        reply = litellm.completion(model="gpt-4o-mini", messages=history, mock_response="one")
        history.append({"role": "assistant", "content": reply.choices[0].message.content})
        history[1:15] = [{"role": "user", "content": "Summary of the conversation so far."}]
        history.append({"role": "user", "content": "go on"})
        reply = litellm.completion(model="gpt-4o-mini", messages=history, mock_response="two")
        history.append({"role": "assistant", "content": reply.choices[0].message.content})
        history[2:4] = []  # a window now drops two of the entries the compaction kept
        history.append({"role": "user", "content": "and now?"})
        litellm.completion(model="gpt-4o-mini", messages=history, mock_response="three")

    run()
    traced.handle.force_flush()
    last = [*history, {"role": "assistant", "content": "three"}]
    assert agenttrace.current_session().revivify("agent_001").messages() == last
    agenttrace.use_session(None)
    root, _ = agenttrace.load_session(stream_of(tmp_path))
    assert root.messages() == last
