"""JSON documents of other formats that agenttrace reads: STD-008 multi-agent session
documents (docs/std008.md) and ATIF trajectories (docs/atif.md). A file named ``*.json`` is one (a
session file is ``*.json.gz``, an event stream ``*.jsonl``; STD-008's own detection rule is by name
too, section 2.2).

Documents are untrusted input like session files: a regular file only, at most
``AGENTTRACE_MAX_DECOMPRESSED_BYTES`` (the cap on a session file's JSON) read, valid JSON,
nested at most ``AGENTTRACE_MAX_NESTING_DEPTH`` levels; anything else is a
:class:`~agenttrace.formats.session.files.SessionFileError` with one line saying what.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec

from agenttrace._internal.config import ReadLimits
from agenttrace.formats.session import schema
from agenttrace.formats.session.files import (
    LoadedFile,
    Progress,
    SessionFileError,
    decode_json,
    open_untrusted,
    past_limit,
    read_session_file,
)

DOCUMENT_SUFFIX = ".json"

DocumentKind = Literal["std008", "atif"]


def is_document(path: str | Path) -> bool:
    """Whether ``path`` names a JSON document (``*.json``) rather than a session file or
    stream."""
    return str(path).lower().endswith(DOCUMENT_SUFFIX)


def read_json(path: str | Path, limits: ReadLimits | None = None) -> Any:
    """The decoded JSON of the document at ``path`` (:class:`SessionFileError` if it cannot
    be read, is past the limits or is not JSON)."""
    path = Path(path)
    limits = ReadLimits.from_env() if limits is None else limits
    cap = limits.decompressed_bytes
    with open_untrusted(path, "a document") as handle:
        try:
            data = handle.read(cap + 1)
        except OSError as exc:
            raise SessionFileError(f"{path}: cannot read: {_reason(exc)}") from None
    if len(data) > cap:
        raise past_limit(path, "a document of", "decompressed_bytes", limits)
    if not data.strip():
        raise SessionFileError(f"{path}: empty file, not a JSON document")
    try:
        document = decode_json(data)
    except RecursionError:
        raise SessionFileError(
            f"{path}: nested too deeply to read (AGENTTRACE_MAX_NESTING_DEPTH)"
        ) from None
    except msgspec.ValidationError as exc:  # a number no reader can hold
        raise SessionFileError(f"{path}: {schema.number_error(data, exc)}") from None
    except ValueError:
        what = "a gzip file" if data[:2] == b"\x1f\x8b" else "not JSON"
        raise SessionFileError(f"{path}: {what}, not a JSON document") from None
    problem = schema.depth_error(document, limits.nesting_depth)
    if problem is not None:
        raise SessionFileError(f"{path}: {problem}")
    return document


def kind_of(document: Any) -> DocumentKind | None:
    """Which format ``document`` (decoded JSON) is in, or None: an ATIF trajectory names its
    ``schema_version`` (``ATIF-v1.7``); a STD-008 session has ``collaboration`` or, in the
    single-agent form, ``session_id`` and ``tool_calls``."""
    if not isinstance(document, Mapping):
        return None
    version = document.get("schema_version")
    if isinstance(version, str) and version.upper().startswith("ATIF"):
        return "atif"
    if "collaboration" in document or "sub_sessions" in document:
        return "std008"
    if "session_id" in document and "tool_calls" in document:
        return "std008"
    return None


def _reason(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc)


def read_document(path: str | Path, limits: ReadLimits | None = None) -> LoadedFile:
    """The document at ``path`` as a session, whatever format it is in (STD-008, ATIF);
    :class:`SessionFileError` if it cannot be read or is in neither."""
    path = Path(path)
    limits = ReadLimits.from_env() if limits is None else limits
    document = read_json(path, limits)
    kind = kind_of(document)
    if kind == "std008":
        from agenttrace.formats.std008.reader import read_std008

        return read_std008(document, path, limits)
    if kind == "atif":
        from agenttrace.formats.atif.reader import read_atif

        return read_atif(document, path, limits)
    raise SessionFileError(
        f"{path}: neither a STD-008 session nor an ATIF trajectory (a JSON document with "
        "collaboration or session_id and tool_calls, or with an ATIF schema_version)"
    )


def read_any(path: str | Path, progress: Progress | None = None) -> LoadedFile:
    """A session file, an event stream or (``*.json``) a document of another format, read."""
    if is_document(path):
        return read_document(path)
    return read_session_file(path, progress)
