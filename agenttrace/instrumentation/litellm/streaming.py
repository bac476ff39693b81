"""Streams: litellm's stream behind a proxy that ends the attempt's span exactly once.

The proxy keeps litellm's own ``CustomStreamWrapper`` type (a ``wrapt.ObjectProxy``). The span
ends when the stream is exhausted, closed, fails or is garbage-collected, with the response
litellm assembles from the chunks, the time to the first chunk, and tokens counted by litellm
when the provider streamed none.
"""

from __future__ import annotations

import functools
import sys
import time
import weakref
from typing import Any

import wrapt
from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace.instrumentation.litellm.attempt import (
    Attempt,
    Reply,
    offer_tool_calls,
    result_attributes,
)
from agenttrace.instrumentation.litellm.utils import WHERE, cost_from_tokens
from agenttrace.model.outcome import Usage
from agenttrace.tracing.journal.llm_steps import end_llm_step
from agenttrace.tracing.llm_attributes import field, input_content


class _StreamState:
    """What a stream proxy needs to end its span; held apart so the proxy can be collected."""

    __slots__ = ("attempt", "first_chunk_ns", "given", "stream")

    def __init__(self, attempt: Attempt, stream: Any) -> None:
        self.attempt = attempt
        self.stream = stream
        self.first_chunk_ns: int | None = None
        self.given: list[Any] = []
        """The chunks the reader got, as it got them: what the journal keeps for a replay.
        litellm's own ``chunks`` may differ (the usage it computes rides on the last chunk it
        gives, not on the one it stores)."""

    def chunk(self, chunk: Any) -> None:
        if self.first_chunk_ns is None:
            self.first_chunk_ns = time.time_ns()
        self.given.append(chunk)

    def complete(self, abandoned: bool = False) -> None:
        attempt = self.attempt
        if attempt.done:
            return
        chunks = list(getattr(self.stream, "chunks", None) or ())
        # litellm keeps the provider's usage on the chunks it stores (whatever the caller asked
        # to see) and counts tokens itself only when none has any: the same test as ours.
        streamed_usage = any(field(chunk, "usage") is not None for chunk in chunks)
        built = None
        if abandoned:
            end_llm_step(attempt.scope, attempt.model, error=_ABANDONED)
        try:
            built = _build_stream_response(attempt, chunks)
            if built is not None and not abandoned:
                offer_tool_calls(attempt, built)  # the streamed reply enters the transcript
        except Exception as exc:
            report_internal_error(WHERE, exc)
        attempt.succeed(  # billed, then journaled done
            functools.partial(_stream_attributes, self, built, abandoned, streamed_usage),
            None if abandoned else Reply(chunks=self.given),
        )

    def fail(self, error: BaseException) -> None:
        self.attempt.fail(error)


_ABANDONED = RuntimeError("the stream was closed before its end")
"""How a stream its reader stopped reading ends in the journal: not done (a re-entry asks the
model again)."""


def _build_stream_response(attempt: Attempt, chunks: list[Any]) -> Any:
    """The whole response a stream delivered, assembled by litellm."""
    litellm = sys.modules.get("litellm")
    if litellm is None or not chunks:
        return None
    return litellm.stream_chunk_builder(chunks=chunks, messages=attempt.messages)


def _stream_attributes(
    state: _StreamState, built: Any, abandoned: bool, streamed_usage: bool
) -> dict[str, AttributeValue]:
    attempt = state.attempt
    outcome = attempt.scope.outcome
    attributes = input_content(attempt.input, attempt.scope.payloads)
    if state.first_chunk_ns is not None:
        outcome.set_time_to_first_chunk((state.first_chunk_ns - attempt.scope.started_ns) / 1e9)
    if abandoned:
        attributes[sc.STREAM_ABANDONED] = True
    litellm = sys.modules.get("litellm")
    if litellm is None or built is None:
        return attributes
    attributes.update(result_attributes(attempt, built))
    usage = outcome.usage
    if usage is None or (not usage.input and not usage.output):
        estimated = _estimated_usage(litellm, attempt, built)
        if estimated is not None:
            outcome.set_usage(estimated)
            attributes[sc.USAGE_ESTIMATED] = True
    elif not streamed_usage:  # litellm 1.110 and later count them when the provider sends none
        attributes[sc.USAGE_ESTIMATED] = True
    if (attempt.scope.late or {}).get(sc.REPLAYED) is True:
        outcome.set_cost(None)  # answered from the journal: nothing was bought
        return attributes
    if outcome.mocked:
        return attributes  # priced 0 by result_attributes: a reply litellm made up
    if not outcome.cost_usd:
        outcome.set_cost(cost_from_tokens(litellm, attempt.raw_model, outcome.usage))
    return attributes


def _estimated_usage(litellm: Any, attempt: Attempt, built: Any) -> Usage | None:
    """Count tokens ourselves when the provider streamed none (no ``include_usage``)."""
    text = ""
    choices = field(built, "choices") or []
    if choices:
        text = field(field(choices[0], "message"), "content") or ""
    try:
        prompt = int(litellm.token_counter(model=attempt.model, messages=attempt.messages or []))
        completion = int(litellm.token_counter(model=attempt.model, text=text)) if text else 0
    except Exception:  # an unknown model for the tokenizer: leave tokens unknown
        return None
    return Usage(int(prompt), int(completion))


class StreamProxy(wrapt.ObjectProxy[Any]):
    """litellm's stream, as its own type, ending the attempt's span exactly once."""

    def __init__(self, stream: Any, attempt: Attempt) -> None:
        super().__init__(stream)
        state = _StreamState(attempt, stream)
        self._self_state = state
        # Abandoned without being exhausted or closed: end the span when the proxy is collected.
        self._self_finalizer = weakref.finalize(self, state.complete, True)

    def __iter__(self) -> StreamProxy:
        return self

    def __next__(self) -> Any:
        state = self._self_state
        try:
            chunk = self._pull()
        except StopIteration:
            self._self_finalizer.detach()
            state.complete()
            raise
        except BaseException as error:
            self._self_finalizer.detach()
            state.fail(error)
            raise
        state.chunk(chunk)
        return chunk

    def __aiter__(self) -> StreamProxy:
        return self

    def _pull(self) -> Any:
        """The stream's next chunk (``StopIteration`` at its end)."""
        return self.__wrapped__.__next__()

    async def _apull(self) -> Any:
        """The stream's next chunk, async (``StopAsyncIteration`` at its end)."""
        return await self.__wrapped__.__anext__()

    async def __anext__(self) -> Any:
        state = self._self_state
        try:
            chunk = await self._apull()
        except StopAsyncIteration:
            self._self_finalizer.detach()
            state.complete()
            raise
        except BaseException as error:
            self._self_finalizer.detach()
            state.fail(error)
            raise
        state.chunk(chunk)
        return chunk

    def close(self) -> None:
        """Stop reading: the span ends now, with what was received."""
        self._self_finalizer.detach()
        self._self_state.complete(abandoned=True)
        close = getattr(self.__wrapped__, "close", None)
        if callable(close):
            close()

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        self._self_finalizer.detach()
        self._self_state.complete(abandoned=True)
        await self.__wrapped__.aclose()

    def __enter__(self) -> StreamProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
