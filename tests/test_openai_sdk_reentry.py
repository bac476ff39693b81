"""The OpenAI SDK's replies in the step journal (issue 34 item 3): each attempt's exact response
(a stream's chunks in order) is journaled, and a re-entered run gets the SDK's own objects back,
a ``ChatCompletion`` or the SDK's ``Stream``/``AsyncStream``, without calling the model."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pydantic
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

import agenttrace
from agenttrace import semconv as sc

from .conftest import Traced, attrs
from .fork_server import Forks
from .helpers import killed_then_resumed_shop, llm_entries, shop_fork_server
from .llm_server import LLMServer, Reply
from .test_cli import agenttrace as run_cli
from .test_cli import ok
from .test_llm_steps import llm_lines, rearm
from .test_openai_sdk import CALL, HI, TOOLS, aclient, client, llm_spans


@pytest.mark.parametrize("stream", [False, True])
def test_a_re_entered_run_gets_the_sdk_s_objects_without_asking_sync_and_async(
    traced: Traced, tmp_path: Path, llm: LLMServer, stream: bool
) -> None:
    sdk, asdk = client(llm), aclient(llm)
    seen: list[type] = []

    @agenttrace.agent("Asker")
    async def ask() -> str:
        sync = sdk.chat.completions.create(
            model="gpt-4o-mini", messages=HI, tools=TOOLS, stream=stream
        )
        seen.append(type(sync))
        assert isinstance(sync, openai.Stream if stream else ChatCompletion)
        if stream:
            chunks = list(sync)
            seen.extend(type(c) for c in chunks)
            call = chunks[-2].choices[0].delta.tool_calls[0]
        else:
            call = sync.choices[0].message.tool_calls[0]
        answer = await asdk.chat.completions.create(
            model="gpt-4o-mini",
            messages=[*HI, {"role": "user", "content": call.function.arguments}],
            stream=stream,
            stream_options={"include_usage": True} if stream else openai.NOT_GIVEN,
        )
        seen.append(type(answer))
        assert isinstance(answer, openai.AsyncStream if stream else ChatCompletion)
        if stream:
            said = "".join([c.choices[0].delta.content or "" async for c in answer if c.choices])
        else:
            said = str(answer.choices[0].message.content)
        return f"{call.id}/{said}"

    llm.reset(Reply(content="", tool_calls=[CALL]), Reply(content="second answer"))
    assert asyncio.run(ask()) == "call_1/second answer"
    first_types = list(seen)
    traced.handle.force_flush()
    rearm(tmp_path)
    seen.clear()
    llm.reset(Reply(content="not asked"))
    assert asyncio.run(ask()) == "call_1/second answer"
    assert llm.requests == []  # neither reply was asked for again
    # The SDK's own types, as the first time (a stream behind the proxy that ends its span).
    assert [t.__name__ for t in seen] == [t.__name__ for t in first_types]
    if stream:
        assert ChatCompletionChunk in seen
    else:
        assert seen == [ChatCompletion, ChatCompletion]
    replayed = [s for s in llm_spans(traced) if attrs(s).get(sc.REPLAYED)]
    assert len(replayed) == 2
    assert all(sc.COST_USD not in attrs(s) for s in replayed)
    # What the span says of a replayed reply is what it said of the reply it replays.
    first_run, second_run = llm_spans(traced)[:2], replayed
    for was, again in zip(first_run, second_run, strict=True):
        assert (
            attrs(again)[sc.GEN_AI_RESPONSE_FINISH_REASONS]
            == (attrs(was)[sc.GEN_AI_RESPONSE_FINISH_REASONS])
        )
    states = [line["state"] for line in llm_lines(tmp_path)]
    assert states.count("replayed") == 2 and states.count("done") == 2


def test_a_stream_is_journaled_chunk_by_chunk_in_order(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    llm.reset(Reply(content="abcdefgh"))
    stream = client(llm).chat.completions.create(
        model="gpt-4o-mini", messages=HI, stream=True, stream_options={"include_usage": True}
    )
    said = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    traced.handle.force_flush()
    (done,) = [line for line in llm_lines(tmp_path) if line["state"] == "done"]
    deltas = [c["choices"][0]["delta"].get("content") for c in done["chunks"] if c["choices"]]
    assert "".join(d or "" for d in deltas) == said == "abcdefgh"
    assert done["chunks"][-1]["usage"]["completion_tokens"] == 7


def test_a_failed_call_is_journaled_as_failed_and_asked_again_on_re_entry(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    llm.reset(Reply(status=400))

    @agenttrace.agent("Asker")
    def ask() -> str:
        try:
            client(llm).chat.completions.create(model="gpt-4o-mini", messages=HI)
        except openai.BadRequestError:
            return "failed"
        return "answered"

    assert ask() == "failed"
    traced.handle.force_flush()
    assert [line["state"] for line in llm_lines(tmp_path)] == ["intent", "failed"]
    rearm(tmp_path)
    llm.reset(Reply(content="now"))
    assert ask() == "answered"
    assert len(llm.requests) == 1  # a failure is no answer: the model is asked


@pytest.fixture(scope="module")
def shop_forks() -> Iterator[Forks]:
    """tests/openai_reentry_child.py's killed and resumed runs, forked from one interpreter
    that imported what it imports, in its order (openai, then agenttrace through
    tests/shop_child.py): a new interpreter spends seconds on them, more than the run. The
    kill is a SIGKILL of the process wherever it runs (tests/test_reentry.py kills
    tests/journal_child.py and tests/reentry_agent.py in new interpreters)."""
    with shop_fork_server("openai") as forks:
        yield forks


@pytest.mark.e2e
@pytest.mark.parametrize("shape", ["tool", "stream", "responses"])
def test_after_a_kill_a_resumed_run_does_not_ask_for_a_recorded_reply_again(
    tmp_path: Path, llm_server: LLMServer, shop_forks: Forks, shape: str
) -> None:
    """tests/test_reentry.py's litellm case, through the SDK: killed (SIGKILL) inside the tool
    that follows the model's reply, resumed: the reply comes from the journal."""
    pay = {**CALL, "function": {"name": "charge", "arguments": '{"amount": 5}'}}
    first = Reply(content="On it!") if shape == "stream" else Reply(content="", tool_calls=[pay])
    llm_server.reset(first, Reply(content="never sent: the kill comes first"))
    report, charges = killed_then_resumed_shop(
        "openai_reentry_child",
        tmp_path,
        llm_server.api_base,
        shape,
        lambda: len(llm_server.requests),
        lambda: llm_server.reset(Reply(content="Thank you!")),
        shop_forks,
    )
    assert report["answer"] == "Thank you!"
    assert len(llm_server.requests) == 1  # only the reply the killed run never got
    if shape == "stream":
        assert report["said"] == "On it!" and report["chunks"] >= 2  # replayed chunk by chunk
    elif shape == "responses":  # the function call, from the journal, and its output
        asked = llm_server.requests[0].body["input"]
        assert asked[-1] == {"type": "function_call_output", "call_id": "call_1", "output": "ch_1"}
        assert asked[-2]["call_id"] == "call_1"
    else:  # the model's tool call, from the journal, has the same id and arguments
        sent = llm_server.requests[0].body["messages"]
        assert sent[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "ch_1"}
    (made,) = charges  # the idempotent charge, sent again with its key, made once
    assert made["key"].startswith("at-")
    assert llm_entries(tmp_path) == 2  # none for the replay
    (stream,) = (tmp_path / "sessions").glob("*.events.jsonl")
    tree = ok(run_cli(tmp_path, "tree", str(stream)))
    assert "1.1 llm gpt-4o-mini ok" in tree and "replayed" in tree


class Answer(pydantic.BaseModel):
    """What the ``parse`` tests ask for."""

    city: str


def test_parse_is_traced_and_its_parsed_reply_comes_back_on_re_entry(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    @agenttrace.agent("Parser")
    async def ask() -> tuple[Any, Any]:
        sync = client(llm).chat.completions.parse(
            model="gpt-4o-mini", messages=HI, response_format=Answer
        )
        later = await aclient(llm).chat.completions.parse(
            model="gpt-4o-mini",
            messages=[*HI, {"role": "user", "content": "again"}],
            response_format=Answer,
        )
        return sync, later

    llm.reset(Reply(content='{"city": "Paris"}'), Reply(content='{"city": "Rome"}'))
    first = asyncio.run(ask())
    assert [reply.choices[0].message.parsed for reply in first] == [
        Answer(city="Paris"),
        Answer(city="Rome"),
    ]
    assert len(llm_spans(traced)) == 2
    traced.handle.force_flush()
    rearm(tmp_path)
    llm.reset(Reply(content="not asked"))
    again = asyncio.run(ask())
    assert llm.requests == []
    for was, now in zip(first, again, strict=True):
        assert type(now) is type(was)  # the SDK's ParsedChatCompletion[Answer]
        assert now.choices[0].message.parsed == was.choices[0].message.parsed
    assert len([s for s in llm_spans(traced) if attrs(s).get(sc.REPLAYED)]) == 2
