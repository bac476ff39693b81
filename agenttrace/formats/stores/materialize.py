"""Reading a session from a store: its files rebuilt in a local directory, as the sessions
directory would hold them, so every reader (``load_pair``, the views, ``resume``) works on them
unchanged.

:func:`materialize` writes, for each writer of the session (:mod:`.layout`), its stream (its
``events`` chunks in ``seq`` order, concatenated) and its session file (its ``session`` copy of
the highest ``seq``): ``<id>.events.jsonl`` and ``<id>.json.gz`` for ``main``,
``<id>.w/<writer>.*`` for a joined writer. The store's content is not trusted: names are
checked (a name that is not a writer's file segment is left alone), sizes bounded by the read
limits before anything is read, and a damaged segment is a one-line :class:`StoreError`.

:func:`~agenttrace.formats.stores.lease.accepted` is the one place that decides which
segments count (the lease's fencing: what a holder wrote after it lost the lease is left out).
"""

from __future__ import annotations

import calendar
import hashlib
import json
import os
import time
from pathlib import Path

from agenttrace._internal.config import ReadLimits
from agenttrace.formats.session.files import (
    SNAPSHOT_SUFFIX,
    STREAM_SUFFIX,
    stem_path,
    write_atomically,
)
from agenttrace.formats.session.spool import atomic_file
from agenttrace.formats.stores.base import SessionStore, StoreError
from agenttrace.formats.stores.layout import EVENTS, MAIN, Part, parse, stem_of
from agenttrace.formats.stores.lease import accepted

_GZIP_MAGIC = b"\x1f\x8b"


def materialize(
    store: SessionStore,
    session_id: str,
    directory: Path,
    limits: ReadLimits | None = None,
    *,
    keep_longer: bool = False,
    state: Path | None = None,
) -> Path:
    """Rebuild the files of ``session_id`` from ``store`` in ``directory``; the path of its
    stream (its session file if it has none). ``keep_longer``: leave a writer's local files
    alone where the local stream is at least as long as the store's (this host wrote past what
    it shipped; its shipper ships the rest). :class:`StoreError` for a session the store does
    not hold, one over the limits, or a damaged segment. ``state``: a file that keeps which
    segments the files were last rebuilt from, so they are not rebuilt while none changed (a
    cache's)."""
    limits = ReadLimits.from_env() if limits is None else limits
    segments = accepted(store.segments(session_id), store.manifest(session_id))
    parts = [part for part in map(parse, segments) if part is not None]
    stream = stem_path(directory, session_id, STREAM_SUFFIX)
    snapshot = stem_path(directory, session_id, SNAPSHOT_SUFFIX)
    built = hashlib.sha256(repr([(p.name, p.size) for p in parts]).encode()).hexdigest()
    unchanged = state is not None and parts and _kept(state) == built
    if unchanged and (stream.exists() or snapshot.exists()):
        return stream if stream.exists() else snapshot
    writers: dict[str, list[Part]] = {}
    for part in parts:
        writers.setdefault(part.writer, []).append(part)
    if MAIN not in writers:
        raise StoreError(f"no session {session_id!r} in {store.url}")
    for writer, own in sorted(writers.items()):
        stem = stem_of(session_id, writer)
        _writer_files(store, session_id, stem, own, directory, limits, keep_longer)
    if state is not None:
        try:
            state.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(state, built.encode())
        except OSError as error:
            raise StoreError(f"{state}: cannot write: {error.strerror or error}") from None
    return stream if stream.exists() else snapshot


def _kept(state: Path) -> str | None:
    try:
        return state.read_text(encoding="ascii", errors="replace")[:64]
    except OSError:
        return None


def _writer_files(
    store: SessionStore,
    session_id: str,
    stem: str,
    parts: list[Part],
    directory: Path,
    limits: ReadLimits,
    keep_longer: bool,
) -> None:
    chunks = sorted((p for p in parts if p.kind == EVENTS), key=lambda p: (p.seq, p.epoch))
    copies = [p for p in parts if p.kind != EVENTS]
    total = sum(chunk.size for chunk in chunks)
    if total > limits.stream_bytes:
        raise StoreError(
            f"{store.url}: the event stream of {stem} is {total} bytes, over the "
            f"{limits.stream_bytes}-byte limit (AGENTTRACE_MAX_STREAM_BYTES)"
        )
    stream_file = stem_path(directory, stem, STREAM_SUFFIX)
    if keep_longer:
        try:
            if stream_file.stat().st_size >= total:
                return
        except FileNotFoundError:
            pass
        except OSError as error:
            raise StoreError(f"{stream_file}: cannot read: {error.strerror or error}") from None
    session_file = b""
    if copies:
        latest = max(copies, key=lambda p: (p.seq, p.epoch))
        session_file = store.read(session_id, latest.name, limits.compressed_bytes)
        if not session_file.startswith(_GZIP_MAGIC):
            raise StoreError(
                f"{store.url}: session {session_id}: segment {latest.name} is damaged "
                "(not a gzipped session file)"
            )
    last = b""
    try:
        if chunks:
            # Chunk by chunk into the file that replaces the stream once whole: one chunk in
            # memory at a time, and a damaged one leaves the file as it was.
            with atomic_file(stream_file) as handle:
                written = 0
                for chunk in chunks:
                    last = store.read(session_id, chunk.name, limits.stream_bytes - written)
                    if not last.endswith(b"\n"):
                        raise StoreError(
                            f"{store.url}: session {session_id}: segment {chunk.name} is "
                            "damaged (not whole lines)"
                        )
                    handle.write(last)
                    written += len(last)
            _date(stream_file, last)
        if session_file:
            snapshot = stem_path(directory, stem, SNAPSHOT_SUFFIX)
            write_atomically(snapshot, session_file)
            _date(snapshot, last)
    except OSError as error:
        raise StoreError(f"{directory}: cannot write: {error.strerror or error}") from None


def _date(path: Path, chunk: bytes) -> None:
    """Give a rebuilt file the time of the stream's last line (``ts``, in its last ``chunk``),
    not the time it was rebuilt: what ``list`` orders by and tells a running session from an
    old one by."""
    start = chunk.rfind(b"\n", 0, len(chunk) - 1) + 1
    try:
        stamp = json.loads(chunk[start:]).get("ts")
        parsed = time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")
    except (ValueError, TypeError, AttributeError):
        return
    seconds = calendar.timegm(parsed)
    os.utime(path, (seconds, seconds))


def cache_directory(url: str) -> Path:
    """Where the commands rebuild the sessions of the store at ``url``: a directory of the
    user's cache (``$XDG_CACHE_HOME`` or ``~/.cache``) named by a hash of the URL."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    digest = hashlib.sha256(url.encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return Path(base) / "agenttrace" / "stores" / digest
