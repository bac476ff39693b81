"""What one ``messages.create`` call asks, and its reply as the litellm path records replies.

The attempts, transcripts and span attributes are the litellm instrumentation's, which read
OpenAI-shaped messages (what a litellm caller sends, and litellm's ``ModelResponse``): a
request's ``system`` and Anthropic content blocks are read as the messages litellm would have
been given for the same conversation (:func:`chat_messages`), and a ``Message`` as the reply
litellm makes of it (:func:`chat_view`: text, ``tool_use`` blocks as tool calls, a server
tool's calls as tool calls of their own type with their results in the content, thinking
blocks as reasoning without their signatures, the stop reason, Anthropic's usage as it came).
The provider is read from the client's class (Bedrock, Vertex) and the price comes from
litellm's price map (through litellm when it is loaded, else from the installed litellm's map
file, without importing litellm).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from agenttrace import semconv as sc
from agenttrace._internal import price_table
from agenttrace._internal.redact import remember_secret
from agenttrace.instrumentation.base import PatchState
from agenttrace.instrumentation.litellm.attempt import Request
from agenttrace.instrumentation.litellm.utils import price as price_of
from agenttrace.model.events import SERVER_TOOL_CALLS
from agenttrace.model.outcome import Usage
from agenttrace.tracing.llm_attributes import (
    field,
    provider_name,
    request_attributes,
    request_outcome,
)

WHERE = "anthropic instrumentation"


state = PatchState()
"""Whether the Anthropic SDK is patched, and what was patched."""


def litellm_provider(client: Any) -> str:
    """The provider ``client`` sends to, as litellm names providers."""
    name = type(client).__name__
    if "Bedrock" in name:
        return "bedrock"
    if "Vertex" in name:
        return "vertex_ai"
    return "anthropic"


def describe(client: Any, kwargs: Mapping[str, Any]) -> Request:
    """What a ``create`` call on ``client`` asks (the SDK takes keyword arguments only)."""
    model = str(kwargs.get("model") or "unknown")
    provider = litellm_provider(client)
    key = getattr(client, "api_key", None)
    if isinstance(key, str) and key:
        remember_secret(key)  # never recorded, wherever it would show up
    priced_as = model if provider == "anthropic" else f"{provider}/{model}"
    return Request(
        sc.OP_CHAT,
        sc.SPAN_LLM.format(model=model),
        request_attributes(bool(kwargs.get("stream")), kwargs),
        model,
        priced_as,
        chat_messages(kwargs),
        request_outcome(model, provider_name(provider), None),
        where=WHERE,
    )


def price(priced_as: str, usage: Usage | None, reply: Any = None) -> float | None:
    """The price of ``usage`` from litellm's price map (litellm's own when litellm is loaded,
    else read from the installed litellm's map file without importing it, which takes seconds;
    None when litellm is not installed), with the web searches the ``reply`` (its chat view)
    says Anthropic ran, at the map's price per search, as litellm prices the same reply."""
    cost = price_of(priced_as, usage)
    searches = field(field(field(reply, "usage"), "server_tool_use"), "web_search_requests")
    if cost is None or not isinstance(searches, int) or searches <= 0:
        return cost
    each = (_model_info(priced_as).get("search_context_cost_per_query") or {}).get(
        "search_context_size_medium"
    )
    return cost + searches * each if isinstance(each, (int, float)) else cost


def _model_info(priced_as: str) -> Mapping[str, Any]:
    """The price map's entry for a model: litellm's when it is loaded, else the map file's."""
    litellm = sys.modules.get("litellm")
    if litellm is not None:
        try:
            return litellm.get_model_info(priced_as) or {}
        except Exception:  # a model without a price in litellm's map
            return {}
    return price_table.entry(priced_as) or {}


# --- requests -----------------------------------------------------------------------------------


def chat_messages(kwargs: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The request's ``system`` and ``messages`` as the OpenAI-shaped messages a litellm caller
    sends for the same conversation: a system message first, an assistant message's text and
    ``tool_use`` blocks as its content and tool calls, a user message's ``tool_result`` blocks
    as tool messages. Thinking blocks sent back are left out (they are the reply's reasoning)."""
    messages = kwargs.get("messages")
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        return None
    converted: list[dict[str, Any]] = []
    system = kwargs.get("system")
    if isinstance(system, str) and system:
        converted.append({"role": "system", "content": system})
    elif isinstance(system, Sequence) and system:
        converted.append({"role": "system", "content": _text_of(system)})
    for message in messages:
        role = field(message, "role") or "user"
        content = field(message, "content")
        if role == "assistant":
            converted.append(_assistant(content))
        else:
            converted.extend(_user(role, content))
    return converted


def _text_of(blocks: Sequence[Any]) -> str:
    return "".join(
        str(field(block, "text") or "") for block in blocks if field(block, "type") == "text"
    )


def _assistant(content: Any) -> dict[str, Any]:
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    return assistant_message(content or ())


def assistant_message(blocks: Sequence[Any]) -> dict[str, Any]:
    """An assistant message (a request's or a reply's) as litellm gives it: its text, or
    ``None`` when it has none, and its ``tool_use`` blocks as tool calls. A server tool's call
    (``server_tool_use``, ``mcp_tool_use``: run by Anthropic, not by the client) is a tool
    call of that type; when its results (``web_search_tool_result``, ...) are in the message,
    the content is its parts in order, text and results (their opaque encrypted fields left
    out: only the journal keeps them, with the exact reply)."""
    texts = [field(b, "text") for b in blocks if field(b, "type") == "text"]
    calls = [
        {
            "id": field(b, "id"),
            "type": "function" if field(b, "type") == "tool_use" else field(b, "type"),
            "function": {"name": field(b, "name"), "arguments": _arguments(field(b, "input"))},
        }
        for b in blocks
        if field(b, "type") == "tool_use" or field(b, "type") in SERVER_TOOL_CALLS
    ]
    content: Any = "".join(t for t in texts if isinstance(t, str)) if texts else None
    if any(_server_result(b) for b in blocks):
        content = [_part(b) for b in blocks if field(b, "type") == "text" or _server_result(b)]
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return message


def _server_result(block: Any) -> bool:
    """Whether ``block`` is a server tool's result (``web_search_tool_result``,
    ``web_fetch_tool_result``, ``code_execution_tool_result``, ``mcp_tool_result``, ...): every
    ``*_tool_result`` block of an assistant message (a client tool's ``tool_result`` is the
    user's)."""
    kind = field(block, "type")
    return isinstance(kind, str) and kind.endswith("_tool_result")


def _part(block: Any) -> dict[str, Any]:
    """A text block's or a server tool result's content part, without encrypted fields (nor
    unset ones: a block sent back as a dict made without them reads the same)."""
    if field(block, "type") == "text":
        return {"type": "text", "text": field(block, "text") or ""}
    part: dict[str, Any] = _unencrypted(_plain(block))
    return part


def _unencrypted(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {
            key: _unencrypted(item)
            for key, item in value.items()
            if item is not None and not (isinstance(key, str) and key.startswith("encrypted_"))
        }
    if isinstance(value, list):
        return [_unencrypted(item) for item in value]
    return value


def _arguments(value: Any) -> str:
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    # json.dumps as litellm calls it: the same arguments text on both paths
    return json.dumps(value if value is not None else {})


def _user(role: str, content: Any) -> list[dict[str, Any]]:
    """A user message: its ``tool_result`` blocks as tool messages, the rest as the user's."""
    if isinstance(content, str) or not isinstance(content, Sequence):
        return [{"role": role, "content": content}]
    results = [b for b in content if field(b, "type") == "tool_result"]
    rest = [b for b in content if field(b, "type") != "tool_result"]
    messages = [
        {
            "role": "tool",
            "tool_call_id": field(b, "tool_use_id"),
            "content": _result_content(field(b, "content")),
        }
        for b in results
    ]
    if rest:
        if all(field(b, "type") == "text" for b in rest) and len(rest) == 1:
            messages.append({"role": role, "content": field(rest[0], "text")})
        else:
            messages.append({"role": role, "content": [_plain(b) for b in rest]})
    return messages


def _result_content(content: Any) -> Any:
    if isinstance(content, Sequence) and not isinstance(content, str):
        return _text_of(content)
    return content if content is not None else ""


def _plain(block: Any) -> Any:
    return block.model_dump() if hasattr(block, "model_dump") else block


# --- replies ------------------------------------------------------------------------------------


class _Message:
    """A reply's message as litellm's ``Message`` reads: the transcript takes its role, content
    and tool calls; its thinking blocks (texts only, no signatures) are the reasoning."""

    __slots__ = ("content", "role", "thinking_blocks", "tool_calls")

    def __init__(self, plain: dict[str, Any], thinking: list[dict[str, str]]) -> None:
        self.role = "assistant"
        self.content = plain["content"]
        self.tool_calls = plain.get("tool_calls")
        self.thinking_blocks = thinking or None


def chat_view(message: Any) -> dict[str, Any]:
    """A ``Message`` (or its dict) as the chat completion litellm makes of it: one choice, its
    stop reason as the finish reason, and Anthropic's usage as it came (cache reads and writes
    beside ``input_tokens``)."""
    blocks = field(message, "content") or ()
    thinking = [
        {"type": "thinking", "thinking": text}
        for text in (field(b, "thinking") for b in blocks if field(b, "type") == "thinking")
        if isinstance(text, str) and text
    ]
    choice = {
        "index": 0,
        "message": _Message(assistant_message(blocks), thinking),
        "finish_reason": field(message, "stop_reason"),
    }
    return {
        "id": field(message, "id"),
        "model": field(message, "model"),
        "choices": [choice],
        "usage": field(message, "usage"),
    }
