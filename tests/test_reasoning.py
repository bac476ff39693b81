"""Reasoning returned through litellm is recorded (issue 21, item 4): ``reasoning_content``
(non-streamed and streamed) and Anthropic thinking blocks become the attempt's reasoning chunks,
a ``THK`` console line and span events, capped and redacted like content; a thinking block's
signature is opaque and recorded in the journal's lines only (a re-entered run gives it back)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import litellm
import pytest

import agenttrace
from agenttrace import semconv as sc

from .conftest import Traced
from .llm_server import LLMServer, Reply
from .test_openai_sdk import client

THOUGHT = 'The user wants the capital. {"password": "hunter2-canary"} Paris it is.'


def ask(llm: LLMServer, model: str, stream: bool = False) -> None:
    @agenttrace.agent("Thinker")
    def run() -> None:
        response = litellm.completion(
            model=model,
            api_base=llm.api_base,
            api_key="test-key",
            messages=[{"role": "user", "content": "Capital of France?"}],
            stream=stream,
        )
        if stream:
            for _ in response:
                pass

    run()


def reasoning_events(traced: Traced) -> list[dict[str, Any]]:
    (span,) = [s for s in traced.spans() if s.name.startswith("chat ")]
    return [dict(e.attributes or {}) for e in span.events if e.name == sc.EVENT_REASONING]


@pytest.mark.console("verbose")
@pytest.mark.parametrize(
    ("model", "stream"),
    [("openai/gpt-4o-mini", False), ("openai/gpt-4o-mini", True), ("anthropic/claude-x", False)],
    ids=["reasoning_content", "streamed", "anthropic-thinking"],
)
def test_reasoning_is_recorded_on_the_attempt(
    traced: Traced, llm: LLMServer, tmp_path: Path, model: str, stream: bool
) -> None:
    llm.reset(Reply(content="Paris.", reasoning=THOUGHT))
    ask(llm, model, stream)
    traced.handle.force_flush()
    (event,) = reasoning_events(traced)
    text = event[sc.REASONING_TEXT]
    assert text.startswith("The user wants the capital.") and text.endswith("Paris it is.")
    assert "hunter2-canary" not in text and "[REDACTED]" in text  # redacted like content
    # The console's THK line, and the op's reasoning in the session file.
    (thk,) = [line for line in traced.console.getvalue().splitlines() if " THK " in line]
    assert "Paris it is." in thk and "hunter2-canary" not in thk
    (snapshot,) = (tmp_path / "sessions").glob("*.json.gz")
    saved = gzip.decompress(snapshot.read_bytes()).decode()
    assert '"reasoning"' in saved and "Paris it is." in saved
    # An Anthropic block's signature is opaque: on no span, console line or event; only the
    # journal's lines keep it (a re-entered run gives the block back whole, as the API needs).
    document = json.loads(saved)
    journal = json.dumps(document.pop("journal", []))
    everywhere = (
        json.dumps(document)
        + traced.console.getvalue()
        + str([dict(s.attributes or {}) for s in traced.spans()])
    )
    for path in (tmp_path / "sessions").iterdir():
        if path.suffix == ".gz":
            continue
        for line in path.read_bytes().decode("utf-8", "replace").splitlines():
            if '"event_type":"step"' in line.replace(" ", ""):
                journal += line
            else:
                everywhere += line
    assert "sig-opaque-canary" not in everywhere
    assert ("sig-opaque-canary" in journal) is (model == "anthropic/claude-x")


def saved_reasoning(traced: Traced, tmp_path: Path) -> dict[str, Any]:
    """The reasoning of the session file's one LLM op."""
    traced.handle.force_flush()
    (snapshot,) = (tmp_path / "sessions").glob("*.json.gz")
    document = json.loads(gzip.decompress(snapshot.read_bytes()))
    (op,) = [
        op
        for run in document["runs"]
        for turn in run["turns"]
        for op in turn["ops"]
        if op["kind"] == "llm"
    ]
    reasoning: dict[str, Any] = op["reasoning"]
    return reasoning


@pytest.mark.init(max_payload_bytes=256)
def test_reasoning_is_capped_like_content_on_its_span_only(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    llm.reset(Reply(content="Paris.", reasoning="think " * 1000))
    ask(llm, "openai/gpt-4o-mini")
    (event,) = reasoning_events(traced)
    assert len(event[sc.REASONING_TEXT].encode()) <= 256
    # The saved state keeps it whole: no chunk is capped by max_payload_bytes (seed 002).
    (chunk,) = saved_reasoning(traced, tmp_path)["chunks"]
    assert chunk["text"] == "think " * 1000


def test_streamed_reasoning_keeps_its_chunks_as_they_came(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    thought = "First the country, then its capital: France, so Paris."
    llm.reset(Reply(content="Paris.", reasoning=thought))
    ask(llm, "openai/gpt-4o-mini", stream=True)
    reasoning = saved_reasoning(traced, tmp_path)
    # The server streams the reasoning in deltas of 8 characters: one chunk each, in order,
    # each with the time it came.
    texts = [chunk["text"] for chunk in reasoning["chunks"]]
    assert texts == [thought[i : i + 8] for i in range(0, len(thought), 8)]
    times = [chunk["ts"] for chunk in reasoning["chunks"]]
    assert times == sorted(times)
    assert "final" not in reasoning  # chat completions give no summary
    (event,) = reasoning_events(traced)  # one span event and THK line: the whole text
    assert event[sc.REASONING_TEXT] == thought


def test_a_secret_split_across_deltas_is_redacted_in_the_chunks(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    llm.reset(Reply(content="Paris.", reasoning=THOUGHT))
    ask(llm, "openai/gpt-4o-mini", stream=True)
    chunks = saved_reasoning(traced, tmp_path)["chunks"]
    whole = "".join(chunk["text"] for chunk in chunks)
    assert "hunter2" not in whole and "[REDACTED]" in whole and whole.endswith("Paris it is.")
    # The deltas before the secret are kept as they came; from it on, the rest is one chunk.
    assert [chunk["text"] for chunk in chunks[:3]] == ["The user", " wants t", "he capit"]


@pytest.mark.init(max_reasoning_bytes=1024)
def test_the_reasoning_bound_is_a_setting(traced: Traced, llm: LLMServer, tmp_path: Path) -> None:
    llm.reset(Reply(content="Paris.", reasoning="think " * 1000))
    ask(llm, "openai/gpt-4o-mini", stream=True)
    chunks = saved_reasoning(traced, tmp_path)["chunks"]
    whole = "".join(chunk["text"] for chunk in chunks)
    assert len(whole.encode()) <= 1024 and whole.endswith("…[truncated, 6000 bytes]")
    assert len(chunks) > 1  # the deltas before the bound as they came


def test_a_providers_summary_is_the_reasonings_final(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    llm.reset(Reply(content="Paris.", reasoning="The capital of France."))

    @agenttrace.agent("Summarised")
    def run() -> None:
        client(llm).responses.create(model="gpt-4o-mini", input="Capital of France?")

    run()
    assert saved_reasoning(traced, tmp_path) == {"chunks": [], "final": "The capital of France."}


def test_a_response_without_reasoning_records_none(traced: Traced, llm: LLMServer) -> None:
    llm.reset(Reply(content="Paris."))
    ask(llm, "openai/gpt-4o-mini")
    assert reasoning_events(traced) == []
