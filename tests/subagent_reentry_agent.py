"""A root agent whose run creates sub-agents, for the tests of re-entering a run killed while a
sub-agent worked (tests/test_subagent_reentry.py).

The root, Boss, has three tools: ``search`` (``read``), ``consult`` (runs the Expert sub-agent,
created the first time it is needed and kept in ``Boss.subagents``; the default ``effect``
class) and ``pay`` (the default ``effect`` class, against tests/payment_server.py, with its
idempotency key). The Expert has a ``read`` tool of its own, ``lookup``. ``SHAPE`` says what
``consult`` does:

- ``one``: the Expert hears the question and answers it (two LLM calls around ``lookup``);
- ``two``: the Expert and a Critic, both created by ``consult``; the Critic hears the Expert's
  answer and answers it;
- ``nested``: the Expert's ``lookup`` asks a Specialist, a sub-agent of the Expert (depth 3);
- ``twice``: as ``one``, and the model has Boss consult the Expert twice.

``python -m tests.subagent_reentry_agent SESSIONS_DIR`` runs Boss once; ``KILL_AT`` names a
point where it SIGKILLs itself (``before_expert_llm``: after the Expert heard the question,
before its first LLM call; ``between_expert_calls``: after ``lookup``, before the Expert's
second call; ``inside_pay``: after the charge). ``rebuild`` is the factory ``agenttrace resume
FILE --agent tests.subagent_reentry_agent:rebuild`` rebuilds the agents with. The model is
``LLM_API_BASE`` (tests/llm_server.py), the payment server ``PAYMENTS_URL``."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import litellm

import agenttrace

from .payment_server import post_charge

TASK = "Find the tea, ask the expert about it, then pay 5."
SYSTEM = {
    "Boss": "You are Boss.",
    "Expert": "You are Expert.",
    "Critic": "You are Critic.",
    "Specialist": "You are Specialist.",
}


def _tool(name: str, **properties: str) -> dict[str, Any]:
    props = {key: {"type": kind} for key, kind in properties.items()}
    parameters = {"type": "object", "properties": props}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


TOOLS = {
    "Boss": [
        _tool("search", query="string"),
        _tool("consult", question="string"),
        _tool("pay", amount="integer"),
    ],
    "Expert": [_tool("lookup", topic="string")],
    "Critic": [],
    "Specialist": [],
}


def _die(point: str) -> None:
    if os.environ.get("KILL_AT") == point:
        agenttrace.force_flush()  # what the run did is on disk: the kill comes after
        os.kill(os.getpid(), signal.SIGKILL)


@agenttrace.agent_class
class Agent:
    """A litellm tool loop over its own transcript."""

    def __init__(self, name: str) -> None:
        self.name, self.language_model = name, "openai/gpt-4o-mini"
        self.transcript: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM[name]}]
        self.subagents: dict[str, Agent] = {}

    @agenttrace.hears
    def harken(self, text: str) -> None:
        self.transcript.append({"role": "user", "content": str(text)})

    @agenttrace.agent
    def response(self) -> str:
        while True:
            tools = TOOLS[self.name] or None
            reply = litellm.completion(
                model=self.language_model,
                messages=self.transcript,
                tools=tools,
                api_base=os.environ["LLM_API_BASE"],
                api_key="sk-test",
            )
            message = reply.choices[0].message
            self.transcript.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                return str(message.content)
            for call in message.tool_calls:
                method = getattr(self, str(call.function.name))
                result = method(**json.loads(call.function.arguments))
                self.transcript.append({"role": "tool", "tool_call_id": call.id, "content": result})
            if self.name == "Expert":
                _die("between_expert_calls")

    def _subagent(self, name: str) -> Agent:
        """The sub-agent ``name``, created the first time it is needed."""
        if name not in self.subagents:
            self.subagents[name] = Agent(name)
        return self.subagents[name]

    @agenttrace.tool(effect="read")
    def search(self, query: str) -> str:
        return f"tea found for {query}"

    @agenttrace.tool
    def consult(self, question: str) -> str:
        expert = self._subagent("Expert")
        expert.harken(question)
        _die("before_expert_llm")
        answer = expert.response()
        if os.environ.get("SHAPE") != "two":
            return answer
        critic = self._subagent("Critic")
        critic.harken(answer)
        return critic.response()

    @agenttrace.tool(effect="read")
    def lookup(self, topic: str) -> str:
        if os.environ.get("SHAPE") != "nested":
            return f"{topic}: green"
        specialist = self._subagent("Specialist")
        specialist.harken(topic)
        return specialist.response()

    @agenttrace.tool
    def pay(self, amount: int) -> str:
        charged = post_charge(os.environ["PAYMENTS_URL"], amount, agenttrace.idempotency_key())
        _die("inside_pay")
        return str(charged["charge"])


def rebuild(record: agenttrace.AgentRecord, session: agenttrace.Session) -> Agent:
    """The agent ``record`` stands for, as the session left it (README's factory)."""
    agent = Agent.__new__(Agent)  # not Agent(...): the constructor logs a new agent
    agent.agent_id, agent.name = record.agent_id, record.name or "Boss"
    agent.language_model, agent.transcript = "openai/gpt-4o-mini", record.messages()
    agent.subagents = {}
    return agent


if __name__ == "__main__":
    agenttrace.init(sessions_dir=Path(sys.argv[1]), console="quiet")
    boss = Agent("Boss")
    boss.harken(TASK)
    print(boss.response())
    agenttrace.shutdown()
