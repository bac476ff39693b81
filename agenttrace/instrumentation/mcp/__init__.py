"""MCP tool calls across processes: the client's ``execute_tool`` op and the server's work in one
trace and one session, with the official ``mcp`` SDK (2.x).

- client (:mod:`.client`): ``ClientSession.call_tool`` carries agenttrace's baggage beside the
  trace context the SDK puts in ``params._meta``; the tool op it runs in gets the MCP
  attributes, and a call in an agent run outside any op is a tool op of its own;
- notifications (:mod:`.notifications`): ``ClientSession.send_notification`` sends the
  current span's context in ``params._meta``, which the SDK gives requests only, so the
  server's span of ``notifications/initialized`` is in the client's trace, not a root;
- transports (:mod:`.transports`): where each session's requests go, so baggage goes to a
  stdio server, and to an HTTP one only on the allow-list;
- server (:mod:`.server`): the tool's handler runs joined to the client's op, so a root agent
  run it starts is a child of the client's ``execute_tool`` span, as a subprocess's is.

On by default under ``init()`` when ``mcp`` is imported (``init(instrument_mcp=False)``: not).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from agenttrace.instrumentation.base import (
    NO_OTHER_LIBRARY,
    LibraryInstrumentor,
    unwrap_attributes,
    wrap_attributes,
)
from agenttrace.instrumentation.mcp.client import call_tool_wrapper, list_tools_wrapper
from agenttrace.instrumentation.mcp.notifications import send_notification_wrapper
from agenttrace.instrumentation.mcp.server import compose_wrapper
from agenttrace.instrumentation.mcp.state import WHERE, state
from agenttrace.instrumentation.mcp.transports import transport_wrapper
from agenttrace.instrumentation.on_import import instrument_on_import

__all__ = ["MCPInstrumentor", "instrument_when_imported"]

_TRANSPORTS = (
    # (module that defines it, name, network.transport, reached by URL)
    ("mcp.client.stdio", "stdio_client", "pipe", False),
    ("mcp.client.streamable_http", "streamable_http_client", "tcp", True),
    ("mcp.client.sse", "sse_client", "tcp", True),
)


def _targets() -> Iterator[tuple[Any, str, Any]]:
    from mcp.client.session import ClientSession
    from mcp.server.runner import ServerRunner

    yield ClientSession, "call_tool", call_tool_wrapper
    yield ClientSession, "list_tools", list_tools_wrapper
    yield ClientSession, "send_notification", send_notification_wrapper
    yield ServerRunner, "_compose_server_middleware", compose_wrapper


def _patch() -> None:
    if state.patches:
        return
    wrap_attributes(state, _targets())
    for module_name, name, network, remote in _TRANSPORTS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # a transport this release lacks (or its extra missing)
            continue
        original = getattr(module, name, None)
        if original is None:
            continue
        wrap_attributes(state, [(module, name, transport_wrapper(network, remote))])
        _rebind(original, getattr(module, name), name)


def _rebind(original: Any, ours: Any, name: str) -> None:
    """Every module imported so far that holds ``original`` under ``name`` (``from
    mcp.client.stdio import stdio_client``: the ``mcp`` package, its own client, an agent
    framework's MCP module) gets ``ours`` there too, so a transport opened through it is seen
    (unpatching puts ``original`` back)."""
    for module in list(sys.modules.values()):
        try:
            found = vars(module).get(name) if module is not None else None
        except TypeError:  # a module object without a __dict__
            continue
        if found is original:
            setattr(module, name, ours)
            state.patches.append((module, name, ours))


def _unpatch() -> None:
    state.enabled = False
    unwrap_attributes(state)


class MCPInstrumentor(LibraryInstrumentor):
    """OpenTelemetry's instrumentor for the ``mcp`` SDK (see the module docstring).

    ``instrument()`` patches it and, if agenttrace is not set up yet (zero-code), sets it up on
    the providers it is given; ``uninstrument()`` puts it back as it was.
    """

    instruments = ("mcp >= 2.0",)
    init_options: ClassVar[dict[str, Any] | None] = {**NO_OTHER_LIBRARY, "instrument_mcp": False}

    def patch(self, **options: Any) -> None:
        """Patch the ``mcp`` SDK's client and server."""
        _patch()

    def unpatch(self) -> None:
        """Put the ``mcp`` SDK back as it was."""
        _unpatch()

    def patched(self) -> bool:
        """Whether the ``mcp`` SDK is patched."""
        return bool(state.patches)


def instrument_when_imported() -> Callable[[], None]:
    """Instrument ``mcp`` now if it is imported, else as soon as it is; returns the undo."""
    return instrument_on_import(MCPInstrumentor(), "mcp", WHERE)
