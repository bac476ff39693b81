"""One module for the times every format spells (agenttrace/_internal/times.py): each contract."""

from __future__ import annotations

import pytest

from agenttrace._internal.times import (
    MAX_EPOCH_NS,
    MAX_MS,
    event_ts,
    iso_ms,
    iso_nanoseconds,
    iso_seconds,
    ms_iso,
    ts_ms,
    ts_nanoseconds,
)

WHEN_NS = 1_795_393_954_350_123_456  # 2026-11-23T00:32:34.350123456Z


def test_an_events_ts_is_written_and_read_back_to_the_millisecond() -> None:
    ts = event_ts(WHEN_NS)
    assert ts == "2026-11-23T00:32:34.350Z"
    assert ts_nanoseconds(ts) == WHEN_NS // 1_000_000 * 1_000_000
    assert ts_ms(ts) == WHEN_NS // 1_000_000
    assert ms_iso(WHEN_NS // 1_000_000) == ts
    # Only that form: another tool's ISO time is not an event's ts.
    for other in ("2026-11-23T00:32:34Z", "2026-11-23T00:32:34.350+00:00", "not a time", ""):
        assert ts_nanoseconds(other) is None
    assert ts_ms(None) is None and ts_ms(5) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-23T00:32:34.350123456Z", WHEN_NS),  # to the nanosecond, no float rounding
        ("2026-11-23T00:32:34.350123456", WHEN_NS),  # no offset: UTC
        ("2026-11-23 01:32:34.350123456+01:00", WHEN_NS),
        ("2026-11-22T23:02:34.350123456-0130", WHEN_NS),
        ("2026-11-23T00:32:34.35Z", WHEN_NS // 10_000_000 * 10_000_000),
        ("1969-12-31T23:59:59Z", 0),  # before the epoch: its first time
        ("9999-12-31T23:59:59Z", MAX_EPOCH_NS),  # past what OTLP carries: its last
        ("2026-02-30T00:00:00Z", None),  # no such day
        ("2026-11-23", None),
        ("x" * 100, None),
        (None, None),
    ],
)
def test_any_iso_8601_time_is_read_exactly(text: object, expected: int | None) -> None:
    assert iso_nanoseconds(text) == expected
    assert iso_ms(text) == (None if expected is None else min(expected // 1_000_000, MAX_MS))


def test_times_past_what_otlp_carries_are_its_last() -> None:
    assert iso_nanoseconds("9999-12-31T23:59:59.999999999Z") <= MAX_EPOCH_NS  # type: ignore[operator]
    assert ms_iso(MAX_MS * 2) == ms_iso(MAX_MS)
    assert ms_iso(-5) == "1970-01-01T00:00:00.000Z"
    assert iso_seconds(WHEN_NS // 1_000_000) == "2026-11-23T00:32:34Z"
    assert iso_seconds(None) is None
