"""A smolagents tool call in the step journal: its output kept as the tool's own value, and
given back on a replay as smolagents hands it to the agent (docs/how-to/smolagents.md,
"Replay").

An agent calls a tool with ``sanitize_inputs_outputs=True``, and smolagents wraps what the tool
returned in one of its agent types: text becomes an ``AgentText`` (a ``str`` subclass), which is
also how a ``ToolCallingAgent``'s ``final_answer`` ends its run. The journal keeps plain JSON
data only, so an ``AgentText`` kept as it is could not be given back (a replay would have to run
the call live). Here the call's text is journaled as the value the tool returned (the
``AgentText``'s raw value), and a call the journal answers is wrapped again the way smolagents
wrapped it live (``handle_agent_output_types`` with the tool's ``output_type``): the agent gets
an ``AgentText`` equal to the recorded one, and its run ends the same way.

An ``AgentImage`` or ``AgentAudio`` (a PIL image, a tensor) is not JSON data: its call is kept
as not replayable, so a strict replay reports it by name instead of giving back something else.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from agenttrace._internal.errors import report_internal_error
from agenttrace.instrumentation.smolagents.agents import tool_arguments, tool_effect
from agenttrace.tracing.decorators import _ToolSpec
from agenttrace.tracing.scopes import OpScope

__all__ = ["ToolCall", "agent_output", "raw_output"]

WHERE = "smolagents instrumentation"


class ToolCall(_ToolSpec):
    """The op of one ``Tool.__call__``: ``execute_tool {tool.name}``, journaled by its raw
    output."""

    where = WHERE

    def __init__(self) -> None:
        super().__init__(
            None,
            tool_arguments,
            method=True,
            named_by_instance=True,
            effect=tool_effect,
            api="agenttrace.instrument_tool",
        )

    def body(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        guarded = super().body(fn)

        @functools.wraps(fn)
        def call(tool: Any, *args: Any, **kwargs: Any) -> Any:
            output = guarded(tool, *args, **kwargs)
            if kwargs.get("sanitize_inputs_outputs"):
                return agent_output(output, tool)
            return output

        return call

    def close(self, scope: OpScope, error: BaseException | None, result: Any) -> None:
        # The caller gets the tool's output unchanged; the journal keeps its raw value.
        super().close(scope, error, raw_output(result))


def raw_output(value: Any) -> Any:
    """``value`` as the tool returned it when it is an ``AgentText`` (its raw value, which
    smolagents wraps again alike); any other value as it is."""
    agent_text = _agent_text()
    try:
        # AgentText(AgentText(...)): smolagents wraps a final answer that is already one.
        while agent_text is not None and isinstance(value, agent_text):
            raw: Any = value
            value = raw.to_raw()
    except Exception as exc:  # a subclass whose to_raw fails: kept as it is (not replayable)
        report_internal_error(WHERE, exc)
    return value


def agent_output(output: Any, tool: Any) -> Any:
    """What smolagents hands the agent for ``output``, a tool's output called with
    ``sanitize_inputs_outputs=True``: an output the body returned is already that; one the
    journal gave back (a raw value) is wrapped as the live call's was, by the tool's
    ``output_type``."""
    try:
        from smolagents.agent_types import AgentType, handle_agent_output_types
    except ImportError:
        return output
    if isinstance(output, AgentType):
        return output
    try:
        return handle_agent_output_types(output, getattr(tool, "output_type", None))
    except Exception as exc:  # never breaks the agent: it gets the recorded value
        report_internal_error(WHERE, exc)
        return output


def _agent_text() -> Any:
    """smolagents' ``AgentText`` class (``None`` without smolagents)."""
    try:
        from smolagents.agent_types import AgentText
    except ImportError:
        return None
    return AgentText
