"""smolagents runs replayed (docs/how-to/smolagents.md, "Replay"): a ``ToolCallingAgent`` and a
``CodeAgent`` whose tools and final answer are text, which smolagents hands back as its own
``AgentText``, are recorded against the scripted model on 127.0.0.1, then replayed strictly with
every socket refused: the run ends the same way (the same final answer, an ``AgentText`` again,
and the same memory steps), every call is served from the recording, and nothing reaches the
model or runs a tool again. A tool whose result is an image is refused by name, not replayed
as something else."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

import agenttrace
from agenttrace.testing.cassettes import use_cassette

from .conftest import Traced
from .llm_server import LLMServer, Reply
from .test_smolagents import SMOL, TASK, calls, code, model, tool

smolagents = pytest.importorskip("smolagents")  # the [smolagents] extra, in the lock
AgentText = smolagents.AgentText
Image = pytest.importorskip("PIL.Image")  # smolagents' own dependency

LOOKED_UP: list[str] = []


@tool
def counted_lookup(city: str) -> str:
    """Look a city up, counting the calls that ran.

    Args:
        city: the city's name
    """
    LOOKED_UP.append(city)
    return f"{city} is a capital"


def tool_calling(llm: LLMServer) -> Any:
    return smolagents.ToolCallingAgent(
        tools=[counted_lookup], model=model(llm), name="researcher", verbosity_level=0
    )


def code_agent(llm: LLMServer) -> Any:
    return smolagents.CodeAgent(
        tools=[counted_lookup], model=model(llm), name="coder", verbosity_level=0
    )


TOOL_CALLING = (
    calls(("counted_lookup", {"city": "Paris"}, "call_lookup")),
    calls(("final_answer", {"answer": "Paris"}, "call_answer")),
)
CODE = (code('seen = counted_lookup(city="Paris")\nfinal_answer(seen.split()[0])'),)
AGENTS = {"tool_calling": (tool_calling, TOOL_CALLING), "code": (code_agent, CODE)}


def steps(agent: Any) -> list[tuple[Any, ...]]:
    """What each memory step says the run did (timings and token counts left out), with the
    type of what it holds: an ``AgentText`` given back as a ``str`` would show."""
    said = []
    for step in agent.memory.steps:
        output = getattr(step, "action_output", None)
        said.append(
            (
                type(step).__name__,
                getattr(step, "model_output", None),
                getattr(step, "code_action", None),
                [(c.name, c.arguments, c.id) for c in getattr(step, "tool_calls", None) or ()],
                getattr(step, "observations", None),
                output,
                type(output).__name__,
                getattr(step, "is_final_answer", None),
                str(getattr(step, "error", None)),
            )
        )
    return said


def record(traced: Traced, llm: LLMServer, kind: str) -> tuple[Any, Any, agenttrace.Session]:
    """Run the agent once live: its answer, the agent, and the session it recorded."""
    build, script = AGENTS[kind]
    LOOKED_UP.clear()
    llm.reset(*script)
    agent = build(llm)
    answer = agent.run(TASK)
    assert answer == "Paris" and type(answer) is AgentText
    assert LOOKED_UP == ["Paris"] and len(llm.requests) == len(script)
    traced.handle.force_flush()
    return answer, agent, agenttrace.current_session()


@SMOL
@pytest.mark.parametrize("kind", list(AGENTS))
def test_a_text_answer_replays_offline_as_the_same_agent_text(
    traced: Traced, llm: LLMServer, kind: str
) -> None:
    answer, agent, source = record(traced, llm, kind)
    llm.reset(Reply(content="never asked"))
    again = AGENTS[kind][0](llm)
    with agenttrace.replaying(source.session_id, offline=True) as replay:
        replayed = again.run(TASK)
    assert replayed == answer and type(replayed) is AgentText
    assert steps(again) == steps(agent)
    assert llm.requests == [] and LOOKED_UP == ["Paris"]  # no model asked, no tool run again
    assert replay.report.clean, replay.report
    # Every call served: each model reply, and each tool call the run made itself.
    served = {"tool_calling": 4, "code": 2}[kind]
    assert replay.report.served == served, replay.report


@SMOL
def test_a_cassette_of_a_text_answer_replays_with_every_call_served(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    LOOKED_UP.clear()
    llm.reset(*TOOL_CALLING)
    with use_cassette("researcher", directory=tmp_path) as cassette:
        assert cassette.recording
        live = tool_calling(llm).run(TASK)
    llm.reset(Reply(content="never asked"))
    with use_cassette("researcher", directory=tmp_path) as cassette:  # strict, offline
        assert not cassette.recording
        replayed = tool_calling(llm).run(TASK)
    assert replayed == live == "Paris" and type(replayed) is AgentText
    assert cassette.report is not None and cassette.report.clean
    assert cassette.report.served == 4
    assert llm.requests == [] and LOOKED_UP == ["Paris"]


class Draw(smolagents.Tool):  # type: ignore[misc]  # smolagents is untyped
    name = "draw"
    description = "Draws a city."
    inputs: ClassVar[dict[str, Any]] = {
        "city": {"type": "string", "description": "the city's name"}
    }
    output_type = "image"

    def forward(self, city: str) -> Any:
        DRAWN.append(city)
        return Image.new("RGB", (2, 2))


DRAWN: list[str] = []


@SMOL
def test_an_image_result_is_refused_by_name_not_given_back_as_something_else(
    traced: Traced, llm: LLMServer
) -> None:
    script = (
        calls(("draw", {"city": "Paris"}, "call_draw")),
        calls(("final_answer", {"answer": "drawn"}, "call_answer")),
    )
    DRAWN.clear()
    llm.reset(*script)

    def build() -> Any:
        return smolagents.ToolCallingAgent(
            tools=[Draw()], model=model(llm), name="painter", verbosity_level=0
        )

    assert build().run(TASK) == "drawn"
    source = agenttrace.current_session()
    traced.handle.force_flush()
    llm.reset(Reply(content="never asked"))
    with agenttrace.replaying(source.session_id, offline=True) as replay:
        replayed = build().run(TASK)
    assert replayed == "drawn" and type(replayed) is AgentText
    # The image cannot be given back: the call ran again, and the report says which it was.
    assert DRAWN == ["Paris", "Paris"]
    ((label, kind, name, why),) = [(n.label, n.kind, n.name, n.why) for n in replay.report.live]
    assert (kind, name) == ("tool", "draw") and "not replayable" in why, label
    assert replay.report.served == 3 and llm.requests == []
