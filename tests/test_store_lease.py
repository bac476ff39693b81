"""The session lease in a store shared by hosts (issue 35 item 4): taken by compare-and-swap of
the manifest, renewed, taken over only after expiry or by force, and fencing a stale holder's
late segments; against every store of tests/store_servers.py, with the clock injected."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agenttrace.formats.session.lease import LeaseError
from agenttrace.formats.session.lease import LeaseHeld as FileLeaseHeld
from agenttrace.formats.stores import Manifest, SegmentInfo, SessionStore, StoreError
from agenttrace.formats.stores.lease import (
    LeaseHeld,
    LeaseLost,
    StoreLease,
    accepted,
    parse_segment_name,
    segment_name,
    take,
)

from .store_servers import STORES, race

SESSION = "sess_1"
TTL = 30.0


@pytest.fixture(params=sorted(STORES))
def opened(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[SessionStore, Callable[[], SessionStore]]]:
    with STORES[request.param](tmp_path) as pair:
        yield pair


@pytest.fixture
def store(opened: tuple[SessionStore, Callable[[], SessionStore]]) -> SessionStore:
    return opened[0]


class Clock:
    """The time the lease code sees: moved by hand, so no test sleeps."""

    def __init__(self, at: float = 1000.0) -> None:
        self.at = at

    def __call__(self) -> float:
        return self.at


def manifest_of(store: SessionStore) -> dict[str, Any]:
    found = store.manifest(SESSION)
    assert found is not None
    document: dict[str, Any] = json.loads(found.data)
    return document


def write(store: SessionStore, writer: str, kind: str, epoch: int, *seqs: int) -> list[str]:
    names = [segment_name(writer, kind, epoch, seq) for seq in seqs]
    for name in names:
        store.append(SESSION, name, name.encode())
    return names


def kept(store: SessionStore) -> list[str]:
    return [segment.name for segment in accepted(store.segments(SESSION), store.manifest(SESSION))]


def test_of_takers_racing_for_a_free_session_exactly_one_wins(
    opened: tuple[SessionStore, Callable[[], SessionStore]],
) -> None:
    store, open_again = opened
    other = open_again()  # half the takers on another host's client
    racers = 8
    clock = Clock()
    try:
        results, errors = race(
            racers,
            lambda index: take(
                store if index % 2 else other, SESSION, f"host-{index}:1", TTL, now=clock
            ),
            LeaseHeld,
        )
    finally:
        other.close()
    won = [lease for _, lease in results if isinstance(lease, StoreLease)]
    refused = [held for _, held in errors if isinstance(held, LeaseHeld)]
    assert len(won) == len(results) == 1 and len(refused) == racers - 1
    winner = won[0]
    assert {held.held_by for held in refused} == {winner.holder}
    lease = manifest_of(store)["lease"]
    assert (lease["token"], lease["epoch"]) == (winner.token, winner.epoch) == (lease["token"], 1)


def test_an_unexpired_lease_refuses_a_second_taker_naming_holder_and_expiry(
    opened: tuple[SessionStore, Callable[[], SessionStore]],
) -> None:
    store, open_again = opened
    clock = Clock(1000.0)
    first = take(store, SESSION, "host-a:41", TTL, now=clock)
    assert (first.epoch, first.expires_at) == (1, 1030.0)
    other = open_again()  # another host's client of the same store
    try:
        clock.at = 1029.5
        with pytest.raises(LeaseHeld) as refused:
            take(other, SESSION, "host-b:7", TTL, now=clock)
    finally:
        other.close()
    message = str(refused.value)
    assert "host-a:41" in message and "1970-01-01T00:17:10Z" in message and "\n" not in message
    assert message.endswith("take it over after that, or with force=True")  # the API's
    assert (refused.value.held_by, refused.value.expires_at) == ("host-a:41", 1030.0)
    # the agenttrace.LeaseHeld callers already catch
    assert isinstance(refused.value, FileLeaseHeld) and not refused.value.hung
    assert manifest_of(store)["lease"]["token"] == first.token


def test_after_expiry_it_is_taken_with_the_next_epoch(store: SessionStore) -> None:
    clock = Clock(1000.0)
    first = take(store, SESSION, "host-a:1", TTL, now=clock)
    clock.at = 1030.0
    second = take(store, SESSION, "host-b:1", TTL, now=clock)
    assert (second.epoch, second.expires_at) == (2, 1060.0)
    assert second.token != first.token
    document = manifest_of(store)
    assert document["lease"]["holder"] == "host-b:1"
    assert [(entry["epoch"], entry["holder"]) for entry in document["epochs"]] == [
        (1, "host-a:1"),
        (2, "host-b:1"),
    ]


def test_force_takes_it_at_once(store: SessionStore) -> None:
    clock = Clock(1000.0)
    take(store, SESSION, "host-a:1", TTL, now=clock)
    forced = take(store, SESSION, "host-b:1", TTL, force=True, now=clock)
    assert forced.epoch == 2
    assert manifest_of(store)["lease"]["token"] == forced.token


def test_renew_pushes_the_expiry_past_now(store: SessionStore) -> None:
    clock = Clock(1000.0)
    lease = take(store, SESSION, "host-a:1", TTL, now=clock)
    clock.at = 1020.0
    lease.renew()
    assert lease.expires_at == 1050.0
    assert manifest_of(store)["lease"] | {"token": "-"} == {
        "holder": "host-a:1",
        "token": "-",
        "epoch": 1,
        "expires_at": 1050.0,
        "renewed_at": 1020.0,
    }
    clock.at = 1040.0  # past the first expiry, not the renewed one
    with pytest.raises(LeaseHeld):
        take(store, SESSION, "host-b:1", TTL, now=clock)


def test_a_lease_past_its_expiry_that_no_one_took_still_renews(store: SessionStore) -> None:
    clock = Clock(1000.0)
    lease = take(store, SESSION, "host-a:1", TTL, now=clock)
    clock.at = 2000.0
    lease.renew()
    assert lease.expires_at == 2030.0 and lease.held


@pytest.mark.parametrize("force", [False, True])
def test_the_old_holders_renew_after_a_takeover_is_lost(store: SessionStore, force: bool) -> None:
    clock = Clock(1000.0)
    old = take(store, SESSION, "host-a:1", TTL, now=clock)
    clock.at = 1000.0 if force else 1031.0
    take(store, SESSION, "host-b:1", TTL, force=force, now=clock)
    with pytest.raises(LeaseLost, match="host-b:1"):
        old.renew()
    assert not old.held
    old.release()  # the new holder's lease stays
    assert manifest_of(store)["lease"]["holder"] == "host-b:1"
    assert isinstance(LeaseLost("x"), LeaseError)


def test_release_then_take(store: SessionStore) -> None:
    clock = Clock(1000.0)
    first = take(store, SESSION, "host-a:1", TTL, now=clock)
    first.release()
    first.release()  # again: nothing
    document = manifest_of(store)
    assert document["lease"] is None and [entry["epoch"] for entry in document["epochs"]] == [1]
    with pytest.raises(LeaseLost, match="released"):
        first.renew()
    second = take(store, SESSION, "host-b:1", TTL, now=clock)  # before the first's expiry
    assert second.epoch == 2


def test_a_taker_that_loses_the_swap_is_refused_naming_the_winner(store: SessionStore) -> None:
    clock = Clock(1000.0)
    winner: list[StoreLease] = []
    racing = Interleaved(store, lambda: winner.append(take(store, SESSION, "host-w:1", TTL)))
    with pytest.raises(LeaseHeld, match="host-w:1"):
        take(racing, SESSION, "host-l:1", TTL, force=True, now=clock)
    assert manifest_of(store)["lease"]["token"] == winner[0].token


def test_a_swap_lost_to_another_key_is_tried_again(store: SessionStore) -> None:
    clock = Clock(1000.0)
    take(store, SESSION, "host-a:1", TTL, now=clock).release()

    def note() -> None:  # another writer of the manifest, leaving the lease free
        found = store.manifest(SESSION)
        assert found is not None
        document = json.loads(found.data) | {"writers": ["w1"]}
        store.swap_manifest(SESSION, json.dumps(document).encode(), found.version)

    lease = take(Interleaved(store, note), SESSION, "host-b:1", TTL, now=clock)
    document = manifest_of(store)
    assert document["writers"] == ["w1"] and document["lease"]["token"] == lease.token
    assert lease.epoch == 2


class Interleaved:
    """A store that runs ``between`` once, when the lease code lists the session's segments:
    after it read the manifest, before it swaps it (what another host may do meanwhile)."""

    def __init__(self, store: SessionStore, between: Callable[[], object]) -> None:
        self._store = store
        self._between: Callable[[], object] | None = between
        self.url = store.url

    def segments(self, session_id: str) -> list[SegmentInfo]:
        listed = self._store.segments(session_id)
        between, self._between = self._between, None
        if between is not None:
            between()
        return listed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_the_old_holders_late_segments_are_not_accepted(store: SessionStore) -> None:
    clock = Clock(1000.0)
    old = take(store, SESSION, "host-a:1", TTL, now=clock)
    assert old.from_seq == {"main/events": 0, "main/session": 0}
    before = write(store, "main", "events", 1, 0, 1, 2) + write(store, "main", "session", 1, 0)
    joined = write(store, "w1", "events", 1, 0)
    clock.at = 1031.0
    new = take(store, SESSION, "host-b:1", TTL, now=clock)
    assert new.from_seq == {"main/events": 3, "main/session": 1}
    late = write(store, "main", "events", 1, 3, 4) + write(store, "main", "session", 1, 1)
    mine = write(store, "main", "events", 2, 3, 4) + write(store, "main", "session", 2, 1)
    assert late and set(kept(store)) == set(before + joined + mine)
    assert kept(store) == sorted(before + joined + mine)


def test_a_late_segment_written_between_the_listing_and_the_swap_is_not_accepted(
    store: SessionStore,
) -> None:
    clock = Clock(1000.0)
    take(store, SESSION, "host-a:1", TTL, now=clock)
    before = write(store, "main", "events", 1, 0, 1)
    late: list[str] = []
    racing = Interleaved(store, lambda: late.extend(write(store, "main", "events", 1, 2)))
    new = take(racing, SESSION, "host-b:1", TTL, force=True, now=clock)
    assert late and new.from_seq["main/events"] == 2
    assert kept(store) == before


def test_a_refused_late_segment_does_not_open_a_window_for_the_next_epoch(
    store: SessionStore,
) -> None:
    clock = Clock(1000.0)
    take(store, SESSION, "host-a:1", TTL, now=clock)
    first = write(store, "main", "events", 1, 0, 1, 2)
    take(store, SESSION, "host-b:1", TTL, force=True, now=clock)
    write(store, "main", "events", 1, *range(3, 10))  # host-a, late: refused
    second = write(store, "main", "events", 2, 3, 4)
    third = take(store, SESSION, "host-c:1", TTL, force=True, now=clock)
    assert third.from_seq["main/events"] == 5  # host-b's end, not past host-a's late seqs
    write(store, "main", "events", 2, 5, 6)  # host-b, late: refused
    assert kept(store) == first + second


def test_segments_from_before_any_lease_are_epoch_0(store: SessionStore) -> None:
    early = write(store, "main", "events", 0, 0, 1) + write(store, "main", "session", 0, 0)
    never = write(store, "main", "events", 7, 2)  # an epoch no one took
    assert kept(store) == early
    lease = take(store, SESSION, "host-a:1", TTL, now=Clock())
    assert lease.from_seq == {"main/events": 2, "main/session": 1}
    late = write(store, "main", "events", 0, 2)
    assert late and never and kept(store) == early


def test_names_that_do_not_parse_are_dropped_with_one_warning(
    store: SessionStore, caplog: pytest.LogCaptureFixture
) -> None:
    good = write(store, "main", "events", 0, 0)
    for name in ("stray", "main/events/1-2", "main/other/000000-0000000000"):
        store.append(SESSION, name, b"x")
    with caplog.at_level(logging.WARNING, logger="agenttrace"):
        assert kept(store) == good
    warnings = [record for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 1 and "3 segment(s)" in warnings[0].getMessage()


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"not json", "damaged: JSON is malformed"),
        (b"[]", "damaged: Expected `object`"),
        (b"[" * 100_000, "damaged: maximum recursion depth"),
        (b'{"format": "other", "version": 1}', "damaged"),
        (b'{"format": "agenttrace.store.manifest", "version": 2}', "version 2"),
        (
            b'{"format": "agenttrace.store.manifest", "version": 1, '
            b'"lease": {"holder": "h\\nx", "token": "abcdefgh", "epoch": 1, '
            b'"expires_at": 1, "renewed_at": 1}}',
            "$.lease.holder",
        ),
        (
            b'{"format": "agenttrace.store.manifest", "version": 1, '
            b'"lease": {"holder": "h", "token": "abcdefgh", "epoch": 1, '
            b'"expires_at": 1, "renewed_at": 1}}',
            "never taken",
        ),
        (
            b'{"format": "agenttrace.store.manifest", "version": 1, "epochs": ['
            b'{"epoch": 2, "token": "abcdefgh", "holder": "h", "taken_at": 1, "from_seq": {}},'
            b'{"epoch": 1, "token": "abcdefgh", "holder": "h", "taken_at": 1, "from_seq": {}}]}',
            "not in increasing order",
        ),
    ],
)
def test_a_damaged_manifest_is_a_one_line_error(
    store: SessionStore, data: bytes, says: str
) -> None:
    store.swap_manifest(SESSION, data, None)
    with pytest.raises(StoreError, match=r"damaged|version") as refused:
        take(store, SESSION, "host-a:1", TTL, now=Clock())
    message = str(refused.value)
    assert says in message and "\n" not in message and SESSION in message
    with pytest.raises(StoreError) as refused:
        accepted([], store.manifest(SESSION))
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_keys_a_later_writer_adds_are_kept(store: SessionStore) -> None:
    store.swap_manifest(
        SESSION,
        json.dumps(
            {
                "format": "agenttrace.store.manifest",
                "version": 1,
                "lease": None,
                "epochs": [
                    {
                        "epoch": 1,
                        "token": "a" * 32,
                        "holder": "old",
                        "taken_at": 5,
                        "from_seq": {},
                        "note": "kept",
                    }
                ],
                "writers": {"w1": {"host": "x"}},
            }
        ).encode(),
        None,
    )
    clock = Clock(1000.0)
    lease = take(store, SESSION, "host-a:1", TTL, now=clock)
    lease.renew()
    lease.release()
    document = manifest_of(store)
    assert document["writers"] == {"w1": {"host": "x"}}
    assert document["epochs"][0]["note"] == "kept" and lease.epoch == 2


def test_the_renewer_starts_and_stops_with_release(store: SessionStore) -> None:
    lease = take(store, SESSION, "host-a:1", 3600.0, now=Clock())
    lease.start_renewing()
    assert lease.renewing
    lease.release()
    assert not lease.renewing and manifest_of(store)["lease"] is None


@pytest.mark.parametrize(
    ("writer", "kind", "epoch", "seq"),
    [("main", "events", 1, 0), ("w-1.x", "session", 999_999, 9_999_999_999)],
)
def test_a_segment_name_reads_back(writer: str, kind: str, epoch: int, seq: int) -> None:
    parsed = parse_segment_name(segment_name(writer, kind, epoch, seq))
    assert parsed is not None and (parsed.writer, parsed.kind, parsed.epoch, parsed.seq) == (
        writer,
        kind,
        epoch,
        seq,
    )


@pytest.mark.parametrize(
    "args", [("main", "journal", 1, 0), ("../x", "events", 1, 0), ("main", "events", 10**6, 0)]
)
def test_a_name_that_is_not_a_segment_is_refused(args: tuple[str, str, int, int]) -> None:
    with pytest.raises(ValueError, match="not a segment"):
        segment_name(*args)


def test_a_holder_or_ttl_out_of_range_is_refused(store: SessionStore) -> None:
    with pytest.raises(ValueError, match="holder"):
        take(store, SESSION, "two\nlines", TTL)
    with pytest.raises(ValueError, match="ttl"):
        take(store, SESSION, "host-a:1", 0)
    assert store.manifest(SESSION) is None


def test_accepted_without_a_manifest_keeps_epoch_0_and_other_writers() -> None:
    segments = [
        SegmentInfo(segment_name("main", "events", 0, 0), 1),
        SegmentInfo(segment_name("main", "events", 1, 1), 1),
        SegmentInfo(segment_name("w1", "session", 3, 0), 1),
    ]
    assert accepted(segments, None) == [segments[0], segments[2]]
    with pytest.raises(StoreError, match="damaged"):
        accepted(segments, Manifest(b"{}", "1"))
