"""The HTTP carrier: the trace context and agenttrace's identity in request headers, both ways.

Client side, :func:`http_headers` gives the headers for one request: ``traceparent`` and
``tracestate`` always, ``baggage`` (agenttrace's session id, txn ids, path label, writer id,
with the application's own baggage) only when the URL's host is on the allow-list
(``travel.baggage_allowed``: loopback, ``init(baggage_hosts=...)``). A helper the caller hands
to httpx or requests, rather than a patch of those libraries: a patch would add the headers to
every request the process makes, the LLM SDKs' own calls to their providers included, and would
be a second writer of ``traceparent`` beside OpenTelemetry contrib's httpx and requests
instrumentations, which already inject the trace context of their client span into each
request (a child of the same op). Under them the request carries their ``traceparent`` and
still agenttrace's ``baggage``: their propagator writes ``baggage`` only from baggage the
application set in the OpenTelemetry context itself.

Server side, :class:`Middleware` is a plain ASGI middleware (no framework needed): a request
whose headers name a remote span runs with it *joined* (``travel.joined_in``), so a root agent
run its handler starts is a child of the client's op, in the client's trace, with an ingress
naming the client's session, op and writer, as a subprocess started with ``subprocess_env()``
joins. Under a server instrumentation that already made the request's span (contrib's ASGI
middleware outside this one), that span stays the parent; else the extracted context is
attached for the request. A malformed ``traceparent`` is ignored; malformed agenttrace baggage
is logged once and dropped (the trace still joins).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagators.textmap import Getter

from agenttrace._internal.errors import report_internal_error
from agenttrace.tracing.travel import extract, inject, joined_in, joined_or_warn

__all__ = ["Middleware", "http_headers"]

WHERE = "agenttrace.asgi.Middleware"


def http_headers(url: str, headers: Mapping[str, str] | None = None) -> dict[str, str]:
    """``headers`` (default: none) with the current trace context and, if ``url``'s host may
    have it, agenttrace's baggage, for one request to ``url``::

        httpx.post(url, json=task, headers=agenttrace.http_headers(url))
        requests.post(url, json=task, headers=agenttrace.http_headers(url, {"X-Key": key}))

    A header of ``headers`` that agenttrace writes (``traceparent``, ``tracestate``,
    ``baggage``, in any case) is replaced, never sent twice. Outside any span there is no
    trace context to carry: ``headers`` come back as they are (a process that joined passes
    on the op it joined, as ``subprocess_env`` does)."""
    carried: dict[str, str] = {}
    inject(carried, destination=url)
    written = {name.lower() for name in carried}
    result = {name: value for name, value in (headers or {}).items() if name.lower() not in written}
    result.update(carried)
    return result


class _HeaderGetter(Getter[Iterable[tuple[bytes, bytes]]]):
    """Reads a field from an ASGI scope's ``headers`` (lower-case byte pairs); repeated
    headers are joined with commas, as HTTP folds them."""

    def get(self, carrier: Iterable[tuple[bytes, bytes]], key: str) -> list[str] | None:
        wanted = key.lower().encode("latin-1")
        values = [value.decode("latin-1") for name, value in carrier if name.lower() == wanted]
        return [",".join(values)] if values else None

    def keys(self, carrier: Iterable[tuple[bytes, bytes]]) -> list[str]:
        return [name.decode("latin-1") for name, _ in carrier]


_GETTER = _HeaderGetter()

Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]


class Middleware:
    """ASGI middleware: each HTTP (or WebSocket) request that carries a trace context runs
    joined to the client's op (see the module docstring)::

        app = agenttrace.asgi.Middleware(app)  # any ASGI app: Starlette, FastAPI, your own

    ``lifespan`` and requests without a valid ``traceparent`` pass through untouched.
    """

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        found = None
        if scope.get("type") in ("http", "websocket"):
            try:
                context = extract(list(scope.get("headers") or ()), getter=_GETTER)
                joined = joined_or_warn(context, "a request's baggage header")
                if joined is not None:
                    found = joined, context
            except Exception as exc:  # the request is served, not joined
                report_internal_error(WHERE, exc)
        if found is None:
            await self.app(scope, receive, send)
            return
        joined, context = found
        token = None
        if not trace.get_current_span().get_span_context().is_valid:
            token = otel_context.attach(context)
        try:
            with joined_in(joined):
                await self.app(scope, receive, send)
        finally:
            if token is not None:
                otel_context.detach(token)
