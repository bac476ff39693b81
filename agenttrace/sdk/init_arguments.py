"""The checks of ``init``'s arguments: each one's type and value, before anything is set up.

A wrong argument is the user's mistake: a ``TypeError`` or ``ValueError`` at the ``init`` call
naming it (``agenttrace._internal.checks``), not a setting that silently does nothing or a
failure deep in the first export. Checked on every call, the calls after the first included,
which change nothing else: a mistake there is one all the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from opentelemetry import metrics
from opentelemetry.sdk.trace import TracerProvider

from agenttrace._internal.checks import (
    check_choice,
    check_flag,
    check_number,
    check_path,
    check_text,
    refuse,
)
from agenttrace._internal.config import (
    CONSOLE_MODES,
    checked_effects,
    checked_hosts,
    checked_names,
)

API = "agenttrace.init"

PROTOCOLS = ("http/protobuf", "http", "grpc")
"""The OTLP protocols ``init(protocol=...)`` takes."""

FLAGS = (
    "capture_content",
    "redacted_save",
    "mask_sensitive",
    "openinference",
    "disabled",
    "instrument_litellm",
    "instrument_openai",
    "instrument_anthropic",
    "instrument_pydantic_ai",
    "instrument_mcp",
    "propagate_threads",
    "input_deltas",
    "journal",
)
"""``init``'s arguments that are True or False (``None``: from the environment)."""


_ALWAYS_GIVEN = (
    "instrument_litellm",
    "instrument_openai",
    "instrument_anthropic",
    "instrument_pydantic_ai",
    "instrument_mcp",
)
"""The flags whose default is True, not ``None``."""


def check_init_arguments(
    *,
    service_name: str | None,
    endpoint: str | None,
    protocol: str | None,
    tracer_provider: TracerProvider | None,
    meter_provider: metrics.MeterProvider | None,
    console: str | None,
    console_stream: Any,
    max_payload_bytes: int | None,
    sessions_dir: str | Path | None,
    billing_file: str | Path | None,
    std008_dir: str | Path | None,
    shutdown_timeout: float | None,
    instrument: Iterable[str],
    tool_effects: Mapping[str, str] | None,
    trusted_mcp_servers: Iterable[str] | None,
    flags: Mapping[str, bool | None],
    baggage_hosts: Iterable[str] | None = None,
    sessions_url: str | None = None,
    max_reasoning_bytes: int | None = None,
    done_agents_kept: int | None = None,
) -> list[str]:
    """Refuse a wrong argument of ``init``; returns ``instrument`` as a list of names."""
    check_text(API, "service_name", service_name)
    check_text(API, "endpoint", endpoint)
    if protocol is not None:
        check_choice(API, "protocol", protocol, PROTOCOLS)
    if tracer_provider is not None and not isinstance(tracer_provider, TracerProvider):
        # agenttrace adds its span processor to it: only the SDK's provider takes one.
        refuse(API, "tracer_provider", tracer_provider, "an opentelemetry.sdk.trace.TracerProvider")
    if meter_provider is not None and not isinstance(meter_provider, metrics.MeterProvider):
        refuse(API, "meter_provider", meter_provider, "an opentelemetry.metrics.MeterProvider")
    if console is not None:
        check_choice(API, "console", console, CONSOLE_MODES)
    _check_stream(console_stream)
    check_number(API, "max_payload_bytes", max_payload_bytes, least=1, whole=True)
    check_number(API, "max_reasoning_bytes", max_reasoning_bytes, least=1, whole=True)
    check_number(API, "done_agents_kept", done_agents_kept, least=0, whole=True)
    check_path(API, "sessions_dir", sessions_dir)
    check_path(API, "billing_file", billing_file)
    check_path(API, "std008_dir", std008_dir)
    check_text(API, "sessions_url", sessions_url)
    check_number(API, "shutdown_timeout", shutdown_timeout, least=0)
    for name, value in flags.items():
        check_flag(API, name, value, optional=name not in _ALWAYS_GIVEN)
    if tool_effects is not None:
        checked_effects(tool_effects)
    if trusted_mcp_servers is not None:
        checked_names(trusted_mcp_servers)
    if baggage_hosts is not None:
        checked_hosts(baggage_hosts)
    return _library_names(instrument)


def _check_stream(stream: Any) -> None:
    """``console_stream``: a text stream (it has ``write``), or a callable that returns one."""
    if stream is None or callable(getattr(stream, "write", None)) or callable(stream):
        return
    refuse(API, "console_stream", stream, "a text stream, or a callable that returns one")


def _library_names(instrument: Iterable[str] | str) -> list[str]:
    """``instrument`` as a list of library names: one name, or an iterable of them."""
    if isinstance(instrument, str):
        return [instrument]
    if isinstance(instrument, Mapping) or not isinstance(instrument, Iterable):
        refuse(API, "instrument", instrument, "a list of library names")
    names = list(instrument)
    for index, name in enumerate(names):
        if not isinstance(name, str):
            refuse(API, f"instrument[{index}]", name, "a library name")
    return names
