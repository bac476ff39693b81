"""Session files on disk: the event stream (``<id>.events.jsonl``) and the gzipped session file
(``<id>.json.gz``), their names, atomic writes, and reading either back.

Reading checks what it is given and says clearly what is wrong with a file that is not a session
of this format and version: the decoded JSON is validated against the format's structs
(``agenttrace.formats.session.schema``, the published schema's source) before anything else sees it,
and every problem is a :class:`SessionFileError` with a one-line message saying where and what. A
torn last line in a stream (a process killed mid-write) is not an error: it is reported in
:attr:`LoadedFile.torn` and skipped, and nothing else is lost. So a session's stream
(``<id>.events.jsonl``) killed before its first line was whole (empty, or only that torn line)
reads as a session that recorded nothing: no events, no runs.

Files are untrusted: a reader takes regular files only (never a FIFO or a device) and stops at
the limits of :class:`~agenttrace._internal.config.ReadLimits` (a gzip bomb is cut off at the
decompressed cap, never allocated whole). Ids become file names only once checked, and a file
is written only inside its directory (``agenttrace.formats.safe_open``).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import gzip
import io
import json
import os
import re
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from agenttrace._internal.config import (
    MIB,
    RATIO_FREE_BYTES,
    READ_LIMIT_VARIABLES,
    ReadLimits,
    Settings,
)
from agenttrace.formats.safe_open import UnsafeFile, check_writable, open_inside, open_regular
from agenttrace.formats.session import schema
from agenttrace.formats.session.schema import FORMAT, OP_ACCOUNTED, VERSION
from agenttrace.formats.session.spool import Piece, atomic_file, gzip_member
from agenttrace.model.events import infer_causes, normalize
from agenttrace.model.journal_lines import STEP, STEP_DECISION

STREAM_SUFFIX = ".events.jsonl"
SNAPSHOT_SUFFIX = ".json.gz"
_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_GZIP_MAGIC = b"\x1f\x8b"
_SEPARATORS = tuple({"/", os.sep, *([os.altsep] if os.altsep else [])})


class SessionFileError(Exception):
    """A session file or id that cannot be read: the message says what is wrong, in one line."""

    def __init__(self, message: str) -> None:
        # A file name or id can hold a newline or a terminal escape: shown escaped.
        super().__init__(_CONTROL.sub(lambda m: repr(m.group())[1:-1], message))


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass
class LoadedFile:
    """What a session file or event stream holds."""

    path: Path
    kind: str
    """``stream`` or ``snapshot``."""
    events: list[dict[str, Any]]
    runs: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    session_id: str | None = None
    torn: str | None = None
    """The torn last line of a stream that was skipped, if there was one."""
    accounted: list[dict[str, Any]] = field(default_factory=list)
    """A stream's ``op_accounted`` lines (docs/events.md), in order: what each op that ended
    cost, the opTree of a run no session file holds is rebuilt from (``record.rebuilt``)."""
    journal: list[dict[str, Any]] = field(default_factory=list)
    """The step-journal lines (docs/journal.md), in order: a stream's, or a session file's
    ``journal`` (none in files of earlier releases)."""

    @property
    def recorded_nothing(self) -> bool:
        """Whether the session recorded nothing: no event, no run, no journal or accounting
        line (the stream of a process killed before its first line was whole)."""
        return not (self.events or self.runs or self.journal or self.accounted)


def stream_path(sessions_dir: Path, session_id: str) -> Path:
    """Where the event stream of ``session_id`` lives (the id checked: :func:`check_session_id`)."""
    return sessions_dir / f"{check_session_id(session_id)}{STREAM_SUFFIX}"


def snapshot_path(sessions_dir: Path, session_id: str) -> Path:
    """Where the gzipped session file of ``session_id`` lives (the id checked)."""
    return sessions_dir / f"{check_session_id(session_id)}{SNAPSHOT_SUFFIX}"


SEGMENTS_SUFFIX = ".w"
"""``<session_id>.w/``: the directory of a session's joined writers' segments, one pair of
files per writer (``<writer_id>.json.gz``, ``<writer_id>.events.jsonl``; docs/session-file.md,
"Several writers")."""


def segment_stem(session_id: str, writer_id: str | None) -> str:
    """The stem a writer's files of ``session_id`` are named by, relative to the sessions
    directory: the id itself for its first writer, ``<session_id>.w/<writer_id>`` for a joined
    one (both checked: :func:`check_session_id`)."""
    check_session_id(session_id)
    if writer_id is None:
        return session_id
    return f"{session_id}{SEGMENTS_SUFFIX}/{check_session_id(writer_id)}"


def stem_path(sessions_dir: Path, stem: str, suffix: str) -> Path:
    """The file ``stem`` + ``suffix`` in ``sessions_dir``, ``stem`` a :func:`segment_stem`
    (each of its parts checked again: it never leads out of the directory)."""
    parts = stem.split("/")
    if len(parts) == 2 and parts[0].endswith(SEGMENTS_SUFFIX):
        session_id = parts[0][: -len(SEGMENTS_SUFFIX)]
        writer_dir = sessions_dir / f"{check_session_id(session_id)}{SEGMENTS_SUFFIX}"
        return writer_dir / f"{check_session_id(parts[1])}{suffix}"
    return sessions_dir / f"{check_session_id(stem)}{suffix}"


def segments_dir(path: Path) -> Path | None:
    """The directory of joined writers' segments beside a session's file (``abc.w`` beside
    ``abc.json.gz`` or ``abc.events.jsonl``); ``None`` for a name that is neither."""
    name = path.name
    for suffix in (SNAPSHOT_SUFFIX, STREAM_SUFFIX):
        if name.endswith(suffix):
            return path.with_name(name[: -len(suffix)] + SEGMENTS_SUFFIX)
    return None


def segments_state(directory: Path) -> tuple[tuple[str, int, int], ...] | None:
    """Each file in a session's segments ``directory`` as (name, size, mtime in ns), by name:
    what a view that keeps what it read compares to know it changed; ``None`` if there is no
    such directory (a session written by one process)."""
    try:
        entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
    except OSError:
        return None
    state = []
    for entry in entries:
        try:
            status = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        state.append((entry.name, status.st_size, status.st_mtime_ns))
    return tuple(state)


def sibling_path(path: Path) -> Path | None:
    """The other file of a session's pair: the event stream of a session file, the session file
    of a stream; ``None`` for a name that is neither."""
    name = path.name
    if name.endswith(SNAPSHOT_SUFFIX):
        return path.with_name(name[: -len(SNAPSHOT_SUFFIX)] + STREAM_SUFFIX)
    if name.endswith(STREAM_SUFFIX):
        return path.with_name(name[: -len(STREAM_SUFFIX)] + SNAPSHOT_SUFFIX)
    return None


def check_session_id(session_id: str) -> str:
    """``session_id`` if it is a plain file name stem; refuses anything that could leave the
    sessions directory (``../x``, ``/etc/x``, separators, NUL, look-alikes of ``/``)."""
    # fullmatch, not match with $: "$" also matches before a final newline.
    if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id):
        raise SessionFileError(f"not a session id: {_shown(session_id)}")
    if ".." in session_id:
        raise SessionFileError(f"not a session id: {_shown(session_id)}")
    return session_id


def check_session_files(sessions_dir: Path, session_id: str) -> None:
    """Refuse (:class:`SessionFileError`) to record ``session_id`` in ``sessions_dir`` when its
    files could not be written there safely: an id that is not a plain name, or a file name
    that is a symlink leading out of the directory or is not a regular file."""
    for path in (stream_path(sessions_dir, session_id), snapshot_path(sessions_dir, session_id)):
        try:
            check_writable(path)
        except UnsafeFile as exc:
            raise SessionFileError(
                f"{path}: {exc.strerror}; not writing the session there"
            ) from None
        except OSError as exc:
            raise SessionFileError(f"{path}: cannot check: {exc.strerror or exc}") from None


def _shown(value: object, limit: int = 80) -> str:
    """``value``'s repr, cut to ``limit`` characters (an id can be any length of anything)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def find_session(reference: str, sessions_dir: Path | None = None) -> Path:
    """The file a CLI argument names: a reference written as a path (with a directory
    separator, ``.`` or ``..``, or a session file's suffix) or naming an existing file is that
    file, relative to the working directory; anything else is a session id in ``sessions_dir``
    (by default the configured one, ``AGENTTRACE_SESSIONS_DIR`` or ``~/.agenttrace/sessions``).

    A path is never joined to ``sessions_dir`` (``../x`` is a file the user named, not one the
    id ``../x`` leads to from the sessions directory), and an id is a plain name
    (:func:`check_session_id`). What is not a session file (a directory,
    a device) is returned all the same, for the reader to say what it is instead.
    """
    if sessions_dir is None:
        sessions_dir = Settings.resolve().sessions_dir
    path = Path(reference)
    try:
        if _written_as_path(reference) or _is_file(path):
            if not path.exists():
                raise SessionFileError(f"{reference}: no such file")
            return path
        session_id = check_session_id(reference)
        candidates = (
            stream_path(sessions_dir, session_id),
            snapshot_path(sessions_dir, session_id),
        )
        for candidate in candidates:
            if candidate.exists():
                return candidate
        if path.exists():  # `tree notes`, a directory here: say what it is, not "no session"
            return path
    except OSError as exc:  # a directory on the way that cannot be searched, a name too long
        raise SessionFileError(f"{reference}: cannot read: {exc.strerror or exc}") from None
    raise SessionFileError(f"no session {session_id!r} in {sessions_dir}")


def find_or_name_session(
    reference: str, sessions_dir: Path, home: Path | None = None
) -> Path | str:
    """What ``load_session(reference)`` starts or resumes: the file of an existing session
    (as :func:`find_session` finds it), else the id of the session to start.

    A new session is written where the next call with the same reference finds it: a reference
    written as an id (``"chat"``) in ``sessions_dir``; a path with the name of a session's file
    (``<id>.events.jsonl`` or ``<id>.json.gz``) in its own directory, ``home`` when that is
    not ``sessions_dir`` (:func:`session_home`). A session file missing while its stream is
    there resumes from the stream. A missing file named otherwise raises
    :class:`SessionFileError` saying so; so does a file that is not a session, later, when it
    is read.
    """
    path = Path(reference)
    try:
        exists = path.exists() or path.is_symlink()
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:  # too long for a file: an id, checked below
            raise SessionFileError(f"{reference}: cannot read: {exc.strerror or exc}") from None
        exists = False
    if exists:
        return find_session(reference, sessions_dir)
    session_id = reference
    if _written_as_path(reference):
        session_id = _file_session_id(path) or ""
        if not session_id:
            raise SessionFileError(
                f"{reference}: no such file, and no session can start there: a session's "
                f"files are named <id>{STREAM_SUFFIX} and <id>{SNAPSHOT_SUFFIX}"
            )
    check_session_id(session_id)
    directory = home if home is not None else sessions_dir
    for candidate in (stream_path(directory, session_id), snapshot_path(directory, session_id)):
        try:
            if candidate.exists() or candidate.is_symlink():
                return candidate
        except OSError as exc:
            raise SessionFileError(f"{candidate}: cannot read: {exc.strerror or exc}") from None
    return session_id


def session_home(reference: str, sessions_dir: Path) -> Path | None:
    """The directory the session ``load_session(reference)`` names is written to, when it is
    not ``sessions_dir``: that of a path the program wrote with the name of a session's file
    (``runs/chat.events.jsonl``: ``runs``). ``None`` for an id, a path in ``sessions_dir``, or
    a file named otherwise (resumed, it is written to ``sessions_dir``)."""
    if not _written_as_path(reference):
        return None
    path = Path(reference)
    if _file_session_id(path) is None:
        return None
    directory = path.parent
    try:
        if directory.resolve() == sessions_dir.resolve():
            return None
    except (OSError, RuntimeError):  # a loop of symlinks on the way: not the sessions directory
        pass
    return directory.absolute()


def _file_session_id(path: Path) -> str | None:
    """The session id the name of a session's file gives (``chat`` for ``chat.events.jsonl``
    or ``chat.json.gz``), unchecked; ``None`` for any other name."""
    name = path.name
    for suffix in (SNAPSHOT_SUFFIX, STREAM_SUFFIX):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return None


def _written_as_path(reference: str) -> bool:
    """Whether ``reference`` can only be a path: it has a separator, is ``.`` or ``..``, or ends
    in the suffix of a session file or stream."""
    return (
        any(separator in reference for separator in _SEPARATORS)
        or reference in (".", "..")
        or reference.endswith((".gz", ".jsonl"))
    )


def _is_file(path: Path) -> bool:
    """Whether ``path`` names an existing file; a name too long to be one does not."""
    try:
        return path.is_file()
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            return False
        raise


# --- reading -----------------------------------------------------------------------------------


Progress = Callable[[int, int], None]
"""``progress(done, total)`` in bytes of the file, called as a large file is read."""

_PROGRESS_STEP = 1 << 20


def read_session_file(
    path: str | Path, progress: Progress | None = None, limits: ReadLimits | None = None
) -> LoadedFile:
    """Read a gzipped session file or an event stream (told apart by content, not name).

    ``limits``: the caps past which the file is refused (default: from the ``AGENTTRACE_MAX_*``
    variables, :meth:`ReadLimits.from_env`).
    """
    path = Path(path)
    limits = ReadLimits.from_env() if limits is None else limits
    with open_untrusted(path, "a session file") as handle:
        try:
            size = os.fstat(handle.fileno()).st_size
            head = handle.read(2)
            handle.seek(0)
        except OSError as exc:
            raise SessionFileError(f"{path}: cannot read: {_reason(exc)}") from None
        if head == _GZIP_MAGIC:
            return _read_snapshot(path, handle, size, limits, progress)
        return _read_stream(path, handle, size, limits, progress)


def read_snapshot_bytes(path: Path, data: bytes, limits: ReadLimits | None = None) -> LoadedFile:
    """A session file's gzipped ``data``, not yet written, read as :func:`read_session_file`
    reads the file at ``path`` (the live STD-008 document is made from it, so it is the export
    of the same session)."""
    limits = ReadLimits.from_env() if limits is None else limits
    return _read_snapshot(path, io.BytesIO(data), len(data), limits)


def _reason(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)


def open_untrusted(path: Path, what: str) -> BinaryIO:
    """``path`` opened for reading if it is a regular file (no FIFO, device or directory: see
    :func:`open_regular`), else a one-line :class:`SessionFileError` saying why; ``what`` the
    file should be (``"a session file"``)."""
    try:
        return os.fdopen(open_regular(path), "rb")
    except UnsafeFile as exc:
        raise SessionFileError(f"{path}: is {exc.kind}, not {what}") from None
    except FileNotFoundError:
        raise SessionFileError(f"{path}: no such file") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise SessionFileError(f"{path}: cannot read: {_reason(exc)}") from None


def past_limit(
    path: Path, what: str, limit: str, limits: ReadLimits, amount_bytes: int | None = None
) -> SessionFileError:
    """The error for a file past one of ``limits``: which limit, and how to raise it.
    ``amount_bytes``: the size it went past, when that is not the limit's own value (the
    compression ratio's cap is a size made from the ratio)."""
    value: int = getattr(limits, limit)
    bytes_ = value if amount_bytes is None else amount_bytes
    amount = f"{bytes_ // MIB} MiB" if bytes_ and bytes_ % MIB == 0 else f"{bytes_} bytes"
    if limit == "compression_ratio":
        amount += f" ({value} times its size)"
    return SessionFileError(
        f"{path}: {what} more than {amount}, the limit; to read it, raise "
        f"{READ_LIMIT_VARIABLES[limit]} (now {value})"
    )


_DECOMPRESS_STEP = 16 * MIB
"""At most this much decompressed per call, so a gzip bomb never allocates past the cap."""


def _gunzip(
    path: Path, handle: BinaryIO, size: int, limits: ReadLimits, progress: Progress | None
) -> bytearray:
    """The contents of a gzip file, all its members (agenttrace writes the finished parts of a
    session as members of their own), stopped at ``limits.decompressed_bytes``."""
    if size > limits.compressed_bytes:
        raise past_limit(path, "a session file of", "compressed_bytes", limits)
    cap = limits.decompressed_bytes
    by_ratio = max(RATIO_FREE_BYTES, size * limits.compression_ratio)
    limit = "decompressed_bytes" if cap <= by_ratio else "compression_ratio"
    cap = min(cap, by_ratio)
    decompressor = zlib.decompressobj(31)  # the gzip container
    fed = False  # has the current member received any byte?
    members = 0
    out = bytearray()  # grown in place: no list of parts to join into a second copy
    done = 0
    while chunk := handle.read(_PROGRESS_STEP):
        done += len(chunk)
        if done > limits.compressed_bytes:  # it grew while we read it
            raise past_limit(path, "a session file of", "compressed_bytes", limits)
        while True:
            fed = fed or bool(chunk)
            room = min(cap - len(out) + 1, _DECOMPRESS_STEP)
            piece = decompressor.decompress(chunk, room)
            out += piece
            if len(out) > cap:
                raise past_limit(path, "decompresses to", limit, limits, cap)
            if decompressor.eof:
                members += 1  # a member ended; whatever follows starts the next one
                chunk = decompressor.unused_data
                decompressor = zlib.decompressobj(31)
                fed = False
                if not chunk:
                    break
                continue
            chunk = decompressor.unconsumed_tail
            if not chunk and len(piece) < room:  # all fed, nothing more held back
                break
        if progress is not None:
            progress(done, size)
    if fed or members == 0:
        raise EOFError("the gzip stream ends before its end marker")
    return out


def _read_snapshot(
    path: Path,
    handle: BinaryIO,
    size: int,
    limits: ReadLimits,
    progress: Progress | None = None,
) -> LoadedFile:
    try:
        raw = _gunzip(path, handle, size, limits, progress)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise SessionFileError(f"{path}: truncated or damaged gzip ({exc})") from None
    except OSError as exc:
        raise SessionFileError(f"{path}: cannot read: {_reason(exc)}") from None
    try:
        payload = _decode(raw)
    except RecursionError:
        raise SessionFileError(_too_deep(path)) from None
    except msgspec.ValidationError as exc:  # JSON, with a number no reader can hold
        raise SessionFileError(f"{path}: {schema.number_error(raw, exc)}") from None
    except ValueError:
        raise SessionFileError(
            f"{path}: gzip does not hold JSON; not an agenttrace session"
        ) from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise SessionFileError(f"{path}: not an agenttrace session file ({_format_of(payload)})")
    version = payload.get("version")
    if type(version) is not int or version != VERSION:
        found = "with no version" if version is None else f"version {version!r}"
        raise SessionFileError(
            f"{path}: session file {found}; this agenttrace reads version {VERSION}"
        )
    try:
        schema.check_document(payload, limits.nesting_depth)
    except schema.FormatError as exc:
        raise SessionFileError(f"{path}: {exc}") from None
    except RecursionError:
        raise SessionFileError(_too_deep(path)) from None
    events = _normalized(payload["events"])
    infer_causes(events)
    return LoadedFile(
        path,
        "snapshot",
        events,
        payload["runs"],
        payload["meta"],
        payload["session_id"],
        journal=payload.get("journal", []),  # absent from files of earlier releases
    )


def _format_of(payload: Any) -> str:
    """What a decoded document that is not a session file says it is, for the error: its
    ``format``, or what it lacks (never Python's ``None``)."""
    if not isinstance(payload, dict):
        return f"a JSON {_JSON_TYPES.get(type(payload), type(payload).__name__)}, not an object"
    found = payload.get("format")
    return "no format field" if found is None else f"format {found!r}"


_JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}
_JSON_TYPES[type(None)] = "null"


def _read_bounded(path: Path, handle: BinaryIO, size: int, limits: ReadLimits) -> bytes:
    """A stream's bytes, at most ``limits.stream_bytes`` (also if it grows while read)."""
    if size > limits.stream_bytes:
        raise past_limit(path, "an event stream of", "stream_bytes", limits)
    try:
        data = handle.read(size + 1)
        if len(data) <= size:
            return data
        parts, total = [data], len(data)  # a live stream, appended to since fstat
        while chunk := handle.read(_PROGRESS_STEP):
            total += len(chunk)
            if total > limits.stream_bytes:
                raise past_limit(path, "an event stream of", "stream_bytes", limits)
            parts.append(chunk)
    except OSError as exc:
        raise SessionFileError(f"{path}: cannot read: {_reason(exc)}") from None
    return b"".join(parts)


def _check_line_lengths(path: Path, lines: list[bytes], limits: ReadLimits) -> None:
    cap = limits.line_bytes
    for number, line in enumerate(lines):
        if len(line) > cap:
            raise past_limit(path, f"line {number + 1} is", "line_bytes", limits)


def _read_stream(
    path: Path,
    handle: BinaryIO,
    size: int,
    limits: ReadLimits,
    progress: Progress | None = None,
) -> LoadedFile:
    data = _read_bounded(path, handle, size, limits)
    if not data and _names_a_stream(path):
        return _nothing_recorded(path, None)
    if not data.strip():
        raise SessionFileError(f"{path}: empty file, no events")
    lines = data.split(b"\n")
    ends_with_newline = lines[-1] == b""
    if ends_with_newline:
        lines.pop()
    if len(data) > limits.line_bytes:  # else no line can be longer: no pass over them
        _check_line_lengths(path, lines, limits)
    events: list[dict[str, Any]] = []
    numbers: list[int] = []  # the line each event came from
    torn: str | None = None
    last = len(lines) - 1
    total, done, reported = len(data), 0, 0
    for number, line in enumerate(lines):
        if progress is not None:
            done += len(line) + 1
            if done - reported >= _PROGRESS_STEP:
                reported = done
                progress(done, total)
        if not line.strip():
            continue
        try:
            event = _decode(line)
        except RecursionError:
            raise SessionFileError(_too_deep(path, number + 1)) from None
        except msgspec.ValidationError as exc:  # JSON, with a number no reader can hold
            error = schema.number_error(line, exc)
            raise SessionFileError(_not_an_event(path, number + 1, error)) from None
        except ValueError:
            if number == last and not ends_with_newline:
                # Killed mid-write: the partial last line is reported and skipped.
                torn = line.decode("utf-8", "replace")
                break
            if not events and path.name.endswith(SNAPSHOT_SUFFIX):
                raise SessionFileError(_not_a_session_file(path)) from None
            if number == 0:
                raise SessionFileError(
                    f"{path}: not an agenttrace event stream (line 1 is not JSON)"
                ) from None
            raise SessionFileError(f"{path}: line {number + 1} is not JSON") from None
        events.append(event)
        numbers.append(number + 1)
    if not events:
        if torn is not None and _torn_first_line(data) and _names_a_stream(path):
            return _nothing_recorded(path, torn)
        if path.name.endswith(SNAPSHOT_SUFFIX):
            raise SessionFileError(_not_a_session_file(path))
        raise SessionFileError(f"{path}: no complete event in the stream")
    checked = _checked(events, numbers, path, limits.nesting_depth)
    accounted: list[dict[str, Any]] = []
    journal: list[dict[str, Any]] = []
    events = []
    for checked_line in checked:
        kind = checked_line.get("event_type")
        if kind == OP_ACCOUNTED:
            accounted.append(checked_line)
        elif kind in JOURNAL_LINES:
            journal.append(checked_line)
        else:
            events.append(checked_line)
    if not events:
        raise SessionFileError(f"{path}: no canonical event in the stream")
    infer_causes(events)
    return LoadedFile(
        path,
        "stream",
        events,
        torn=torn,
        session_id=_session_id_of(path),
        accounted=accounted,
        journal=journal,
    )


def _not_a_session_file(path: Path) -> str:
    """The error for a file named as a session file (``*.json.gz``) that holds neither gzip nor
    an event stream: what the user meant it to be, not how the stream reader failed on it."""
    return f"{path}: not an agenttrace session file (neither gzip nor an event stream)"


def _names_a_stream(path: Path) -> bool:
    """Whether ``path`` is named as the event stream of a session (``<id>.events.jsonl``, the
    id a valid one): only such a file reads as a session that recorded nothing when it holds
    no whole line; any other empty file is still refused as not a session."""
    name = path.name
    if not name.endswith(STREAM_SUFFIX):
        return False
    try:
        check_session_id(name[: -len(STREAM_SUFFIX)])
    except SessionFileError:
        return False
    return True


def _torn_first_line(data: bytes) -> bool:
    """Whether ``data`` is a first line cut off by a kill and nothing else: no newline, and the
    start of a JSON object (every line agenttrace writes starts with ``{``), so a file of other
    text is still refused as not an event stream."""
    return b"\n" not in data and data.startswith(b"{")


def _nothing_recorded(path: Path, torn: str | None) -> LoadedFile:
    """The stream of a session whose process was killed before its first line was whole (the
    file empty, or holding only that torn line): a session that recorded nothing, no events and
    no runs, its id from the file name. The torn line is reported, as a torn last line is, and
    the next write to the stream cuts it off first (``agenttrace.recorder.store``)."""
    return LoadedFile(path, "stream", [], torn=torn, session_id=_session_id_of(path))


JOURNAL_LINES = (STEP, STEP_DECISION)

_JOURNAL_PREFIX = b'{"event_type": "step'
"""How every step-journal line agenttrace writes starts (``event_type`` first: ``step`` or
``step_decision``), so a scan of a stream's bytes tells them from canonical events."""


def is_journal_line(line: bytes) -> bool:
    """Whether a line of a stream, as agenttrace writes them, is a step-journal line."""
    return line.startswith(_JOURNAL_PREFIX)


_fast_decode = msgspec.json.Decoder().decode


def _decode(text: bytes | bytearray) -> Any:
    """JSON to plain dicts and lists, as ``json.loads`` gives them but faster, and stricter: NaN
    and infinities are not JSON (a ``ValueError``, like any malformed JSON).

    msgspec refuses the escape of a lone surrogate (``"\\udc80"``), which agenttrace writes for
    text that has no UTF-8 (a file name decoded with ``surrogateescape``); only then, the standard
    library's parser reads the text (as UTF-8, constants refused), so such a session reads back.
    """
    try:
        return _fast_decode(text)
    except msgspec.ValidationError:  # a number out of range: the caller says where
        raise
    except msgspec.DecodeError:
        return json.loads(bytes(text).decode("utf-8"), parse_constant=_refuse_constant)


decode_json = _decode
"""JSON as session files are decoded (:func:`_decode`), for the readers of other formats."""


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _too_deep(path: Path, line: int | None = None) -> str:
    where = f"line {line}: " if line is not None else ""
    return f"{path}: {where}nested too deeply to read (AGENTTRACE_MAX_NESTING_DEPTH)"


def _not_an_event(path: Path, line: int, error: schema.FormatError, kind: Any = None) -> str:
    """What is wrong with a line, named as what it says it is (its ``event_type``): a step
    journal's or an accounting line, else a canonical event."""
    what = _LINE_KINDS.get(kind, "a canonical event") if type(kind) is str else "a canonical event"
    return f"{path}: line {line} is not {what}: {error.what} at {error.where}"


_LINE_KINDS = {
    STEP: "a step-journal line",
    STEP_DECISION: "a step-journal line",
    OP_ACCOUNTED: "an accounting line",
}


def _checked(
    events: list[Any], numbers: list[int], path: Path, max_depth: int
) -> list[dict[str, Any]]:
    """The stream's decoded lines, validated as canonical events (or ``op_accounted`` lines)
    and normalised; the first one that is neither is a :class:`SessionFileError` naming its
    line."""
    try:
        schema.check_stream_lines(events, max_depth)
    except schema.FormatError as exc:
        index, _, rest = exc.where[1:].partition("]")  # "[3].message_id": event 3, at .message_id
        error = schema.FormatError("$" + rest, exc.what)
        line = events[int(index)]
        kind = line.get("event_type") if type(line) is dict else None
        raise SessionFileError(_not_an_event(path, numbers[int(index)], error, kind)) from None
    except RecursionError:
        raise SessionFileError(_too_deep(path)) from None
    return _normalized(events)


def _normalized(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``events`` in the current spelling; those already in it are kept as decoded (fresh dicts
    nothing else holds, not worth copying on a resume)."""
    return [
        normalize(event) if "content_id" in event or "caused_by" in event else event
        for event in events
    ]


def _session_id_of(path: Path) -> str | None:
    name = path.name
    for suffix in (STREAM_SUFFIX, SNAPSHOT_SUFFIX, ".jsonl"):
        if name.endswith(suffix):
            return name[: -len(suffix)] or None
    return None


# --- writing ----------------------------------------------------------------------------------


def _gil_holding_write() -> Callable[[int, bytes, int], int] | None:
    """libc's ``write`` called *without* releasing the GIL (ctypes.PyDLL), or None.

    ``os.write`` releases the GIL around the system call; in a process with other busy Python
    threads (litellm has several) getting it back can take a whole switch interval, which made
    each event cost ~150 us instead of ~1 us. A short append to the page cache does not block,
    so holding the GIL through it is the cheaper choice.
    """
    if os.name != "posix":  # Windows: no process-wide C library to load by None; os.write it is
        return None
    try:
        libc = ctypes.PyDLL(None, use_errno=True)
        write = libc.write
    except (OSError, AttributeError, TypeError):  # no C library to call into
        return None
    write.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
    write.restype = ctypes.c_ssize_t
    return write


_write = _gil_holding_write()


class StreamAppender:
    """Appends JSON lines to one stream file: each line one ``write`` to an ``O_APPEND`` file,
    so a process killed at any moment leaves whole lines and at most one torn last line. A write
    that fails half-way (a full disk) takes back what it wrote before raising, so the file still
    ends in a whole line and the same lines can be appended again later."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # A regular file in its directory only: not a FIFO, not a link planted to lead out.
        self._fd = open_inside(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    def append(self, line: bytes) -> None:
        """Append ``line`` (one or more whole lines), all of it or, raising OSError, none."""
        done = 0
        if _write is not None:
            written = _write(self._fd, line, len(line))
            if written == len(line):
                return
            if written < 0:
                error = ctypes.get_errno()
                raise OSError(error, os.strerror(error), str(self.path))
            done = written  # a short write (a full disk): finish it the portable way
        view = memoryview(line)[done:]
        try:
            while view:
                written = os.write(self._fd, view)
                done += written
                view = view[written:]
        except OSError:
            if done:
                self._take_back(done)
            raise

    def _take_back(self, count: int) -> None:
        """Cut the last ``count`` bytes, the part of a failed write that reached the file
        (cutting frees space, so it works on a full disk too)."""
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, os.fstat(self._fd).st_size - count)

    def sync(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same directory, fsync, rename;
    the file is readable by its owner only (0600)."""
    with atomic_file(path) as handle:
        handle.write(data)


def document_pieces(
    session_id: str,
    runs: Sequence[Sequence[Piece]],
    events: Sequence[Piece],
    meta: Mapping[str, Any],
    journal: Sequence[Piece] = (),
) -> list[Piece]:
    """A session file's JSON document as pieces (see ``agenttrace.formats.session.spool``): ``runs``
    are each run's SessionNode as pieces, ``events`` the comma-separated event lines as pieces,
    ``journal`` the comma-separated step-journal lines as pieces (the key is written only when
    there are some, so a session that journals nothing reads with earlier releases)."""
    head = _compact_json({"format": FORMAT, "version": VERSION, "session_id": session_id})
    pieces: list[Piece] = [head[:-1] + b',"runs":[']
    for index, run in enumerate(runs):
        if index:
            pieces.append(b",")
        pieces.extend(run)
    pieces.append(b'],"meta":' + _compact_json(meta) + b',"events":[')
    pieces.extend(events)
    if journal:
        pieces.append(b'],"journal":[')
        pieces.extend(journal)
    pieces.append(b"]}")
    return pieces


def snapshot_bytes(
    session_id: str,
    runs: Sequence[Mapping[str, Any] | bytes],
    event_lines: Sequence[bytes],
    meta: Mapping[str, Any],
    compresslevel: int = 4,
    journal_lines: Sequence[bytes] = (),
) -> bytes:
    """A whole gzipped session file in memory (for tools and tests; agenttrace's own writes go
    through :func:`agenttrace.formats.session.spool.write_pieces`). ``runs`` are SessionNodes as
    objects or as their JSON; ``event_lines`` the stream's JSON lines; ``journal_lines`` its
    step-journal lines."""
    journal = b",".join(line.rstrip(b"\n") for line in journal_lines)
    pieces = document_pieces(
        session_id,
        [[run if isinstance(run, bytes) else _compact_json(run)] for run in runs],
        [b",".join(line.rstrip(b"\n") for line in event_lines)],
        meta,
        [journal] if journal else (),
    )
    data = b"".join(p for p in pieces if isinstance(p, bytes))
    return gzip_member(data, compresslevel)


def _compact_json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", "backslashreplace"
    )
