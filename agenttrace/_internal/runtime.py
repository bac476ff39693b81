"""Process-wide runtime state: the tracer agenttrace starts spans with, our processor, settings.

``init()`` fills this in; before it (or with ``OTEL_SDK_DISABLED=true``) decorators still work:
they use the global OpenTelemetry tracer, or do nothing at all when disabled.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from opentelemetry import trace

from agenttrace._internal.config import Settings, _flag

if TYPE_CHECKING:
    from agenttrace.sdk.processor import AgentTraceProcessor

INSTRUMENTATION_NAME = "agenttrace"


class Runtime:
    """Mutable singleton; read on every span, written only by ``init``/``shutdown``."""

    __slots__ = ("disabled", "processor", "settings", "tracer")

    def __init__(self) -> None:
        self.settings = Settings()
        self.disabled = _flag(os.environ, "OTEL_SDK_DISABLED", False)
        self.tracer: trace.Tracer = trace.get_tracer(INSTRUMENTATION_NAME)
        self.processor: AgentTraceProcessor | None = None


runtime = Runtime()
