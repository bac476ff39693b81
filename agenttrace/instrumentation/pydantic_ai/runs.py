"""A pydantic-ai agent run as an agenttrace agent run, open for as long as ``Agent.iter`` is.

pydantic-ai runs every agent the same way: ``run`` and ``run_stream`` enter ``Agent.iter`` (an
async context manager) and drive its graph inside it, ``run_sync`` runs ``run`` on an event loop,
and a program may enter ``iter`` itself and drive the graph node by node in its own ``async
with`` body. So ``iter`` is the one place a run begins and ends: its context manager is replaced
by :class:`TracedRun`, which opens the agent run before pydantic-ai's own ``__aenter__`` (so
pydantic-ai's own spans, when its instrumentation is on, are inside ours) and ends it after
pydantic-ai's ``__aexit__``, in the caller. The run is the current scope for the whole ``async
with`` body, because the model requests and tool calls of an ``iter`` run, and the streamed reply
of a ``run_stream`` run, happen there (in the caller's task: entering and leaving an ``async
with`` are awaited in one context, as OpenTelemetry's own ``start_as_current_span`` relies on).

An agent run that starts inside a tool call (agent delegation: a tool that awaits another agent's
``run``) is a sub-agent of that tool call, placed by
:func:`agenttrace.tracing.scopes.start_session`.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.runtime import runtime
from agenttrace.instrumentation.smolagents.agents import agent_id
from agenttrace.tracing.agents import str_attribute
from agenttrace.tracing.decorators import _AgentSpec
from agenttrace.tracing.scopes import SessionScope, Tokens, deactivate

__all__ = ["WHERE", "TracedRun", "agent_model", "agent_name", "iter_wrapper", "state"]

WHERE = "pydantic-ai instrumentation"


class _State:
    __slots__ = ("enabled",)

    def __init__(self) -> None:
        self.enabled = False
        """Whether the wrappers trace (off once uninstrumented: a wrapper another
        instrumentation wrapped over stays in place, passing through)."""


state = _State()


def agent_name(agent: Any) -> str:
    """The agent's ``name`` (pydantic-ai infers it from the variable that holds the agent when
    ``run`` is called), else its class (``Agent``)."""
    return str_attribute(agent, "name") or type(agent).__name__


def model_name(model: Any) -> str | None:
    """A pydantic-ai model's name: a ``Model``'s ``model_name`` (``gpt-4o``), or the string a
    program gave (``openai:gpt-4o``)."""
    if isinstance(model, str):
        return model or None
    return str_attribute(model, "model_name")


def agent_model(agent: Any) -> str | None:
    """The model the agent's runs ask by default, if it has one."""
    return model_name(getattr(agent, "model", None))


_SPEC = _AgentSpec(
    agent_name,
    agent_id,
    agent_model,
    None,
    method=True,
    api="agenttrace.instrumentation.pydantic_ai",
)
"""The agent run of an ``Agent.iter`` call (``self`` first). An agent's id is the one it got at
its first run; in a session resumed from a file, an agent built again takes the id of the agent
of the same name that session recorded (smolagents' rule, by duck typing: pydantic-ai agents
have no identity that outlives the process either)."""


class TracedRun:
    """``Agent.iter(...)``'s async context manager, the agent run open around it."""

    __slots__ = ("_inner", "_opened", "_scope", "_tokens")

    def __init__(self, inner: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._inner = inner
        self._opened = (args, kwargs)
        self._scope: SessionScope | None = None
        self._tokens: Tokens | None = None

    async def __aenter__(self) -> Any:
        self._start()
        try:
            return await self._inner.__aenter__()
        except BaseException as exc:
            self._end(exc)
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        try:
            suppressed = await self._inner.__aexit__(exc_type, exc, tb)
        except BaseException as raised:
            self._end(raised)
            raise
        self._end(None if suppressed else exc)
        return suppressed  # type: ignore[no-any-return]

    def _start(self) -> None:
        args, kwargs = self._opened
        self._opened = ((), {})  # the run's arguments are not kept past its start
        if runtime.disabled:
            return
        try:
            self._scope = scope = _SPEC.open(args, kwargs)
            if scope is not None:
                self._tokens = scope.activate()
        except Exception as exc:
            report_internal_error(WHERE, exc)

    def _end(self, error: BaseException | None) -> None:
        scope, tokens = self._scope, self._tokens
        self._scope = self._tokens = None
        if scope is None:
            return
        try:
            if tokens is not None:
                deactivate(tokens)
        except Exception as exc:  # left in another context than it was entered in
            report_internal_error(WHERE, exc)
        try:
            _SPEC.close(scope, error, None)
        except Exception as exc:
            report_internal_error(WHERE, exc)

    def __getattr__(self, name: str) -> Any:
        # Anything else the program reads of the context manager is pydantic-ai's.
        return getattr(self._inner, name)


def iter_wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """wrapt's wrapper of ``Agent.iter``: its context manager, traced (:class:`TracedRun`)."""
    inner = wrapped(*args, **kwargs)
    if runtime.disabled or not state.enabled or instance is None:
        return inner
    return TracedRun(inner, (instance, *args), kwargs)
