"""The SDK's own retries inside one ``messages.create`` call (``max_retries``), as attempts of
their own.

The SDK (made by the same generator as the OpenAI SDK) sends the request again itself after a
408/409/429/5xx answer, a timeout or a lost connection, calling its client's
``_sleep_for_retry`` exactly when it has decided to: there the attempt in flight ends as failed
with the error the SDK would have raised, and the call's next attempt starts, in the same turn,
with the litellm instrumentation's code for the same method
(:mod:`agenttrace.instrumentation.litellm.sdk_retries`).
"""

from __future__ import annotations

from agenttrace.instrumentation.anthropic.request import state
from agenttrace.instrumentation.litellm.sdk_retries import RETRY_METHOD, retry_wrapper_for

__all__ = ["RETRY_METHOD", "retry_wrapper"]

retry_wrapper = retry_wrapper_for(state)
"""For ``_sleep_for_retry`` (sync and async)."""
