"""The Claude Agent SDK's instrumentor: patching the SDK and undoing it, how the runs are
named, and the exchange log (the package's ``__init__`` exports them with :func:`.resume.rebuild`).

A module of its own, not the package's ``__init__``, so that :mod:`.resume`, which instruments
the SDK when it rebuilds an agent, imports it without the package importing :mod:`.resume`
back (``make lint`` finds every import cycle, imports inside functions included).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import wrapt

from agenttrace._internal.runtime import runtime
from agenttrace.instrumentation.base import NO_OTHER_LIBRARY, LibraryInstrumentor, own_attribute
from agenttrace.instrumentation.claude_agent_sdk.utils import (
    DEFAULT_AGENT_NAME,
    WHERE,
    MessageLog,
    Settings,
    state,
)
from agenttrace.instrumentation.on_import import instrument_on_import


class ClaudeAgentSDKInstrumentor(LibraryInstrumentor):
    """OpenTelemetry's instrumentor for the Claude Agent SDK: each exchange of ``query()`` or
    a ``ClaudeSDKClient`` becomes an agent run with its LLM attempts, tool calls and
    sub-agents, in agenttrace's agent/turn/op tree.

    ``instrument(tracer_provider=..., agent_name=..., exchange_log=...)`` patches the SDK and,
    if agenttrace is not set up yet (zero-code: ``opentelemetry-instrument`` loads this class
    from its ``opentelemetry_instrumentor`` entry point), sets it up on those providers first.
    ``uninstrument()`` ends the sessions still open and puts the SDK back as it was.
    """

    instruments = ("claude-agent-sdk >= 0.2.180",)
    init_options: ClassVar[dict[str, Any] | None] = NO_OTHER_LIBRARY

    def patch(self, **options: Any) -> None:
        """Patch the SDK; ``options`` name the runs and the exchange log (:func:`configure`)."""
        configure(options.get("agent_name"), options.get("exchange_log", False))
        _patch()

    def unpatch(self) -> None:
        """End the sessions still open and put the SDK back as it was."""
        _unpatch()

    def patched(self) -> bool:
        """Whether the SDK is patched."""
        return bool(state.patches)


def configure(
    agent_name: str | None = None,
    exchange_log: bool | Callable[[], MessageLog] = False,
) -> None:
    """Set how the instrumentation names the main agent's runs and whether it feeds an
    exchange log (``True``: ``agenttrace.ExchangeLogger`` in the sessions directory; a callable:
    a new log per SDK session)."""
    settings = state.settings
    settings.agent_name = agent_name or DEFAULT_AGENT_NAME
    if exchange_log is True:
        settings.exchange_log = _exchange_logger()
    elif callable(exchange_log):
        settings.exchange_log = exchange_log
    else:
        settings.exchange_log = None


def _exchange_logger() -> Callable[[], MessageLog]:
    """A factory of exchange loggers (``agenttrace.ExchangeLogger``), writing into the sessions
    directory."""
    try:
        from agenttrace.formats.exchange_log.writer import ExchangeLogger
    except ImportError as exc:
        raise RuntimeError(
            "exchange_log=True needs agenttrace.ExchangeLogger, which this build lacks"
        ) from exc

    def factory() -> MessageLog:
        logger: MessageLog = ExchangeLogger(sessions_dir=runtime.settings.sessions_dir)
        return logger

    return factory


def _patch() -> None:
    """Patch the SDK (imports it)."""
    if state.patches:
        return
    import claude_agent_sdk

    from agenttrace.instrumentation.claude_agent_sdk.patch import patch_targets

    for owner, name, wrapper in patch_targets(claude_agent_sdk):
        wrapt.wrap_function_wrapper(owner, name, wrapper)
        state.patches.append((owner, name, own_attribute(owner, name)))
    state.enabled = True


def _unpatch() -> None:
    """End the sessions still open; every patched attribute gets its original back (if
    another instrumentation wrapped ours since, ours stays inside theirs, passing through)."""
    state.enabled = False
    from agenttrace.instrumentation.claude_agent_sdk.patch import end_sessions

    end_sessions()
    for owner, name, ours in reversed(state.patches):
        if own_attribute(owner, name) is ours:
            setattr(owner, name, ours.__wrapped__)
    state.patches.clear()
    state.settings = Settings()


def instrument_when_imported(
    agent_name: str | None = None,
    exchange_log: bool | Callable[[], MessageLog] = False,
) -> Callable[[], None]:
    """Instrument the SDK now if it is imported, else as soon as it is; returns the undo."""
    configure(agent_name, exchange_log)
    return instrument_on_import(
        ClaudeAgentSDKInstrumentor(),
        "claude_agent_sdk",
        WHERE,
        agent_name=agent_name,
        exchange_log=exchange_log,
    )
