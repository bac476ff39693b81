"""Process-wide runtime state: settings, the tracer agenttrace starts spans with, the recorder.

``init()`` fills this in; before it (or with ``OTEL_SDK_DISABLED=true``) decorators still work:
they use the global OpenTelemetry tracer and record nowhere, or do nothing at all when disabled.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from opentelemetry import trace

from agenttrace._internal.config import Settings, _flag

INSTRUMENTATION_NAME = "agenttrace"


class Recorder(Protocol):
    """Receives every lifecycle record (``agenttrace.model.lifecycle``), in the caller's thread.

    Must be cheap and must not raise: it is called on every span start and end.
    """

    def record(self, record: Any) -> None:
        """Take one record."""
        ...

    def journal(self, session: Any, line: bytes | Callable[[], bytes], later: bool = False) -> None:
        """Emit one step-journal line of ``session`` as a record, on disk before the caller
        goes on (``later``: whenever, by the background worker, and ``line`` may be a
        callable making it)."""
        ...

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Consume every record so far and flush every output; whether all went well."""
        ...


def env_masking() -> bool:
    """``AGENTTRACE_MASK_SENSITIVE`` before ``init`` and after ``shutdown``: a process that only
    reads sessions (``agenttrace serve``, the commands) masks what it shows when it is set."""
    return _flag(os.environ, "AGENTTRACE_MASK_SENSITIVE", False)


class Runtime:
    """Mutable singleton; read on every span, written only by ``init``/``shutdown``."""

    __slots__ = ("disabled", "recorder", "settings", "setup", "tracer")

    def __init__(self) -> None:
        self.settings = Settings(mask_sensitive=env_masking())
        self.disabled = _flag(os.environ, "OTEL_SDK_DISABLED", False)
        self.tracer: trace.Tracer = trace.get_tracer(INSTRUMENTATION_NAME)
        self.recorder: Recorder | None = None
        self.setup: Any = None
        """``agenttrace.init``, registered by the SDK layer when it is imported, so that an
        instrumentor loaded on its own (zero-code instrumentation) can set agenttrace up
        without importing a layer above it."""

    def set_up_for(self, instrument_options: Mapping[str, Any], **init_options: Any) -> None:
        """What an instrumentor's ``_instrument`` does first: set agenttrace up on the providers
        given to ``instrument()`` (default: the global ones) with ``init_options``, unless it
        is set up already, disabled, or its SDK layer was never imported."""
        if self.recorder is None and self.setup is not None and not self.disabled:
            self.setup(
                tracer_provider=instrument_options.get("tracer_provider"),
                meter_provider=instrument_options.get("meter_provider"),
                **init_options,
            )


runtime = Runtime()
