"""Who a smolagents agent or tool is: names, models, arguments, agent ids across a resume, and
a managed agent's call.

Everything here reads smolagents objects by duck typing (``name``, ``model.model_id``,
``inputs``), so it imports nothing from smolagents and works on subclasses a program defines.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any

from agenttrace.model.events import AGENT_CREATED
from agenttrace.session.state import Session
from agenttrace.tracing.agents import session_for_new_agent, str_attribute
from agenttrace.tracing.decorators import _ToolSpec
from agenttrace.tracing.journal.effects import framework_effect
from agenttrace.tracing.scopes import OpScope, current_scope

__all__ = [
    "ManagedCall",
    "agent_id",
    "agent_model",
    "agent_name",
    "call_arguments",
    "tool_arguments",
    "tool_effect",
]


def agent_name(agent: Any) -> str:
    """The agent's ``name`` (a managed agent's is required), else its class (``CodeAgent``)."""
    return str_attribute(agent, "name") or type(agent).__name__


def agent_model(agent: Any) -> str | None:
    """The model id the agent's model object calls (``openai/gpt-4o-mini``), if it says."""
    return str_attribute(getattr(agent, "model", None), "model_id")


def tool_arguments(tool: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """A ``Tool.__call__``'s arguments by the tool's input names, as the model gave them
    (smolagents' own ``sanitize_inputs_outputs`` switch left out)."""
    kwargs.pop("sanitize_inputs_outputs", None)
    inputs = getattr(tool, "inputs", None)
    names = list(inputs) if isinstance(inputs, dict) else []
    if len(args) == 1 and not kwargs and isinstance(args[0], dict) and set(args[0]) <= set(names):
        return dict(args[0])  # smolagents also takes the arguments as one dict
    arguments = dict(zip(names, args, strict=False))
    if len(args) > len(names):
        arguments["args"] = list(args[len(names) :])
    arguments.update(kwargs)
    return arguments


def tool_effect(tool: Any, name: str) -> str:
    """The effect class of a call of ``tool`` (a ``Tool``, a managed agent, a code executor):
    ``init(tool_effects=...)`` by its name, else its ``agenttrace_effect`` attribute, else
    ``effect`` (``agenttrace.tracing.journal.effects``)."""
    return framework_effect(name, tool)


def call_arguments(agent: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """A managed agent's call (``researcher(task=..., additional_args=...)``) as arguments."""
    arguments = dict(zip(("task",), args, strict=False))
    arguments.update(kwargs)
    return arguments


class ManagedCall(_ToolSpec):
    """A managed agent called by its manager (``MultiStepAgent.__call__``): the tool call
    ``execute_tool {name}`` that hosts its run. Called outside any agent run (a program calling
    ``agent(task)`` itself), it is no tool call: only the run it makes is traced.

    smolagents' ids say what passes through the call (``agenttrace.tracing.relays``): the
    managed agent's task message stands for the ``task`` argument (a ``piece_of_text`` of the
    manager's call), and the call's result, smolagents' report of the managed agent's final
    answer, for that answer: the ``final_answer`` tool's entry its last reply called, else (a
    code agent's code called it) that reply; whatever their text."""

    def __init__(self) -> None:
        super().__init__(agent_name, call_arguments, method=True, effect=tool_effect)

    def open(  # type: ignore[override]  # None: not traced of its own, as wrap() allows
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> OpScope | None:
        if current_scope() is None:
            return None
        scope = super().open(args, kwargs)
        task = call_arguments(*args, **kwargs).get("task")
        if isinstance(task, str) and task:
            scope.delivers = task
        return scope

    def close(self, scope: OpScope, error: BaseException | None, result: Any) -> None:
        if error is None and scope.hosted_reply is not None:
            # What smolagents reports is the managed agent's final answer.
            session = scope.session.run.session
            scope.answer = final_answer(session, scope.hosted_reply) or scope.hosted_reply
        super().close(scope, error, result)


FINAL_ANSWER = "final_answer"
"""The tool a smolagents agent ends its run with; its argument is the run's answer."""

_SCAN = 10_000
"""How far back the session's events are searched for the managed agent's last reply (it is
among the last events: only those of agents running at the same time come after it)."""


def final_answer(session: Session, reply: str) -> str | None:
    """The message id of the ``final_answer`` tool's entry that answers a call of ``reply`` (a
    ``ToolCallingAgent``'s last reply): the final answer in its own words, as the managed agent's
    transcript holds it; ``None`` if there is none (a ``CodeAgent`` calls it from its code)."""
    events = session.events
    start = len(events) - 1
    for index in range(start, max(-1, start - _SCAN), -1):
        if events[index].get("message_id") == reply:
            break
    else:
        return None
    said = events[index]
    calls = {
        call.get("id")
        for call in said.get("tool_calls") or ()
        if isinstance(call, dict) and (call.get("function") or {}).get("name") == FINAL_ANSWER
    }
    for later in events[index + 1 :]:
        if (
            later.get("agent_id") == said.get("agent_id")
            and later.get("role") == "tool"
            and later.get("tool_call_id") in calls
        ):
            message = later.get("message_id")
            return message if isinstance(message, str) else None
    return None


# --- agent ids across a resume ----------------------------------------------------------------


class _Resumed:
    """The agents a resumed session brought, by name, and which live agent took each id."""

    __slots__ = ("by_name", "holders")

    def __init__(self, session: Session) -> None:
        self.by_name: dict[str, list[str]] = {}
        for event in session.events[: session.restored_count]:
            name, agent = event.get("name"), event.get("agent_id")
            if (
                event.get("event_type") == AGENT_CREATED
                and isinstance(name, str)
                and isinstance(agent, str)
                and agent not in self.by_name.get(name, ())
            ):
                self.by_name.setdefault(name, []).append(agent)
        self.holders: dict[str, weakref.ref[Any]] = {}

    def take(self, agent: Any, name: str) -> str | None:
        """The first id of an agent of this name that no living agent holds yet."""
        for candidate in self.by_name.get(name, ()):
            holder = self.holders.get(candidate)
            if holder is None or holder() is None:
                self.holders[candidate] = weakref.ref(agent)
                return candidate
        return None


_lock = threading.Lock()
_resumed: weakref.WeakKeyDictionary[Session, _Resumed] = weakref.WeakKeyDictionary()


def agent_id(agent: Any) -> str | None:
    """The agent's id: its own (``agent_id``, set when it first ran), else, in a session resumed
    from a file, the id of the agent of the same name that session recorded, so that the agents
    a program builds again after ``resume`` go on as the same agents (by name: smolagents
    agents have no other identity that survives the process). ``None``: a new agent."""
    own = str_attribute(agent, "agent_id")
    if own is not None:
        return own
    session = session_for_new_agent()
    if not session.restored_count:
        return None
    with _lock:
        resumed = _resumed.get(session)
        if resumed is None:
            resumed = _resumed[session] = _Resumed(session)
        found = resumed.take(agent, agent_name(agent))
    if found is not None:
        with contextlib.suppress(AttributeError):  # an object that takes no new attribute
            agent.agent_id = found  # its next run is the same agent at once
    return found
