"""What each Agents SDK span becomes: the openers of the agenttrace scopes.

Each opener is an ``Opener`` as :mod:`agenttrace.tracing.wrapping` knows them (``open`` and
``close``), made from the SDK span's data when the span starts:

- an agent (``AgentSpanData``) is an agent run, ``invoke_agent {name}``: its agent is the
  agent of that name (the Agents SDK's agents are named, and the name is what survives a
  resume); started inside an op (a handoff, an agent called as a tool) it is that op's
  sub-agent;
- a function tool (``FunctionSpanData``) is a tool call, ``execute_tool {name}``, with the
  arguments of the model's tool call it answers and its effect class from
  ``init(tool_effects=...)`` by the tool's name (else ``effect``);
- a handoff (``HandoffSpanData``) is the tool call the model made to hand off
  (``transfer_to_{agent}``), effect ``pure``: it changes nothing outside the run, and the agent
  it hands to runs under it;
- a guardrail (``GuardrailSpanData``) is an op ``execute_tool {name}`` of category
  ``guardrail``, effect ``pure``, its result ``{"triggered": ...}``.

Nothing here imports the Agents SDK: the span data is read by its attributes.
"""

from __future__ import annotations

import json
from typing import Any

from agenttrace.tracing.decorators import _AgentSpec, _ToolSpec
from agenttrace.tracing.journal.effects import framework_effect
from agenttrace.tracing.scopes import OpScope, SessionScope, TurnScope, current_scope

__all__ = [
    "GUARDRAIL",
    "HANDOFF_PREFIX",
    "WHERE",
    "agent_opener",
    "guardrail_opener",
    "guardrail_result",
    "handoff_opener",
    "tool_opener",
]

WHERE = "OpenAI Agents SDK instrumentation"
"""How an internal error of this instrumentation is reported."""

GUARDRAIL = "guardrail"
"""The category of a guardrail's op (``agenttrace.tool.category``)."""

HANDOFF_PREFIX = "transfer_to_"
"""How the Agents SDK names a handoff's tool by default (``Handoff.default_tool_name``)."""


def agent_opener(data: Any) -> _AgentSpec:
    """The opener of an agent's run (``AgentSpanData``)."""
    return _AgentSpec(str(getattr(data, "name", None) or "agent"), None, None, None)


def tool_opener(data: Any) -> _ToolSpec:
    """The opener of a function tool's call (``FunctionSpanData``): the SDK fills the span's
    input only after the span starts, so the arguments are those of the model's tool call the
    op will claim (the oldest of that name in the turn)."""
    name = str(getattr(data, "name", None) or "tool")
    call = _pending_call(lambda called: called == name)
    return _ToolSpec(name, _arguments(call), effect=framework_effect(name))


def handoff_opener(data: Any) -> _ToolSpec:
    """The opener of a handoff: the model's tool call that asked for it (the oldest pending
    ``transfer_to_...``, else the oldest pending call: a handoff's tool name may be set)."""
    call = _pending_call(lambda called: called.startswith(HANDOFF_PREFIX)) or _pending_call(
        lambda called: True
    )
    if call is not None:
        name = call[1]
    else:
        target = getattr(data, "to_agent", None)
        name = f"{HANDOFF_PREFIX}{target or 'agent'}"
    return _ToolSpec(name, _arguments(call), effect="pure")


def guardrail_opener(data: Any) -> _ToolSpec:
    """The opener of a guardrail's check."""
    name = str(getattr(data, "name", None) or GUARDRAIL)
    return _ToolSpec(name, {}, category=GUARDRAIL, effect="pure")


def guardrail_result(data: Any) -> dict[str, Any]:
    """What a guardrail came to, as its op's result."""
    return {"triggered": bool(getattr(data, "triggered", False))}


def _pending_call(matches: Any) -> tuple[str, str, str, str | None] | None:
    """The oldest tool call of the current turn that no op has claimed and ``matches`` by name."""
    scope = current_scope()
    turn: TurnScope | None
    if isinstance(scope, SessionScope):
        turn = scope.auto_turn
    elif isinstance(scope, TurnScope):
        turn = scope
    elif isinstance(scope, OpScope):
        turn = scope.turn
    else:
        turn = None
    if turn is None:
        return None
    for call in turn.unclaimed_tool_calls():
        if matches(call[1]):
            return call
    return None


def _arguments(call: tuple[str, str, str, str | None] | None) -> dict[str, Any]:
    """A tool call's arguments (JSON text) as a mapping; ``{}`` when there are none."""
    if call is None or not call[2]:
        return {}
    try:
        parsed = json.loads(call[2])
    except ValueError:
        return {"input": call[2]}
    return parsed if isinstance(parsed, dict) else {"input": parsed}
