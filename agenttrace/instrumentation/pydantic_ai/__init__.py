"""pydantic-ai, traced: each agent run an agenttrace agent run, each function tool call an op,
an agent run from inside a tool a sub-agent of that tool call.

What a program that runs pydantic-ai agents gets, with no change to its code:

- each run (``agent.run``, ``run_sync``, ``run_stream``, ``iter`` and the entry points built on
  them) is an agent run, ``invoke_agent {name}``, named after the agent (its ``name``, which
  pydantic-ai infers from the variable that holds it, else ``Agent``); one trace per top-level
  run; what pydantic-ai returns and raises comes back unchanged;
- each model request is the OpenAI or Anthropic SDK's call (``OpenAIChatModel``,
  ``OpenAIResponsesModel``, ``AnthropicModel``), one ``chat {model}`` span by those SDKs'
  instrumentations, with tokens, cost and the transcript; the request opens the run's next turn;
- each call of a function tool (``@agent.tool``, ``@agent.tool_plain``, ``tools=[...]``) is
  ``execute_tool {name}`` with its arguments and result, linked to the model's tool call;
- an agent run started inside a tool call (delegation: the tool awaits another agent's ``run``)
  is a sub-agent hosted by that tool call, at any depth.

The targets and the undo are in :mod:`.patch`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from agenttrace.instrumentation.base import LibraryInstrumentor
from agenttrace.instrumentation.on_import import instrument_on_import
from agenttrace.instrumentation.pydantic_ai.patch import is_patched, patch, unpatch
from agenttrace.instrumentation.pydantic_ai.runs import WHERE

__all__ = ["PydanticAIInstrumentor", "instrument_when_imported"]


class PydanticAIInstrumentor(LibraryInstrumentor):
    """OpenTelemetry's instrumentor for pydantic-ai (see the module docstring for what it
    traces).

    ``instrument(tracer_provider=..., meter_provider=...)`` patches pydantic-ai and, if
    agenttrace is not set up yet (zero-code: ``opentelemetry-instrument`` loads this class from
    its ``opentelemetry_instrumentor`` entry point), sets it up on those providers first, with
    the OpenAI and Anthropic SDKs, which pydantic-ai's models call, traced too. A second
    ``instrument()`` warns and changes nothing; ``uninstrument()`` puts pydantic-ai back exactly
    as it was.
    """

    instruments = ("pydantic-ai-slim >= 2.60",)
    init_options: ClassVar[dict[str, Any] | None] = {"instrument_pydantic_ai": False}
    """Set up with the LLM SDKs on (pydantic-ai's models call them), this one left to
    ``instrument()`` itself."""

    def patch(self, **options: Any) -> None:
        """Patch pydantic-ai (:mod:`.patch`)."""
        patch()

    def unpatch(self) -> None:
        """Put pydantic-ai back as it was."""
        unpatch()

    def patched(self) -> bool:
        """Whether pydantic-ai is patched."""
        return is_patched()


def instrument_when_imported() -> Callable[[], None]:
    """Instrument pydantic-ai now if it is imported, else as soon as it is; returns the undo."""
    return instrument_on_import(PydanticAIInstrumentor(), "pydantic_ai", WHERE)
