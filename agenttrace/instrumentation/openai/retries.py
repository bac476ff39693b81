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

from agenttrace.instrumentation.litellm.sdk_retries import RETRY_METHOD, retry_wrapper_for
from agenttrace.instrumentation.openai.request import state

__all__ = ["RETRY_METHOD", "retry_wrapper"]

retry_wrapper = retry_wrapper_for(state)
"""For ``_sleep_for_retry`` (sync and async)."""
