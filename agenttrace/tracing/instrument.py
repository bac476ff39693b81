"""Instrument a framework's agent and tool classes in place, without touching their code.

``instrument_agent(cls, run="run", name=...)`` replaces ``cls.run`` with the ``@agent``
wrapper of the same function, ``instrument_tool(cls, call="__call__", name=...)`` replaces
``cls.__call__`` with the ``@tool`` wrapper; ``uninstrument_agent(cls)`` and
``uninstrument_tool(cls)`` put back exactly what was there. The wrappers are
:func:`agenttrace.tracing.wrapping.wrap`'s, so a coroutine method stays a coroutine function,
a generator method a generator function, and a method that returns a stream keeps its run open
until the stream ends.

Rules that make this safe to call from setup code and from other instrumentations:

- idempotent: instrumenting a method again replaces the earlier wrapper (the last options win),
  never wraps it twice;
- a method a class inherits is wrapped on the class named (the base is left alone), and a
  wrapper it inherits from an instrumented base is unwrapped first, so one call is one span;
- undo restores the class's own attribute (or removes the one we added), and leaves alone a
  method someone else has replaced since.
"""

from __future__ import annotations

import inspect
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from agenttrace._internal.checks import refuse
from agenttrace.tracing.decorators import (
    Effects,
    Naming,
    OkExceptions,
    _AgentSpec,
    _ToolSpec,
    positional_parameters,
)
from agenttrace.tracing.wrapping import Opener, wrap

T = TypeVar("T", bound=type)

Kind = Literal["agent", "tool"]

_MISSING: Any = object()


@dataclass(frozen=True)
class _Patch:
    kind: Kind
    own: Any
    """What the class itself held under the name before (``_MISSING``: it inherited it)."""
    wrapper: Callable[..., Any]


_lock = threading.Lock()
_patches: weakref.WeakKeyDictionary[type, dict[str, _Patch]] = weakref.WeakKeyDictionary()
_originals: weakref.WeakKeyDictionary[Callable[..., Any], Callable[..., Any]] = (
    weakref.WeakKeyDictionary()
)
"""Each wrapper we installed -> the function it wraps."""


def instrument_agent(
    cls: T,
    run: str | Iterable[str] = "run",
    *,
    name: Naming = None,
    agent_id: Naming = None,
    model: Naming = None,
    ingress: Mapping[str, Any] | None = None,
    ok_exceptions: OkExceptions = (),
    role: str | None = None,
) -> T:
    """Make every call of ``cls.<run>`` (one method name or several) an agent run of the
    instance, as ``@agenttrace.agent`` on that method would; returns ``cls``.

    ``name``, ``agent_id`` and ``model`` are strings or callables of the instance
    (``name=lambda self: self.name``); by default the instance's ``name`` attribute (else its
    class name), its ``agent_id`` and its ``language_model`` or ``model`` (when a string).
    A run directly inside a run of the same agent (``super().run()``) is that run, not a new
    one. What the method returns comes back unchanged; a returned generator or async generator
    keeps the run open until it is exhausted, closed, or fails. ``role``: as for
    ``@agenttrace.agent``.
    """
    spec = _AgentSpec(
        name,
        agent_id,
        model,
        ingress,
        ok_exceptions,
        method=True,
        role=role,
        api="agenttrace.instrument_agent",
    )
    for attribute in _names(run, "agenttrace.instrument_agent", "run"):
        _patch(cls, attribute, "agent", lambda fn: spec)
    return cls


def uninstrument_agent(cls: type, run: str | Iterable[str] | None = None) -> None:
    """Undo :func:`instrument_agent` on ``cls`` (every method it wrapped, or those named)."""
    _unpatch(cls, "agent", run)


def instrument_tool(
    cls: T,
    call: str | Iterable[str] = "__call__",
    *,
    name: Naming = None,
    arguments: Callable[..., Mapping[str, Any]] | None = None,
    ok_exceptions: OkExceptions = (),
    category: str | None = None,
    effect: Effects = "effect",
    provider: str | None = None,
    verify: Callable[..., Any] | None = None,
) -> T:
    """Make every call of ``cls.<call>`` a tool call of the instance, as ``@agenttrace.tool``
    on that method would; returns ``cls``.

    The tool's name is ``name`` (a string, or a callable of the instance), else the instance's
    ``name`` attribute, else its class name: it is what an LLM's tool call is matched by. The
    recorded arguments are the call's by parameter name, or what ``arguments`` (given the
    call's arguments, ``self`` first) returns. ``category``, ``effect``, ``provider`` and
    ``verify`` (given the call's arguments, ``self`` first): as for ``@agenttrace.tool``;
    ``effect`` may also be a callable of the instance and the tool's name, for tools whose
    classes differ by instance.
    """
    # The options are checked now, before any method is patched: a mistake leaves the class as
    # it was.
    _ToolSpec(
        name,
        arguments,
        ok_exceptions,
        category=category,
        effect=effect,
        provider=provider,
        verify=verify,
        api="agenttrace.instrument_tool",
    )

    def spec(fn: Callable[..., Any]) -> _ToolSpec:
        params, rest = positional_parameters(fn)
        return _ToolSpec(
            name,
            arguments,
            ok_exceptions,
            params=params,  # the instance's first: every call is bound, it is left out
            rest=rest,
            method=True,
            named_by_instance=True,
            category=category,
            effect=effect,
            provider=provider,
            verify=verify,
            api="agenttrace.instrument_tool",
        )

    for attribute in _names(call, "agenttrace.instrument_tool", "call"):
        _patch(cls, attribute, "tool", spec)
    return cls


def uninstrument_tool(cls: type, call: str | Iterable[str] | None = None) -> None:
    """Undo :func:`instrument_tool` on ``cls`` (every method it wrapped, or those named)."""
    _unpatch(cls, "tool", call)


def instrument_method(
    cls: T,
    method: str | Iterable[str],
    opener: Callable[[Callable[..., Any]], Opener],
    kind: Kind = "tool",
) -> T:
    """Make every call of ``cls.<method>`` run in the scope ``opener(function)`` opens, by this
    module's rules; returns ``cls``. For instrumentations whose scopes need more than
    :func:`instrument_agent` and :func:`instrument_tool` take (a spec of their own); ``kind``
    says whether :func:`uninstrument_agent` or :func:`uninstrument_tool` undoes it."""
    for attribute in _names(method, "instrument_method", "method"):
        _patch(cls, attribute, kind, opener)
    return cls


def _names(value: str | Iterable[str], api: str, parameter: str) -> tuple[str, ...]:
    """``value``, one method name or several, as a tuple; anything else is refused."""
    if isinstance(value, str):
        names: tuple[object, ...] = (value,)
    elif isinstance(value, Iterable) and not isinstance(value, Mapping):
        names = tuple(value)
    else:
        names = ()
    if not names or not all(isinstance(n, str) and n for n in names):
        refuse(api, parameter, value, "a method name or a list of them")
    return names  # type: ignore[return-value]


def _patch(
    cls: type, attribute: str, kind: Kind, spec_for: Callable[[Callable[..., Any]], Opener]
) -> None:
    if not isinstance(cls, type):
        raise TypeError(f"instrument_{kind} takes a class, not {cls!r}")
    with _lock:
        earlier = _patches.get(cls, {}).get(attribute)
        if earlier is not None:
            _restore(cls, attribute, earlier)
        try:
            found = inspect.getattr_static(cls, attribute)
        except AttributeError:
            raise AttributeError(f"{cls.__qualname__} has no method {attribute!r}") from None
        if isinstance(found, (staticmethod, classmethod, property)) or not callable(found):
            raise TypeError(
                f"instrument_{kind} wraps methods called on an instance; "
                f"{cls.__qualname__}.{attribute} is a {type(found).__name__}"
            )
        function = _original(found)  # a wrapper inherited from an instrumented base: unwrapped
        spec = spec_for(function)
        body = getattr(spec, "body", None)  # a tool's body is guarded for re-entry
        wrapper = wrap(body(function) if body is not None else function, spec)
        own = cls.__dict__.get(attribute, _MISSING)
        setattr(cls, attribute, wrapper)
        _originals[wrapper] = function
        _patches.setdefault(cls, {})[attribute] = _Patch(kind, own, wrapper)


def _original(method: Any) -> Any:
    try:
        return _originals.get(method, method)
    except TypeError:  # a callable object that takes no weak reference: not one of ours
        return method


def _unpatch(cls: type, kind: Kind, names: str | Iterable[str] | None) -> None:
    if not isinstance(cls, type):
        refuse(f"agenttrace.uninstrument_{kind}", "cls", cls, "a class")
    with _lock:
        patches = _patches.get(cls, {})
        parameter = "run" if kind == "agent" else "call"
        api = f"agenttrace.uninstrument_{kind}"
        wanted = _names(names, api, parameter) if names is not None else tuple(patches)
        for attribute in wanted:
            patch = patches.get(attribute)
            if patch is not None and patch.kind == kind:
                _restore(cls, attribute, patch)


def _restore(cls: type, attribute: str, patch: _Patch) -> None:
    """Put back what ``cls`` held before ``patch`` (under the lock)."""
    del _patches[cls][attribute]
    if cls.__dict__.get(attribute) is not patch.wrapper:
        return  # replaced by someone else since: theirs stays
    if patch.own is _MISSING:
        delattr(cls, attribute)
    else:
        setattr(cls, attribute, patch.own)
