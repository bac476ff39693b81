"""Copying a writer's files from the sessions directory to a store: the shipper.

The recorder writes its files locally as always (the working copy: crash safety and every
reader stay as they are); a :class:`Shipper` copies what is new to the store
(:mod:`~agenttrace.formats.stores.layout` names the segments): the stream's whole lines past
what was shipped, as one new ``events`` segment (several past :data:`CHUNK_BYTES`), and the
session file whenever it changed, as a new ``session`` segment.

What was shipped is counted here (the stream's offset, each series' next ``seq``), so no byte
is shipped twice. A shipper that starts on a session the store holds already (a resumed
session, a command that appends a decision) learns them from the store: the offset is the sum
of the writer's chunk sizes, the next ``seq`` one past the highest. It checks that the local
stream continues what the store holds (the bytes of the last chunk are the local ones at that
place) and ships no event of a stream that does not (one warning).

A store that fails raises :class:`~agenttrace.formats.stores.base.StoreError` out of
:meth:`Shipper.ship`, having moved on by what it did ship: the next call ships the rest. A
chunk whose store answer was lost and that is found there on the next try (``SegmentExists``
with the same bytes, or a prefix of them) counts as shipped.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from agenttrace.formats.safe_open import open_regular
from agenttrace.formats.session.files import SNAPSHOT_SUFFIX, STREAM_SUFFIX, stem_path
from agenttrace.formats.stores.base import SegmentExists, SessionStore, StoreError
from agenttrace.formats.stores.layout import EVENTS, SESSION, parse, segment_name, writer_of
from agenttrace.formats.stores.lease import accepted

logger = logging.getLogger("agenttrace")

CHUNK_BYTES = 8 << 20
"""The most bytes of whole lines one ``events`` segment holds (a longer line is one segment)."""


@dataclass
class _Shipped:
    """What the store holds of one writer's files, as far as this shipper knows."""

    offset: int
    """Bytes of the stream in the store (its chunks, in order)."""
    events_seq: int
    session_seq: int
    last_chunk: str | None
    """The name of the store's last chunk, until the local stream is checked against it."""
    last_session: tuple[str, int] | None
    """The store's latest session copy (name, size), until compared with the local file."""
    session_stat: tuple[int, int, int] | None = None
    """The local session file (inode, size, mtime) that was shipped last."""
    diverged: bool = False
    """The local stream does not continue the store's: its events are not shipped."""


class Shipper:
    """Ships the files of the writers it is given (by stem) from ``sessions_dir`` to ``store``,
    under lease ``epoch`` (a session's own: :meth:`set_epoch`). Not thread-safe: one caller at
    a time."""

    def __init__(self, store: SessionStore, sessions_dir: Path, epoch: int = 0) -> None:
        self.store = store
        self.sessions_dir = sessions_dir
        self.epoch = epoch
        """The epoch of the sessions :meth:`set_epoch` was not told of."""
        self._epochs: dict[str, int] = {}
        self._from: dict[str, dict[str, int]] = {}
        self._shipped: dict[str, _Shipped] = {}

    def set_epoch(
        self, session_id: str, epoch: int, from_seq: Mapping[str, int] | None = None
    ) -> None:
        """Ship ``session_id``'s files under ``epoch`` from now on (its lease was taken): what
        the store holds of them is learned again at the next :meth:`ship`, as the lease's
        fencing counts it, and each series goes on past every seq the store holds, and from
        the lease's ``from_seq`` (``"main/events"``: seq) at least.

        The two agree: ``from_seq`` is one past the last epoch's highest seq when the lease was
        taken, every seq the store held then is below it or a refused late write's, and seqs
        only grow, so the series goes on where the store's accepted segments end (past a
        refused late write's seq too, which leaves a gap the stream's seq order allows)."""
        self._epochs[session_id] = epoch
        self._from[session_id] = dict(from_seq or {})
        for stem in [stem for stem in self._shipped if writer_of(stem)[0] == session_id]:
            del self._shipped[stem]

    def ship(self, stem: str) -> int:
        """Ship what is new in the files of ``stem`` (a session's id, or
        ``<id>.w/<writer_id>``); the bytes shipped. :class:`StoreError` if the store fails
        (what was shipped before it stays counted)."""
        session_id, writer = writer_of(stem)
        shipped = self._shipped.get(stem)
        if shipped is None:
            shipped = self._shipped[stem] = self._learn(session_id, writer)
        sent = self._ship_events(session_id, writer, stem, shipped)
        return sent + self._ship_session(session_id, writer, stem, shipped)

    def _learn(self, session_id: str, writer: str) -> _Shipped:
        """What the store holds of a writer already (nothing, for a new session)."""
        segments = self.store.segments(session_id)
        counted = {s.name for s in accepted(segments, self.store.manifest(session_id))}
        offset, events_seq, session_seq = 0, -1, -1
        last_chunk: tuple[int, str] | None = None
        last_session: tuple[int, str, int] | None = None
        for segment in segments:
            part = parse(segment)
            if part is None or part.writer != writer:
                continue
            # The next seq is past every segment's, counted or not (a name is never reused);
            # what the store holds is what its readers count.
            if part.kind == EVENTS:
                events_seq = max(events_seq, part.seq)
                if part.name in counted:
                    offset += part.size
                    if last_chunk is None or part.seq > last_chunk[0]:
                        last_chunk = (part.seq, part.name)
            else:
                session_seq = max(session_seq, part.seq)
                if part.name in counted and (last_session is None or part.seq > last_session[0]):
                    last_session = (part.seq, part.name, part.size)
        start = self._from.get(session_id, {})
        return _Shipped(
            offset,
            max(events_seq + 1, start.get(f"{writer}/{EVENTS}", 0)),
            max(session_seq + 1, start.get(f"{writer}/{SESSION}", 0)),
            None if last_chunk is None else last_chunk[1],
            None if last_session is None else last_session[1:],
        )

    def _ship_events(self, session_id: str, writer: str, stem: str, shipped: _Shipped) -> int:
        path = stem_path(self.sessions_dir, stem, STREAM_SUFFIX)
        if shipped.diverged:
            return 0
        try:
            fd = open_regular(path)
        except FileNotFoundError:
            return 0
        except OSError as error:
            raise StoreError(f"{path}: cannot read: {error.strerror or error}") from None
        sent = 0
        with os.fdopen(fd, "rb") as handle:
            if shipped.last_chunk is not None and not self._continues(session_id, handle, shipped):
                shipped.diverged = True
                logger.warning(
                    "agenttrace: %s does not continue the event stream %s holds of session %s "
                    "(it was written anew here); its events are not shipped, its session file "
                    "is",
                    path,
                    self.store.url,
                    session_id,
                )
                return 0
            while True:
                handle.seek(shipped.offset)
                data = handle.read(CHUNK_BYTES)
                end = data.rfind(b"\n")
                while end < 0 and data:  # one line longer than a chunk: up to its end
                    more = handle.read(CHUNK_BYTES)
                    if not more:
                        break
                    data += more
                    end = data.rfind(b"\n")
                if end < 0:
                    return sent  # nothing whole past the offset (a line being written)
                data = data[: end + 1]
                self._append_chunk(session_id, writer, shipped, data)
                sent += len(data)

    def _continues(self, session_id: str, handle: BinaryIO, shipped: _Shipped) -> bool:
        """Whether the local stream holds the store's last chunk where the store has it."""
        name = shipped.last_chunk
        assert name is not None
        stored = self.store.read(session_id, name, CHUNK_BYTES * 8)
        start = shipped.offset - len(stored)
        if start < 0:
            return False
        handle.seek(start)
        local = handle.read(len(stored))
        shipped.last_chunk = None
        return local == stored

    def _append_chunk(self, session_id: str, writer: str, shipped: _Shipped, data: bytes) -> None:
        """Append ``data`` as the next chunk; one the store has already (its answer was lost)
        counts as shipped, and only what is past it is appended."""
        while data:
            name = segment_name(
                writer, EVENTS, self._epochs.get(session_id, self.epoch), shipped.events_seq
            )
            try:
                self.store.append(session_id, name, data)
            except SegmentExists:
                there = self.store.read(session_id, name, max(len(data), CHUNK_BYTES * 8))
                if not there or not data.startswith(there):
                    raise StoreError(
                        f"{self.store.url}: session {session_id} has another writer's chunk "
                        f"{name}: not shipping over it"
                    ) from None
                shipped.offset += len(there)
                shipped.events_seq += 1
                data = data[len(there) :]
                continue
            shipped.offset += len(data)
            shipped.events_seq += 1
            return

    def _ship_session(self, session_id: str, writer: str, stem: str, shipped: _Shipped) -> int:
        path = stem_path(self.sessions_dir, stem, SNAPSHOT_SUFFIX)
        try:
            fd = open_regular(path)
        except FileNotFoundError:
            return 0
        except OSError as error:
            raise StoreError(f"{path}: cannot read: {error.strerror or error}") from None
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            stat = (info.st_ino, info.st_size, info.st_mtime_ns)
            if stat == shipped.session_stat:
                return 0
            data = handle.read()  # replaced whole by each write: this is one whole version
        latest, shipped.last_session = shipped.last_session, None
        same_size = latest is not None and latest[1] == len(data)
        if same_size and self.store.read(session_id, latest[0], len(data)) == data:  # type: ignore[index]
            shipped.session_stat = stat  # the store's latest copy is this file
            return 0
        while True:
            name = segment_name(
                writer, SESSION, self._epochs.get(session_id, self.epoch), shipped.session_seq
            )
            try:
                self.store.append(session_id, name, data)
            except SegmentExists:
                shipped.session_seq += 1  # a copy whose answer was lost: the next is newer
                continue
            shipped.session_seq += 1
            shipped.session_stat = stat
            return len(data)
