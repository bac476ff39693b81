"""Raw-response calls of a Stainless-built SDK (OpenAI's, Anthropic's): one attempt each, as
the plain call is.

``client.<resource>.with_raw_response.<method>(...)`` and ``.with_streaming_response.<method>``
call the resource's own method (the one the instrumentation wraps) with one header more,
:data:`RAW_HEADER`, and give the caller the SDK's response object instead of the reply: a
``LegacyAPIResponse`` (OpenAI's ``with_raw_response``, header ``"true"``), an ``APIResponse`` /
``AsyncAPIResponse`` (Anthropic's ``with_raw_response``, ``"raw"``; both SDKs'
``with_streaming_response``, ``"stream"``, whose body is not read yet, inside the context
manager the SDK's own wrapper builds around the call).

The hook is the wrapped method itself: no SDK factory is patched, so every accessor that calls
the method (each resource builds its own) is covered, and the SDK builds its context managers
as it always does. The call's response object is parsed with the SDK's own ``.parse()`` while
the attempt is current (:func:`parsing`: a JSON body is read into memory, where the caller can
still read it all, ``.text``, ``.json()``, ``iter_lines()``; a server-sent-events body is not
read, its ``Stream`` is made over it), and that parse, cached by the SDK, is what ends the
attempt (:func:`finish_raw`): the reply, or the stream behind the proxy that ends the span when
it is read, is what the caller's ``.parse()`` returns. A re-entered run gets the same kind of
response object over the journaled reply (:func:`replayed_raw`), nothing sent.
"""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from agenttrace._internal.errors import report_internal_error
from agenttrace.instrumentation.litellm.attempt import Attempt
from agenttrace.instrumentation.litellm.sdk_http import made_response

RAW_HEADER = "X-Stainless-Raw-Response"
"""The header the SDKs' ``with_raw_response`` (``"true"``: OpenAI's legacy response; ``"raw"``)
and ``with_streaming_response`` (``"stream"``) add to the call."""


def raw_kind(kwargs: Mapping[str, Any]) -> str | None:
    """The call's :data:`RAW_HEADER` value (``"true"``, ``"raw"``, ``"stream"``), else None."""
    headers = kwargs.get("extra_headers")
    if not isinstance(headers, Mapping):
        return None
    kind = headers.get(RAW_HEADER)
    return kind if isinstance(kind, str) else None


def parsing(wrapped: Callable[..., Any]) -> Callable[..., Any]:
    """``wrapped`` (a raw call), its response object parsed by the SDK (and cached there) before
    it is returned: in the attempt, so a body that cannot be read fails it."""

    def send(*args: Any, **kwargs: Any) -> Any:
        raw = wrapped(*args, **kwargs)
        parse = getattr(raw, "parse", None)
        if callable(parse):  # else a response object of another shape: finish_raw reports it
            parse()
        return raw

    return send


def aparsing(wrapped: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """Async :func:`parsing` (an ``AsyncAPIResponse``'s ``.parse()`` is awaited; a legacy
    response's is not a coroutine)."""

    async def send(*args: Any, **kwargs: Any) -> Any:
        raw = await wrapped(*args, **kwargs)
        parse = getattr(raw, "parse", None)
        parsed = parse() if callable(parse) else None
        if inspect.isawaitable(parsed):
            await parsed
        return raw

    return send


def finish_raw(
    raw: Any, attempt: Attempt, finish: Callable[[Any, Attempt], Any], where: str
) -> Any:
    """End ``attempt`` with the reply ``raw`` holds (parsed by :func:`parsing`); ``raw``, whose
    ``.parse()`` now gives what ``finish`` made of it (the reply, or a stream behind its
    proxy). A response object of another shape is a failure of ours, reported under
    ``where``: its attempt ends with no reply (nothing journaled), and the caller gets it."""
    try:
        cache = raw._parsed_by_type
        parsed = cache[raw._cast_to]
    except Exception as exc:
        try:
            report_internal_error(where, exc)
        finally:  # ends the span even when the test suite re-raises the report
            attempt.succeed(dict)
        return raw
    ended = finish(parsed, attempt)
    if ended is not parsed:
        cache[raw._cast_to] = ended  # the SDK's cache: what .parse() returns
    return raw


def replayed_raw(
    package: str, kind: str, reply: Any, client: Any, is_async: bool, path: str
) -> Any:
    """The response object a raw call of ``kind`` gets from ``package``'s SDK (``"openai"``,
    ``"anthropic"``), whose ``.parse()`` gives ``reply`` (a replayed reply, or stream proxy):
    over the stream's own HTTP response, or one made here with the reply's JSON body (no
    request is sent). ``path``: the endpoint the request would have gone to."""
    sdk = importlib.import_module(f"{package}._response")
    options = importlib.import_module(f"{package}._models").FinalRequestOptions
    streams = importlib.import_module(f"{package}._streaming")
    streamed = isinstance(reply, (streams.Stream, streams.AsyncStream))  # its proxy: one too
    if streamed:
        response = reply.response  # its body: the recorded events, as the server sent them
    else:
        data = (
            reply.model_dump(mode="json", warnings=False) if hasattr(reply, "model_dump") else reply
        )
        response = made_response(
            package, client, path, "application/json", json.dumps(data).encode()
        )
    if kind == "true":
        made = importlib.import_module(f"{package}._legacy_response").LegacyAPIResponse
    else:
        made = sdk.AsyncAPIResponse if is_async else sdk.APIResponse
    cast_to = type(reply)
    raw = made(
        raw=response,
        cast_to=cast_to,
        client=client,
        stream=streamed,
        stream_cls=None,
        options=options.construct(method="post", url=path),
    )
    raw._parsed_by_type[cast_to] = reply
    return raw
