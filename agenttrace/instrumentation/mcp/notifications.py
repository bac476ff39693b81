"""The client's MCP notifications carry the trace context, as its requests do.

The ``mcp`` SDK (2.x) injects the W3C context into the ``_meta`` of each request it sends, not
into a notification's (``ClientSession.send_notification``: ``notifications/initialized`` at
the end of ``initialize``, ``roots/list_changed``, ``progress``, ``cancelled``), while the
server's ``OpenTelemetryMiddleware`` opens a SERVER span for every inbound message, parented by
the context in its ``_meta``: a notification's span would be the root of a trace of its own.

Wrapped, a notification sent while a span is current goes out with that context in its
``params._meta``, written by OpenTelemetry's global propagator (``opentelemetry.propagate``:
the application's propagators decide the keys), with agenttrace's baggage under the rule a tool
call's follows (:func:`.client.carried_to`: to a stdio server, to an HTTP one on the
allow-list). The notification's own ``_meta`` wins: a ``traceparent`` the caller set leaves it
as it is, and no key of the caller's is overwritten. With no span current nothing is added.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

from agenttrace._internal.errors import report_internal_error
from agenttrace.instrumentation.mcp.client import carried_to
from agenttrace.instrumentation.mcp.state import WHERE, state

__all__ = ["send_notification_wrapper"]

_META = "_meta"


def _carrier(session: Any) -> dict[str, str]:
    """What the context of the current span puts in a ``_meta`` going to ``session``'s server
    (empty: no span current)."""
    context = carried_to(session)
    if context is None:
        context = otel_context.get_current()
    if not trace.get_current_span(context).get_span_context().is_valid:
        return {}
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=context)
    return carrier


def _params_with_meta(params: Any, carrier: dict[str, str]) -> Any:
    """``params`` (a ``NotificationParams`` model, a dict or ``None``) with ``carrier`` added
    to its ``_meta`` under the caller's keys; ``params`` itself if the caller set the trace
    context."""
    if params is None:
        from mcp.types import NotificationParams

        return NotificationParams.model_validate({_META: carrier})
    meta = params.get(_META) if isinstance(params, dict) else params.meta
    if meta is not None and not isinstance(meta, dict):
        return params  # a _meta agenttrace does not understand: the caller's, as it is
    if meta is not None and "traceparent" in meta:
        return params
    merged = {**carrier, **(meta or {})}
    if isinstance(params, dict):
        return {**params, _META: merged}
    # A copy of the model itself keeps its class and its other fields (a progress
    # notification's token, a cancellation's request id).
    return params.model_copy(update={"meta": merged})


def _with_context(session: Any, notification: Any) -> Any:
    """``notification`` with the current span's context in its ``params._meta``."""
    carrier = _carrier(session)
    if not carrier:
        return notification
    params = getattr(notification, "params", None)
    with_meta = _params_with_meta(params, carrier)
    if with_meta is params:
        return notification
    return notification.model_copy(update={"params": with_meta})


async def send_notification_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """wrapt's wrapper of ``ClientSession.send_notification(notification)``: the notification
    sent with the current span's context in its ``params._meta``."""
    if not state.enabled or not (args or "notification" in kwargs):
        return await wrapped(*args, **kwargs)
    original = args[0] if args else kwargs["notification"]
    try:
        carrying = _with_context(instance, original)
    except Exception as exc:  # the notification goes out as the SDK sends it
        report_internal_error(WHERE, exc)
        carrying = original
    if carrying is original:
        return await wrapped(*args, **kwargs)
    if args:
        return await wrapped(carrying, *args[1:], **kwargs)
    return await wrapped(*args, **{**kwargs, "notification": carrying})
