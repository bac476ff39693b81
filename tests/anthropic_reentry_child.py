"""tests/openai_reentry_child.py with the Anthropic SDK: an agent that asks the model (the
test's tests/anthropic_server.py) through ``anthropic.Anthropic`` and pays through the payment
server with an ``idempotent`` tool, killing itself with SIGKILL inside the payment; ``resume``
as the mode resumes and re-enters the run.

``tool`` asks the model for a ``tool_use`` and pays what it asked; ``stream`` streams the
model's words through ``messages.stream`` first and then pays. Prints the answer (and what the
stream said) as one JSON line."""

from __future__ import annotations

import json
import os
import signal
import sys
import urllib.request
from pathlib import Path
from typing import Any

import anthropic

import agenttrace

ASK = {"model": "claude-sonnet-4-5", "max_tokens": 256}


def main() -> None:
    sessions, base_url, payments_url, shape, mode = sys.argv[1:6]
    agenttrace.init(sessions_dir=Path(sessions), console="quiet")
    sdk = anthropic.Anthropic(base_url=base_url, api_key="sk-ant-test", max_retries=0)

    @agenttrace.tool(effect="idempotent")
    def charge(amount: int) -> str:
        request = urllib.request.Request(
            payments_url + "/charge", data=json.dumps({"amount": amount}).encode(), method="POST"
        )
        request.add_header("Idempotency-Key", agenttrace.idempotency_key() or "")
        with urllib.request.urlopen(request, timeout=30) as answer:
            charged = json.loads(answer.read())
        if mode == "run":
            agenttrace.force_flush()  # the model's reply is on disk before the kill
            os.kill(os.getpid(), signal.SIGKILL)
        return str(charged["charge"])

    out: dict[str, Any] = {}

    @agenttrace.agent("Shop")
    def shop() -> str:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Pay 5 for the tea."}]
        if shape == "stream":
            with sdk.messages.stream(messages=messages, **ASK) as stream:
                said = "".join(stream.text_stream)
            out["said"] = said
            messages.append({"role": "assistant", "content": said})
            paid = charge(5)
            messages.append({"role": "user", "content": f"Paid: {paid}. Thank the customer."})
        else:
            reply = sdk.messages.create(messages=messages, **ASK)
            (call,) = [block for block in reply.content if block.type == "tool_use"]
            messages.append(
                {"role": "assistant", "content": [b.model_dump() for b in reply.content]}
            )
            paid = charge(**call.input)
            result = {"type": "tool_result", "tool_use_id": call.id, "content": paid}
            messages.append({"role": "user", "content": [result]})
        final = sdk.messages.create(messages=messages, **ASK)
        return str(final.content[0].text)

    if mode == "resume":
        (stream,) = Path(sessions).glob("*.events.jsonl")
        agenttrace.resume(stream)
    out["answer"] = shop()
    print(json.dumps(out))
    agenttrace.shutdown()


if __name__ == "__main__":
    main()
