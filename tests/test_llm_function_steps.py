"""``@agenttrace.llm`` functions that yield a stream, and ``with agenttrace.llm(...)`` blocks, in
the step journal (issue 22): a stream's chunks are its ``done`` line's ``chunks``, in order, and
a re-entered run gets them back, yielded one by one, without the function's body running. A
with-block's body cannot be skipped: its call is journaled (intent, then done with the response
recorded on its handle, or failed) and runs again on a re-entry, as the next attempt."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import litellm
import pytest

import agenttrace
from agenttrace import semconv as sc
from agenttrace.model import journal_lines

from .conftest import Traced, attrs
from .test_llm_steps import llm_lines, rearm

HI = [{"role": "user", "content": "hi"}]


def chunk(text: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": text}}]}


def text_of(chunks: list[Any]) -> str:
    return "".join(c["choices"][0]["delta"]["content"] for c in chunks)


def replayed_spans(traced: Traced) -> list[Any]:
    return [s for s in traced.spans() if attrs(s).get(sc.REPLAYED) is True]


def states(tmp_path: Path) -> list[tuple[str, int, str]]:
    return [(line["step"], line["attempt"], line["state"]) for line in llm_lines(tmp_path)]


def test_a_generator_s_chunks_are_journaled_in_order_and_replayed_without_its_body(
    traced: Traced, tmp_path: Path
) -> None:
    bodies: list[str] = []

    @agenttrace.llm(model="house/model-1")
    def chat(messages: list[dict[str, Any]], temperature: float = 0.0) -> Iterator[Any]:
        bodies.append("ran")
        for word in ("Hello", " streaming", " world"):
            yield chunk(word)

    @agenttrace.agent("Streamer")
    def ask() -> str:
        return text_of(list(chat(HI, temperature=0.5)))

    assert ask() == "Hello streaming world"
    traced.handle.force_flush()
    intent, done = llm_lines(tmp_path)
    assert (intent["state"], intent["name"], done["state"]) == ("intent", "house/model-1", "done")
    assert done["chunks"] == [chunk("Hello"), chunk(" streaming"), chunk(" world")]
    assert "result" not in done

    rearm(tmp_path)
    assert ask() == "Hello streaming world"  # from the journal, chunk by chunk
    assert bodies == ["ran"]  # the body did not run again
    assert [s.name for s in replayed_spans(traced)] == ["chat model-1"]
    traced.handle.force_flush()
    assert states(tmp_path)[-1] == ("1.1", 1, "replayed")


def test_an_async_generator_is_journaled_and_replayed_too(traced: Traced, tmp_path: Path) -> None:
    bodies: list[str] = []

    @agenttrace.llm(model="house/model-1")
    async def chat(messages: list[dict[str, Any]]) -> AsyncIterator[Any]:
        bodies.append("ran")
        for word in ("one", " two"):
            await asyncio.sleep(0)
            yield chunk(word)

    @agenttrace.agent("AsyncStreamer")
    async def ask() -> str:
        return text_of([c async for c in chat(HI)])

    assert asyncio.run(ask()) == "one two"
    traced.handle.force_flush()
    _, done = llm_lines(tmp_path)
    assert done["chunks"] == [chunk("one"), chunk(" two")]

    rearm(tmp_path)
    assert asyncio.run(ask()) == "one two"
    assert bodies == ["ran"]
    assert len(replayed_spans(traced)) == 1


def test_a_function_that_returns_a_stream_is_replayed_as_a_stream(
    traced: Traced, tmp_path: Path
) -> None:
    """A plain function (or coroutine) returning a generator is a stream as well: its chunks
    are journaled, and a re-entry gets a stream of them, not the function's return value."""
    bodies: list[str] = []

    @agenttrace.llm(model="house/model-1")
    def chat(messages: list[dict[str, Any]]) -> Iterator[Any]:
        bodies.append("ran")
        return iter_chunks("a", "b")

    @agenttrace.llm(model="house/model-2")
    async def achat(messages: list[dict[str, Any]]) -> AsyncIterator[Any]:
        bodies.append("ran async")
        return aiter_chunks("c", "d")

    @agenttrace.agent("Returner")
    async def ask() -> str:
        first = text_of(list(chat(HI)))
        second = text_of([c async for c in await achat(HI)])
        return first + second

    assert asyncio.run(ask()) == "abcd"
    traced.handle.force_flush()
    done = [line for line in llm_lines(tmp_path) if line["state"] == "done"]
    assert [line["chunks"] for line in done] == [
        [chunk("a"), chunk("b")],
        [chunk("c"), chunk("d")],
    ]
    rearm(tmp_path)
    assert asyncio.run(ask()) == "abcd"
    assert bodies == ["ran", "ran async"]


def iter_chunks(*texts: str) -> Iterator[Any]:
    for text in texts:
        yield chunk(text)


async def aiter_chunks(*texts: str) -> AsyncIterator[Any]:
    for text in texts:
        yield chunk(text)


def test_a_stream_past_the_chunk_cap_is_capped_and_asked_again(
    traced: Traced, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal_lines, "JOURNAL_CHUNKS", 3)
    bodies: list[str] = []

    @agenttrace.llm(model="house/model-1")
    def chat(messages: list[dict[str, Any]]) -> Iterator[Any]:
        bodies.append("ran")
        yield from iter_chunks("a", "b", "c", "d", "e")

    run = agenttrace.agent("Long")(lambda: text_of(list(chat(HI))))
    assert run() == "abcde"
    traced.handle.force_flush()
    _, done = llm_lines(tmp_path)
    assert done["capped"] is True and "chunks" not in done
    rearm(tmp_path)
    assert run() == "abcde"
    assert bodies == ["ran", "ran"]  # a capped response does not answer a re-entry


def test_a_with_block_is_journaled_and_runs_again_on_re_entry(
    traced: Traced, tmp_path: Path
) -> None:
    """Its intent when the block starts (the fingerprint of its model: a block has no
    arguments), done with the response recorded on its handle; a re-entered run runs the block
    again (Python cannot skip it), journaled as the next attempt at its place, not replayed."""
    blocks: list[list[str]] = []
    reply = {"choices": [{"message": {"role": "assistant", "content": "from the block"}}]}

    @agenttrace.agent("Blocker")
    def ask() -> None:
        with agenttrace.llm("house/model-1") as call:
            # While it runs, the stream shows it started (a live view's running call).
            blocks.append([line["state"] for line in llm_lines(tmp_path)])
            call.record_response(reply)

    ask()
    traced.handle.force_flush()
    intent, done = llm_lines(tmp_path)
    assert (intent["state"], intent["name"], intent["step"]) == ("intent", "house/model-1", "1.1")
    assert (done["state"], done["result"]) == ("done", reply)

    rearm(tmp_path)
    ask()
    assert blocks == [["intent"], ["intent", "done", "intent"]]  # the block ran again
    assert replayed_spans(traced) == []
    traced.handle.force_flush()
    assert states(tmp_path)[2:] == [("1.1", 2, "intent"), ("1.1", 2, "done")]


def test_a_with_block_that_raises_is_journaled_as_failed(traced: Traced, tmp_path: Path) -> None:
    @agenttrace.agent("Blocker")
    def ask() -> None:
        with agenttrace.llm("house/model-1"):
            raise TimeoutError("the model did not answer")

    with pytest.raises(TimeoutError):
        ask()
    traced.handle.force_flush()
    _, failed = llm_lines(tmp_path)
    assert (failed["state"], failed["applied"]) == ("failed", "no")
    assert failed["error"] == "TimeoutError: the model did not answer"


@dataclasses.dataclass
class Said:
    """What a house model says, as an ``@agenttrace.llm`` function may return it."""

    text: str
    words: int


def test_a_recorded_response_comes_back_as_the_function_returned_it(
    traced: Traced, tmp_path: Path
) -> None:
    """A replayed call of an ``@agenttrace.llm`` function gets its response as the function's
    return annotation names it (a ``litellm.ModelResponse``, a dataclass), not its JSON."""
    bodies: list[str] = []

    @agenttrace.llm(model="gpt-4o-mini")
    def chat(messages: list[dict[str, Any]]) -> litellm.ModelResponse:
        bodies.append("chat")
        return litellm.completion(model="gpt-4o-mini", messages=messages, mock_response="hello")

    @agenttrace.llm(model="house/model-1")
    async def said(messages: list[dict[str, Any]]) -> Said:
        bodies.append("said")
        return Said("two words", 2)

    @agenttrace.agent("Typed")
    def ask() -> tuple[Any, Any]:
        return chat(HI), asyncio.run(said(HI))

    _, live_said = ask()
    traced.handle.force_flush()
    rearm(tmp_path)
    reply, replayed_said = ask()
    assert bodies == ["chat", "said"]  # neither ran again
    assert type(reply) is litellm.ModelResponse and type(replayed_said) is Said
    assert reply.choices[0].message.content == "hello" and replayed_said == live_said
    assert len(replayed_spans(traced)) == 2


def test_a_recorded_response_its_annotation_does_not_take_is_asked_for_again(
    traced: Traced, tmp_path: Path
) -> None:
    """Never a dict where the function returns an object: a recording that its (changed) return
    annotation cannot rebuild is asked for again, as the next attempt at its place."""
    bodies: list[str] = []

    @agenttrace.llm(model="house/model-1")
    def before(messages: list[dict[str, Any]]) -> dict[str, Any]:
        bodies.append("before")
        return {"answer": "a dict"}

    @agenttrace.llm(model="house/model-1")
    def after(messages: list[dict[str, Any]]) -> Said:
        bodies.append("after")
        return Said("an object", 2)

    chat = [before]

    @agenttrace.agent("Changed")
    def ask() -> Any:
        return chat[0](HI)

    assert ask() == {"answer": "a dict"}
    traced.handle.force_flush()
    rearm(tmp_path)
    chat[0] = after
    assert ask() == Said("an object", 2)
    assert bodies == ["before", "after"]
    assert replayed_spans(traced) == []
    traced.handle.force_flush()
    assert states(tmp_path)[-2:] == [("1.1", 2, "intent"), ("1.1", 2, "done")]
