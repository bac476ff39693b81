"""An LLM response served from the step journal (a re-entered run, docs/journal.md): litellm's
own response types rebuilt from what the journal kept, so the caller sees what it saw the first
time; a stream is replayed chunk by chunk."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from agenttrace.model.journal import Step


class ReplayStream:
    """A recorded stream, replayed: the same chunks in the same order, by ``for`` or
    ``async for``. Like litellm's stream it keeps the chunks it gave in ``chunks``."""

    def __init__(self, recorded: list[Any]) -> None:
        self._recorded = recorded
        self._next = 0
        self.chunks: list[Any] = []

    def __iter__(self) -> ReplayStream:
        return self

    def __next__(self) -> Any:
        if self._next >= len(self._recorded):
            raise StopIteration
        chunk = self._recorded[self._next]
        self._next += 1
        self.chunks.append(chunk)
        return chunk

    def __aiter__(self) -> ReplayStream:
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


def replayed_response(step: Step) -> Any:
    """The response ``step`` recorded, as litellm's types: a ``ModelResponse``, or a
    :class:`ReplayStream` of ``ModelResponseStream`` chunks."""
    litellm = sys.modules["litellm"]
    if step.chunks is not None:
        return ReplayStream(
            [
                litellm.ModelResponseStream(**chunk) if isinstance(chunk, Mapping) else chunk
                for chunk in step.chunks
            ]
        )
    result = step.result
    return litellm.ModelResponse(**result) if isinstance(result, Mapping) else result


async def ready(value: Any) -> Any:
    """``value``, awaited: what litellm's async path returns for a response already at hand."""
    return value
