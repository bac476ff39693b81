"""A scripted stand-in for Anthropic's Messages API, served on 127.0.0.1, for the offline demo.

litellm talks to it exactly as it talks to Anthropic (``api_base`` points here), so the demo
exercises the real HTTP path, litellm's Anthropic adapter, its token accounting (cache reads on
top of input, Anthropic-style) and its prices for the model. The replies are seed 001's cafe
scenario; which reply comes next is read from the request itself (whose system prompt, how many
assistant turns so far), so the server keeps no state and any number of runs can use it.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ROOT_SCRIPT: list[dict[str, Any]] = [
    {"tool": "task", "id": "c1", "input": {"name": "Jack", "system_prompt": "You work in HR..."}},
    {
        "tool": "task",
        "id": "c2",
        "input": {"name": "Jill", "system_prompt": "You are an aspiring author..."},
    },
    {
        "tool": "discuss",
        "id": "c3",
        "input": {
            "prompt": "You meet in a cafe. Introduce yourselves.",
            "speakers": ["Jack", "Jill"],
        },
    },
    {"text": "Jack and Jill have met in the cafe and introduced themselves."},
]

AGENT_SCRIPTS: dict[str, list[dict[str, Any]]] = {
    "You work in HR...": [{"text": "Hi, I'm Jack. *extends hand*"}],
    "You are an aspiring author...": [{"text": "*smiles* Hello Jack, I'm Jill."}],
}

FALLBACK = {"text": "(the scripted model has nothing more to say)"}


def next_reply(request: dict[str, Any]) -> dict[str, Any]:
    """The scripted reply for a Messages API request body."""
    system = request.get("system")
    if isinstance(system, list):  # [{"type": "text", "text": ...}]
        system = "".join(block.get("text", "") for block in system)
    script = AGENT_SCRIPTS.get(system or "", ROOT_SCRIPT)
    turns = sum(1 for m in request.get("messages", []) if m.get("role") == "assistant")
    return script[turns] if turns < len(script) else FALLBACK


def _tokens(value: Any) -> int:
    return max(1, len(json.dumps(value)) // 4)


def response_body(request: dict[str, Any]) -> dict[str, Any]:
    """A Messages API response, with usage that shows prompt caching the way Anthropic bills it."""
    reply = next_reply(request)
    if "tool" in reply:
        content = [
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
    """The server; ``api_base`` is what to pass to litellm."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.dumps(response_body(json.loads(self.rfile.read(length)))).encode()
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
