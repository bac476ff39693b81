"""Settings: ``init()`` arguments win over ``AGENTTRACE_*`` variables, which win over defaults.

The standard ``OTEL_*`` variables are honoured for what OpenTelemetry already names
(service name, OTLP endpoint, protocol and timeout, ``OTEL_SDK_DISABLED``).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

logger = logging.getLogger("agenttrace")

ConsoleMode = Literal["quiet", "verbose", "trace"]
CONSOLE_MODES: tuple[ConsoleMode, ...] = ("quiet", "verbose", "trace")

DEFAULT_HOME = Path("~/.agenttrace")
DEFAULT_MAX_PAYLOAD_BYTES = 16384
DEFAULT_MAX_REASONING_BYTES = 16 << 20
"""The bound on one LLM attempt's reasoning in the saved state, when nothing else is set."""
DEFAULT_DONE_AGENTS_KEPT = 256
"""How many done agents a session keeps in memory, when nothing else is set."""
DEFAULT_SHUTDOWN_TIMEOUT = 3.0
"""Seconds agenttrace waits for its OTLP exporter at shutdown when nothing else is set."""
DEFAULT_LEASE_TTL = 60.0
"""Seconds a session's lease in a store is taken for, when nothing else is set."""
MAX_LEASE_TTL = 366 * 24 * 3600
"""The longest lease (``agenttrace.formats.stores.lease.MAX_TTL``)."""
MIB = 1 << 20
DEFAULT_MAX_NESTING_DEPTH = 200

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


READ_LIMIT_VARIABLES: Mapping[str, str] = {
    "compressed_bytes": "AGENTTRACE_MAX_COMPRESSED_BYTES",
    "decompressed_bytes": "AGENTTRACE_MAX_DECOMPRESSED_BYTES",
    "stream_bytes": "AGENTTRACE_MAX_STREAM_BYTES",
    "line_bytes": "AGENTTRACE_MAX_LINE_BYTES",
    "compression_ratio": "AGENTTRACE_MAX_COMPRESSION_RATIO",
    "nesting_depth": "AGENTTRACE_MAX_NESTING_DEPTH",
}
"""The variable that sets each :class:`ReadLimits` field (the error past a limit names it)."""


RATIO_FREE_BYTES = 64 * MIB
"""A session file may always decompress to this much, whatever its compression ratio (a small
file of repetitive content is not a bomb)."""


_NOT_BYTES = {"compression_ratio": "a whole number", "nesting_depth": "a count of levels"}
"""What the limits that are not sizes are, for the warning about a value that is not one."""


@dataclasses.dataclass(frozen=True)
class ReadLimits:
    """How much a reader takes from one session file or stream before it refuses it
    (docs/how-to/hostile-files.md,
    "Limits"). Files users hand us are untrusted: these bound the time and memory one costs.

    The defaults are far above any real session (100,000 events make a 41 MB stream and a 5 MB
    session file) and far below what would exhaust a machine.
    """

    compressed_bytes: int = 256 * MIB
    """A session file's size on disk (gzip)."""
    decompressed_bytes: int = 1024 * MIB
    """What a session file decompresses to: its JSON document."""
    stream_bytes: int = 1024 * MIB
    """An event stream's size (the same JSON as a session file's events, so the same cap)."""
    line_bytes: int = 64 * MIB
    """One line of an event stream: one event (a whole model context is a few MB)."""
    compression_ratio: int = 100
    """How many times its size on disk a session file may decompress to, past the first
    :data:`RATIO_FREE_BYTES`: session JSON compresses 8-15x, a gzip bomb of zeros ~1,000x, so a
    1 MB bomb stops at 100 MB instead of running on to ``decompressed_bytes``."""
    nesting_depth: int = DEFAULT_MAX_NESTING_DEPTH
    """How many levels of JSON arrays and objects one event, and the rest of a session file,
    may nest (message content, ingress, ``meta``; a chain of sub-agents about 38 deep)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ReadLimits:
        """The limits the ``AGENTTRACE_MAX_*`` variables set (defaults for those unset)."""
        env = os.environ if env is None else env
        return cls(
            **{
                name: _int(
                    env, variable, getattr(cls, name), _NOT_BYTES.get(name, "a size in bytes")
                )
                for name, variable in READ_LIMIT_VARIABLES.items()
            }
        )


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything a user can set. Build with :meth:`Settings.resolve`."""

    service_name: str = "agenttrace"
    """The resource's service name (and an implicit agent's name)."""
    otlp_endpoint: str | None = None
    """Base endpoint (``http://host:4318`` or ``http://host:4317``); ``None``: no OTLP export."""
    otlp_protocol: str = "http/protobuf"
    """The OTLP exporter's protocol: ``http/protobuf`` or ``grpc``."""
    disabled: bool = False
    """True: agenttrace does nothing, and the code it would trace runs unchanged."""
    sessions_dir: Path = DEFAULT_HOME / "sessions"
    """Where event streams and session files are written (the command line looks them up
    there too: ``--sessions-dir``)."""
    sessions_url: str | None = None
    """The session store sessions are shipped to and read from (``file:///path``,
    ``s3://bucket/prefix``, ``postgresql://...``); ``None``: the sessions directory alone
    (docs/how-to/session-stores.md)."""
    lease_ttl: float = DEFAULT_LEASE_TTL
    """Seconds a session's lease in the store (``sessions_url``) is taken for; its holder renews
    it every third of that, and another host takes the session over once a holder stopped
    renewing for that long (docs/how-to/session-stores.md, "Leases across hosts")."""
    std008_dir: Path | None = None
    """Where each session's STD-008 document is written as it runs, made when the session starts
    and written again as each sub-agent run starts and ends (``<session id>.std008.json``;
    docs/std008.md, "Written live"); ``None``: none (``agenttrace export --format std008``
    writes one from a recorded session)."""
    billing_file: Path = DEFAULT_HOME / "accounting.jsonl"
    """The billing ledger: one accounting entry a line, across sessions."""
    capture_content: bool = False
    """Message, argument and result content on spans (off by default, as the GenAI conventions
    say). The event stream and the session file keep content whatever this says."""
    content_events: bool = False
    """Content as the conventions' ``gen_ai.client.inference.operation.details`` log event
    (``EVENT_ONLY``/``SPAN_AND_EVENT`` under ``gen_ai_latest_experimental``)."""
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES
    """The cap on one payload on a span (also on log messages, console bodies, and each string
    the exports and the command line show)."""
    max_reasoning_bytes: int = DEFAULT_MAX_REASONING_BYTES
    """The bound on one LLM attempt's reasoning in the event stream's session file and the
    opTree, all its chunks together (``AGENTTRACE_MAX_REASONING_BYTES``): no chunk is capped by
    ``max_payload_bytes``, which caps its span event only. It keeps a hostile or broken provider
    from filling memory and the session file; what is past it is cut, with a marker."""
    done_agents_kept: int = DEFAULT_DONE_AGENTS_KEPT
    """How many done agents a session keeps in memory before it evicts the oldest to its
    event stream (``AGENTTRACE_DONE_AGENTS_KEPT``; each session's ``done_agents_kept`` starts
    at it): docs/how-to/long-agents.md."""
    console: ConsoleMode = "quiet"
    """Console lines: ``quiet``, ``verbose`` or ``trace``."""
    redacted_save: bool = False
    """Redact the event stream and the session file too (they keep content verbatim by default:
    they are the state a run resumes from)."""
    mask_sensitive: bool = False
    """Mask IP addresses (``[IP]``) and provider request ids (``chatcmpl-[ID]``) in every
    output: spans, console, ledger, event stream, session file, ingress, exports and ``serve``
    (``AGENTTRACE_MASK_SENSITIVE``; docs/how-to/redaction.md, "Masking")."""
    openinference: bool = False
    """Also put OpenInference's attributes on spans (``openinference.span.kind``, ``llm.*``,
    ``tool.name``): for Arize Phoenix and other OpenInference viewers."""
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT
    """Seconds ``shutdown`` (and so the exit) waits for the OTLP exporter agenttrace set up;
    what is not exported by then is dropped, with one warning saying how many spans."""
    read_limits: ReadLimits = ReadLimits()
    """Caps on what reading one session file or stream may take (``AGENTTRACE_MAX_*``)."""
    propagate_threads: bool = True
    """Threads and ``concurrent.futures`` pool tasks started inside an agent run, turn or op
    run in the context of the code that started them (``AGENTTRACE_PROPAGATE_THREADS``)."""
    input_deltas: bool = True
    """An LLM span's input messages are those after the agent's previous reply, when its request
    extends what was logged (``AGENTTRACE_INPUT_DELTAS``); off: the whole request on every span."""
    journal: bool = True
    """Tool calls that are not ``pure`` journal their intent before their body runs and their
    outcome after, LLM attempts their request's fingerprint and their response, in the event
    stream (docs/journal.md); off: no journal, and a resume cannot re-enter a killed run."""
    tool_effects: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """The effect class of framework tools by name (smolagents, the Claude Agent SDK):
    ``AGENTTRACE_TOOL_EFFECTS=web_search=read,charge=effect``; wins over what the tool says."""
    trusted_mcp_servers: frozenset[str] = frozenset()
    """MCP servers whose tool annotations (``readOnlyHint``, ``idempotentHint``) are believed
    as effect classes (``AGENTTRACE_TRUSTED_MCP_SERVERS=calculator,files``)."""
    baggage_hosts: frozenset[str] = frozenset()
    """Hosts, besides loopback, that agenttrace's baggage (session id, op, writer) may be sent
    to (``AGENTTRACE_BAGGAGE_HOSTS=api.internal,10.0.0.7``): the user's own."""

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
            "sessions_url": env.get("AGENTTRACE_SESSIONS_URL", "").strip() or None,
            "lease_ttl": _lease_ttl(env),
            "std008_dir": env.get("AGENTTRACE_STD008_DIR", "").strip() or None,
            "billing_file": _path(env, "AGENTTRACE_BILLING_FILE", cls.billing_file),
            "capture_content": False,
            "content_events": False,
            **_content_capture(env),
            "max_payload_bytes": _int(
                env, "AGENTTRACE_MAX_PAYLOAD_BYTES", DEFAULT_MAX_PAYLOAD_BYTES
            ),
            "max_reasoning_bytes": _int(
                env, "AGENTTRACE_MAX_REASONING_BYTES", DEFAULT_MAX_REASONING_BYTES
            ),
            "done_agents_kept": _int(
                env, "AGENTTRACE_DONE_AGENTS_KEPT", DEFAULT_DONE_AGENTS_KEPT, "a count"
            ),
            "console": _console(env.get("AGENTTRACE_CONSOLE")),
            "redacted_save": _flag(env, "AGENTTRACE_REDACTED_SAVE", False),
            "mask_sensitive": _flag(env, "AGENTTRACE_MASK_SENSITIVE", False),
            "openinference": _flag(env, "AGENTTRACE_OPENINFERENCE", False),
            "shutdown_timeout": _shutdown_timeout(env),
            "read_limits": ReadLimits.from_env(env),
            "propagate_threads": _flag(env, "AGENTTRACE_PROPAGATE_THREADS", True),
            "input_deltas": _flag(env, "AGENTTRACE_INPUT_DELTAS", True),
            "journal": _flag(env, "AGENTTRACE_JOURNAL", True),
            "tool_effects": _tool_effects(env.get("AGENTTRACE_TOOL_EFFECTS")),
            "trusted_mcp_servers": _names(env.get("AGENTTRACE_TRUSTED_MCP_SERVERS")),
            "baggage_hosts": _names(env.get("AGENTTRACE_BAGGAGE_HOSTS")),
        }
        for key, value in overrides.items():
            if key not in values:
                raise TypeError(f"unknown agenttrace setting: {key!r}")
            if value is not None:
                values[key] = value
        values["tool_effects"] = checked_effects(values["tool_effects"])
        values["trusted_mcp_servers"] = checked_names(values["trusted_mcp_servers"])
        values["baggage_hosts"] = checked_hosts(values["baggage_hosts"])
        values["sessions_dir"] = Path(str(values["sessions_dir"])).expanduser()
        values["billing_file"] = Path(str(values["billing_file"])).expanduser()
        if values["std008_dir"] is not None:
            values["std008_dir"] = Path(str(values["std008_dir"])).expanduser()
        timeout = values["shutdown_timeout"]
        if not isinstance(timeout, (int, float)) or not 0 <= timeout < math.inf:
            raise ValueError(f"shutdown_timeout must be seconds >= 0, not {timeout!r}")
        values["shutdown_timeout"] = float(timeout)
        ttl = values["lease_ttl"]
        if not isinstance(ttl, (int, float)) or not 0 < ttl <= MAX_LEASE_TTL:
            raise ValueError(f"lease_ttl must be seconds above 0, up to a year, not {ttl!r}")
        values["lease_ttl"] = float(ttl)
        if values["console"] not in CONSOLE_MODES:
            raise ValueError(
                f"console must be one of {', '.join(CONSOLE_MODES)}, not {values['console']!r}"
            )
        return cls(**values)  # type: ignore[arg-type]


EFFECT_CLASSES = ("pure", "read", "idempotent", "effect")
"""A tool's effect class (``agenttrace.model.journal.EFFECTS`` says what each means)."""


def _tool_effects(raw: str | None) -> dict[str, str]:
    """``name=class,name=class`` (from ``AGENTTRACE_TOOL_EFFECTS``): a pair that is not one is
    left out with a warning (a tool it names stays ``effect``, the safe class)."""
    effects: dict[str, str] = {}
    for pair in (raw or "").split(","):
        if not pair.strip():
            continue
        name, _, effect = (part.strip() for part in pair.partition("="))
        if name and effect in EFFECT_CLASSES:
            effects[name] = effect
        else:
            logger.warning(
                "agenttrace: AGENTTRACE_TOOL_EFFECTS: %r is not NAME=%s; ignored",
                pair,
                "|".join(EFFECT_CLASSES),
            )
    return effects


def _names(raw: str | None) -> frozenset[str]:
    return frozenset(name.strip() for name in (raw or "").split(",") if name.strip())


def checked_names(names: object) -> frozenset[str]:
    """``init(trusted_mcp_servers=...)``: server names (a list, a set), not one string."""
    found = () if isinstance(names, str) else tuple(names) if isinstance(names, Iterable) else ()
    if (not found and names) or not all(isinstance(name, str) for name in found):
        raise TypeError(f"trusted_mcp_servers must be server names, not {names!r}")
    return frozenset(found)


def checked_hosts(hosts: object) -> frozenset[str]:
    """``init(baggage_hosts=...)``: host names (a list, a set), not one string; kept lower
    case, as URLs name hosts."""
    found = () if isinstance(hosts, str) else tuple(hosts) if isinstance(hosts, Iterable) else ()
    if (not found and hosts) or not all(isinstance(host, str) and host for host in found):
        raise TypeError(f"baggage_hosts must be host names, not {hosts!r}")
    return frozenset(host.lower().rstrip(".") for host in found)


def checked_effects(effects: object) -> dict[str, str]:
    """``init(tool_effects=...)``: a mapping of tool names to effect classes, or a
    ``ValueError`` naming what is not."""
    if not isinstance(effects, Mapping):
        raise TypeError(f"tool_effects must map tool names to effect classes, not {effects!r}")
    for name, effect in effects.items():
        if not isinstance(name, str) or effect not in EFFECT_CLASSES:
            raise ValueError(
                f"tool_effects: {name!r} maps to {effect!r}; an effect class is one of "
                f"{', '.join(EFFECT_CLASSES)}"
            )
    return dict(effects)


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


def _lease_ttl(env: Mapping[str, str]) -> float:
    """``AGENTTRACE_LEASE_TTL``: seconds above 0 and up to a year (a lease is renewed long before
    that); anything else is warned about once and the default used."""
    raw = env.get("AGENTTRACE_LEASE_TTL")
    value = _seconds(env, "AGENTTRACE_LEASE_TTL", warn=False)
    if value is not None and 0 < value <= MAX_LEASE_TTL:
        return value
    if raw is not None and raw.strip():
        logger.warning(
            "agenttrace: AGENTTRACE_LEASE_TTL=%r is not seconds above 0 and up to %d; using %g",
            raw,
            MAX_LEASE_TTL,
            DEFAULT_LEASE_TTL,
        )
    return DEFAULT_LEASE_TTL


def _shutdown_timeout(env: Mapping[str, str]) -> float:
    """``AGENTTRACE_SHUTDOWN_TIMEOUT``, else the OTLP exporter's own per-export timeout
    (``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT``, then ``OTEL_EXPORTER_OTLP_TIMEOUT``: seconds, as the
    Python exporters read them), else the default. An exporter told to wait 1 s for an export is
    not waited for 10 s at exit, and one given 30 s gets them."""
    own = _seconds(env, "AGENTTRACE_SHUTDOWN_TIMEOUT", warn=True)
    if own is not None:
        return own
    for name in ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"):
        # Not warned about: the exporter itself says when it cannot read them.
        value = _seconds(env, name, warn=False)
        if value is not None:
            return value
    return DEFAULT_SHUTDOWN_TIMEOUT


def _seconds(env: Mapping[str, str], name: str, warn: bool) -> float | None:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if 0 <= value < math.inf:
        return value
    if warn:
        logger.warning("agenttrace: %s=%r is not seconds >= 0; ignoring it", name, raw)
    return None


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
