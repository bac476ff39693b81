"""A session exported as a STD-008 multi-agent session document (docs/std008.md): the session,
or any document agenttrace reads, redacted and capped like every export, then written by
:mod:`agenttrace.formats.std008.writer`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agenttrace.formats.std008.writer import std008_document, write_document
from agenttrace.views.exports._spans import Source, load, nesting_checked


def to_std008(source: Source) -> dict[str, Any]:
    """``source`` (a session file, or one already read) as a STD-008 document (a JSON object),
    redacted and capped like every export (:func:`agenttrace.views.public.public_view`);
    :class:`SessionFileError` for a file with no opTree (an event stream alone)."""
    loaded = load(source)
    with nesting_checked(loaded):
        return std008_document(loaded)


def write_std008(source: Source, output: Path) -> Path:
    """Write ``source`` as a STD-008 document to ``output``: a file, or a directory in which
    it gets its section 2.1 name (never replacing a file there). Returns the file written."""
    return write_document(to_std008(source), output)
