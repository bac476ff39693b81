"""tests/llm_reentry_child.py with the OpenAI SDK in place of litellm (issue 34 item 3): an
agent that asks the model (the test's tests/llm_server.py) through ``openai.OpenAI`` and pays
through the payment server with an ``idempotent`` tool, killing
itself with SIGKILL inside the payment; ``resume`` as the mode resumes and re-enters the run.

``tool`` asks the model for a tool call and pays what it asked; ``stream`` streams the model's
words first and then pays; ``responses`` is ``tool`` through the Responses API. Prints the
answer (and what the stream said) as one JSON line."""

from __future__ import annotations

import json
import os
import signal
import sys
import urllib.request
from pathlib import Path
from typing import Any

import openai

import agenttrace

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "charge",
            "parameters": {"type": "object", "properties": {"amount": {"type": "integer"}}},
        },
    }
]
FUNCTIONS = [{"type": "function", "name": "charge", **TOOLS[0]["function"]}]


def main() -> None:
    sessions, api_base, payments_url, shape, mode = sys.argv[1:6]
    agenttrace.init(sessions_dir=Path(sessions), console="quiet")
    sdk = openai.OpenAI(base_url=api_base, api_key="sk-test", max_retries=0)
    model = {"model": "gpt-4o-mini"}

    @agenttrace.tool(effect="idempotent")
    def charge(amount: int) -> str:
        request = urllib.request.Request(
            payments_url + "/charge", data=json.dumps({"amount": amount}).encode(), method="POST"
        )
        request.add_header("Idempotency-Key", agenttrace.idempotency_key() or "")
        with urllib.request.urlopen(request, timeout=30) as answer:
            charged = json.loads(answer.read())
        if mode == "run":
            # The model's reply is on disk (written by the background, which a kill may beat:
            # the reply would then be asked for again, as a reply never recorded is).
            agenttrace.force_flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return str(charged["charge"])

    out: dict[str, Any] = {}

    @agenttrace.agent("Shop")
    def shop() -> str:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Pay 5 for the tea."}]
        if shape == "responses":
            asked: list[Any] = list(messages)
            first = sdk.responses.create(input=asked, tools=FUNCTIONS, **model)
            (called,) = [item for item in first.output if item.type == "function_call"]
            paid = charge(**json.loads(called.arguments))
            asked += [called, {"type": "function_call_output", "call_id": called.call_id}]
            asked[-1]["output"] = paid
            return sdk.responses.create(input=asked, **model).output_text
        if shape == "stream":
            chunks = list(sdk.chat.completions.create(messages=messages, stream=True, **model))
            said = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            out["said"], out["chunks"] = said, len(chunks)
            messages.append({"role": "assistant", "content": said})
            paid = charge(5)
            messages.append({"role": "user", "content": f"Paid: {paid}. Thank the customer."})
        else:
            reply = sdk.chat.completions.create(messages=messages, tools=TOOLS, **model)
            message = reply.choices[0].message
            (call,) = message.tool_calls
            messages.append(message.model_dump(exclude_none=True))
            paid = charge(**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": paid})
        final = sdk.chat.completions.create(messages=messages, **model)
        return str(final.choices[0].message.content)

    if mode == "resume":
        (stream,) = Path(sessions).glob("*.events.jsonl")
        agenttrace.resume(stream)
    out["answer"] = shop()
    print(json.dumps(out))
    agenttrace.shutdown()


if __name__ == "__main__":
    main()
