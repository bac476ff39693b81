"""The fullest picture of a session from its pair of files (the gzipped session file and the
event stream beside it), whichever is ahead, with a damaged session file's runs recovered."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from agenttrace.formats.session.damaged import keep_aside as keep_damaged_aside
from agenttrace.formats.session.damaged import recover_runs
from agenttrace.formats.session.files import (
    SNAPSHOT_SUFFIX,
    STREAM_SUFFIX,
    LoadedFile,
    Progress,
    SessionFileError,
    read_session_file,
    segments_dir,
    sibling_path,
)
from agenttrace.formats.session.journal_union import journal_union
from agenttrace.formats.session.rebuilt import with_rebuilt_runs
from agenttrace.formats.session.segments import merge_segments

logger = logging.getLogger("agenttrace")


def load_fullest(
    path: Path, progress: Progress | None = None, *, keep_damaged: bool = False
) -> LoadedFile:
    """The fullest picture of a session (see :func:`load_pair`)."""
    return load_pair(path, progress, keep_damaged=keep_damaged)[0]


def load_pair(
    path: Path, progress: Progress | None = None, *, keep_damaged: bool = False
) -> tuple[LoadedFile, bool]:
    """The fullest picture of a session, and whether its session file is up to date: there is
    one, readable, and the stream holds no event it lacks (its last run's end is then final).

    A session that processes joined as writers is read whole: each joined writer's segment
    (``<session_id>.w/``) is read as a pair of files too, and merged in
    (``agenttrace.formats.session.segments``); up to date only if every segment is.
    """
    (loaded, up_to_date), segments = load_writers(path, progress, keep_damaged=keep_damaged)
    if not segments:
        return loaded, up_to_date  # one writer: read as it always was
    up_to_date = up_to_date and all(segment_up_to_date for _, segment_up_to_date in segments)
    return merge_segments(loaded, [segment for segment, _ in segments]), up_to_date


def load_writers(
    path: Path, progress: Progress | None = None, *, keep_damaged: bool = False
) -> tuple[tuple[LoadedFile, bool], list[tuple[LoadedFile, bool]]]:
    """The first writer's picture (its pair of files, as :func:`load_pair` reads a session
    without segments) and each joined writer's, unmerged, with whether each one's session file
    is up to date: a resume restores every writer's agents but writes only its own files. A
    segment that cannot be read is left out with a warning (the rest of the session reads)."""
    first = _load_one(path, progress, keep_damaged=keep_damaged)
    directory = segments_dir(path)
    if directory is None or not directory.is_dir():
        return first, []
    segments: list[tuple[LoadedFile, bool]] = []
    for segment in _segment_paths(directory):
        try:
            segments.append(_load_one(segment, keep_damaged=keep_damaged))
        except SessionFileError as exc:
            logger.warning("agenttrace: a writer's segment is left out: %s", exc)
    return first, segments


def _segment_paths(directory: Path) -> list[Path]:
    """One file of each writer's segment in ``directory``, in writer id order: its stream if
    it has one (the pair is read from either)."""
    stems: dict[str, Path] = {}
    try:
        names = sorted(entry.name for entry in directory.iterdir())
    except OSError as exc:
        logger.warning(
            "agenttrace: the writers' segments in %s cannot be listed: %s", directory, exc
        )
        return []
    for name in names:
        for suffix in (STREAM_SUFFIX, SNAPSHOT_SUFFIX):
            if name.endswith(suffix) and not name.startswith("."):
                stem = name[: -len(suffix)]
                if suffix == STREAM_SUFFIX or stem not in stems:
                    stems[stem] = directory / name
    return [stems[stem] for stem in sorted(stems)]


def _load_one(
    path: Path, progress: Progress | None = None, *, keep_damaged: bool = False
) -> tuple[LoadedFile, bool]:
    """The fullest picture of one writer's pair of files, and whether its session file is up
    to date.

    The fullest picture of a session, from its file and the one beside it.

    Both hold a prefix of the same event sequence: the stream is usually ahead (it has the
    events after the last snapshot), the session file is ahead when the stream stopped (a full
    disk) and is the only one with the runs' opTrees. Whichever has more events gives them; the
    step journal is the union of both files' (``agenttrace.formats.session.journal_union``: a
    decision appended to a stream that was behind is kept); runs only the stream has are rebuilt
    from its ``op_accounted`` lines (``agenttrace.formats.session.rebuilt``).

    A damaged session file beside a readable stream (or asked for, with a stream beside it) is
    not an error: the stream gives the events, the runs that can still be read whole from the
    damaged file are kept (``agenttrace.formats.session.damaged``) and, with ``keep_damaged`` (a
    resume, which will write the session file again), the file is renamed aside first; one warning
    says so. A torn last line of the stream is skipped with one warning too.
    """
    name = path.name
    sibling = sibling_path(path)
    damaged: tuple[Path, SessionFileError] | None = None
    try:
        loaded = read_session_file(path, progress)
    except SessionFileError as exc:
        # The session file asked for is damaged: its stream, if there is one, tells the rest.
        if sibling is None or not name.endswith(SNAPSHOT_SUFFIX) or not sibling.exists():
            raise
        try:
            loaded = read_session_file(sibling, progress)
        except SessionFileError as stream_exc:
            # The error starts with the file the user named: the stream was only the fallback.
            raise SessionFileError(
                f"{exc}; the event stream beside it cannot be read either ({stream_exc})"
            ) from None
        damaged, sibling = (path, exc), None
    other: LoadedFile | None = None
    if sibling is not None and sibling.exists():
        try:
            other = read_session_file(sibling)
        except SessionFileError as exc:
            if loaded.kind == "stream" and sibling.name.endswith(SNAPSHOT_SUFFIX):
                damaged = (sibling, exc)
    if damaged is not None:
        loaded = _with_damaged(loaded, *damaged, keep_aside=keep_damaged)
    if loaded.torn is not None:
        logger.warning(
            "agenttrace: %s ended in a torn line (%d bytes, a write cut off by a crash); it was "
            "skipped and nothing else is lost",
            loaded.path,
            len(loaded.torn),
        )
    if other is None:
        return with_rebuilt_runs(loaded), loaded.kind == "snapshot" and damaged is None
    stream, snapshot = (loaded, other) if loaded.kind == "stream" else (other, loaded)
    if stream.kind != "stream" or snapshot.kind != "snapshot":
        return with_rebuilt_runs(loaded), False
    return fullest_of(stream, snapshot, path=path)


def fullest_of(
    stream: LoadedFile | None,
    snapshot: LoadedFile | None,
    max_depth: int | None = None,
    *,
    path: Path | None = None,
) -> tuple[LoadedFile, bool]:
    """The fullest picture of a session from its two files as read (either may be missing, not
    both), and whether the session file is up to date (:func:`load_pair`). ``path``: the file
    the picture is named by (the stream's, by default)."""
    if stream is None or snapshot is None:
        only = stream or snapshot
        assert only is not None
        return with_rebuilt_runs(only, max_depth), only.kind == "snapshot"
    up_to_date = len(stream.events) <= len(snapshot.events)
    best = stream if len(stream.events) >= len(snapshot.events) else snapshot
    # The journal: the stream's is usually ahead; the session file's is all there is of it once
    # the stream is lost or cut short (earlier releases' files hold none); either may hold lines
    # the other lacks (a decision appended to a stream that was behind).
    if len(stream.journal) >= len(snapshot.journal):
        journal = journal_union(stream.journal, snapshot.journal)
    else:
        journal = journal_union(snapshot.journal, stream.journal)
    named = stream if path is None or path == stream.path else snapshot
    return with_rebuilt_runs(
        LoadedFile(
            named.path,
            named.kind,
            best.events,
            snapshot.runs,
            snapshot.meta,
            named.session_id or stream.session_id or snapshot.session_id,
            stream.torn,
            accounted=stream.accounted,
            journal=journal,
        ),
        max_depth,
    ), up_to_date


def _with_damaged(
    stream: LoadedFile, damaged: Path, error: SessionFileError, *, keep_aside: bool
) -> LoadedFile:
    """``stream`` with the runs recovered from the ``damaged`` session file beside it (which is
    renamed aside first with ``keep_aside``); one warning says what happened."""
    runs = recover_runs(damaged)
    kept = ""
    if keep_aside:
        try:
            kept = f"; it is kept as {keep_damaged_aside(damaged)}"
        except OSError as exc:
            raise SessionFileError(
                f"{damaged}: damaged ({error}), and it cannot be kept aside before the session "
                f"is written again: {exc.strerror or exc}"
            ) from None
    logger.warning(
        "agenttrace: the session file %s cannot be read (%s): %d %s recovered from it, the rest "
        "comes from the event stream%s",
        damaged,
        str(error).removeprefix(f"{damaged}: "),
        len(runs),
        "run was" if len(runs) == 1 else "runs were",
        kept,
    )
    return dataclasses.replace(stream, runs=runs, path=stream.path)
