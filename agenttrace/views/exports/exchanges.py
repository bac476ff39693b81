"""A session exported as the exchange log (docs/how-to/exports.md, "The exchange log"): the
session, or any
document agenttrace reads, redacted and capped like every export, then written by
:mod:`agenttrace.formats.exchange_log.export`."""

from __future__ import annotations

from typing import Any

from agenttrace.formats.exchange_log import lines
from agenttrace.formats.exchange_log.export import exchange_lines
from agenttrace.views.exports._spans import Source, load, nesting_checked


def to_exchanges(source: Source) -> list[dict[str, Any]]:
    """The session's lines in the exchange log's format: ``session_start``, an ``exchange`` per
    root run, ``session_end``. ``source``: a :class:`LoadedFile` or a session file's path; a
    file without runs (an event stream) gives the two session lines and no exchange."""
    loaded = load(source)
    with nesting_checked(loaded):
        return exchange_lines(loaded)


def exchanges_jsonl(source: Source) -> str:
    """:func:`to_exchanges` as JSON Lines, compact as the exchange log writes them."""
    return "".join(lines.encode(line).decode("utf-8") + "\n" for line in to_exchanges(source))
