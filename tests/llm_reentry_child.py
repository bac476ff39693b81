"""A process for the re-entry tests of LLM steps (tests/shop_child.py's shop agent) asking the
model (the test's tests/llm_server.py) through litellm.

``tool`` asks the model for a tool call and pays what it asked; ``stream`` streams the model's
words first and then pays. Prints the answer (and what the stream said) as one JSON line."""

from __future__ import annotations

import json
from typing import Any

import litellm

from tests.shop_child import ASK, TOOLS, Shop, main, thanked_for


def connect(api_base: str) -> dict[str, Any]:
    return {"model": "openai/gpt-4o-mini", "api_base": api_base, "api_key": "sk-test"}


def ask(shop: Shop) -> str:
    model = shop.client
    messages: list[dict[str, Any]] = [{"role": "user", "content": ASK}]
    if shop.shape == "stream":
        chunks = list(litellm.completion(messages=messages, stream=True, **model))
        said = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        shop.out["said"], shop.out["chunks"] = said, len(chunks)
        thanked_for(shop, messages, said)
    else:
        reply = litellm.completion(messages=messages, tools=TOOLS, **model)
        message = reply.choices[0].message
        (call,) = message.tool_calls
        messages.append(message.model_dump(exclude_none=True))
        paid = shop.charge(**json.loads(call.function.arguments))
        messages.append({"role": "tool", "tool_call_id": call.id, "content": paid})
    final = litellm.completion(messages=messages, **model)
    return str(final.choices[0].message.content)


if __name__ == "__main__":
    main(connect, ask)
