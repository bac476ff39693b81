"""The OpenAI SDK's retries inside one litellm call, as attempts of their own.

litellm hands ``max_retries`` (and, in litellm 1.105, ``num_retries``) to the OpenAI SDK, which
then sends the request again itself after a 408/409/429/5xx answer, a timeout or a lost
connection; litellm only sees the last answer. The SDK calls its client's ``_sleep_for_retry``
exactly when it has decided to retry, with the failed response (``None`` for a transport error,
which is then the exception being handled). Wrapped there, the attempt in flight ends as failed
with the error the SDK would have raised for that response, and once the SDK's back-off is over
the next attempt of the same logical call starts, in the same turn, as the current scope: each
HTTP request is one attempt span, and one step of the journal (the failed one ends as failed,
the next claims its own at its place, under the same request's fingerprint). An SDK without
that method keeps its retries invisible (one litellm call is one attempt).
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.runtime import runtime
from agenttrace.instrumentation.base import PatchState
from agenttrace.instrumentation.litellm.attempt import Attempt
from agenttrace.instrumentation.litellm.tracking import live_var, open_span, restore_parent
from agenttrace.instrumentation.litellm.utils import state
from agenttrace.tracing.journal.llm_steps import begin_llm_retry, step_fingerprint

__all__ = ["RETRY_METHOD", "retry", "retry_wrapper", "retry_wrapper_for"]

RETRY_METHOD = "_sleep_for_retry"
"""The method of ``openai._base_client.SyncAPIClient`` / ``AsyncAPIClient`` that is wrapped."""


class SDKRetryError(Exception):
    """A failed request the OpenAI SDK retried, when it cannot say what it would have raised."""


def retry_wrapper_for(instrumentation: PatchState) -> Callable[..., Any]:
    """The wrapper of ``_sleep_for_retry`` (sync and async) for an instrumentation whose
    attempts run in the SDK (litellm's, the OpenAI and Anthropic SDKs'): end the attempt in
    flight, then (after the back-off) start the next one; while ``instrumentation`` is not
    enabled, the SDK only sleeps."""

    def retry_wrapper(
        wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        attempt = live_var.get()
        if attempt is None or attempt.done or runtime.disabled or not instrumentation.enabled:
            return wrapped(*args, **kwargs)
        return retry(attempt, wrapped, instance, args, kwargs)

    return retry_wrapper


retry_wrapper = retry_wrapper_for(state)
"""For ``_sleep_for_retry`` inside litellm's calls."""


def retry(
    attempt: Attempt, wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """What the retry wrapper does for the ``attempt`` in flight."""
    fingerprint = step_fingerprint(attempt.scope)  # the next attempt asks the same
    try:
        attempt.fail(_failure(instance, kwargs.get("response")))
    except Exception as exc:
        report_internal_error(attempt.request.where, exc)
    result = wrapped(*args, **kwargs)
    if inspect.isawaitable(result):
        return _then_next(result, attempt, fingerprint)
    _next(attempt, fingerprint)
    return result


async def _then_next(sleeping: Awaitable[Any], attempt: Attempt, fingerprint: str | None) -> Any:
    result = await sleeping
    _next(attempt, fingerprint)
    return result


def _failure(client: Any, response: Any) -> BaseException:
    """What the SDK would have raised had it not retried: its error for ``response`` (a
    ``RateLimitError`` for a 429, ...), or the transport error being handled."""
    handled = sys.exc_info()[1]
    if response is not None:
        make = getattr(client, "_make_status_error_from_response", None)
        error: Any = None
        if callable(make):
            with contextlib.suppress(Exception):  # then described by its status below
                error = make(response)
        if isinstance(error, BaseException):
            return error
        status = getattr(response, "status_code", "?")
        return SDKRetryError(f"HTTP {status}; the OpenAI SDK retried the request")
    if handled is not None:
        return handled
    return SDKRetryError("the OpenAI SDK retried the request")


def _next(attempt: Attempt, fingerprint: str | None) -> None:
    """Start the logical call's next attempt for the SDK's next request, as the current scope
    (in the context litellm's call runs in: it is current until that call returns), and its
    step in the journal (``fingerprint``: the request's, if the failed attempt was journaled)."""
    if not attempt.done or not attempt.active:
        return
    try:
        undo = restore_parent(attempt)  # the new span is a sibling, not a child, of the failed
        try:
            opened = open_span(attempt.request, attempt.call)
        finally:
            if undo is not None:
                undo()
        if opened is None:
            return
        attempt.restart(*opened)
        begin_llm_retry(attempt.scope, attempt.model, fingerprint)
        # Dropped on purpose: the call's own undo of its first activation resets these too.
        attempt.scope.activate()
    except Exception as exc:
        report_internal_error(attempt.request.where, exc)
