"""A session exported as an ATIF trajectory (docs/atif.md; the ``[atif]`` extra): the session,
or any document agenttrace reads, redacted and capped like every export, then written by
:mod:`agenttrace.formats.atif.writer`."""

from __future__ import annotations

from typing import Any

from agenttrace.formats.atif.writer import SCHEMA_VERSION, AtifUnavailable, atif_trajectory
from agenttrace.views.exports._spans import Source, load, nesting_checked

__all__ = ["SCHEMA_VERSION", "AtifUnavailable", "to_atif"]


def to_atif(source: Source) -> dict[str, Any]:
    """``source`` (a session file, or one already read) as an ATIF trajectory (a JSON object),
    redacted and capped like every export, validated by the ``atif`` package's models;
    :class:`SessionFileError` for a file with no opTree (an event stream alone)."""
    loaded = load(source)
    with nesting_checked(loaded):
        return atif_trajectory(loaded)
