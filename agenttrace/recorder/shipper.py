"""Shipping the session files the recorder writes to a session store
(``AGENTTRACE_SESSIONS_URL``), on a thread of its own.

The files are written in the sessions directory as always (the working copy); this sink
notes which writers' files changed (an event, an op's end, a session file written:
:meth:`ShipperSink.written`) and ships them with a
:class:`~agenttrace.formats.stores.shipping.Shipper` on its own worker thread, at most once per
``interval`` seconds, so a slow or unreachable store never holds up the agent nor the
recorder's worker. ``force_flush`` and shutdown ship what is left, in the caller.

A session's ``main`` files are shipped under its lease in the store
(``agenttrace.session.store_leases``): the one ``resume`` took, or, for a session recorded
here, one taken at its first ship (as its local lease is taken at its first write), so a host
that resumes it meanwhile is refused while this process records it, and takes it over once
this process stopped renewing it. A session whose lease another host holds, or that was taken
over, is not shipped from here any more (one warning: its files stay in the sessions
directory); whatever this process wrote later would be left out of it by every reader.

A store that fails is said once (a warning: the files stay in the sessions directory, and are
shipped when the store works again), retried after the retry interval and at each flush;
nothing shipped is shipped again, nothing written is skipped.

A joined writer killed before its shipper shipped all it wrote (a tool that kills its process,
a worker gone mid-task) leaves the rest in its segment in the sessions directory; the first
writer's process, on this machine, ships it at its next flush and at shutdown, once that
writer's process is gone (:meth:`ShipperSink.dead_writers`).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path

from agenttrace._internal.processes import process_alive
from agenttrace.formats.session.files import (
    SEGMENTS_SUFFIX,
    STREAM_SUFFIX,
    SessionFileError,
    segment_stem,
)
from agenttrace.formats.session.lease import LeaseHeld
from agenttrace.formats.stores.base import SessionStore, StoreError
from agenttrace.formats.stores.layout import MAIN, writer_of
from agenttrace.formats.stores.shipping import Shipper
from agenttrace.model.lifecycle import Ended, EventLogged, Record
from agenttrace.recorder.outage import RETRY_INTERVAL
from agenttrace.recorder.sink import Sink
from agenttrace.recorder.worker import Worker
from agenttrace.session import store_leases
from agenttrace.session.leases import held_here

logger = logging.getLogger("agenttrace")

_SHIP = object()


class ShipperSink(Sink):
    """Ships the writers' files that changed to ``store`` (see the module docstring).

    ``url``: the URL ``store`` was opened by, as the user gave it (``store.url`` when not
    given, which has no password in it): a session's lease opens a store of its own from it,
    so it must keep the credentials; it is kept in memory only, never shown."""

    takes = frozenset({EventLogged, Ended})

    def __init__(
        self,
        store: SessionStore,
        sessions_dir: Path,
        epoch: int = 0,
        interval: float = 1.0,
        retry_interval: float = RETRY_INTERVAL,
        url: str | None = None,
    ) -> None:
        self.store = store
        self._url = store.url if url is None else url
        self._identity = store_leases.identity(self._url)
        self.shipper = Shipper(store, sessions_dir, epoch)
        self.interval = interval
        self.retry_interval = retry_interval
        self._changed: set[str] = set()
        """Stems whose files changed since they were last shipped (or failed to ship)."""
        self._known: set[str] = set()
        self._parents: set[str] = set()
        """In a forked child: the writers its parent ships (not this process)."""
        self._marks = threading.Lock()
        """Held while a stem is marked changed and while the marks are taken."""
        self._lock = threading.Lock()
        """Held while shipping (the thread, a flush) and while ``_changed`` is swapped."""
        self._scheduled = False
        self._last = 0.0
        self._failing: str | None = None
        """Why the store failed last (``None`` while it works)."""
        self._closed = False
        self._leased: set[str] = set()
        """Sessions whose ``main`` files are shipped under a lease this process holds."""
        self._fenced: set[str] = set()
        """Sessions another holder has: not shipped from here."""
        self.worker = Worker(self._consume, name="agenttrace-shipper")
        store_leases.watch(self, self._url)
        if hasattr(os, "register_at_fork"):
            # A forked child ships its own writer's files, never its parent's (which the
            # parent ships): it forgets the writers it was told of and what was shipped.
            os.register_at_fork(after_in_child=functools.partial(_forget, weakref.ref(self)))

    def forget(self) -> None:
        """In a forked child: no writer known, nothing shipped, and the parent's writers never
        shipped from here (the child's session-file sink may still write a parent's file it
        inherited: the parent ships its own)."""
        self._parents |= self._known
        self._changed = set()
        self._known = set()
        self._marks = threading.Lock()
        self._lock = threading.Lock()
        self._scheduled = False
        self._leased = set()  # the parent's leases, not this process's
        self._fenced = set()
        self.shipper = Shipper(self.store, self.shipper.sessions_dir, self.shipper.epoch)

    def set_epoch(
        self, session_id: str, epoch: int, from_seq: Mapping[str, int] | None = None
    ) -> None:
        """Ship ``session_id``'s files under lease ``epoch`` from now on
        (:meth:`Shipper.set_epoch`); its files are shipped again soon."""
        with self._lock:
            self.shipper.set_epoch(session_id, epoch, from_seq)
        for stem in [stem for stem in self._known if writer_of(stem)[0] == session_id]:
            self.written(stem)

    def lease_taken(
        self, identity: str, session_id: str, epoch: int, from_seq: Mapping[str, int]
    ) -> None:
        """This process took ``session_id``'s lease in the store (``resume``): its files are
        shipped under it."""
        if identity != self._identity:
            return
        self._fenced.discard(session_id)
        self._leased.add(session_id)
        self.set_epoch(session_id, epoch, from_seq)

    def lease_lost(self, identity: str, session_id: str) -> None:
        """Another host took ``session_id`` over (the renewer warned): not shipped any more."""
        if identity == self._identity:
            self._leased.discard(session_id)
            self._fenced.add(session_id)

    @property
    def writers(self) -> frozenset[str]:
        """The stems of the writers' files it ships (those it was told of)."""
        return frozenset(self._known)

    def consume(self, records: Sequence[Record]) -> None:
        for record in records:
            session = record.session  # type: ignore[union-attr]
            # One written where the program named (Session.directory) is not shipped: the
            # shipper ships the files of the sessions directory.
            if session is not None and session.directory is None:
                self.written(session.segment_stem)

    def written(self, stem: str) -> None:
        """The files of ``stem`` changed: ship them soon (at most once per interval)."""
        if stem in self._parents:
            return
        if stem not in self._changed:
            with self._marks:
                self._changed.add(stem)
                self._known.add(stem)
        if self._scheduled or self._closed:
            return
        self._scheduled = True
        wait = self._last + (self.retry_interval if self._failing else self.interval)
        self.worker.schedule(max(0.0, wait - time.monotonic()), _SHIP)

    def _consume(self, item: object) -> None:
        self._scheduled = False
        self.ship()
        if self._changed and not self._closed:  # failed, or changed meanwhile: again later
            self.written(next(iter(self._changed)))

    def ship(self, everything: bool = False) -> bool:
        """Ship the files that changed (``everything``: of every writer seen); True if the
        store took all of it."""
        with self._lock:
            self._last = time.monotonic()
            with self._marks:
                stems = set(self._known) if everything else self._changed
                self._changed = set()
            if everything:
                stems |= self.dead_writers()
            failed: set[str] = set()
            for stem in sorted(stems):
                if failed:
                    failed.add(stem)  # the store fails: the rest waits for the next try
                    continue
                try:
                    if not self._under_lease(stem):
                        continue  # another host has the session: its files stay here
                    self.shipper.ship(stem)
                except (StoreError, OSError) as error:  # the store's, or reading a file
                    failed.add(stem)
                    self._failed(str(error))
                except Exception:
                    failed.add(stem)
                    raise
            with self._marks:
                self._changed |= failed
            if not failed and self._failing is not None:
                self._failing = None
                logger.warning(
                    "agenttrace: shipping to %s works again: the sessions' files that waited "
                    "are in it",
                    self.store.url,
                )
            return not failed

    def _under_lease(self, stem: str) -> bool:
        """Whether ``stem``'s files are shipped: a joined writer's always (no lease fences
        them); a session's ``main`` files under its lease, taken at their first ship if this
        process records the session (it holds its lease beside the files) and no lease is
        held here yet. ``StoreError`` if the store cannot say."""
        session_id, writer = writer_of(stem)
        if session_id in self._fenced:
            return False
        if writer != MAIN or session_id in self._leased:
            return True
        directory = self.shipper.sessions_dir
        if not held_here(session_id, directory):
            return True  # not recorded here under a lease (done, or written anyway): as it is
        try:
            # The URL as given: the lease opens its own store, which needs its credentials.
            lease = store_leases.take(self._url, session_id, quiet_for=self)
        except LeaseHeld as held:
            self._fenced.add(session_id)
            logger.warning(
                "agenttrace: session %s is not shipped to the store: %s; its files are in %s",
                session_id,
                held,
                directory,
            )
            return False
        self._leased.add(session_id)
        self.shipper.set_epoch(session_id, lease.epoch, lease.from_seq)
        if not held_here(session_id, directory):
            store_leases.let_go(session_id)  # the session was let go meanwhile: so is this
        return True

    def dead_writers(self) -> set[str]:
        """The stems of the joined writers' segments of the sessions this process writes as
        their first writer whose process is gone (its pid, the writer id's tail, is no
        process here): what such a writer wrote and did not ship is shipped by this process.
        A living writer's is never shipped from here (its own shipper ships it); a pid taken
        again by a later process only delays its shipping to a later flush."""
        found: set[str] = set()
        for stem in list(self._known):
            session_id, writer = writer_of(stem)
            if writer != MAIN:
                continue
            try:
                names = os.listdir(self.shipper.sessions_dir / f"{session_id}{SEGMENTS_SUFFIX}")
            except OSError:  # no joined writer (no directory), or not readable: none to ship
                continue
            for name in names:
                joined = name.removesuffix(STREAM_SUFFIX)
                pid = joined.rpartition("-")[2]
                if joined != name and pid.isdigit() and process_alive(int(pid), None) is False:
                    try:
                        found.add(segment_stem(session_id, joined))
                    except SessionFileError:  # not a writer id: no file of ours
                        continue
        return found

    def _failed(self, reason: str) -> None:
        if self._failing is None:
            logger.warning(
                "agenttrace: cannot ship session files to %s (%s): they stay in the sessions "
                "directory and are shipped as soon as the store works again. The agent keeps "
                "running.",
                self.store.url,
                reason,
            )
        self._failing = reason

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Ship every writer's files now, in the caller."""
        return self.ship(everything=True)

    def shutdown(self) -> None:
        """Ship what is left, stop the thread, let go of the store."""
        if self._closed:
            return
        self._closed = True
        store_leases.unwatch(self)
        self.worker.stop()
        if not self.ship(everything=True):
            logger.warning(
                "agenttrace: could not ship session files to %s before exit (%s): they are in "
                "the sessions directory, and a later run that ships the session ships them",
                self.store.url,
                self._failing,
            )
        self.store.close()


def _forget(sink: weakref.ref[ShipperSink]) -> None:
    alive = sink()
    if alive is not None:
        alive.forget()
