"""A saved session as it may leave the process: what the command line prints and exports write.

The event stream and the session file keep transcript content verbatim (they are the agent's
state). Whatever is shown or exported from them gets the policy every other output has
(:mod:`agenttrace._internal.redact`): secrets replaced, credentials in URLs too, each string
capped as a payload is on a span. So ``agenttrace perspective`` prints what the HTML export of
the same view shows.
"""

from __future__ import annotations

import dataclasses

from agenttrace._internal.config import Settings
from agenttrace._internal.redact import redacted_copy
from agenttrace.formats.session.files import LoadedFile
from agenttrace.formats.session.optree import agent_names


def public_view(
    loaded: LoadedFile, max_bytes: int | None = None, *, events: bool = True, runs: bool = True
) -> LoadedFile:
    """``loaded`` with its events, runs and metadata redacted and each string capped at
    ``max_bytes`` (default: the ``max_payload_bytes`` setting). Applying it twice changes
    nothing more: caps and scrubbing are idempotent.

    ``events=False`` or ``runs=False`` leaves that part out (empty) for a view that does not
    show it, rather than redacting what nobody reads (or passing it on unredacted).
    """
    if max_bytes is None:
        max_bytes = Settings.resolve().max_payload_bytes
    return dataclasses.replace(
        loaded,
        events=redacted_copy(loaded.events, max_bytes) if events else [],
        runs=redacted_copy(loaded.runs, max_bytes) if runs else [],
        meta=redacted_copy(loaded.meta, max_bytes),
    )


def public_agent_names(loaded: LoadedFile, max_bytes: int | None = None) -> dict[str, str]:
    """The names ``loaded``'s runs give its agents (:func:`agent_names`), as they may be
    printed, under the policy of :func:`public_view`: for a view that names agents from the
    events but leaves the runs out (``dialog``, ``perspective``)."""
    if max_bytes is None:
        max_bytes = Settings.resolve().max_payload_bytes
    names: dict[str, str] = redacted_copy(agent_names(loaded.runs), max_bytes)
    return names
