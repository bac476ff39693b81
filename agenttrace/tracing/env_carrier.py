"""The environment-variable carrier: the trace context and agenttrace's identity handed to a
child process in ``TRACEPARENT``, ``TRACESTATE`` and ``BAGGAGE``.

The names are OpenTelemetry's environment carrier's (the propagator's field, upper case, every
character but letters, digits and ``_`` made ``_``), set and read through the API's
``EnvironmentSetter``/``EnvironmentGetter`` where the installed API has them. The child's
``init()`` calls :func:`join_from_environment`: a valid ``TRACEPARENT`` makes the process join
(``agenttrace.tracing.travel``); a malformed one, or malformed baggage, is ignored with one
logged warning, and the program runs on.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, MutableMapping

from opentelemetry import baggage, propagate, trace
from opentelemetry.propagators.textmap import Getter, Setter

from agenttrace._internal.errors import report_internal_error
from agenttrace.session.state import session_if_any, use_session
from agenttrace.tracing.joined_writer import carry_sessions_dir, writer_session
from agenttrace.tracing.travel import extract, inject, join_process, joined_or_warn, warn_once

try:  # the API's carrier (opentelemetry-api 1.38 and later)
    from opentelemetry.propagators._envcarrier import EnvironmentGetter, EnvironmentSetter
except ImportError:  # an older API: the same names, by the specification's rule

    def _normalize(key: str) -> str:
        name = re.sub(r"[^A-Za-z0-9_]", "_", key).upper() or "_"
        return f"_{name}" if name[0].isdigit() else name

    class EnvironmentGetter(Getter[Mapping[str, str]]):  # type: ignore[no-redef]
        """Reads a propagator's field from the environment variable named after it."""

        def get(self, carrier: Mapping[str, str], key: str) -> list[str] | None:
            value = carrier.get(_normalize(key))
            return None if value is None else [value]

        def keys(self, carrier: Mapping[str, str]) -> list[str]:
            return list(carrier)

    class EnvironmentSetter(Setter[MutableMapping[str, str]]):  # type: ignore[no-redef]
        """Sets a propagator's field as the environment variable named after it."""

        def set(self, carrier: MutableMapping[str, str], key: str, value: str) -> None:
            carrier[_normalize(key)] = value


_GETTER = EnvironmentGetter()
_SETTER = EnvironmentSetter()


def _variable_names() -> list[str]:
    """The environment variables the global propagator's fields are carried in."""
    names: dict[str, str] = {}
    for field in propagate.get_global_textmap().fields:
        _SETTER.set(names, field, "")
    return list(names)


def subprocess_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``os.environ`` (or ``env``) with the current trace context and agenttrace's identity
    added, for ``subprocess.run(..., env=agenttrace.subprocess_env())`` or
    ``asyncio.create_subprocess_exec(..., env=...)``: a child that calls ``agenttrace.init()``
    joins the trace and session of the op that started it.

    Outside any span, a process that joined passes on the op it joined (a grandchild joins
    it too); one that did not drops the variables it inherited (a ``TRACEPARENT`` from its own
    parent's environment), so a child never joins a stale parent.

    ``AGENTTRACE_JOIN_SESSIONS_DIR`` names this process's sessions directory: a child that
    records into the same one writes its part of the session there, as a writer of the
    session (``agenttrace.tracing.joined_writer``).
    """
    result = dict(os.environ if env is None else env)
    for name in _variable_names():
        result.pop(name, None)
    inject(result, setter=_SETTER)
    carry_sessions_dir(result, carrying=bool(_GETTER.get(result, "traceparent")))
    return result


def join_from_environment(environ: Mapping[str, str] | None = None) -> Callable[[], None]:
    """Join the remote parent ``TRACEPARENT`` (and ``BAGGAGE``) name, for every root run this
    process starts, and, if it records sessions where the parent does, its session as a writer
    (``agenttrace.tracing.joined_writer``); returns the undo (for ``shutdown``). Nothing in the
    environment: nothing joined. Malformed: one warning, nothing joined (or the trace without
    agenttrace's identity, if only the baggage is malformed)."""
    environ = os.environ if environ is None else environ
    if not _GETTER.get(environ, "traceparent"):  # W3C trace context's field: no parent named
        return _leave
    context = extract(environ, getter=_GETTER)
    span_context = trace.get_current_span(context).get_span_context()
    if not span_context.is_valid:
        warn_once("malformed TRACEPARENT in the environment")
        return _leave
    if _names_baggage(environ) and not baggage.get_all(context):
        warn_once("malformed BAGGAGE in the environment")
    joined = joined_or_warn(context, "BAGGAGE in the environment")
    join_process(joined)
    try:
        session = writer_session(joined, environ)
    except Exception as exc:  # the child records a session of its own, as it would elsewhere
        report_internal_error("joining the parent's session as a writer", exc)
        session = None
    if session is None or session_if_any() is not None:  # none, or the program chose its own
        return _leave

    def leave_session() -> None:
        _leave()
        if session_if_any() is session:
            use_session(None)

    use_session(session)
    return leave_session


def _names_baggage(environ: Mapping[str, str]) -> bool:
    value = _GETTER.get(environ, "baggage")
    return bool(value and value[0].strip())


def _leave() -> None:
    join_process(None)
