"""The lease of a session in a store shared by hosts: one holder at a time, with an expiry the
holder renews, taken over only once it has expired (or by force), and fencing, so the late
writes of a holder that lost it are not part of the session.

It works on any :class:`~agenttrace.formats.stores.base.SessionStore` through the protocol
alone: the lease lives in the session's **manifest**, which changes only by compare-and-swap.

The manifest (JSON; docs/session-file.md, "The manifest of a session in a store")::

    {"format": "agenttrace.store.manifest", "version": 1,
     "lease": {"holder": "host:pid", "token": "...", "epoch": 3,
               "expires_at": 1767225600.0, "renewed_at": 1767225570.0} | null,
     "epochs": [{"epoch": 3, "token": "...", "holder": "host:pid", "taken_at": ...,
                 "from_seq": {"main/events": 12, "main/session": 4}}, ...]}

Keys this version does not know are kept as they are (a later writer's), at the top level and
in the entries of ``epochs``; a manifest that is not one is a one-line
:class:`~agenttrace.formats.stores.base.StoreError`.

**Segments and fencing.** A store session's segments are named
``<writer>/<kind>/<epoch:06d>-<seq:010d>`` (:func:`segment_name`): ``kind`` is ``events`` or
``session``; writer ``main`` is the lease holder's, other writers are joined processes that
hold no lease. The holder of epoch ``e`` writes each of its two series in order, one segment
after the other (an append returns before the next begins), from ``from_seq`` of its epoch
(:attr:`StoreLease.from_seq`) up. Epoch 0 is the time before any lease was taken.

:func:`take` ends the epoch before it, ``p``, by recording in the new epoch's ``from_seq``, for
each series of ``main``, one past the highest seq of ``p``'s segments the store holds (at least
``p``'s own ``from_seq``). :func:`accepted` keeps a ``main`` segment of epoch ``e`` only if
``e`` was taken (the manifest names it; epoch 0 always was) and its seq is below the
``from_seq`` of the epoch after ``e``. Why that holds whatever the interleaving:

1. ``take`` reads the manifest (version ``v``, last epoch ``p``), *then* lists the segments,
   *then* swaps in the new epoch only if the manifest is still ``v``. If the swap wins, the
   manifest was ``v`` all along, so ``p`` was the last epoch for the whole listing: no epoch
   came between that the listing would have missed.
2. ``p``'s holder writes each series in order, so when the listing is made the segments of
   ``p`` it has written form a run of seqs, plus at most one append under way. Every segment of
   ``p`` not in the listing (the one under way, or any later one) has a seq above every one in
   it, so at or above the new ``from_seq``: refused. Every segment the listing saw is below it:
   kept. Exactly what the new holder saw when it took the session is ``p``'s part of it.
3. Listing after the swap instead (and recording ``from_seq`` in a second swap) would let a
   late write of ``p`` land between the two and be counted in; listing before reading the
   manifest could miss an epoch taken in between. The order above has neither gap.
4. Only the last epoch's segments set the bound: a refused late write of an older epoch (a
   high seq) must not raise it, or the window it opened would let ``p``'s own late writes in.

So a stale holder's writes after a takeover are never part of the session, even those it makes
before it learns (its :meth:`StoreLease.renew` raises :class:`LeaseLost`) that it must stop.

The clock is a parameter (``now``), so tests never sleep.
"""

from __future__ import annotations

import itertools
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import Meta, Struct, field

from agenttrace.formats.session.lease import LeaseError
from agenttrace.formats.session.lease import LeaseHeld as _LeaseHeld
from agenttrace.formats.stores.base import (
    Manifest,
    ManifestConflict,
    SegmentInfo,
    SessionStore,
    StoreError,
)
from agenttrace.model.constrained import whole

__all__ = [
    "FORMAT",
    "KINDS",
    "MAIN",
    "VERSION",
    "LeaseHeld",
    "LeaseLost",
    "SegmentName",
    "StoreLease",
    "accepted",
    "parse_segment_name",
    "segment_name",
    "take",
]

logger = logging.getLogger("agenttrace")

FORMAT: Final = "agenttrace.store.manifest"
VERSION = 1
MAIN = "main"
"""The writer whose segments the lease holder writes (and the only one the lease fences)."""
KINDS = ("events", "session")
"""The kinds of segment a writer writes: its event stream and its session snapshots."""

MAX_TTL = 366 * 24 * 3600
"""The longest a lease is taken for at once (a year): it is renewed long before that."""
MAX_EPOCH = 999_999
MAX_SEQ = 9_999_999_999
_LATEST = 253_402_300_799.0  # 9999-12-31T23:59:59Z: a time every message can print
_TRIES = 16
"""How often :func:`take` and :meth:`StoreLease.renew` read again after losing a swap to a
change that left the lease as it was (another key of the manifest)."""

_NAME_PART = "[A-Za-z0-9][A-Za-z0-9_.-]{0,127}"
_SEGMENT = re.compile(
    rf"(?P<writer>{_NAME_PART})/(?P<kind>events|session)/(?P<epoch>[0-9]{{6}})-(?P<seq>[0-9]{{10}})"
)

# --- the manifest's format ----------------------------------------------------------------------

_Seconds = Annotated[float, Meta(ge=0, le=_LATEST, description="Seconds since the Unix epoch.")]
_Epoch = Annotated[int, Meta(ge=1, le=MAX_EPOCH)]
_Seq = Annotated[int, Meta(ge=0, le=MAX_SEQ)]
_HOLDER = whole("[^\\x00-\\x1f\\x7f]{1,256}")
_Holder = Annotated[str, Meta(pattern=_HOLDER, description="Who holds it: host:pid, or a name.")]
_Token = Annotated[str, Meta(pattern=whole("[A-Za-z0-9_-]{8,128}"))]
_Series = Annotated[str, Meta(pattern=whole(f"{_NAME_PART}/(events|session)"))]


class _LeaseDoc(Struct, kw_only=True):
    """The lease as the manifest holds it (unknown keys allowed: a later writer's)."""

    holder: _Holder
    token: _Token
    epoch: _Epoch
    expires_at: _Seconds
    renewed_at: _Seconds


class _EpochDoc(Struct, kw_only=True):
    """One epoch taken, and where its holder's series begin."""

    epoch: _Epoch
    token: _Token
    holder: _Holder
    taken_at: _Seconds
    from_seq: dict[_Series, _Seq]


class _ManifestDoc(Struct, kw_only=True):
    """The manifest of a session in a store."""

    format: Literal["agenttrace.store.manifest"]
    version: Annotated[int, Meta(ge=1)]
    lease: _LeaseDoc | None = None
    epochs: list[_EpochDoc] = field(default_factory=list)


@dataclass(frozen=True)
class _Read:
    """A manifest as read: the plain document (what a swap writes back, changed), its checked
    form, and the version a swap names (None: there is none yet)."""

    document: dict[str, Any]
    checked: _ManifestDoc
    version: str | None


def _parse(data: bytes, where: str) -> tuple[dict[str, Any], _ManifestDoc]:
    try:
        document = msgspec.json.decode(data)
        checked = msgspec.convert(document, _ManifestDoc)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as error:
        # RecursionError: msgspec's answer to JSON nested past its depth limit
        reason = " ".join(str(error).split())
        raise StoreError(f"{where} is damaged: {reason}") from None
    if checked.version != VERSION:
        raise StoreError(
            f"{where} is version {checked.version}; this agenttrace reads version {VERSION}"
        )
    epochs = [entry.epoch for entry in checked.epochs]
    if any(later <= earlier for earlier, later in itertools.pairwise(epochs)):
        raise StoreError(f"{where} is damaged: its epochs are not in increasing order")
    lease = checked.lease
    if lease is not None and not any(
        (entry.epoch, entry.token) == (lease.epoch, lease.token) for entry in checked.epochs
    ):
        raise StoreError(f"{where} is damaged: its lease names epoch {lease.epoch}, never taken")
    return document, checked


def _read(store: SessionStore, session_id: str) -> _Read:
    found = store.manifest(session_id)
    if found is None:
        fresh = _ManifestDoc(format=FORMAT, version=VERSION)
        return _Read(
            {"format": FORMAT, "version": VERSION, "lease": None, "epochs": []}, fresh, None
        )
    document, checked = _parse(found.data, f"{store.url}: the manifest of {session_id}")
    return _Read(document, checked, found.version)


def _encode(document: dict[str, Any]) -> bytes:
    return msgspec.json.encode(document)


# --- segment names ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SegmentName:
    """A segment name taken apart: ``<writer>/<kind>/<epoch:06d>-<seq:010d>``."""

    writer: str
    kind: str
    epoch: int
    seq: int

    @property
    def series(self) -> str:
        """``<writer>/<kind>``: the key of ``from_seq``."""
        return f"{self.writer}/{self.kind}"


def segment_name(writer: str, kind: str, epoch: int, seq: int) -> str:
    """The name of a writer's segment: ``<writer>/<kind>/<epoch:06d>-<seq:010d>``."""
    name = f"{writer}/{kind}/{epoch:06d}-{seq:010d}"
    if parse_segment_name(name) is None:
        raise ValueError(f"not a segment of a store session: {name!r}")
    return name


def parse_segment_name(name: str) -> SegmentName | None:
    """``name`` taken apart, or None if it is not a store session's segment name."""
    match = _SEGMENT.fullmatch(name)
    if match is None or ".." in name:  # a name no store takes (check_segment_name)
        return None
    return SegmentName(match["writer"], match["kind"], int(match["epoch"]), int(match["seq"]))


def _fence(segments: list[SegmentInfo], epoch: int, start: Mapping[str, int]) -> dict[str, int]:
    """For each series of ``main``: one past the highest seq of ``epoch``'s segments, and never
    below where that epoch began (``start``)."""
    bound = {f"{MAIN}/{kind}": start.get(f"{MAIN}/{kind}", 0) for kind in KINDS}
    for segment in segments:
        parsed = parse_segment_name(segment.name)
        if parsed is not None and parsed.writer == MAIN and parsed.epoch == epoch:
            bound[parsed.series] = max(bound[parsed.series], parsed.seq + 1)
    return bound


def accepted(segments: list[SegmentInfo], manifest: Manifest | None) -> list[SegmentInfo]:
    """The segments that are part of the session, in the order given: another writer's, and a
    ``main`` segment of an epoch that was taken (one the manifest names; epoch 0, the time
    before any lease, always) whose seq is below the ``from_seq`` of the epoch taken after it.
    A name that is not a store session's segment name is dropped, with one warning for all.
    A damaged manifest is a :class:`StoreError`."""
    ends: dict[int, Mapping[str, int]] = {}
    if manifest is not None:
        _, checked = _parse(manifest.data, "the session's manifest")
        previous = 0
        for entry in checked.epochs:
            ends[previous] = entry.from_seq
            previous = entry.epoch
        ends[previous] = {}
    else:
        ends[0] = {}
    kept: list[SegmentInfo] = []
    dropped: list[str] = []
    for segment in segments:
        parsed = parse_segment_name(segment.name)
        if parsed is None:
            dropped.append(segment.name)
        elif parsed.writer != MAIN:
            kept.append(segment)
        elif parsed.epoch in ends:
            end = ends[parsed.epoch].get(parsed.series)
            if end is None or parsed.seq < end:
                kept.append(segment)
    if dropped:
        logger.warning(
            "agenttrace: %d segment(s) not named <writer>/<kind>/<epoch>-<seq> left out: %s",
            len(dropped),
            ", ".join(repr(name) for name in dropped[:3]) + (", ..." if len(dropped) > 3 else ""),
        )
    return kept


# --- taking, renewing, letting go ---------------------------------------------------------------


class LeaseHeld(_LeaseHeld):
    """Another holder has the session's lease in the store, and it has not expired: the message
    (one line) names it and when it expires, and how to take it over from the API
    (``force=True``; :meth:`for_command`: the command line's ``--force``). ``held_by``,
    ``epoch``, ``expires_at``: the same."""

    def __init__(self, message: str, held_by: str, epoch: int, expires_at: float) -> None:
        super().__init__(f"{message}; {_TAKE_OVER.format(force='force=True')}")
        self.situation = message
        self.held_by = held_by
        self.epoch = epoch
        self.expires_at = expires_at

    def for_command(self) -> str:
        """The message as a command says it: taken over with its ``--force``."""
        return f"{self.situation}; {_TAKE_OVER.format(force='--force')}"


_TAKE_OVER = "take it over after that, or with {force}"


class LeaseLost(LeaseError):
    """This lease is no longer the session's (it expired and was taken, or was forced, or was
    released): its holder must stop writing the session."""


def _when(seconds: float) -> str:
    return (
        datetime.fromtimestamp(seconds, timezone.utc)
        .isoformat(timespec="seconds")
        .replace("+00:00", "Z")
    )


def _held(store: SessionStore, session_id: str, lease: _LeaseDoc, at: float) -> LeaseHeld:
    left = max(0, round(lease.expires_at - at))
    return LeaseHeld(
        f"{store.url}: session {session_id} is held by {lease.holder} (epoch {lease.epoch}) "
        f"until {_when(lease.expires_at)} (in {left}s)",
        lease.holder,
        lease.epoch,
        lease.expires_at,
    )


def take(
    store: SessionStore,
    session_id: str,
    holder: str,
    ttl: float,
    *,
    force: bool = False,
    now: Callable[[], float] = time.time,
) -> StoreLease:
    """Take the lease of ``session_id`` in ``store`` for ``ttl`` seconds, as ``holder``
    (``host:pid`` or a name). If no one holds it, or its holder's expiry has passed, or with
    ``force``, it is taken with the next epoch (the module's docstring says what that fences).
    Otherwise, or when another taker wins the race for it, :class:`LeaseHeld` names the holder
    and its expiry; a forced taker that loses the race to another taker does not force it
    again: it is refused too."""
    if not 0 < ttl <= MAX_TTL:
        raise ValueError(f"a lease's ttl is up to {MAX_TTL} seconds, not {ttl!r}")
    if not re.fullmatch(_HOLDER, holder):
        raise ValueError(f"a lease's holder is 1 to 256 printable characters, not {holder!r}")
    for _ in range(_TRIES):
        read = _read(store, session_id)
        lease = read.checked.lease
        at = now()
        if lease is not None and at < lease.expires_at and not force:
            raise _held(store, session_id, lease, at)
        last = read.checked.epochs[-1] if read.checked.epochs else None
        previous = last.epoch if last is not None else 0
        if previous >= MAX_EPOCH:
            raise StoreError(f"{store.url}: session {session_id} has used every epoch")
        # Listed after the manifest was read and before the swap: see the module's docstring.
        from_seq = _fence(
            store.segments(session_id), previous, last.from_seq if last is not None else {}
        )
        epoch, token = previous + 1, secrets.token_hex(16)
        at = now()
        document = dict(read.document)
        document["lease"] = {
            "holder": holder,
            "token": token,
            "epoch": epoch,
            "expires_at": at + ttl,
            "renewed_at": at,
        }
        document["epochs"] = [
            *read.document.get("epochs", []),
            {
                "epoch": epoch,
                "token": token,
                "holder": holder,
                "taken_at": at,
                "from_seq": from_seq,
            },
        ]
        try:
            version = store.swap_manifest(session_id, _encode(document), read.version)
        except ManifestConflict:
            again = _read(store, session_id).checked.lease
            seen = lease.token if lease is not None else None
            at = now()
            # Another taker won (a lease not the one we read), or the one we read was renewed.
            if again is not None and at < again.expires_at and (again.token != seen or not force):
                raise _held(store, session_id, again, at) from None
            continue
        return StoreLease(
            store, session_id, holder, ttl, epoch, token, at + ttl, from_seq, version, now
        )
    raise StoreError(
        f"{store.url}: the manifest of {session_id} kept changing; could not take its lease"
    )


class StoreLease:
    """A lease taken by :func:`take`: :meth:`renew` it before it expires, :meth:`release` it
    when done. Its holder writes ``main`` segments of :attr:`epoch`, each series from
    :attr:`from_seq` up, and stops writing as soon as :class:`LeaseLost` is raised."""

    def __init__(
        self,
        store: SessionStore,
        session_id: str,
        holder: str,
        ttl: float,
        epoch: int,
        token: str,
        expires_at: float,
        from_seq: Mapping[str, int],
        version: str,
        now: Callable[[], float],
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.holder = holder
        self.ttl = ttl
        self.epoch = epoch
        """The epoch this lease was taken as: the one its holder's segment names carry."""
        self.token = token
        """Random, this lease's alone: what tells it from the next holder's."""
        self.expires_at = expires_at
        self.from_seq: Mapping[str, int] = dict(from_seq)
        """Where each series of ``main`` begins in this epoch (``"main/events"``: seq)."""
        self._version = version
        self._now = now
        self._released = False
        self._lock = threading.Lock()  # renew and release one at a time (the renewer's thread)
        self._renewer: _Renewer | None = None

    @property
    def held(self) -> bool:
        """Whether it has not been released nor found lost."""
        return not self._released

    def renew(self) -> None:
        """Push the expiry ``ttl`` seconds past now (compare-and-swap). :class:`LeaseLost` if the
        manifest's lease is no longer this one: the holder must stop writing. A lease past its
        expiry that no one took is still this one, and renews."""
        with self._lock:
            if self._released:
                raise LeaseLost(f"{self._where()}: released")
            for _ in range(_TRIES):
                read = _read(self.store, self.session_id)
                lease = read.checked.lease
                if lease is None or (lease.token, lease.epoch) != (self.token, self.epoch):
                    self._released = True
                    raise LeaseLost(
                        f"{self._where()}: lost"
                        + (
                            f" to {lease.holder} (epoch {lease.epoch})"
                            if lease is not None
                            else " (released elsewhere)"
                        )
                        + "; stop writing the session"
                    )
                at = self._now()
                document = dict(read.document)
                document["lease"] = {
                    **read.document["lease"],
                    "expires_at": at + self.ttl,
                    "renewed_at": at,
                }
                try:
                    self._version = self.store.swap_manifest(
                        self.session_id, _encode(document), read.version
                    )
                except ManifestConflict:
                    continue  # read again: taken over, or another key changed
                self.expires_at = at + self.ttl
                return
            raise StoreError(f"{self._where()}: the manifest kept changing; could not renew")

    def release(self) -> None:
        """Let the lease go: the manifest's lease is cleared (its epochs stay, for fencing) if it
        is still this one; stops the renewer. Calling it again does nothing."""
        renewer, self._renewer = self._renewer, None
        if renewer is not None:
            renewer.stop()
        with self._lock:
            if self._released:
                return
            self._released = True
            for _ in range(_TRIES):
                read = _read(self.store, self.session_id)
                lease = read.checked.lease
                if lease is None or (lease.token, lease.epoch) != (self.token, self.epoch):
                    return  # taken over meanwhile: nothing of ours to clear
                document = dict(read.document)
                document["lease"] = None
                try:
                    self.store.swap_manifest(self.session_id, _encode(document), read.version)
                except ManifestConflict:
                    continue
                return
            raise StoreError(f"{self._where()}: the manifest kept changing; could not release")

    def start_renewing(self, on_lost: Callable[[LeaseLost], None] | None = None) -> None:
        """Renew from a daemon thread every ``ttl / 3`` seconds until :meth:`release`. When the
        lease is lost the thread stops, logs one warning and calls ``on_lost`` (which should
        make the holder stop writing); a store it cannot reach is logged and tried again."""
        if self._renewer is None and not self._released:
            self._renewer = _Renewer(self, on_lost)

    @property
    def renewing(self) -> bool:
        """Whether the renewer's thread is running."""
        return self._renewer is not None and self._renewer.alive

    def _where(self) -> str:
        return f"{self.store.url}: the lease of {self.session_id} (epoch {self.epoch})"

    def __enter__(self) -> StoreLease:
        return self

    def __exit__(self, *_: object) -> None:
        self.release()


class _Renewer:
    """The thread that renews a lease at a third of its ttl."""

    def __init__(self, lease: StoreLease, on_lost: Callable[[LeaseLost], None] | None) -> None:
        self._lease = lease
        self._on_lost = on_lost
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"agenttrace-lease-{lease.session_id}", daemon=True
        )
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        failing = False
        while not self._stopped.wait(self._lease.ttl / 3):
            try:
                self._lease.renew()
            except LeaseLost as lost:
                if not self._stopped.is_set():  # not a release racing the tick
                    logger.warning("agenttrace: %s", lost)
                    if self._on_lost is not None:
                        try:
                            self._on_lost(lost)
                        except Exception:  # the holder's callback: say so, the thread ends
                            logger.exception("agenttrace: the lease's on_lost callback failed")
                return
            except StoreError as error:
                if not failing:  # once per outage, not once per tick
                    logger.warning("agenttrace: cannot renew the session's lease: %s", error)
                failing = True
            else:
                failing = False
