"""A turn describes itself (issue 21, item 5): its node in the opTree carries the prompts its
first LLM attempt added (system, user) and its latest attempt's assistant text, capped and
redacted as the attempts recorded them, so a consumer of the opTree needs no event stream."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import litellm
import pytest

import agenttrace

from .conftest import Traced


def turns_of(tmp_path: Path) -> list[dict[str, Any]]:
    (snapshot,) = (tmp_path / "sessions").glob("*.json.gz")
    document = json.loads(gzip.decompress(snapshot.read_bytes()))
    return [turn for run in document["runs"] for turn in run["turns"]]


def test_each_turn_carries_its_prompts_and_its_reply(traced: Traced, tmp_path: Path) -> None:
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]

    @agenttrace.agent("Asker")
    def run() -> None:
        for question, answer in (("Capital of France?", "Paris."), ("And Italy?", "Rome.")):
            history.append({"role": "user", "content": question})
            with agenttrace.turn():
                reply = litellm.completion(
                    model="gpt-4o-mini", messages=history, mock_response=answer
                )
            history.append({"role": "assistant", "content": reply.choices[0].message.content})

    run()
    traced.handle.force_flush()
    first, second = turns_of(tmp_path)
    assert first["prompts"] == [
        {"role": "system", "text": "You are terse.", "size": 14},
        {"role": "user", "text": "Capital of France?", "size": 18},
    ]
    assert first["reply"] == {"text": "Paris.", "size": 6}
    # The second request adds only its question (the history before it was the first's).
    assert second["prompts"] == [{"role": "user", "text": "And Italy?", "size": 10}]
    assert second["reply"]["text"] == "Rome."


@pytest.mark.init(max_payload_bytes=4096)
def test_a_turns_texts_are_redacted_as_its_attempt_recorded_them(
    traced: Traced, tmp_path: Path
) -> None:
    @agenttrace.agent("Asker")
    def run() -> None:
        litellm.completion(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": '{"password": "hunter2-canary"} log me in'}],
            mock_response="Done.",
        )

    run()
    traced.handle.force_flush()
    (turn,) = turns_of(tmp_path)
    (prompt,) = turn["prompts"]
    assert "hunter2-canary" not in prompt["text"] and "[REDACTED]" in prompt["text"]
    assert turn["reply"]["text"] == "Done."
