"""A joined process as a writer of the session it joined (docs/design/cross-process.md).

A process that joined an op of another process (``agenttrace.tracing.travel``) records its runs
into that op's *session*, as a writer of its own, when it writes sessions to the same directory
as the process that handed the work over, or ships them to the same session store (another
host): it then writes the session's segment ``<sessions_dir>/<session_id>.w/<writer_id>.*``
(``Session(session_id, writer=...)``), never a file of another writer. The carrier says which
directory that is (:data:`SESSIONS_DIR_KEY`: a local carrier only, the environment or a process
pool's task, never baggage, which may leave the machine) and, in the baggage, which store
(``agenttrace.store``, its identity without credentials); a process writing elsewhere records a
session of its own, as before, its run's ``ingress.joined`` saying where it belongs.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, MutableMapping

from agenttrace._internal.runtime import runtime
from agenttrace.session.state import Session
from agenttrace.tracing.travel import Joined, own_store, writer_id

SESSIONS_DIR_KEY = "AGENTTRACE_JOIN_SESSIONS_DIR"
"""The carrier's key (an environment variable, or a process pool task's carrier) naming the
sessions directory of the process that handed the work over."""

SESSIONS_URL_KEY = "AGENTTRACE_SESSIONS_URL"
"""The setting's own environment variable: the store the process that handed the work over
ships its sessions to (see :func:`carry_sessions_dir`)."""

_lock = threading.Lock()
_sessions: dict[str, Session] = {}
"""This process's writer session of each session it joined: one object per session, so every
task a pool's worker runs for it appends to the same segment."""


def _forked() -> None:
    global _lock
    _lock = threading.Lock()
    _sessions.clear()  # a forked child is a writer of its own (its writer id is new)


if hasattr(os, "register_at_fork"):  # not on Windows, where nothing forks
    os.register_at_fork(after_in_child=_forked)


def carry_sessions_dir(carrier: MutableMapping[str, str], *, carrying: bool) -> None:
    """Name this process's sessions directory in ``carrier`` (a carrier to this machine), if
    it carries a context (``carrying``) and agenttrace records here; else take out a name the
    carrier inherited.

    When this process ships its sessions to a store (``init(sessions_url=...)``), the carrier
    names that store too (:data:`SESSIONS_URL_KEY`, unless it names one already): a child that
    joins as a writer then ships its segment there, or the store's copy of the session would
    lack the child's part. A carrier to this machine only, so the URL's credentials stay here.
    """
    carrier.pop(SESSIONS_DIR_KEY, None)
    if carrying and runtime.recorder is not None:
        carrier[SESSIONS_DIR_KEY] = str(runtime.settings.sessions_dir.absolute())
        url = runtime.settings.sessions_url
        if url and not carrier.get(SESSIONS_URL_KEY):
            carrier[SESSIONS_URL_KEY] = url


def writer_session(joined: Joined | None, carrier: Mapping[str, str]) -> Session | None:
    """The session this process writes as a writer of the session ``joined`` names, if the
    carrier's sessions directory is the one this process records into or the joined process
    ships to the store this one ships to; else ``None``."""
    if joined is None or joined.session_id is None or runtime.recorder is None:
        return None
    if not (_same_directory(carrier) or _same_store(joined)):
        return None
    with _lock:
        session = _sessions.get(joined.session_id)
        if session is None:
            session = _sessions[joined.session_id] = Session(joined.session_id, writer=writer_id())
        return session


def _same_directory(carrier: Mapping[str, str]) -> bool:
    """Whether the carrier's sessions directory is the one this process records into."""
    theirs = carrier.get(SESSIONS_DIR_KEY)
    if not theirs:
        return False
    try:
        return os.path.samefile(runtime.settings.sessions_dir, theirs)
    except (OSError, ValueError):  # either is missing or not a path: not one directory
        return False


def _same_store(joined: Joined) -> bool:
    """Whether the process that handed the work over ships to the store this one ships to
    (another host's process joins the session there, its segment shipped beside the others)."""
    return joined.store is not None and joined.store == own_store()
