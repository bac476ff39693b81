"""A scripted Anthropic-compatible server on 127.0.0.1, for the Claude Agent SDK's bundled CLI.

Speaks ``POST /v1/messages`` the way the Anthropic API does, as server-sent events when the
request asks for a stream (the CLI always does): ``message_start`` (with the input usage and an
output count of 1, as the API sends it), then per content block ``content_block_start``, its
deltas (``text_delta``; ``thinking_delta`` and ``signature_delta``; ``input_json_delta`` in
pieces) and ``content_block_stop``, then ``message_delta`` with the stop reason and the *final*
usage, and ``message_stop``. Without ``stream`` it answers the whole message as JSON;
``/v1/messages/count_tokens`` gets a count (or a 429, as scripted), and
``/v1/messages/batches`` creates and retrieves one batch. The same messages answer the clouds'
paths:
Vertex's ``.../models/M:rawPredict`` and ``:streamRawPredict`` and Bedrock's
``/model/M/invoke`` (the model is in the path there), and Bedrock's
``/model/M/invoke-with-response-stream`` with the same events in AWS event-stream frames
(:mod:`.aws_eventstream`). A failure (``status`` 400, 401, 429,
500, ...) is answered with the API's error body.

Each ``/v1/messages`` request takes the next scripted :class:`Reply` (or the default, a short
text), so a test scripts the model's turns in order: the main agent's and, while an ``Agent``
tool call runs, its sub-agent's (the CLI runs a sub-agent to its end before the main agent's
next request). Every request is recorded, headers included. Message and tool call ids are
numbered per server, so each reply has ids of its own unless the script names them.

Point the CLI at it with ``ANTHROPIC_BASE_URL=server.base_url`` (see :meth:`AnthropicServer.env`).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from . import aws_eventstream
from .llm_server import JsonHandler, LoopbackServer, Request

__all__ = [
    "AnthropicServer",
    "Block",
    "Reply",
    "Request",
    "Sent",
    "asked",
    "not_asked",
    "server_result",
    "server_tool_use",
    "text",
    "thinking",
    "tool_use",
]


@dataclasses.dataclass
class Block:
    """One content block of a reply: ``text``, ``thinking``, ``tool_use``, ``server_tool_use``,
    or a server tool's result (``raw``: the block as the API sends it, whole)."""

    type: str
    text: str = ""
    name: str = ""
    input: dict[str, Any] = dataclasses.field(default_factory=dict)
    id: str | None = None
    """A tool call's id (``None``: the server numbers it)."""
    signature: str = "c2lnbmF0dXJl"
    """A thinking block's signature (opaque to the client)."""
    raw: dict[str, Any] | None = None
    """A server tool result block, as sent (streamed whole in its ``content_block_start``)."""


def text(value: str) -> Block:
    """A text block."""
    return Block("text", text=value)


def thinking(value: str) -> Block:
    """A thinking block."""
    return Block("thinking", text=value)


def tool_use(name: str, input: dict[str, Any], id: str | None = None) -> Block:
    """A tool call (``id``: its call id, else one the server numbers)."""
    return Block("tool_use", name=name, input=input, id=id)


def server_tool_use(name: str, input: dict[str, Any], id: str) -> Block:
    """A server tool's call (``web_search``, ...), which the API runs itself."""
    return Block("server_tool_use", name=name, input=input, id=id)


def server_result(raw: dict[str, Any]) -> Block:
    """A block the API sends whole, as given: a server tool's result
    (``web_search_tool_result``, ``mcp_tool_result``, ...) or an MCP connector's call."""
    return Block(str(raw["type"]), raw=raw)


DEFAULT_USAGE = {
    "input_tokens": 10,
    "cache_creation_input_tokens": 20,
    "cache_read_input_tokens": 30,
    "output_tokens": 5,
}


@dataclasses.dataclass
class Reply:
    """What the server answers to one ``/v1/messages`` request."""

    blocks: list[Block] = dataclasses.field(default_factory=lambda: [text("Hello!")])
    usage: dict[str, Any] = dataclasses.field(default_factory=lambda: dict(DEFAULT_USAGE))
    """The message's usage: input and cache counts go out in ``message_start`` (with an output
    count of 1), the final ``output_tokens`` (and ``server_tool_use``) in ``message_delta``."""
    status: int = 200
    error_message: str | None = None
    headers: dict[str, str] | None = None
    """Extra response headers (``retry-after`` for a failure, say)."""
    message_id: str | None = None
    """The message id (``None``: the server numbers it)."""
    stop_reason: str | None = None
    """``None``: ``tool_use`` if a block calls a tool, else ``end_turn``."""
    delay: float = 0.0
    """Seconds to wait before answering."""
    stream_exception: str | None = None
    """Bedrock's stream only: the type of an exception frame sent after the first content
    block starts, instead of the rest of the reply (``throttlingException``, ...)."""
    when: Callable[[dict[str, Any]], bool] | None = None
    """Which requests this reply is for (``None``: any); a request takes the first reply in
    the script it fits, so agents that run at once (a background sub-agent) get their own."""


def asked(text: str) -> Callable[[dict[str, Any]], bool]:
    """``Reply.when`` for the requests of the agent whose first user message holds ``text``
    (a sub-agent's prompt), and ``not_asked`` for all others."""

    def fits(body: dict[str, Any]) -> bool:
        return text in _first_user_text(body)

    return fits


def not_asked(text: str) -> Callable[[dict[str, Any]], bool]:
    """``Reply.when`` for the requests whose first user message does not hold ``text``."""
    return lambda body: text not in _first_user_text(body)


def _first_user_text(body: dict[str, Any]) -> str:
    for message in body.get("messages") or ():
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        return "\n".join(
            part.get("text", "") for part in content or () if part.get("type") == "text"
        )
    return ""


@dataclasses.dataclass
class Sent:
    """A reply as it went out: its message id and tool call ids, for assertions."""

    message_id: str
    tool_ids: list[str]
    reply: Reply
    request: Request


class AnthropicServer(LoopbackServer):
    """Start with :meth:`start`; ``base_url`` is what ``ANTHROPIC_BASE_URL`` takes."""

    def __init__(self) -> None:
        self.script: deque[Reply] = deque()
        self.default = Reply()
        self.requests: list[Request] = []
        self.sent: list[Sent] = []
        """Every ``/v1/messages`` answer, failures included, in order."""
        self.count_refusals = 0
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        server = self

        class Handler(JsonHandler):
            def do_POST(self) -> None:
                body = self.read_json()
                path = self.path.split("?", 1)[0]
                request = Request(self.path, dict(self.headers.items()), body)
                try:
                    if path.endswith("/count_tokens"):
                        server._record(request)
                        if server._count_refused():
                            self._json(429, _error_body(Reply(status=429)))
                        else:
                            self._json(200, {"input_tokens": 10})
                    elif path.endswith("/messages/batches"):
                        server._record(request)
                        self._json(200, _BATCH)
                    elif (model := _cloud_model(path)) is not None or path.endswith("/messages"):
                        # Vertex and Bedrock name the model in the path, not the body.
                        body = {**body, "model": model} if model else body
                        reply, sent = server._take(request)
                        if reply.delay:
                            time.sleep(reply.delay)
                        if reply.status != 200:
                            self._json(reply.status, _error_body(reply), reply.headers)
                        elif path.endswith(_BEDROCK_STREAM):
                            self._frames(_events(body, reply, sent), reply)
                        elif body.get("stream"):
                            self._stream(_events(body, reply, sent), reply.headers)
                        else:
                            self._json(200, _message(body, reply, sent), reply.headers)
                    else:
                        server._record(request)
                        self._json(404, {"type": "error", "error": {"type": "not_found_error"}})
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up

            def do_GET(self) -> None:
                request = Request(self.path, dict(self.headers.items()), {})
                server._record(request)
                if self.path.split("?", 1)[0].endswith(f"/messages/batches/{_BATCH['id']}"):
                    self._json(200, _BATCH)
                else:
                    self._json(404, {"type": "error", "error": {"type": "not_found_error"}})

            def _stream(
                self, events: Iterator[tuple[str, dict[str, Any]]], headers: dict[str, str] | None
            ) -> None:
                self.send_response(200)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for name, data in events:
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()
                self.close_connection = True

            def _frames(self, events: Iterator[tuple[str, dict[str, Any]]], reply: Reply) -> None:
                """Bedrock's stream: each event an AWS event-stream frame."""
                self.send_response(200)
                for name, value in (reply.headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", aws_eventstream.CONTENT_TYPE)
                self.send_header("Connection", "close")
                self.end_headers()
                for name, data in events:
                    self.wfile.write(aws_eventstream.chunk(data))
                    if name == "content_block_start" and reply.stream_exception:
                        failure = aws_eventstream.exception(reply.stream_exception, "Slow down")
                        self.wfile.write(failure)
                        break
                    self.wfile.flush()
                self.wfile.flush()
                self.close_connection = True

        super().__init__(Handler)

    def reset(self, *replies: Reply, count_refusals: int = 0) -> None:
        """Forget recorded requests; answer the next requests with ``replies``, then the
        default; refuse the next ``count_refusals`` token counts with a 429."""
        with self._lock:
            self.count_refusals = count_refusals
            self.script = deque(replies)
            self.requests = []
            self.sent = []
            self.default = Reply()

    def env(self, home: Path | None = None) -> dict[str, str]:
        """The environment that points the Claude Code CLI here and keeps it off any other
        host (see docs/how-to/claude-agent-sdk.md); with ``home``, the CLI's
        ``HOME`` and ``TMPDIR`` are in it, so it writes nothing outside it. Pass it as
        ``ClaudeAgentOptions(env=...)`` (merged over the process's environment)."""
        env = {}
        if home is not None:
            tmp = home / "tmp"
            tmp.mkdir(parents=True, exist_ok=True)
            env = {"HOME": str(home), "TMPDIR": str(tmp)}
        return {
            **env,
            "ANTHROPIC_BASE_URL": self.base_url,
            "ANTHROPIC_API_KEY": "sk-ant-scripted-test-key",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
        }

    def message_requests(self) -> list[Request]:
        """The ``/v1/messages`` requests received, in order."""
        with self._lock:
            return [sent.request for sent in self.sent]

    def _count_refused(self) -> bool:
        with self._lock:
            self.count_refusals -= 1
            return self.count_refusals >= 0

    def _record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def _take(self, request: Request) -> tuple[Reply, Sent]:
        with self._lock:
            self.requests.append(request)
            reply = next(
                (r for r in self.script if r.when is None or r.when(request.body)), self.default
            )
            if reply is not self.default:
                self.script.remove(reply)
            message_id = reply.message_id or f"msg_scripted_{next(self._ids):04d}"
            tool_ids = [
                block.id or f"toolu_scripted_{next(self._ids):04d}"
                for block in reply.blocks
                if block.type == "tool_use"
            ]
            sent = Sent(message_id, tool_ids, reply, request)
            self.sent.append(sent)
            return reply, sent


_BATCH: dict[str, Any] = {
    "id": "msgbatch_scripted_01",
    "type": "message_batch",
    "processing_status": "in_progress",
    "request_counts": {"canceled": 0, "errored": 0, "expired": 0, "processing": 1, "succeeded": 0},
    "created_at": "2026-12-06T00:00:00Z",
    "expires_at": "2026-12-07T00:00:00Z",
    "archived_at": None,
    "cancel_initiated_at": None,
    "ended_at": None,
    "results_url": None,
}
"""The message batch ``/v1/messages/batches`` creates and retrieves (one, in progress)."""

_BEDROCK_STREAM = "/invoke-with-response-stream"
"""Bedrock's streamed call (answered in AWS event-stream frames, :mod:`.aws_eventstream`)."""


def _cloud_model(path: str) -> str | None:
    """The model a Vertex (``.../models/M:rawPredict``, ``:streamRawPredict``) or Bedrock
    (``/model/M/invoke``, ``/model/M/invoke-with-response-stream``) request names in its path;
    ``None`` for any other path."""
    if path.endswith((":rawPredict", ":streamRawPredict")) and "/models/" in path:
        return urllib.parse.unquote(path.rsplit("/models/", 1)[1].split(":", 1)[0])
    if path.startswith("/model/"):
        for end in ("/invoke", _BEDROCK_STREAM):
            if path.endswith(end):
                return urllib.parse.unquote(path[len("/model/") : -len(end)])
    return None


def _error_body(reply: Reply) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {
            "type": {
                400: "invalid_request_error",
                401: "authentication_error",
                403: "permission_error",
                404: "not_found_error",
                429: "rate_limit_error",
                529: "overloaded_error",
            }.get(reply.status, "api_error"),
            "message": reply.error_message or f"scripted failure {reply.status}",
        },
    }


def _stop_reason(reply: Reply) -> str:
    if reply.stop_reason is not None:
        return reply.stop_reason
    return "tool_use" if any(block.type == "tool_use" for block in reply.blocks) else "end_turn"


def _content(reply: Reply, sent: Sent) -> list[dict[str, Any]]:
    """The reply's blocks as the API's content list."""
    tool_ids = iter(sent.tool_ids)
    content: list[dict[str, Any]] = []
    for block in reply.blocks:
        if block.type == "text":
            content.append({"type": "text", "text": block.text})
        elif block.type == "thinking":
            content.append(
                {"type": "thinking", "thinking": block.text, "signature": block.signature}
            )
        elif block.raw is not None:
            content.append(block.raw)
        elif block.type == "server_tool_use":
            content.append(
                {"type": block.type, "id": block.id, "name": block.name, "input": block.input}
            )
        else:
            content.append(
                {"type": "tool_use", "id": next(tool_ids), "name": block.name, "input": block.input}
            )
    return content


def _message(body: dict[str, Any], reply: Reply, sent: Sent) -> dict[str, Any]:
    return {
        "id": sent.message_id,
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": _content(reply, sent),
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": reply.usage,
    }


def _pieces(value: str, size: int = 16) -> list[str]:
    return [value[i : i + size] for i in range(0, len(value), size)] or [""]


def _events(body: dict[str, Any], reply: Reply, sent: Sent) -> Iterator[tuple[str, dict[str, Any]]]:
    """The SSE events of one streamed message, as the Anthropic API sends them."""
    usage = reply.usage
    start_usage = {
        "input_tokens": usage.get("input_tokens", 0),
        "cache_creation_input_tokens": usage.get("cache_creation_input_tokens", 0),
        "cache_read_input_tokens": usage.get("cache_read_input_tokens", 0),
        "output_tokens": 1,
    }
    yield (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": sent.message_id,
                "type": "message",
                "role": "assistant",
                "model": body.get("model"),
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": start_usage,
            },
        },
    )
    for index, block in enumerate(_content(reply, sent)):
        kind = block["type"]
        if kind == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(block["text"])]
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": piece}
                for piece in _pieces(block["thinking"])
            ]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind in ("tool_use", "server_tool_use"):
            start = {"type": kind, "id": block["id"], "name": block["name"], "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": piece}
                for piece in _pieces(json.dumps(block["input"]))
            ]
        else:  # a server tool's result: whole in its start
            start, deltas = block, []
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        )
        for delta in deltas:
            event = {"type": "content_block_delta", "index": index, "delta": delta}
            yield "content_block_delta", event
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": None},
            "usage": {
                "output_tokens": usage.get("output_tokens", 0),
                **{k: v for k, v in usage.items() if k == "server_tool_use"},
            },
        },
    )
    yield "message_stop", {"type": "message_stop"}
