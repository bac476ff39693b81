"""Context follows threads: work started in another thread inside an agent run, turn or op
runs in that scope, so its spans join the same trace under the right parent.

Patched with wrapt (``init()`` does it unless ``propagate_threads=False`` or
``AGENTTRACE_PROPAGATE_THREADS=false``; ``shutdown()`` undoes it):

- ``concurrent.futures.ThreadPoolExecutor.submit`` (and so ``map``, and asyncio's
  ``run_in_executor`` on the default executor): each task runs in a copy of the context it was
  submitted in. Per task, not per thread: a pool's worker threads are reused by later tasks
  from other scopes, so the workers themselves start with no context.
- ``threading.Thread.start`` (and so ``threading.Timer``): the thread's ``run`` (its target, or
  a subclass's own ``run``) runs in a copy of the context ``start()`` was called in.

What travels is the whole ``contextvars`` context, as asyncio tasks copy it: the OpenTelemetry
span, agenttrace's scope, and every other context variable. Only inside a traced scope (or while
an implicit run of ``init()`` alone is open: its sub-agents then nest in it): outside one the
wrappers pass straight through, and threads behave exactly as Python makes them.

This composes with OpenTelemetry's own ``opentelemetry-instrumentation-threading``: both may be
on, in either order (each carries the same OpenTelemetry context; ours carries the rest).
"""

from __future__ import annotations

import contextvars
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from typing import Any, ClassVar

import wrapt

from agenttrace._internal.errors import report_internal_error
from agenttrace.instrumentation.base import LibraryInstrumentor
from agenttrace.tracing.propagation import carry_context, in_traced_scope

__all__ = ["ThreadContextInstrumentor", "instrument_threads"]

WHERE = "thread context propagation"

_starting_workers: ContextVar[bool] = ContextVar("agenttrace_starting_workers", default=False)
"""True while a pool's ``submit`` runs: the worker threads it starts serve every later task,
from any scope, so they must not carry the context of the task that happened to start them."""

_MISSING = object()


class _State:
    __slots__ = ("enabled", "patches")

    def __init__(self) -> None:
        self.enabled = False
        self.patches: list[tuple[Any, str]] = []  # (owner, attribute) wrapped


_state = _State()


class ThreadContextInstrumentor(LibraryInstrumentor):
    """OpenTelemetry's instrumentor interface for carrying agenttrace's context into threads and
    ``concurrent.futures`` thread pools (see the module docstring). It makes no spans.

    ``init()`` instruments it by default; ``instrument()`` and ``uninstrument()`` do it by hand.
    """

    init_options: ClassVar[dict[str, Any] | None] = (
        None  # init() itself turns it on: it never sets agenttrace up
    )

    def patch(self, **options: Any) -> None:
        """Patch threads and thread pools."""
        _patch()

    def unpatch(self) -> None:
        """Put threads and thread pools back as they were."""
        _unpatch()

    def patched(self) -> bool:
        """Whether threads and pools are patched."""
        return bool(_state.patches)


def instrument_threads() -> Callable[[], None]:
    """Carry the context into threads from now on; returns the undo (a no-op if it was already
    on: whoever switched it on switches it off)."""
    instrumentor = ThreadContextInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        return lambda: None
    instrumentor.instrument(skip_dep_check=True)

    def undo() -> None:
        if instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()

    return undo


# --- the wrappers ----------------------------------------------------------------------------


def _submit(
    wrapped: Callable[..., Any], executor: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``ThreadPoolExecutor.submit(fn, /, *args, **kwargs)`` with ``fn`` in the caller's context."""
    if not _state.enabled or not args or not in_traced_scope():
        return wrapped(*args, **kwargs)
    try:
        fn = carry_context(args[0])
    except Exception as exc:
        report_internal_error(WHERE, exc)
        return wrapped(*args, **kwargs)
    token = _starting_workers.set(True)
    try:
        return wrapped(fn, *args[1:], **kwargs)
    finally:
        _starting_workers.reset(token)


def _start(
    wrapped: Callable[..., Any],
    thread: threading.Thread,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """``Thread.start()`` with the thread's ``run`` in the caller's context."""
    if (
        not _state.enabled
        or _starting_workers.get()
        or thread.ident is not None  # already started: start() says so, nothing to carry
        or not in_traced_scope()
        # Python 3.14+: Thread(context=...) chose the thread's context; that choice wins.
        or (sys.version_info >= (3, 14) and getattr(thread, "_context", None) is not None)
    ):
        return wrapped(*args, **kwargs)
    restore: Callable[[], None] | None = None
    try:
        restore = _run_in_context(thread)
    except Exception as exc:
        report_internal_error(WHERE, exc)
    try:
        return wrapped(*args, **kwargs)
    except Exception:
        if restore is not None:
            restore()  # it did not start (no thread to be had): leave it as it was
        raise


def _run_in_context(thread: threading.Thread) -> Callable[[], None]:
    """Make ``thread.run`` run in a copy of the current context; returns the undo, which the
    thread also runs when ``run`` returns, so a finished thread holds no context.

    Set on the instance rather than wrapping ``Thread.run``: a subclass's own ``run`` (and
    ``Timer``'s) is carried too.
    """
    saved = vars(thread).get("run", _MISSING)
    run = thread.run
    context = contextvars.copy_context()

    def restore() -> None:
        if vars(thread).get("run") is run_in_context:
            if saved is _MISSING:
                del thread.run
            else:
                thread.run = saved  # type: ignore[method-assign]

    def run_in_context() -> None:
        try:
            context.run(run)
        finally:
            restore()

    thread.run = run_in_context  # type: ignore[method-assign]
    return restore


# --- patching --------------------------------------------------------------------------------

_TARGETS: tuple[tuple[Any, str, Callable[..., Any]], ...] = (
    (ThreadPoolExecutor, "submit", _submit),
    (threading.Thread, "start", _start),
)


def _patch() -> None:
    if _state.patches:
        return
    for owner, name, wrapper in _TARGETS:
        _unwrap_ours(owner, name)  # a layer of ours left on top: replaced, not stacked
        wrapt.wrap_function_wrapper(owner, name, wrapper)
        _state.patches.append((owner, name))
    _state.enabled = True


def _unpatch() -> None:
    """Every patched attribute gets its original back. If another instrumentation wrapped one on
    top of ours, our layer stays inside theirs but passes calls straight through."""
    _state.enabled = False
    for owner, name in reversed(_state.patches):
        _unwrap_ours(owner, name)
    _state.patches.clear()


def _unwrap_ours(owner: Any, name: str) -> None:
    """Put back what our wrapper wraps, if ours is the outermost layer of ``owner.name``.

    Also when another instrumentation that wrapped ours has since taken its own layer off:
    OpenTelemetry's ``unwrap`` puts back ours bound to the class, a different object."""
    current = vars(owner).get(name)
    if getattr(current, "_self_wrapper", None) in _WRAPPERS:
        setattr(owner, name, current.__wrapped__)


_WRAPPERS = tuple(wrapper for _, _, wrapper in _TARGETS)
