"""A pydantic-ai function tool's call as an agenttrace tool call.

The functions a program registers with ``@agent.tool``, ``@agent.tool_plain``, ``tools=[...]``
or a ``FunctionToolset`` all run through ``FunctionToolset.call_tool(name, tool_args, ctx,
tool)``, after pydantic-ai has validated the model's arguments: each call is the op
``execute_tool {name}``, with those arguments, the function's return value as its result, and
the model's tool call it answers (``gen_ai.tool.call.id``) found in the turn by name, as for
every tool. pydantic-ai's own output tool (``final_result``) is not a function tool: it is no op.

A tool's effect class (docs/journal.md) is ``init(tool_effects={name: ...})``'s, else the
function's ``agenttrace_effect`` attribute, else ``effect``: its intent is journaled before it
runs, and a re-entered run answers it from the journal.
"""

from __future__ import annotations

from typing import Any

from agenttrace._internal.errors import report_internal_error
from agenttrace.instrumentation.pydantic_ai.runs import WHERE, state
from agenttrace.tracing.decorators import _ToolSpec
from agenttrace.tracing.journal.effects import framework_effect
from agenttrace.tracing.scopes import OpScope, current_scope
from agenttrace.tracing.wrapping import wrap

__all__ = ["call_tool_wrapper"]


def _call(
    name: str, tool_args: dict[str, Any], ctx: Any, *args: Any, **kwargs: Any
) -> tuple[str, str, dict[str, Any]]:
    """(the tool's name in its toolset, its name as the model called it (a prefixed or renamed
    toolset's), its validated arguments)."""
    called = getattr(ctx, "tool_name", None)
    return name, called if isinstance(called, str) and called else name, tool_args


class _ToolCall(_ToolSpec):
    """The op of one function tool call (a spec per call: its name and arguments are the
    call's, not the toolset's)."""

    where = WHERE

    def __init__(self, name: str, arguments: dict[str, Any], function: Any) -> None:
        super().__init__(name, dict(arguments), effect=framework_effect(name, function))

    def open(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> OpScope:
        return super().open((), {})


def _function(toolset: Any, name: str) -> Any:
    """The Python function registered as tool ``name`` (which may carry ``agenttrace_effect``)."""
    tools = getattr(toolset, "tools", None)
    tool = tools.get(name) if isinstance(tools, dict) else None
    return getattr(tool, "function", None)


async def call_tool_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """wrapt's wrapper of ``FunctionToolset.call_tool``: the call, inside its tool op. Outside
    any agent run (a toolset called by hand) it is no op of its own: only what it calls is."""
    if not state.enabled or current_scope() is None:
        return await wrapped(*args, **kwargs)
    try:
        own, name, arguments = _call(*args, **kwargs)
        spec = _ToolCall(name, arguments, _function(instance, own))
        traced = wrap(spec.body(wrapped), spec, like=wrapped)
    except Exception as exc:
        report_internal_error(WHERE, exc)
        return await wrapped(*args, **kwargs)
    return await traced(*args, **kwargs)
