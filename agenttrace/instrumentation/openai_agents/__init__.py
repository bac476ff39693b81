"""The OpenAI Agents SDK (``openai-agents``, imported as ``agents``), traced through its
tracing-processor interface (:mod:`.processor`, :mod:`.ops`), its function tools' bodies
guarded for re-entry (:mod:`.tools`).

What a program that runs Agents SDK agents gets, with no change to its code:

- each ``Runner.run``, ``run_sync`` or ``run_streamed`` is an agent run, ``invoke_agent
  {name}`` of its starting agent (one trace per run); each agent is an agenttrace agent, by name;
- each model call is the OpenAI SDK instrumentation's one ``chat {model}`` span (Chat
  Completions or Responses), in the agent's turn, with tokens, cost and the transcript; the
  SDK's own generation and response spans make no second one;
- each function tool call is ``execute_tool {name}``, linked to the model's tool call, its effect
  class from ``init(tool_effects={name: ...})`` (else ``effect``); in a re-entered run a call
  the journal answers does not run its function (:mod:`.tools`);
- a handoff is the tool call that made it (``execute_tool transfer_to_...``), hosting the next
  agent's run as a sub-agent, under the agent that handed off;
- a guardrail is an op ``execute_tool {name}`` (category ``guardrail``) whose result says
  whether it tripped.

The Agents SDK calls its processors only while its tracing is on: with
``set_tracing_disabled(True)``, ``OPENAI_AGENTS_DISABLE_TRACING=1`` or
``RunConfig(tracing_disabled=True)`` only the model calls are traced. To keep agenttrace and
send nothing to OpenAI's trace backend: ``set_trace_processors([tracing_processor()])``
(docs/how-to/openai-agents.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agenttrace.instrumentation.base import LibraryInstrumentor
from agenttrace.instrumentation.on_import import instrument_on_import
from agenttrace.instrumentation.openai_agents.ops import WHERE

__all__ = ["OpenAIAgentsInstrumentor", "instrument_when_imported", "tracing_processor"]


class _State:
    __slots__ = ("processor",)

    def __init__(self) -> None:
        self.processor: Any = None
        """agenttrace's processor, once added to the SDK (it stays: the SDK removes none)."""


_state = _State()


class OpenAIAgentsInstrumentor(LibraryInstrumentor):
    """OpenTelemetry's instrumentor for the OpenAI Agents SDK (see the module docstring).

    ``instrument()`` adds agenttrace's tracing processor to the SDK (``add_trace_processor``,
    next to the SDK's own exporter) and, if agenttrace is not set up yet (zero-code), sets it up
    first. ``uninstrument()`` makes the processor inert: the SDK has no way to remove one, and
    ``set_trace_processors`` would drop the program's own. The model calls are the OpenAI SDK
    instrumentation's, which ``agenttrace.init()`` turns on.
    """

    instruments = ("openai-agents >= 0.20",)

    def patch(self, **options: Any) -> None:
        """Add the processor to the SDK (imports it), or make it active again."""
        if _state.processor is None:
            try:
                from agents.tracing import add_trace_processor
            except ImportError:
                # Another package named ``agents`` (the import hook is by module name): not
                # the Agents SDK, nothing to trace.
                return

            from agenttrace.instrumentation.openai_agents.processor import (
                AgentTraceTracingProcessor,
            )

            processor = AgentTraceTracingProcessor()
            add_trace_processor(processor)
            _state.processor = processor
        from agenttrace.instrumentation.openai_agents import tools

        tools.patch()
        _state.processor.enabled = True

    def unpatch(self) -> None:
        """Make the processor inert."""
        if _state.processor is not None:
            _state.processor.enabled = False
            from agenttrace.instrumentation.openai_agents import tools

            tools.state.enabled = False

    def patched(self) -> bool:
        """Whether the processor is active."""
        return _state.processor is not None and bool(_state.processor.enabled)


def instrument_when_imported() -> Callable[[], None]:
    """Instrument the Agents SDK now if it is imported, else as soon as it is; returns the undo."""
    return instrument_on_import(OpenAIAgentsInstrumentor(), "agents", WHERE)


def tracing_processor() -> Any:
    """agenttrace's processor in the Agents SDK (``None`` before it is instrumented): what to
    keep in ``agents.set_trace_processors([...])`` when dropping the SDK's exporter to OpenAI."""
    return _state.processor
