"""A function tool's body, guarded for a re-entered run (docs/journal.md, "Re-entry").

The tracing processor sees a function tool's span, not its body: it opens the op and journals
its intent when the SDK's ``function_span`` starts, and its outcome when it ends. What runs the
body is the SDK's ``_invoke_function_tool_with_metadata(function_tool=, context=, arguments=)``
(``agents.run_internal.tool_execution``), which calls the tool's ``on_invoke_tool`` inside that
span, in a task that inherits the op as its current scope. It is wrapped here, with wrapt:

- in a re-entered run, a call the journal decides does not run ``on_invoke_tool``: a done
  call's recorded result is returned as the tool's output (the SDK then runs its output
  guardrails and hooks, and tells the model, as for a call that ran); a call the resume stops at
  or that was abandoned raises agenttrace's error, which the SDK raises as its ``UserError``
  ``from`` it, failing the run;
- every call keeps the tool's own output (before the SDK's output guardrails), which the op
  ends with and the journal records, whether or not the SDK puts it on its span (its
  ``trace_include_sensitive_data``).

The op stays the processor's: nothing here opens one. The wrapper acts only inside an op the
processor opened for a function span (:func:`opened`), so a body run with the SDK's tracing
off, or outside any traced run, just runs.
"""

from __future__ import annotations

import weakref
from typing import Any

import wrapt

from agenttrace._internal.errors import report_internal_error
from agenttrace.instrumentation.openai_agents.ops import WHERE
from agenttrace.tracing.journal.steps import answered, pending_step
from agenttrace.tracing.scopes import OpScope, current_scope

__all__ = ["invoke_wrapper", "opened", "output", "patch"]

_TARGET = ("agents.run_internal.tool_execution", "_invoke_function_tool_with_metadata")
"""Where the run loop runs a function tool's body (module, name), in openai-agents 0.20."""

_NONE: Any = object()

_outputs: weakref.WeakKeyDictionary[OpScope, Any] = weakref.WeakKeyDictionary()
"""Each open function op (the processor's), and the output its body gave, once it did."""


class _State:
    __slots__ = ("enabled", "patched")

    def __init__(self) -> None:
        self.enabled = False
        self.patched = False


state = _State()


def opened(scope: OpScope) -> None:
    """The processor opened ``scope`` for a function span: its body is guarded."""
    _outputs[scope] = _NONE


def output(scope: OpScope, default: Any) -> Any:
    """What ``scope``'s body gave (the recorded result, if the journal answered it), else
    ``default`` (the span's output); ``scope`` is done with."""
    given = _outputs.pop(scope, _NONE)
    return default if given is _NONE else given


def patch() -> None:
    """Wrap the SDK's function-tool invocation (once; the wrapper stays, inert while
    ``state.enabled`` is false). An SDK without it: function tools are traced, not guarded."""
    state.enabled = True
    if state.patched:
        return
    module, name = _TARGET
    try:
        wrapt.wrap_function_wrapper(module, name, invoke_wrapper)
    except (ImportError, AttributeError):
        return
    state.patched = True


async def invoke_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """wrapt's wrapper of ``_invoke_function_tool_with_metadata``: the body, or the journal's
    answer in its stead."""
    scope = current_scope() if state.enabled else None
    if not isinstance(scope, OpScope) or scope not in _outputs:
        return await wrapped(*args, **kwargs)
    try:
        pending = pending_step()
    except Exception as exc:
        report_internal_error(WHERE, exc)
        pending = None
    if pending is not None:
        # The recorded result (journal JSON, as the SDK's output was), or the error that stops
        # or refuses the call: the body does not run.
        _, result = answered(pending)
        _outputs[scope] = result
        return _invocation(result)
    invocation = await wrapped(*args, **kwargs)
    if scope in _outputs:
        _outputs[scope] = getattr(invocation, "output", None)
    return invocation


def _invocation(result: Any) -> Any:
    """``result`` as what the wrapped function returns (the SDK's invocation result)."""
    from agents.tool import _FunctionToolInvocationResult

    return _FunctionToolInvocationResult(result)
