"""Settings: ``init()`` arguments win over ``AGENTTRACE_*`` variables, which win over defaults.

The standard ``OTEL_*`` variables are honoured for what OpenTelemetry already names
(service name, OTLP endpoint and protocol, ``OTEL_SDK_DISABLED``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

logger = logging.getLogger("agenttrace")

ConsoleMode = Literal["quiet", "verbose", "trace"]
CONSOLE_MODES: tuple[ConsoleMode, ...] = ("quiet", "verbose", "trace")

DEFAULT_HOME = Path("~/.agenttrace")
DEFAULT_MAX_PAYLOAD_BYTES = 16384
DEFAULT_MAX_NESTING_DEPTH = 200

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything a user can set. Build with :meth:`Settings.resolve`."""

    service_name: str = "agenttrace"
    otlp_endpoint: str | None = None
    """Base endpoint (``http://host:4318`` or ``http://host:4317``); ``None``: no OTLP export."""
    otlp_protocol: str = "http/protobuf"
    disabled: bool = False
    sessions_dir: Path = DEFAULT_HOME / "sessions"
    billing_file: Path = DEFAULT_HOME / "accounting.jsonl"
    capture_content: bool = False
    """Message, argument and result content on spans (off by default, as the GenAI conventions
    say). The event stream and the session file keep content whatever this says."""
    content_events: bool = False
    """Content as the conventions' ``gen_ai.client.inference.operation.details`` log event
    (``EVENT_ONLY``/``SPAN_AND_EVENT`` under ``gen_ai_latest_experimental``)."""
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    console: ConsoleMode = "quiet"
    redacted_save: bool = False
    openinference: bool = False
    """Also put OpenInference's attributes on spans (``openinference.span.kind``, ``llm.*``,
    ``tool.name``): for Arize Phoenix and other OpenInference viewers."""
    max_nesting_depth: int = DEFAULT_MAX_NESTING_DEPTH
    """Reading a session file or stream: how many levels of JSON arrays and objects one event,
    and the rest of a session file, may nest (deeper is a ``SessionFileError``)."""

    @classmethod
    def resolve(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Settings from ``overrides`` (``None`` values ignored), then ``env``, then defaults."""
        env = os.environ if env is None else env
        values: dict[str, object] = {
            "service_name": env.get("OTEL_SERVICE_NAME") or cls.service_name,
            "otlp_endpoint": env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
            or None,
            "otlp_protocol": env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            or cls.otlp_protocol,
            "disabled": _flag(env, "OTEL_SDK_DISABLED", False),
            "sessions_dir": _path(env, "AGENTTRACE_SESSIONS_DIR", cls.sessions_dir),
            "billing_file": _path(env, "AGENTTRACE_BILLING_FILE", cls.billing_file),
            "capture_content": False,
            "content_events": False,
            **_content_capture(env),
            "max_payload_bytes": _int(
                env, "AGENTTRACE_MAX_PAYLOAD_BYTES", DEFAULT_MAX_PAYLOAD_BYTES
            ),
            "console": _console(env.get("AGENTTRACE_CONSOLE")),
            "redacted_save": _flag(env, "AGENTTRACE_REDACTED_SAVE", False),
            "openinference": _flag(env, "AGENTTRACE_OPENINFERENCE", False),
            "max_nesting_depth": _int(
                env, "AGENTTRACE_MAX_NESTING_DEPTH", DEFAULT_MAX_NESTING_DEPTH, "a count of levels"
            ),
        }
        for key, value in overrides.items():
            if key not in values:
                raise TypeError(f"unknown agenttrace setting: {key!r}")
            if value is not None:
                values[key] = value
        values["sessions_dir"] = Path(str(values["sessions_dir"])).expanduser()
        values["billing_file"] = Path(str(values["billing_file"])).expanduser()
        if values["console"] not in CONSOLE_MODES:
            raise ValueError(
                f"console must be one of {', '.join(CONSOLE_MODES)}, not {values['console']!r}"
            )
        return cls(**values)  # type: ignore[arg-type]


CAPTURE_MODES = ("NO_CONTENT", "SPAN_ONLY", "EVENT_ONLY", "SPAN_AND_EVENT")
"""``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` values under
``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` (else only ``true``/``false``)."""


def _content_capture(env: Mapping[str, str]) -> dict[str, bool]:
    """Where content goes: agenttrace's own ``AGENTTRACE_CAPTURE_CONTENT`` wins over the GenAI
    conventions' ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``; neither set: no content
    on spans or events (the saved state keeps it regardless)."""
    if env.get("AGENTTRACE_CAPTURE_CONTENT") is not None:
        return {"capture_content": _flag(env, "AGENTTRACE_CAPTURE_CONTENT", False)}
    raw = env.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
    if raw is None or not raw.strip():
        return {}
    value = raw.strip().upper()
    opt_in = "gen_ai_latest_experimental" in {
        part.strip() for part in env.get("OTEL_SEMCONV_STABILITY_OPT_IN", "").split(",")
    }
    if opt_in and value in CAPTURE_MODES:
        return {
            "capture_content": value in ("SPAN_ONLY", "SPAN_AND_EVENT"),
            "content_events": value in ("EVENT_ONLY", "SPAN_AND_EVENT"),
        }
    if value in ("TRUE", "FALSE"):
        return {"capture_content": value == "TRUE"}
    logger.warning(
        "agenttrace: OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=%r is not %s; no content "
        "on spans",
        raw,
        "true/false or " + "/".join(CAPTURE_MODES) if opt_in else "true/false",
    )
    return {}


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    logger.warning("agenttrace: %s=%r is not true/false; using %s", name, raw, default)
    return default


def _int(env: Mapping[str, str], name: str, default: int, what: str = "a size in bytes") -> int:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        logger.warning("agenttrace: %s=%r is not %s; using %d", name, raw, what, default)
        return default
    return value


def _path(env: Mapping[str, str], name: str, default: Path) -> Path:
    raw = env.get(name)
    return Path(raw) if raw else default


def _console(raw: str | None) -> ConsoleMode:
    if not raw:
        return "quiet"
    value = raw.strip().lower()
    for mode in CONSOLE_MODES:
        if value == mode:
            return mode
    logger.warning("agenttrace: AGENTTRACE_CONSOLE=%r is not quiet/verbose/trace; using quiet", raw)
    return "quiet"
