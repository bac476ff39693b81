"""A process for the tests of which run a resume re-enters: an agent ``shop(question)`` asks the
model (the test's tests/llm_server.py) and pays through the payment server with an
``idempotent`` tool; run with the mode ``run`` it kills itself with SIGKILL inside the payment.

The other modes resume the session the killed process left and then:

- ``same``: call ``shop`` with the killed run's question (it re-enters);
- ``other``: call ``shop`` with another question (a new run);
- ``fresh``: the same, resumed with ``reenter=False``;
- ``bare``: make an LLM call outside any decorated run (an implicit run);
- ``bare-run``: (not a resume) make an LLM call outside any decorated run and die in it.

Prints one JSON line: the answer, the root agent's transcript as (role, content) pairs when the
run started and at the end, and the spans that said they re-enter a run."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import urllib.request
from pathlib import Path
from typing import Any

import litellm
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agenttrace

QUESTION = "Pay 5 for the tea."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "charge",
            "parameters": {"type": "object", "properties": {"amount": {"type": "integer"}}},
        },
    }
]


def main() -> None:
    sessions, api_base, payments_url, mode = sys.argv[1:5]
    question = sys.argv[5] if len(sys.argv) > 5 else QUESTION
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agenttrace.init(sessions_dir=Path(sessions), console="quiet", tracer_provider=provider)
    model = {"model": "openai/gpt-4o-mini", "api_base": api_base, "api_key": "sk-test"}

    def die() -> None:
        agenttrace.force_flush()  # what the run did is on disk: the kill comes after
        os.kill(os.getpid(), signal.SIGKILL)

    @agenttrace.tool(effect="idempotent")
    def charge(amount: int) -> str:
        request = urllib.request.Request(
            payments_url + "/charge", data=json.dumps({"amount": amount}).encode(), method="POST"
        )
        request.add_header("Idempotency-Key", agenttrace.idempotency_key() or "")
        with urllib.request.urlopen(request, timeout=30) as answer:
            charged = json.loads(answer.read())
        if mode == "run":
            die()
        return str(charged["charge"])

    at_start: list[list[Any]] = []

    def transcript() -> list[list[Any]]:
        root = agenttrace.current_session().root()
        entries = root.transcript if root is not None else []
        return [[entry.get("role"), entry.get("content")] for entry in entries]

    @agenttrace.agent("Shop")
    def shop(question: str) -> str:
        at_start.extend(transcript())  # as the run found it
        messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
        while True:
            reply = litellm.completion(messages=messages, tools=TOOLS, **model)
            message = reply.choices[0].message
            if not message.tool_calls:
                return str(message.content)
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                paid = charge(**json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": paid})

    def bare() -> str:
        reply = litellm.completion(messages=[{"role": "user", "content": question}], **model)
        return str(reply.choices[0].message.content)

    if mode == "run":
        shop(question)
    if mode == "bare-run":
        bare()
        die()
    (stream,) = Path(sessions).glob("*.events.jsonl")
    session = agenttrace.resume(stream, reenter=mode != "fresh")
    armed = session.reentry is not None
    answer = bare() if mode == "bare" else shop(question)
    agenttrace.force_flush()
    reentering = [
        span.name
        for span in exporter.get_finished_spans()
        if (span.attributes or {}).get("agenttrace.reenters")
    ]
    out = {
        "answer": answer,
        "armed": armed,
        "at_start": at_start if mode != "bare" else transcript(),
        "transcript": transcript(),
        "reenters": reentering,
    }
    print(json.dumps(out))
    agenttrace.shutdown()


if __name__ == "__main__":
    main()
