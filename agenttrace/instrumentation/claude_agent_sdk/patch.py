"""The wrappers: where the SDK's messages pass on their way to the program.

- ``query()`` runs ``InternalClient.process_query``, which is what is wrapped: a class
  attribute, looked up at every call, so a ``query`` the program imported before agenttrace
  was set up is traced too. One :class:`~.tracker.SdkSession` per call, over when its stream
  ends or is closed.
- ``ClaudeSDKClient``: ``connect`` starts its session (one per connection), ``query`` and a
  prompt stream given to ``connect`` say what the user sent, ``receive_messages`` (which
  ``receive_response`` reads) passes each message through it, ``disconnect`` ends it.

Both also hand the SDK options with agenttrace's ``PreToolUse`` hook after the program's own
(:mod:`.hooks`; the program's options object is not changed), so each tool call's intent is on
disk before the CLI runs it.

The program gets the very objects the SDK yields, nothing more; an exception the SDK raises
reaches it unchanged (after the open exchanges are ended with it). A failure of ours is
reported once and the program runs on untraced.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any

from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.runtime import runtime

from .effects import listed
from .hooks import with_hook
from .tracker import SdkSession
from .utils import WHERE, MessageLog, resuming_owner, state, user_text

_clients: weakref.WeakKeyDictionary[Any, SdkSession] = weakref.WeakKeyDictionary()
_live: weakref.WeakSet[SdkSession] = weakref.WeakSet()
"""Sessions not over yet (ended when the instrumentation is undone)."""


def _on() -> bool:
    return state.enabled and not runtime.disabled


def new_session(options: Any, owner: object = None) -> SdkSession:
    """A session for SDK ``options``, feeding the exchange log if one is configured."""
    log: MessageLog | None = None
    factory = state.settings.exchange_log
    if factory is not None:
        try:
            log = factory()
        except Exception as exc:
            report_internal_error(WHERE, exc)
    session = SdkSession(options, owner if owner is not None else resuming_owner(), log)
    _live.add(session)
    return session


def end_sessions() -> None:
    """End every session still open (the instrumentation is being undone)."""
    for session in list(_live):
        _guard(session.close)


def _guard(action: Callable[[], None]) -> None:
    try:
        action()
    except Exception as exc:
        report_internal_error(WHERE, exc)


async def traced(stream: AsyncIterator[Any], session: SdkSession, owns: bool) -> AsyncIterator[Any]:
    """``stream``'s messages, unchanged, each observed by ``session`` first (``owns``: the
    session ends with the stream)."""
    try:
        while True:
            try:
                message = await stream.__anext__()
            except StopAsyncIteration:
                return
            except BaseException as exc:
                _guard(lambda exc=exc: session.failed(exc))  # type: ignore[misc]
                raise
            _guard(lambda message=message: session.observe(message))  # type: ignore[misc]
            yield message
    finally:
        try:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        finally:
            if owns:
                _guard(session.close)


async def watched(prompts: AsyncIterable[Any], session: SdkSession) -> AsyncIterator[Any]:
    """The program's prompt stream, unchanged, telling ``session`` what each message says."""
    iterator = prompts.__aiter__()
    try:
        async for item in iterator:
            text = user_text(item)
            if text is not None:
                _guard(lambda text=text: session.user_input(text))  # type: ignore[misc]
            yield item
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()


def _sent(session: SdkSession, prompt: Any) -> Any:
    """Tell ``session`` what ``prompt`` sends; returns the prompt to pass on (a stream is
    wrapped so each of its messages is seen as the SDK takes it)."""
    if isinstance(prompt, str):
        session.user_input(prompt)
        return prompt
    if isinstance(prompt, AsyncIterable):
        return watched(prompt, session)
    return prompt


# --- query() -----------------------------------------------------------------------------------


def process_query(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``InternalClient.process_query(prompt, options, transport=None)``."""
    if not _on():
        return wrapped(*args, **kwargs)
    try:
        args = list(args)
        prompt = args[0] if args else kwargs.get("prompt")
        options = args[1] if len(args) > 1 else kwargs.get("options")
        session = new_session(options)
        sent = _sent(session, prompt)
        if args:
            args[0] = sent
        else:
            kwargs["prompt"] = sent
        hooked = with_hook(options, session)
        if len(args) > 1:
            args[1] = hooked
        elif "options" in kwargs:
            kwargs["options"] = hooked
        session.last_end_ns = time.time_ns()
    except Exception as exc:
        report_internal_error(WHERE, exc)
        return wrapped(*args, **kwargs)
    return traced(wrapped(*args, **kwargs), session, owns=True)


# --- ClaudeSDKClient ---------------------------------------------------------------------------


def _client_session(client: Any) -> SdkSession:
    session = _clients.get(client)
    if session is None or session.closed:
        session = new_session(getattr(client, "options", None))
        _clients[client] = session
    return session


def _prompt_sent(session: SdkSession, args: list[Any], kwargs: Any, *, optional: bool) -> list[Any]:
    """The call's ``prompt`` (first argument or keyword) replaced by what ``_sent`` makes of it
    for ``session``; returns the positional arguments (``kwargs`` is changed in place). An
    ``optional`` prompt (``connect``'s) that is ``None`` is left alone."""
    prompt = args[0] if args else kwargs.get("prompt")
    if optional and prompt is None:
        return args
    sent = _sent(session, prompt)
    if args:
        args[0] = sent
    else:
        kwargs["prompt"] = sent
    return args


async def connect(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``ClaudeSDKClient.connect(prompt=None)``: a new session for the connection."""
    if not _on():
        return await wrapped(*args, **kwargs)
    options = getattr(instance, "options", None)
    try:
        previous = _clients.pop(instance, None)
        if previous is not None:
            previous.close()
        session = _client_session(instance)
        args = _prompt_sent(session, list(args), kwargs, optional=True)
        # The SDK reads the hooks while it connects: ours are there for that, and the client's
        # options are the program's own again once it has.
        instance.options = with_hook(options, session)
    except Exception as exc:
        report_internal_error(WHERE, exc)
    try:
        return await wrapped(*args, **kwargs)
    finally:
        if options is not None:
            instance.options = options


async def client_query(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``ClaudeSDKClient.query(prompt, session_id="default")``: what the user sends."""
    if not _on():
        return await wrapped(*args, **kwargs)
    try:
        args = _prompt_sent(_client_session(instance), list(args), kwargs, optional=False)
    except Exception as exc:
        report_internal_error(WHERE, exc)
    return await wrapped(*args, **kwargs)


def receive_messages(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``ClaudeSDKClient.receive_messages()`` (``receive_response`` reads it)."""
    if not _on():
        return wrapped(*args, **kwargs)
    try:
        session = _client_session(instance)
    except Exception as exc:
        report_internal_error(WHERE, exc)
        return wrapped(*args, **kwargs)
    return traced(wrapped(*args, **kwargs), session, owns=False)


async def disconnect(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``ClaudeSDKClient.disconnect()``: the session is over."""
    try:
        return await wrapped(*args, **kwargs)
    finally:
        session = _clients.pop(instance, None)
        if session is not None:
            _guard(session.close)


async def sdk_mcp_request(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """``Query._handle_sdk_mcp_request(server_name, message)``: the CLI asks one of the
    program's in-process MCP servers; the tools it lists say their annotations (:mod:`.effects`)."""
    response = await wrapped(*args, **kwargs)
    if _on():
        server = args[0] if args else kwargs.get("server_name")
        message = args[1] if len(args) > 1 else kwargs.get("message")
        _guard(lambda: listed(server, message, response))
    return response


def patch_targets(sdk: Any) -> list[tuple[Any, str, Any]]:
    """(owner, attribute, wrapper) for each patched SDK function (the in-process MCP servers'
    requests only where this SDK routes them through ``Query._handle_sdk_mcp_request``)."""
    from claude_agent_sdk._internal.client import InternalClient
    from claude_agent_sdk._internal.query import Query

    client = sdk.ClaudeSDKClient
    targets = [
        (InternalClient, "process_query", process_query),
        (client, "connect", connect),
        (client, "query", client_query),
        (client, "receive_messages", receive_messages),
        (client, "disconnect", disconnect),
    ]
    if "_handle_sdk_mcp_request" in vars(Query):
        targets.append((Query, "_handle_sdk_mcp_request", sdk_mcp_request))
    return targets
