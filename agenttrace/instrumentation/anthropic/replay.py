"""A ``messages.create`` reply served from the step journal (a re-entered run, docs/journal.md),
as the SDK's own types: a ``Message``, or the SDK's own ``Stream`` / ``AsyncStream`` of message
events, read by the SDK from the recorded events as server-sent events (no request is sent),
behind the proxy that ends the attempt's span. A ``beta.messages`` call gets the beta types
(``BetaMessage``, ``ParsedBetaMessage``, beta stream events), as the SDK gives that call.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from typing import Any, cast

from agenttrace.instrumentation.anthropic.streaming import StreamProxy
from agenttrace.instrumentation.litellm.attempt import Attempt
from agenttrace.instrumentation.litellm.sdk_http import made_response
from agenttrace.model.journal import Step


def replayed_response(
    step: Step,
    attempt: Attempt,
    client: Any,
    is_async: bool,
    parse: Mapping[str, Any] | None = None,
    *,
    beta: bool = False,
) -> Any:
    """What ``step`` recorded, as the SDK's types: a ``Message``, or a stream. ``parse``: the
    arguments of a ``messages.parse`` call, whose reply is a ``ParsedMessage``, parsed again
    from the recorded reply as the SDK parses it. ``beta``: a ``beta.messages`` call, given
    the beta types."""
    import anthropic
    from anthropic.lib._parse import _response
    from anthropic.types import Message
    from anthropic.types.beta import BetaMessage

    if step.chunks is None:
        result = step.result
        if not isinstance(result, Mapping):
            return result
        message = (BetaMessage if beta else Message).construct(**result)
        if parse is None:
            return message
        parser: Any = _response.parse_beta_response if beta else _response.parse_response
        output_format = parse.get("output_format", anthropic.NOT_GIVEN)
        return parser(output_format=output_format, response=message)
    return StreamProxy(_sdk_stream(step.chunks, client, is_async, beta), attempt)


def _sdk_stream(events: list[Any], client: Any, is_async: bool, beta: bool) -> Any:
    """The SDK's stream over the recorded events: an HTTP response made here, whose body is the
    events as Anthropic's API sends them (``event:`` and ``data:`` lines), read with the SDK's
    server-sent-events decoder whatever the client (a Bedrock client's own reads AWS
    event-stream frames: the journal keeps the events, not how they were framed)."""
    from anthropic import AsyncStream, Stream
    from anthropic.types import RawMessageStreamEvent
    from anthropic.types.beta import BetaRawMessageStreamEvent

    body = b"".join(
        b"event: "
        + str(event.get("type", "")).encode()
        + b"\ndata: "
        + json.dumps(event, separators=(",", ":")).encode()
        + b"\n\n"
        for event in events
    )
    response = made_response("anthropic", client, "/v1/messages", "text/event-stream", body)
    kind = AsyncStream if is_async else Stream
    event_type = BetaRawMessageStreamEvent if beta else RawMessageStreamEvent
    stream = kind(cast_to=cast(Any, event_type), response=response, client=client)
    # Read lazily, on the first event: the decoder set here is the one the stream reads with.
    stream._decoder = importlib.import_module("anthropic._streaming").SSEDecoder()
    return stream
