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
import functools
import json
import time
import weakref
from typing import Any

import wrapt
from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace.instrumentation.anthropic.request import WHERE, chat_view, price
from agenttrace.instrumentation.litellm.attempt import (
    Attempt,
    Reply,
    offer_tool_calls,
    result_attributes,
)
from agenttrace.tracing.journal.llm_steps import end_llm_step
from agenttrace.tracing.llm_attributes import field, input_content

_ABANDONED = RuntimeError("the stream was closed before its end")
"""How a stream its reader stopped reading ends in the journal: not done (a re-entry asks the
model again)."""

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


class _StreamState:
    """What a stream proxy needs to end its span; held apart so the proxy can be collected."""

    __slots__ = ("attempt", "first_chunk_ns", "given")

    def __init__(self, attempt: Attempt) -> None:
        self.attempt = attempt
        self.first_chunk_ns: int | None = None
        self.given: list[Any] = []  # the events, as the reader got them: what the journal keeps

    def chunk(self, event: Any) -> None:
        if self.first_chunk_ns is None:
            self.first_chunk_ns = time.time_ns()
        self.given.append(event)

    def complete(self, abandoned: bool = False) -> None:
        attempt = self.attempt
        if attempt.done:
            return
        if abandoned:
            end_llm_step(attempt.scope, attempt.model, error=_ABANDONED)
        view = None
        try:
            built = assemble(self.given)
            view = chat_view(built) if built is not None else None
            if view is not None and not abandoned:
                offer_tool_calls(attempt, view)  # the streamed reply enters the transcript
        except Exception as exc:
            report_internal_error(WHERE, exc)
        attempt.succeed(  # billed, then journaled done
            functools.partial(_stream_attributes, self, view, abandoned),
            None if abandoned else Reply(chunks=self.given),
        )

    def fail(self, error: BaseException) -> None:
        self.attempt.fail(error)


def _stream_attributes(
    state: _StreamState, view: Any, abandoned: bool
) -> dict[str, AttributeValue]:
    attempt = state.attempt
    outcome = attempt.scope.outcome
    attributes = input_content(attempt.input, attempt.scope.payloads)
    if state.first_chunk_ns is not None:
        outcome.set_time_to_first_chunk((state.first_chunk_ns - attempt.scope.started_ns) / 1e9)
    if abandoned:
        attributes[sc.STREAM_ABANDONED] = True
    if view is None:
        return attributes
    attributes.update(result_attributes(attempt, view))
    if (attempt.scope.late or {}).get(sc.REPLAYED) is True:
        outcome.set_cost(None)  # answered from the journal: nothing was bought
    elif not outcome.cost_usd:
        outcome.set_cost(price(attempt.raw_model, outcome.usage))
    return attributes


class StreamProxy(wrapt.ObjectProxy[Any]):
    """The SDK's stream, as its own type, ending the attempt's span exactly once."""

    def __init__(self, stream: Any, attempt: Attempt) -> None:
        super().__init__(stream)
        state = _StreamState(attempt)
        self._self_state = state
        # Abandoned without being exhausted or closed: end the span when the proxy is collected.
        self._self_finalizer = weakref.finalize(self, state.complete, True)

    def __iter__(self) -> StreamProxy:
        return self

    def __next__(self) -> Any:
        state = self._self_state
        try:
            event = self.__wrapped__.__next__()
        except StopIteration:
            self._self_finalizer.detach()
            state.complete()
            raise
        except BaseException as error:
            self._self_finalizer.detach()
            state.fail(error)
            raise
        state.chunk(event)
        return event

    def __aiter__(self) -> StreamProxy:
        return self

    async def __anext__(self) -> Any:
        state = self._self_state
        try:
            event = await self.__wrapped__.__anext__()
        except StopAsyncIteration:
            self._self_finalizer.detach()
            state.complete()
            raise
        except BaseException as error:
            self._self_finalizer.detach()
            state.fail(error)
            raise
        state.chunk(event)
        return event

    def close(self) -> Any:
        """Stop reading: the span ends now, with what was received (as it came, if the stream
        was read to its end). What the SDK's ``close`` returns is returned: an
        ``AsyncStream``'s is a coroutine, which the caller awaits."""
        self._self_finalizer.detach()
        self._self_state.complete(abandoned=True)
        return self.__wrapped__.close()

    def __enter__(self) -> StreamProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> StreamProxy:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
