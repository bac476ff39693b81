"""Streams: the SDK's ``Stream``/``AsyncStream`` of message events behind a proxy that ends the
attempt's span exactly once (exhausted, closed, failed or garbage-collected).

The proxy keeps the SDK's own type (a ``wrapt.ObjectProxy``: ``isinstance(s, anthropic.Stream)``
holds, ``.response`` is the SDK's), so ``messages.stream(...)``'s ``MessageStream`` reads it as
the SDK's. The events are assembled into the ``Message`` they make (:func:`assemble`), which
enters the transcript and the span as a plain reply does; the journal keeps the events as the
reader got them.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace.instrumentation.anthropic.request import chat_view, price
from agenttrace.instrumentation.litellm.attempt import Attempt
from agenttrace.instrumentation.litellm.stream_proxy import ChunkProxy, StreamEnd
from agenttrace.tracing.llm_attributes import field

_DELTAS = {"text_delta": "text", "thinking_delta": "thinking"}
"""Deltas whose text is added to a field of their block."""


def _plain(value: Any) -> Any:
    return value.model_dump() if hasattr(value, "model_dump") else value


def assemble(events: list[Any]) -> Any:
    """The ``Message`` a stream's events make (None: no ``message_start``)."""
    message: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    partial_json: dict[int, str] = {}
    for event in events:
        kind = field(event, "type")
        if kind == "message_start":
            message = dict(_plain(field(event, "message")))
            message["usage"] = dict(message.get("usage") or {})
        elif kind == "content_block_start":
            blocks[field(event, "index")] = dict(_plain(field(event, "content_block")))
        elif kind == "content_block_delta":
            index = field(event, "index")
            block, delta = blocks.get(index), field(event, "delta")
            if block is None or delta is None:
                continue
            delta_kind = field(delta, "type")
            if delta_kind in _DELTAS:
                name = _DELTAS[delta_kind]
                block[name] = (block.get(name) or "") + (field(delta, name) or "")
            elif delta_kind == "signature_delta":
                block["signature"] = field(delta, "signature")
            elif delta_kind == "input_json_delta":
                partial_json[index] = partial_json.get(index, "") + (
                    field(delta, "partial_json") or ""
                )
        elif kind == "content_block_stop":
            index = field(event, "index")
            if index in partial_json and index in blocks:
                # cut short (not JSON): the input stays as it started
                with contextlib.suppress(ValueError):
                    blocks[index]["input"] = json.loads(partial_json.pop(index) or "{}")
        elif kind == "message_delta" and message is not None:
            delta = _plain(field(event, "delta")) or {}
            message.update({k: v for k, v in delta.items() if v is not None})
            usage = _plain(field(event, "usage")) or {}
            message["usage"].update({k: v for k, v in usage.items() if v is not None})
    if message is None:
        return None
    message["content"] = [blocks[index] for index in sorted(blocks)]
    from anthropic.types import Message

    # construct: a reply cut short (no stop reason) is still recorded as it came.
    return Message.construct(**message)


class _StreamState(StreamEnd):
    """A messages stream's end: its events make the ``Message``, read as litellm's reply."""

    __slots__ = ()

    def __init__(self, attempt: Attempt) -> None:
        super().__init__(attempt)

    def assembled(self) -> Any:
        built = assemble(self.given)
        return chat_view(built) if built is not None else None

    def settle(self, built: Any, attributes: dict[str, AttributeValue]) -> None:
        attempt = self.attempt
        outcome = attempt.scope.outcome
        if (attempt.scope.late or {}).get(sc.REPLAYED) is True:
            outcome.set_cost(None)  # answered from the journal: nothing was bought
        elif not outcome.cost_usd:
            outcome.set_cost(price(attempt.raw_model, outcome.usage, built))


class StreamProxy(ChunkProxy):
    """The SDK's stream, as its own type, ending the attempt's span exactly once."""

    def __init__(self, stream: Any, attempt: Attempt) -> None:
        super().__init__(stream, _StreamState(attempt))

    def close(self) -> Any:
        """Stop reading: the span ends now, with what was received (as it came, if the stream
        was read to its end). What the SDK's ``close`` returns is returned: an
        ``AsyncStream``'s is a coroutine, which the caller awaits."""
        self._abandon()
        return self.__wrapped__.close()

    async def __aenter__(self) -> StreamProxy:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
