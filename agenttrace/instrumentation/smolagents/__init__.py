"""smolagents, traced: each agent run a session, each step a turn, each tool call an op.

What a program that runs smolagents agents gets, with no change to its code:

- each ``agent.run(task)`` (``stream=True`` too: the run stays open until its generator is
  exhausted, closed or dropped) is an agent run, ``invoke_agent {name}``, named after the agent
  (its ``name``, else its class); its return value is exactly what smolagents returned;
- each step is a turn (:mod:`.steps`), with the step's LLM call (through ``LiteLLMModel``, the
  litellm patch's ``chat {model}`` span; a failed request and its re-request, by smolagents'
  own retry or the OpenAI SDK's, are attempts 1 and 2 in that turn) and what the step did;
- each tool call is ``execute_tool {tool.name}``, with its arguments and result, linked to the
  model's tool call (``gen_ai.tool.call.id``); ``final_answer`` is one too, and its result is the
  run's answer;
- a ``CodeAgent``'s code is ``execute_tool python_interpreter``; the tools and managed agents
  it calls are ops of the step, their spans under it (smolagents runs the code in a thread pool:
  agenttrace's thread propagation, on by default, carries the run into it);
- a managed agent called by its manager is ``execute_tool {name}`` hosting the managed agent's
  own run, a sub-agent session; its ``agent_created`` names the manager's message that asked for
  it (the tool call, or the code) as its cause, so ``load_session`` finds it under its manager.

The targets and the undo are in :mod:`.patch`; names and ids in :mod:`.agents`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agenttrace.instrumentation.base import LibraryInstrumentor
from agenttrace.instrumentation.on_import import instrument_on_import
from agenttrace.instrumentation.smolagents.patch import is_patched, patch, unpatch
from agenttrace.instrumentation.smolagents.steps import WHERE

__all__ = ["SmolagentsInstrumentor", "instrument_when_imported"]


class SmolagentsInstrumentor(LibraryInstrumentor):
    """OpenTelemetry's instrumentor for smolagents (see the module docstring for what it traces).

    ``instrument(tracer_provider=..., meter_provider=...)`` patches smolagents and, if agenttrace
    is not set up yet (zero-code: ``opentelemetry-instrument`` loads this class from its
    ``opentelemetry_instrumentor`` entry point), sets it up on those providers first. A second
    ``instrument()`` warns and changes nothing; ``uninstrument()`` puts smolagents back exactly
    as it was. litellm, which ``LiteLLMModel`` calls, has its own instrumentor, which
    ``agenttrace.init()`` turns on.
    """

    instruments = ("smolagents >= 1.25",)

    def patch(self, **options: Any) -> None:
        """Patch smolagents (:mod:`.patch`)."""
        patch()

    def unpatch(self) -> None:
        """Put smolagents back as it was."""
        unpatch()

    def patched(self) -> bool:
        """Whether smolagents is patched."""
        return is_patched()


def instrument_when_imported() -> Callable[[], None]:
    """Instrument smolagents now if it is imported, else as soon as it is; returns the undo."""
    return instrument_on_import(SmolagentsInstrumentor(), "smolagents", WHERE)
