"""What is patched in pydantic-ai, and how it is undone.

Two public methods, with wrapt, on the classes that define them:

- ``Agent.iter``: the agent run (:mod:`.runs`); ``run``, ``run_sync``, ``run_stream`` and the
  other entry points all enter it, so each is one run;
- ``FunctionToolset.call_tool``: a function tool's call (:mod:`.tools`).

Model requests are not patched here: pydantic-ai's ``OpenAIChatModel``, ``OpenAIResponsesModel``
and ``AnthropicModel`` call the OpenAI and Anthropic SDKs, whose instrumentations make each
request one ``chat {model}`` span in the run's current turn (one span per request, whether or not
pydantic-ai's own instrumentation also makes its spans).
"""

from __future__ import annotations

from typing import Any

import wrapt

from agenttrace.instrumentation.pydantic_ai.runs import iter_wrapper, state
from agenttrace.instrumentation.pydantic_ai.tools import call_tool_wrapper

__all__ = ["is_patched", "patch", "unpatch"]

_patched: list[tuple[type, str, Any]] | None = None
"""(class, method, our wrapper) for each method patched."""


def patch() -> None:
    """Patch pydantic-ai (imports it); a second call changes nothing."""
    global _patched
    if _patched is not None:
        return
    from pydantic_ai.agent import Agent
    from pydantic_ai.toolsets.function import FunctionToolset

    done: list[tuple[type, str, Any]] = []
    for owner, name, wrapper in (
        (Agent, "iter", iter_wrapper),
        (FunctionToolset, "call_tool", call_tool_wrapper),
    ):
        wrapt.wrap_function_wrapper(owner, name, wrapper)
        done.append((owner, name, vars(owner)[name]))
    _patched = done
    state.enabled = True


def unpatch() -> None:
    """Put every patched method back as it was."""
    global _patched
    done, _patched = _patched, None
    state.enabled = False
    for owner, name, ours in done or ():
        # Wrapped again by another instrumentation since: ours stays inside, passing through.
        current: Any = vars(owner).get(name)
        if current is ours:
            setattr(owner, name, ours.__wrapped__)


def is_patched() -> bool:
    """True while pydantic-ai is patched."""
    return _patched is not None
