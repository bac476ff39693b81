"""``agent``, ``turn``, ``tool`` and ``llm``: decorators that are context managers too.

Each works bare (``@tool``), called (``@tool(name="search")``, ``@tool("search")``) and as a
context manager (``with tool("search") as call:``), on plain functions, methods, coroutines,
generators and async generators.

On a method of an object that has ``name``, ``agent_id`` and ``language_model`` (or ``model``)
attributes, ``@agent`` takes the agent's identity from them, so agent classes written as in
docs/responsibility.md need no extra arguments; ``name=`` (and ``agent_id=``, ``model=``) given
explicitly win, as a string or as a callable of the instance (``name=lambda self: self.name``).

What the decorated function returns comes back as the very same object; a returned generator or
async generator is a stream whose scope stays open until it ends (see ``wrapping``). Exceptions
named in ``ok_exceptions`` pass through as always but end the span without failure.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from types import TracebackType
from typing import Any, Generic, TypeVar, overload

from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace._internal.checks import (
    check_attribute_value,
    check_callable,
    check_decorated,
    check_mapping,
    check_naming,
    check_text,
    refuse,
    shown,
)
from agenttrace._internal.errors import concerning, report_internal_error, report_misuse
from agenttrace._internal.runtime import runtime
from agenttrace.model.journal import EFFECTS
from agenttrace.model.outcome import OutcomeBuilder
from agenttrace.model.replay import ReplayDivergence
from agenttrace.tracing.agents import owner_agent_id, str_attribute
from agenttrace.tracing.binding import BOUND, PLAIN, Binding, binding_of
from agenttrace.tracing.content import tool_payload
from agenttrace.tracing.journal.llm_steps import begin_call_step, end_llm_step, keep_chunk
from agenttrace.tracing.journal.step_guard import answered, guard
from agenttrace.tracing.journal.steps import (
    begin_tool_step,
    block_step,
    check_effect,
    end_tool_step,
)
from agenttrace.tracing.journal.tool_results import stream_result
from agenttrace.tracing.llm_attributes import (
    classify_error,
    input_content,
    input_summary,
    request_attributes,
    request_messages,
    request_outcome,
    response_attributes,
    split_model,
)
from agenttrace.tracing.scopes import (
    OpScope,
    Scope,
    SessionScope,
    Tokens,
    TurnScope,
    current_scope,
    deactivate,
    finish,
    start_op,
    start_session,
    start_turn,
)
from agenttrace.tracing.transcripts import log_llm_exchange, log_tool_result
from agenttrace.tracing.turn_prompts import record_turn_prompts
from agenttrace.tracing.wrapping import Streamed, wrap

F = TypeVar("F", bound=Callable[..., Any])
S = TypeVar("S", bound=Scope)

NO_RESULT: Any = object()
"""Passed to ``close`` for a with-block whose handle was given no result."""

Naming = str | Callable[[Any], str | None] | None
"""A name (or id, or model): a string, or a callable of the instance whose method runs."""

Effects = str | Callable[[Any, str], str]
"""A tool's effect class: one of ``EFFECTS``, or a callable of the instance and the tool's name
that says each call's."""

OkExceptions = type[BaseException] | tuple[type[BaseException], ...]
"""Exception types that end a call without it being a failure."""

_Entry = tuple["_Spec[Any]", Any, "Tokens | None", "Handle"]
_entries: ContextVar[tuple[_Entry, ...]] = ContextVar("agenttrace_entries", default=())
"""The with-blocks open in this context: (spec, scope, activation tokens, handle), innermost
last.

Kept per context, not on the spec object, so one ``agenttrace.tool("x")`` object may be entered
by many tasks and threads at once, each with a span of its own."""


class _Spec(Generic[S]):
    """A decorator and context manager that opens one kind of scope."""

    where = "span"
    api = "agenttrace"
    """How the user spelled the decorator (``agenttrace.tool``), for the error a misuse raises."""
    instrument: str | None = None
    """The ``agenttrace.instrument_*`` call that does for a class what this does for a
    method: what a class given to the decorator is told to use instead."""
    kind = ""
    """The kind of scope it opens (``semconv``'s ``KIND_*``), for its with-block's handle."""
    ok_exceptions: tuple[type[BaseException], ...] = ()

    # -- decorator ------------------------------------------------------------------------------
    def __call__(self, fn: F) -> F:
        # Here, not at the first call: a class, a property or a name wrapped as a function
        # would fail inside the wrapper, reported as agenttrace's own error.
        check_decorated(self.api, fn, self.instrument)
        if isinstance(fn, (staticmethod, classmethod)):
            # Decorating above @staticmethod/@classmethod: wrap the function, keep the kind.
            return type(fn)(self(fn.__func__))
        spec = self._for_function(fn)
        return wrap(spec.body(fn), spec, like=fn)  # type: ignore[return-value]

    def _for_function(self, fn: Callable[..., Any]) -> _Spec[S]:
        return self

    def body(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """What the wrapper calls in the scope: ``fn`` itself (a tool's is guarded for
        re-entry)."""
        return fn

    def refused(self, scope: S) -> BaseException | None:
        """The error a ``with`` block's scope refuses to run it with (a tool a re-entry stops),
        raised by ``__enter__``; ``None``: the block runs."""
        return None

    # -- what subclasses define -----------------------------------------------------------------
    def open(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> S | None:
        raise NotImplementedError

    def close(self, scope: S, error: BaseException | None, result: Any) -> None:
        error, passed = self._outcome(error)
        finish(scope, error, passed=passed)

    def on_item(self, scope: S, item: Any) -> None:
        """A decorated generator yielded ``item``."""

    def _outcome(self, error: BaseException | None) -> tuple[BaseException | None, Any]:
        """(the failure, the exception that ended the call without failing it)."""
        if error is not None and self.ok_exceptions and isinstance(error, self.ok_exceptions):
            return None, error
        return error, None

    # -- context manager ------------------------------------------------------------------------
    def __enter__(self) -> Handle:
        scope: S | None = None
        tokens: Tokens | None = None
        refused: BaseException | None = None
        if not runtime.disabled:
            try:
                scope = self.open((), {})
                refused = self.refused(scope) if scope is not None else None
                if refused is not None and scope is not None:
                    self.close(scope, refused, NO_RESULT)  # the block does not run
                tokens = scope.activate() if scope is not None and refused is None else None
            except Exception as exc:
                report_internal_error(self.where, exc)
        if refused is not None:
            raise refused
        handle = Handle(scope, self.kind)
        _entries.set((*_entries.get(), (self, scope, tokens, handle)))
        return handle

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        entries = _entries.get()
        for index in range(len(entries) - 1, -1, -1):
            if entries[index][0] is self:
                _, scope, tokens, handle = entries[index]
                _entries.set(entries[:index] + entries[index + 1 :])
                break
        else:
            return  # not entered in this context
        if scope is None:
            return
        try:
            if tokens is not None:
                deactivate(tokens)
            # The handle's result stands for a return value: the block logs what a decorated
            # function returning it would have logged.
            self.close(scope, exc, handle._result)
        except Exception as internal:
            report_internal_error(self.where, internal)

    async def __aenter__(self) -> Handle:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)


class Handle:
    """What ``with agenttrace.tool(...) as call`` gives: record results on the open span."""

    __slots__ = ("_kind", "_result", "_scope")

    def __init__(self, scope: Scope | None, kind: str = "") -> None:
        self._scope = scope
        if not kind and isinstance(scope, OpScope):
            kind = scope.kind
        self._kind = kind
        """What the block is (``semconv``'s ``KIND_*``): known with agenttrace disabled too, so
        a misused handle is refused whether or not anything is recorded."""
        self._result: Any = NO_RESULT
        """What the block produced (``set_result``/``record_response``), logged at its end."""

    @property
    def path(self) -> str | None:
        """The opTree path label of this span (``None`` when agenttrace is disabled)."""
        return self._scope.label if self._scope is not None else None

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        """Add an attribute to the span: ``key`` a non-empty string, ``value`` a str, bool,
        int or float, or a list of them (as OpenTelemetry takes). On an op, a billing value
        set by its name (``agenttrace.cost.usd``, ``agenttrace.cost.upstream_usd``, the
        ``gen_ai.usage.*`` token counts, ``gen_ai.response.model``) with a value of its type
        is the op's outcome: the ledger, the metrics and the console say it, and the span gets
        it as it ends."""
        check_text("Handle.set_attribute", "key", key, optional=False)
        check_attribute_value("Handle.set_attribute", "value", value)
        if self._scope is not None:
            self._scope.set_attribute(key, value)

    def set_result(self, result: Any) -> None:
        """A tool's result: when the block ends without an exception it is logged exactly as a
        decorated tool's return value (span attributes, saved state, and the calling agent's
        ``tool`` transcript entry when an LLM asked for the call). The last one set counts.
        Only a tool's block takes one (an ``llm`` block's response goes to
        :meth:`record_response`)."""
        if self._kind != sc.KIND_TOOL:
            raise TypeError(
                self._misused("set_result", "a tool's result, in with agenttrace.tool(...)")
            )
        scope = self._scope
        if isinstance(scope, OpScope) and scope.kind != sc.KIND_LLM:
            self._result = result

    def record_response(self, response: Any) -> None:
        """An LLM response on an ``llm`` span: logged at the block's end exactly as a decorated
        function's return value (tokens, finish reasons, output, the assistant entry). Only an
        ``llm`` block takes one (a tool's result goes to :meth:`set_result`)."""
        if self._kind != sc.KIND_LLM:
            raise TypeError(
                self._misused("record_response", "an LLM response, in with agenttrace.llm(...)")
            )
        scope = self._scope
        if isinstance(scope, OpScope) and scope.kind == sc.KIND_LLM:
            self._result = response

    def _misused(self, method: str, takes: str) -> str:
        """What a ``method`` called on the handle of a block that does not take it raises."""
        block = _BLOCKS.get(self._kind, "a block agenttrace did not open")
        return f"Handle.{method} takes {takes}; this is the handle of {block}"


_BLOCKS = {
    sc.KIND_SESSION: "with agenttrace.agent(...) (or run)",
    sc.KIND_TURN: "with agenttrace.turn()",
    sc.KIND_LLM: "with agenttrace.llm(...)",
    sc.KIND_TOOL: "with agenttrace.tool(...)",
}
"""Each kind of with-block, as the user wrote it."""


# --- agent runs ----------------------------------------------------------------------------


class _AgentSpec(_Spec[SessionScope]):
    where = "agent span"
    instrument = "instrument_agent"
    kind = sc.KIND_SESSION

    def __init__(
        self,
        name: Naming,
        agent_id: Naming,
        model: Naming,
        ingress: Mapping[str, Any] | None,
        ok_exceptions: OkExceptions = (),
        method: bool | Binding = False,
        default_name: str | None = None,
        role: str | None = None,
        api: str = "agenttrace.agent",
    ) -> None:
        super().__init__()
        self.api = api
        self.name = check_naming(api, "name", name)
        self.agent_id = check_naming(api, "agent_id", agent_id)
        self.model = check_naming(api, "model", model)
        self.ingress = check_mapping(api, "ingress", ingress, "a mapping (source and details)")
        self.ok_exceptions = _exception_types(ok_exceptions, api)
        self.binding = _binding(method)
        """Which calls are method calls, whose first argument is the agent object."""
        self.default_name = default_name
        """The function's name, for a function agent given no name."""
        self.role = _role(role)

    def _for_function(self, fn: Callable[..., Any]) -> _AgentSpec:
        return _AgentSpec(
            self.name,
            self.agent_id,
            self.model,
            self.ingress,
            self.ok_exceptions,
            binding_of(fn),
            _function_name(fn),
            self.role,
            self.api,
        )

    def open(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> SessionScope | None:
        owner = self.binding.owner(args)
        agent_id = _resolve(self.agent_id, owner, self.where)
        if owner is not None:
            agent_id = agent_id or owner_agent_id(owner)
        running = current_scope()
        if (
            agent_id is not None
            and isinstance(running, SessionScope)
            and running.agent_id == agent_id
        ):
            # This agent's run calling itself through another layer (``super().run()``, a base
            # class instrumented too): the run already open stands for this call.
            return None
        name = _resolve(self.name, owner, self.where)
        model = _resolve(self.model, owner, self.where)
        if owner is not None:
            # An agent without a name of its own (the cafe demo's root) goes by its class.
            name = name or str_attribute(owner, "name") or _class_of(owner).__name__
            model = model or str_attribute(owner, "language_model") or str_attribute(owner, "model")
        scope = start_session(
            name or self.default_name or "agent",
            agent_id=agent_id,
            model=model,
            ingress=self.ingress,
            owner=owner,
            arguments=(args[1:] if owner is not None else args, kwargs),
        )
        if self.role is not None:
            scope.set_attribute(sc.AGENT_ROLE, self.role)
        return scope


@overload
def agent(fn: F, /) -> F: ...
@overload
def agent(
    name: str | None = None,
    /,
    *,
    agent_id: Naming = None,
    model: Naming = None,
    ingress: Mapping[str, Any] | None = None,
    ok_exceptions: OkExceptions = (),
    role: str | None = None,
) -> _AgentSpec: ...
@overload
def agent(
    *,
    name: Naming = None,
    agent_id: Naming = None,
    model: Naming = None,
    ingress: Mapping[str, Any] | None = None,
    ok_exceptions: OkExceptions = (),
    role: str | None = None,
) -> _AgentSpec: ...
def agent(
    fn_or_name: Any = None,
    /,
    *,
    agent_id: Naming = None,
    model: Naming = None,
    ingress: Mapping[str, Any] | None = None,
    name: Naming = None,
    ok_exceptions: OkExceptions = (),
    role: str | None = None,
) -> Any:
    """An agent run: a session span ``invoke_agent {name}``.

    Inside a tool call it becomes that tool's sub-agent session (the tool span turns kind
    ``session``), to any depth. ``ingress`` describes how a root run started (``source`` and
    details; see docs/session-file.md); sub-agents record their parent automatically.

    ``name``, ``agent_id`` and ``model`` are strings or, on a method, callables of the instance
    (``name=lambda self: self.name``); given, they win over the instance's own attributes.
    The run returns exactly what the function returns. Exceptions of the ``ok_exceptions``
    types pass through but end the run without failure (an ``exception`` event, no error).

    ``role`` says what the agent is for, as STD-008 types agents: ``architect``, ``developer``
    or ``reviewer`` (``agenttrace.agent.role`` on the span; a STD-008 export's
    ``agent_type``, which is otherwise ``architect`` for a root agent and ``developer`` for a
    sub-agent).
    """
    api = "agenttrace.agent"
    if _decorated(fn_or_name):
        spec = _AgentSpec(name, agent_id, model, ingress, ok_exceptions, role=role, api=api)
        return spec(fn_or_name)
    name = _one_name(api, fn_or_name, name)
    return _AgentSpec(name, agent_id, model, ingress, ok_exceptions, role=role, api=api)


def run(
    fn_or_name: Any = None,
    /,
    *,
    name: Naming = None,
    agent_id: Naming = None,
    model: Naming = None,
    ingress: Mapping[str, Any] | None = None,
    ok_exceptions: OkExceptions = (),
) -> Any:
    """An agent run whose boundary you draw: ``with agenttrace.run("research"):``.

    Every LLM call made inside the block (or the decorated function) is a turn of this run,
    whatever its messages, instead of going into the implicit runs that ``init()`` alone makes
    (see ``agenttrace.tracing.implicit``); tools and sub-agents inside nest in it as in any
    ``agent`` run. It is ``agenttrace.agent``, with the same arguments and the same span, but
    for its name when none is given: a decorated function's name, and for a with-block the
    service name, as an implicit run's.
    """
    api = "agenttrace.run"
    if _decorated(fn_or_name):
        return _AgentSpec(name, agent_id, model, ingress, ok_exceptions, api=api)(fn_or_name)
    return _AgentSpec(
        _one_name(api, fn_or_name, name),
        agent_id,
        model,
        ingress,
        ok_exceptions,
        default_name=runtime.settings.service_name,
        api=api,
    )


# --- turns ----------------------------------------------------------------------------------


class _TurnSpec(_Spec[TurnScope]):
    where = "turn span"
    api = "agenttrace.turn"
    kind = sc.KIND_TURN

    def open(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> TurnScope:
        return start_turn()


def turn(fn: Any = None, /) -> Any:
    """One turn of an agent's loop: ``turn {index}``, 1-based within the agent run.

    Without explicit turns agenttrace opens them itself: each LLM call directly in an agent run
    starts the next turn, and the tool calls after it belong to that turn.
    """
    if fn is not None:
        if not _decorated(fn):  # ``turn("plan")``: a turn has no name, its index says which
            refuse(
                "agenttrace.turn",
                "its argument",
                fn,
                "a function to decorate (a turn takes no name)",
            )
        return _TurnSpec()(fn)
    return _TurnSpec()


# --- tool calls ---------------------------------------------------------------------------------


class _ToolSpec(_Spec[OpScope]):
    where = "tool span"
    api = "agenttrace.tool"
    instrument = "instrument_tool"
    kind = sc.KIND_TOOL

    def __init__(
        self,
        name: Naming,
        arguments: Mapping[str, Any] | Callable[..., Mapping[str, Any]] | None = None,
        ok_exceptions: OkExceptions = (),
        *,
        params: tuple[str, ...] = (),
        rest: str | None = None,
        method: bool | Binding = False,
        default_name: str | None = None,
        named_by_instance: bool = False,
        category: str | None = None,
        effect: Effects = "effect",
        provider: str | None = None,
        verify: Callable[..., Any] | None = None,
        api: str | None = None,
    ) -> None:
        super().__init__()
        if api is not None:
            self.api = api
        api = self.api
        self.name = check_naming(api, "name", name)
        self.category = _category(category)
        self.effect = effect if callable(effect) else check_effect(effect)
        """Its effect class (docs/journal.md): what a resume may do again; a callable of the
        instance and the tool's name gives each call's (a framework's tools)."""
        self.verify = check_callable(
            api, "verify", verify, "a callable of the call's arguments that returns a Verdict"
        )
        """Asked, on a re-entry, whether a call in doubt happened (returns a ``Verdict``)."""
        self.provider = _provider(provider)
        if not (arguments is None or isinstance(arguments, Mapping) or callable(arguments)):
            refuse(
                api,
                "arguments",
                arguments,
                "a mapping of argument names to values, or a callable of the call's arguments "
                "that returns one",
            )
        self.arguments = arguments
        self.ok_exceptions = _exception_types(ok_exceptions, api)
        self.params = params
        """The names of the positional parameters, the instance's (``self``) first on a method."""
        self.rest = rest
        """The name of a ``*args`` parameter: extra positional values are recorded under it."""
        self.binding = _binding(method)
        """Which calls are method calls, whose first argument is no tool argument."""
        self.default_name = default_name
        self.named_by_instance = named_by_instance
        """Without ``name``, the tool is named by the instance (``name`` attribute, class)."""
        # Made once here when no call can change them: most tools have one name and class.
        self.fixed_name = self._fixed_name()
        """Every call's name, when it does not depend on the instance (else ``None``)."""
        self.fixed_effect = None if callable(self.effect) else self.effect
        """Every call's effect class, unless a callable says each call's."""

    def _fixed_name(self) -> str | None:
        name = self.name
        if isinstance(name, str) and name:
            return name
        if name is None or name == "":
            return None if self.named_by_instance else self.default_name or "tool"
        return None  # a callable of the instance

    def _for_function(self, fn: Callable[..., Any]) -> _ToolSpec:
        params, rest = positional_parameters(fn)
        return _ToolSpec(
            self.name,
            self.arguments,
            self.ok_exceptions,
            params=params,
            rest=rest,
            method=binding_of(fn),
            default_name=_function_name(fn),
            category=self.category,
            effect=self.effect,
            provider=self.provider,
            verify=self.verify,
            api=self.api,
        )

    def body(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` guarded for a re-entered run, which may answer its calls from the journal;
        a tool declared pure is never journaled, so nothing can answer it: ``fn`` itself."""
        return fn if self.effect == "pure" else guard(fn)

    def refused(self, scope: OpScope) -> BaseException | None:
        return block_step(scope)

    def open(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> OpScope:
        owner = self.binding.owner(args)
        name = self.fixed_name or self._name(owner)
        arguments = self._arguments(args, kwargs, owner is not None)
        # A dict built here holds what the call was given and no one else changes it.
        payloads: dict[str, Any] = {}
        outcome = OutcomeBuilder()
        attributes = tool_payload(
            payloads,
            sc.GEN_AI_TOOL_CALL_ARGUMENTS,
            arguments,
            outcome,
            later=self.arguments is None,
        )
        if self.category is not None:
            attributes[sc.TOOL_CATEGORY] = self.category
        if self.provider is not None:
            outcome.tool_provider = self.provider
        caller = current_scope()
        scope = start_op(sc.KIND_TOOL, name, attributes, outcome=outcome)
        scope.payloads = payloads  # its own: made for this call above
        scope.text_arguments = tuple(arguments.values())
        call = scope.turn.claim_tool_call(name)
        if call is not None:
            scope.call_id, scope.call_message = call[0], call[3]
            scope.set_attribute(sc.GEN_AI_TOOL_CALL_ID, call[0])
        elif isinstance(caller, OpScope):
            # Called by another tool (a tool that delegates, code a model wrote): it acts for
            # the same reply, so what it creates (a sub-agent, a piece of text) is caused by it.
            scope.call_message = caller.call_message
        # On disk before the body:
        effect = self.fixed_effect or self._effect(owner, name)
        if effect != "pure":  # a pure call is never journaled (docs/journal.md)
            begin_tool_step(scope, effect, arguments, self.verify)
        return scope

    def _name(self, owner: Any) -> str:
        """A call's name: the ``name`` given (a callable's for this instance), else the
        instance's where the tool is named by it, else the function's."""
        name = _resolve(self.name, owner, self.where)
        if name is None and self.named_by_instance and owner is not None:
            name = str_attribute(owner, "name") or _class_of(owner).__name__
        return name or self.default_name or "tool"

    def _effect(self, owner: Any, name: str) -> str:
        effect = self.effect
        if not callable(effect):
            return effect
        try:
            found = effect(owner, name)
        except Exception as exc:  # the safe class, reported
            report_internal_error(self.where, exc)
            return "effect"
        return found if found in EFFECTS else "effect"

    def _arguments(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], bound: bool
    ) -> Mapping[str, Any]:
        """The call's arguments by parameter name (the instance left out of a method
        call), as recorded."""
        given = self.arguments
        if isinstance(given, Mapping):
            return given
        if given is not None:
            chosen = self._chosen_arguments(given, args, kwargs)
            if chosen is not None:
                return chosen
        params = self.params
        if bound:
            args, params = args[1:], params[1:]
        arguments = dict(zip(params, args, strict=False)) if args else {}
        if self.rest is not None and len(args) > len(params):
            arguments[self.rest] = list(args[len(params) :])
        if kwargs:
            arguments.update(kwargs)
        return arguments

    def _chosen_arguments(
        self, given: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Mapping[str, Any] | None:
        """What the ``arguments`` callable returns for this call; ``None`` (the call's own
        arguments are recorded) when it fails or returns no mapping, which is reported: it runs
        inside the user's call, where raising would stop a call agenttrace only observes."""
        try:
            chosen = given(*args, **kwargs)
        except Exception as exc:
            report_internal_error(self.where, exc)
            return None
        if isinstance(chosen, Mapping):
            return chosen
        mistake = TypeError(
            f"{self.api}: the arguments callable must return a mapping of argument names to "
            f"values, not {shown(chosen)}; the call's own arguments are recorded"
        )
        report_misuse(self.where, mistake)
        return None

    def close(self, scope: OpScope, error: BaseException | None, result: Any) -> None:
        # Run once the call's context is left: a warning here is about this op all the same,
        # so it is reported here, where the op is known (the callers report it elsewhere).
        with concerning(scope.origin, scope.label):
            try:
                self._close(scope, error, result)
            except Exception as internal:
                report_internal_error(self.where, internal)

    def _close(self, scope: OpScope, error: BaseException | None, result: Any) -> None:
        error, passed = self._outcome(error)
        attributes: dict[str, AttributeValue] = {}
        try:
            attributes = self._recorded_result(scope, error, passed, result)
        except Exception as internal:
            # Reported while the op is still open, so the warning is one of its logs.
            report_internal_error(self.where, internal)
        finally:
            # The span ends in the call whatever recording the result did: a result no JSON
            # holds (a list that contains itself) raises there, but a span left open would
            # read "in progress" all run.
            finish(scope, error, attributes, passed=passed)

    def _recorded_result(
        self, scope: OpScope, error: BaseException | None, passed: Any, result: Any
    ) -> dict[str, AttributeValue]:
        """Journal the call's outcome, log its result for the calling agent, and give the
        result's span attributes."""
        # The journal's outcome: an exception the tool ends with without failing is done.
        # A generator tool's results were its items: they are what a re-entry gives back.
        if isinstance(result, Streamed):
            done: Any = stream_result(scope.streamed_items or [], result.value)
        else:
            done = None if result is NO_RESULT else result
        if scope.step is not None:  # its intent was journaled, or the journal answers it
            end_tool_step(scope, done, error, streamed=isinstance(result, Streamed))
        if isinstance(result, Streamed):  # a generator tool: its results were its items
            scope.outcome.set_sizes(chars_out=scope.streamed_chars)
            return {}
        ok = error is None and passed is None and result is not NO_RESULT
        if ok and scope.call_id is not None:
            log_tool_result(scope, result)  # the calling agent's tool entry
        return _tool_result_attributes(scope, result) if ok else {}

    def on_item(self, scope: OpScope, item: Any) -> None:
        scope.streamed_chars += len(item) if isinstance(item, str) else len(str(item))
        if scope.step is not None:  # journaled: the items are its result in the journal
            if scope.streamed_items is None:
                scope.streamed_items = []
            scope.streamed_items.append(item)
        log_tool_result(scope, item)  # each item is a tool entry of its own


def _tool_result_attributes(scope: OpScope, result: Any) -> dict[str, AttributeValue]:
    """The result's span attributes; its recorded JSON goes into the saved state (recorded
    later, off the caller's path, for a result that cannot change: see ``_internal/later``)."""
    if result is None:
        scope.outcome.set_sizes(chars_out=0)
        return {}
    return tool_payload(
        scope.payloads, sc.GEN_AI_TOOL_CALL_RESULT, result, scope.outcome, later=True
    )


@overload
def tool(fn: F, /) -> F: ...
@overload
def tool(
    name: str | None = None,
    /,
    *,
    arguments: Mapping[str, Any] | Callable[..., Mapping[str, Any]] | None = None,
    ok_exceptions: OkExceptions = (),
    category: str | None = None,
    effect: str = "effect",
    provider: str | None = None,
    verify: Callable[..., Any] | None = None,
) -> _ToolSpec: ...
@overload
def tool(
    *,
    name: Naming = None,
    arguments: Mapping[str, Any] | Callable[..., Mapping[str, Any]] | None = None,
    ok_exceptions: OkExceptions = (),
    category: str | None = None,
    effect: str = "effect",
    provider: str | None = None,
    verify: Callable[..., Any] | None = None,
) -> _ToolSpec: ...
def tool(
    fn_or_name: Any = None,
    /,
    *,
    arguments: Mapping[str, Any] | Callable[..., Mapping[str, Any]] | None = None,
    name: Naming = None,
    ok_exceptions: OkExceptions = (),
    category: str | None = None,
    effect: str = "effect",
    provider: str | None = None,
    verify: Callable[..., Any] | None = None,
) -> Any:
    """A tool call: ``execute_tool {name}``, in the current turn.

    Its ``gen_ai.tool.call.id`` is taken from the turn's LLM response when that asked for a tool
    of this name. ``name`` is a string or, on a method, a callable of the instance
    (``name=lambda self: self.name``). The arguments recorded are the call's, by parameter name;
    ``arguments`` replaces them: a mapping, or a callable given the call's arguments. As a
    context manager, pass ``arguments`` and call ``set_result`` on the handle: the block logs
    what the decorator logs for that return value. Exceptions of the ``ok_exceptions`` types
    pass through but end the call without failure.

    ``category`` says what kind of tool it is, as STD-008 classes them (``perception``,
    ``action``, ``interaction``, ...: ``agenttrace.tool.category`` on the span, a STD-008
    export's ``tool_category``, which is otherwise guessed from the name).

    ``effect`` is what the call does to the world (docs/journal.md): ``pure``, ``read``,
    ``idempotent`` or ``effect`` (the default: nothing is known). A call that is not ``pure``
    is journaled: its intent is on disk before its body runs, its outcome when it ends, so a
    killed run's calls in doubt are known (``agenttrace doubts``). A resume that re-enters the
    killed run answers a done call from the journal and runs a call in doubt again or not by its
    effect class (docs/journal.md); ``verify``, called with the call's arguments, says whether a
    call in doubt happened: it returns ``agenttrace.Verdict.done(result)``, ``.not_applied()``
    or ``.unknown()``.

    ``provider`` says who provides the tool (a service, an MCP server): the billing ledger's
    ``providerLabel`` (``agenttrace.tool.provider`` on the span), else the tool's name.
    """
    spec = _ToolSpec(
        name if _decorated(fn_or_name) else _one_name("agenttrace.tool", fn_or_name, name),
        arguments,
        ok_exceptions,
        category=category,
        effect=effect,
        provider=provider,
        verify=verify,
    )
    return spec(fn_or_name) if _decorated(fn_or_name) else spec


# --- LLM calls (clients other than litellm) ----------------------------------------------------


class _LLMSpec(_Spec[OpScope]):
    where = "llm span"
    api = "agenttrace.llm"
    kind = sc.KIND_LLM

    def __init__(self, model: str | None, provider: str | None, replayable: bool = False) -> None:
        super().__init__()
        self.model = check_text(self.api, "model", model)
        self.provider = check_text(self.api, "provider", provider)
        self.replayable = replayable
        """Its calls are answered from the journal in a re-entered run (a decorated
        function's); a ``with`` block's body runs whatever the journal holds, so its calls are
        journaled only (docs/journal.md)."""

    def _for_function(self, fn: Callable[..., Any]) -> _LLMSpec:
        return _LLMSpec(self.model, self.provider, replayable=True)

    def body(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn``, answered from the journal in a re-entered run that recorded its response (a
        stream chunk by chunk)."""
        return answered(fn)

    def open(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> OpScope:
        model = self.model or kwargs.get("model") or "unknown"
        provider, short = split_model(str(model), self.provider)
        messages = request_messages(kwargs)

        payloads: dict[str, str] = {}

        def summarise_input(session: SessionScope) -> dict[str, AttributeValue]:
            attributes, new = input_summary(session, messages)
            # Here, so later appends cannot change it.
            attributes.update(input_content(new, payloads))
            return attributes

        scope = start_op(
            sc.KIND_LLM,
            sc.SPAN_LLM.format(model=short),
            request_attributes(bool(kwargs.get("stream"))),
            new_turn=True,
            more=summarise_input if messages else None,
            outcome=request_outcome(short, provider, 1),
        )
        scope.payloads.update(payloads)
        scope.request = messages
        if messages:
            record_turn_prompts(scope, messages)
        try:
            begin_call_step(scope, str(model), args, kwargs, self.replayable)  # before the call
        except ReplayDivergence as error:  # a strict replay: the function is not called
            self.close(scope, error, NO_RESULT)
            raise
        return scope

    def close(self, scope: OpScope, error: BaseException | None, result: Any) -> None:
        if isinstance(result, Streamed):  # a generator may return the whole response
            result = result.value
        # A stream's chunks were kept as it yielded them; a with-block's response is the one
        # recorded on its handle.
        end_llm_step(scope, response=None if result is NO_RESULT else result, error=error)
        if error is not None:
            scope.outcome.set_error(classify_error(error))
            finish(scope, error)
        elif result is None or result is NO_RESULT:
            finish(scope, None)
        else:
            # Now, not later: the tool spans that follow need the call ids and message ids.
            log_llm_exchange(scope, scope.request, result)
            finish(
                scope,
                None,
                functools.partial(response_attributes, result, scope.outcome, scope.payloads),
            )

    def on_item(self, scope: OpScope, item: Any) -> None:
        keep_chunk(scope, item)  # for the journal's done line


def llm(
    fn_or_model: Any = None, /, *, model: str | None = None, provider: str | None = None
) -> Any:
    """One LLM attempt through a client agenttrace does not patch: ``chat {model}``.

    The model comes from the argument or the call's ``model=`` keyword; tokens, finish reasons
    and output are read from an OpenAI- or Anthropic-shaped return value.

    Each call is a step of the journal (docs/journal.md): a decorated function's return value,
    or the chunks its stream yields, is the recorded response, and a re-entered run gets it
    back without the function being called. A ``with`` block's call is journaled (the response
    given to ``record_response``) but runs again on a re-entry: its body cannot be skipped.
    """
    if _decorated(fn_or_model):
        return _LLMSpec(model, provider)(fn_or_model)
    return _LLMSpec(_one_name("agenttrace.llm", fn_or_model, model, "model"), provider)


# --- helpers ------------------------------------------------------------------------------------


AGENT_ROLES = ("architect", "developer", "reviewer")
"""The roles ``@agent(role=...)`` takes: STD-008's agent types."""


def _role(role: str | None) -> str | None:
    """``role`` if it is one of :data:`AGENT_ROLES`; a ``ValueError`` at decoration time
    otherwise (a typo would silently give an invalid document much later)."""
    if role is not None and not isinstance(role, str):
        refuse("agenttrace.agent", "role", role, f"one of {', '.join(AGENT_ROLES)}")
    if role is not None and role not in AGENT_ROLES:
        raise ValueError(f"role {role!r} is not one of {', '.join(AGENT_ROLES)}")
    return role


def _provider(provider: str | None) -> str | None:
    if provider is not None and (not isinstance(provider, str) or not provider.strip()):
        raise ValueError(f"provider {provider!r} is not a name (a service, an MCP server)")
    return provider


def _category(category: str | None) -> str | None:
    if category is not None and (not isinstance(category, str) or not category.strip()):
        raise ValueError(f"category {category!r} is not a name (perception, action, ...)")
    return category


def _one_name(api: str, positional: Any, keyword: Any, parameter: str = "name") -> Any:
    """The name given first positionally or as ``name=``; both at once is a mistake (one of
    them would be silently dropped)."""
    if positional is not None and keyword is not None:
        raise TypeError(
            f"{api}: {parameter} given twice, as {positional!r} and as {parameter}={keyword!r}"
        )
    return keyword if positional is None else positional


def _function_name(fn: Callable[..., Any]) -> str:
    """What a decorated callable is called by default: its ``__name__``, or its class's for a
    callable object or a ``functools.partial``, which have none."""
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) and name else type(fn).__name__


def _decorated(value: Any) -> bool:
    """Whether a decorator got the function to wrap (bare ``@agent``), not a name: a callable,
    or a classmethod or staticmethod object, which ``@agent`` above ``@classmethod`` gets."""
    # A property too: not a name, but a getter wrapped the wrong way round, refused as such.
    return callable(value) or isinstance(value, (staticmethod, classmethod, property))


def _binding(method: bool | Binding) -> Binding:
    """``method`` as a binding: ``True`` for a method patched onto a class, every call bound."""
    if isinstance(method, Binding):
        return method
    return BOUND if method else PLAIN


def _class_of(owner: object) -> type:
    """The class an object belongs to; a classmethod's owner is its class itself."""
    return owner if isinstance(owner, type) else type(owner)


def positional_parameters(fn: Callable[..., Any]) -> tuple[tuple[str, ...], str | None]:
    """The names of ``fn``'s positional parameters, and of its ``*args`` parameter if any."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return (), None
    positional = tuple(
        p.name
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    )
    rest = next((p.name for p in parameters if p.kind is inspect.Parameter.VAR_POSITIONAL), None)
    return positional, rest


def _resolve(value: Naming, owner: object, where: str) -> str | None:
    """A name option's value for a call on ``owner`` (``None`` for a plain function): the
    string, or what the callable returns for ``owner`` if that is a non-empty string."""
    if value is None or isinstance(value, str):
        return value or None
    try:
        resolved = value(owner)
    except Exception as exc:  # a naming callable that fails: the default name, reported
        report_internal_error(where, exc)
        return None
    return resolved if isinstance(resolved, str) and resolved else None


def _exception_types(
    value: OkExceptions, api: str = "agenttrace.agent"
) -> tuple[type[BaseException], ...]:
    """``ok_exceptions`` as a tuple of exception classes (checked now, not at the first call)."""
    types = value if isinstance(value, tuple) else (value,)
    for kind in types:
        if not (isinstance(kind, type) and issubclass(kind, BaseException)):
            raise TypeError(
                f"{api}: ok_exceptions takes exception classes (or a tuple of them), "
                f"not {shown(kind)}"
            )
    return types
