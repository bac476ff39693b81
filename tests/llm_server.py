"""A small OpenAI- and Anthropic-compatible HTTP server on 127.0.0.1, for the LLM path in tests.

Speaks ``POST /v1/chat/completions`` and ``POST /v1/responses`` (OpenAI's Responses API) (plain
JSON and SSE streaming), ``POST /v1/messages``
(Anthropic) and ``POST /v1/embeddings``. Each request takes the next scripted :class:`Reply`
(or the default): a status code for failures (401, 429, 500, ...), a delay for timeouts, the
content, tool calls and usage to answer with, extra headers for a failure (``retry-after-ms``).
Every request is recorded, headers included, so tests can check what litellm actually sent;
``answered`` counts the replies written whole (a client killed mid-reply is not answered).
A ``responder`` answers each request by its body instead of the script: the same request gets
the same reply whenever it comes (a run killed and resumed asks in another order).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar


@dataclasses.dataclass
class Reply:
    """What the server answers to one request."""

    status: int = 200
    content: str = "Hello!"
    tool_calls: list[dict[str, Any]] | None = None
    usage: dict[str, Any] | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    error_message: str | None = None
    headers: dict[str, str] | None = None
    """Extra response headers (``retry-after-ms`` for the OpenAI SDK's back-off)."""
    reasoning: str | None = None
    """The model's reasoning: ``reasoning_content`` of an OpenAI-compatible message (streamed
    first, as deltas), a ``thinking`` block of an Anthropic one."""
    signature: str = "sig-opaque-canary"
    """An Anthropic thinking block's signature (opaque: never shown)."""
    provider: str | None = None
    """The provider that served the call, as OpenRouter names it in its responses' top-level
    ``provider`` field (with the usage, in a stream's last chunk)."""
    received: threading.Event | None = None
    """Set when the request has arrived (before any ``gate``)."""
    gate: threading.Event | None = None
    """The answer waits until this is set: a call that hangs for as long as a test wants."""
    response_id: str = "chatcmpl-test"
    """The chat completion's ``id`` (a provider's response id: the masking tests' canary)."""
    cut_after: int | None = None
    """A chat stream stops after this many chunks: the connection closes with its body short
    of the length it announced, so the client's read fails mid-stream."""

    def openai_usage(self) -> dict[str, Any]:
        return self.usage or {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


@dataclasses.dataclass
class Request:
    """One request the server received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class JsonHandler(BaseHTTPRequestHandler):
    """A scripted server's request handler: HTTP/1.1, silent, JSON in and out."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def handle(self) -> None:
        # A client killed between two requests on its kept-alive connection: nothing to say.
        with contextlib.suppress(ConnectionResetError):
            super().handle()

    def read_json(self) -> Any:
        """The request's JSON body (``{}`` when it has none)."""
        length = int(self.headers.get("Content-Length", "0"))
        return json.loads(self.rfile.read(length) or b"{}")

    def _json(
        self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


_Server = TypeVar("_Server", bound="LoopbackServer")


class LoopbackServer:
    """An HTTP server on 127.0.0.1 (a free port) answering with ``handler``; :meth:`start`
    serves it on a daemon thread, :meth:`stop` ends it."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self.port: int = self._httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}"

    def start(self: _Server) -> _Server:
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class LLMServer(LoopbackServer):
    """Start with :meth:`start`; ``api_base`` is the OpenAI base URL (``.../v1``)."""

    def __init__(self) -> None:
        self.script: deque[Reply] = deque()
        self.default = Reply()
        self.requests: list[Request] = []
        self.answered = 0
        """Replies written whole to their client, failures (a scripted status) included."""
        self.handled = 0
        """Requests whose handling ended, answered or not (``len(requests)`` once all have)."""
        self.responder: Callable[[Request], Reply] | None = None
        """When set, answers each request instead of the script (a reply chosen by what was
        asked, whatever order the requests come in)."""
        self._lock = threading.Lock()
        server = self

        class Handler(JsonHandler):
            def do_POST(self) -> None:
                body = self.read_json()
                reply = server._take(Request(self.path, dict(self.headers.items()), body))
                if reply.received is not None:
                    reply.received.set()
                if reply.gate is not None:
                    reply.gate.wait(timeout=120)
                if reply.delay:
                    time.sleep(reply.delay)
                answered = True
                try:
                    self._answer(body, reply)
                except (BrokenPipeError, ConnectionResetError):
                    answered = False  # the client gave up (a timeout test), or was killed
                with server._lock:
                    server.answered += answered
                    server.handled += 1

            def _answer(self, body: dict[str, Any], reply: Reply) -> None:
                path = self.path.partition("?")[0]  # Azure's ?api-version=...
                if reply.status != 200:
                    self._json(reply.status, _error_body(reply))
                elif path.endswith("/messages"):
                    self._json(200, _anthropic_body(body, reply))
                elif path.endswith("/embeddings"):
                    self._json(200, _embeddings_body(body))
                elif path.endswith("/responses"):
                    if body.get("stream"):
                        self._events(_response_events(body, reply), reply.chunk_delay)
                    else:
                        self._json(200, _response_body(body, reply))
                elif body.get("stream"):
                    self._stream(body, reply)
                else:
                    self._json(200, _chat_body(body, reply))

            def _stream(self, body: dict[str, Any], reply: Reply) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                if reply.cut_after is not None:
                    self.send_header("Content-Length", str(1 << 20))  # never all sent
                self.end_headers()
                chunks = _chat_chunks(body, reply)
                if reply.cut_after is not None:
                    for chunk in chunks[: reply.cut_after]:
                        self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    self.wfile.flush()
                    self.close_connection = True
                    return
                for chunk in chunks:
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    self.wfile.flush()
                    if reply.chunk_delay:
                        time.sleep(reply.chunk_delay)
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

            def _events(self, events: list[dict[str, Any]], delay: float) -> None:
                """Server-sent events as the Responses API sends them (``event:`` then
                ``data:``, no ``[DONE]``)."""
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                for event in events:
                    self.wfile.write(f"event: {event['type']}\n".encode())
                    self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
                    self.wfile.flush()
                    if delay:
                        time.sleep(delay)
                self.close_connection = True

        super().__init__(Handler)
        self.api_base = f"{self.base_url}/v1"

    def reset(self, *replies: Reply) -> None:
        """Forget recorded requests; answer the next requests with ``replies``, then the default."""
        with self._lock:
            self.script = deque(replies)
            self.requests = []
            self.answered = self.handled = 0
            self.default = Reply()
            self.responder = None

    def _take(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self.responder is not None:
                return self.responder(request)
            return self.script.popleft() if self.script else self.default


def _error_body(reply: Reply) -> dict[str, Any]:
    return {
        "error": {
            "message": reply.error_message or f"scripted failure {reply.status}",
            "type": {
                400: "invalid_request_error",
                401: "authentication_error",
                429: "rate_limit_error",
            }.get(reply.status, "server_error"),
            "code": str(reply.status),
        }
    }


def _chat_body(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = reply.tool_calls
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    return {
        "id": reply.response_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if reply.tool_calls else "stop",
            }
        ],
        "usage": reply.openai_usage(),
        **({"provider": reply.provider} if reply.provider is not None else {}),
    }


def _chat_chunks(body: dict[str, Any], reply: Reply) -> list[dict[str, Any]]:
    base = {
        "id": reply.response_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model"),
        **({"provider": reply.provider} if reply.provider is not None else {}),
    }
    pieces = [reply.content[i : i + 4] for i in range(0, len(reply.content), 4)] or [""]
    chunks = []
    thought = reply.reasoning or ""
    for i in range(0, len(thought), 8):
        delta_: dict[str, Any] = {"reasoning_content": thought[i : i + 8]}
        if i == 0:
            delta_["role"] = "assistant"
        chunks.append({**base, "choices": [{"index": 0, "delta": delta_, "finish_reason": None}]})
    for i, piece in enumerate(pieces):
        delta: dict[str, Any] = {"content": piece}
        if i == 0:
            delta["role"] = "assistant"
        chunks.append({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    for index, call in enumerate(reply.tool_calls or ()):
        streamed_call = {"index": index, **call}
        chunks.append(
            {
                **base,
                "choices": [
                    {"index": 0, "delta": {"tool_calls": [streamed_call]}, "finish_reason": None}
                ],
            }
        )
    finish = "tool_calls" if reply.tool_calls else "stop"
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if (body.get("stream_options") or {}).get("include_usage"):
        chunks.append({**base, "choices": [], "usage": reply.openai_usage()})
    return chunks


def _response_body(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """A Responses API ``Response``: reasoning, the text and the function calls as output items,
    the usage in the Responses shape (``input_tokens``, ``output_tokens``, their details)."""
    output: list[dict[str, Any]] = []
    if reply.reasoning is not None:
        output.append(
            {
                "type": "reasoning",
                "id": "rs_test",
                "summary": [{"type": "summary_text", "text": reply.reasoning}],
            }
        )
    if reply.content:
        output.append(
            {
                "type": "message",
                "id": "msg_test",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.content, "annotations": []}],
            }
        )
    for call in reply.tool_calls or ():
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{call['id']}",
                "call_id": call["id"],
                "name": call["function"]["name"],
                "arguments": call["function"]["arguments"],
                "status": "completed",
            }
        )
    chat = reply.openai_usage()
    usage = reply.usage if reply.usage and "input_tokens" in reply.usage else None
    return {
        "id": "resp_test",
        "object": "response",
        "created_at": int(time.time()),
        "model": body.get("model"),
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage
        or {
            "input_tokens": chat["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": chat["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": chat["prompt_tokens"] + chat["completion_tokens"],
        },
    }


def _response_events(body: dict[str, Any], reply: Reply) -> list[dict[str, Any]]:
    """A streamed ``Response``: created, the text's deltas, the items done, completed (the
    whole response, its usage included, as the Responses API always sends it)."""
    done = _response_body(body, reply)
    started = {**done, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": started}]
    for index, item in enumerate(done["output"]):
        empty = {**item, "content": []} if item["type"] == "message" else item
        events.append({"type": "response.output_item.added", "output_index": index, "item": empty})
        if item["type"] == "message":
            text = item["content"][0]["text"]
            part = {"item_id": item["id"], "output_index": index, "content_index": 0}
            events.append(
                {
                    "type": "response.content_part.added",
                    **part,
                    "part": {"type": "output_text", "text": "", "annotations": []},
                }
            )
            for i in range(0, len(text), 4):
                events.append(
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "delta": text[i : i + 4],
                        "logprobs": [],
                    }
                )
            events.append(
                {"type": "response.output_text.done", **part, "text": text, "logprobs": []}
            )
            events.append(
                {"type": "response.content_part.done", **part, "part": item["content"][0]}
            )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": done})
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]


def _anthropic_body(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": [
            *(
                [{"type": "thinking", "thinking": reply.reasoning, "signature": reply.signature}]
                if reply.reasoning is not None
                else []
            ),
            {"type": "text", "text": reply.content},
        ],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": reply.usage
        or {
            "input_tokens": 10,
            "cache_creation_input_tokens": 20,
            "cache_read_input_tokens": 30,
            "output_tokens": 5,
        },
    }


def _embeddings_body(body: dict[str, Any]) -> dict[str, Any]:
    inputs = body.get("input")
    inputs = inputs if isinstance(inputs, list) else [inputs]
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": [0.1, 0.2, 0.3]}
            for i in range(len(inputs))
        ],
        "model": body.get("model"),
        "usage": {"prompt_tokens": 5, "total_tokens": 5},
    }
