"""``with_raw_response`` calls: ``client.chat.completions.with_raw_response.create(...)`` gives
the SDK's ``LegacyAPIResponse`` (headers, status, ``.parse()``) instead of the reply. The call
is traced as a plain one: the reply is what ``.parse()`` gives (parsed here, once; the SDK
caches it, so the caller's ``.parse()`` gets the same object, or the stream proxy that ends the
span), and a re-entered run gets a ``LegacyAPIResponse`` over the journaled reply.

litellm makes every OpenAI-compatible request this way, from inside its own attempt (already
passed through: one span). With litellm's instrumentation off, its calls must stay untraced
(turning it off is not undone by the SDK's): a raw call that litellm's code makes is left alone
(:func:`made_by_litellm`). ``with_streaming_response`` calls (the body not read) pass through.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from typing import Any

from agenttrace.instrumentation.litellm.attempt import Attempt

RAW_HEADER = "X-Stainless-Raw-Response"
"""The header the SDK's ``with_raw_response`` (``"true"``) and ``with_streaming_response``
(``"stream"``) add to the call."""

_OURS = (
    "openai",
    "agenttrace.instrumentation.",
    # Another instrumentation's wrapper of the SDK outside ours (contrib's openai-v2,
    # OpenLLMetry's): its frames are between litellm's and ours.
    "opentelemetry.instrumentation.",
    "opentelemetry.util.genai.",
    "wrapt",
)


def raw_kind(kwargs: Mapping[str, Any]) -> str | None:
    """``"true"`` for a ``with_raw_response`` call, ``"stream"`` for a
    ``with_streaming_response`` one, else None."""
    headers = kwargs.get("extra_headers")
    if not isinstance(headers, Mapping):
        return None
    kind = headers.get(RAW_HEADER)
    return kind if isinstance(kind, str) else None


def made_by_litellm() -> bool:
    """Whether the code that called the SDK (the first caller outside the SDK, this
    instrumentation and another's wrapping the SDK) is litellm's."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__")
        if not isinstance(name, str) or not name.startswith(_OURS):
            return isinstance(name, str) and (name == "litellm" or name.startswith("litellm."))
        frame = frame.f_back  # type: ignore[assignment]
    return False


def finish_raw(raw: Any, attempt: Attempt, finish: Callable[[Any, Attempt], Any]) -> Any:
    """End ``attempt`` with the reply ``raw`` (a ``LegacyAPIResponse``) holds; ``raw``, whose
    ``.parse()`` gives what ``finish`` made of it (the reply, or a stream behind its proxy)."""
    parsed = raw.parse()
    ended = finish(parsed, attempt)
    if ended is not parsed:
        raw._parsed_by_type[raw._cast_to] = ended  # the SDK's cache: what .parse() returns
    return raw


def replayed_raw(reply: Any, client: Any, is_async: bool) -> Any:
    """A ``LegacyAPIResponse`` whose ``.parse()`` gives ``reply`` (a replayed reply, or stream
    proxy), over an HTTP response made here with the reply's JSON body (no request is sent)."""
    from openai import AsyncStream, Stream
    from openai._legacy_response import LegacyAPIResponse
    from openai._models import FinalRequestOptions
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

    from agenttrace.instrumentation.openai.replay import sdk_http

    streamed = isinstance(reply, (Stream, AsyncStream))
    if streamed:
        body = b""
        content_type = "text/event-stream"
    else:
        data = (
            reply.model_dump(mode="json", warnings=False) if hasattr(reply, "model_dump") else reply
        )
        body = json.dumps(data).encode()
        content_type = "application/json"
    url = str(getattr(client, "base_url", "http://replayed/")).rstrip("/") + "/chat/completions"
    http = sdk_http()
    response = http.Response(
        200,
        headers={"content-type": content_type},
        content=body,
        request=http.Request("POST", url),
    )
    stream_cls: Any = (AsyncStream if is_async else Stream)[ChatCompletionChunk]
    raw = LegacyAPIResponse(
        raw=response,
        cast_to=ChatCompletion,
        client=client,
        stream=streamed,
        stream_cls=stream_cls if streamed else None,
        options=FinalRequestOptions.construct(method="post", url="/chat/completions"),
    )
    raw._parsed_by_type[ChatCompletion] = reply
    return raw
