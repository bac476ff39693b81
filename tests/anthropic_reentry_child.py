"""tests/openai_reentry_child.py with the Anthropic SDK: tests/shop_child.py's shop agent asking
the model (the test's tests/anthropic_server.py) through ``anthropic.Anthropic``.

``tool`` asks the model for a ``tool_use`` and pays what it asked; ``stream`` streams the
model's words through ``messages.stream`` first and then pays. Prints the answer (and what the
stream said) as one JSON line."""

from __future__ import annotations

from typing import Any

import anthropic

from tests.shop_child import ASK, Shop, main, thanked_for

MODEL = {"model": "claude-sonnet-4-5", "max_tokens": 256}


def connect(base_url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=base_url, api_key="sk-ant-test", max_retries=0)


def ask(shop: Shop) -> str:
    sdk = shop.client
    messages: list[dict[str, Any]] = [{"role": "user", "content": ASK}]
    if shop.shape == "stream":
        with sdk.messages.stream(messages=messages, **MODEL) as stream:
            said = "".join(stream.text_stream)
        shop.out["said"] = said
        thanked_for(shop, messages, said)
    else:
        reply = sdk.messages.create(messages=messages, **MODEL)
        (call,) = [block for block in reply.content if block.type == "tool_use"]
        messages.append({"role": "assistant", "content": [b.model_dump() for b in reply.content]})
        paid = shop.charge(**call.input)
        result = {"type": "tool_result", "tool_use_id": call.id, "content": paid}
        messages.append({"role": "user", "content": [result]})
    final = sdk.messages.create(messages=messages, **MODEL)
    return str(final.content[0].text)


if __name__ == "__main__":
    main(connect, ask)
