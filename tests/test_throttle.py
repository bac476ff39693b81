"""The write throttle of the documents rebuilt whole (``agenttrace.recorder.throttle``): the
session file and the live STD-008 document space their writes with it.

A clock the test moves and a scheduler that runs a timer only when the test says: nothing here
waits or depends on how fast the machine is.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agenttrace.recorder.throttle import KEYS_KEPT, WriteThrottle


class Clock:
    """A monotonic clock that moves only when the test moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Timers:
    """A scheduler that keeps each timer until :meth:`fire` runs it."""

    def __init__(self) -> None:
        self.scheduled: list[tuple[float, Callable[[], None]]] = []

    def schedule(self, delay: float, fn: Callable[[], None]) -> None:
        self.scheduled.append((delay, fn))

    @property
    def delays(self) -> list[float]:
        return [delay for delay, _ in self.scheduled]

    def fire(self) -> None:
        """Run the oldest timer (as the worker would once its delay is past)."""
        _, fn = self.scheduled.pop(0)
        fn()


class Owner:
    """What a sink gives the throttle: its writes, each noted with what it took."""

    def __init__(self, took: float = 0.0) -> None:
        self.clock = Clock()
        self.timers = Timers()
        self.took = took
        self.writes: list[tuple[str, str]] = []
        self.throttle: WriteThrottle[str] = WriteThrottle(
            lambda key: self.write("now", key),
            lambda key: self.write("later", key),
            min_interval=0.25,
            cost_factor=20.0,
            clock=self.clock,
        )
        self.throttle.attach(self.timers)

    def write(self, how: str, key: str) -> None:
        self.writes.append((how, key))
        self.throttle.wrote(key, self.took)


def test_the_first_change_is_written_at_once() -> None:
    owner = Owner()
    owner.throttle.request("a")
    assert owner.writes == [("now", "a")]
    assert owner.timers.scheduled == []


def test_changes_inside_the_interval_are_written_once_when_it_has_passed() -> None:
    owner = Owner()
    owner.throttle.request("a")
    owner.clock.now += 0.1
    owner.throttle.request("a")
    owner.throttle.request("a")
    assert owner.writes == [("now", "a")]
    assert owner.timers.delays == [pytest.approx(0.15)]  # one timer, at the interval's end
    assert owner.throttle.pending("a")
    owner.clock.now += 0.15
    owner.timers.fire()
    assert owner.writes == [("now", "a"), ("later", "a")]
    assert not owner.throttle.pending("a")


def test_a_change_after_the_interval_is_written_at_once() -> None:
    owner = Owner()
    owner.throttle.request("a")
    owner.clock.now += 0.25
    owner.throttle.request("a")
    assert owner.writes == [("now", "a"), ("now", "a")]
    assert owner.timers.scheduled == []


def test_a_costly_write_puts_the_next_off_by_cost_factor_times_its_duration() -> None:
    owner = Owner(took=0.1)  # 20 x 0.1 s: 2 s, more than the 0.25 s interval
    owner.throttle.request("a")
    owner.clock.now += 1.0
    owner.throttle.request("a")
    assert owner.timers.delays == [pytest.approx(1.0)]
    owner.clock.now += 1.0
    owner.timers.fire()
    owner.clock.now += 1.9  # the timer's write took 0.1 s too: the next waits 2 s again
    owner.throttle.request("a")
    assert owner.writes == [("now", "a"), ("later", "a")]
    assert owner.timers.delays == [pytest.approx(0.1)]


def test_each_document_has_its_own_interval() -> None:
    owner = Owner()
    owner.throttle.request("a")
    owner.throttle.request("a")  # waits
    owner.throttle.request("b")  # never written: at once
    assert owner.writes == [("now", "a"), ("now", "b")]
    assert owner.timers.delays == [pytest.approx(0.25)]
    assert owner.throttle.pending("a") and not owner.throttle.pending("b")


def test_without_a_scheduler_every_change_is_written_at_once() -> None:
    writes: list[str] = []
    throttle: WriteThrottle[str] = WriteThrottle(writes.append, writes.append, clock=Clock())
    for _ in range(3):
        throttle.request("a")
        throttle.wrote("a", 1.0)
    assert writes == ["a", "a", "a"]


def test_a_write_that_raises_on_the_timer_does_not_stop_later_writes() -> None:
    """The exception reaches the scheduler (the worker reports it, as any consumer failure);
    the timer's slot is free again, so the next change is written in turn."""
    owner = Owner()
    owner.throttle.request("a")
    owner.throttle.request("a")
    failing = [RuntimeError("disk on fire")]

    def write_later(key: str) -> None:
        if failing:
            raise failing.pop()
        owner.write("later", key)

    owner.throttle.write_later = write_later
    owner.clock.now += 0.25
    with pytest.raises(RuntimeError, match="disk on fire"):
        owner.timers.fire()
    assert not owner.throttle.pending("a")
    owner.throttle.request("a")  # written in turn
    assert owner.writes == [("now", "a"), ("now", "a")]
    owner.throttle.request("a")
    owner.clock.now += 0.25
    owner.timers.fire()
    assert owner.writes == [("now", "a"), ("now", "a"), ("later", "a")]


def test_a_failed_write_is_tried_again_after_the_delay_with_one_timer() -> None:
    owner = Owner()
    owner.throttle.retry("a", 1.0)
    owner.throttle.retry("a", 1.0)  # a second failure before the retry: still one timer
    owner.throttle.request("a")  # the retry's timer will write this change too
    assert owner.writes == []
    assert owner.timers.delays == [1.0]
    owner.clock.now += 1.0
    owner.timers.fire()
    assert owner.writes == [("later", "a")]


def test_a_retry_with_a_timer_pending_schedules_no_second_one() -> None:
    owner = Owner()
    owner.throttle.request("a")
    owner.throttle.request("a")  # a timer for the interval's end
    owner.throttle.retry("a", 1.0)  # a forced write (force_flush) failed meanwhile
    assert owner.timers.delays == [pytest.approx(0.25)]
    assert owner.throttle.pending("a")


def test_a_forgotten_document_starts_afresh() -> None:
    owner = Owner(took=1.0)
    owner.throttle.request("a")
    owner.throttle.request("a")
    assert owner.throttle.pending("a")
    owner.throttle.forget("a")
    assert not owner.throttle.pending("a")
    owner.throttle.request("a")
    assert owner.writes == [("now", "a"), ("now", "a")]


def test_past_write_times_are_dropped_and_future_ones_kept() -> None:
    """Past ``KEYS_KEPT`` documents, the throttle forgets those whose next write may come at
    once anyway (its memory stays bounded in a process of many sessions); one still held back
    stays held back."""
    owner = Owner()
    owner.took = 1.0
    owner.throttle.request("slow")  # held back 20 s
    owner.took = 0.0
    for index in range(KEYS_KEPT):
        owner.throttle.request(f"s{index}")
    owner.clock.now += 1.0
    owner.throttle.request("last")
    assert len(owner.throttle._next_allowed) == 2  # "slow" and "last"
    owner.throttle.request("slow")
    owner.throttle.request("s0")
    assert owner.timers.delays == [pytest.approx(19.0)]
    assert owner.writes[-1] == ("now", "s0")
