"""What is patched in smolagents, and how it is undone.

Only public methods, each on the class that defines it, so subclasses a program defines are
traced too (unless they override the method itself):

- ``MultiStepAgent.run``: the agent run, ``invoke_agent {name}`` (open until the generator of a
  ``stream=True`` run ends);
- ``MultiStepAgent.__call__``: a managed agent called by its manager, ``execute_tool {name}``,
  hosting the managed agent's run (called outside any run, only the run is traced);
- ``Tool.__call__`` and ``PipelineTool.__call__``: a tool call, ``execute_tool {tool.name}``
  (journaled by its raw output, wrapped again as smolagents wraps it on a replay: :mod:`.outputs`);
- ``LocalPythonExecutor.__call__`` and ``RemotePythonExecutor.__call__``: a code step's code,
  ``execute_tool python_interpreter``;
- ``CallbackRegistry.callback``: the end of a step, which ends its turn (:mod:`.steps`).

The first four go through :mod:`agenttrace.tracing.instrument` (idempotent, undone exactly);
the last is a wrapt wrapper. Model calls are not patched here: ``LiteLLMModel`` calls litellm,
whose patch makes each attempt a ``chat {model}`` span in the step's turn (one span per request
sent, never a second one for smolagents' own ``generate``).
"""

from __future__ import annotations

import importlib
from typing import Any

import wrapt

from agenttrace.instrumentation.smolagents.agents import (
    ManagedCall,
    agent_id,
    agent_model,
    agent_name,
)
from agenttrace.instrumentation.smolagents.outputs import ToolCall
from agenttrace.instrumentation.smolagents.steps import CodeStep, state, step_ended
from agenttrace.tracing.instrument import (
    instrument_agent,
    instrument_method,
    uninstrument_agent,
    uninstrument_tool,
)

__all__ = ["is_patched", "patch", "unpatch"]

_EXECUTORS = (
    ("smolagents.local_python_executor", "LocalPythonExecutor"),
    ("smolagents.remote_executors", "RemotePythonExecutor"),
)


def _classes(pairs: tuple[tuple[str, str], ...]) -> list[type]:
    """The classes named that this smolagents has (a missing module or class is skipped)."""
    found: list[type] = []
    for module_name, name in pairs:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        cls = getattr(module, name, None)
        if isinstance(cls, type) and "__call__" in vars(cls):
            found.append(cls)
    return found


class _Patched:
    __slots__ = ("agents", "callbacks", "tools")

    def __init__(self) -> None:
        self.agents: list[type] = []
        self.tools: list[type] = []
        self.callbacks: tuple[type, Any] | None = None


_patched: _Patched | None = None


def patch() -> None:
    """Patch smolagents (imports it); a second call changes nothing."""
    global _patched
    if _patched is not None:
        return
    from smolagents.agents import MultiStepAgent
    from smolagents.memory import CallbackRegistry
    from smolagents.tools import PipelineTool, Tool

    done = _Patched()
    _patched = done
    instrument_agent(MultiStepAgent, "run", name=agent_name, agent_id=agent_id, model=agent_model)
    done.agents.append(MultiStepAgent)
    instrument_method(MultiStepAgent, "__call__", lambda fn: ManagedCall())
    done.tools.append(MultiStepAgent)
    for tool in (Tool, PipelineTool):
        instrument_method(tool, "__call__", lambda fn: ToolCall())
        done.tools.append(tool)
    for executor in _classes(_EXECUTORS):
        instrument_method(executor, "__call__", lambda fn: CodeStep())
        done.tools.append(executor)
    wrapt.wrap_function_wrapper(CallbackRegistry, "callback", step_ended)
    done.callbacks = (CallbackRegistry, vars(CallbackRegistry)["callback"])
    state.enabled = True


def unpatch() -> None:
    """Put every patched method back as it was."""
    global _patched
    done, _patched = _patched, None
    if done is None:
        return
    for cls in done.agents:
        uninstrument_agent(cls)
    for cls in done.tools:
        uninstrument_tool(cls)
    state.enabled = False
    if done.callbacks is not None:
        owner, ours = done.callbacks
        original = ours.__wrapped__
        # Wrapped again by another instrumentation since: ours stays inside, passing through.
        if vars(owner).get("callback") is ours:
            setattr(owner, "callback", original)  # noqa: B010 (a class attribute)


def is_patched() -> bool:
    """True while smolagents is patched."""
    return _patched is not None
