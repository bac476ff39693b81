"""A stream behind a proxy that ends its attempt's span exactly once: what litellm's stream and
the OpenAI and Anthropic SDKs' streams share.

The proxy (:class:`ChunkProxy`) keeps the stream's own type (a ``wrapt.ObjectProxy``) and hands
each chunk to a :class:`StreamEnd`, held apart so the proxy can be collected, which ends the
span when the stream is exhausted, closed, fails or is garbage-collected: the reply the chunks
make (each library assembles it its own way, as the chat response litellm records) enters the
transcript, the span ends with what it says and the time to the first chunk, and the journal
keeps the chunks as the reader got them.
"""

from __future__ import annotations

import functools
import time
from typing import Any, TypeVar

import wrapt
from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.finalizers import on_collect
from agenttrace.instrumentation.litellm.attempt import (
    Attempt,
    Reply,
    offer_tool_calls,
    reasoning_delta,
    result_attributes,
)
from agenttrace.model.outcome import Usage
from agenttrace.tracing.journal.llm_steps import end_llm_step
from agenttrace.tracing.llm_attributes import field, input_content

_ABANDONED = RuntimeError("the stream was closed before its end")
"""How a stream its reader stopped reading ends in the journal: not done (a re-entry asks the
model again)."""


class StreamEnd:
    """How a stream's attempt ends; a subclass assembles the reply (:meth:`assembled`) and
    prices it (:meth:`settle`)."""

    __slots__ = ("attempt", "first_chunk_ns", "given", "reasoning")

    def __init__(self, attempt: Attempt) -> None:
        self.attempt = attempt
        self.first_chunk_ns: int | None = None
        self.given: list[Any] = []  # the chunks, as the reader got them: what the journal keeps
        self.reasoning: list[tuple[str, int]] = []
        """The reasoning deltas as they came, each with its time: the attempt's chunks."""

    def assembled(self) -> Any:
        """The reply the stream delivered, as the chat response litellm records (None: none)."""
        raise NotImplementedError

    def settle(self, built: Any, attributes: dict[str, AttributeValue]) -> None:
        """Price the assembled reply ``built`` (and count its tokens when the stream gave
        none), after ``attributes`` took what it says."""
        raise NotImplementedError

    def chunk(self, chunk: Any) -> None:
        now = None
        if self.first_chunk_ns is None:
            self.first_chunk_ns = now = time.time_ns()
        self.given.append(chunk)
        try:
            thought = reasoning_delta(chunk)
        except Exception as exc:  # the reader gets its chunk whatever this does
            report_internal_error(self.attempt.request.where, exc)
            return
        if thought is not None:
            self.reasoning.append((thought, now or time.time_ns()))

    def complete(self, abandoned: bool = False) -> None:
        attempt = self.attempt
        if attempt.done:
            return
        if abandoned:
            end_llm_step(attempt.scope, attempt.model, error=_ABANDONED)
        built = None
        try:
            built = self.assembled()
            if built is not None and not abandoned:
                # The streamed reply enters the transcript; its reasoning as it came.
                offer_tool_calls(attempt, built, self.reasoning)
        except Exception as exc:
            report_internal_error(self.attempt.request.where, exc)
        attempt.succeed(  # billed, then journaled done
            functools.partial(self._attributes, built, abandoned),
            None if abandoned else Reply(chunks=self.given),
        )

    def fail(self, error: BaseException) -> None:
        # A stream cut after its first chunk still says when that chunk came: a slow first
        # token and a dropped connection are separate findings.
        self._record_first_chunk()
        self.attempt.fail(error)

    def _record_first_chunk(self) -> None:
        """The time to the first chunk on the attempt's outcome, if a chunk came."""
        if self.first_chunk_ns is not None:
            scope = self.attempt.scope
            scope.outcome.set_time_to_first_chunk((self.first_chunk_ns - scope.started_ns) / 1e9)

    def _attributes(self, built: Any, abandoned: bool) -> dict[str, AttributeValue]:
        attempt = self.attempt
        attributes = input_content(attempt.input, attempt.scope.payloads)
        self._record_first_chunk()
        if abandoned:
            attributes[sc.STREAM_ABANDONED] = True
        if built is None:
            return attributes
        attributes.update(result_attributes(attempt, built))
        self.settle(built, attributes)
        return attributes


def estimated_usage(litellm: Any, attempt: Attempt, built: Any) -> Usage | None:
    """The tokens of a stream the provider sent none for (no ``include_usage``), counted with
    litellm's tokenizer (None: a model it does not know)."""
    choices = field(built, "choices") or []
    text = field(field(choices[0], "message"), "content") if choices else None
    try:
        prompt = int(litellm.token_counter(model=attempt.model, messages=attempt.messages or []))
        completion = int(litellm.token_counter(model=attempt.model, text=text)) if text else 0
    except Exception:  # an unknown model for the tokenizer: leave tokens unknown
        return None
    return Usage(prompt, completion)


_Proxy = TypeVar("_Proxy", bound="ChunkProxy")


class ChunkProxy(wrapt.ObjectProxy[Any]):
    """A stream, as its own type, handing its chunks to a :class:`StreamEnd` that ends the
    attempt's span exactly once. A subclass closes the stream as its library does."""

    def __init__(self, stream: Any, end: StreamEnd) -> None:
        super().__init__(stream)
        self._self_state = end
        # Abandoned without being exhausted or closed: end the span when the proxy is collected
        # (on the finalizer thread: ending it takes the recorder's locks).
        self._self_finalizer = on_collect(self, end.complete, True)

    def __iter__(self: _Proxy) -> _Proxy:
        return self

    def __next__(self) -> Any:
        try:
            chunk = self._pull()
        except BaseException as error:
            self._ended(error, StopIteration)
            raise
        self._self_state.chunk(chunk)
        return chunk

    def __aiter__(self: _Proxy) -> _Proxy:
        return self

    async def __anext__(self) -> Any:
        try:
            chunk = await self._apull()
        except BaseException as error:
            self._ended(error, StopAsyncIteration)
            raise
        self._self_state.chunk(chunk)
        return chunk

    def _ended(self, error: BaseException, end: type[BaseException]) -> None:
        """The stream stopped with ``error``: complete at its ``end`` (``StopIteration`` or
        ``StopAsyncIteration``), else failed; the span ends once, here."""
        self._self_finalizer.detach()
        if isinstance(error, end):
            self._self_state.complete()
        else:
            self._self_state.fail(error)

    def _pull(self) -> Any:
        """The stream's next chunk (``StopIteration`` at its end)."""
        return self.__wrapped__.__next__()

    async def _apull(self) -> Any:
        """The stream's next chunk, async (``StopAsyncIteration`` at its end)."""
        return await self.__wrapped__.__anext__()

    def _abandon(self) -> None:
        """The reader stops reading: the span ends now, with what was received."""
        self._self_finalizer.detach()
        self._self_state.complete(abandoned=True)

    def __enter__(self: _Proxy) -> _Proxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
