"""smolagents' ``OpenAIServerModel`` calls the OpenAI SDK: with the SDK instrumented (as under
``init()``), each model call of an agent step is an LLM span in that step's turn (issue 34
item 5)."""

from __future__ import annotations

import smolagents

from .conftest import Traced
from .llm_server import LLMServer
from .test_smolagents import KEY, RESEARCH, SMOL, TASK, lookup


@SMOL
def test_openai_server_model_calls_are_llm_spans_in_their_steps(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(*RESEARCH)
    model = smolagents.OpenAIServerModel(model_id="gpt-4o-mini", api_base=llm.api_base, api_key=KEY)
    agent = smolagents.ToolCallingAgent(tools=[lookup], model=model, verbosity_level=0)

    assert agent.run(TASK) == "Paris"

    assert [line.strip() for line in traced.tree()] == [
        "invoke_agent ToolCallingAgent [0]",
        "turn 1 [1]",
        "chat gpt-4o-mini [1.1]",
        "execute_tool lookup [1.2]",
        "turn 2 [2]",
        "chat gpt-4o-mini [2.1]",
        "execute_tool final_answer [2.2]",
    ]
