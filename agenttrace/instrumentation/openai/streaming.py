"""Streams: the SDK's ``Stream``/``AsyncStream`` behind a proxy that ends the attempt's span
exactly once (exhausted, closed, failed or garbage-collected).

The proxy keeps the SDK's own type (a ``wrapt.ObjectProxy``: ``isinstance(s, openai.Stream)``
holds, ``.response`` is the SDK's). The chunks are assembled into the ``ChatCompletion`` they
make (content, reasoning, tool calls by index, finish reasons, and the usage the last chunk
carries when the request asked for it with ``stream_options.include_usage``: never asked for
here), which enters the transcript and the span as a plain reply does; the journal keeps the
chunks as the reader got them (:mod:`~agenttrace.instrumentation.litellm.stream_proxy`, which
litellm's streams share).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace.instrumentation.litellm.attempt import Attempt
from agenttrace.instrumentation.litellm.stream_proxy import ChunkProxy, StreamEnd, estimated_usage
from agenttrace.instrumentation.openai.request import price
from agenttrace.tracing.llm_attributes import field


def assemble(chunks: list[Any]) -> Any:
    """The ``ChatCompletion`` a stream's ``ChatCompletionChunk`` s make (None: no chunk)."""
    if not chunks:
        return None
    choices: dict[int, dict[str, Any]] = {}
    usage = None
    for chunk in chunks:
        if field(chunk, "usage") is not None:
            usage = field(chunk, "usage")
        for choice in field(chunk, "choices") or ():
            index = field(choice, "index") or 0
            built = choices.setdefault(
                index, {"index": index, "message": {"role": "assistant"}, "finish_reason": None}
            )
            _add_delta(built["message"], field(choice, "delta"))
            reason = field(choice, "finish_reason")
            if reason is not None:
                built["finish_reason"] = reason
    last = chunks[-1]
    data: dict[str, Any] = {
        "id": field(last, "id"),
        "object": "chat.completion",
        "created": field(last, "created"),
        "model": field(last, "model"),
        "choices": [choices[index] for index in sorted(choices)],
    }
    if usage is not None:
        data["usage"] = usage.model_dump() if hasattr(usage, "model_dump") else usage
    for choice in data["choices"]:
        calls = choice["message"].get("tool_calls")
        if calls is not None:
            choice["message"]["tool_calls"] = [calls[index] for index in sorted(calls)]
    from openai.types.chat import ChatCompletion

    # construct: a reply cut short (no finish reason) is still recorded as it came.
    return ChatCompletion.construct(**data)


def _add_delta(message: dict[str, Any], delta: Any) -> None:
    if delta is None:
        return
    role = field(delta, "role")
    if isinstance(role, str):
        message["role"] = role
    for name in ("content", "reasoning_content", "refusal"):
        text = field(delta, name)
        if isinstance(text, str):
            message[name] = message.get(name, "") + text
    for call in field(delta, "tool_calls") or ():
        calls = message.setdefault("tool_calls", {})
        built = calls.setdefault(
            field(call, "index") or 0,
            {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
        )
        if field(call, "id"):
            built["id"] = field(call, "id")
        function = field(call, "function")
        if function is not None:
            built["function"]["name"] += field(function, "name") or ""
            built["function"]["arguments"] += field(function, "arguments") or ""


class _StreamState(StreamEnd):
    """An SDK stream's end: its chunks make the reply (``assemble``)."""

    __slots__ = ("assemble",)

    def __init__(self, attempt: Attempt, assemble: Callable[[list[Any]], Any]) -> None:
        super().__init__(attempt)
        self.assemble = assemble  # the reply the chunks make, as a ChatCompletion

    def assembled(self) -> Any:
        return self.assemble(self.given)

    def settle(self, built: Any, attributes: dict[str, AttributeValue]) -> None:
        attempt = self.attempt
        outcome = attempt.scope.outcome
        usage = outcome.usage
        litellm = sys.modules.get("litellm")  # its tokenizer, when loaded (not imported for this)
        if litellm is not None and (usage is None or (not usage.input and not usage.output)):
            estimated = estimated_usage(litellm, attempt, built)
            if estimated is not None:  # as the litellm path counts them, and says so
                outcome.set_usage(estimated)
                attributes[sc.USAGE_ESTIMATED] = True
        if (attempt.scope.late or {}).get(sc.REPLAYED) is True:
            outcome.set_cost(None)  # answered from the journal: nothing was bought
        elif not outcome.cost_usd:
            outcome.set_cost(price(attempt.raw_model, outcome.usage))


class StreamProxy(ChunkProxy):
    """The SDK's stream, as its own type, ending the attempt's span exactly once.
    ``assemble``: what its chunks make, as a ``ChatCompletion`` (a Responses stream's events
    make one too, :func:`agenttrace.instrumentation.openai.responses.assemble_events`)."""

    def __init__(
        self, stream: Any, attempt: Attempt, assemble: Callable[[list[Any]], Any] = assemble
    ) -> None:
        super().__init__(stream, _StreamState(attempt, assemble))

    def close(self) -> Any:
        """Stop reading: the span ends now, with what was received. What the SDK's ``close``
        returns is returned: an ``AsyncStream``'s is a coroutine, which the caller awaits."""
        self._abandon()
        return self.__wrapped__.close()

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        self._abandon()
        await self.__wrapped__.close()

    async def __aenter__(self) -> StreamProxy:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
