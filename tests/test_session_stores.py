"""One conformance suite for every session store (issue 35 item 3): the same tests, each against
a real engine (tests/store_servers.py), for the two promises a store makes: a segment is created
once and read whole, the manifest changes only by compare-and-swap."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agenttrace.formats.session.files import SessionFileError
from agenttrace.formats.stores import (
    ManifestConflict,
    SegmentExists,
    SegmentInfo,
    SegmentTooLarge,
    SessionStore,
    StoreError,
    open_store,
)

from .store_servers import STORES, race, stop_store_servers


@pytest.fixture(scope="session", autouse=True)
def store_servers() -> Iterator[None]:
    """Stop the servers the stores' tests started (each on first use) when the session ends."""
    yield
    stop_store_servers()


@pytest.fixture(params=sorted(STORES))
def opened(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[SessionStore, Callable[[], SessionStore]]]:
    with STORES[request.param](tmp_path) as pair:
        yield pair


@pytest.fixture
def store(opened: tuple[SessionStore, Callable[[], SessionStore]]) -> SessionStore:
    return opened[0]


def test_a_new_store_holds_nothing(store: SessionStore) -> None:
    assert isinstance(store, SessionStore)
    assert store.sessions() == []
    assert store.segments("sess_1") == []
    assert store.manifest("sess_1") is None


def test_a_segment_reads_back_whole_and_listed_by_name(store: SessionStore) -> None:
    store.append("sess_1", "w1/stream/00000002", b"second\n")
    store.append("sess_1", "w1/stream/00000001", b"first\n")
    store.append("sess_1", "main/snapshot/00000001", bytes(range(256)))
    assert store.segments("sess_1") == [
        SegmentInfo("main/snapshot/00000001", 256),
        SegmentInfo("w1/stream/00000001", 6),
        SegmentInfo("w1/stream/00000002", 7),
    ]
    assert store.read("sess_1", "w1/stream/00000001", limit=100) == b"first\n"
    assert store.read("sess_1", "main/snapshot/00000001", limit=256) == bytes(range(256))
    assert store.sessions() == ["sess_1"]


def test_an_empty_segment_is_a_segment(store: SessionStore) -> None:
    store.append("sess_1", "empty", b"")
    assert store.segments("sess_1") == [SegmentInfo("empty", 0)]
    assert store.read("sess_1", "empty", limit=0) == b""


def test_a_segment_is_created_once(store: SessionStore) -> None:
    store.append("sess_1", "w1/stream/00000001", b"mine")
    with pytest.raises(SegmentExists):
        store.append("sess_1", "w1/stream/00000001", b"theirs")
    assert store.read("sess_1", "w1/stream/00000001", limit=10) == b"mine"


def test_of_writers_racing_for_one_name_exactly_one_wins(store: SessionStore) -> None:
    racers = 8
    won, lost = race(
        racers,
        lambda index: store.append("sess_1", "race", f"writer {index}".encode()),
        SegmentExists,
    )
    assert len(won) == 1 and len(lost) == racers - 1
    assert store.read("sess_1", "race", limit=100) == f"writer {won[0][0]}".encode()


def test_a_read_past_its_limit_is_refused(store: SessionStore) -> None:
    store.append("sess_1", "big", b"x" * 1000)
    with pytest.raises(SegmentTooLarge):
        store.read("sess_1", "big", limit=999)
    assert len(store.read("sess_1", "big", limit=1000)) == 1000


def test_a_missing_segment_is_a_store_error(store: SessionStore) -> None:
    with pytest.raises(StoreError, match="no segment"):
        store.read("sess_1", "absent", limit=10)


@pytest.mark.parametrize(
    "name",
    ["", "../escape", "a/../../b", "/abs", "a//b", ".hidden", "a/b/c/d/e", "x" * 129, "a\nb"],
)
def test_a_name_that_would_leave_its_session_is_refused(store: SessionStore, name: str) -> None:
    with pytest.raises(StoreError, match="not a segment name"):
        store.append("sess_1", name, b"x")
    with pytest.raises(StoreError):
        store.read("sess_1", name, limit=10)
    assert store.sessions() == []


@pytest.mark.parametrize("session_id", ["", "../up", "a/b", ".x", "x" * 129])
def test_a_session_id_that_is_not_one_is_refused(store: SessionStore, session_id: str) -> None:
    with pytest.raises(SessionFileError):
        store.append(session_id, "seg", b"x")
    with pytest.raises(SessionFileError):
        store.swap_manifest(session_id, b"{}", None)
    assert store.sessions() == []


def test_sessions_keep_their_segments_apart(store: SessionStore) -> None:
    store.append("sess_a", "seg", b"a")
    store.append("sess_b", "seg", b"b")
    assert store.read("sess_a", "seg", limit=1) == b"a"
    assert store.read("sess_b", "seg", limit=1) == b"b"
    assert store.sessions() == ["sess_a", "sess_b"]


def test_the_manifest_changes_only_from_the_version_read(store: SessionStore) -> None:
    first = store.swap_manifest("sess_1", b'{"lease": 1}', None)
    read = store.manifest("sess_1")
    assert read is not None and read.data == b'{"lease": 1}' and read.version == first
    with pytest.raises(ManifestConflict):
        store.swap_manifest("sess_1", b'{"lease": "late"}', None)
    second = store.swap_manifest("sess_1", b'{"lease": 2}', first)
    assert second != first
    with pytest.raises(ManifestConflict):
        store.swap_manifest("sess_1", b'{"lease": "stale"}', first)
    read = store.manifest("sess_1")
    assert read is not None and read.data == b'{"lease": 2}' and read.version == second
    assert store.sessions() == ["sess_1"]


def test_the_same_bytes_swapped_in_again_are_a_new_version(store: SessionStore) -> None:
    first = store.swap_manifest("sess_1", b"same", None)
    second = store.swap_manifest("sess_1", b"same", first)
    assert second != first
    with pytest.raises(ManifestConflict):
        store.swap_manifest("sess_1", b"same", first)


def test_of_swappers_racing_from_one_version_exactly_one_wins(store: SessionStore) -> None:
    base = store.swap_manifest("sess_1", b"base", None)
    racers = 8
    won, lost = race(
        racers,
        lambda index: store.swap_manifest("sess_1", f"swapper {index}".encode(), base),
        ManifestConflict,
    )
    assert len(won) == 1 and len(lost) == racers - 1
    read = store.manifest("sess_1")
    assert read is not None and read.data == f"swapper {won[0][0]}".encode()


def test_another_client_of_the_store_sees_the_same_session(
    opened: tuple[SessionStore, Callable[[], SessionStore]],
) -> None:
    store, open_again = opened
    other = open_again()
    try:
        store.append("sess_1", "seg", b"from one host")
        version = store.swap_manifest("sess_1", b"m1", None)
        assert other.read("sess_1", "seg", limit=100) == b"from one host"
        assert other.segments("sess_1") == [SegmentInfo("seg", 13)]
        with pytest.raises(SegmentExists):
            other.append("sess_1", "seg", b"from another")
        later = other.swap_manifest("sess_1", b"m2", version)
        with pytest.raises(ManifestConflict):
            store.swap_manifest("sess_1", b"m3", version)
        read = store.manifest("sess_1")
        assert read is not None and (read.data, read.version) == (b"m2", later)
    finally:
        other.close()


def test_an_oversized_manifest_is_refused(store: SessionStore) -> None:
    with pytest.raises(StoreError):
        store.swap_manifest("sess_1", b"x" * (1024 * 1024 + 1), None)
    assert store.manifest("sess_1") is None


def test_an_unknown_url_is_a_one_line_error() -> None:
    with pytest.raises(StoreError, match="not a store URL"):
        open_store("ftp://example.invalid/x")
