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
  execution traced adds to that span);
- a call made in an agent run outside any op (``session.call_tool`` in the agent's own code, a
  pydantic-ai ``MCPServer`` toolset) is that tool op itself: ``execute_tool {name}`` with its
  arguments, journaled by its effect class (``init(tool_effects=...)`` by the tool's name, else
  the annotations of a server in ``init(trusted_mcp_servers=...)``, as ``list_tools`` gave them,
  else ``effect``), and a re-entered run answers it from the journal with the
  ``CallToolResult`` rebuilt.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from types import TracebackType
from typing import Any

from opentelemetry import baggage
from opentelemetry import context as otel_context
from opentelemetry.context import Context

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace.instrumentation.base import PatchState
from agenttrace.tracing.decorators import _ToolSpec
from agenttrace.tracing.journal.effects import framework_effect
from agenttrace.tracing.scopes import OpScope, current_scope
from agenttrace.tracing.travel import baggage_allowed, carried_context
from agenttrace.tracing.wrapping import wrap

__all__ = ["WHERE", "call_tool_wrapper", "list_tools_wrapper", "state", "transport_wrapper"]

WHERE = "the mcp instrumentation"

state = PatchState()

_LOCAL = "local"
"""A transport to this machine (stdio): baggage always allowed."""

_annotations: weakref.WeakKeyDictionary[Any, dict[str, dict[str, Any]]] = (
    weakref.WeakKeyDictionary()
)
"""A client session -> its tools' annotations by name, as its last ``list_tools`` gave them."""

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
    if isinstance(scope, OpScope) and scope.kind != sc.KIND_LLM:  # a tool op (or one hosting)
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


async def _carried(
    wrapped: Any, session: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``wrapped(*args, **kwargs)`` in the context it carries to the server."""
    context: Context | None = None
    try:
        context = _outgoing(session)
    except Exception as exc:  # the call goes out as the SDK sends it
        report_internal_error(WHERE, exc)
    if context is None:
        return await wrapped(*args, **kwargs)
    token = otel_context.attach(context)
    try:
        return await wrapped(*args, **kwargs)
    finally:
        otel_context.detach(token)


class _ToolCall(_ToolSpec):
    """The op of an MCP tool call made in an agent run outside any op (a spec per call)."""

    where = WHERE

    def __init__(self, name: str, arguments: Any, effect: str) -> None:
        super().__init__(name, dict(arguments or {}), effect=effect)

    def open(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> OpScope:
        return super().open((), {})


def _call(name: str, arguments: Any = None, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """(the tool's name, its arguments) from ``call_tool``'s own arguments."""
    return name, arguments


def _own_op(wrapped: Any, session: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The call as a tool op of its own: the carried call, guarded for re-entry, in its op."""
    name, arguments = _call(*args, **kwargs)
    server = _server_name(session)
    annotations = _annotations.get(session, {}).get(name)
    effect = framework_effect(name, None, server=server, annotations=annotations)
    spec = _ToolCall(name, arguments, effect)

    # The guard reads the result's type (to rebuild a journaled one) through __wrapped__:
    # call_tool's own annotation, a CallToolResult.
    @functools.wraps(wrapped)
    async def carried(*args: Any, **kwargs: Any) -> Any:
        return await _carried(wrapped, session, args, kwargs)

    return wrap(spec.body(carried), spec, like=wrapped)


async def call_tool_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """wrapt's wrapper of ``ClientSession.call_tool``: the call, in the context it carries; in
    an agent run outside any op, in a tool op of its own."""
    if not state.enabled:
        return await wrapped(*args, **kwargs)
    scope = current_scope()
    if scope is not None and not isinstance(scope, OpScope):
        try:
            traced = _own_op(wrapped, instance, args, kwargs)
        except Exception as exc:  # the call runs untraced, as the SDK makes it
            report_internal_error(WHERE, exc)
            return await wrapped(*args, **kwargs)
        return await traced(*args, **kwargs)
    return await _carried(wrapped, instance, args, kwargs)


async def list_tools_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """wrapt's wrapper of ``ClientSession.list_tools``: the tools' annotations remembered
    (the effect class of a trusted server's tool)."""
    result = await wrapped(*args, **kwargs)
    if state.enabled:
        try:
            known = _annotations.setdefault(instance, {})
            for tool in getattr(result, "tools", None) or ():
                annotations = getattr(tool, "annotations", None)
                if annotations is not None:
                    known[tool.name] = annotations.model_dump(by_alias=True, exclude_none=True)
        except Exception as exc:  # the listing is the SDK's, whatever agenttrace makes of it
            report_internal_error(WHERE, exc)
    return result
