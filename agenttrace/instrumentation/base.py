"""What agenttrace's instrumentors do the same way, once.

Each is an OpenTelemetry ``BaseInstrumentor`` (so ``opentelemetry-instrument`` loads it from
its entry point) that checks the releases it supports, sets agenttrace up on the providers
``instrument()`` is given when it is not set up yet (zero-code), patches its library and puts it
back exactly as it was. A subclass says which releases, which ``init`` options, and how to
patch, unpatch and tell whether it is patched.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, ClassVar

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
