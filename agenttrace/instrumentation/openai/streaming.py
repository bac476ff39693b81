"""Streams: the SDK's ``Stream``/``AsyncStream`` behind a proxy that ends the attempt's span
exactly once (exhausted, closed, failed or garbage-collected).

The proxy keeps the SDK's own type (a ``wrapt.ObjectProxy``: ``isinstance(s, openai.Stream)``
holds, ``.response`` is the SDK's). The chunks are assembled into the ``ChatCompletion`` they
make (content, reasoning, tool calls by index, finish reasons, and the usage the last chunk
carries when the request asked for it with ``stream_options.include_usage``: never asked for
here), which enters the transcript and the span as a plain reply does; the journal keeps the
chunks as the reader got them.
"""

from __future__ import annotations

import functools
import sys
import time
import weakref
from collections.abc import Callable
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
from agenttrace.instrumentation.openai.request import WHERE, price
from agenttrace.model.outcome import Usage
from agenttrace.tracing.journal.llm_steps import end_llm_step
from agenttrace.tracing.llm_attributes import field, input_content

_ABANDONED = RuntimeError("the stream was closed before its end")
"""How a stream its reader stopped reading ends in the journal: not done (a re-entry asks the
model again)."""


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


class _StreamState:
    """What a stream proxy needs to end its span; held apart so the proxy can be collected."""

    __slots__ = ("assemble", "attempt", "first_chunk_ns", "given")

    def __init__(self, attempt: Attempt, assemble: Callable[[list[Any]], Any]) -> None:
        self.attempt = attempt
        self.assemble = assemble  # the reply the chunks make, as a ChatCompletion
        self.first_chunk_ns: int | None = None
        self.given: list[Any] = []  # the chunks, as the reader got them: what the journal keeps

    def chunk(self, chunk: Any) -> None:
        if self.first_chunk_ns is None:
            self.first_chunk_ns = time.time_ns()
        self.given.append(chunk)

    def complete(self, abandoned: bool = False) -> None:
        attempt = self.attempt
        if attempt.done:
            return
        if abandoned:
            end_llm_step(attempt.scope, attempt.model, error=_ABANDONED)
        built = None
        try:
            built = self.assemble(self.given)
            if built is not None and not abandoned:
                offer_tool_calls(attempt, built)  # the streamed reply enters the transcript
        except Exception as exc:
            report_internal_error(WHERE, exc)
        attempt.succeed(  # billed, then journaled done
            functools.partial(_stream_attributes, self, built, abandoned),
            None if abandoned else Reply(chunks=self.given),
        )

    def fail(self, error: BaseException) -> None:
        self.attempt.fail(error)


def _stream_attributes(
    state: _StreamState, built: Any, abandoned: bool
) -> dict[str, AttributeValue]:
    attempt = state.attempt
    outcome = attempt.scope.outcome
    attributes = input_content(attempt.input, attempt.scope.payloads)
    if state.first_chunk_ns is not None:
        outcome.set_time_to_first_chunk((state.first_chunk_ns - attempt.scope.started_ns) / 1e9)
    if abandoned:
        attributes[sc.STREAM_ABANDONED] = True
    if built is None:
        return attributes
    attributes.update(result_attributes(attempt, built))
    usage = outcome.usage
    if usage is None or (not usage.input and not usage.output):
        estimated = _estimated_usage(attempt, built)
        if estimated is not None:  # as the litellm path counts them, and says so
            outcome.set_usage(estimated)
            attributes[sc.USAGE_ESTIMATED] = True
    if (attempt.scope.late or {}).get(sc.REPLAYED) is True:
        outcome.set_cost(None)  # answered from the journal: nothing was bought
    elif not outcome.cost_usd:
        outcome.set_cost(price(attempt.raw_model, outcome.usage))
    return attributes


def _estimated_usage(attempt: Attempt, built: Any) -> Usage | None:
    """The tokens of a stream the server sent none for (no ``include_usage``), counted with
    litellm's tokenizer when litellm is loaded (it is not imported for this), as the litellm
    path counts them; else unknown."""
    litellm = sys.modules.get("litellm")
    if litellm is None:
        return None
    choices = field(built, "choices") or []
    text = field(field(choices[0], "message"), "content") if choices else None
    try:
        prompt = int(litellm.token_counter(model=attempt.model, messages=attempt.messages or []))
        completion = int(litellm.token_counter(model=attempt.model, text=text)) if text else 0
    except Exception:  # an unknown model for the tokenizer: leave tokens unknown
        return None
    return Usage(prompt, completion)


class StreamProxy(wrapt.ObjectProxy[Any]):
    """The SDK's stream, as its own type, ending the attempt's span exactly once.
    ``assemble``: what its chunks make, as a ``ChatCompletion`` (a Responses stream's events
    make one too, :func:`agenttrace.instrumentation.openai.responses.assemble_events`)."""

    def __init__(
        self, stream: Any, attempt: Attempt, assemble: Callable[[list[Any]], Any] = assemble
    ) -> None:
        super().__init__(stream)
        state = _StreamState(attempt, assemble)
        self._self_state = state
        # Abandoned without being exhausted or closed: end the span when the proxy is collected.
        self._self_finalizer = weakref.finalize(self, state.complete, True)

    def __iter__(self) -> StreamProxy:
        return self

    def __next__(self) -> Any:
        state = self._self_state
        try:
            chunk = self.__wrapped__.__next__()
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

    async def __anext__(self) -> Any:
        state = self._self_state
        try:
            chunk = await self.__wrapped__.__anext__()
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

    def close(self) -> Any:
        """Stop reading: the span ends now, with what was received. What the SDK's ``close``
        returns is returned: an ``AsyncStream``'s is a coroutine, which the caller awaits."""
        self._self_finalizer.detach()
        self._self_state.complete(abandoned=True)
        return self.__wrapped__.close()

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        self._self_finalizer.detach()
        self._self_state.complete(abandoned=True)
        await self.__wrapped__.close()

    def __enter__(self) -> StreamProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> StreamProxy:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
