"""How a session's files are laid out as segments of a store (docs/session-file.md, "In a
session store").

Each writer of a session (``main``, the session's own files; a joined writer by its id, the
files ``<session_id>.w/<writer_id>.*``) has two series of segments::

    <writer>/events/<epoch:06d>-<seq:010d>    a chunk of its event stream: whole lines
    <writer>/session/<epoch:06d>-<seq:010d>   a copy of its session file (.json.gz)

``seq`` counts up per writer and kind over the session's whole life; ``epoch`` is the lease's
epoch of the process that shipped it. The stream is its chunks in ``seq`` order; the session
file is its copy of the highest ``seq``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agenttrace.formats.session.files import SEGMENTS_SUFFIX, check_session_id, segment_stem
from agenttrace.formats.stores.base import SegmentInfo
from agenttrace.formats.stores.lease import MAIN, segment_name

__all__ = ["EVENTS", "MAIN", "SESSION", "Part", "parse", "segment_name", "stem_of", "writer_of"]

EVENTS = "events"
SESSION = "session"

_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]{0,127})/(events|session)/(\d{6})-(\d{10})$")


@dataclass(frozen=True)
class Part:
    """One segment of a writer's files, as its name says."""

    name: str
    size: int
    writer: str
    kind: str
    """:data:`EVENTS` or :data:`SESSION`."""
    epoch: int
    seq: int


def parse(segment: SegmentInfo) -> Part | None:
    """What a segment's name says, or None for a name that is not a writer's file segment
    (another kind of segment, or a writer name that could not be a file's)."""
    found = _NAME.fullmatch(segment.name)
    if found is None or ".." in found[1]:
        return None
    return Part(segment.name, segment.size, found[1], found[2], int(found[3]), int(found[4]))


def writer_of(stem: str) -> tuple[str, str]:
    """``(session_id, writer)`` of a files' stem (``abc`` or ``abc.w/<writer_id>``)."""
    session_id, slash, writer_id = stem.partition("/")
    if not slash:
        return check_session_id(stem), MAIN
    if not session_id.endswith(SEGMENTS_SUFFIX):
        raise ValueError(f"not a session's stem: {stem!r}")
    return check_session_id(session_id[: -len(SEGMENTS_SUFFIX)]), check_session_id(writer_id)


def stem_of(session_id: str, writer: str) -> str:
    """The files' stem of a writer of ``session_id`` (the inverse of :func:`writer_of`)."""
    return segment_stem(session_id, None if writer == MAIN else writer)
