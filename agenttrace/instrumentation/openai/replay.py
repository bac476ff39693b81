"""A ``chat.completions.create`` reply served from the step journal (a re-entered run,
docs/journal.md), as the SDK's own types: a ``ChatCompletion``, or the SDK's own ``Stream`` /
``AsyncStream`` of ``ChatCompletionChunk`` s, read by the SDK from the recorded chunks as
server-sent events (no request is sent), behind the proxy that ends the attempt's span.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agenttrace._internal.errors import report_internal_error
from agenttrace.instrumentation.litellm.attempt import Attempt
from agenttrace.instrumentation.litellm.sdk_http import made_response
from agenttrace.instrumentation.openai.request import WHERE
from agenttrace.instrumentation.openai.streaming import StreamProxy
from agenttrace.model.journal import Step


def replayed_response(
    step: Step,
    attempt: Attempt,
    client: Any,
    is_async: bool,
    parse: Mapping[str, Any] | None = None,
) -> Any:
    """What ``step`` recorded, as the SDK's types: a ``ChatCompletion``, or a stream.
    ``parse``: the arguments of a ``chat.completions.parse`` call, whose reply is a
    ``ParsedChatCompletion``, parsed again from the recorded reply as the SDK parses it."""
    from openai.types.chat import ChatCompletion

    if step.chunks is None:
        result = step.result
        if not isinstance(result, Mapping):
            return result
        completion = ChatCompletion.construct(**result)
        if parse is None:
            return completion
        from openai.lib._parsing._completions import parse_chat_completion

        return parse_chat_completion(
            response_format=parse.get("response_format", _not_given()),
            input_tools=parse.get("tools") or [],
            chat_completion=completion,
        )
    try:
        stream = sdk_stream(step.chunks, client, is_async)
    except Exception as exc:  # an SDK whose stream cannot be built so: the chunks as they are
        report_internal_error(WHERE, exc)
        raise
    return StreamProxy(stream, attempt)


def sdk_stream(
    chunks: list[Any],
    client: Any,
    is_async: bool,
    cast_to: Any = None,
    path: str = "/chat/completions",
) -> Any:
    """The SDK's stream over the recorded chunks: an HTTP response made here, whose body is
    the chunks as the server sent them (``data:`` lines, then ``[DONE]``)."""
    from openai import AsyncStream, Stream
    from openai.types.chat import ChatCompletionChunk

    body = b"".join(
        b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n" for chunk in chunks
    )
    response = made_response(
        "openai", client, path, "text/event-stream", body + b"data: [DONE]\n\n"
    )
    kind = AsyncStream if is_async else Stream
    return kind(cast_to=cast_to or ChatCompletionChunk, response=response, client=client)


def _not_given() -> Any:
    """The SDK's "not given" (``omit`` in 2.x, ``NOT_GIVEN`` before)."""
    import openai

    return getattr(openai, "omit", None) or openai.NOT_GIVEN
