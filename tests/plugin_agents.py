"""The agents tests/test_pytest_plugin.py tests the pytest plugin with, imported by it and
written into the projects it runs pytest on: a host agent whose model (the scripted one, on
127.0.0.1) asks an expert sub-agent and looks the weather up, a tool that notes in a thread of
its own, and a spelling check that fails.

``host(llm, prompt)`` runs it; ``llm`` is litellm's ``model``, ``api_base`` and ``api_key``
(:func:`llm_options`), kept in :data:`LLM` for the sub-agent, so that no tool's arguments hold
the model server's port (the trees of two runs are then equal).
"""

from __future__ import annotations

import contextlib
import json
import threading
from typing import Any

import litellm

import agenttrace
from agenttrace.testing import ScriptedModel

MODEL = "anthropic/claude-sonnet-4-5-20250929"
EXPERT = "You are an expert."
SCRIPTS: dict[str, Any] = {
    "": [
        {"tool": "ask_expert", "id": "call_1", "input": {"question": "Tea or coffee?"}},
        {"tool": "lookup", "id": "call_2", "input": {"city": "Paris"}},
        {"text": "Coffee, in the sun."},
    ],
    EXPERT: [{"text": "Coffee."}],
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {"type": "object", "properties": {key: {"type": "string"}}},
        },
    }
    for name, key in (("ask_expert", "question"), ("lookup", "city"))
]


LLM: dict[str, Any] = {}


def llm_options(model: ScriptedModel) -> dict[str, Any]:
    return {"model": MODEL, "api_base": model.api_base, "api_key": "offline-test-key"}


@agenttrace.agent(name="Expert")
def expert(question: str) -> str:
    messages = [{"role": "system", "content": EXPERT}, {"role": "user", "content": question}]
    return str(litellm.completion(**LLM, messages=messages).choices[0].message.content)


@agenttrace.tool(effect="read")
def note(text: str) -> str:
    return "noted"


@agenttrace.tool(effect="read")
def ask_expert(question: str) -> str:
    noted: list[str] = []
    worker = threading.Thread(target=lambda: noted.append(note(f"asked: {question}")))
    worker.start()
    worker.join()  # before the sub-agent: the labels do not depend on the threads' timing
    return expert(question)


@agenttrace.tool(effect="pure")
def lookup(city: str) -> str:
    return f"sunny in {city}"


@agenttrace.tool(effect="pure")
def check_spelling(text: str) -> str:
    raise ValueError(f"cannot check {text!r}")


@agenttrace.agent(name="Host")
def host(llm: dict[str, Any], prompt: str) -> str:
    LLM.update(llm)
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    while True:
        reply = litellm.completion(**LLM, messages=messages, tools=TOOLS).choices[0].message
        entry: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.tool_calls:
            entry["tool_calls"] = [call.model_dump() for call in reply.tool_calls]
        messages.append(entry)
        if not reply.tool_calls:
            with contextlib.suppress(ValueError):  # a failed call the run survives
                check_spelling(str(reply.content))
            return str(reply.content)
        for call in reply.tool_calls:
            arguments = json.loads(call.function.arguments)
            if call.function.name == "ask_expert":
                result = ask_expert(arguments["question"])
            else:
                result = lookup(arguments["city"])
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
