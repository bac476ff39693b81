"""Resuming a session that lives in a session store (``AGENTTRACE_SESSIONS_URL``): its files
are rebuilt in the sessions directory first, and the resume goes on as from local files; the
run's shipper then continues the same session in the store.
"""

from __future__ import annotations

import logging
from pathlib import Path

from agenttrace._internal.runtime import runtime
from agenttrace.formats.session.files import (
    SNAPSHOT_SUFFIX,
    STREAM_SUFFIX,
    SessionFileError,
    check_session_id,
)
from agenttrace.formats.stores import StoreError, open_store
from agenttrace.formats.stores.materialize import materialize

logger = logging.getLogger("agenttrace")


def fetch_to_resume(reference: str, directory: Path) -> None:
    """If a store is set and ``reference`` is a session id the store holds, rebuild its files
    in ``directory`` (the local files kept where this host wrote more than it shipped).

    A store that cannot be reached, with the session's files in ``directory`` already, is
    warned about and the local files are resumed; without them the
    :class:`~agenttrace.formats.stores.base.StoreError` is raised (a ``SessionFileError``)."""
    url = runtime.settings.sessions_url
    if url is None or not _an_id(reference):
        return
    local = any(
        (directory / f"{reference}{suffix}").exists() for suffix in (STREAM_SUFFIX, SNAPSHOT_SUFFIX)
    )
    try:
        store = open_store(url)
        try:
            if not store.segments(reference):
                return  # not in the store: a local session, or a new one
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            materialize(store, reference, directory, keep_longer=True)
        finally:
            store.close()
    except (StoreError, OSError) as error:
        if not local:
            if isinstance(error, StoreError):
                raise
            raise StoreError(f"{directory}: cannot write: {error.strerror or error}") from None
        logger.warning(
            "agenttrace: cannot read session %s from %s (%s): resuming the files in %s",
            reference,
            url,
            error,
            directory,
        )


def _an_id(reference: str) -> bool:
    """A reference that names a session by its id (not a file)."""
    if "/" in reference or Path(reference).exists():
        return False
    try:
        check_session_id(reference)
    except SessionFileError:
        return False
    return not reference.endswith((SNAPSHOT_SUFFIX, STREAM_SUFFIX))
