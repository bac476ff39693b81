"""The Anthropic SDK's replies in the step journal (issue 34 item 3): each attempt's exact
response (a stream's events in order, thinking blocks' signatures included: Anthropic refuses a
thinking block sent back without one) is journaled, and a
re-entered run gets the SDK's own objects back, a ``Message``, the SDK's ``Stream`` /
``AsyncStream`` or the ``messages.stream`` helper's final message, without calling the model."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import pydantic
import pytest
from anthropic.types import Message
from anthropic.types.beta.parsed_beta_message import ParsedBetaMessage

import agenttrace
from agenttrace import semconv as sc

from .anthropic_server import AnthropicServer, Reply, text, thinking, tool_use
from .conftest import Traced, attrs
from .fork_server import Forks
from .helpers import killed_then_resumed_shop, llm_entries, shop_fork_server
from .test_anthropic_sdk import HI, MODEL, aclient, claude, client, llm_spans, server
from .test_llm_steps import llm_lines, rearm

__all__ = ["claude", "server"]  # the fixtures, used by name


def _first(reply: Any, stream: bool) -> str:
    """The tool call's id and input of a reply (a stream's events read to the end)."""
    if stream:
        events = list(reply)
        starts = [e for e in events if e.type == "content_block_start"]
        return str(starts[-1].content_block.id)
    return str(reply.content[-1].id)


@pytest.mark.parametrize("stream", [False, True])
def test_a_re_entered_run_gets_the_sdk_s_objects_without_asking_sync_and_async(
    traced: Traced, tmp_path: Path, claude: AnthropicServer, stream: bool
) -> None:
    sdk, asdk = client(claude), aclient(claude)
    seen: list[str] = []

    @agenttrace.agent("Asker")
    async def ask() -> str:
        sync = sdk.messages.create(model=MODEL, max_tokens=64, messages=HI, stream=stream)
        seen.append(type(sync).__name__)
        assert isinstance(sync, anthropic.Stream if stream else Message)
        call_id = _first(sync, stream)
        answer = await asdk.messages.create(
            model=MODEL,
            max_tokens=64,
            messages=[*HI, {"role": "user", "content": call_id}],
            stream=stream,
        )
        seen.append(type(answer).__name__)
        if stream:
            assert isinstance(answer, anthropic.AsyncStream)
            said = "".join(
                [
                    e.delta.text
                    async for e in answer
                    if e.type == "content_block_delta" and e.delta.type == "text_delta"
                ]
            )
        else:
            assert isinstance(answer, Message)
            said = answer.content[0].text
        return f"{call_id}/{said}"

    claude.reset(
        Reply(blocks=[thinking("hmm"), tool_use("charge", {"a": 5}, id="toolu_1")]),
        Reply(blocks=[text("second answer")]),
    )
    assert asyncio.run(ask()) == "toolu_1/second answer"
    first_types = list(seen)
    traced.handle.force_flush()
    rearm(tmp_path)
    seen.clear()
    claude.reset(Reply(blocks=[text("not asked")]))
    assert asyncio.run(ask()) == "toolu_1/second answer"
    assert claude.message_requests() == []  # neither reply was asked for again
    assert seen == first_types  # the SDK's own types (a stream behind the proxy)
    replayed = [s for s in llm_spans(traced) if attrs(s).get(sc.REPLAYED)]
    assert len(replayed) == 2
    assert all(sc.COST_USD not in attrs(s) for s in replayed)
    for was, again in zip(llm_spans(traced)[:2], replayed, strict=True):
        for name in (sc.GEN_AI_RESPONSE_FINISH_REASONS, sc.GEN_AI_USAGE_INPUT_TOKENS):
            assert attrs(again)[name] == attrs(was)[name]
    states = [line["state"] for line in llm_lines(tmp_path)]
    assert states.count("replayed") == 2 and states.count("done") == 2


def test_the_journal_keeps_the_exact_response_signatures_included(
    traced: Traced, tmp_path: Path, claude: AnthropicServer
) -> None:
    claude.reset(Reply(blocks=[thinking("hmm"), text("abcdefgh" * 4)]))
    plain = client(claude).messages.create(model=MODEL, max_tokens=64, messages=HI)
    events = list(
        client(claude).messages.create(model=MODEL, max_tokens=64, messages=HI, stream=True)
    )
    traced.handle.force_flush()
    done = [line for line in llm_lines(tmp_path) if line["state"] == "done"]
    exact = plain.model_dump(mode="json")
    assert done[0]["result"] == exact
    assert [e["type"] for e in done[1]["chunks"]] == [e.type for e in events]


def test_the_stream_helper_s_final_message_comes_back_on_re_entry(
    traced: Traced, tmp_path: Path, claude: AnthropicServer
) -> None:
    @agenttrace.agent("Helper")
    async def ask() -> tuple[Any, Any]:
        with client(claude).messages.stream(model=MODEL, max_tokens=64, messages=HI) as stream:
            sync = stream.get_final_message()
        async with aclient(claude).messages.stream(
            model=MODEL, max_tokens=64, messages=[*HI, {"role": "user", "content": "again"}]
        ) as astream:
            later = await astream.get_final_message()
        return sync, later

    claude.reset(
        Reply(blocks=[thinking("hmm"), text("one")]), Reply(blocks=[tool_use("charge", {"a": 5})])
    )
    first = asyncio.run(ask())
    traced.handle.force_flush()
    rearm(tmp_path)
    claude.reset(Reply(blocks=[text("not asked")]))
    again = asyncio.run(ask())
    assert claude.message_requests() == []
    for was, now in zip(first, again, strict=True):
        assert type(now) is type(was)
        # Thinking blocks come back with their signatures, which Anthropic needs to be sent back.
        assert now.model_dump() == was.model_dump()
    assert len([s for s in llm_spans(traced) if attrs(s).get(sc.REPLAYED)]) == 2


def test_a_failed_call_is_asked_again_on_re_entry(
    traced: Traced, tmp_path: Path, claude: AnthropicServer
) -> None:
    claude.reset(Reply(status=400))

    @agenttrace.agent("Asker")
    def ask() -> str:
        try:
            client(claude).messages.create(model=MODEL, max_tokens=64, messages=HI)
        except anthropic.BadRequestError:
            return "failed"
        return "answered"

    assert ask() == "failed"
    traced.handle.force_flush()
    assert [line["state"] for line in llm_lines(tmp_path)] == ["intent", "failed"]
    rearm(tmp_path)
    claude.reset()
    assert ask() == "answered"
    assert len(claude.message_requests()) == 1  # a failure is no answer: the model is asked


@pytest.fixture(scope="module")
def shop_forks() -> Iterator[Forks]:
    """tests/anthropic_reentry_child.py's killed and resumed runs, forked from one interpreter
    that imported what it imports, in its order (anthropic, then agenttrace through
    tests/shop_child.py): a new interpreter spends seconds on them, more than the run. The
    kill is a SIGKILL of the process wherever it runs (tests/test_reentry.py kills
    tests/journal_child.py and tests/reentry_agent.py in new interpreters)."""
    with shop_fork_server("anthropic") as forks:
        yield forks


@pytest.mark.e2e
@pytest.mark.parametrize("shape", ["tool", "stream"])
def test_after_a_kill_a_resumed_run_does_not_ask_for_a_recorded_reply_again(
    tmp_path: Path, server: AnthropicServer, shop_forks: Forks, shape: str
) -> None:
    """tests/test_openai_sdk_reentry.py's case through the Anthropic SDK: killed (SIGKILL)
    inside the tool that follows the model's reply, resumed: the reply comes from the
    journal."""
    pay = tool_use("charge", {"amount": 5}, id="toolu_1")
    first = Reply(blocks=[pay]) if shape == "tool" else Reply(blocks=[text("On it!")])
    server.reset(first, Reply(blocks=[text("never sent: the kill comes first")]))
    report, charges = killed_then_resumed_shop(
        "anthropic_reentry_child",
        tmp_path,
        server.base_url,
        shape,
        lambda: len(server.message_requests()),
        lambda: server.reset(Reply(blocks=[text("Thank you!")])),
        shop_forks,
    )
    assert report["answer"] == "Thank you!"
    (asked,) = server.message_requests()  # only the reply the killed run never got
    if shape == "stream":
        assert report["said"] == "On it!"
    else:  # the model's tool call, from the journal, has the same id
        assert asked.body["messages"][-1]["content"][0]["tool_use_id"] == "toolu_1"
    (made,) = charges  # the idempotent charge, sent again with its key, made once
    assert made["key"].startswith("at-")
    assert llm_entries(tmp_path) == 2  # none for the replay


class Answer(pydantic.BaseModel):
    """What the ``parse`` test asks for."""

    city: str


@pytest.mark.parametrize(
    ("resource", "parsed_type"),
    [
        (lambda sdk: sdk.messages, None),
        (lambda sdk: sdk.beta.messages, ParsedBetaMessage),
    ],
    ids=["messages", "beta.messages"],
)
def test_parse_is_traced_and_its_parsed_reply_comes_back_on_re_entry(
    traced: Traced,
    tmp_path: Path,
    claude: AnthropicServer,
    resource: Callable[[Any], Any],
    parsed_type: type | None,
) -> None:
    @agenttrace.agent("Parser")
    async def ask() -> tuple[Any, Any]:
        sync = resource(client(claude)).parse(
            model=MODEL, max_tokens=64, messages=HI, output_format=Answer
        )
        later = await resource(aclient(claude)).parse(
            model=MODEL,
            max_tokens=64,
            messages=[*HI, {"role": "user", "content": "again"}],
            output_format=Answer,
        )
        return sync, later

    claude.reset(
        Reply(blocks=[text('{"city": "Paris"}')]), Reply(blocks=[text('{"city": "Rome"}')])
    )
    first = asyncio.run(ask())
    assert [reply.parsed_output for reply in first] == [Answer(city="Paris"), Answer(city="Rome")]
    if parsed_type is not None:  # a beta call's reply is the beta type
        assert all(isinstance(reply, parsed_type) for reply in first)
    assert len(llm_spans(traced)) == 2
    traced.handle.force_flush()
    rearm(tmp_path)
    claude.reset(Reply(blocks=[text("not asked")]))
    again = asyncio.run(ask())
    assert claude.message_requests() == []
    for was, now in zip(first, again, strict=True):
        assert type(now) is type(was)  # the SDK's Parsed(Beta)Message[Answer]
        assert now.parsed_output == was.parsed_output
    assert len([s for s in llm_spans(traced) if attrs(s).get(sc.REPLAYED)]) == 2
