"""One module for the times every format spells (agenttrace/_internal/times.py): each contract."""

from __future__ import annotations

import importlib.util
import sys
import threading
from collections.abc import Callable
from datetime import datetime, timezone
from types import FrameType
from typing import Any

import pytest

from agenttrace._internal import times
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


def lines_of(function: Callable[..., Any]) -> list[int]:
    """The lines of ``function``'s body that run code, in order."""
    return sorted({line for _, _, line in function.__code__.co_lines() if line is not None})


def paused_at(line: int, function: Callable[[Any], Any], argument: Any, meanwhile: Any) -> Any:
    """``function(argument)`` in a thread of its own, stopped before it runs ``line`` (or once it
    returned, if it never reaches it); ``meanwhile()`` runs in this thread while it waits there.
    Returns what the call returned. The thread waits on events, not on time: the interleaving
    is the same on every run."""
    code = function.__code__
    reached, go_on = threading.Event(), threading.Event()
    returned: list[Any] = []

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code is not code or reached.is_set():
            return None
        if event == "line" and frame.f_lineno == line:
            reached.set()
            go_on.wait()
        elif event == "return":
            reached.set()
        return trace

    def call() -> None:
        sys.settrace(trace)
        try:
            returned.append(function(argument))
        finally:
            sys.settrace(None)

    thread = threading.Thread(target=call)
    thread.start()
    try:
        reached.wait()
        meanwhile()
    finally:
        go_on.set()
        thread.join()
    return returned[0]


FIRST_NS = WHEN_NS
NEXT_NS = WHEN_NS + 1_000_000_000  # the next second


def written_ts(time_ns: int) -> str:
    """An event's ``ts``, spelled by datetime rather than by the module under test."""
    moment = datetime.fromtimestamp(time_ns // 1_000_000_000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{time_ns // 1_000_000 % 1000:03d}Z"


@pytest.mark.parametrize("line", lines_of(event_ts))
def test_threads_in_two_seconds_never_get_each_others_date_text(line: int) -> None:
    # The cache holds the next second; a thread formats the first and is stopped at each line
    # in turn while this thread formats both: every ts is its own time's, whatever the order.
    assert event_ts(NEXT_NS) == written_ts(NEXT_NS)
    seen: list[str] = []
    first = paused_at(
        line, event_ts, FIRST_NS, lambda: seen.extend([event_ts(NEXT_NS), event_ts(FIRST_NS)])
    )
    assert seen == [written_ts(NEXT_NS), written_ts(FIRST_NS)]
    assert first == written_ts(FIRST_NS)
    assert [event_ts(FIRST_NS), event_ts(NEXT_NS)] == [written_ts(FIRST_NS), written_ts(NEXT_NS)]


@pytest.mark.parametrize("line", lines_of(ts_nanoseconds))
def test_threads_reading_two_seconds_never_get_each_others_seconds(line: int) -> None:
    first, following = written_ts(FIRST_NS), written_ts(NEXT_NS)
    expected = {
        first: FIRST_NS // 1_000_000 * 1_000_000,
        following: NEXT_NS // 1_000_000 * 1_000_000,
    }
    assert ts_nanoseconds(following) == expected[following]
    seen: list[int | None] = []
    read = paused_at(
        line,
        ts_nanoseconds,
        first,
        lambda: seen.extend([ts_nanoseconds(following), ts_nanoseconds(first)]),
    )
    assert seen == [expected[following], expected[first]]
    assert read == expected[first]
    assert [ts_nanoseconds(first), ts_nanoseconds(following)] == [
        expected[first],
        expected[following],
    ]


def test_the_first_ts_a_process_writes_is_whole_even_at_the_epoch() -> None:
    # A fresh copy of the module: its cache as a process starts with it.
    spec = importlib.util.spec_from_file_location("fresh_times", times.__file__)
    assert spec is not None and spec.loader is not None
    fresh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fresh)
    assert fresh.event_ts(0) == "1970-01-01T00:00:00.000Z"
