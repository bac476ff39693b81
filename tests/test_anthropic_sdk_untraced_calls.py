"""What the Anthropic SDK's instrumentation leaves alone (issue 34 item 2):
``messages.count_tokens`` (asks what a request would cost, nothing is generated) and the batches
API (``messages.batches``: the requests run later, outside the agent's run, and their results
are fetched as a file). Neither is an LLM attempt: no span, no step in the journal, no entry in
the transcript, their answers as the SDK gives them, their retries the SDK's own; and the
agent's next real call is the first attempt of its turn."""

from __future__ import annotations

import asyncio
from pathlib import Path

import anthropic

import agenttrace
from agenttrace import semconv as sc

from .anthropic_server import AnthropicServer, Reply, text
from .conftest import Traced, attrs
from .test_anthropic_sdk import HI, MODEL, aclient, claude, client, llm_spans, server, transcripts
from .test_llm_steps import llm_lines

__all__ = ["claude", "server"]  # the fixtures, used by name

BATCH = [{"custom_id": "one", "params": {"model": MODEL, "max_tokens": 64, "messages": HI}}]


def test_count_tokens_and_batches_pass_through_untraced(
    traced: Traced, tmp_path: Path, claude: AnthropicServer
) -> None:
    @agenttrace.agent("Counter")
    async def ask() -> tuple[int, int, str, str, str]:
        sdk = client(claude, retries=1)  # the first count is refused: the SDK's own retry
        counted = sdk.messages.count_tokens(model=MODEL, messages=HI)
        acounted = await aclient(claude).messages.count_tokens(model=MODEL, messages=HI)
        batch = sdk.messages.batches.create(requests=BATCH)  # type: ignore[arg-type]
        again = await aclient(claude).messages.batches.retrieve(batch.id)
        reply = sdk.messages.create(model=MODEL, max_tokens=64, messages=HI)
        return (
            counted.input_tokens,
            acounted.input_tokens,
            batch.id,
            again.processing_status,
            reply.content[0].text,  # type: ignore[union-attr]
        )

    claude.reset(Reply(blocks=[text("Hi!")]), count_refusals=1)
    assert asyncio.run(ask()) == (10, 10, "msgbatch_scripted_01", "in_progress", "Hi!")
    paths = [r.path.split("?", 1)[0] for r in claude.requests]
    assert paths == [
        "/v1/messages/count_tokens",
        "/v1/messages/count_tokens",
        "/v1/messages/count_tokens",
        "/v1/messages/batches",
        "/v1/messages/batches/msgbatch_scripted_01",
        "/v1/messages",
    ]
    (span,) = llm_spans(traced)  # only the real call's
    assert attrs(span)[sc.ATTEMPT] == 1
    traced.handle.force_flush()
    assert [(line["state"], line["step"]) for line in llm_lines(tmp_path)] == [
        ("intent", "1.1"),
        ("done", "1.1"),
    ]
    (entries,) = transcripts(traced, tmp_path).values()
    assert [e["role"] for e in entries] == ["user", "assistant"]


def test_count_tokens_outside_any_agent(traced: Traced, claude: AnthropicServer) -> None:
    """Not even a run is needed: the SDK answers as it would uninstrumented."""
    claude.reset()
    counted = client(claude).messages.count_tokens(model=MODEL, messages=HI)
    assert isinstance(counted, anthropic.types.MessageTokensCount)
    assert counted.input_tokens == 10
    assert llm_spans(traced) == []
