"""The session stores the conformance suite (tests/test_session_stores.py) runs against, each
on a real engine: a directory here; S3 and PostgreSQL servers on 127.0.0.1 as their modules add
them. Each entry opens a fresh, empty store (a new directory, bucket prefix or schema) for one
test, and yields the store with a function that opens a second client of the same store (what
another host would hold)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from agenttrace.formats.stores import SessionStore, open_store

OpenedStore = tuple[SessionStore, Callable[[], SessionStore]]


@contextlib.contextmanager
def local_store(tmp_path: Path) -> Iterator[OpenedStore]:
    """A store in a fresh directory, opened by its file:// URL."""
    url = (tmp_path / "store").as_uri()
    store = open_store(url)
    try:
        yield store, lambda: open_store(url)
    finally:
        store.close()


STORES: dict[str, Callable[[Path], contextlib.AbstractContextManager[OpenedStore]]] = {
    "local": local_store,
}
"""Each store kind's opener, by the name the suite's ids show."""
