"""LLM attempts in the step journal (issue 22 items 1 and 3): each claims its step when it
starts (an ``intent`` in the stream at once, so a viewer shows it running) and its ``done`` line
keeps the exact response, a stream's chunks in order; sync and async, plain and streamed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import litellm
import pytest

import agenttrace
from agenttrace.model import journal as j
from agenttrace.model.reentry import Reentry, check_policy

from .conftest import Traced
from .llm_server import LLMServer, Reply
from .test_litellm import http
from .test_steps_journal import journal_lines


def llm_lines(tmp_path: Path) -> list[dict[str, Any]]:
    return [line for line in journal_lines(tmp_path) if line.get("kind") == "llm"]


def test_an_attempt_journals_its_request_and_its_exact_response(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    llm.reset(Reply(content="Hello there"))
    kwargs = http(llm, temperature=0.2)
    response = litellm.completion(**kwargs)
    traced.handle.force_flush()
    intent, done = llm_lines(tmp_path)
    assert (intent["state"], intent["name"], intent["step"]) == ("intent", "gpt-4o-mini", "1.1")
    assert intent["fingerprint"] == j.llm_fingerprint(j.llm_request(kwargs))
    assert "effect" not in intent and "arguments" not in intent
    assert done["state"] == "done" and (done["run"], done["step"]) == (intent["run"], "1.1")
    assert done["result"] == response.model_dump(mode="json")  # the response, whole


def test_the_fingerprint_leaves_out_where_and_with_which_key() -> None:
    asked = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": 0}
    elsewhere = {**asked, "api_base": "http://other", "api_key": "sk-2", "timeout": 3}
    assert j.fingerprint(j.llm_request(asked)) == j.fingerprint(j.llm_request(elsewhere))
    hotter = {**asked, "temperature": 1}
    assert j.fingerprint(j.llm_request(asked)) != j.fingerprint(j.llm_request(hotter))
    # Ids are left out at any depth; text that only mentions one is the question itself.
    call = {"role": "assistant", "tool_calls": [{"id": "call_1", "function": {"name": "f"}}]}
    other_id = {"role": "assistant", "tool_calls": [{"id": "call_9", "function": {"name": "f"}}]}
    assert j.fingerprint({"messages": [call]}) == j.fingerprint({"messages": [other_id]})
    quoting = {"messages": [{"role": "user", "content": 'say {"id": 1}'}]}
    quoting_2 = {"messages": [{"role": "user", "content": 'say {"id": 2}'}]}
    assert j.fingerprint(quoting) != j.fingerprint(quoting_2)


def test_a_stream_is_running_in_the_stream_then_keeps_its_chunks_in_order(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    llm.reset(Reply(content="Hello streaming world"))
    stream = litellm.completion(**http(llm, stream=True))
    first = next(stream)
    # While it streams, the attempt is in the file as started, and not yet as done.
    assert [line["state"] for line in llm_lines(tmp_path)] == ["intent"]
    chunks = [first, *stream]
    traced.handle.force_flush()
    _, done = llm_lines(tmp_path)
    assert "result" not in done
    assert [c["choices"][0]["delta"].get("content") for c in done["chunks"] if c["choices"]] == [
        c.choices[0].delta.content for c in chunks if c.choices
    ]


def test_async_attempts_are_journaled_too(traced: Traced, tmp_path: Path, llm: LLMServer) -> None:
    llm.reset(Reply(content="one"), Reply(content="two words"))

    async def ask() -> str:
        plain = await litellm.acompletion(**http(llm))
        stream = await litellm.acompletion(**http(llm, stream=True))
        text = "".join([chunk.choices[0].delta.content or "" async for chunk in stream])
        return f"{plain.choices[0].message.content}/{text}"

    assert asyncio.run(ask()) == "one/two words"
    traced.handle.force_flush()
    lines = llm_lines(tmp_path)
    assert sorted(line["state"] for line in lines) == ["done", "done", "intent", "intent"]
    plain, streamed = [line for line in lines if line["state"] == "done"]
    assert plain["result"]["choices"][0]["message"]["content"] == "one"
    assert (
        "".join(
            c["choices"][0]["delta"].get("content") or ""
            for c in streamed["chunks"]
            if c["choices"]
        )
        == "two words"
    )


def test_a_failed_attempt_is_journaled_as_failed_with_no_effect(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    llm.reset(Reply(status=400))
    with pytest.raises(litellm.BadRequestError):
        litellm.completion(**http(llm))
    traced.handle.force_flush()
    _, failed = llm_lines(tmp_path)
    assert (failed["state"], failed["applied"]) == ("failed", "no")


@pytest.mark.init(journal=False)
def test_the_journal_off_journals_no_attempt(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    llm.reset()
    agenttrace.agent("Shop")(lambda: litellm.completion(**http(llm)))()
    traced.handle.force_flush()
    (stream,) = (tmp_path / "sessions").glob("*.events.jsonl")
    lines = [json.loads(line) for line in stream.read_text().splitlines()]
    assert [line for line in lines if line["event_type"] == "step"] == []


def rearm(tmp_path: Path, keep: Callable[[dict[str, Any]], bool] | None = None) -> None:
    """Arm the current session to re-enter its last run, as a resume of a killed run would
    (the run ended here; what is tested is how the re-entered run's attempts are answered).
    ``keep``: which journal lines the resume finds (a kill may have left some unwritten)."""
    lines = [line for line in journal_lines(tmp_path, runs=True) if keep is None or keep(line)]
    journal = j.Journal(lines)
    (origin,) = {line["run"] for line in lines}
    session = agenttrace.current_session()
    session.reentry = Reentry(origin, 2, journal, check_policy(None))


@pytest.mark.parametrize("stream", [False, True])
def test_a_re_entered_run_is_answered_from_the_journal_sync_and_async(
    traced: Traced, tmp_path: Path, llm: LLMServer, stream: bool
) -> None:
    llm.reset(Reply(content="first answer"), Reply(content="second answer"))

    @agenttrace.agent("Asker")
    async def ask() -> str:
        sync = litellm.completion(**http(llm, stream=stream))
        if stream:
            sync_text = "".join(c.choices[0].delta.content or "" for c in sync if c.choices)
        else:
            sync_text = sync.choices[0].message.content
        answer = await litellm.acompletion(**http(llm, stream=stream, temperature=0.5))
        if stream:
            chunks = [c async for c in answer]
            return sync_text + "/" + "".join(c.choices[0].delta.content or "" for c in chunks)
        return f"{sync_text}/{answer.choices[0].message.content}"

    assert asyncio.run(ask()) == "first answer/second answer"
    traced.handle.force_flush()
    rearm(tmp_path)
    llm.reset(Reply(content="not asked"))
    assert asyncio.run(ask()) == "first answer/second answer"
    assert llm.requests == []  # neither reply was asked for again
    replayed = [s for s in traced.spans() if (s.attributes or {}).get("agenttrace.replayed")]
    assert len(replayed) == 2
    assert all("agenttrace.cost.usd" not in (s.attributes or {}) for s in replayed)
    states = [line["state"] for line in llm_lines(tmp_path)]
    assert states.count("replayed") == 2 and states.count("done") == 2


def test_an_llm_function_of_your_own_is_journaled_and_answered_on_re_entry(
    traced: Traced, tmp_path: Path
) -> None:
    """``@agenttrace.llm`` on a client agenttrace does not patch: each call is a step with the
    fingerprint of its model and arguments, its return value the recorded response, and a
    re-entered run gets that response back without the function being called."""
    asked: list[list[dict[str, Any]]] = []

    class Client:  # not data: counts by its kind in the fingerprint, not by its address
        @agenttrace.llm(model="house/model-1")
        def chat(self, messages: list[dict[str, Any]], temperature: float = 0.0) -> Any:
            asked.append(messages)
            return {
                "choices": [{"message": {"role": "assistant", "content": f"answer {len(asked)}"}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2},
            }

    @agenttrace.agent("Asker")
    def ask(client: Client) -> str:
        reply = client.chat([{"role": "user", "content": "hi"}], temperature=0.3)
        return str(reply["choices"][0]["message"]["content"])

    assert ask(Client()) == "answer 1"
    traced.handle.force_flush()
    intent, done = llm_lines(tmp_path)
    assert (intent["state"], intent["name"], done["state"]) == ("intent", "house/model-1", "done")
    same = {
        "model": "house/model-1",
        "args": [Client.__qualname__, [{"role": "user", "content": "hi"}]],
    }
    assert intent["fingerprint"] == j.llm_fingerprint(j.llm_request({**same, "temperature": 0.3}))
    assert done["result"]["choices"][0]["message"]["content"] == "answer 1"

    rearm(tmp_path)
    assert ask(Client()) == "answer 1"  # from the journal
    assert len(asked) == 1  # the function was not called again
    replayed = [s for s in traced.spans() if (s.attributes or {}).get("agenttrace.replayed")]
    assert [s.name for s in replayed] == ["chat model-1"]


def test_a_call_s_request_is_built_once_keeping_its_data_as_it_is() -> None:
    """``call_request`` is on the path of every ``@agenttrace.llm`` call: arguments that are
    data are taken as they are (not copied), volatile keywords are left out as the fingerprint
    would, and what is not data counts by its kind (an address differs per process)."""
    from pydantic import BaseModel

    from agenttrace.tracing.journal.llm_steps import call_request

    class Message(BaseModel):
        role: str
        content: str

    class Client:
        pass

    messages = [{"role": "user", "content": "hi"}]
    request = call_request("m", (Client(), messages), {"temperature": 0.1, "api_key": "sk-1"})
    kind = Client.__qualname__
    assert request == {"temperature": 0.1, "model": "m", "args": [kind, messages]}
    assert request["args"][1] is messages
    typed = call_request("m", (), {"messages": [Message(role="user", content="hi")]})
    assert typed["messages"] == messages  # a pydantic message counts as its data
    assert j.fingerprint(call_request("m", (), {"messages": messages, "timeout": 3})) == (
        j.fingerprint(j.llm_request({"messages": messages, "model": "m"}))
    )


@pytest.mark.parametrize("stream", [False, True])
def test_an_attempt_is_billed_before_its_done_line_is_handed_over(
    traced: Traced, tmp_path: Path, llm: LLMServer, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    """The ledger's line of an LLM attempt is written before its ``done`` line goes to the
    background thread: a kill between the two then leaves the attempt in doubt (asked again,
    billed again, as the model bills it), never done and never billed (a re-entry serves a done
    reply from the journal and bills nothing). Found by the kill matrix (tests/kill_matrix.py):
    killed between them, the model had answered and the ledger had no line for it."""
    from agenttrace._internal.runtime import runtime

    recorder = runtime.recorder
    assert recorder is not None
    ledger = tmp_path / "accounting.jsonl"
    billed_when_done: list[int] = []
    journal = recorder.journal

    def watching(session: Any, line: Any, later: bool = False) -> None:
        text = line() if callable(line) else line
        step = json.loads(text)
        if step.get("kind") == "llm" and step.get("state") == "done":
            lines = ledger.read_text().splitlines() if ledger.exists() else []
            billed_when_done.append(sum(json.loads(entry)["type"] == "llm" for entry in lines))
        journal(session, text, later)

    monkeypatch.setattr(recorder, "journal", watching)
    llm.reset(Reply(content="Hello there"))
    response = litellm.completion(**http(llm), stream=stream)
    if stream:
        list(response)
    traced.handle.force_flush()
    assert billed_when_done == [1]
