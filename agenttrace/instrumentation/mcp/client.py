"""The client side of an MCP tool call: the context goes out in ``params._meta``.

The ``mcp`` SDK (2.x) already puts the W3C trace context of the current span into the
``_meta`` of every request it sends (``inject`` through OpenTelemetry's global propagator,
inside its own ``MCP send tools/call {name}`` client span). What agenttrace adds, around
``ClientSession.call_tool``:

- the current OpenTelemetry context gets agenttrace's baggage (session id, txn ids, path label
  of the current op, writer id: ``agenttrace.tracing.travel.carried_context``) for the length of
  the call, so the SDK's own injection writes it beside ``traceparent``: one writer of the
  carrier, never two fighting over it;
- baggage only where it may go: a server started over stdio is this machine; one reached over
  streamable HTTP or SSE goes through the allow-list with its URL
  (``travel.baggage_allowed``); a transport agenttrace did not see opened gets no baggage at all
  (the application's own included), the trace context only;
- the tool op the call runs in (a framework's tool, an ``@agenttrace.tool``) is the call's
  ``execute_tool`` span: it gets the MCP attributes (``mcp.method.name``,
  ``network.transport``) and the server's name as its MCP server, and no second tool span is
  made (the GenAI conventions for MCP: an MCP client instrumentation that finds the tool
  execution traced adds to that span).
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

from opentelemetry import baggage
from opentelemetry import context as otel_context
from opentelemetry.context import Context

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace.instrumentation.base import PatchState
from agenttrace.tracing.scopes import OpScope, current_scope
from agenttrace.tracing.travel import baggage_allowed, carried_context

__all__ = ["WHERE", "call_tool_wrapper", "state", "transport_wrapper"]

WHERE = "the mcp instrumentation"

state = PatchState()

_LOCAL = "local"
"""A transport to this machine (stdio): baggage always allowed."""

_destinations: dict[int, tuple[Any, str, str]] = {}
"""``id()`` of an open transport's write stream -> (the stream, its destination: a URL or
``_LOCAL``, ``network.transport``), from its opening to its closing. By ``id``, holding the
stream: the SDK's streams cannot be weakly referenced."""


class _Remembered:
    """A transport's async context manager whose write stream is remembered with where it
    goes, as it is entered."""

    __slots__ = ("_destination", "_inner", "_key")

    def __init__(self, inner: Any, destination: tuple[str, str]) -> None:
        self._inner = inner
        self._destination = destination
        self._key: int | None = None

    async def __aenter__(self) -> Any:
        streams = await self._inner.__aenter__()
        if isinstance(streams, tuple) and len(streams) >= 2:
            self._key = id(streams[1])
            _destinations[self._key] = (streams[1], *self._destination)
        return streams

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> Any:
        if self._key is not None:
            _destinations.pop(self._key, None)
        return await self._inner.__aexit__(exc_type, exc, traceback)


def transport_wrapper(network: str, remote: bool) -> Callable[..., Any]:
    """wrapt's wrapper of a client transport (``stdio_client``, ``streamable_http_client``,
    ``sse_client``): its streams remembered with their destination (``remote``: the URL, the
    first argument; else this machine) and ``network`` (``network.transport``)."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        inner = wrapped(*args, **kwargs)
        if not state.enabled:
            return inner
        if not remote:
            return _Remembered(inner, (_LOCAL, network))
        url = args[0] if args else kwargs.get("url")
        return _Remembered(inner, (url, network)) if isinstance(url, str) else inner

    return wrapper


def _destination(session: Any) -> tuple[str, str] | None:
    """Where ``session``'s requests go, if agenttrace saw its transport opened."""
    dispatcher = getattr(session, "_dispatcher", None)
    stream = getattr(dispatcher, "_write_stream", None)
    entry = _destinations.get(id(stream))
    if entry is None or entry[0] is not stream:
        return None
    return entry[1], entry[2]


def _server_name(session: Any) -> str | None:
    """The server's name as it gave it at initialization (``serverInfo.name``)."""
    name = getattr(getattr(session, "server_info", None), "name", None)
    return name if isinstance(name, str) and name else None


def _outgoing(session: Any) -> Context | None:
    """The context the call runs in, with agenttrace's baggage where it may go; ``None``: the
    current one as it is (nothing of agenttrace's to carry)."""
    destination = _destination(session)
    scope = current_scope()
    if isinstance(scope, OpScope) and scope.kind == sc.KIND_TOOL:
        scope.set_attribute(sc.MCP_METHOD_NAME, "tools/call")
        if destination is not None:
            scope.set_attribute(sc.NETWORK_TRANSPORT, destination[1])
        server = _server_name(session)
        if server is not None and scope.outcome.mcp_server is None:
            # The span's start attributes are written: the ledger's mcpServer, and the span's
            scope.outcome.set_mcp_server(server)
            scope.set_attribute(sc.TOOL_MCP_SERVER, server)
    context = carried_context()
    if context is None:
        return None
    allowed = destination is not None and baggage_allowed(
        None if destination[0] == _LOCAL else destination[0]
    )
    return context if allowed else baggage.clear(context)


async def call_tool_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """wrapt's wrapper of ``ClientSession.call_tool``: the call, in the context it carries."""
    context: Context | None = None
    if state.enabled:
        try:
            context = _outgoing(instance)
        except Exception as exc:  # the call goes out as the SDK sends it
            report_internal_error(WHERE, exc)
    if context is None:
        return await wrapped(*args, **kwargs)
    token = otel_context.attach(context)
    try:
        return await wrapped(*args, **kwargs)
    finally:
        otel_context.detach(token)
