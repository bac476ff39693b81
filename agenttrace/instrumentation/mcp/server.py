"""The server side of an MCP tool call: the handler runs in the context the client sent.

Every inbound request of an ``mcp`` (2.x) server goes through ``ServerRunner``'s middleware
chain, composed per request by ``_compose_server_middleware(inner)``, ``inner`` being the
dispatch to the handler. agenttrace wraps ``inner``, so it runs innermost, inside the SDK's own
``OpenTelemetryMiddleware`` (whose ``tools/call {name}`` server span is already a child of the
context in ``params._meta``): for a ``tools/call`` whose ``_meta`` names a remote span, the
handler runs with that remote parent *joined* (``agenttrace.tracing.travel.joined_in``), as a
subprocess started with ``subprocess_env()`` joins, so a root agent run the tool starts is in
the client's trace, under its ``execute_tool`` span, and its ingress names the client's
session, op and writer. Where no span is current (the SDK's middleware taken out), the
extracted context is attached too, so the handler's spans still have the client's op as their
parent. agenttrace makes no span of its own here: the call's tool span is the client's.

A server that records where the client does (its environment names the sessions directory
it records into as the client's, ``AGENTTRACE_JOIN_SESSIONS_DIR``: a stdio server started by
an instrumented client; or the baggage names the store it ships to) records the run as a
writer of the client's session (``agenttrace.tracing.joined_writer``), as a subprocess or a
pool worker does; any other writes a session of its own.

Malformed baggage is logged once and dropped (the trace still joins); what the handler raises
passes through unchanged.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from agenttrace._internal.errors import report_internal_error
from agenttrace.instrumentation.mcp.state import WHERE, state
from agenttrace.session.state import Session, session_here, session_if_any
from agenttrace.tracing.joined_writer import writer_session
from agenttrace.tracing.travel import Joined, extract, joined_in, joined_or_warn

__all__ = ["compose_wrapper"]


def _joined(ctx: Any) -> tuple[Joined, otel_context.Context] | None:
    """The remote parent a ``tools/call`` request's ``_meta`` names, and its context."""
    if getattr(ctx, "method", None) != "tools/call":
        return None
    meta = getattr(ctx, "meta", None)
    if not isinstance(meta, dict) or not meta:
        return None
    context = extract(meta)
    joined = joined_or_warn(context, "an MCP tool call's _meta")
    return None if joined is None else (joined, context)


def _writer_session(joined: Joined) -> Session | None:
    """The session the request's run records into as a writer of the client's session, if
    this server records where the client does and has no session of its own."""
    try:
        if session_if_any() is not None:  # one the server's program made: its choice
            return None
        return writer_session(joined, os.environ)
    except Exception as exc:  # the run records a session of its own
        report_internal_error(WHERE, exc)
        return None


def _joining(inner: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
    """``inner``, run in the remote parent its request names."""

    async def call(ctx: Any) -> Any:
        found = None
        try:
            found = _joined(ctx)
        except Exception as exc:  # the request is served, not joined
            report_internal_error(WHERE, exc)
        if found is None:
            return await inner(ctx)
        joined, context = found
        token = None
        if not trace.get_current_span().get_span_context().is_valid:
            token = otel_context.attach(context)
        try:
            with joined_in(joined), session_here(_writer_session(joined)):
                return await inner(ctx)
        finally:
            if token is not None:
                otel_context.detach(token)

    return call


def compose_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """wrapt's wrapper of ``ServerRunner._compose_server_middleware(inner)``: the chain, with
    ``inner`` joining the client's context."""
    if not state.enabled:
        return wrapped(*args, **kwargs)
    if args:
        return wrapped(_joining(args[0]), *args[1:], **kwargs)
    if "inner" in kwargs:
        return wrapped(**{**kwargs, "inner": _joining(kwargs["inner"])})
    return wrapped(*args, **kwargs)
