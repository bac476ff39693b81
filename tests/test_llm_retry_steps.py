"""The OpenAI SDK's own retries inside one litellm call in the step journal (issue 22): each
request the SDK sends is an attempt of its own and a step of its own, at its own place; the
failed one ends its step as failed (applied ``no``), the next claims its step under the same
request's fingerprint. A re-entered run answers the whole call from the journal, the failure
included, so neither the retry nor the first request is sent again. Real OpenAI SDK, real
litellm, the fake model server on 127.0.0.1."""

from __future__ import annotations

import asyncio
from pathlib import Path

import litellm
import pytest

import agenttrace
from agenttrace import semconv as sc
from agenttrace.model import journal as j

from .conftest import Traced, attrs, outcome
from .llm_server import LLMServer, Reply
from .test_litellm import http, llm_spans
from .test_llm_steps import llm_lines, rearm
from .test_retries import failed, retry_counts

ORDER = {"intent": 0, "failed": 1, "done": 1, "replayed": 2}


def steps(tmp_path: Path) -> list[tuple[str, int, str]]:
    """(label, attempt, state) of each LLM step line, by place then state (a step's outcome is
    written by the background thread, so lines of two steps may interleave)."""
    lines = llm_lines(tmp_path)
    return sorted(
        ((line["step"], line["attempt"], line["state"]) for line in lines),
        key=lambda step: (step[0], step[1], ORDER[step[2]]),
    )


def ask(llm: LLMServer, is_async: bool) -> str:
    """One litellm call the OpenAI SDK may retry once, in an agent run."""

    @agenttrace.agent("Patient")
    async def run() -> str:
        kwargs = http(llm, max_retries=1)
        if is_async:
            response = await litellm.acompletion(**kwargs)
        else:
            response = litellm.completion(**kwargs)
        return str(response.choices[0].message.content)

    return asyncio.run(run())


@pytest.mark.parametrize("is_async", [False, True])
def test_each_request_the_sdk_retries_is_a_step_and_a_re_entry_sends_none(
    traced: Traced, tmp_path: Path, llm: LLMServer, is_async: bool
) -> None:
    llm.reset(failed(429), Reply(content="after one retry"))
    assert ask(llm, is_async) == "after one retry"
    assert retry_counts(llm) == ["0", "1"]  # one litellm call; the SDK sent it twice
    traced.handle.force_flush()
    assert steps(tmp_path) == [
        ("1.1", 1, "intent"),
        ("1.1", 1, "failed"),
        ("1.2", 1, "intent"),
        ("1.2", 1, "done"),
    ]
    lines = llm_lines(tmp_path)
    failure = next(line for line in lines if line["state"] == "failed")
    assert failure["applied"] == "no" and failure["error"].startswith("RateLimitError")
    intents = [line for line in lines if line["state"] == "intent"]
    first, retry = (line["fingerprint"] for line in intents)
    assert retry == first  # the retry asks the same
    if not is_async:  # litellm's async path adds its own flags to what it is asked
        assert first == j.llm_fingerprint(j.llm_request(http(llm, max_retries=1)))
    done = next(line for line in lines if line["state"] == "done")
    assert done["result"]["choices"][0]["message"]["content"] == "after one retry"

    rearm(tmp_path)
    llm.reset(Reply(content="not asked"))
    first_run = len(llm_spans(traced))
    assert ask(llm, is_async) == "after one retry"
    assert llm.requests == []  # neither the request nor its retry was sent again
    again = llm_spans(traced)[first_run:]
    assert [(attrs(s)[sc.PATH], attrs(s)[sc.ATTEMPT], outcome(s)) for s in again] == [
        ("1.1", 1, "failed"),
        ("1.2", 2, "ok"),
    ]
    assert all(attrs(s).get(sc.REPLAYED) is True for s in again)
    assert all(sc.COST_USD not in attrs(s) for s in again)  # nothing was bought
    traced.handle.force_flush()
    assert [step for step in steps(tmp_path) if step[2] == "replayed"] == [
        ("1.1", 1, "replayed"),
        ("1.2", 1, "replayed"),
    ]


def test_a_call_litellm_s_retry_loop_asked_again_after_the_sdk_s_sends_nothing_again(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    """``num_retries=1``: the OpenAI SDK sends the request twice, then litellm's retry loop a
    third time. The journal's three steps answer the re-entered call, at the same places."""
    llm.reset(failed(503), failed(503), Reply(content="third time"))
    kwargs = http(llm, num_retries=1)
    del kwargs["max_retries"]
    run = agenttrace.agent("Retrier")(lambda: litellm.completion(**kwargs))
    assert run().choices[0].message.content == "third time"
    assert len(llm.requests) == 3
    traced.handle.force_flush()
    assert [step for step in steps(tmp_path) if step[2] != "intent"] == [
        ("1.1", 1, "failed"),
        ("1.2", 1, "failed"),
        ("1.3", 1, "done"),
    ]
    rearm(tmp_path)
    llm.reset(Reply(content="not asked"))
    first_run = len(llm_spans(traced))
    assert run().choices[0].message.content == "third time"
    assert llm.requests == []
    again = llm_spans(traced)[first_run:]
    assert [(attrs(s)[sc.PATH], outcome(s)) for s in again] == [
        ("1.1", "failed"),
        ("1.2", "failed"),
        ("1.3", "ok"),
    ]


def test_a_retry_whose_reply_was_never_journaled_is_sent_at_its_place(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    """A kill after the SDK's retry was sent and before its reply was journaled: the
    re-entered call answers the recorded failure and sends the retry again, not the first
    request, so the call's attempts keep their places."""
    llm.reset(failed(429), Reply(content="lost"))
    assert ask(llm, False) == "lost"
    traced.handle.force_flush()
    rearm(tmp_path, keep=lambda line: (line["kind"], line["state"]) != ("llm", "done"))
    llm.reset(Reply(content="asked again"))
    first_run = len(llm_spans(traced))
    assert ask(llm, False) == "asked again"
    assert retry_counts(llm) == ["0"]  # one request: the retry's, as a first send
    again = llm_spans(traced)[first_run:]
    assert [(attrs(s)[sc.PATH], outcome(s)) for s in again] == [("1.1", "failed"), ("1.2", "ok")]
    assert attrs(again[0]).get(sc.REPLAYED) is True and sc.REPLAYED not in attrs(again[1])
    traced.handle.force_flush()
    assert ("1.2", 2, "done") in steps(tmp_path)  # the next attempt at that place


def test_a_failure_nobody_asked_again_is_sent_again(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    """A failed attempt the journal shows no retry of is a reply never received: sent again."""
    llm.reset(Reply(status=400))
    with pytest.raises(litellm.BadRequestError):
        ask(llm, False)
    rearm(tmp_path)
    llm.reset(Reply(content="now it answers"))
    assert ask(llm, False) == "now it answers"
    assert len(llm.requests) == 1
    traced.handle.force_flush()
    assert ("1.1", 2, "done") in steps(tmp_path)
