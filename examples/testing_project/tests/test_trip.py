"""The trip planner tested on cassettes: each test's LLM and tool calls come from
``tests/cassettes/test_trip/``, recorded once against the scripted model; the lint runs after
each test (pytest.ini)."""

from __future__ import annotations

import pytest
import trip

from agenttrace.testing import assert_trajectory, assert_tree

# smolagents' agents are traced too (pack runs one).
pytestmark = pytest.mark.agent_trace(instrument=["smolagents"])


def tool(name):
    """A tool call in the tree."""
    return {"name": f"execute_tool {name}"}


def sub_agent(name):
    """A sub-agent run in the tree: the call that ran it, the run, what the run did."""
    return {"name": f"execute_tool {name}", "children": [{"name": f"invoke_agent {name}"}]}


@pytest.mark.agent_cassette("lisbon")
def test_plan_trip(agent_trace):
    answer = trip.plan_trip("A weekend in Lisbon?")
    assert answer == "Lisbon: sunny, see the Alfama, pack sunglasses."
    # The Planner's own calls: a tool, then its two sub-agents; the packer's call of its own.
    assert_trajectory(
        agent_trace, [("forecast", {"city": "Lisbon"}), "Guide", "packer"], agent="Planner"
    )
    assert_trajectory(agent_trace, ["final_answer"], agent="packer")
    assert_tree(
        agent_trace,
        {
            "kind": "session",
            "name": "invoke_agent Planner",
            "children": [
                {
                    "name": "turn 1",
                    "children": [{"kind": "llm"}, {"name": "execute_tool forecast"}],
                },
                {"name": "turn 2", "children": [{"kind": "llm"}, sub_agent("Guide")]},
                {"name": "turn 3", "children": [{"kind": "llm"}, sub_agent("packer")]},
                {"name": "turn 4", "children": [{"kind": "llm"}]},
            ],
        },
    )
    assert agent_trace.transcript("Guide")[-1]["content"] == "Walk up to the Alfama."
    assert agent_trace.lint() == []


@pytest.mark.agent_cassette("guide")
def test_guide(agent_trace):
    assert trip.guide("One thing to see in Lisbon?") == "Walk up to the Alfama."
    # The same whether the cassette is being recorded or replayed.
    assert agent_trace.snapshot(text=True) == (
        "session invoke_agent Guide [0]\n"
        "  turn turn 1 [1]\n"
        "    llm chat claude-sonnet-4-5 [1.1]\n"
        "      @ agenttrace.attempt = 1\n"
    )
