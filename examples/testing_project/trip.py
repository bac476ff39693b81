"""A small trip planner, the agent app the tests beside it test with agenttrace's pytest plugin.

``plan_trip(request)`` runs the Planner agent (litellm, tool calls in a loop): its ``forecast``
tool runs in a worker thread, its model's ``ask_guide`` call runs the Guide sub-agent (one
litellm call), and ``pack`` a smolagents agent that lists what to take. The sub-agents are
called by the Planner's code, not from inside an ``@agenttrace.tool``: a cassette's replay
gives a tool call's recorded result without running it (and whatever it would have run), but
runs the sub-agents again, their LLM calls answered from the cassette. The model is whatever
:func:`configure` names: the tests point it at agenttrace's scripted model on 127.0.0.1, whose
replies are :data:`SCRIPTS`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import litellm

import agenttrace

PLANNER = "You plan trips. Use the tools, then answer in one line."
GUIDE = "You are a local guide. Answer in one line."
LLM: dict[str, Any] = {}
"""litellm's ``model``, ``api_base`` and ``api_key``: set by :func:`configure`, not passed to
the agent, so a run's arguments (which a cassette matches) do not hold the model's address."""

SCRIPTS: dict[str, Any] = {
    PLANNER: [
        {"tool": "forecast", "input": {"city": "Lisbon"}},
        {"tool": "ask_guide", "input": {"question": "One thing to see in Lisbon?"}},
        {"tool": "pack", "input": {"weather": "sunny, 24C"}},
        {"text": "Lisbon: sunny, see the Alfama, pack sunglasses."},
    ],
    GUIDE: [{"text": "Walk up to the Alfama."}],
    # Any other system prompt: the smolagents agent's, which answers with its final_answer tool.
    "": [{"tool": "final_answer", "input": {"answer": "sunglasses, sandals"}}],
}
"""What the scripted model answers each agent, turn by turn (agenttrace.testing.ScriptedModel)."""


def configure(**options: Any) -> None:
    """Name the model every agent calls (litellm's ``model``, ``api_base``, ``api_key``)."""
    LLM.clear()
    LLM.update(options)


def _function(name: str, key: str) -> dict[str, Any]:
    parameters = {"type": "object", "properties": {key: {"type": "string"}}}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


TOOLS = [
    _function("forecast", "city"),
    _function("ask_guide", "question"),
    _function("pack", "weather"),
]


@agenttrace.tool(effect="read")
def forecast(city: str) -> str:
    """The weather in ``city`` (a stand-in for a weather API)."""
    return "sunny, 24C" if city == "Lisbon" else "rain, 12C"


@agenttrace.agent(name="Guide")
def guide(question: str) -> str:
    """The Guide sub-agent: one question, one answer."""
    messages = [{"role": "system", "content": GUIDE}, {"role": "user", "content": question}]
    return str(litellm.completion(**LLM, messages=messages).choices[0].message.content)


def pack(weather: str) -> str:
    """What to take, from a smolagents agent (traced by ``agenttrace.init(instrument=
    ["smolagents"])``)."""
    import smolagents  # the [smolagents] extra

    model = smolagents.LiteLLMModel(
        model_id=LLM["model"], api_base=LLM.get("api_base"), api_key=LLM.get("api_key")
    )
    packer = smolagents.ToolCallingAgent(tools=[], model=model, name="packer", verbosity_level=0)
    return str(packer.run(f"The weather is {weather}. What should I pack?"))  # an AgentText


RUN: dict[str, Callable[..., str]] = {"forecast": forecast, "ask_guide": guide, "pack": pack}


@agenttrace.agent(name="Planner")
def plan_trip(request: str) -> str:
    """The Planner: asks the model, runs the tools it asks for, until it answers."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": PLANNER},
        {"role": "user", "content": request},
    ]
    with ThreadPoolExecutor(max_workers=2) as pool:
        while True:
            reply = litellm.completion(**LLM, messages=messages, tools=TOOLS)
            message = reply.choices[0].message
            calls = list(message.tool_calls or [])
            messages.append(
                {
                    "role": "assistant",
                    "content": message.content,
                    "tool_calls": [call.model_dump() for call in calls],
                }
            )
            if not calls:
                return str(message.content)
            for call in calls:
                arguments = json.loads(call.function.arguments)
                tool = RUN[call.function.name]
                # The forecast runs in a worker thread: agenttrace keeps it under this turn.
                if tool is forecast:
                    result = pool.submit(forecast, **arguments).result()
                else:
                    result = tool(**arguments)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
