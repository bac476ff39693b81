"""The server side of tests/test_http_travel.py: a plain ASGI app behind
``agenttrace.asgi.Middleware``, served by uvicorn on 127.0.0.1 in a process of its own, with
agenttrace on a tracer provider exporting every span to the file the test reads
(``tests/travel_child.py``).

``python tests/asgi_tool_server.py SPANS SESSIONS PORT``: ``GET /research?x=21`` runs the
``helper`` agent on 21 and answers its result.
"""

from __future__ import annotations

import sys
from typing import Any
from urllib.parse import parse_qs

import uvicorn

import agenttrace.asgi
from tests import travel_child


async def app(scope: Any, receive: Any, send: Any) -> None:
    """``/research?x=N``: the helper agent's answer for N."""
    if scope["type"] != "http":
        return
    x = int(parse_qs(scope["query_string"].decode())["x"][0])
    body = str(travel_child.helper(x)).encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    spans, sessions, port = sys.argv[1:4]
    travel_child.set_up(spans, sessions)
    uvicorn.run(
        agenttrace.asgi.Middleware(app),
        host="127.0.0.1",
        port=int(port),
        log_level="warning",
        lifespan="off",
    )


if __name__ == "__main__":
    main()
