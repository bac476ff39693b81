"""The wrappers of ``responses.create`` (OpenAI's Responses API), sync and async, plain and
streamed (``stream=True``, and the ``responses.stream()`` helper, which calls ``create``).

A call is an attempt as a ``chat.completions.create`` call is (:mod:`.chat`): the same span,
logical call, journal step and transcript. What the span and the transcript read is the
``Response`` seen as the ``ChatCompletion`` it amounts to (:func:`chat_view`: its text, its
function calls as tool calls, its reasoning summary, its usage in the chat shape), and the
request's ``instructions`` and ``input`` items as chat messages (:func:`request_messages`), so
the transcript entries are the ones a chat completions call with the same exchange makes. The
journal keeps the ``Response`` itself (a stream's events in order): a re-entered run gets a
``Response``, or the SDK's stream of its own event types, back. ``with_raw_response`` and
``with_streaming_response`` calls are traced as the plain ones (the OpenAI Agents SDK streams
its Responses model through the latter), as chat completions' are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agenttrace._internal.errors import report_internal_error
from agenttrace.instrumentation.litellm.attempt import (
    REASONING_SUMMARY,
    Attempt,
    Reply,
    Request,
    offer_tool_calls,
)
from agenttrace.instrumentation.litellm.sdk_attempt import SDKCalls, atraced_call, traced_call
from agenttrace.instrumentation.openai.chat import completed_attributes, untraced
from agenttrace.instrumentation.openai.replay import sdk_stream
from agenttrace.instrumentation.openai.request import WHERE, describe
from agenttrace.instrumentation.openai.streaming import StreamProxy
from agenttrace.model.events import ContinuedMessages
from agenttrace.model.fork import RESPONSES
from agenttrace.model.journal import Step
from agenttrace.tracing.llm_attributes import field

_ENDED = ("response.completed", "response.incomplete", "response.failed")
"""The events that carry the whole ``Response`` at a stream's end."""


def create_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """For ``Responses.create`` and ``.parse``."""
    return traced_call(_RESPONSES, wrapped, instance, args, kwargs)


async def acreate_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """For ``AsyncResponses.create`` and ``.parse``."""
    return await atraced_call(_RESPONSES, wrapped, instance, args, kwargs)


def _describe(client: Any, kwargs: dict[str, Any]) -> Request:
    """What the call asks, its input seen as chat messages."""
    return describe(client, _as_chat_request(kwargs))


def _as_chat_request(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments with its input as chat ``messages`` (what the span describes)."""
    return {**kwargs, "messages": request_messages(kwargs)}


def request_messages(kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A Responses request's ``instructions`` and ``input`` as chat messages: the instructions a
    system message, a string input a user message, message items by their role, function calls
    an assistant message's tool calls, their outputs tool messages (reasoning items are the
    model's own, already recorded with the reply that made them). A request that continues a
    conversation the server keeps (``previous_response_id``) sends only what is new: its
    messages are :class:`ContinuedMessages`, which the transcript appends."""
    continues = isinstance(kwargs.get("previous_response_id"), str)
    messages: list[dict[str, Any]] = ContinuedMessages() if continues else []
    instructions = kwargs.get("instructions")
    if isinstance(instructions, str) and instructions:
        messages.append({"role": "system", "content": instructions})
    given = kwargs.get("input")
    if isinstance(given, str):
        messages.append({"role": "user", "content": given})
        return messages
    if not isinstance(given, Sequence):
        return messages
    for item in given:
        kind = field(item, "type")
        if kind == "function_call_output":
            output = field(item, "output")
            messages.append(
                {"role": "tool", "tool_call_id": field(item, "call_id"), "content": output}
            )
        elif kind == "function_call":
            call = _tool_call(item)
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and "tool_calls" in last:
                last["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind in (None, "message") and isinstance(field(item, "role"), str):
            messages.append({"role": field(item, "role"), "content": _text(field(item, "content"))})
    return messages


def _tool_call(item: Any) -> dict[str, Any]:
    return {
        "id": field(item, "call_id"),
        "type": "function",
        "function": {"name": field(item, "name"), "arguments": field(item, "arguments") or ""},
    }


def _text(content: Any) -> Any:
    """A message's content as text when it is text parts only (``input_text``,
    ``output_text``), else as it is (images, files)."""
    if not isinstance(content, Sequence) or isinstance(content, str):
        return content
    texts = [field(part, "text") for part in content]
    if all(isinstance(text, str) for text in texts):
        return "".join(texts)
    return content


def chat_view(response: Any) -> Any:
    """The ``ChatCompletion`` a ``Response`` amounts to (None: no response)."""
    if response is None:
        return None
    from openai.types.chat import ChatCompletion

    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in field(response, "output") or ():
        kind = field(item, "type")
        if kind == "message":
            for part in field(item, "content") or ():
                text = field(part, "text")
                if isinstance(text, str):
                    texts.append(text)
        elif kind == "function_call":
            calls.append(_tool_call(item))
        elif kind == "reasoning":
            for part in field(item, "summary") or ():
                text = field(part, "text")
                if isinstance(text, str):
                    reasoning.append(text)
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    if reasoning:
        message["reasoning_content"] = "\n".join(reasoning)
        # A summary is all the Responses API gives of the reasoning: the opTree's ``final``.
        message[REASONING_SUMMARY] = message["reasoning_content"]
    data: dict[str, Any] = {
        "id": field(response, "id"),
        "object": "chat.completion",
        "created": field(response, "created_at"),
        "model": field(response, "model"),
        "choices": [{"index": 0, "message": message, "finish_reason": _finish_reason(response)}],
    }
    usage = field(response, "usage")
    if usage is not None:
        data["usage"] = {
            "prompt_tokens": field(usage, "input_tokens"),
            "completion_tokens": field(usage, "output_tokens"),
            "total_tokens": field(usage, "total_tokens"),
            "prompt_tokens_details": {
                "cached_tokens": field(field(usage, "input_tokens_details"), "cached_tokens")
            },
            "completion_tokens_details": {
                "reasoning_tokens": field(field(usage, "output_tokens_details"), "reasoning_tokens")
            },
        }
    return ChatCompletion.construct(**data)


def _finish_reason(response: Any) -> str | None:
    """``tool_calls`` when the reply calls functions, ``stop`` when it is complete, else why it
    is not (``max_output_tokens``, ``content_filter``) or its status (``failed``)."""
    output = field(response, "output") or ()
    if any(field(item, "type") == "function_call" for item in output):
        return "tool_calls"
    status = field(response, "status")
    if status == "completed":
        return "stop"
    reason = field(field(response, "incomplete_details"), "reason")
    return reason if isinstance(reason, str) else status if isinstance(status, str) else None


def assemble_events(events: list[Any]) -> Any:
    """The ``ChatCompletion`` a Responses stream's events make: the whole ``Response`` its last
    event carries; a stream cut short, the text its deltas gave (None: no event)."""
    if not events:
        return None
    for event in reversed(events):
        if field(event, "type") in _ENDED:
            return chat_view(field(event, "response"))
    started = next((field(e, "response") for e in events if field(e, "response") is not None), None)
    from openai.types.chat import ChatCompletion

    text = "".join(
        field(e, "delta") or "" for e in events if field(e, "type") == "response.output_text.delta"
    )
    return ChatCompletion.construct(
        id=field(started, "id"),
        object="chat.completion",
        created=field(started, "created_at"),
        model=field(started, "model"),
        choices=[
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": None}
        ],
    )


def _finish(result: Any, attempt: Attempt) -> Any:
    """End the attempt with ``result`` (a ``Response``; a stream gets the proxy that ends it
    later), its reply in the transcript first. A failure of ours is reported, never raised."""
    from openai import AsyncStream, Stream

    if isinstance(result, (Stream, AsyncStream)):
        return StreamProxy(result, attempt, assemble_events)
    view = None
    try:
        view = chat_view(result)
        offer_tool_calls(attempt, view)
    except Exception as exc:
        report_internal_error(WHERE, exc)
    attempt.succeed(
        lambda: completed_attributes(attempt, view) if view is not None else {},
        Reply(response=_journaled(result)),  # the Response itself: what a re-entry gets back
    )
    return result


def _journaled(result: Any) -> Any:
    """What the journal keeps of a reply: the ``Response``, or a ``parse`` call's
    ``ParsedResponse`` as its data, dumped without pydantic's warnings (its generic type warns
    of ``parsed``, in the program's output); a replay parses the text again."""
    from openai.types.responses import ParsedResponse

    if isinstance(result, ParsedResponse):
        return result.model_dump(mode="json", warnings=False)
    return result


def _replay(
    recorded: Step, attempt: Attempt, client: Any, is_async: bool, parse: dict[str, Any] | None
) -> Any:
    """The ``Response`` (or the stream of events, behind its proxy) the journal recorded for
    this attempt. ``parse``: the arguments of a ``responses.parse`` call, whose
    ``ParsedResponse`` is parsed again as the SDK parses it."""
    from openai.types.responses import Response, ResponseStreamEvent

    if recorded.chunks is not None:
        stream = sdk_stream(recorded.chunks, client, is_async, ResponseStreamEvent, "/responses")
        return StreamProxy(stream, attempt, assemble_events)
    result = recorded.result
    if isinstance(result, Mapping):
        result = Response.construct(**result)
        if parse is not None:
            result = _parsed(result, parse)
    return result


def _parsed(response: Any, parse: Mapping[str, Any]) -> Any:
    """``response`` parsed as ``responses.parse`` parses the reply it asked for."""
    import openai
    from openai.lib._parsing._responses import parse_response

    omit = getattr(openai, "omit", None) or openai.NOT_GIVEN
    return parse_response(
        text_format=parse.get("text_format", omit),
        input_tools=_make_tools()(parse.get("tools", omit)),
        response=response,
    )


_RESPONSES = SDKCalls(
    WHERE, untraced, _describe, _replay, _finish, "openai", "/responses", RESPONSES
)
"""What a Responses API call does its own way."""


def _make_tools() -> Any:
    """The SDK's helper that turns ``parse()``'s tools into the request's: openai 3 moved it
    (found by name, so that one module type-checks against either release)."""
    import importlib

    for where in ("openai.lib._response_resources", "openai.resources.responses.responses"):
        try:
            return importlib.import_module(where)._make_tools
        except (ImportError, AttributeError):
            continue
    raise ImportError("openai: no _make_tools helper for responses.parse")
