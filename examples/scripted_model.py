"""A scripted stand-in for Anthropic's Messages API on 127.0.0.1, for the offline demo and tests.

litellm talks to it exactly as it talks to Anthropic (``api_base`` points here), so everything
runs through litellm's real HTTP path, its Anthropic adapter, its token accounting (cache reads
billed on top of input, Anthropic-style) and its prices for the model.

Which reply comes next is read from the request itself: the script is chosen by the request's
system prompt (``""`` for none) and the reply by how many assistant turns the conversation
already has. The server keeps no state, so runs and resumed runs can share it. A script may
end with a *callable* that makes replies past its end from the request (the demo's root answers
any new prompt that way).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = dict[str, Any]
"""``{"text": "..."}`` or ``{"tool": name, "id": call id, "input": {...}}``."""
Script = list[Reply | Callable[[dict[str, Any], int], Reply]]

FALLBACK: Reply = {"text": "(the scripted model has nothing more to say)"}


def system_prompt(request: Mapping[str, Any]) -> str:
    """The request's system prompt as one string (Anthropic sends a string or text blocks)."""
    system = request.get("system")
    if isinstance(system, list):
        return "".join(block.get("text", "") for block in system if isinstance(block, dict))
    return system if isinstance(system, str) else ""


def last_user_text(request: Mapping[str, Any]) -> str:
    """The text of the conversation's last user message."""
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


def next_reply(scripts: Mapping[str, Script], request: dict[str, Any]) -> Reply:
    """The scripted reply for a Messages API request body."""
    script = scripts.get(system_prompt(request), scripts.get("", []))
    turns = sum(1 for m in request.get("messages", []) if m.get("role") == "assistant")
    if turns < len(script):
        step = script[turns]
    elif script and callable(script[-1]):
        step = script[-1]
    else:
        return FALLBACK
    return step(request, turns) if callable(step) else step


def _tokens(value: Any) -> int:
    return max(1, len(json.dumps(value)) // 4)


def response_body(reply: Reply, request: dict[str, Any]) -> dict[str, Any]:
    """A Messages API response, with usage that shows prompt caching the way Anthropic bills it."""
    if "tool" in reply:
        content: list[dict[str, Any]] = [
            {"type": "tool_use", "id": reply["id"], "name": reply["tool"], "input": reply["input"]}
        ]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": reply["text"]}]
        stop = "end_turn"
    messages = request.get("messages", [])
    prompt = _tokens([request.get("system"), request.get("tools")]) + _tokens(messages)
    # Everything but the newest message was sent before: a cache hit, billed on top of input.
    cached = _tokens(messages[:-1]) if len(messages) > 1 else 0
    return {
        "id": f"msg_scripted_{len(messages)}",
        "type": "message",
        "role": "assistant",
        "model": request.get("model"),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": max(1, prompt - cached),
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": 0,
            "output_tokens": _tokens(content),
        },
    }


class ScriptedModel:
    """The server; ``api_base`` is what to pass to litellm. Use as a context manager."""

    def __init__(self, scripts: Mapping[str, Script]) -> None:
        self.scripts = scripts
        self.requests: list[dict[str, Any]] = []
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                request = json.loads(self.rfile.read(length))
                model.requests.append(request)
                reply = next_reply(model.scripts, request)
                body = json.dumps(response_body(reply, request)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.api_base = f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> ScriptedModel:
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
