"""Streams: litellm's stream behind a proxy that ends the attempt's span exactly once.

The proxy keeps litellm's own ``CustomStreamWrapper`` type (a ``wrapt.ObjectProxy``). The span
ends when the stream is exhausted, closed, fails or is garbage-collected, with the response
litellm assembles from the chunks, the time to the first chunk, and tokens counted by litellm
when the provider streamed none (:mod:`.stream_proxy`, which the SDKs' streams share).
"""

from __future__ import annotations

import sys
from typing import Any

from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace.instrumentation.litellm.attempt import Attempt
from agenttrace.instrumentation.litellm.stream_proxy import ChunkProxy, StreamEnd, estimated_usage
from agenttrace.instrumentation.litellm.utils import cost_from_tokens
from agenttrace.tracing.llm_attributes import field


class _StreamState(StreamEnd):
    """A litellm stream's end: litellm assembles the reply from the chunks it stored."""

    __slots__ = ("stream", "streamed_usage")

    def __init__(self, attempt: Attempt, stream: Any) -> None:
        super().__init__(attempt)
        self.stream = stream
        self.streamed_usage = False
        """Whether the provider streamed usage. litellm's own ``chunks`` may differ from the
        ones the reader got (the usage it computes rides on the last chunk it gives, not on
        the one it stores)."""

    def assembled(self) -> Any:
        """The whole response a stream delivered, assembled by litellm."""
        chunks = list(getattr(self.stream, "chunks", None) or ())
        # litellm keeps the provider's usage on the chunks it stores (whatever the caller asked
        # to see) and counts tokens itself only when none has any: the same test as ours.
        self.streamed_usage = any(field(chunk, "usage") is not None for chunk in chunks)
        litellm = sys.modules.get("litellm")
        if litellm is None or not chunks:
            return None
        return litellm.stream_chunk_builder(chunks=chunks, messages=self.attempt.messages)

    def settle(self, built: Any, attributes: dict[str, AttributeValue]) -> None:
        litellm = sys.modules.get("litellm")
        if litellm is None:
            return
        attempt = self.attempt
        outcome = attempt.scope.outcome
        usage = outcome.usage
        if usage is None or (not usage.input and not usage.output):
            estimated = estimated_usage(litellm, attempt, built)
            if estimated is not None:
                outcome.set_usage(estimated)
                attributes[sc.USAGE_ESTIMATED] = True
        elif not self.streamed_usage:  # litellm 1.110 and later count them when none is sent
            attributes[sc.USAGE_ESTIMATED] = True
        if (attempt.scope.late or {}).get(sc.REPLAYED) is True:
            outcome.set_cost(None)  # answered from the journal: nothing was bought
            return
        if outcome.mocked:
            return  # priced 0 by result_attributes: a reply litellm made up
        if not outcome.cost_usd:
            outcome.set_cost(cost_from_tokens(litellm, attempt.raw_model, outcome.usage))


class StreamProxy(ChunkProxy):
    """litellm's stream, as its own type, ending the attempt's span exactly once."""

    def __init__(self, stream: Any, attempt: Attempt) -> None:
        super().__init__(stream, _StreamState(attempt, stream))

    def close(self) -> None:
        """Stop reading: the span ends now, with what was received."""
        self._abandon()
        close = getattr(self.__wrapped__, "close", None)
        if callable(close):
            close()

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        self._abandon()
        await self.__wrapped__.aclose()
