"""What agenttrace's instrumentors do the same way, once.

Each is an OpenTelemetry ``BaseInstrumentor`` (so ``opentelemetry-instrument`` loads it from
its entry point) that checks the releases it supports, sets agenttrace up on the providers
``instrument()`` is given when it is not set up yet (zero-code), patches its library and puts it
back exactly as it was. A subclass says which releases, which ``init`` options, and how to
patch, unpatch and tell whether it is patched.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection, Iterable, Iterator
from typing import Any, ClassVar

import wrapt

# mypy does not see this class in opentelemetry-instrumentation 0.66b2 (it is there, in __all__).
from opentelemetry.instrumentation.instrumentor import (  # type: ignore[attr-defined]
    BaseInstrumentor,
)

from agenttrace._internal.runtime import runtime

NO_OTHER_LIBRARY: dict[str, Any] = {
    "instrument_litellm": False,
    "instrument_openai": False,
    "instrument_anthropic": False,
    "instrument_pydantic_ai": False,
}
"""``init`` options that instrument none of the LLM client libraries ``init`` turns on by
default: an LLM client's instrumentor, setting agenttrace up (zero-code), instruments only its
own library; ``opentelemetry-instrument`` loads each of the others from its own entry point."""


class LibraryInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """An instrumentor of one library (see the module docstring)."""

    instruments: ClassVar[tuple[str, ...]] = ()
    """The library releases supported, as pip requirements (checked by ``instrument``)."""
    init_options: ClassVar[dict[str, Any] | None] = {}
    """The ``init`` options agenttrace is set up with on ``instrument()`` when it is not yet;
    ``None``: never (an instrumentor ``init`` itself turns on)."""

    def instrumentation_dependencies(self) -> Collection[str]:
        """The releases this instrumentor supports (checked by ``instrument``)."""
        return self.instruments

    def _instrument(self, **kwargs: Any) -> None:
        if self.init_options is not None:
            runtime.set_up_for(kwargs, **self.init_options)
        self.patch(**kwargs)

    def _uninstrument(self, **kwargs: Any) -> None:
        self.unpatch()

    @property
    def is_instrumented(self) -> bool:
        """True while the library is patched."""
        return self.patched()

    def patch(self, **options: Any) -> None:
        """Patch the library (``options``: what ``instrument()`` was given)."""
        raise NotImplementedError

    def unpatch(self) -> None:
        """Put the library back as it was."""
        raise NotImplementedError

    def patched(self) -> bool:
        """Whether the library is patched now."""
        raise NotImplementedError


def own_attribute(owner: Any, name: str) -> Any:
    """The attribute itself (for a class, not the bound method its descriptor would give)."""
    return vars(owner).get(name) if isinstance(owner, type) else getattr(owner, name, None)


class PatchState:
    """What an instrumentation patched, and whether its wrappers trace (they pass calls straight
    through once it is unpatched, should another instrumentation have wrapped ours): one
    instance an instrumented library."""

    __slots__ = ("enabled", "patches")

    def __init__(self) -> None:
        self.enabled = False
        self.patches: list[tuple[Any, str, Any]] = []  # (owner, attribute, our FunctionWrapper)


def class_attributes(
    table: Iterable[tuple[str, str, str, Any]], *, missing_ok: bool = False
) -> Iterator[tuple[Any, str, Any]]:
    """The ``(owner, attribute, wrapper)`` of each ``(module, class, method, wrapper)`` of
    ``table`` whose class defines the method itself (a release without it: that path stays
    untraced). ``missing_ok``: a module or class the release lacks is passed over too (else
    its import error is raised)."""
    for module_name, class_name, method, wrapper in table:
        try:
            owner = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError):
            if not missing_ok:
                raise
            continue
        if method in vars(owner):
            yield owner, method, wrapper


def wrap_attributes(state: PatchState, targets: Iterable[tuple[Any, str, Any]]) -> None:
    """Wrap each ``(owner, attribute, wrapper)`` of ``targets`` with wrapt, note it in
    ``state`` and enable the wrappers."""
    for owner, name, wrapper in targets:
        wrapt.wrap_function_wrapper(owner, name, wrapper)
        state.patches.append((owner, name, own_attribute(owner, name)))
    state.enabled = True


def unwrap_attributes(state: PatchState) -> None:
    """Every attribute ``state`` patched gets its original back, last patched first. If another
    instrumentation wrapped one on top of ours, our layer stays inside theirs (disable the
    wrappers first: then it passes calls straight through)."""
    for owner, name, ours in reversed(state.patches):
        if ours is not None and own_attribute(owner, name) is ours:
            setattr(owner, name, ours.__wrapped__)
    state.patches.clear()
