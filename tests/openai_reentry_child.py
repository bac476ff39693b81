"""tests/llm_reentry_child.py with the OpenAI SDK in place of litellm (issue 34 item 3):
tests/shop_child.py's shop agent asking the model (the test's tests/llm_server.py) through
``openai.OpenAI``.

``tool`` asks the model for a tool call and pays what it asked; ``stream`` streams the model's
words first and then pays; ``responses`` is ``tool`` through the Responses API. Prints the
answer (and what the stream said) as one JSON line."""

from __future__ import annotations

import json
from typing import Any

import openai

from tests.shop_child import ASK, TOOLS, Shop, main, thanked_for

FUNCTIONS = [{"type": "function", "name": "charge", **TOOLS[0]["function"]}]
MODEL = {"model": "gpt-4o-mini"}


def connect(api_base: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=api_base, api_key="sk-test", max_retries=0)


def ask(shop: Shop) -> str:
    sdk = shop.client
    messages: list[dict[str, Any]] = [{"role": "user", "content": ASK}]
    if shop.shape == "responses":
        asked: list[Any] = list(messages)
        first = sdk.responses.create(input=asked, tools=FUNCTIONS, **MODEL)
        (called,) = [item for item in first.output if item.type == "function_call"]
        paid = shop.charge(**json.loads(called.arguments))
        asked += [called, {"type": "function_call_output", "call_id": called.call_id}]
        asked[-1]["output"] = paid
        return str(sdk.responses.create(input=asked, **MODEL).output_text)
    if shop.shape == "stream":
        chunks = list(sdk.chat.completions.create(messages=messages, stream=True, **MODEL))
        said = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        shop.out["said"], shop.out["chunks"] = said, len(chunks)
        thanked_for(shop, messages, said)
    else:
        reply = sdk.chat.completions.create(messages=messages, tools=TOOLS, **MODEL)
        message = reply.choices[0].message
        (call,) = message.tool_calls
        messages.append(message.model_dump(exclude_none=True))
        paid = shop.charge(**json.loads(call.function.arguments))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": paid})
    final = sdk.chat.completions.create(messages=messages, **MODEL)
    return str(final.choices[0].message.content)


if __name__ == "__main__":
    main(connect, ask)
