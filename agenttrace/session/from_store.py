"""Resuming a session that lives in a session store (``AGENTTRACE_SESSIONS_URL``): its lease
in the store is taken (one host at a time: ``agenttrace.session.store_leases``), its files are
rebuilt in the sessions directory, and the resume goes on as from local files; the run's
shipper then continues the same session in the store, under the lease's epoch.
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
from agenttrace.formats.stores import StoreError, open_store, store_identity
from agenttrace.formats.stores.lease import StoreLease
from agenttrace.formats.stores.materialize import materialize
from agenttrace.session import store_leases

logger = logging.getLogger("agenttrace")


def fetch_to_resume(reference: str, directory: Path, force: bool = False) -> StoreLease | None:
    """If a store is set and ``reference`` is a session id the store holds, take its lease there
    (``LeaseHeld`` if another host holds it; ``force``: taken over all the same), then rebuild
    its files in ``directory`` (the local files kept where this host wrote more than it
    shipped), as the lease's fencing counts them; the lease, held until the session is let go
    (``None``: the session is not the store's).

    A store that cannot be reached, with the session's files in ``directory`` already, is
    warned about and the local files are resumed; without them the
    :class:`~agenttrace.formats.stores.base.StoreError` is raised (a ``SessionFileError``)."""
    url = runtime.settings.sessions_url
    if url is None or not _an_id(reference):
        return None
    local = any(
        (directory / f"{reference}{suffix}").exists() for suffix in (STREAM_SUFFIX, SNAPSHOT_SUFFIX)
    )
    lease = None
    try:
        store = open_store(url)
        try:
            if not store.segments(reference):
                return None  # not in the store: a local session, or a new one
            # Taken before the segments are read: what is read is what the last holder left,
            # and nothing it writes from now on is counted (the fencing of its epoch).
            lease = store_leases.take(url, reference, force=force)
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            materialize(store, reference, directory, keep_longer=True)
        finally:
            store.close()
    except (StoreError, OSError) as error:
        if not local:
            if lease is not None:
                store_leases.let_go(reference)
            if isinstance(error, StoreError):
                raise
            raise StoreError(f"{directory}: cannot write: {error.strerror or error}") from None
        logger.warning(
            "agenttrace: cannot read session %s from %s (%s): resuming the files in %s",
            reference,
            store_identity(url),  # the URL may hold a password
            error,
            directory,
        )
    return lease


def _an_id(reference: str) -> bool:
    """A reference that names a session by its id (not a file)."""
    if "/" in reference or Path(reference).exists():
        return False
    try:
        check_session_id(reference)
    except SessionFileError:
        return False
    return not reference.endswith((SNAPSHOT_SUFFIX, STREAM_SUFFIX))
