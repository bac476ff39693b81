"""``init``, ``shutdown`` and ``force_flush``: wiring agenttrace into OpenTelemetry.

``init`` never replaces a TracerProvider the application already set: it adds our processor to
it. Only when there is none does it create one (and then, if an OTLP endpoint is configured, an
OTLP exporter behind a batch processor). ``OTEL_SDK_DISABLED=true`` makes agenttrace a no-op.

``shutdown`` writes agenttrace's own outputs first, then waits at most ``shutdown_timeout``
seconds for the exporters agenttrace made (spans and metrics at once), so a dead collector
costs the exit that long and no more (``agenttrace.sdk.export``).
"""

from __future__ import annotations

import atexit
import dataclasses
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

from agenttrace._internal.checks import check_number, check_text, refuse
from agenttrace._internal.config import ConsoleMode, Settings
from agenttrace._internal.errors import set_note_hook
from agenttrace._internal.extras import install_hint
from agenttrace._internal.finalizers import drain as drain_finalizers
from agenttrace._internal.redact import remember_environment_secrets
from agenttrace._internal.runtime import INSTRUMENTATION_NAME, env_masking, runtime
from agenttrace._version import __version__
from agenttrace.formats.stores import StoreError, open_store
from agenttrace.instrumentation.threading import instrument_threads
from agenttrace.recorder.console import ConsoleSink
from agenttrace.recorder.ledger import LedgerSink
from agenttrace.recorder.optree_builder import Node, OpTreeSink
from agenttrace.recorder.shipper import ShipperSink
from agenttrace.recorder.std008_live import Std008LiveSink
from agenttrace.recorder.store import EventStreamSink, SessionFileSink
from agenttrace.sdk.export import BoundedExport, in_background
from agenttrace.sdk.init_arguments import check_init_arguments
from agenttrace.sdk.instrumentors import library_module, library_name, start_instrumentor
from agenttrace.sdk.metrics import MetricsSink
from agenttrace.sdk.processor import AgentTraceProcessor
from agenttrace.session.leases import release_all as release_leases
from agenttrace.tracing.env_carrier import join_from_environment
from agenttrace.tracing.implicit import end_runs
from agenttrace.tracing.logs import record_note

logger = logging.getLogger("agenttrace")


class Tracing:
    """What ``init`` set up; ``shutdown`` undoes it (safe to call twice)."""

    def __init__(
        self,
        settings: Settings,
        provider: TracerProvider | None,
        processor: AgentTraceProcessor | None,
        owns_provider: bool,
        meter_provider: MeterProvider | None = None,
        export: BoundedExport | None = None,
    ) -> None:
        self.settings = settings
        self.provider = provider
        self.processor = processor
        self.owns_provider = owns_provider
        self.meter_provider = meter_provider
        """The meter provider agenttrace made for an OTLP endpoint (``None``: the app's)."""
        self.export = export
        """The OTLP span export agenttrace added (``None``: none, the app exports its own)."""
        self._undo: list[Callable[[], None]] = []
        self._libraries: set[str] = set()
        """The libraries ``instrument`` traces (by their name in ``INSTRUMENTORS``)."""
        self._shut_down = False

    @property
    def enabled(self) -> bool:
        """False when ``OTEL_SDK_DISABLED`` (or ``disabled=True``) made agenttrace a no-op."""
        return self.processor is not None

    def instrument(self, library: str, **options: Any) -> Callable[[], None]:
        """Trace ``library`` (a name in ``agenttrace.sdk.instrumentors.INSTRUMENTORS``) now if
        it is imported, else as soon as it is; ``shutdown()`` undoes it, and so does the undo
        returned. Again for the same library: nothing (the first options stay). An unknown name
        is a ``ValueError``."""
        check_text("Tracing.instrument", "library", library, optional=False)
        name = library_name(library)
        library_module(name)
        with _lock:
            if not self.enabled or self._shut_down or name in self._libraries:
                return _nothing
            undo = start_instrumentor(name, **options)
            self._libraries.add(name)
            self._undo.append(undo)

        def forget() -> None:
            with _lock:
                self._libraries.discard(name)
            undo()

        return forget

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Write out everything buffered: our outputs, then the provider's exporters."""
        # What collected objects left to do first (an abandoned stream's span ends there). No
        # lock is held here, so that work can take the recorder's.
        ok = drain_finalizers(timeout_millis / 1000)
        if self.processor is not None:
            # Implicit runs with no call running end now (a later call starts a new run).
            end_runs(idle_only=True)
            ok = self.processor.force_flush(timeout_millis)
        if self.provider is not None:
            ok = self.provider.force_flush(timeout_millis) and ok
        return ok

    def shutdown(self) -> None:
        """Flush, stop our processor, undo the litellm and thread patches; the provider too if we
        made it.

        Our outputs are written first; the exporters agenttrace made then get at most
        ``settings.shutdown_timeout`` seconds (see ``agenttrace.sdk.export``).
        """
        global _active
        with _lock:
            if self._shut_down:
                return
            self._shut_down = True
            if _active is self:
                _active = None
        atexit.unregister(self.shutdown)
        # As force_flush does, outside _lock, before anything is undone. A finalizer's failure
        # is raised only under the test suite: then after the rest is shut down.
        failure: Exception | None = None
        try:
            drain_finalizers(self.settings.shutdown_timeout)
        except Exception as exc:
            failure = exc
        end_runs()  # implicit runs still open end now, recorded
        for undo in reversed(self._undo):
            try:
                undo()
            except Exception:
                logger.exception("agenttrace: undoing instrumentation failed")
        if self.processor is not None:
            self.processor.shutdown()
        release_leases()  # the sessions' last lines are written: another process may resume them
        if runtime.settings is self.settings:
            # Masking is process-wide (the views mask too): it ends with the tracing that set it.
            runtime.settings = dataclasses.replace(self.settings, mask_sensitive=env_masking())
        budget = self.settings.shutdown_timeout
        deadline = time.monotonic() + budget
        metrics_done = None
        if self.meter_provider is not None:
            # At the same time as the spans, from the same budget.
            meters = self.meter_provider
            metrics_done = in_background(
                lambda: meters.shutdown(timeout_millis=budget * 1000), "agenttrace-metrics-shutdown"
            )
        if self.export is not None:
            self.export.shutdown()
        if self.provider is not None:
            if self.owns_provider:
                self.provider.shutdown()
            else:
                self.provider.force_flush()  # the application's exporters: not ours to bound
        if metrics_done is not None:
            outcome = metrics_done(deadline - time.monotonic())
            if outcome is not True:
                logger.warning(
                    "agenttrace: the GenAI metrics were not exported at shutdown: %s",
                    f"no answer within the {budget:g} s shutdown budget"
                    if outcome is False
                    else str(outcome).splitlines()[0],
                )
        runtime.tracer = trace.get_tracer(INSTRUMENTATION_NAME)
        if failure is not None:
            raise failure


_lock = threading.RLock()
_active: Tracing | None = None


def _nothing() -> None:
    """The undo of something that was not done."""


def init(
    *,
    service_name: str | None = None,
    endpoint: str | None = None,
    protocol: str | None = None,
    tracer_provider: TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    console: ConsoleMode | None = None,
    console_stream: TextIO | Callable[[], TextIO] | None = None,
    capture_content: bool | None = None,
    max_payload_bytes: int | None = None,
    max_reasoning_bytes: int | None = None,
    done_agents_kept: int | None = None,
    sessions_dir: str | Path | None = None,
    sessions_url: str | None = None,
    billing_file: str | Path | None = None,
    std008_dir: str | Path | None = None,
    redacted_save: bool | None = None,
    mask_sensitive: bool | None = None,
    openinference: bool | None = None,
    disabled: bool | None = None,
    instrument_litellm: bool = True,
    instrument_openai: bool = True,
    instrument_anthropic: bool = True,
    instrument_pydantic_ai: bool = True,
    instrument_mcp: bool = True,
    shutdown_timeout: float | None = None,
    propagate_threads: bool | None = None,
    instrument: Iterable[str] = (),
    input_deltas: bool | None = None,
    journal: bool | None = None,
    tool_effects: Mapping[str, str] | None = None,
    trusted_mcp_servers: Iterable[str] | None = None,
    baggage_hosts: Iterable[str] | None = None,
) -> Tracing:
    """Start tracing agent code; returns a handle whose ``shutdown()`` undoes it.

    Arguments win over ``AGENTTRACE_*`` and ``OTEL_*`` variables (docs/reference/settings.md).
    ``tracer_provider``: use this provider instead of the global one. ``endpoint``: export OTLP
    there (``http://host:4318`` for ``http/protobuf``, ``http://host:4317`` for ``grpc``); from
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` the exporter is only added to a provider agenttrace creates,
    since an application with its own provider has configured its own export.
    ``console_stream``: where console lines go (default: standard error; a text stream, or a
    callable that returns one). ``instrument_litellm``: patch litellm now, or as soon as it is
    imported; ``instrument_openai``: the same for the OpenAI SDK (docs/how-to/openai.md) and
    the OpenAI Agents SDK on it (docs/how-to/openai-agents.md);
    ``instrument_anthropic``: for the Anthropic SDK (docs/how-to/anthropic.md);
    ``instrument_pydantic_ai``: for pydantic-ai's agents (docs/how-to/pydantic-ai.md);
    ``sessions_url``: the session store the session files are shipped to as they are written
    (``file:///path``, ``s3://bucket/prefix``, ``postgresql://...``; default
    ``AGENTTRACE_SESSIONS_URL``; docs/how-to/session-stores.md).
    ``std008_dir``: a directory where each session's STD-008 document is written as the session
    runs, over ``<session id>.std008.json``, atomically, as it starts and as each sub-agent run
    starts and ends (default ``AGENTTRACE_STD008_DIR``; docs/std008.md, "Written live").
    ``max_reasoning_bytes``: the bound on one LLM attempt's reasoning in the saved state (its
    chunks are not capped by ``max_payload_bytes``, which caps its span event only).
    ``done_agents_kept``: how many done agents each session made after this keeps in memory
    before it evicts the oldest to its event stream (default 256, or
    ``AGENTTRACE_DONE_AGENTS_KEPT``; ``Session.done_agents_kept`` changes one session's):
    docs/how-to/long-agents.md.
    ``instrument_mcp``: for the ``mcp`` SDK's tool calls, which carry the trace and session to
    the server (docs/how-to/cross-process.md).
    ``instrument``: libraries to trace too, by name (``["smolagents", "claude_agent_sdk"]``;
    see ``agenttrace.sdk.instrumentors.INSTRUMENTORS``), now if imported, else as soon as they
    are; an unknown name is a ``ValueError``.
    ``meter_provider``: where the GenAI client metrics go (default: the global one; with none set,
    agenttrace makes one only when it made the tracer provider and an OTLP endpoint is set).
    ``shutdown_timeout``: seconds ``shutdown`` (and the exit) waits for the exporters agenttrace
    made; the spans not exported by then are dropped and counted in one warning.
    ``propagate_threads``: threads and ``concurrent.futures`` pool tasks started inside an agent
    run, turn or op run in it (default on; ``False`` or ``AGENTTRACE_PROPAGATE_THREADS=false``:
    they start with no context, as Python makes them).
    ``input_deltas``: an LLM span's input messages are only those after the agent's previous
    reply (default on; ``False`` or ``AGENTTRACE_INPUT_DELTAS=false``: the whole request).
    ``journal``: tool calls that are not ``pure`` write their intent before their body runs and
    their outcome after, in the event stream (docs/journal.md; default on; ``False`` or
    ``AGENTTRACE_JOURNAL=false``: not).
    ``tool_effects``: the effect class of smolagents, Claude Agent SDK and OpenAI Agents SDK
    tools by name
    (``{"web_search": "read"}``), over what the tool itself declares; ``trusted_mcp_servers``:
    the MCP servers whose tool annotations are believed (docs/how-to/effects.md, "Effect classes
    of framework
    tools"). ``baggage_hosts``: hosts besides loopback that agenttrace's baggage (session id,
    op, writer) may be sent to (docs/how-to/cross-process.md).
    ``mask_sensitive``: IP addresses and provider request ids masked in every output, the
    event stream and the session file included (docs/how-to/redaction.md, "Masking").

    A process started with ``TRACEPARENT`` (and ``BAGGAGE``) in its environment, as
    ``agenttrace.subprocess_env()`` makes it, joins the trace and session of the op that
    started it: its root agent runs start under that op's span.

    Calling ``init`` again while tracing is on returns the same handle and changes nothing but
    the libraries ``instrument`` adds. A wrong argument, on any call, is a ``TypeError`` or
    ``ValueError`` naming it (``agenttrace.sdk.init_arguments``).
    """
    global _active
    names = check_init_arguments(
        service_name=service_name,
        endpoint=endpoint,
        protocol=protocol,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        console=console,
        console_stream=console_stream,
        max_payload_bytes=max_payload_bytes,
        max_reasoning_bytes=max_reasoning_bytes,
        done_agents_kept=done_agents_kept,
        sessions_dir=sessions_dir,
        billing_file=billing_file,
        std008_dir=std008_dir,
        shutdown_timeout=shutdown_timeout,
        instrument=instrument,
        tool_effects=tool_effects,
        trusted_mcp_servers=trusted_mcp_servers,
        baggage_hosts=baggage_hosts,
        sessions_url=sessions_url,
        flags={
            "capture_content": capture_content,
            "redacted_save": redacted_save,
            "mask_sensitive": mask_sensitive,
            "openinference": openinference,
            "disabled": disabled,
            "instrument_litellm": instrument_litellm,
            "instrument_openai": instrument_openai,
            "instrument_anthropic": instrument_anthropic,
            "instrument_pydantic_ai": instrument_pydantic_ai,
            "instrument_mcp": instrument_mcp,
            "propagate_threads": propagate_threads,
            "input_deltas": input_deltas,
            "journal": journal,
        },
    )
    for name in names:  # a wrong name fails here, before anything is set up
        library_module(name)
    if sessions_url is not None:
        _check_store(sessions_url)
    with _lock:
        if _active is not None:
            logger.debug("agenttrace.init called again; keeping the first configuration")
            for name in names:
                _active.instrument(name)
            return _active
        settings = Settings.resolve(
            service_name=service_name,
            otlp_endpoint=endpoint,
            otlp_protocol=protocol,
            console=console,
            capture_content=capture_content,
            max_payload_bytes=max_payload_bytes,
            max_reasoning_bytes=max_reasoning_bytes,
            done_agents_kept=done_agents_kept,
            sessions_dir=sessions_dir,
            sessions_url=sessions_url,
            billing_file=billing_file,
            std008_dir=std008_dir,
            redacted_save=redacted_save,
            mask_sensitive=mask_sensitive,
            openinference=openinference,
            disabled=disabled,
            shutdown_timeout=shutdown_timeout,
            propagate_threads=propagate_threads,
            input_deltas=input_deltas,
            journal=journal,
            tool_effects=tool_effects,
            trusted_mcp_servers=trusted_mcp_servers,
            baggage_hosts=baggage_hosts,
        )
        runtime.settings = settings
        runtime.disabled = settings.disabled
        if settings.disabled:
            _active = Tracing(settings, None, None, owns_provider=False)
            return _active
        remember_environment_secrets()
        provider, owns = _provider(tracer_provider, settings)
        processor = _recorder(settings, provider, console_stream)
        provider.add_span_processor(processor)
        export = _export(settings, provider, owns, explicit=endpoint is not None)
        meters, owned_meters = _meter_provider(meter_provider, settings, owns, endpoint)
        processor.add_sink(MetricsSink(meters, __version__))
        runtime.recorder = processor
        runtime.tracer = provider.get_tracer(INSTRUMENTATION_NAME, __version__)
        handle = Tracing(settings, provider, processor, owns, owned_meters, export)
        _instrument_libraries(
            handle,
            names,
            instrument_litellm,
            instrument_openai,
            instrument_anthropic,
            instrument_pydantic_ai,
            instrument_mcp,
        )
        handle._undo.append(join_from_environment())
        atexit.register(handle.shutdown)  # before the finalizers: see _FINALIZERS_AFTER_EXIT
        _active = handle
        return handle


def _finalizers_after_exit() -> None:
    """Nothing: what :data:`_FINALIZERS_AFTER_EXIT` watches."""


# atexit runs the last registered hook first, and weakref registers the one that runs the
# finalizers left at exit at its first use, which may come after init() registered its own
# (the exit hook that ships the last of the session): s3fs closes each S3 client in a finalizer,
# which would then close the session store's client under that last shipment. A finalizer made
# at import registers weakref's hook before any init(), so the finalizers run after it.
_FINALIZERS_AFTER_EXIT = weakref.finalize(_finalizers_after_exit, _finalizers_after_exit)
_FINALIZERS_AFTER_EXIT.atexit = False


def _recorder(
    settings: Settings,
    provider: TracerProvider,
    console_stream: TextIO | Callable[[], TextIO] | None,
) -> AgentTraceProcessor:
    """agenttrace's span processor and the outputs it feeds, in the order they get a record:
    the event stream first (an event is on disk before ``log_*`` returns), the console, the
    opTree, the session file built from both, the ledger."""
    optree = OpTreeSink(
        resource=dict(provider.resource.attributes),
        scope={"name": INSTRUMENTATION_NAME, "version": __version__},
        spool_dir=settings.sessions_dir,
        recording={
            "captureContent": settings.capture_content,
            "maxPayloadBytes": settings.max_payload_bytes,
        },
    )
    stream = EventStreamSink(settings.sessions_dir, redacted=settings.redacted_save)
    # agenttrace's own warnings about an op or a run also go on its node (the logger keeps them).
    set_note_hook(record_note)
    session_file = SessionFileSink(
        settings.sessions_dir, optree, stream, redacted=settings.redacted_save
    )
    processor = AgentTraceProcessor(
        (
            stream,
            ConsoleSink(settings.console, console_stream, settings.max_payload_bytes),
            optree,
            session_file,
            LedgerSink(settings.billing_file),
        )
    )
    if settings.std008_dir is not None:  # after the session file, which it is made from
        processor.add_sink(
            Std008LiveSink(settings.std008_dir, session_file, settings.max_payload_bytes)
        )
    shipper = _shipper(settings)
    if shipper is not None:  # last: its flush ships what the others' flushes wrote
        session_file.on_write = shipper.written
        processor.add_sink(shipper)
    return processor


def _check_store(url: str) -> None:
    """``init(sessions_url=...)``: a URL no store takes is a ``ValueError`` (from
    ``AGENTTRACE_SESSIONS_URL`` it is a warning: :func:`_shipper`)."""
    try:
        open_store(url).close()
    except StoreError as error:
        raise ValueError(f"agenttrace.init: sessions_url: {error}") from None


def _shipper(settings: Settings) -> ShipperSink | None:
    """The sink that ships the session files to the store ``sessions_url`` names, if any; a
    URL no store takes is said once (the files are written locally all the same)."""
    if settings.sessions_url is None:
        return None
    try:
        store = open_store(settings.sessions_url)
    except StoreError as error:
        logger.warning(
            "agenttrace: AGENTTRACE_SESSIONS_URL: %s; sessions are written in %s only",
            error,
            settings.sessions_dir,
        )
        return None
    return ShipperSink(store, settings.sessions_dir, url=settings.sessions_url)


def _export(
    settings: Settings, provider: TracerProvider, owns: bool, explicit: bool
) -> BoundedExport | None:
    """An OTLP exporter on ``provider`` when an endpoint is given, or configured for a provider
    agenttrace made (an application's own provider has its own export)."""
    if not settings.otlp_endpoint or not (owns or explicit):
        return None
    export = BoundedExport(
        _otlp_exporter(settings, explicit=explicit),
        settings.shutdown_timeout,
        settings.otlp_endpoint,
    )
    provider.add_span_processor(export)
    return export


def _instrument_libraries(
    handle: Tracing,
    names: list[str],
    instrument_litellm: bool,
    instrument_openai: bool = True,
    instrument_anthropic: bool = True,
    instrument_pydantic_ai: bool = True,
    instrument_mcp: bool = True,
) -> None:
    """litellm and the OpenAI SDK (unless told not to), threads (unless ``propagate_threads``
    is off), and the libraries ``instrument`` names, each now or as soon as it is imported."""
    if instrument_litellm:
        from agenttrace.instrumentation.litellm import instrument_when_imported

        handle._undo.append(instrument_when_imported())
    if instrument_openai:
        from agenttrace.instrumentation import openai as openai_instrumentation

        handle._undo.append(openai_instrumentation.instrument_when_imported())
        # The Agents SDK's runs, agents and tools: its model calls are the OpenAI SDK's.
        from agenttrace.instrumentation import openai_agents

        handle._undo.append(openai_agents.instrument_when_imported())
    if instrument_anthropic:
        from agenttrace.instrumentation import anthropic as anthropic_instrumentation

        handle._undo.append(anthropic_instrumentation.instrument_when_imported())
    if instrument_pydantic_ai:
        from agenttrace.instrumentation import pydantic_ai as pydantic_ai_instrumentation

        handle._undo.append(pydantic_ai_instrumentation.instrument_when_imported())
    if instrument_mcp:
        from agenttrace.instrumentation import mcp as mcp_instrumentation

        handle._undo.append(mcp_instrumentation.instrument_when_imported())
    if handle.settings.propagate_threads:
        handle._undo.append(instrument_threads())
    for name in names:
        defaults = {
            "litellm": instrument_litellm,
            "openai": instrument_openai,
            "openai_agents": instrument_openai,
            "anthropic": instrument_anthropic,
            "pydantic_ai": instrument_pydantic_ai,
            "mcp": instrument_mcp,
        }
        if not defaults.get(library_name(name), False):
            handle.instrument(name)


runtime.setup = init


def instrument_claude_agent_sdk(
    *,
    agent_name: str | None = None,
    exchange_log: bool | Callable[[], Any] = False,
) -> Callable[[], None]:
    """Trace the Claude Agent SDK (``query()`` and ``ClaudeSDKClient``) now, or as soon as it
    is imported; returns the undo (``shutdown`` undoes it too). Calls ``init()`` with its
    defaults first if it has not run (call ``init`` first for other settings). Again: nothing,
    the first options stay. The same as ``init(instrument=["claude_agent_sdk"])``.

    ``agent_name`` names the main agent's runs (default ``claude-code``). ``exchange_log``:
    also write the exchange log (``agenttrace.ExchangeLogger``) in the sessions
    directory, one file per SDK session; a callable instead makes the log for each session.
    """
    return init().instrument("claude_agent_sdk", agent_name=agent_name, exchange_log=exchange_log)


def on_optree(callback: Callable[[Node], None], min_interval: float = 0.25) -> Callable[[], None]:
    """Call ``callback(root_session_node)`` as a run's opTree (docs/session-file.md) changes,
    at most every ``min_interval`` seconds and always when the run ends (on agenttrace's
    background thread; treat the tree as read-only, and copy what you keep: the tree is released
    when the run ends). Returns the unsubscribe."""
    if callback is None or not callable(callback):
        refuse("agenttrace.on_optree", "callback", callback, "a callable of the root node")
    check_number("agenttrace.on_optree", "min_interval", min_interval, least=0, optional=False)
    handle = _active
    if handle is None or handle.processor is None:
        return lambda: None
    for sink in handle.processor.sinks:
        if isinstance(sink, OpTreeSink):
            return sink.subscribe(callback, min_interval)
    return lambda: None


def instrument_smolagents() -> Callable[[], None]:
    """Trace smolagents agents (docs/how-to/smolagents.md): every agent run, step, tool call and
    managed agent. Imports smolagents now (the ``[smolagents]`` extra); calls
    ``init()`` with its defaults first if it has not run. Returns the undo; ``shutdown()`` undoes
    it too. The same as ``init(instrument=["smolagents"])``."""
    try:
        import smolagents  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"agenttrace.instrument_smolagents needs smolagents: {install_hint('smolagents')}"
        ) from exc
    return init().instrument("smolagents")


def shutdown() -> None:
    """Shut down what ``init`` set up (no-op if it was not called)."""
    handle = _active
    if handle is not None:
        handle.shutdown()


def force_flush(timeout_millis: int = 30000) -> bool:
    """Flush agenttrace's outputs and the provider's exporters."""
    handle = _active
    return handle.force_flush(timeout_millis) if handle is not None else True


def _provider(given: TracerProvider | None, settings: Settings) -> tuple[TracerProvider, bool]:
    if given is not None:
        return given, False
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current, False
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: settings.service_name}))
    trace.set_tracer_provider(provider)
    return provider, True


def _meter_provider(
    given: metrics.MeterProvider | None,
    settings: Settings,
    owns_tracing: bool,
    endpoint: str | None,
) -> tuple[metrics.MeterProvider, MeterProvider | None]:
    """The meter provider for the GenAI metrics, and the one agenttrace made (to shut down)."""
    if given is not None:
        return given, None
    current = metrics.get_meter_provider()
    # Metrics over OTLP only when asked for by OpenTelemetry's own variables: many trace
    # backends (Jaeger, Phoenix) take no metrics and would answer every export with an error.
    environ = os.environ
    wanted = bool(environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")) or "otlp" in {
        name.strip() for name in environ.get("OTEL_METRICS_EXPORTER", "").split(",")
    }
    if (
        isinstance(current, MeterProvider)
        or not wanted
        or not (settings.otlp_endpoint and (owns_tracing or endpoint is not None))
    ):
        return current, None  # the application's (a no-op one if it set none)
    reader = PeriodicExportingMetricReader(_otlp_metric_exporter(settings, endpoint is not None))
    made = MeterProvider(
        resource=Resource.create({SERVICE_NAME: settings.service_name}),
        metric_readers=[reader],
        shutdown_on_exit=False,  # our own exit hook shuts it down, within the budget
    )
    metrics.set_meter_provider(made)
    return made, made


def _otlp_metric_exporter(settings: Settings, explicit: bool) -> MetricExporter:
    endpoint: Any = settings.otlp_endpoint if explicit else None  # None: the exporter reads env
    if settings.otlp_protocol == "grpc" and _grpc_installed():
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        return OTLPMetricExporter(endpoint=endpoint)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
        OTLPMetricExporter as HTTPMetricExporter,
    )

    if endpoint is not None and not endpoint.rstrip("/").endswith("/v1/metrics"):
        endpoint = endpoint.rstrip("/") + "/v1/metrics"
    return HTTPMetricExporter(endpoint=endpoint)


def _grpc_installed() -> bool:
    """OTLP over gRPC is the ``[grpc]`` extra; without it, say so once and use HTTP."""
    import importlib.util

    if importlib.util.find_spec("opentelemetry.exporter.otlp.proto.grpc") is not None:
        return True
    logger.warning("agenttrace: OTLP over gRPC needs %s; using http/protobuf", install_hint("grpc"))
    return False


def _otlp_exporter(settings: Settings, explicit: bool) -> SpanExporter:
    endpoint: Any = settings.otlp_endpoint if explicit else None  # None: the exporter reads env
    if settings.otlp_protocol == "grpc" and _grpc_installed():
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=endpoint)
    if settings.otlp_protocol not in ("http/protobuf", "http", "grpc"):
        logger.warning(
            "agenttrace: OTLP protocol %r is not supported; using http/protobuf",
            settings.otlp_protocol,
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HTTPSpanExporter,
    )

    if endpoint is not None and not endpoint.rstrip("/").endswith("/v1/traces"):
        endpoint = endpoint.rstrip("/") + "/v1/traces"
    return HTTPSpanExporter(endpoint=endpoint)
