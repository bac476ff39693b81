"""Retries are attempts: every path that asks again, against the local server over real HTTP.

A failed request and its re-request are attempts 1, 2, ... of one logical call, in one turn,
whoever asks again: the OpenAI SDK inside one litellm call (``max_retries``, and ``num_retries``,
which the locked litellm hands to the SDK), litellm's retry loop, ``completion_with_retries``,
the ``Router``, ``fallbacks``, or the program itself catching the error (the re-request rule).
Under ``init()`` alone, a bare call that fails and is retried to success is one run that
succeeded, with no ERR line.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import litellm
import openai
import pytest

import agenttrace
from agenttrace import semconv as sc

from .conftest import Traced, attrs, outcome
from .llm_server import LLMServer, Reply
from .test_litellm import KEY, MODEL, http, llm_spans

QUICK = {"retry-after-ms": "1"}
"""The OpenAI SDK's back-off honours this: its retries come after 1 ms, not half a second."""


def attempts(traced: Traced) -> list[tuple[int, str, str]]:
    """(attempt number, outcome, path label) of every LLM attempt, in start order."""
    return [(attrs(s)[sc.ATTEMPT], outcome(s), attrs(s)[sc.PATH]) for s in llm_spans(traced)]


def retry_counts(llm: LLMServer) -> list[str | None]:
    """The OpenAI SDK's own count of the retries it made, on each request it sent."""
    return [r.headers.get("x-stainless-retry-count") for r in llm.requests]


def unflushed(traced: Traced, name: str) -> list[Any]:
    """The spans named ``name`` exported so far, without a flush (which ends the implicit runs
    that have no call running)."""
    return [s for s in traced.exporter.get_finished_spans() if s.name == name]


def failed(status: int) -> Reply:
    return Reply(status=status, headers=QUICK)


# --- the OpenAI SDK retrying inside one litellm call ---------------------------------------------


@pytest.mark.slow  # waits out real back-offs and time-outs: make test, not make check
@pytest.mark.init(capture_content=True)
def test_each_request_the_openai_sdk_retries_is_an_attempt(traced: Traced, llm: LLMServer) -> None:
    llm.reset(failed(429), failed(500))

    @agenttrace.agent("Patient")
    def run() -> Any:
        return litellm.completion(**http(llm, max_retries=2))

    assert run().choices[0].message.content == "Hello!"
    assert retry_counts(llm) == ["0", "1", "2"]  # one litellm call; the SDK sent it 3 times
    assert traced.tree() == [
        "invoke_agent Patient [0]",
        "  turn 1 [1]",
        "    chat gpt-4o-mini [1.1]",
        "    chat gpt-4o-mini [1.2]",
        "    chat gpt-4o-mini [1.3]",
    ]
    assert attempts(traced) == [(1, "failed", "1.1"), (2, "failed", "1.2"), (3, "ok", "1.3")]
    first, second, third = (attrs(s) for s in llm_spans(traced))
    assert (first[sc.ERROR_TYPE], second[sc.ERROR_TYPE]) == ("quota", "model")
    # Each failure is the error the SDK would have raised for that answer.
    (event,) = llm_spans(traced)[0].events
    assert event.attributes is not None
    assert event.attributes["exception.type"] == "openai.RateLimitError"
    assert "Error code: 429" in str(event.attributes["exception.message"])
    # The request is recorded once; the attempts after it repeat it.
    assert json.loads(first[sc.GEN_AI_INPUT_MESSAGES]) == [{"role": "user", "content": "hi"}]
    assert json.loads(third[sc.GEN_AI_INPUT_MESSAGES]) == []
    assert third[sc.GEN_AI_USAGE_INPUT_TOKENS] == 11


@pytest.mark.slow  # waits out real back-offs and time-outs: make test, not make check
def test_num_retries_is_sdk_retries_then_litellms_retry_loop(
    traced: Traced, llm: LLMServer
) -> None:
    # litellm 1.105 turns num_retries=2 into the SDK's max_retries=2 (3 requests), and when all
    # of them fail its retry loop makes up to 2 more calls, without SDK retries: 5 requests.
    llm.reset(*[failed(429)] * 4)

    @agenttrace.agent("Retrier")
    def run() -> Any:
        kwargs = http(llm, num_retries=2)
        del kwargs["max_retries"]
        return litellm.completion(**kwargs)

    assert run().choices[0].message.content == "Hello!"
    assert retry_counts(llm) == ["0", "1", "2", "0", "0"]
    assert attempts(traced) == [
        (1, "failed", "1.1"),
        (2, "failed", "1.2"),
        (3, "failed", "1.3"),
        (4, "failed", "1.4"),
        (5, "ok", "1.5"),
    ]
    assert {attrs(s)[sc.ERROR_TYPE] for s in llm_spans(traced)[:4]} == {"quota"}
    assert len(traced.by_name("turn 1")) == 1


def test_num_retries_all_failing_is_2n_plus_1_failed_attempts(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(*[failed(503)] * 3)
    kwargs = http(llm, num_retries=1)
    del kwargs["max_retries"]

    @agenttrace.agent("Doomed")
    def run() -> Any:
        return litellm.completion(**kwargs)

    with pytest.raises(litellm.ServiceUnavailableError):
        run()
    assert len(llm.requests) == 3
    assert [(n, status) for n, status, _ in attempts(traced)] == [
        (1, "failed"),
        (2, "failed"),
        (3, "failed"),
    ]
    assert outcome(traced.one("invoke_agent Doomed")) == "failed"


async def test_async_sdk_retries_are_attempts(traced: Traced, llm: LLMServer) -> None:
    llm.reset(failed(503))

    @agenttrace.agent("AsyncPatient")
    async def run() -> Any:
        return await litellm.acompletion(**http(llm, max_retries=1))

    assert (await run()).choices[0].message.content == "Hello!"
    assert retry_counts(llm) == ["0", "1"]
    assert attempts(traced) == [(1, "failed", "1.1"), (2, "ok", "1.2")]
    assert attrs(llm_spans(traced)[0])[sc.ERROR_TYPE] == "model"
    assert attrs(llm_spans(traced)[1])[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 7


@pytest.mark.slow  # waits out real back-offs and time-outs: make test, not make check
async def test_async_num_retries(traced: Traced, llm: LLMServer) -> None:
    # As in the sync case: the SDK's 3 requests, then litellm's async retry loop.
    llm.reset(failed(500), failed(500), failed(500))

    @agenttrace.agent("AsyncRetrier")
    async def run() -> Any:
        kwargs = http(llm, num_retries=2)
        del kwargs["max_retries"]
        return await litellm.acompletion(**kwargs)

    await run()
    assert attempts(traced) == [
        (1, "failed", "1.1"),
        (2, "failed", "1.2"),
        (3, "failed", "1.3"),
        (4, "ok", "1.4"),
    ]


def test_a_stream_the_sdk_retried(traced: Traced, llm: LLMServer) -> None:
    llm.reset(failed(429))
    stream = litellm.completion(**http(llm, max_retries=1, stream=True))
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream)
    assert text == "Hello!"
    assert [(n, status) for n, status, _ in attempts(traced)] == [(1, "failed"), (2, "ok")]
    first, second = (attrs(s) for s in llm_spans(traced))
    assert first[sc.ERROR_TYPE] == "quota"
    assert second[sc.GEN_AI_REQUEST_STREAM] is True
    assert second[sc.GEN_AI_USAGE_OUTPUT_TOKENS] > 0


@pytest.mark.slow  # waits out real back-offs and time-outs: make test, not make check
def test_a_timeout_the_sdk_retried(traced: Traced, llm: LLMServer) -> None:
    llm.reset(Reply(delay=3.0))  # the first request is answered too late; the retry at once

    @agenttrace.agent("Impatient")
    def run() -> Any:
        return litellm.completion(**http(llm, max_retries=1, timeout=0.5))

    assert run().choices[0].message.content == "Hello!"
    assert attempts(traced) == [(1, "failed", "1.1"), (2, "ok", "1.2")]
    assert attrs(llm_spans(traced)[0])[sc.ERROR_TYPE] == "timeout"


# --- litellm's retry helpers, the Router, fallbacks ----------------------------------------------


def test_completion_with_retries_is_one_logical_call(traced: Traced, llm: LLMServer) -> None:
    llm.reset(Reply(status=500), Reply(status=500))

    @agenttrace.agent("Helper")
    def run() -> Any:
        return litellm.completion_with_retries(**http(llm), num_retries=3)

    assert run().choices[0].message.content == "Hello!"
    assert retry_counts(llm) == ["0", "0", "0"]  # litellm turns the SDK's retries off here
    assert traced.tree() == [
        "invoke_agent Helper [0]",
        "  turn 1 [1]",
        "    chat gpt-4o-mini [1.1]",
        "    chat gpt-4o-mini [1.2]",
        "    chat gpt-4o-mini [1.3]",
    ]
    assert attempts(traced) == [(1, "failed", "1.1"), (2, "failed", "1.2"), (3, "ok", "1.3")]


async def test_acompletion_with_retries_is_one_logical_call(traced: Traced, llm: LLMServer) -> None:
    llm.reset(Reply(status=500))

    @agenttrace.agent("AsyncHelper")
    async def run() -> Any:
        return await litellm.acompletion_with_retries(**http(llm), num_retries=2)

    await run()
    assert attempts(traced) == [(1, "failed", "1.1"), (2, "ok", "1.2")]


def _router(llm: LLMServer, **kwargs: Any) -> litellm.Router:
    return litellm.Router(
        model_list=[
            {
                "model_name": "primary",
                "litellm_params": {"model": MODEL, "api_base": llm.api_base, "api_key": KEY},
            },
            {
                "model_name": "backup",
                "litellm_params": {
                    "model": "openai/gpt-4o",
                    "api_base": llm.api_base,
                    "api_key": KEY,
                },
            },
        ],
        retry_after=0,
        **kwargs,
    )


@pytest.mark.slow  # waits out real back-offs and time-outs: make test, not make check
def test_router_retries_and_fallbacks(traced: Traced, llm: LLMServer) -> None:
    router = _router(llm, num_retries=1, fallbacks=[{"primary": ["backup"]}])
    llm.reset(Reply(status=500), Reply(status=500))

    @agenttrace.agent("Routed")
    def run() -> Any:
        return router.completion(model="primary", messages=[{"role": "user", "content": "hi"}])

    assert run().choices[0].message.content == "Hello!"
    assert retry_counts(llm) == ["0", "0", "0"]  # the Router turns the SDK's retries off
    spans = llm_spans(traced)
    assert [(attrs(s)[sc.GEN_AI_REQUEST_MODEL], outcome(s)) for s in spans] == [
        ("gpt-4o-mini", "failed"),
        ("gpt-4o-mini", "failed"),
        ("gpt-4o", "ok"),
    ]
    assert attempts(traced) == [(1, "failed", "1.1"), (2, "failed", "1.2"), (3, "ok", "1.3")]
    assert len(traced.by_name("turn 1")) == 1


async def test_async_router(traced: Traced, llm: LLMServer) -> None:
    router = _router(llm, num_retries=1)
    llm.reset(Reply(status=500))
    await router.acompletion(model="primary", messages=[{"role": "user", "content": "hi"}])
    assert attempts(traced) == [(1, "failed", "1.1"), (2, "ok", "1.2")]


def test_completion_fallbacks(traced: Traced, llm: LLMServer) -> None:
    llm.reset(Reply(status=500))
    response = litellm.completion(
        **http(
            llm, fallbacks=[{"model": "openai/gpt-4o", "api_base": llm.api_base, "api_key": KEY}]
        )
    )
    assert response.choices[0].message.content == "Hello!"
    assert [
        (attrs(s)[sc.GEN_AI_REQUEST_MODEL], outcome(s), attrs(s)[sc.ATTEMPT])
        for s in llm_spans(traced)
    ] == [
        ("gpt-4o-mini", "failed", 1),
        ("gpt-4o", "ok", 2),
    ]


# --- the program asking again: the re-request rule -----------------------------------------------


def _ask_until_answered(llm: LLMServer, messages: list[dict[str, str]], tries: int = 3) -> Any:
    """What frameworks do: catch the rate limit, ask again with the same messages."""
    for _ in range(tries - 1):
        try:
            return litellm.completion(**http(llm, messages=messages))
        except litellm.RateLimitError:
            continue
    return litellm.completion(**http(llm, messages=messages))


@pytest.mark.init(capture_content=True)
def test_a_program_asking_again_makes_the_next_attempt_in_the_same_turn(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(Reply(status=429), Reply(status=429))
    history = [{"role": "user", "content": "hi"}]

    @agenttrace.agent("Framework")
    def run() -> None:
        reply = _ask_until_answered(llm, history)
        history.append({"role": "assistant", "content": reply.choices[0].message.content})
        history.append({"role": "user", "content": "and then?"})
        litellm.completion(**http(llm, messages=history))

    run()
    assert traced.tree() == [
        "invoke_agent Framework [0]",
        "  turn 1 [1]",
        "    chat gpt-4o-mini [1.1]",
        "    chat gpt-4o-mini [1.2]",
        "    chat gpt-4o-mini [1.3]",
        "  turn 2 [2]",
        "    chat gpt-4o-mini [2.1]",
    ]
    assert attempts(traced) == [
        (1, "failed", "1.1"),
        (2, "failed", "1.2"),
        (3, "ok", "1.3"),
        (1, "ok", "2.1"),  # a new request: a new logical call
    ]
    assert outcome(traced.one("invoke_agent Framework")) == "ok"
    assert json.loads(attrs(llm_spans(traced)[2])[sc.GEN_AI_INPUT_MESSAGES]) == []


def test_asking_something_else_after_a_failure_is_a_new_call(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(Reply(status=429))

    @agenttrace.agent("Rephraser")
    def run() -> None:
        with pytest.raises(litellm.RateLimitError):
            litellm.completion(**http(llm, messages=[{"role": "user", "content": "hi"}]))
        litellm.completion(**http(llm, messages=[{"role": "user", "content": "hello?"}]))

    run()
    assert attempts(traced) == [(1, "failed", "1.1"), (1, "ok", "2.1")]


def test_the_same_request_after_a_success_is_a_new_call(traced: Traced, llm: LLMServer) -> None:
    @agenttrace.agent("Sampler")
    def run() -> None:
        litellm.completion(**http(llm))
        litellm.completion(**http(llm))

    run()
    assert attempts(traced) == [(1, "ok", "1.1"), (1, "ok", "2.1")]


def test_a_re_request_in_an_explicit_turn_and_in_a_tool(traced: Traced, llm: LLMServer) -> None:
    llm.reset(Reply(status=429), Reply(), Reply(status=429))

    @agenttrace.tool
    def summarise() -> Any:
        return _ask_until_answered(llm, [{"role": "user", "content": "summarise"}])

    @agenttrace.agent("Turns")
    def run() -> None:
        with agenttrace.turn():
            _ask_until_answered(llm, [{"role": "user", "content": "hi"}])
            summarise()

    run()
    assert attempts(traced) == [
        (1, "failed", "1.1"),
        (2, "ok", "1.2"),
        (1, "failed", "1.4"),  # the tool is op 1.3; its LLM calls are the turn's next ops
        (2, "ok", "1.5"),
    ]


async def test_a_program_asking_again_after_an_async_failure(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(Reply(status=429))

    @agenttrace.agent("AsyncFramework")
    async def run() -> Any:
        try:
            return await litellm.acompletion(**http(llm))
        except litellm.RateLimitError:
            return await litellm.acompletion(**http(llm))

    await run()
    assert attempts(traced) == [(1, "failed", "1.1"), (2, "ok", "1.2")]


def test_asking_again_after_a_stream_failed_midway(traced: Traced) -> None:
    messages = [{"role": "user", "content": "hi"}]

    @agenttrace.agent("Streamer")
    def run() -> str:
        stream = litellm.completion(
            model="gpt-4o-mini",
            messages=messages,
            mock_response="Exception: mock_streaming_error",
            stream=True,
        )
        try:
            for _ in stream:
                pass
        except litellm.exceptions.MidStreamFallbackError:
            pass
        reply = litellm.completion(model="gpt-4o-mini", messages=messages, mock_response="ok")
        return str(reply.choices[0].message.content)

    assert run() == "ok"
    assert attempts(traced) == [(1, "failed", "1.1"), (2, "ok", "1.2")]


# --- init() alone: the implicit run of a bare call -----------------------------------------------


def test_a_bare_call_retried_to_success_is_one_run_that_succeeded(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(Reply(status=429))
    messages = [{"role": "user", "content": "hi"}]
    assert _ask_until_answered(llm, messages).choices[0].message.content == "Hello!"
    assert traced.tree() == [
        "invoke_agent agenttrace [0]",
        "  turn 1 [1]",
        "    chat gpt-4o-mini [1.1]",
        "    chat gpt-4o-mini [1.2]",
    ]
    assert attempts(traced) == [(1, "failed", "1.1"), (2, "ok", "1.2")]
    assert outcome(traced.one("invoke_agent agenttrace")) == "ok"
    output = traced.output()
    assert "attempt 1 failed (quota)" in output  # the failed attempt is told
    assert "ERR" not in output  # the run is not


@pytest.mark.slow  # waits out real back-offs and time-outs: make test, not make check
def test_bare_litellm_retries_are_one_run(traced: Traced, llm: LLMServer) -> None:
    llm.reset(Reply(status=500), Reply(status=500))
    litellm.completion_with_retries(**http(llm), num_retries=3)
    router = _router(llm, num_retries=1)
    llm.reset(Reply(status=500))
    router.completion(model="primary", messages=[{"role": "user", "content": "again"}])
    runs = traced.by_name("invoke_agent agenttrace")
    assert [outcome(r) for r in runs] == ["ok", "ok"]
    assert attempts(traced) == [
        (1, "failed", "1.1"),
        (2, "failed", "1.2"),
        (3, "ok", "1.3"),
        (1, "failed", "1.1"),
        (2, "ok", "1.2"),
    ]
    assert "ERR" not in traced.output()


def test_a_bare_failure_not_retried_ends_its_run_when_something_else_is_asked(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(Reply(status=401))
    with pytest.raises(litellm.AuthenticationError):
        litellm.completion(**http(llm))
    assert unflushed(traced, "invoke_agent agenttrace") == []  # open: a retry may follow

    litellm.completion(**http(llm, messages=[{"role": "user", "content": "other"}]))
    assert len(unflushed(traced, "invoke_agent agenttrace")) == 1  # the first one ended
    failed_attempt, _ = llm_spans(traced)
    first_run, second_run = traced.by_name("invoke_agent agenttrace")
    assert outcome(first_run) == "failed"
    # It ended when its attempt failed, not when the program asked something else.
    assert first_run.end_time == failed_attempt.end_time
    assert outcome(second_run) == "ok"
    assert attrs(second_run)[sc.TXN_ID] != attrs(first_run)[sc.TXN_ID]
    assert "session/agenttrace: ERR failed" in traced.output()


def test_a_bare_failure_not_retried_ends_its_run_at_shutdown(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(Reply(status=429))
    with pytest.raises(litellm.RateLimitError):
        litellm.completion(**http(llm))
    traced.handle.shutdown()
    (run,) = traced.by_name("invoke_agent agenttrace")
    assert outcome(run) == "failed"
    assert run.end_time == llm_spans(traced)[0].end_time
    assert "ERR failed" in traced.console.getvalue()


async def test_a_bare_failure_in_a_task_ends_its_run_with_the_task(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(Reply(status=429))

    async def ask() -> None:
        with pytest.raises(litellm.RateLimitError):
            await litellm.acompletion(**http(llm))

    await asyncio.create_task(ask())
    for _ in range(100):  # the task's done callbacks run in the loop's next iterations
        if unflushed(traced, "invoke_agent agenttrace"):
            break
        await asyncio.sleep(0)
    (run,) = unflushed(traced, "invoke_agent agenttrace")  # ended by the task, not a flush
    assert outcome(run) == "failed"


async def test_bare_re_requests_in_concurrent_tasks_keep_to_their_task(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(Reply(status=429), Reply(status=429))
    first_failed = asyncio.Event()
    both_failed = asyncio.Event()

    async def ask(question: str, first: bool) -> Any:
        messages = [{"role": "user", "content": question}]
        if not first:
            await first_failed.wait()
        try:
            return await litellm.acompletion(**http(llm, messages=messages))
        except litellm.RateLimitError:
            (first_failed if first else both_failed).set()
            await both_failed.wait()  # both have failed before either asks again
            return await litellm.acompletion(**http(llm, messages=messages))

    await asyncio.gather(ask("one", True), ask("two", False))
    runs = traced.by_name("invoke_agent agenttrace")
    assert [outcome(r) for r in runs] == ["ok", "ok"]
    by_run: dict[str, list[tuple[int, str]]] = {}
    for span in llm_spans(traced):
        by_run.setdefault(attrs(span)[sc.TXN_ID], []).append(
            (attrs(span)[sc.ATTEMPT], outcome(span))
        )
    assert sorted(by_run.values()) == [[(1, "failed"), (2, "ok")]] * 2


def test_the_sdk_error_is_what_litellm_would_raise(traced: Traced, llm: LLMServer) -> None:
    """A failure the SDK did not retry still passes through to the program unchanged."""
    llm.reset(failed(429), failed(429))
    with pytest.raises(litellm.RateLimitError) as caught:
        litellm.completion(**http(llm, max_retries=1))
    assert isinstance(caught.value, openai.RateLimitError)
    assert attempts(traced) == [(1, "failed", "1.1"), (2, "failed", "1.2")]
