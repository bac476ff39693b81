"""A tool's result given back from the step journal as the value the tool returned, not as its
JSON (docs/journal.md, "Re-entry").

The journal keeps a tool's result as JSON. A re-entered run must get back what the tool
returned: a dataclass or a pydantic model is rebuilt from the tool function's return annotation
(``typing.get_type_hints``; pydantic's ``TypeAdapter`` builds it, when pydantic is installed,
as it is with litellm). When the call ends, its result is checked: if the JSON, rebuilt so, is
not equal to it and of its type (no annotation and a value that is not plain JSON data, an
arbitrary class), its ``done`` line says so, and a re-entry does not answer the call from it.
"""

from __future__ import annotations

import collections.abc
import inspect
import json
import typing
from collections.abc import Callable
from typing import Any

_UNSET: Any = object()


class NotRebuilt(Exception):
    """A recorded result the tool's return annotation does not take."""


class Returns:
    """What a tool function returns, as its return annotation says (read once, when first
    asked)."""

    __slots__ = ("_adapter", "_annotation", "_fn")

    def __init__(self, fn: Callable[..., Any]) -> None:
        self._fn = fn
        self._annotation: Any = None
        self._adapter: Any = _UNSET

    def adapter(self) -> Any:
        """pydantic's ``TypeAdapter`` of the annotation; ``None`` without one (or without
        pydantic): only plain JSON data is given back then."""
        if self._adapter is _UNSET:
            self._annotation = return_annotation(self._fn)
            self._adapter = _adapter_of(self._annotation)
        return self._adapter

    def rebuild(self, value: Any) -> Any:
        """``value`` (a result as JSON data) as the tool returned it; :class:`NotRebuilt` if
        the annotation does not take it."""
        adapter = self.adapter()
        if adapter is None:
            return value
        try:
            return adapter.validate_python(value)
        except Exception as error:  # pydantic's ValidationError, or a type it cannot build
            raise NotRebuilt(str(error).splitlines()[0]) from None

    def gives_back(self, result: Any, text: str) -> bool:
        """Whether ``text`` (``result`` as the journal keeps it) gives ``result`` back: equal,
        and of its type."""
        adapter = self.adapter()
        if adapter is None:
            return is_plain(result)
        if type(result) in _EXACT and self._annotation is type(result):
            return True  # a str, int or bool its annotation names: its JSON is itself
        try:
            rebuilt = self.rebuild(json.loads(text))
            return type(rebuilt) is type(result) and bool(rebuilt == result)
        except Exception:  # not JSON, not rebuilt, not comparable: not given back
            return False


def gives_back(returns: Returns | None, result: Any, text: str) -> bool:
    """Whether a tool's result kept as ``text`` can answer a re-entry: rebuilt from its
    function's annotation (``returns``), or plain JSON data for a tool with none."""
    if returns is None:
        return is_plain(result)
    return returns.gives_back(result, text)


def return_annotation(fn: Callable[..., Any]) -> Any:
    """``fn``'s return type (a generator's return value's type), or ``None`` when it has none
    that says anything (no annotation, ``Any``, ``object``, one that cannot be resolved)."""
    try:
        hints = typing.get_type_hints(inspect.unwrap(fn))
    except Exception:  # a forward reference to a name that is not there, ...
        return None
    annotation = hints.get("return", None)
    if inspect.isgeneratorfunction(fn):
        origin = typing.get_origin(annotation)
        arguments = typing.get_args(annotation)
        if origin is not collections.abc.Generator or len(arguments) != 3:
            return None  # Iterator[...], Iterable[...]: the return value is not said
        annotation = arguments[2]
    if annotation is None or annotation is Any or annotation is object:
        return None
    return annotation


def _adapter_of(annotation: Any) -> Any:
    if annotation is None:
        return None
    try:
        from pydantic import TypeAdapter
    except ImportError:
        return None
    try:
        return TypeAdapter(annotation)
    except Exception:
        if typing.is_typeddict(annotation):
            # pydantic takes typing_extensions' TypedDict only before Python 3.12; a TypedDict
            # is a dict: plain JSON data gives it back as it is.
            return None
        return _NEVER  # an arbitrary class pydantic has no schema for: not rebuilt


class _Never:
    """The adapter of an annotation pydantic cannot build: gives nothing back."""

    def validate_python(self, value: Any) -> Any:
        raise NotRebuilt("the tool's return annotation is not one agenttrace can rebuild")


_NEVER = _Never()

_SCALARS = frozenset({str, int, float, bool, type(None)})
_EXACT = frozenset({str, int, bool})
"""Scalars whose JSON gives them back exactly (not a float: ``inf`` and ``nan`` are not JSON)."""


def is_plain(value: Any, depth: int = 0) -> bool:
    """JSON data as ``json.loads`` gives it back: ``str``, ``int``, ``float``, ``bool``,
    ``None``, and lists and ``str``-keyed dicts of them (exactly those types)."""
    kind = type(value)
    if kind in _SCALARS:
        return kind is not float or value == value  # NaN is not equal to itself
    if depth > 64:
        return False
    if kind is list:
        return all(is_plain(item, depth + 1) for item in value)
    if kind is dict:
        return all(type(key) is str and is_plain(item, depth + 1) for key, item in value.items())
    return False


STREAM_ITEMS = "items"
STREAM_RETURNED = "returned"


def stream_result(items: list[Any], returned: Any) -> dict[str, Any]:
    """A generator tool's result as the journal keeps it: the items it yielded (they were its
    results: the calling agent heard each one) and the value it returned (``None`` for an async
    generator)."""
    return {STREAM_ITEMS: items, STREAM_RETURNED: returned}


def stream_parts(recorded: Any) -> tuple[list[Any], Any]:
    """The (items, returned value) of a generator tool's recorded result; none and ``None``
    for a journal written before items were kept (its ``result`` is ``null``)."""
    if isinstance(recorded, dict) and isinstance(recorded.get(STREAM_ITEMS), list):
        return list(recorded[STREAM_ITEMS]), recorded.get(STREAM_RETURNED)
    return [], None


def stream_gives_back(returns: Returns | None, result: dict[str, Any]) -> bool:
    """Whether a generator tool's kept result gives it back: plain JSON items (a generator's
    annotation does not say what its items are rebuilt as), and a returned value that its
    annotation's return type rebuilds."""
    items, returned = stream_parts(result)
    if not all(is_plain(item) for item in items):
        return False
    return returned is None or gives_back(returns, returned, json.dumps(returned, default=str))
