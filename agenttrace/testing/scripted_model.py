"""A scripted LLM on 127.0.0.1 that speaks Anthropic's Messages API and OpenAI's Chat
Completions API, to try an agent offline (docs/how-to/offline-model.md).

It answers ``POST /v1/messages`` as Anthropic does and ``POST /v1/chat/completions`` (or
``/chat/completions``) as OpenAI does, each as one JSON answer or, when the request asks for
``"stream": true``, as server-sent events, with text replies, tool calls and token usage. So
litellm (``api_base``), the OpenAI SDK and the Anthropic SDK (``base_url``) talk to it exactly
as they talk to the provider: every call goes through the client's real HTTP path, its
adapter, its token accounting and its prices for the model named.

Which reply comes next is read from the request itself: the script is chosen by the request's
system prompt (``""`` for none, and for any prompt the scripts do not name) and the reply by how
many assistant turns the conversation already has. The server keeps no state, so runs and
resumed runs can share it. A script may end with a *callable* that makes replies past its end
from the request (:func:`echo` does). Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Reply = dict[str, Any]
"""``{"text": "..."}``, or ``{"tool": name, "input": {...}}`` for a tool call (with ``"id"``:
its call id, else one made from the turn; with ``"text"`` too: text before the call)."""
Script = list[Reply | Callable[[dict[str, Any], int], Reply]]
"""A conversation's replies in order; the last may be a callable ``(request, turn) -> reply``
that answers every request past the end of the list."""

FALLBACK: Reply = {"text": "(the scripted model has nothing more to say)"}
"""The reply past the end of a script that ends with no callable."""

ANTHROPIC_PATHS = ("/v1/messages", "/messages")
OPENAI_PATHS = ("/v1/chat/completions", "/chat/completions")


class ScriptError(ValueError):
    """A script file that cannot be used; the message says which file and why, in one line."""


def system_prompt(request: Mapping[str, Any]) -> str:
    """The request's system prompt as one string: Anthropic's ``system`` (a string or text
    blocks), else the text of OpenAI-style ``system`` and ``developer`` messages."""
    system = request.get("system")
    if system is None:
        messages = request.get("messages") or []
        texts = [
            _text(m.get("content"))
            for m in messages
            if isinstance(m, dict) and m.get("role") in ("system", "developer")
        ]
        return "".join(texts)
    return _text(system)


def _text(content: Any) -> str:
    """A message content's text: a string, or the text of its text blocks (parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(b.get("text", "")) for b in content if isinstance(b, dict) and "text" in b
        )
    return ""


def last_user_text(request: Mapping[str, Any]) -> str:
    """The text of the conversation's last user message that has text (a tool result is not
    one)."""
    for message in reversed(request.get("messages", [])):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            texts = [str(b.get("text", "")) for b in content if b.get("type") == "text"]
            if texts:
                return texts[-1]
    return ""


def echo(request: dict[str, Any], turn: int) -> Reply:
    """A reply that repeats the last user message: ``You said: ...``."""
    return {"text": f"You said: {last_user_text(request)}"}


ECHO: Mapping[str, Script] = {"": [echo]}
"""The scripts used when none are given: every request is answered by :func:`echo`."""


def _turns(request: Mapping[str, Any]) -> int:
    return sum(1 for m in request.get("messages", []) if m.get("role") == "assistant")


def next_reply(scripts: Mapping[str, Script], request: dict[str, Any]) -> Reply:
    """The scripted reply for a request body (either protocol)."""
    script = scripts.get(system_prompt(request), scripts.get("", []))
    turns = _turns(request)
    if turns < len(script):
        step = script[turns]
    elif script and callable(script[-1]):
        step = script[-1]
    else:
        return FALLBACK
    reply = step(request, turns) if callable(step) else step
    if "tool" in reply and "id" not in reply:
        # Made from the turn, not counted: the same request gets the same id on a resume.
        reply = {**reply, "id": f"call_scripted_{turns}"}
    return reply


def _response_id(request: Mapping[str, Any]) -> str:
    """An id made from the request: the same request gets the same id (a resumed run's), two
    conversations at the same turn do not (the Claude Agent SDK tells messages by their id)."""
    digest = hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:20]


def _tokens(value: Any) -> int:
    return max(1, len(json.dumps(value)) // 4)


def _usage(request: dict[str, Any], content: Any) -> tuple[int, int, int]:
    """``(prompt, cached, output)`` tokens: everything but the newest message was sent before,
    so it counts as a prompt-cache hit (part of ``prompt``)."""
    messages = request.get("messages", [])
    prompt = _tokens([request.get("system"), request.get("tools")]) + _tokens(messages)
    cached = _tokens(messages[:-1]) if len(messages) > 1 else 0
    return max(prompt, cached + 1), cached, _tokens(content)


# --- Anthropic's Messages API ---------------------------------------------------------------


def _anthropic_content(reply: Reply) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    if "text" in reply or "tool" not in reply:
        content.append({"type": "text", "text": reply.get("text", "")})
    if "tool" in reply:
        content.append(
            {"type": "tool_use", "id": reply["id"], "name": reply["tool"], "input": reply["input"]}
        )
    return content


def response_body(reply: Reply, request: dict[str, Any]) -> dict[str, Any]:
    """A Messages API response, with usage that shows prompt caching the way Anthropic bills it
    (cache reads on top of input)."""
    content = _anthropic_content(reply)
    prompt, cached, output = _usage(request, content)
    return {
        "id": f"msg_scripted_{_response_id(request)}",
        "type": "message",
        "role": "assistant",
        "model": request.get("model"),
        "content": content,
        "stop_reason": "tool_use" if "tool" in reply else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": prompt - cached,
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": 0,
            "output_tokens": output,
        },
    }


def _pieces(value: str, size: int = 8) -> list[str]:
    return [value[i : i + size] for i in range(0, len(value), size)] or [""]


def anthropic_events(reply: Reply, request: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """The server-sent events of a streamed Messages API response, as Anthropic sends them:
    ``message_start`` (input usage), per block ``content_block_start``, its deltas and
    ``content_block_stop``, then ``message_delta`` (stop reason, output tokens) and
    ``message_stop``."""
    body = response_body(reply, request)
    usage = body["usage"]
    start = {**body, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(body["content"]):
        if block["type"] == "text":
            opened: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
        else:
            opened = {**block, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": p}
                for p in _pieces(json.dumps(block["input"]))
            ]
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": opened},
        )
        for delta in deltas:
            yield (
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": body["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        },
    )
    yield "message_stop", {"type": "message_stop"}


# --- OpenAI's Chat Completions API ----------------------------------------------------------


def _openai_message(reply: Reply) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("text")}
    if "tool" in reply:
        message["tool_calls"] = [
            {
                "id": reply["id"],
                "type": "function",
                "function": {"name": reply["tool"], "arguments": json.dumps(reply["input"])},
            }
        ]
    elif message["content"] is None:
        message["content"] = ""
    return message


def _openai_usage(reply: Reply, request: dict[str, Any]) -> dict[str, Any]:
    prompt, cached, output = _usage(request, _openai_message(reply))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "total_tokens": prompt + output,
        # OpenAI counts cache hits inside the prompt tokens.
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def completion_body(reply: Reply, request: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions response, with usage that shows prompt caching the way OpenAI counts
    it (``cached_tokens`` part of ``prompt_tokens``)."""
    return {
        "id": f"chatcmpl-scripted-{_response_id(request)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model"),
        "choices": [
            {
                "index": 0,
                "message": _openai_message(reply),
                "finish_reason": "tool_calls" if "tool" in reply else "stop",
            }
        ],
        "usage": _openai_usage(reply, request),
    }


def completion_chunks(reply: Reply, request: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The chunks of a streamed Chat Completions response: the text in pieces, a tool call's
    arguments in pieces, a last chunk with the finish reason, and then, when the request's
    ``stream_options`` ask ``include_usage``, one with the usage and no choices."""
    base = {
        "id": f"chatcmpl-scripted-{_response_id(request)}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": request.get("model"),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    if "text" in reply or "tool" not in reply:
        for piece in _pieces(reply.get("text", "")):
            yield chunk({"content": piece})
    if "tool" in reply:
        call = {"index": 0, "id": reply["id"], "type": "function"}
        yield chunk(
            {"tool_calls": [{**call, "function": {"name": reply["tool"], "arguments": ""}}]}
        )
        for piece in _pieces(json.dumps(reply["input"])):
            yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if "tool" in reply else "stop")
    if (request.get("stream_options") or {}).get("include_usage"):
        yield {**base, "choices": [], "usage": _openai_usage(reply, request)}


# --- script files ---------------------------------------------------------------------------


def load_script(path: str | Path) -> dict[str, Script]:
    """The scripts in a JSON file: an object mapping a system prompt (``""``: any other) to a
    list of replies, each ``{"text": "..."}`` or ``{"tool": name, "input": {...}}`` (``"id"``
    optional). Raises :class:`ScriptError` saying, in one line, what is wrong."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScriptError(f"cannot read script {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ScriptError(f"script {path} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ScriptError(f"script {path}: expected an object of system prompt -> replies")
    scripts: dict[str, Script] = {}
    for prompt, replies in data.items():
        where = f"script {path}, prompt {json.dumps(prompt)[:60]}"
        if not isinstance(replies, list):
            raise ScriptError(f"{where}: expected a list of replies")
        for number, reply in enumerate(replies, 1):
            problem = _reply_problem(reply)
            if problem:
                raise ScriptError(f"{where}, reply {number}: {problem}")
        scripts[prompt] = list(replies)
    return scripts


def _reply_problem(reply: Any) -> str | None:
    if not isinstance(reply, dict):
        return 'expected an object, {"text": ...} or {"tool": ..., "input": {...}}'
    unknown = sorted(set(reply) - {"text", "tool", "input", "id"})
    if unknown:
        return f"unknown key {unknown[0]!r} (known: text, tool, input, id)"
    if "text" not in reply and "tool" not in reply:
        return 'needs "text" or "tool"'
    if "text" in reply and not isinstance(reply["text"], str):
        return '"text" must be a string'
    if "tool" in reply:
        if not isinstance(reply["tool"], str) or not reply["tool"]:
            return '"tool" must be a tool name'
        if not isinstance(reply.get("input"), dict):
            return 'a tool call needs "input", an object of arguments'
        if "id" in reply and not isinstance(reply["id"], str):
            return '"id" must be a string'
    elif "input" in reply or "id" in reply:
        return '"input" and "id" go with "tool"'
    return None


# --- the server -----------------------------------------------------------------------------


class ScriptedModel:
    """The scripted model's server on ``host:port`` (port 0: a free one). Use as a context
    manager (it serves on a daemon thread), or call :meth:`serve_forever`.

    ``api_base`` is the one base URL for every client: litellm's ``api_base`` (``anthropic/``
    and ``openai/`` models alike), the Anthropic SDK's and the OpenAI SDK's ``base_url`` (the
    OpenAI SDK may also take ``openai_base_url``, the same with ``/v1``). ``requests`` holds
    every request body received, in order. ``scripts``: see :func:`next_reply`; ``None``: echo.
    """

    def __init__(
        self, scripts: Mapping[str, Script] | None = None, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.scripts: Mapping[str, Script] = ECHO if scripts is None else scripts
        self.requests: list[dict[str, Any]] = []
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass  # a server the user runs for an agent: its requests are not news

            def do_POST(self) -> None:
                path = self.path.split("?", 1)[0].rstrip("/")
                if path not in ANTHROPIC_PATHS + OPENAI_PATHS:
                    self._json(404, _error(f"no such endpoint: POST {path}"))
                    return
                length = int(self.headers.get("Content-Length", "0"))
                try:
                    request = json.loads(self.rfile.read(length))
                    if not isinstance(request, dict):
                        raise ValueError("not a JSON object")
                except ValueError as exc:
                    self._json(400, _error(f"the request body is not JSON: {exc}"))
                    return
                model.requests.append(request)
                reply = next_reply(model.scripts, request)
                anthropic = path in ANTHROPIC_PATHS
                try:
                    if not request.get("stream"):
                        body = response_body if anthropic else completion_body
                        self._json(200, body(reply, request))
                    elif anthropic:
                        self._events(
                            f"event: {name}\ndata: {json.dumps(data)}\n\n"
                            for name, data in anthropic_events(reply, request)
                        )
                    else:
                        chunks = completion_chunks(reply, request)
                        lines = (f"data: {json.dumps(chunk)}\n\n" for chunk in chunks)
                        self._events(_then(lines, "data: [DONE]\n\n"))
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client hung up: nobody to answer

            def do_GET(self) -> None:
                self._json(404, _error("the scripted model answers POST requests"))

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _events(self, events: Iterator[str]) -> None:
                # HTTP/1.0: the connection's close ends the stream, no chunked encoding needed.
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                for event in events:
                    self.wfile.write(event.encode())
                    self.wfile.flush()

        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        shown = f"[{host}]" if ":" in host else host
        self.port: int = int(self._httpd.server_address[1])
        self.api_base = f"http://{shown}:{self.port}"
        self.openai_base_url = f"{self.api_base}/v1"

    _serving = False

    def serve_forever(self) -> None:
        """Serve in this thread until :meth:`close` is called from another (or Ctrl-C)."""
        self._serving = True
        self._httpd.serve_forever()

    def close(self) -> None:
        """Stop serving (when serving) and release the port."""
        if self._serving:
            self._httpd.shutdown()  # returns at once if Ctrl-C already ended the serving
        self._httpd.server_close()

    def __enter__(self) -> ScriptedModel:
        self._serving = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _then(lines: Iterator[str], last: str) -> Iterator[str]:
    yield from lines
    yield last


def _error(message: str) -> dict[str, Any]:
    """An error body both clients read: Anthropic's ``type``, OpenAI's ``error.message``."""
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
