"""agenttrace._internal.finalizers: work to do when an object is collected runs on one thread of
ours, in order, never in the thread whose allocation started the collection."""

from __future__ import annotations

import gc
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agenttrace._internal import errors
from agenttrace._internal.finalizers import drain, on_collect

from .helpers import in_forked_child

WAIT = 60.0  # a hang guard only: every wait below ends as soon as its work is done


class Thing:
    """Something to collect."""


def _seen_on_thread(seen: list[tuple[str, str]], name: str) -> None:
    seen.append((name, threading.current_thread().name))


def test_work_queued_by_collections_runs_in_order_on_the_finalizer_thread() -> None:
    seen: list[tuple[str, str]] = []
    things = [Thing() for _ in range(3)]
    for name, thing in zip("abc", things, strict=True):
        on_collect(thing, _seen_on_thread, seen, name)
    del thing
    for _ in range(3):
        things.pop(0)  # collected now (no cycle), "a" first
    gc.collect()
    assert drain(WAIT) is True
    assert seen == [(name, "agenttrace-finalizers") for name in "abc"]


def test_a_detached_finalizer_queues_nothing() -> None:
    seen: list[tuple[str, str]] = []
    thing = Thing()
    on_collect(thing, _seen_on_thread, seen, "detached").detach()
    del thing
    gc.collect()
    assert drain(WAIT) is True
    assert seen == []


def _fail() -> None:
    raise ValueError("a bug in a finalizer")


def test_a_failure_is_raised_by_the_next_drain_under_the_suite_and_the_rest_runs() -> None:
    seen: list[tuple[str, str]] = []
    failing, after = Thing(), Thing()
    on_collect(failing, _fail)
    on_collect(after, _seen_on_thread, seen, "after")
    del failing, after
    with pytest.raises(ValueError, match="a bug in a finalizer"):
        drain(WAIT)
    assert seen == [("after", "agenttrace-finalizers")]
    assert drain(WAIT) is True  # raised once


def test_a_failure_is_logged_once_outside_the_suite_and_the_thread_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(errors, "raise_internal_errors", False)
    errors.reset_reported()
    seen: list[tuple[str, str]] = []
    things = [Thing(), Thing(), Thing()]
    on_collect(things[0], _fail)
    on_collect(things[1], _fail)
    on_collect(things[2], _seen_on_thread, seen, "after")
    with caplog.at_level(logging.WARNING, logger="agenttrace"):
        things.clear()
        assert drain(WAIT) is True
    warnings = [r.getMessage() for r in caplog.records if "a bug in a finalizer" in r.getMessage()]
    assert len(warnings) == 1 and "a finalizer (_fail)" in warnings[0]
    assert seen == [("after", "agenttrace-finalizers")]


def test_a_drain_from_queued_work_does_not_wait_for_itself() -> None:
    answers: list[bool] = []
    thing = Thing()
    on_collect(thing, lambda: answers.append(drain(WAIT)))
    del thing
    assert drain(WAIT) is True
    assert answers == [False]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_forked_child_runs_its_own_work_on_a_thread_of_its_own() -> None:
    seen: list[tuple[str, str]] = []
    release = threading.Event()
    blocker, parents = Thing(), Thing()
    on_collect(blocker, release.wait, WAIT)  # the parent's thread is busy while it forks...
    on_collect(parents, _seen_on_thread, seen, "queued in the parent")
    del blocker, parents  # ... and its queue holds this

    def in_the_child() -> tuple[bool, list[tuple[str, str]]]:
        # the parent's work is not its own, and a new thread does its own
        childs = Thing()
        on_collect(childs, _seen_on_thread, seen, "child")
        del childs
        return drain(WAIT), seen

    report = in_forked_child(in_the_child)
    release.set()
    assert drain(WAIT) is True
    assert report == repr((True, [("child", "agenttrace-finalizers")]))
    assert seen == [("queued in the parent", "agenttrace-finalizers")]


_AT_EXIT = """
import sys
from agenttrace._internal.finalizers import on_collect

class Thing:
    pass

def say(what):
    with open(sys.argv[1], "a") as out:
        out.write(what + "\\n")

kept, left = Thing(), Thing()
on_collect(kept, say, "kept to the exit")
on_collect(left, say, "not at exit").atexit = False
"""


def test_at_exit_the_work_of_finalizers_left_runs_unless_their_site_said_not(
    tmp_path: Path,
) -> None:
    said = tmp_path / "said.txt"
    subprocess.run([sys.executable, "-c", _AT_EXIT, str(said)], check=True, timeout=WAIT)
    assert said.read_text() == "kept to the exit\n"
