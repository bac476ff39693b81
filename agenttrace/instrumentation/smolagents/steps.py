"""smolagents steps as turns, and a code agent's code as the op that runs it.

**A step is a turn.** smolagents calls its model once at the start of each step (planning steps
included); that LLM call, through the litellm patch, opens the agent run's next turn (an
automatic turn), and the tool calls, code and sub-agents after it belong to that turn. The turn
ends when smolagents reports the step finished (``CallbackRegistry.callback``, which runs every
step's callbacks), not when the next step's LLM call comes: what a step does after its last op
(its callbacks, memory) is still in it. A step whose model agenttrace does not see still gets its
turn from its first op.

**Code is an op.** A ``CodeAgent`` step runs the code its model wrote in its executor
(``python_executor(code)``): that call is the op ``execute_tool python_interpreter`` (the name
smolagents gives it in the step's ``ToolCall``), with the code as its argument and the
executor's output as its result. The tools and managed agents the code calls are ops of the same
turn, their spans under the code's, and the code's op stands for the step's assistant message,
so a sub-agent the code starts is caused by that message (``agent_created.cause``), as one
started by a tool call is caused by the message holding the call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from agenttrace._internal.errors import report_internal_error
from agenttrace.session.state import Session
from agenttrace.tracing.agents import str_attribute
from agenttrace.tracing.decorators import _ToolSpec
from agenttrace.tracing.journal.effects import framework_effect
from agenttrace.tracing.scopes import OpScope, SessionScope, close_auto_turn, current_scope

__all__ = ["CODE_TOOL", "CodeStep", "state", "step_ended"]

CODE_TOOL = "python_interpreter"
"""The tool name smolagents gives the code of a ``CodeAgent`` step."""

WHERE = "smolagents instrumentation"


class _State:
    __slots__ = ("enabled",)

    def __init__(self) -> None:
        self.enabled = False
        """Whether :func:`step_ended` ends turns (off once uninstrumented: if another
        instrumentation wrapped the callback registry over ours, ours stays, passing through)."""


state = _State()


def _code_arguments(executor: Any, code: Any = None, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"code": kwargs.get("code_action", code)}


class CodeStep(_ToolSpec):
    """The op of one ``python_executor(code)`` call: ``execute_tool python_interpreter``."""

    where = WHERE

    def __init__(self) -> None:
        super().__init__(CODE_TOOL, _code_arguments, method=True, effect=_code_effect)

    def open(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> OpScope:
        scope = super().open(args, kwargs)
        if scope.call_message is None:
            scope.call_message = _reply_in_turn(scope)
        return scope

    def body(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        # The journal keeps the CodeOutput's fields (close, below), so the guard is given a
        # function without the executor's ``-> CodeOutput``: its result is answered when those
        # fields are plain JSON data, as that dict, which is made a CodeOutput again here. Code
        # whose output is anything else (an object it built) is not replayable: it runs again.
        guarded = super().body(lambda *args, **kwargs: fn(*args, **kwargs))

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            output = guarded(*args, **kwargs)
            return _from_journal(output) if type(output) is dict else output

        return run

    def close(self, scope: OpScope, error: BaseException | None, result: Any) -> None:
        # The caller gets the executor's CodeOutput unchanged; its fields are what is recorded.
        super().close(scope, error, _code_output(result))


def _code_effect(executor: Any, name: str) -> str:
    """What running a model's code does: what ``init(tool_effects={"python_interpreter": ...})``
    says, else ``effect`` (the tools it calls are journaled too, each by its own class)."""
    return framework_effect(name, executor)


def _code_output(result: Any) -> Any:
    if all(hasattr(result, field) for field in ("output", "logs", "is_final_answer")):
        return {
            "output": result.output,
            "logs": result.logs,
            "is_final_answer": result.is_final_answer,
        }
    return result


def _from_journal(fields: dict[str, Any]) -> Any:
    """A code step's output the journal gave back (its fields) as the executor's
    ``CodeOutput``."""
    from smolagents.local_python_executor import CodeOutput

    return CodeOutput(
        output=fields.get("output"),
        logs=fields.get("logs", ""),
        is_final_answer=bool(fields.get("is_final_answer")),
    )


def _reply_in_turn(scope: OpScope) -> str | None:
    """The message id of the assistant entry the op's turn logged last (the model's reply that
    holds the code), if the agent's transcript ends with it."""
    session: Session = scope.session.run.session
    record = session.agents.get(scope.session.agent_id)
    if record is None or not record.transcript:
        return None
    last = record.transcript[-1]
    path = last.get("path")
    if last.get("role") != "assistant" or not isinstance(path, str):
        return None
    if not path.startswith(f"{scope.turn.label}."):
        return None
    message = last.get("message_id")
    return message if isinstance(message, str) else None


def step_ended(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """For ``CallbackRegistry.callback(memory_step, agent=...)``: after the step's callbacks ran,
    end the turn of the agent run that step belongs to."""
    if not state.enabled:
        return wrapped(*args, **kwargs)
    try:
        return wrapped(*args, **kwargs)
    finally:
        try:
            _end_turn(kwargs.get("agent"))
        except Exception as exc:
            report_internal_error(WHERE, exc)


def _end_turn(agent: Any) -> None:
    scope = current_scope()
    # Only the agent's own run: the registry also runs for steps we do not see as a run of
    # ours (an agent driven step by step, or from a thread that carries no context).
    if isinstance(scope, SessionScope) and scope.agent_id == str_attribute(agent, "agent_id"):
        close_auto_turn(scope)
