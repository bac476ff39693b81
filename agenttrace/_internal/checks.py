"""Checks of what a user passes to agenttrace's public API, at the call the user wrote.

Misusing the API (``@agenttrace.tool`` on a class, ``tool(name=5)``, ``log("BOGUS", ...)``) is
the user's mistake, not an instrumentation failure: it raises a ``TypeError`` (the wrong kind of
value) or a ``ValueError`` (the right kind, a wrong value) at once, whose one-line message names
the API, the parameter, what it got and what it takes. That is kept apart from agenttrace's own
failures, which are reported and swallowed (``agenttrace._internal.errors``): a mistake raised
later, inside a wrapper, would be one of those and the user would never see it at its line.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from typing import NoReturn, TypeVar

T = TypeVar("T")

_SHOWN = 60
"""How much of a value's repr a message shows."""


def shown(value: object) -> str:
    """``value`` as a message shows it: its repr (cut short), and its type unless the repr
    says it (a string, ``None``, a bool)."""
    try:
        text = repr(value)
    except Exception:  # a user's object whose repr fails: its type still says enough
        text = f"<{type(value).__name__} object>"
    if len(text) > _SHOWN:
        text = text[: _SHOWN - 3] + "..."
    if value is None or isinstance(value, (str, bool)):
        return text
    if isinstance(value, type):
        return f"the class {value.__name__}"
    return f"{text} ({type(value).__name__})"


def refuse(
    api: str, parameter: str, value: object, takes: str, error: type[Exception] = TypeError
) -> NoReturn:
    """Raise ``error``: ``{api}: {parameter} must be {takes}, not {value}``."""
    raise error(f"{api}: {parameter} must be {takes}, not {shown(value)}")


def check_text(api: str, parameter: str, value: T, *, optional: bool = True) -> T:
    """``value`` if it is a non-empty string (or ``None`` when ``optional``)."""
    if value is None and optional:
        return value
    if not isinstance(value, str):
        refuse(api, parameter, value, "a string")
    if not value.strip():
        refuse(api, parameter, value, "a non-empty string", ValueError)
    return value


def check_naming(api: str, parameter: str, value: T) -> T:
    """A name option (``name``, ``agent_id``, ``model``): ``None``, a non-empty string, or a
    callable of the instance (a class is none: it would be called with the instance)."""
    if value is None or (callable(value) and not isinstance(value, type)):
        return value
    if isinstance(value, str):
        return check_text(api, parameter, value)
    refuse(api, parameter, value, "a string or a callable of the instance")


def check_flag(api: str, parameter: str, value: T, *, optional: bool = True) -> T:
    """``value`` if it is a bool (or ``None`` when ``optional``): ``"false"`` is not one."""
    if (value is None and optional) or isinstance(value, bool):
        return value
    refuse(api, parameter, value, "True or False")


def check_choice(api: str, parameter: str, value: T, choices: Collection[str]) -> T:
    """``value`` if it is one of ``choices``."""
    if isinstance(value, str) and value in choices:
        return value
    error = ValueError if isinstance(value, str) else TypeError
    refuse(api, parameter, value, f"one of {', '.join(choices)}", error)


def check_mapping(api: str, parameter: str, value: T, takes: str = "a mapping") -> T:
    """``value`` if it is a mapping or ``None``."""
    if value is None or isinstance(value, Mapping):
        return value
    refuse(api, parameter, value, takes)


def check_callable(api: str, parameter: str, value: T, takes: str = "a callable") -> T:
    """``value`` if it is callable or ``None``."""
    if value is None or callable(value):
        return value
    refuse(api, parameter, value, takes)


def check_path(api: str, parameter: str, value: T, *, optional: bool = True) -> T:
    """``value`` if it is a non-empty path (a string or an ``os.PathLike``), or ``None``."""
    if value is None and optional:
        return value
    if isinstance(value, os.PathLike):
        return value
    if isinstance(value, str):
        return check_text(api, parameter, value)
    refuse(api, parameter, value, "a path (a string or a pathlib.Path)")


def check_number(
    api: str, parameter: str, value: T, *, least: float, whole: bool = False, optional: bool = True
) -> T:
    """``value`` if it is a finite number (an int when ``whole``) of at least ``least`` (or
    ``None`` when ``optional``)."""
    if value is None and optional:
        return value
    kinds: tuple[type, ...] = (int,) if whole else (int, float)
    what = "a whole number" if whole else "a number"
    if isinstance(value, bool) or not isinstance(value, kinds):
        refuse(api, parameter, value, f"{what} >= {least:g}")
    number: float = value  # type: ignore[assignment]
    if not least <= number < float("inf"):  # NaN too
        refuse(api, parameter, value, f"{what} >= {least:g}", ValueError)
    return value


def check_decorated(api: str, fn: object, instrument: str | None = None) -> None:
    """A decorator's target: a function or method (a callable that is not a class).

    A class is refused with what to do instead (decorate its method, or ``instrument``: the
    ``agenttrace.instrument_*`` call that patches a class's method); a ``property`` with where
    the decorator goes (on its getter)."""
    if isinstance(fn, type):
        instead = "decorate its method (def run, def __call__) instead"
        if instrument is not None:
            instead += f", or call agenttrace.{instrument}({fn.__name__}, ...)"
        raise TypeError(
            f"@{api} decorates a function or method, not the class {fn.__name__}: {instead}"
        )
    if isinstance(fn, property):
        raise TypeError(
            f"@{api} decorates a function or method, not a property: put it below @property, "
            "on the getter"
        )
    if not callable(fn) and not isinstance(fn, (staticmethod, classmethod)):
        refuse(f"@{api}", "what it decorates", fn, "a function or method")


def check_attribute_value(api: str, parameter: str, value: T) -> T:
    """``value`` if OpenTelemetry takes it as an attribute value: a str, bool, int or float,
    or a list or tuple of them."""
    scalars = (str, bool, int, float)
    if isinstance(value, scalars):
        return value
    if isinstance(value, (list, tuple)) and all(
        item is None or isinstance(item, scalars) for item in value
    ):
        return value
    refuse(api, parameter, value, "a str, bool, int or float, or a list of them")
