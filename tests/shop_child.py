"""What the re-entry children of LLM steps share (tests/llm_reentry_child.py,
tests/openai_reentry_child.py, tests/anthropic_reentry_child.py): a shop agent that asks the
model through one LLM client and pays through the payment server with an ``idempotent`` tool,
killing itself with SIGKILL inside the payment; ``resume`` as the mode resumes and re-enters
the run. Each child gives only how it connects to the model and what the agent asks it.

The arguments: the sessions folder, the model server's URL, the payment server's URL, the
shape of the exchange and the mode. Prints the answer (and what the child adds) as one JSON
line."""

from __future__ import annotations

import json
import os
import signal
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import agenttrace

ASK = "Pay 5 for the tea."
"""The user's message that starts every exchange."""

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "charge",
            "parameters": {"type": "object", "properties": {"amount": {"type": "integer"}}},
        },
    }
]
"""The ``charge`` tool, as a chat completions request declares it."""


class Shop(NamedTuple):
    """What the agent's body is given."""

    client: Any
    """What the child's ``connect`` made of the model server's URL."""
    shape: str
    charge: Callable[..., str]
    """The ``idempotent`` payment tool (the kill is inside it, in a first run)."""
    out: dict[str, Any]
    """What the child prints beside the answer."""


def thanked_for(shop: Shop, messages: list[dict[str, Any]], said: str) -> None:
    """After a streamed reply that ``said``: pay 5, and ask the model to thank the customer."""
    messages.append({"role": "assistant", "content": said})
    paid = shop.charge(5)
    messages.append({"role": "user", "content": f"Paid: {paid}. Thank the customer."})


def main(connect: Callable[[str], Any], ask: Callable[[Shop], str]) -> None:
    """Run the shop agent, ``ask`` its body, with the client ``connect`` makes (after ``init``)
    of the model server's URL."""
    sessions, model_url, payments_url, shape, mode = sys.argv[1:6]
    agenttrace.init(sessions_dir=Path(sessions), console="quiet")
    client = connect(model_url)

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
        return ask(Shop(client, shape, charge, out))

    if mode == "resume":
        (stream,) = Path(sessions).glob("*.events.jsonl")
        agenttrace.resume(stream)
    out["answer"] = shop()
    print(json.dumps(out))
    agenttrace.shutdown()
