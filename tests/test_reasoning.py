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


@pytest.mark.init(max_payload_bytes=256)
def test_reasoning_is_capped_like_content(traced: Traced, llm: LLMServer) -> None:
    llm.reset(Reply(content="Paris.", reasoning="think " * 1000))
    ask(llm, "openai/gpt-4o-mini")
    (event,) = reasoning_events(traced)
    assert len(event[sc.REASONING_TEXT].encode()) <= 256


def test_a_response_without_reasoning_records_none(traced: Traced, llm: LLMServer) -> None:
    llm.reset(Reply(content="Paris."))
    ask(llm, "openai/gpt-4o-mini")
    assert reasoning_events(traced) == []
