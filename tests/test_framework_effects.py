"""Effect classes of framework tools (issue 22 item 2): smolagents tools and Claude Agent SDK
tools say what a resume may do again with their calls (a tool's ``agenttrace_effect``, the
application's ``init(tool_effects=...)``, a trusted MCP server's annotations), and their calls
are journaled like ``@agenttrace.tool`` calls. Real frameworks, as tests/test_smolagents.py and
tests/test_claude_agent_sdk.py run them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agenttrace
from agenttrace.tracing.journal.effects import annotated_effect

from .anthropic_server import AnthropicServer, Reply, text, tool_use
from .conftest import Traced
from .llm_server import LLMServer
from .test_claude_agent_sdk import (  # noqa: F401  (its fixtures, used by name)
    anthropic_server,
    claude,
    collect,
    model,
    options,
    run,
    usage,
    work,
)
from .test_smolagents import calls, lookup
from .test_smolagents import model as smolagents_model

smolagents = pytest.importorskip("smolagents")


def journal(traced: Traced) -> list[dict[str, Any]]:
    """The tool steps' lines of the test's session, in order (not the LLM attempts' or the
    run's own)."""
    traced.handle.force_flush()
    (stream,) = traced.handle.settings.sessions_dir.glob("*.events.jsonl")
    lines = [json.loads(line) for line in stream.read_text().splitlines()]
    return [line for line in lines if line["event_type"] == "step" and line["kind"] == "tool"]


@pytest.mark.parametrize(
    ("annotations", "effect"),
    [
        ({"readOnlyHint": True, "destructiveHint": True}, "read"),
        ({"readOnlyHint": False, "idempotentHint": True}, "idempotent"),
        ({"destructiveHint": False}, "effect"),  # it only adds: still an effect
        ({}, "effect"),
    ],
)
def test_mcp_annotations_as_effect_classes(annotations: dict[str, Any], effect: str) -> None:
    assert annotated_effect(annotations) == effect


def test_init_refuses_a_tool_effect_that_is_not_a_class(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'charge' maps to 'dangerous'; an effect class is one"):
        agenttrace.init(sessions_dir=tmp_path, tool_effects={"charge": "dangerous"})


# --- smolagents ----------------------------------------------------------------------------------


class Charge(smolagents.Tool):  # type: ignore[misc]
    name = "charge"
    description = "Charge the customer's card."
    inputs = {"amount": {"type": "integer", "description": "how much"}}  # noqa: RUF012
    output_type = "string"
    agenttrace_effect = "idempotent"  # what a resume may do again: the tool says it

    def __init__(self, seen: list[list[str]], stream: Path) -> None:
        super().__init__()
        self.seen = seen
        self.stream = stream

    def forward(self, amount: int) -> str:
        # What a kill now would leave on disk: this call's intent, and nothing after it.
        lines = [json.loads(line) for line in self.stream.read_text().splitlines()]
        self.seen.append(
            [s["state"] for s in lines if s["event_type"] == "step" and s["name"] == "charge"]
        )
        return f"charged {amount}"


@pytest.mark.init(instrument=["smolagents"], tool_effects={"lookup": "read"})
def test_smolagents_tools_are_journaled_by_the_class_they_declare(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(
        calls(("lookup", {"city": "Paris"}, "call_lookup")),
        calls(("charge", {"amount": 5}, "call_charge")),
        calls(("final_answer", {"answer": "done"}, "call_answer")),
    )
    seen: list[list[str]] = []
    session_id = agenttrace.current_session().session_id
    stream = traced.handle.settings.sessions_dir / f"{session_id}.events.jsonl"
    agent = smolagents.ToolCallingAgent(
        tools=[lookup, Charge(seen, stream)], model=smolagents_model(llm), verbosity_level=0
    )
    assert agent.run("charge 5 in Paris") == "done"

    # Inside the body, its intent was on disk and its outcome was not.
    assert seen == [["intent"]]
    steps = journal(traced)
    intents = [
        (s["name"], s["effect"], s["step"], s.get("call_id"))
        for s in steps
        if s["state"] == "intent"
    ]
    assert intents == [
        ("lookup", "read", "1.2", "call_lookup"),  # the application's init(tool_effects=...)
        ("charge", "idempotent", "2.2", "call_charge"),  # the tool's agenttrace_effect
        ("final_answer", "effect", "3.2", "call_answer"),  # undeclared: effect
    ]
    assert [(s["name"], s["state"]) for s in steps if s["state"] != "intent"] == [
        ("lookup", "done"),
        ("charge", "done"),
        ("final_answer", "done"),
    ]


# --- the Claude Agent SDK ------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.timeout(300)
@pytest.mark.init(tool_effects={"Read": "read"}, trusted_mcp_servers=["calculator"])
def test_claude_agent_sdk_tools_are_journaled_by_their_class(
    claude: None,  # noqa: F811  (the fixtures of tests/test_claude_agent_sdk.py)
    traced: Traced,
    model: AnthropicServer,  # noqa: F811
    work: Path,  # noqa: F811
) -> None:
    """The CLI's own ``Read``, named in ``tool_effects``; two tools of a trusted in-process MCP
    server, by their annotations; an untrusted server's tool that calls itself read-only stays
    an ``effect``."""
    from claude_agent_sdk import ToolAnnotations, create_sdk_mcp_server, query
    from claude_agent_sdk import tool as sdk_tool

    def answer(value: Any) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": str(value)}]}

    @sdk_tool("add", "Add two numbers", {"a": int, "b": int}, ToolAnnotations(readOnlyHint=True))
    async def add(args: dict[str, Any]) -> dict[str, Any]:
        return answer(args["a"] + args["b"])

    @sdk_tool("put", "Store a value", {"value": int}, ToolAnnotations(idempotentHint=True))
    async def put(args: dict[str, Any]) -> dict[str, Any]:
        return answer("stored")

    @sdk_tool("pay", "Pay", {"amount": int}, ToolAnnotations(readOnlyHint=True))  # it says
    async def pay(args: dict[str, Any]) -> dict[str, Any]:
        return answer("paid")

    servers = {
        "calculator": create_sdk_mcp_server("calculator", tools=[add, put]),
        "shop": create_sdk_mcp_server("shop", tools=[pay]),
    }
    model.reset(
        Reply([tool_use("mcp__calculator__add", {"a": 2, "b": 3})], usage=usage(2, 3)),
        Reply([tool_use("mcp__calculator__put", {"value": 5})], usage=usage(2, 3)),
        Reply([tool_use("mcp__shop__pay", {"amount": 5})], usage=usage(2, 3)),
        Reply([tool_use("Read", {"file_path": str(work / "missing.txt")})], usage=usage(2, 3)),
        Reply([text("Done.")], usage=usage(2, 3)),
    )
    allowed = ["mcp__calculator__add", "mcp__calculator__put", "mcp__shop__pay", "Read"]
    run(
        collect(
            query(
                prompt="add, store, pay, read",
                options=options(model, work, mcp_servers=servers, allowed_tools=allowed),
            )
        )
    )
    steps = journal(traced)
    intents = [(s["name"], s["effect"], s["step"]) for s in steps if s["state"] == "intent"]
    assert intents == [
        ("mcp__calculator__add", "read", "1.2"),  # a trusted server's annotations
        ("mcp__calculator__put", "idempotent", "2.2"),
        ("mcp__shop__pay", "effect", "3.2"),  # an untrusted server's are not believed
        ("Read", "read", "4.2"),  # the application's tool_effects
    ]
    outcomes = [(s["name"], s["state"], s.get("applied")) for s in steps if s["state"] != "intent"]
    assert outcomes == [
        ("mcp__calculator__add", "done", None),
        ("mcp__calculator__put", "done", None),
        ("mcp__shop__pay", "done", None),
        ("Read", "failed", "no"),  # the file is missing; a read changed nothing
    ]
    (call_ids,) = {tuple(s["call_id"] for s in steps if s["state"] == "intent")}
    assert list(call_ids) == [tool for sent in model.sent[:4] for tool in sent.tool_ids]
