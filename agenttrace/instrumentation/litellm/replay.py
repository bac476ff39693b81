"""An LLM response served from the step journal (a re-entered run, docs/journal.md): litellm's
own response types rebuilt from what the journal kept, so the caller sees what it saw the first
time. A plain reply is a ``ModelResponse``; a stream is litellm's own ``CustomStreamWrapper``
(its type, its ``chunks``, its ``completion_stream``) that gives the recorded
``ModelResponseStream`` chunks in order, as they were, by ``for`` or ``async for``.

litellm's wrapper is not left to iterate the recorded chunks itself: its chunk builder turns a
provider's chunks into litellm's, and would drop what a built chunk holds that a provider's does
not (a usage-only last chunk, a tool call's deltas). The proxy that ends the attempt's span reads
them instead, and appends each to the wrapper's ``chunks``, as litellm does live.
"""

from __future__ import annotations

import datetime
import sys
import uuid
from collections.abc import Mapping
from typing import Any

from agenttrace._internal.errors import report_internal_error
from agenttrace.instrumentation.litellm.attempt import Attempt
from agenttrace.instrumentation.litellm.streaming import StreamProxy
from agenttrace.instrumentation.litellm.utils import WHERE
from agenttrace.model.journal import Step


class RecordedChunks:
    """A stream's recorded chunks, given again in order by ``next`` or ``anext``: the
    ``completion_stream`` of a replayed litellm stream."""

    def __init__(self, recorded: list[Any]) -> None:
        self._recorded = recorded
        self._next = 0

    def __iter__(self) -> RecordedChunks:
        return self

    def __next__(self) -> Any:
        if self._next >= len(self._recorded):
            raise StopIteration
        chunk = self._recorded[self._next]
        self._next += 1
        return chunk

    def __aiter__(self) -> RecordedChunks:
        return self

    async def __anext__(self) -> Any:
        try:
            return self.__next__()
        except StopIteration:
            raise StopAsyncIteration from None

    def close(self) -> None:
        self._next = len(self._recorded)

    async def aclose(self) -> None:
        self.close()


class ReplayStream(RecordedChunks):
    """A recorded stream as a plain iterator, for a litellm whose stream type cannot be built
    here: the same chunks in the same order, kept in ``chunks`` as litellm's stream keeps them."""

    def __init__(self, recorded: list[Any]) -> None:
        super().__init__(recorded)
        self.chunks: list[Any] = []

    def __next__(self) -> Any:
        chunk = super().__next__()
        self.chunks.append(chunk)
        return chunk


class ReplayedStreamProxy(StreamProxy):
    """A replayed litellm stream behind the proxy that ends its attempt's span: each chunk comes
    from the recorded ones (the wrapper's ``completion_stream``) and joins its ``chunks``."""

    def _pull(self) -> Any:
        stream = self.__wrapped__
        recorded = stream.completion_stream
        if recorded is None:  # closed
            raise StopIteration
        chunk = next(recorded)
        stream.chunks.append(chunk)
        return chunk

    async def _apull(self) -> Any:
        try:
            return self._pull()
        except StopIteration:
            raise StopAsyncIteration from None


def replayed_response(step: Step, attempt: Attempt, is_async: bool) -> Any:
    """The response ``step`` recorded, as litellm's types: a ``ModelResponse``, or litellm's
    stream of ``ModelResponseStream`` chunks behind a proxy that ends the attempt's span."""
    litellm = sys.modules["litellm"]
    if step.chunks is None:
        result = step.result
        return litellm.ModelResponse(**result) if isinstance(result, Mapping) else result
    chunks = [
        litellm.ModelResponseStream(**chunk) if isinstance(chunk, Mapping) else chunk
        for chunk in step.chunks
    ]
    try:
        stream = _litellm_stream(litellm, chunks, attempt, is_async)
    except Exception as exc:  # a litellm whose stream cannot be built so: the chunks as they are
        report_internal_error(WHERE, exc)
        return StreamProxy(ReplayStream(chunks), attempt)
    return ReplayedStreamProxy(stream, attempt)


def _litellm_stream(litellm: Any, chunks: list[Any], attempt: Attempt, is_async: bool) -> Any:
    """litellm's ``CustomStreamWrapper`` over the recorded chunks, marked as litellm marks a
    reply from its cache (``custom_llm_provider="cached_response"``). Its logging object runs
    no callback: nothing calls it (the proxy reads the chunks), and nothing was bought."""
    from litellm.litellm_core_utils.litellm_logging import Logging
    from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper

    logging_obj = Logging(
        model=attempt.model,
        messages=attempt.messages,
        stream=True,
        call_type="acompletion" if is_async else "completion",
        start_time=datetime.datetime.now(),
        litellm_call_id=str(uuid.uuid4()),
        function_id=str(uuid.uuid4()),
    )
    return CustomStreamWrapper(
        completion_stream=RecordedChunks(chunks),
        model=attempt.model,
        logging_obj=logging_obj,
        custom_llm_provider="cached_response",
    )


async def ready(value: Any) -> Any:
    """``value``, awaited: what litellm's async path returns for a response already at hand."""
    return value
