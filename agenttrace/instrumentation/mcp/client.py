"""The client side of an MCP tool call: the context goes out in ``params._meta``.

The ``mcp`` SDK (2.x) already puts the W3C trace context of the current span into the
``_meta`` of every request it sends (``inject`` through OpenTelemetry's global propagator,
inside its own ``MCP send tools/call {name}`` client span). What agenttrace adds, around
``ClientSession.call_tool``:

- the current OpenTelemetry context gets agenttrace's baggage (session id, txn ids, path label
  of the current op, writer id: ``agenttrace.tracing.travel.carried_context``) for the length of
  the call, so the SDK's own injection writes it beside ``traceparent``: one writer of the
  carrier, never two fighting over it;
- baggage only where it may go (:mod:`.transports`): a server started over stdio is this
  machine; one reached over streamable HTTP or SSE goes through the allow-list with its URL; a
  transport agenttrace did not see opened gets no baggage at all (the application's own
  included), the trace context only;
- the tool op the call runs in (a framework's tool, an ``@agenttrace.tool``) is the call's
  ``execute_tool`` span: it gets the MCP attributes (``mcp.method.name``,
  ``network.transport``) and the server's name as its MCP server, and no second tool span is
  made (the GenAI conventions for MCP: an MCP client instrumentation that finds the tool
  execution traced adds to that span);
- a call made in an agent run outside any op (``session.call_tool`` in the agent's own code)
  is that tool op itself: ``execute_tool {name}`` with its
  arguments, journaled by its effect class (``init(tool_effects=...)`` by the tool's name, else
  the annotations of a server in ``init(trusted_mcp_servers=...)``, as ``list_tools`` gave them,
  else ``effect``), and a re-entered run answers it from the journal with the
  ``CallToolResult`` rebuilt.
"""

from __future__ import annotations

import functools
import weakref
from typing import Any

from opentelemetry import baggage
from opentelemetry import context as otel_context
from opentelemetry.context import Context

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace.instrumentation.mcp.state import WHERE, state
from agenttrace.instrumentation.mcp.transports import LOCAL, destination
from agenttrace.tracing.decorators import _ToolSpec
from agenttrace.tracing.journal.effects import framework_effect
from agenttrace.tracing.scopes import OpScope, current_scope
from agenttrace.tracing.travel import baggage_allowed, carried_context
from agenttrace.tracing.wrapping import wrap

__all__ = ["call_tool_wrapper", "carried_to", "list_tools_wrapper"]

_annotations: weakref.WeakKeyDictionary[Any, dict[str, dict[str, Any]]] = (
    weakref.WeakKeyDictionary()
)
"""A client session -> its tools' annotations by name, as its last ``list_tools`` gave them."""


def _server_name(session: Any) -> str | None:
    """The server's name as it gave it at initialization (``serverInfo.name``)."""
    name = getattr(getattr(session, "server_info", None), "name", None)
    return name if isinstance(name, str) and name else None


def _outgoing(session: Any) -> Context | None:
    """The context the call runs in, with agenttrace's baggage where it may go; ``None``: the
    current one as it is (nothing of agenttrace's to carry)."""
    going = destination(session)
    scope = current_scope()
    if isinstance(scope, OpScope) and scope.kind != sc.KIND_LLM:  # a tool op (or one hosting)
        scope.set_attribute(sc.MCP_METHOD_NAME, "tools/call")
        if going is not None:
            scope.set_attribute(sc.NETWORK_TRANSPORT, going[1])
        server = _server_name(session)
        if server is not None and scope.outcome.mcp_server is None:
            # The span's start attributes are written: the ledger's mcpServer, and the span's
            scope.outcome.set_mcp_server(server)
            scope.set_attribute(sc.TOOL_MCP_SERVER, server)
    return carried_to(session)


def carried_to(session: Any) -> Context | None:
    """The current context as it goes to ``session``'s server: with agenttrace's baggage where
    it may go (:mod:`.transports`), with no baggage where it may not; ``None``: the current one
    as it is (nothing of agenttrace's to carry)."""
    context = carried_context()
    if context is None:
        return None
    going = destination(session)
    allowed = going is not None and baggage_allowed(None if going[0] == LOCAL else going[0])
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
