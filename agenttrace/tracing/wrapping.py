"""Wrap any kind of function so a scope is open exactly while it runs.

One entry point, :func:`wrap`, picks the wrapper for plain functions, coroutines, generators and
async generators once, at decoration time. Generators are the subtle case: the scope is made
current only while the generator body runs (each ``next``/``send``/``throw``), never across a
``yield``, so the caller's context is never left with our span attached and OpenTelemetry never
reports "Failed to detach context". The span ends exactly once: when the body returns or raises,
or when the generator is closed or abandoned.

A plain function or coroutine that *returns* a generator or an async generator (a framework's
``run(stream=True)``) is a stream too: its scope opens at the call and stays open, current only
while the stream's body runs, until the stream is exhausted, closed, fails or is abandoned. The
caller gets a generator of the same kind that yields the same items (``send``, ``throw`` and
``close`` forwarded); any other return value comes back as the very object the function returned.

Failures inside agenttrace are reported and swallowed; the user's function always runs and its
result or exception passes through unchanged.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncGenerator, Callable, Generator
from types import AsyncGeneratorType, GeneratorType
from typing import Any, Protocol, TypeVar

from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.finalizers import on_collect
from agenttrace._internal.runtime import runtime
from agenttrace.tracing.scopes import Scope, Tokens, deactivate

F = TypeVar("F", bound=Callable[..., Any])


class Streamed:
    """The ``result`` :meth:`Opener.close` gets for a generator or stream: its items, each
    handed to :meth:`Opener.on_item`, were its results; ``value`` is what the generator
    returned (``None`` for an async generator, or one closed early)."""

    __slots__ = ("value",)

    def __init__(self, value: Any = None) -> None:
        self.value = value


class Opener(Protocol):
    """Starts the scope for one call and, later, finishes it."""

    where: str
    """Names this kind of scope in internal-error reports."""

    def open(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Scope | None:
        """Start (not activate) the scope for a call with these arguments; ``None``: this call
        is not traced of its own (it runs inside a scope that already stands for it)."""
        ...

    def close(self, scope: Any, error: BaseException | None, result: Any) -> None:
        """Finish the scope: ``error`` is the exception the call raised, ``result`` its value
        (a :class:`Streamed` for a generator or stream). The caller gets ``result`` itself."""
        ...

    def on_item(self, scope: Any, item: Any) -> None:
        """A generator yielded ``item`` (called inside the scope)."""
        ...


def _open(opener: Opener, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Scope | None:
    if runtime.disabled:
        return None
    try:
        return opener.open(args, kwargs)
    except Exception as exc:
        report_internal_error(opener.where, exc)
        return None


def _activate(opener: Opener, scope: Scope | None) -> Tokens | None:
    if scope is None:
        return None
    try:
        return scope.activate()
    except Exception as exc:
        report_internal_error(opener.where, exc)
        return None


def _deactivate(opener: Opener, tokens: Tokens | None) -> None:
    if tokens is None:
        return
    try:
        deactivate(tokens)
    except Exception as exc:
        report_internal_error(opener.where, exc)


def _close(opener: Opener, scope: Scope | None, error: BaseException | None, result: Any) -> None:
    if scope is None:
        return
    try:
        opener.close(scope, error, result)
    except Exception as exc:
        report_internal_error(opener.where, exc)


def _item(opener: Opener, scope: Scope | None, item: Any) -> None:
    if scope is None:
        return
    try:
        opener.on_item(scope, item)
    except Exception as exc:
        report_internal_error(opener.where, exc)


def wrap(fn: F, opener: Opener, like: Callable[..., Any] | None = None) -> F:
    """``fn`` wrapped so that ``opener``'s scope covers each call (or generator lifetime).
    ``like``: the function whose kind ``fn`` has (``fn``'s own by default): a plain function
    that returns a generator (or an async one) may stand for a generator function."""
    kind = fn if like is None else like
    if inspect.isasyncgenfunction(kind):
        return _wrap_async_generator(fn, opener)  # type: ignore[return-value]
    if inspect.iscoroutinefunction(kind):
        return _wrap_coroutine(fn, opener)  # type: ignore[return-value]
    if inspect.isgeneratorfunction(kind):
        return _wrap_generator(fn, opener)  # type: ignore[return-value]
    return _wrap_function(fn, opener)


def _wrap_function(fn: F, opener: Opener) -> F:
    # The hot path of every decorated call: helpers are inlined where it saves a call.
    open_scope, close_scope = opener.open, opener.close

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if runtime.disabled:
            return fn(*args, **kwargs)
        try:
            scope = open_scope(args, kwargs)
        except Exception as exc:
            report_internal_error(opener.where, exc)
            return fn(*args, **kwargs)
        if scope is None:
            return fn(*args, **kwargs)
        try:
            tokens: Tokens | None = scope.activate()
        except Exception as exc:  # the span still ends below, it just is not current
            report_internal_error(opener.where, exc)
            tokens = None
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            try:
                if tokens is not None:
                    deactivate(tokens)
                close_scope(scope, exc, None)
            except Exception as internal:
                report_internal_error(opener.where, internal)
            raise
        if tokens is not None:
            try:
                deactivate(tokens)
            except Exception as internal:  # the span still ends below
                report_internal_error(opener.where, internal)
        if type(result) is GeneratorType or type(result) is AsyncGeneratorType:
            return _stream(opener, scope, result)
        try:
            close_scope(scope, None, result)
        except Exception as internal:
            report_internal_error(opener.where, internal)
        return result

    return wrapper  # type: ignore[return-value]


def _wrap_coroutine(fn: Callable[..., Any], opener: Opener) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        scope = _open(opener, args, kwargs)
        if scope is None:
            return await fn(*args, **kwargs)
        tokens = _activate(opener, scope)
        try:
            result = await fn(*args, **kwargs)
        except BaseException as exc:
            _deactivate(opener, tokens)
            _close(opener, scope, exc, None)
            raise
        _deactivate(opener, tokens)
        if type(result) is GeneratorType or type(result) is AsyncGeneratorType:
            return _stream(opener, scope, result)
        _close(opener, scope, None, result)
        return result

    return wrapper


def _wrap_generator(
    fn: Callable[..., Generator[Any, Any, Any]], opener: Opener
) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        scope = _open(opener, args, kwargs)
        if scope is None:
            return (yield from fn(*args, **kwargs))
        error: BaseException | None = None
        returned: Any = None
        try:
            tokens = _activate(opener, scope)
            try:
                gen = fn(*args, **kwargs)
            finally:
                _deactivate(opener, tokens)
            sent: Any = None
            thrown: BaseException | None = None
            while True:
                tokens = _activate(opener, scope)
                try:
                    item = gen.throw(thrown) if thrown is not None else gen.send(sent)
                except StopIteration as stop:
                    returned = stop.value
                    return returned
                else:
                    _item(opener, scope, item)
                finally:
                    thrown = None
                    _deactivate(opener, tokens)
                try:
                    sent = yield item
                except GeneratorExit:
                    # Closed by the caller or abandoned: close the body inside our scope, then end.
                    tokens = _activate(opener, scope)
                    try:
                        gen.close()
                    finally:
                        _deactivate(opener, tokens)
                    raise
                except BaseException as exc:
                    thrown = exc
                    sent = None
        except GeneratorExit:
            raise
        except BaseException as exc:
            error = exc
            raise
        finally:
            _close(opener, scope, error, Streamed(returned))

    return wrapper


def _wrap_async_generator(
    fn: Callable[..., AsyncGenerator[Any, Any]], opener: Opener
) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        scope = _open(opener, args, kwargs)
        error: BaseException | None = None
        try:
            tokens = _activate(opener, scope)
            try:
                agen = fn(*args, **kwargs)
            finally:
                _deactivate(opener, tokens)
            sent: Any = None
            thrown: BaseException | None = None
            while True:
                tokens = _activate(opener, scope)
                try:
                    if thrown is not None:
                        item = await agen.athrow(thrown)
                    else:
                        item = await agen.asend(sent)
                except StopAsyncIteration:
                    return
                else:
                    _item(opener, scope, item)
                finally:
                    thrown = None
                    _deactivate(opener, tokens)
                try:
                    sent = yield item
                except GeneratorExit:
                    # Closed by the caller or abandoned: close the body inside our scope, then end.
                    tokens = _activate(opener, scope)
                    try:
                        await agen.aclose()
                    finally:
                        _deactivate(opener, tokens)
                    raise
                except BaseException as exc:
                    thrown = exc
                    sent = None
        except GeneratorExit:
            raise
        except BaseException as exc:
            error = exc
            raise
        finally:
            _close(opener, scope, error, Streamed())

    return wrapper


# --- streams a plain function or coroutine returned ------------------------------------------


class _Opened:
    """The :class:`Opener` of a stream whose scope was opened by the call that returned it: the
    generator wrappers above drive the stream in that scope, which ends with the stream."""

    __slots__ = ("opener", "scope", "started", "where")

    def __init__(self, opener: Opener, scope: Scope) -> None:
        self.opener = opener
        self.scope = scope
        self.where = opener.where
        self.started = False

    def open(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Scope:
        self.started = True
        return self.scope

    def close(self, scope: Any, error: BaseException | None, result: Any) -> None:
        self.opener.close(scope, error, result)

    def on_item(self, scope: Any, item: Any) -> None:
        self.opener.on_item(scope, item)

    def abandoned(self) -> None:
        """The stream was collected without ever being iterated: its body never ran, so no
        ``finally`` of ours did either. End the scope here."""
        if not self.started:
            self.started = True
            _close(self.opener, self.scope, None, Streamed())


def _stream(opener: Opener, scope: Scope, stream: Any) -> Any:
    """``stream`` (a generator or async generator a call returned) driven inside ``scope``;
    the stream itself, its scope ended, if that cannot be done."""
    try:
        opened = _Opened(opener, scope)
        if type(stream) is GeneratorType:
            wrapped = _wrap_generator(lambda: stream, opened)()
        else:
            wrapped = _wrap_async_generator(lambda: stream, opened)()
        # On the finalizer thread: ending a scope records its end, under the recorder's locks.
        on_collect(wrapped, opened.abandoned)
    except Exception as exc:
        report_internal_error(opener.where, exc)
        _close(opener, scope, None, Streamed())
        return stream
    return wrapped
