"""The ASGI app of ``agenttrace serve`` (Starlette), its routes and its safety rules.

Routes (docs/serve.md): ``/`` the sessions, ``/session/{id}`` one session's live page,
``/static/{name}`` their scripts and styles, ``/api/runs`` and ``/api/runs/{id}/tree`` the
JSON, ``/api/runs/{id}/events`` the same tree as server-sent events whenever its files change.

Safe by default:

- every request needs the token: ``Authorization: Bearer <token>``, the cookie a page link
  sets, or ``?token=`` (which sets that cookie and redirects to the URL without it, so the
  token leaves the address bar and the history); anything else gets 401;
- a session id is checked as every reader checks it before it names a file, so no request
  reads outside the sessions directory; static files come from a fixed list;
- the pages hold no session content: their script fetches the JSON and writes every piece of
  it with ``textContent`` (the HTML export's renderer), and a Content-Security-Policy allows
  scripts and styles from this server only, no inline script, no other origin;
- every read is the readers' own, within the ``AGENTTRACE_MAX_*`` limits.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import anyio
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from agenttrace.formats.session.files import SessionFileError, check_session_id
from agenttrace.views.exports.html import SCRIPT_FILE, STYLE_FILE, page_file, script_json
from agenttrace.views.listing import RUNNING, list_sessions
from agenttrace.views.live import NoSuchSession, files_state, read_live, session_document

POLL_S = 0.2
"""How often a live page's files are looked at (two ``stat`` calls): an event reaches the page
well within a second."""
STATUS_S = 5.0
"""How often a live page's session is read even when its files did not change: its status
changes when its process is gone."""
PING_S = 15
"""A comment line this often keeps an idle event stream open through proxies."""

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "img-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)
_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
_STATIC_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html"}


def _own_file(name: str) -> str:
    return (resources.files(__name__.rpartition(".")[0]) / "static" / name).read_text("utf-8")


def _static_files() -> dict[str, str]:
    """The files ``/static/`` serves, by name: nothing else can be asked for."""
    return {
        "page.js": page_file(SCRIPT_FILE),  # the HTML export's renderer, the one drawing code
        "page.css": page_file(STYLE_FILE),
        "live.js": _own_file("live.js"),
        "list.js": _own_file("list.js"),
        "serve.css": _own_file("serve.css"),
    }


@dataclass(frozen=True)
class Token:
    """The bearer token, and the cookie a page link turns it into."""

    value: str

    @property
    def cookie(self) -> str:
        # Named after the token: cookies ignore ports, and two servers on one host must not
        # overwrite each other's.
        return "agenttrace-" + hashlib.sha256(self.value.encode()).hexdigest()[:12]

    def matches(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.value.encode())


class _Guard:
    """Every response gets the safety headers; a request without the token gets 401."""

    def __init__(self, app: ASGIApp, token: Token) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                message["headers"] = [
                    *message.get("headers", []),
                    *(
                        (name.lower().encode(), value.encode())
                        for name, value in _HEADERS.items()
                        if name.lower().encode() not in present
                    ),
                ]
            await send(message)

        request = Request(scope)
        header = request.headers.get("authorization", "")
        bearer = header[7:] if header[:7].lower() == "bearer " else None
        if self.token.matches(bearer) or self.token.matches(request.cookies.get(self.token.cookie)):
            await self.app(scope, receive, with_headers)
            return
        if self.token.matches(request.query_params.get("token")):
            # A link carrying the token: it becomes a cookie of this server, and the URL
            # without it is loaded (no token left in the address bar, history or a Referer).
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            # One leading slash: "//host/x" would send the browser to another host.
            target = "/" + request.url.path.lstrip("/") + (f"?{urlencode(rest)}" if rest else "")
            response: Response = RedirectResponse(target, status_code=303)
            response.set_cookie(
                self.token.cookie, self.token.value, httponly=True, samesite="strict", path="/"
            )
        else:
            response = PlainTextResponse(
                "401: this agenttrace serve needs its token (the link it printed at start)\n",
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="agenttrace"'},
            )
        await response(scope, receive, with_headers)


def _json(value: Any, status_code: int = 200) -> Response:
    # script_json: NaN and infinities as null, lone surrogates kept as escapes, and < > & as
    # \\u escapes (still the same JSON), so no reader can take a body for markup.
    return Response(script_json(value), status_code, media_type="application/json")


def _error(status_code: int, message: str) -> Response:
    return _json({"error": message}, status_code)


def create_app(sessions_dir: Path, token: str) -> ASGIApp:
    """The app serving the sessions of ``sessions_dir`` to requests carrying ``token``."""
    if not token:
        raise ValueError("agenttrace serve needs a non-empty token")
    static = _static_files()

    async def index(request: Request) -> Response:
        return Response(_own_file("index.html"), media_type="text/html")

    async def session_page(request: Request) -> Response:
        try:
            check_session_id(request.path_params["session_id"])
        except SessionFileError as exc:
            return PlainTextResponse(str(exc), status_code=404)
        return Response(_own_file("session.html"), media_type="text/html")

    async def static_file(request: Request) -> Response:
        name = request.path_params["name"]
        text = static.get(name)
        if text is None:
            return PlainTextResponse("not found", status_code=404)
        return Response(text, media_type=_STATIC_TYPES[Path(name).suffix])

    async def runs(request: Request) -> Response:
        try:
            listing = await anyio.to_thread.run_sync(list_sessions, sessions_dir)
        except OSError as exc:
            return _error(500, f"{sessions_dir}: cannot list: {exc.strerror or exc}")
        rows = []
        for row in listing.rows:
            rows.append({**row.as_json(), "live": row.status == RUNNING, "cost": row.cost})
        return _json({"directory": str(sessions_dir), "total": listing.total, "runs": rows})

    async def tree(request: Request) -> Response:
        document, failure = await _read(sessions_dir, request.path_params["session_id"])
        document.pop("_state", None)
        return failure or _json(document)

    async def events(request: Request) -> Response:
        session_id = request.path_params["session_id"]
        document, failure = await _read(sessions_dir, session_id)
        if failure is not None:
            return failure
        return EventSourceResponse(
            _follow(sessions_dir, session_id, document, request.is_disconnected),
            ping=PING_S,
        )

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/session/{session_id}", session_page),
            Route("/static/{name}", static_file),
            Route("/api/runs", runs),
            Route("/api/runs/{session_id}/tree", tree),
            Route("/api/runs/{session_id}/events", events),
        ]
    )
    return _Guard(app, Token(token))


async def _read(sessions_dir: Path, session_id: str) -> tuple[dict[str, Any], Response | None]:
    """The session's document, or the response that says why there is none."""
    try:
        check_session_id(session_id)  # an id that is not a plain name names no file here
    except SessionFileError as exc:
        return {}, _error(404, str(exc))
    try:
        live = await anyio.to_thread.run_sync(read_live, sessions_dir, session_id)
    except NoSuchSession as exc:
        return {}, _error(404, str(exc))
    except SessionFileError as exc:  # files that cannot be read: the reader's one line
        return {}, _error(422, str(exc))
    return {**session_document(live), "_state": live.state}, None


async def _follow(
    sessions_dir: Path,
    session_id: str,
    first: dict[str, Any],
    disconnected: Callable[[], Awaitable[bool]],
) -> AsyncIterator[ServerSentEvent]:
    """The session's document now, then again each time its files change (and, every
    :data:`STATUS_S`, when its status changed without them: a process that was killed)."""
    state = first.pop("_state")
    status = first.get("status")
    yield ServerSentEvent(script_json(first), event="tree")
    read_at = anyio.current_time()
    while not await disconnected():
        await anyio.sleep(POLL_S)
        now = files_state(sessions_dir, session_id)
        if now == state and anyio.current_time() - read_at < STATUS_S:
            continue
        read_at = anyio.current_time()
        document, failure = await _read(sessions_dir, session_id)
        if failure is not None:
            # Between a write and its rename, or a file made unreadable: say so, go on.
            yield ServerSentEvent(bytes(failure.body).decode(), event="failure")
            state = now
            continue
        if document["_state"] == state and document.get("status") == status:
            continue
        state = document.pop("_state")
        status = document.get("status")
        yield ServerSentEvent(script_json(document), event="tree")
