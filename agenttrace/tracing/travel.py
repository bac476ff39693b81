"""Identity that travels: the trace context and agenttrace's place in a session, carried to
another process.

:func:`inject` puts the current W3C ``traceparent``/``tracestate`` and baggage into a carrier
with OpenTelemetry's global propagator; the baggage carries where the work was handed over: the
session id, the current op's path label and the txn ids of its run, and the id of the writer
(this process) that handed it over and of its clock (:func:`clock_id`). :func:`extract` takes
them out again as an OpenTelemetry ``Context``, and :func:`joined_from` reads agenttrace's part
of it as a :class:`Joined`.

A process that starts work from a carrier *joins*: its root agent runs start as children of
the remote span (same trace) and their ingress says which session, op and writer they joined
(``tracing/scopes.py`` ``_root_place``). What is joined is set for the whole process
(:func:`join_process`, from ``init()`` reading the environment) or for one task
(:func:`joined_in`, a process pool's carried call).

Baggage is sent only to destinations on the allow-list (:func:`baggage_allowed`): the local
machine always, a URL's host if it is loopback or on ``init(baggage_hosts=...)``. The trace
context goes everywhere, as any OpenTelemetry instrumentation sends it.
"""

from __future__ import annotations

import contextvars
import hashlib
import ipaddress
import logging
import os
import re
import secrets
import socket
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from opentelemetry import baggage, propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter, Setter, default_getter, default_setter

from agenttrace import semconv as sc
from agenttrace._internal.context import current_scope_var
from agenttrace._internal.runtime import runtime
from agenttrace.formats.session.schema import SESSION_ID_PATTERN
from agenttrace.formats.stores import store_identity
from agenttrace.model.paths import parse_label

logger = logging.getLogger("agenttrace")

_ID = re.compile(SESSION_ID_PATTERN)
"""Session ids, txn ids and writer ids received in baggage: plain file-name stems."""


# --- the writer --------------------------------------------------------------------------------


def _new_writer_id() -> str:
    # Random, so two hosts' pids never collide; the pid, so a person reading a file can tell
    # which process wrote it.
    return f"{secrets.token_hex(4)}-{os.getpid()}"


_writer_id = _new_writer_id()


_clock_id: str | None = None
_CLOCK = re.compile(r"^[0-9a-f]{16}$")
"""A clock id as baggage carries it."""


def _forked() -> None:
    global _writer_id, _process_joined, _clock_id
    _writer_id = _new_writer_id()
    _clock_id = None  # read again: a forked child may be in a namespace of its own (unshare)
    _process_joined = None  # a forked child joins by its own carrier, never by its parent's


if hasattr(os, "register_at_fork"):  # not on Windows, where nothing forks
    os.register_at_fork(after_in_child=_forked)


_STORE = re.compile(r"^[a-z][a-z0-9+.-]{0,15}://[\x21-\x7e]{0,500}$")
"""A store's identity as baggage carries it: a URL without spaces or control characters."""


def own_store() -> str | None:
    """The identity of the session store this process ships its sessions to, if it ships."""
    url = runtime.settings.sessions_url if runtime.recorder is not None else None
    return store_identity(url) if url else None


def writer_id() -> str:
    """This process's writer id: 8 random hex digits and the pid (``3f9a0c1b-4242``), new in
    each process (a forked child gets its own)."""
    return _writer_id


def clock_id() -> str:
    """This machine's clock id: 16 hex digits of a hash of its boot id (Linux's
    ``/proc/sys/kernel/random/boot_id``, when readable) and its host name. The processes of one
    machine share it (they share a clock); a reader orders the lines of writers with different
    ones by the ops that started them, not by their ``ts`` alone (docs/design/cross-process.md).
    A hash, so the host name is never written to a file."""
    global _clock_id
    if _clock_id is None:
        try:
            with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as file:
                boot = file.read().strip()
        except OSError:  # not Linux, or no /proc: the host name alone
            boot = ""
        identity = f"{boot}\n{socket.gethostname()}".encode()
        _clock_id = hashlib.sha256(identity).hexdigest()[:16]
    return _clock_id


# --- what a joining process knows of where it was started ---------------------------------------


class Joined(NamedTuple):
    """The remote parent a process (or a task) joined: its span, and agenttrace's identity of
    the op that handed the work over (each ``None`` when the carrier did not say)."""

    span_context: trace.SpanContext
    session_id: str | None
    txn_id: str | None
    """The txn id of the run the op belongs to (its parent txn, for the joined run)."""
    origin_txn_id: str | None
    path: str | None
    """The op's path label in its run."""
    writer_id: str | None
    """The writer (process) that handed the work over."""
    store: str | None = None
    """The identity of the session store it ships to (``store_identity``), if it ships."""
    clock: str | None = None
    """The clock id of the writer that handed the work over (:func:`clock_id`)."""

    def ingress(self) -> dict[str, Any]:
        """The ``joined`` block of a joined run's ingress (docs/session-file.md)."""
        block: dict[str, Any] = {
            "trace_id": format(self.span_context.trace_id, "032x"),
            "parent_span_id": format(self.span_context.span_id, "016x"),
            "writer_id": writer_id(),
            "clock": clock_id(),
        }
        for key, value in (
            ("session_id", self.session_id),
            ("parent_txn_id", self.txn_id),
            ("origin_txn_id", self.origin_txn_id),
            ("parent_path", self.path),
            ("parent_writer_id", self.writer_id),
            ("parent_clock", self.clock),
        ):
            if value is not None:
                block[key] = value
        return block


_process_joined: Joined | None = None
_task_joined: contextvars.ContextVar[Joined | None] = contextvars.ContextVar(
    "agenttrace_joined", default=None
)


def join_process(joined: Joined | None) -> None:
    """Make ``joined`` the remote parent of every root run this process starts from now on
    (``None``: none)."""
    global _process_joined
    _process_joined = joined


@contextmanager
def joined_in(joined: Joined | None) -> Iterator[None]:
    """Make ``joined`` the remote parent of the root runs started in this context, for the
    ``with`` block (a task carried to a pool's worker)."""
    token = _task_joined.set(joined)
    try:
        yield
    finally:
        _task_joined.reset(token)


def joined_parent() -> Joined | None:
    """The remote parent a root run starting here joins: the task's, else the process's."""
    joined = _task_joined.get()
    return joined if joined is not None else _process_joined


# --- the allow-list ------------------------------------------------------------------------------


def baggage_allowed(destination: str | None) -> bool:
    """Whether baggage may go to ``destination``: ``None`` is this machine (an environment, a
    process pool), always allowed; else a URL or a host name, allowed if it is loopback or one
    of ``init(baggage_hosts=...)`` (``AGENTTRACE_BAGGAGE_HOSTS``)."""
    if destination is None:
        return True
    host = urlsplit(destination).hostname if "//" in destination else destination
    if not host:
        return False
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        if ipaddress.ip_address(host).is_loopback:
            return True
    except ValueError:
        pass  # a name, not an address
    return host in runtime.settings.baggage_hosts


# --- inject and extract --------------------------------------------------------------------------


def carried_context(context: Context | None = None) -> Context | None:
    """``context`` (default, ``None``: the current one) as it goes to another process: with
    agenttrace's identity of the current scope in its baggage (session id, txn ids, path label,
    writer id, store, clock id). Outside any span of this process, a process that joined passes
    on what it joined (its work runs under that remote op); else it is unchanged."""
    scope = current_scope_var.get()
    pairs: tuple[tuple[str, str | None], ...]
    if scope is not None:
        run_scope = scope.session  # the agent run the scope belongs to (itself for a run)
        pairs = (
            (sc.BAGGAGE_SESSION_ID, run_scope.run.session_id),
            (sc.BAGGAGE_TXN_ID, run_scope.txn_id),
            (sc.BAGGAGE_TXN_ORIGIN, run_scope.origin),
            (sc.BAGGAGE_PATH, scope.label),
            (sc.BAGGAGE_WRITER_ID, writer_id()),
            (sc.BAGGAGE_STORE, own_store()),
            (sc.BAGGAGE_CLOCK, clock_id()),
        )
    else:
        joined = joined_parent()
        if joined is None or trace.get_current_span(context).get_span_context().is_valid:
            return context
        context = trace.set_span_in_context(trace.NonRecordingSpan(joined.span_context), context)
        pairs = (
            (sc.BAGGAGE_SESSION_ID, joined.session_id),
            (sc.BAGGAGE_TXN_ID, joined.txn_id),
            (sc.BAGGAGE_TXN_ORIGIN, joined.origin_txn_id),
            (sc.BAGGAGE_PATH, joined.path),
            (sc.BAGGAGE_WRITER_ID, joined.writer_id),
            (sc.BAGGAGE_STORE, joined.store),
            (sc.BAGGAGE_CLOCK, joined.clock),
        )
    for key, value in pairs:
        if value is not None:
            context = baggage.set_baggage(key, value, context)
    return context


def inject(
    carrier: MutableMapping[str, str],
    *,
    destination: str | None = None,
    setter: Setter[Any] = default_setter,
) -> None:
    """Put the current trace context, and baggage with agenttrace's identity of the current
    scope, into ``carrier`` with OpenTelemetry's global propagator.

    ``destination``: where the carrier goes (a URL or host), checked against the allow-list
    (:func:`baggage_allowed`); ``None``: this machine. A destination not allowed gets the trace
    context only, no baggage at all (the application's own baggage included). ``setter``: how
    a key goes into the carrier (OpenTelemetry's ``Setter``; default: as the key is).
    """
    context = carried_context()
    if not baggage_allowed(destination):
        context = baggage.clear(context)
    propagate.inject(carrier, context=context, setter=setter)


def extract(carrier: Any, *, getter: Getter[Any] = default_getter) -> Context:
    """The OpenTelemetry ``Context`` a carrier holds (trace context and baggage), by the global
    propagator; an empty one if it holds nothing valid. ``getter``: how a key is read from the
    carrier (OpenTelemetry's ``Getter``; default: as the key is)."""
    return propagate.extract(carrier, context=Context(), getter=getter)


class MalformedIdentity(ValueError):
    """Baggage that names agenttrace keys with values that cannot be ours."""


def joined_from(context: Context) -> Joined | None:
    """The remote parent ``context`` names, or ``None`` without a valid remote span. Raises
    :class:`MalformedIdentity` if agenttrace's baggage in it is malformed (the span alone is
    then still usable: see :func:`joined_or_warn`)."""
    span_context = trace.get_current_span(context).get_span_context()
    if not span_context.is_valid:
        return None
    values: dict[str, str | None] = {}
    for key in (
        sc.BAGGAGE_SESSION_ID,
        sc.BAGGAGE_TXN_ID,
        sc.BAGGAGE_TXN_ORIGIN,
        sc.BAGGAGE_PATH,
        sc.BAGGAGE_WRITER_ID,
        sc.BAGGAGE_STORE,
        sc.BAGGAGE_CLOCK,
    ):
        value = baggage.get_baggage(key, context)
        if value is not None and not isinstance(value, str):
            raise MalformedIdentity(f"baggage {key} is not text")
        values[key] = value
    for key in (sc.BAGGAGE_SESSION_ID, sc.BAGGAGE_TXN_ID, sc.BAGGAGE_TXN_ORIGIN):
        value = values[key]
        if value is not None and not _ID.match(value):
            raise MalformedIdentity(f"baggage {key}={value[:64]!r} is not an id")
    writer = values[sc.BAGGAGE_WRITER_ID]
    if writer is not None and not _ID.match(writer):
        raise MalformedIdentity(f"baggage {sc.BAGGAGE_WRITER_ID}={writer[:64]!r} is not an id")
    path = values[sc.BAGGAGE_PATH]
    if path is not None:
        try:
            parse_label(path)
        except ValueError:
            raise MalformedIdentity(
                f"baggage {sc.BAGGAGE_PATH}={path[:64]!r} is not a label"
            ) from None
    store = values[sc.BAGGAGE_STORE]
    if store is not None and not _STORE.match(store):
        raise MalformedIdentity(f"baggage {sc.BAGGAGE_STORE}={store[:64]!r} is not a store")
    clock = values[sc.BAGGAGE_CLOCK]
    if clock is not None and not _CLOCK.match(clock):
        raise MalformedIdentity(f"baggage {sc.BAGGAGE_CLOCK}={clock[:64]!r} is not a clock id")
    return Joined(
        span_context,
        values[sc.BAGGAGE_SESSION_ID],
        values[sc.BAGGAGE_TXN_ID],
        values[sc.BAGGAGE_TXN_ORIGIN],
        path,
        writer,
        store,
        clock,
    )


_warned = False


def warn_once(message: str, *args: object) -> None:
    """One warning per process about a carrier that could not be used: the host program runs
    on, untraced across that boundary."""
    global _warned
    if not _warned:
        _warned = True
        logger.warning("agenttrace: " + message + "; ignored", *args)


def joined_or_warn(context: Context, where: str) -> Joined | None:
    """:func:`joined_from`, with malformed agenttrace baggage logged once and dropped (the
    remote span is still joined, without agenttrace's identity)."""
    try:
        return joined_from(context)
    except MalformedIdentity as exc:
        warn_once("%s: %s", where, exc)
        span_context = trace.get_current_span(context).get_span_context()
        return Joined(span_context, None, None, None, None, None)
