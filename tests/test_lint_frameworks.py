"""Trace lint finds nothing in the sessions frameworks record when nothing went wrong: a
smolagents manager running its managed agent in a tool call, and an OpenAI Agents SDK triage
agent handing off to a billing agent with a tool, then an agent called as a tool. The same
scenarios as tests/test_smolagents.py and tests/test_openai_agents.py, on the scripted server
on 127.0.0.1 (docs/lint.md)."""

from __future__ import annotations

from typing import Any

import pytest

from agenttrace.views.lint import lint_session

from .conftest import Traced
from .llm_server import LLMServer, Reply
from .test_lint import saved


@pytest.mark.init(instrument=["smolagents"], capture_content=True)
def test_a_smolagents_manager_and_its_managed_agent_have_no_finding(
    traced: Traced, llm: LLMServer
) -> None:
    pytest.importorskip("smolagents")
    from .test_smolagents import RESEARCH, TASK, calls, model, researcher, smolagents

    llm.reset(
        calls(("researcher", {"task": TASK}, "call_delegate")),
        *RESEARCH,
        calls(("final_answer", {"answer": "Paris"}, "call_done")),
    )
    manager = smolagents.ToolCallingAgent(
        tools=[], model=model(llm), managed_agents=[researcher(llm)], name="manager"
    )
    assert manager.run("What is the capital of France?") == "Paris"
    assert lint_session(saved(traced)) == []


def openai_agents(llm: LLMServer) -> Any:
    """The OpenAI Agents SDK with agenttrace's processor only (the SDK's exporter to OpenAI's
    backend dropped: no network)."""
    agents = pytest.importorskip("agents")
    from agenttrace.instrumentation.openai_agents import tracing_processor

    agents.set_trace_processors([tracing_processor()])
    return agents


@pytest.mark.init(capture_content=True)
def test_an_openai_agents_agent_called_as_a_tool_has_no_finding(
    traced: Traced, llm: LLMServer
) -> None:
    agents = openai_agents(llm)
    from .test_openai_agents import call, chat_model, refund

    llm.reset(
        Reply(content="", tool_calls=[call("call_b", "ask_billing", {"input": "refund A1"})]),
        Reply(content="", tool_calls=[call("call_r", "refund", {"order_id": "A1"})]),
        Reply(content="Refunded A1."),
        Reply(content="All done."),
    )
    billing = agents.Agent(name="billing", tools=[refund], model=chat_model(llm))
    asks = billing.as_tool(tool_name="ask_billing", tool_description="Ask billing.")
    boss = agents.Agent(name="boss", tools=[asks], model=chat_model(llm))
    assert agents.Runner.run_sync(boss, "Refund A1.").final_output == "All done."
    assert lint_session(saved(traced)) == []


@pytest.mark.init(tool_effects={"refund": "idempotent"}, capture_content=True)
def test_an_openai_agents_handoff_has_no_finding(traced: Traced, llm: LLMServer) -> None:
    agents = openai_agents(llm)
    from .test_openai_agents import SCRIPT, chat_model, desk

    llm.reset(*SCRIPT)
    result = agents.Runner.run_sync(desk(chat_model(llm)), "Refund order A1, please.")
    assert result.final_output == "Refunded A1."
    assert lint_session(saved(traced)) == []
