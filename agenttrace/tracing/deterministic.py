"""``agenttrace.deterministic()``: an agent's own reads of randomness and of the wall clock made
replayable (issue 36 item 5; docs/design/replay.md, "Deterministic values").

Inside the block (or the decorated function), in this context and the tasks and threads that
copy it: the module-level ``random`` generator is seeded with a recorded seed, and
``uuid.uuid4()``, ``time.time()`` and ``time.time_ns()`` called by the agent's code give values
the step journal keeps, so a replay (or a resume that re-enters the run) gets the same ones.

The three functions are replaced in their modules once, at the first ``deterministic()``, for
the whole process: by a wrapper that calls the original unless a block is active in the
calling context *and* the call comes from the agent's code, not from agenttrace's, the
OpenTelemetry SDK's or an LLM or HTTP client's (their reads happen inside the calls a replay
serves without running them, and would shift the agent's). Outside a block the wrapper costs one
context-variable read (docs/design/replay.md has the figure).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import os
import random
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import Any, TypeVar

from agenttrace._internal.checks import refuse
from agenttrace.tracing.journal.values import recorded

F = TypeVar("F", bound=Callable[..., Any])

LIBRARIES = frozenset(
    {
        "agenttrace",
        "opentelemetry",
        "litellm",
        "openai",
        "anthropic",
        "httpx",
        "httpcore",
        "h11",
        "h2",
        "anyio",
        "aiohttp",
        "requests",
        "urllib3",
    }
)
"""Top-level packages whose reads are never recorded: agenttrace's own (span times, journal
lines), the OpenTelemetry SDK's, and the LLM and HTTP clients' (a cookie jar's clock, a retry's
backoff), which run inside a call a replay answers from the journal without running it."""

_STDLIB = sys.stdlib_module_names
_MAX_HOPS = 16
"""How many standard-library frames a read is traced back through to the code that asked
(``uuid.uuid1`` reads the clock for its caller; ``http.cookiejar`` for an HTTP client)."""


@dataclass
class _Active:
    """A deterministic block active in a context."""

    owner: object
    """The block's own object (its ``__exit__`` finds its entry by it)."""
    outer: _Active | None
    token: contextvars.Token[_Active | None] | None = None
    """What puts the outer block (or none) back in this context."""


_active: contextvars.ContextVar[_Active | None] = contextvars.ContextVar(
    "agenttrace_deterministic", default=None
)


def _from_agent(frame: FrameType | None) -> bool:
    """Whether the read made in ``frame`` is the agent's: the first frame, from ``frame`` out,
    that is not the standard library's is not one of :data:`LIBRARIES`."""
    for _ in range(_MAX_HOPS):
        if frame is None:
            return False
        name = frame.f_globals.get("__name__")
        top = name.partition(".")[0] if isinstance(name, str) else ""
        if top in LIBRARIES:
            return False
        if top not in _STDLIB:
            return True
        frame = frame.f_back
    return False


def _recording(read: Callable[[], Any], name: str) -> Callable[[], Any]:
    """``read`` (``time.time``, ...) as the process calls it from now on: itself, unless a
    block is active here and the caller is the agent's code."""

    @functools.wraps(read)
    def wrapper() -> Any:
        if _active.get() is None or not _from_agent(sys._getframe(1)):
            return read()
        return recorded(name, read)

    return wrapper  # the original stays reachable as its ``__wrapped__``


_PATCHES: tuple[tuple[Any, str], ...] = ((uuid, "uuid4"), (time, "time"), (time, "time_ns"))
_installed = False
_lock = threading.Lock()


def _install() -> None:
    """Replace ``uuid.uuid4``, ``time.time`` and ``time.time_ns`` once per process (a name bound
    earlier, ``from time import time``, keeps the original: call them through their module)."""
    global _installed
    if _installed:
        return
    with _lock:
        if _installed:
            return
        for module, name in _PATCHES:
            setattr(module, name, _recording(getattr(module, name), name))
        _installed = True


def _fresh_seed() -> int:
    return int.from_bytes(os.urandom(8), "big")


class deterministic:
    """Make the agent's own randomness and wall-clock reads replayable: a ``with`` block, or a
    decorator of a function (sync or async) called inside an agent run.

    While it is active in the current context (and in the tasks and threads that copy it:
    ``agenttrace.ContextThreadPoolExecutor``), the module-level ``random`` generator is seeded
    (with ``seed``, else a seed the step journal records, so a replay reseeds with the same),
    and ``uuid.uuid4()``, ``time.time()`` and ``time.time_ns()`` called from the agent's code
    are journaled as they are read; a replay (``agenttrace.replaying``) or a resume that
    re-enters the run gets the recorded values back, and lists in its report a read the
    recording has no value for. Other threads, and agenttrace's, OpenTelemetry's and the LLM
    clients' own reads, are left alone; without ``init()`` or with the journal off, only the
    seeding happens. On leaving the outermost block, ``random`` is reseeded from the system's
    entropy, so code after it is not predictable either.

    ``datetime.datetime.now()`` is not covered (its C type cannot be patched): use
    ``datetime.datetime.fromtimestamp(time.time())``.
    """

    def __init__(self, seed: int | None = None) -> None:
        if seed is not None and (type(seed) is not int):
            refuse("agenttrace.deterministic", "seed", seed, "an int or None")
        self.seed = seed

    def __enter__(self) -> deterministic:
        _install()
        outer = _active.get()
        entry = _Active(self, outer)
        entry.token = _active.set(entry)
        if self.seed is not None:
            random.seed(self.seed)
        elif outer is None:  # a nested block without a seed keeps the outer one's sequence
            random.seed(recorded("seed", _fresh_seed))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        entry = _active.get()
        if entry is None or entry.owner is not self or entry.token is None:
            return  # left in another context than it was entered in: nothing of ours to undo
        _active.reset(entry.token)
        if entry.outer is None:
            random.seed()

    async def __aenter__(self) -> deterministic:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def __call__(self, fn: F) -> F:
        """``fn`` run inside a block of its own at each call (a coroutine function's awaited
        body inside it)."""
        if not callable(fn):
            refuse("agenttrace.deterministic", "fn", fn, "a function")
        seed = self.seed
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def awaited(*args: Any, **kwargs: Any) -> Any:
                with deterministic(seed):
                    return await fn(*args, **kwargs)

            return awaited  # type: ignore[return-value]

        @functools.wraps(fn)
        def called(*args: Any, **kwargs: Any) -> Any:
            with deterministic(seed):
                return fn(*args, **kwargs)

        return called  # type: ignore[return-value]
