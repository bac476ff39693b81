"""The leases this process holds on sessions in a session store (``AGENTTRACE_SESSIONS_URL``):
one holder at a time across hosts (``agenttrace.formats.stores.lease``: epochs, fencing).

``resume`` of a session the store holds takes its lease before it reads the session
(:func:`take`, ``force`` as the resume's), and a recorded session's first ship takes it too
(the shipper, ``agenttrace.recorder.shipper``). Either way it is held here, one per session,
renewed from a thread every third of ``AGENTTRACE_LEASE_TTL``, and let go with the session's
local lease (``agenttrace.session.leases``: when nothing records the session any more, or at
``shutdown()``) or at the process's end.

Leases are keyed by the store's identity (``store_identity``: no credentials), so a URL with a
password in it and the same URL redacted name one store; each lease opens its own store from
the URL it was taken by, kept in memory only (a PostgreSQL password may be in it).

Whoever ships the session's files (a :class:`LeaseWatcher`: the shipper) is told of each lease
taken (the epoch and ``from_seq`` its segment names carry) and of each lease lost (it stops
writing the session to the store: whatever it wrote later would be left out by every reader).
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from agenttrace._internal.runtime import runtime
from agenttrace.formats.stores import open_store, store_identity
from agenttrace.formats.stores.base import StoreError
from agenttrace.formats.stores.lease import LeaseLost, StoreLease
from agenttrace.formats.stores.lease import take as take_lease

logger = logging.getLogger("agenttrace")

now: Callable[[], float] = time.time
"""The clock leases are taken and renewed by (a test moves it instead of sleeping)."""


class LeaseWatcher(Protocol):
    """What ships a store's sessions: told when this process takes or loses a session's lease
    in the store ``identity`` names (its ``store_identity``)."""

    def lease_taken(
        self, identity: str, session_id: str, epoch: int, from_seq: Mapping[str, int]
    ) -> None:
        """Ship ``session_id``'s files as ``epoch`` from now on, each series from ``from_seq``."""

    def lease_lost(self, identity: str, session_id: str) -> None:
        """Stop shipping ``session_id``'s files: another holder has the session."""


_lock = threading.RLock()  # let_go runs in a finalizer, maybe inside take()
_held: dict[tuple[str, str], StoreLease] = {}
_watchers: list[LeaseWatcher] = []


def identity(url: str) -> str:
    """What keys the leases of the store at ``url``: its ``store_identity`` (the URL itself
    for one that cannot be parsed, which no store opens)."""
    return store_identity(url) or url


def holder() -> str:
    """Who this process is, in a lease: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def take(url: str, session_id: str, *, force: bool = False, quiet_for: object = None) -> StoreLease:
    """The lease of ``session_id`` in the store at ``url``: the one this process holds already,
    or taken now (``force``: from a live holder too) and renewed until it is let go. Raises
    ``LeaseHeld`` (an ``agenttrace.LeaseHeld``, one line naming the holder) or ``StoreError``.
    Every watcher but ``quiet_for`` (the one taking it, which knows) is told.

    ``url`` as the user gave it, credentials and all: the lease's store is opened from it."""
    key = (identity(url), session_id)
    with _lock:
        lease = _held.get(key)
        if lease is not None and lease.held:
            return lease
        store = open_store(url)  # the lease's own: it renews from its thread, closed with it
        try:
            lease = take_lease(
                store, session_id, holder(), runtime.settings.lease_ttl, force=force, now=now
            )
        except BaseException:
            store.close()
            raise
        _held[key] = lease
        watchers = [w for w in _watchers if w is not quiet_for]
    lease.start_renewing(on_lost=functools.partial(lost, key[0], session_id))
    for watcher in watchers:
        watcher.lease_taken(key[0], session_id, lease.epoch, lease.from_seq)
    return lease


def held(url: str, session_id: str) -> StoreLease | None:
    """The lease of ``session_id`` this process holds in the store at ``url``, if it does."""
    with _lock:
        lease = _held.get((identity(url), session_id))
    return lease if lease is not None and lease.held else None


def of(session_id: str) -> StoreLease | None:
    """The lease this process holds on ``session_id`` in the store ``init`` ships to, if any."""
    url = runtime.settings.sessions_url
    return held(url, session_id) if url is not None else None


def watch(watcher: LeaseWatcher, url: str) -> None:
    """Tell ``watcher`` of the leases taken and lost from now on, and of those held already in
    the store at ``url`` (a session resumed before ``init``)."""
    store = identity(url)
    with _lock:
        _watchers.append(watcher)
        current = [(key, lease) for key, lease in _held.items() if key[0] == store and lease.held]
    for (_, session_id), lease in current:
        watcher.lease_taken(store, session_id, lease.epoch, lease.from_seq)


def unwatch(watcher: LeaseWatcher) -> None:
    """Tell ``watcher`` nothing more."""
    with _lock:
        if watcher in _watchers:
            _watchers.remove(watcher)


def let_go(session_id: str) -> None:
    """Nothing records ``session_id`` here any more: its store leases go (the epochs stay, for
    fencing). A store that cannot be reached is said once; the lease then expires."""
    with _lock:
        keys = [key for key in _held if key[1] == session_id]
        leases = [_held.pop(key) for key in keys]
    for lease in leases:
        _release(lease)


def release_all() -> None:
    """Let every store lease this process holds go (``shutdown()``, the process's end)."""
    with _lock:
        leases = list(_held.values())
        _held.clear()
    for lease in leases:
        _release(lease)


def _release(lease: StoreLease) -> None:
    try:
        lease.release()
    except StoreError as error:  # it expires by itself: the next taker waits for that
        logger.warning("agenttrace: cannot let go of the lease of %s: %s", lease.session_id, error)
    finally:
        lease.store.close()


def lost(url: str, session_id: str, reason: LeaseLost | None = None) -> None:
    """The lease of ``session_id`` was taken over (the renewer found it so, and warned once):
    whoever ships the session stops."""
    store = identity(url)
    with _lock:
        lease = _held.get((store, session_id))
        if lease is not None and not lease.held:
            del _held[store, session_id]
        watchers = list(_watchers)
    for watcher in watchers:
        watcher.lease_lost(store, session_id)


def _forget_in_child() -> None:
    """A forked child holds none of its parent's leases: it neither renews nor releases them."""
    global _lock
    _lock = threading.RLock()
    _held.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)

# Registered at import, so it runs after init()'s shutdown (which ships the last segments).
atexit.register(release_all)
