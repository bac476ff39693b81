"""A stand-in for "any framework's classes" in the documentation's examples (``from framework
import Agent, Tool, FinalAnswer, manager``): an agent whose ``run`` asks the model through
litellm and calls its tools, as frameworks do, written without any knowledge of agenttrace.

tests/test_docs_examples.py puts this folder on ``PYTHONPATH`` when it runs the blocks of the
README and of docs/.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import litellm

MODEL = "openai/gpt-4o-mini"


class FinalAnswer(Exception):
    """Raised by the ``final_answer`` tool to end a run: control flow, not a failure."""


class Tool:
    """A tool: a name and a function."""

    def __init__(self, name: str = "lookup", function: Any = None) -> None:
        self.name = name
        self.function = function or (lambda **kwargs: f"{name}: nothing found")

    def __call__(self, **kwargs: Any) -> Any:
        return self.function(**kwargs)


def _final(answer: str = "") -> str:
    raise FinalAnswer(answer)


class Agent:
    """An agent: ``run(task)`` asks the model until it stops calling tools; ``stream=True``
    yields each step instead."""

    def __init__(self, *args: Any, name: str = "planner", **kwargs: Any) -> None:
        self.name = name
        self.model = SimpleNamespace(model_id=MODEL)
        self.tools = {"lookup": Tool("lookup"), "final_answer": Tool("final_answer", _final)}

    def run(self, task: str, stream: bool = False) -> Any:
        steps = self._steps(task)
        if stream:
            return steps
        *_, answer = steps  # the last step is the answer
        return answer

    def _steps(self, task: str) -> Iterator[str]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": str(task)}]
        for _ in range(4):
            reply = litellm.completion(model=MODEL, messages=messages)
            message = reply.choices[0].message
            messages.append({"role": "assistant", "content": message.content or ""})
            try:
                yield self.tools["final_answer"](answer=message.content or "")
            except FinalAnswer as done:
                yield str(done)
                return


manager = Agent(name="manager")
"""An agent made by a framework, run with no decorator (``manager.run("Plan the trip")``)."""
