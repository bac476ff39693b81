"""Wrap any kind of function so a scope is open exactly while it runs.

One entry point, :func:`wrap`, picks the wrapper for plain functions, coroutines, generators and
async generators once, at decoration time. Generators are the subtle case: the scope is made
current only while the generator body runs (each ``next``/``send``/``throw``), never across a
``yield``, so the caller's context is never left with our span attached and OpenTelemetry never
reports "Failed to detach context". The span ends exactly once: when the body returns or raises,
or when the generator is closed or abandoned.

Failures inside agenttrace are reported and swallowed; the user's function always runs and its
result or exception passes through unchanged.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncGenerator, Callable, Generator
from typing import Any, Protocol, TypeVar

from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.runtime import runtime
from agenttrace.tracing.scopes import Scope, Tokens, deactivate

F = TypeVar("F", bound=Callable[..., Any])


class Opener(Protocol):
    """Starts the scope for one call and, later, finishes it."""

    where: str
    """Names this kind of scope in internal-error reports."""

    def open(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Scope:
        """Start (not activate) the scope for a call with these arguments."""
        ...

    def close(self, scope: Any, error: BaseException | None, result: Any) -> Any:
        """Finish the scope: ``error`` is the exception the call raised, ``result`` its value.
        Returns what the call returns (``result``, or an annotated copy such as a
        ``LoggedString``)."""
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


def _activate(opener: Opener, scope: Scope) -> Tokens | None:
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


def _close(opener: Opener, scope: Scope, error: BaseException | None, result: Any) -> Any:
    try:
        return opener.close(scope, error, result)
    except Exception as exc:
        report_internal_error(opener.where, exc)
        return result


def _item(opener: Opener, scope: Scope, item: Any) -> None:
    try:
        opener.on_item(scope, item)
    except Exception as exc:
        report_internal_error(opener.where, exc)


def wrap(fn: F, opener: Opener) -> F:
    """``fn`` wrapped so that ``opener``'s scope covers each call (or generator lifetime)."""
    if inspect.isasyncgenfunction(fn):
        return _wrap_async_generator(fn, opener)  # type: ignore[return-value]
    if inspect.iscoroutinefunction(fn):
        return _wrap_coroutine(fn, opener)  # type: ignore[return-value]
    if inspect.isgeneratorfunction(fn):
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
        try:
            if tokens is not None:
                deactivate(tokens)
            return close_scope(scope, None, result)
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
        return _close(opener, scope, None, result)

    return wrapper


def _wrap_generator(
    fn: Callable[..., Generator[Any, Any, Any]], opener: Opener
) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        scope = _open(opener, args, kwargs)
        if scope is None:
            return (yield from fn(*args, **kwargs))
        return (yield from _drive_generator(opener, scope, fn, args, kwargs))

    return wrapper


def _drive_generator(
    opener: Opener,
    scope: Scope,
    fn: Callable[..., Generator[Any, Any, Any]],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Generator[Any, Any, Any]:
    error: BaseException | None = None
    result: Any = None
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
                result = stop.value
                return result
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
        _close(opener, scope, error, result)


def _wrap_async_generator(
    fn: Callable[..., AsyncGenerator[Any, Any]], opener: Opener
) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        scope = _open(opener, args, kwargs)
        error: BaseException | None = None
        try:
            tokens = _activate(opener, scope) if scope is not None else None
            try:
                agen = fn(*args, **kwargs)
            finally:
                _deactivate(opener, tokens)
            sent: Any = None
            thrown: BaseException | None = None
            while True:
                tokens = _activate(opener, scope) if scope is not None else None
                try:
                    if thrown is not None:
                        item = await agen.athrow(thrown)
                    else:
                        item = await agen.asend(sent)
                except StopAsyncIteration:
                    return
                else:
                    if scope is not None:
                        _item(opener, scope, item)
                finally:
                    thrown = None
                    _deactivate(opener, tokens)
                try:
                    sent = yield item
                except GeneratorExit:
                    # Closed by the caller or abandoned: close the body inside our scope, then end.
                    tokens = _activate(opener, scope) if scope is not None else None
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
            if scope is not None:
                _close(opener, scope, error, None)

    return wrapper
