"""The SDK's own retries inside one ``create`` call (``max_retries``), as attempts of their own.

The SDK sends the request again itself after a 408/409/429/5xx answer, a timeout or a lost
connection, calling its client's ``_sleep_for_retry`` exactly when it has decided to: there the
attempt in flight ends as failed with the error the SDK would have raised, and the call's next
attempt starts, in the same turn, as litellm's instrumentation does for the SDK's retries
inside a litellm call (:mod:`agenttrace.instrumentation.litellm.sdk_retries`, whose code this
is). Both wrap the same method when both are on: whichever runs first ends the attempt, the
other then finds it ended and only sleeps.
"""

from __future__ import annotations

from typing import Any

from agenttrace._internal.runtime import runtime
from agenttrace.instrumentation.litellm.sdk_retries import RETRY_METHOD, retry
from agenttrace.instrumentation.litellm.tracking import live_var
from agenttrace.instrumentation.openai.request import state

__all__ = ["RETRY_METHOD", "retry_wrapper"]


def retry_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """For ``_sleep_for_retry`` (sync and async)."""
    attempt = live_var.get()
    if attempt is None or attempt.done or runtime.disabled or not state.enabled:
        return wrapped(*args, **kwargs)
    return retry(attempt, wrapped, instance, args, kwargs)
