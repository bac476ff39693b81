"""Where a client session's requests go: the SDK's transports, remembered as they are opened.

``stdio_client`` starts the server on this machine (baggage always allowed);
``streamable_http_client`` and ``sse_client`` reach it at a URL, checked against the allow-list
(``agenttrace.tracing.travel.baggage_allowed``). Each is wrapped so that the write stream it
yields is remembered with its destination and ``network.transport`` until it is closed; a
``ClientSession`` finds its own by the write stream its dispatcher writes to.

A stdio server is started with this process's sessions directory named in its environment
(``AGENTTRACE_JOIN_SESSIONS_DIR``, a local carrier as ``subprocess_env()``'s is): a server
recording into the same directory joins the client's session as a writer of its own
(``agenttrace.tracing.joined_writer``), so its runs are placed under the tool calls that made
them when the session is read whole.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

from agenttrace.instrumentation.mcp.state import state
from agenttrace.tracing.joined_writer import SESSIONS_DIR_KEY, carry_sessions_dir

__all__ = ["LOCAL", "destination", "transport_wrapper"]

LOCAL = "local"
"""A transport to this machine (stdio): baggage always allowed."""

_destinations: dict[int, tuple[Any, str, str]] = {}
"""``id()`` of an open transport's write stream -> (the stream, its destination: a URL or
``LOCAL``, ``network.transport``), from its opening to its closing. By ``id``, holding the
stream: the SDK's streams cannot be weakly referenced."""


class _Remembered:
    """A transport's async context manager whose write stream is remembered with where it
    goes, as it is entered."""

    __slots__ = ("_destination", "_inner", "_key")

    def __init__(self, inner: Any, destination: tuple[str, str]) -> None:
        self._inner = inner
        self._destination = destination
        self._key: int | None = None

    async def __aenter__(self) -> Any:
        streams = await self._inner.__aenter__()
        if isinstance(streams, tuple) and len(streams) >= 2:
            self._key = id(streams[1])
            _destinations[self._key] = (streams[1], *self._destination)
        return streams

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> Any:
        if self._key is not None:
            _destinations.pop(self._key, None)
        return await self._inner.__aexit__(exc_type, exc, traceback)


def transport_wrapper(network: str, remote: bool) -> Callable[..., Any]:
    """wrapt's wrapper of a client transport (``stdio_client``, ``streamable_http_client``,
    ``sse_client``): its streams remembered with their destination (``remote``: the URL, the
    first argument; else this machine) and ``network`` (``network.transport``)."""

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not state.enabled:
            return wrapped(*args, **kwargs)
        if not remote:
            if args:
                args = (_naming_sessions_dir(args[0]), *args[1:])
            elif "server" in kwargs:
                kwargs = {**kwargs, "server": _naming_sessions_dir(kwargs["server"])}
            return _Remembered(wrapped(*args, **kwargs), (LOCAL, network))
        inner = wrapped(*args, **kwargs)
        url = args[0] if args else kwargs.get("url")
        return _Remembered(inner, (url, network)) if isinstance(url, str) else inner

    return wrapper


def _naming_sessions_dir(server: Any) -> Any:
    """A copy of the ``StdioServerParameters`` ``server`` whose extra environment names this
    process's sessions directory (``server`` itself if it names one, or is not a model)."""
    env = getattr(server, "env", None)
    if (env is not None and SESSIONS_DIR_KEY in env) or not hasattr(server, "model_copy"):
        return server
    extra = dict(env or {})
    carry_sessions_dir(extra, carrying=True)
    return server.model_copy(update={"env": extra}) if extra != (env or {}) else server


def destination(session: Any) -> tuple[str, str] | None:
    """Where ``session``'s requests go, if agenttrace saw its transport opened."""
    dispatcher = getattr(session, "_dispatcher", None)
    stream = getattr(dispatcher, "_write_stream", None)
    entry = _destinations.get(id(stream))
    if entry is None or entry[0] is not stream:
        return None
    return entry[1], entry[2]
