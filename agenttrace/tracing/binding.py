"""Whether a decorated call is a method call: the first argument is the agent (or tool) object.

The rule is binding, never the first parameter's name (``def run(s)`` is a method as much as
``def run(self)``): a function defined in a class body is a method when it is called on an
instance of that class (on the class itself for a classmethod); a staticmethod never is, and a
function defined anywhere else never is.

Why two steps. At decoration time the function's ``__qualname__`` says where it was defined
(``Agent.run``, ``make.<locals>.Agent.run``; ``make.<locals>.run`` or ``run`` for a function),
but not whether ``@staticmethod`` will wrap it afterwards: the usual order,
``@staticmethod`` above ``@agent``, hands the decorator a plain function. A descriptor wrapper
(``__set_name__``/``__get__``) would see the binding but would change the type of what every
decorated function returns and is never told about a staticmethod wrapping it. So the class
is looked up at call time instead: the first argument's class (or, for a classmethod, the
argument itself) must have the defining class in its MRO, and the attribute there must not be
a staticmethod. The answer is remembered per class (a few dozen at most), so the usual call
costs one dictionary lookup.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_METHOD, _CLASSMETHOD, _UNBOUND = "method", "classmethod", "unbound"

_CLASSES_REMEMBERED = 64


class Binding:
    """How a call's first argument relates to the call: here, never the object it runs for."""

    __slots__ = ()

    def owner(self, args: tuple[Any, ...]) -> object | None:
        """The object (an instance, or a class for a classmethod) the call runs for, if any."""
        return None


class _Bound(Binding):
    """Always a method call: a method patched onto a class (``instrument_agent``)."""

    __slots__ = ()

    def owner(self, args: tuple[Any, ...]) -> object | None:
        return args[0] if args else None


PLAIN = Binding()
"""A function: its first argument is an argument."""

BOUND = _Bound()
"""A method patched onto a class: its first argument is the instance."""


class ClassBody(Binding):
    """A function defined in a class body: a method, a classmethod or a staticmethod, told
    apart at call time by the class the first argument belongs to."""

    __slots__ = ("_class", "_kinds", "_module", "_name")

    def __init__(self, module: str, class_qualname: str, name: str) -> None:
        self._module, self._class, self._name = module, class_qualname, name
        self._kinds: dict[type, str] = {}
        """What the function is on each class it was called for, up to
        :data:`_CLASSES_REMEMBERED` of them (then forgotten at once: classes made on the fly
        are not kept alive without bound)."""

    def owner(self, args: tuple[Any, ...]) -> object | None:
        if not args:
            return None
        first = args[0]
        if isinstance(first, type) and self._kind(first) == _CLASSMETHOD:
            return first
        # An instance; or a class: then the instance of a metaclass whose method this is.
        return first if self._kind(type(first)) == _METHOD else None

    def _kind(self, cls: type) -> str:
        kinds = self._kinds
        kind = kinds.get(cls)
        if kind is None:
            kind = self._kind_on(cls)
            if len(kinds) >= _CLASSES_REMEMBERED:
                kinds.clear()
            kinds[cls] = kind
        return kind

    def _kind_on(self, cls: type) -> str:
        """What the function is on ``cls``: a method, a classmethod, or not bound to it."""
        for klass in cls.__mro__:
            if klass.__qualname__ == self._class and klass.__module__ == self._module:
                attribute = klass.__dict__.get(self._name)
                if isinstance(attribute, staticmethod):
                    return _UNBOUND
                if isinstance(attribute, classmethod):
                    return _CLASSMETHOD
                # A function, or stored under another name (``go = run``): an instance method.
                return _METHOD
        return _UNBOUND  # called with something that is not of its class: a plain argument


def binding_of(fn: Callable[..., Any]) -> Binding:
    """How calls of ``fn`` (about to be decorated) are bound, from where it was defined."""
    qualname = getattr(fn, "__qualname__", None)
    module = getattr(fn, "__module__", None)
    if not isinstance(qualname, str) or not isinstance(module, str):
        return PLAIN
    defined_in, _, name = qualname.rpartition(".")
    if not defined_in or defined_in.endswith("<locals>"):
        return PLAIN  # at module level, or inside a function
    return ClassBody(module, defined_in, name)
