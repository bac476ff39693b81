"""The commands' sessions when they live in a session store (``--sessions-url``,
``AGENTTRACE_SESSIONS_URL``): rebuilt in a cache directory of the user's, one per store URL,
refreshed at each command, so the views read them as they read the sessions directory.

A session is rebuilt only when its segments changed since it last was (a state file per
session beside the cache's sessions). Every failure of the store is a
:class:`~agenttrace.formats.stores.base.StoreError`, one line.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agenttrace._internal.config import ReadLimits, Settings
from agenttrace.formats.session.files import check_session_id
from agenttrace.formats.stores import SessionStore, StoreError, open_store, store_identity
from agenttrace.formats.stores.lease import take
from agenttrace.formats.stores.materialize import cache_directory, materialize
from agenttrace.formats.stores.shipping import Shipper
from agenttrace.session.store_leases import holder

logger = logging.getLogger("agenttrace")


class StoredSessions:
    """The sessions of the store at ``url``, as files in its cache directory."""

    def __init__(self, url: str, limits: ReadLimits | None = None) -> None:
        self.url = url
        self.limits = ReadLimits.from_env() if limits is None else limits
        root = cache_directory(url)
        self.directory = root / "sessions"
        """Where the sessions are rebuilt: what a command takes as its sessions directory."""
        self._states = root / "state"
        self._store: SessionStore | None = None
        self._said: set[str] = set()
        """Sessions said to be left out (a damaged segment), said once each."""

    @property
    def store(self) -> SessionStore:
        if self._store is None:
            self._store = open_store(self.url)
        return self._store

    def _ready(self) -> None:
        try:
            for folder in (self.directory, self._states):
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as error:
            raise StoreError(
                f"{self.directory}: cannot make the store's cache: {error.strerror or error}"
            ) from None

    def fetch(self, session_id: str) -> Path:
        """Rebuild one session (if it changed); the path of its stream or session file."""
        check_session_id(session_id)
        self._ready()
        return materialize(
            self.store,
            session_id,
            self.directory,
            self.limits,
            state=self._states / session_id,
        )

    def fetch_all(self) -> list[str]:
        """Rebuild every session of the store (those that changed); their ids. A session that
        cannot be rebuilt is left as it was in the cache (its reader says what is wrong)."""
        self._ready()
        ids = self.store.sessions()
        for session_id in ids:
            try:
                self.fetch(session_id)
            except StoreError as error:
                if not self._reachable():
                    raise
                if session_id not in self._said:  # once (serve refreshes every 2 s)
                    self._said.add(session_id)
                    logger.warning("agenttrace: session %s is left out: %s", session_id, error)
        return ids

    def _reachable(self) -> bool:
        try:
            self.store.sessions()
        except StoreError:
            return False
        return True

    def ship(self, session_id: str, force: bool = False) -> int:
        """Ship what a command appended to the cached files of ``session_id`` (a decision
        line) to the store, under the session's lease there (``LeaseHeld`` while a process
        records it; ``force`` takes it over all the same); the bytes shipped."""
        check_session_id(session_id)
        # The cached files are no longer the store's: rebuilt at the next fetch, whatever
        # the store takes of them now.
        (self._states / session_id).unlink(missing_ok=True)
        # Under a lease of its own: a segment of no epoch after one was taken (a session whose
        # recorder or resume held the lease) would be fenced out, never read.
        lease = take(self.store, session_id, holder(), Settings.resolve().lease_ttl, force=force)
        try:
            shipper = Shipper(self.store, self.directory)
            shipper.set_epoch(session_id, lease.epoch, lease.from_seq)
            return shipper.ship(session_id)
        finally:
            lease.release()

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


@contextmanager
def stored_sessions(url: str) -> Iterator[StoredSessions]:
    """:class:`StoredSessions` of ``url``, its store closed after."""
    sessions = StoredSessions(url)
    try:
        yield sessions
    finally:
        sessions.close()


FOLLOW_INTERVAL = 2.0
"""Seconds between two refreshes of a followed store's cache (``serve``)."""


def follow_store(
    stored: StoredSessions, interval: float = FOLLOW_INTERVAL, only: str | None = None
) -> threading.Thread:
    """Refresh ``stored``'s cache (of session ``only``, else of every session) every
    ``interval`` seconds on a daemon thread, for a command that runs on (``serve``,
    ``tree --follow``): what the store gains shows as a local session's changes do. A store
    that fails is said once, and tried again."""

    def refresh() -> None:
        failing = False
        while True:
            time.sleep(interval)
            try:
                if only is None:
                    stored.fetch_all()
                else:
                    stored.fetch(only)
            except Exception as error:  # the store's or the cache's: said once, tried again
                if not failing:
                    # The store's identity: the URL may hold a password.
                    logger.warning(
                        "agenttrace: cannot refresh from %s: %s", store_identity(stored.url), error
                    )
                failing = True
            else:
                failing = False

    thread = threading.Thread(target=refresh, name="agenttrace-store-follower", daemon=True)
    thread.start()
    return thread
