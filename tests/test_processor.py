"""The deferred worker and the processor that feeds lifecycle records to the sinks.

No test here waits on a thread's luck: every wait is on an event the code under test sets, with a
generous timeout that only matters when the code is broken.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from agenttrace._internal import errors as internal_errors
from agenttrace.formats.ledger import Accounted
from agenttrace.model.lifecycle import (
    BEFORE_CALL_GOES_ON,
    SOON,
    WHENEVER,
    Ended,
    EventLogged,
    Journaled,
    Logged,
    Started,
)
from agenttrace.recorder.store import EventStreamSink
from agenttrace.recorder.worker import Worker
from agenttrace.sdk.processor import AgentTraceProcessor, Sink, _Deferred
from agenttrace.session.state import Session

from .conftest import Traced
from .helpers import in_forked_child

WAIT = 30.0  # seconds; only reached when something is broken


def started(label: str) -> Started:
    return Started("origin", label, "tool", f"execute_tool {label}", 1, 1, 1, None, {})


def ended(label: str) -> Ended:
    return Ended("origin", label, 2, {})


# --- the worker -----------------------------------------------------------------------------


def test_items_are_consumed_in_order_off_the_callers_thread() -> None:
    seen: list[tuple[int, str]] = []
    worker = Worker(lambda item: seen.append((item, threading.current_thread().name)))
    for i in range(1000):
        worker.put(i)
    assert worker.flush(WAIT) is True
    assert [i for i, _ in seen] == list(range(1000))
    assert {name for _, name in seen} == {"agenttrace-worker"}
    worker.stop()


def test_items_are_consumed_without_a_flush_whether_the_thread_lingers_or_sleeps() -> None:
    consumed = {name: threading.Event() for name in ("first", "lingering", "asleep")}
    worker = Worker(lambda item: consumed[item].set())
    worker.put("first")
    assert consumed["first"].wait(WAIT)
    worker.put("lingering")  # the thread has just drained: no wake-up, it takes it as it lingers
    assert consumed["lingering"].wait(WAIT)
    deadline = time.monotonic() + WAIT
    while not worker._idle and time.monotonic() < deadline:  # its linger ended: it sleeps
        time.sleep(0.001)
    assert worker._idle
    worker.put("asleep")  # this put wakes it
    assert consumed["asleep"].wait(WAIT)
    worker.stop()


def test_flush_times_out_while_the_consumer_is_stuck() -> None:
    release = threading.Event()
    entered = threading.Event()

    def consume(item: Any) -> None:
        entered.set()
        release.wait(WAIT)

    worker = Worker(consume)
    worker.put("stuck")
    assert entered.wait(WAIT)
    assert worker.flush(timeout=0.05) is False  # does not hang the caller
    release.set()
    assert worker.flush(WAIT) is True
    worker.stop()


def test_stop_consumes_what_is_queued_and_later_items_inline() -> None:
    seen: list[tuple[str, str]] = []
    worker = Worker(lambda item: seen.append((item, threading.current_thread().name)))
    worker.put("before")
    assert worker.stop(WAIT) is True
    worker.put("after")  # the thread is gone: consumed in the caller, nothing is lost
    assert seen == [("before", "agenttrace-worker"), ("after", threading.current_thread().name)]


def test_scheduled_items_come_after_their_delay() -> None:
    done = threading.Event()
    seen: list[str] = []

    def consume(item: str) -> None:
        seen.append(item)
        if item == "later":
            done.set()

    worker = Worker(consume)
    worker.schedule(0.05, "later")
    worker.put("now")
    assert done.wait(WAIT)
    assert seen == ["now", "later"]
    worker.stop()


def test_stop_drops_scheduled_items() -> None:
    seen: list[str] = []
    worker = Worker(seen.append)
    worker.schedule(3600, "an hour from now")
    worker.put("now")
    worker.stop(WAIT)
    assert seen == ["now"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_forked_child_starts_with_an_empty_queue_and_its_own_thread() -> None:
    seen: list[str] = []
    block = threading.Event()

    def consume(item: str) -> None:
        if item == "block":
            block.wait(WAIT)
        seen.append(item)

    worker = Worker(consume)
    worker.put("block")  # the parent's thread is busy; its queue holds "queued in the parent"
    worker.put("queued in the parent")

    def in_the_child() -> tuple[bool, list[str]]:
        # the parent's items are not its own, and a new thread works
        worker.put("child")
        return worker.flush(WAIT), seen

    report = in_forked_child(in_the_child)
    block.set()
    worker.flush(WAIT)
    assert report == repr((True, ["child"]))
    assert seen == ["block", "queued in the parent"]
    worker.stop()


def test_a_failing_consumer_is_raised_by_the_next_flush_under_the_suite() -> None:
    def consume(item: Any) -> None:
        raise ValueError("a bug in a sink")

    worker = Worker(consume)
    worker.put(1)
    with pytest.raises(ValueError, match="a bug in a sink"):
        worker.flush(WAIT)
    assert worker.flush(WAIT) is True  # reported once
    worker.stop()


# --- the processor ---------------------------------------------------------------------------


class Recording(Sink):
    takes = frozenset({Started, Ended, EventLogged})

    def __init__(self, durable: bool = False) -> None:
        self.durable = durable
        self.seen: list[tuple[str, str, str]] = []
        self.flushed = 0
        self.shut = 0

    def consume(self, records: Any) -> None:
        thread = threading.current_thread().name
        for record in records:
            if type(record) is EventLogged:
                self.seen.append(("event", str(record.event["message_id"]), thread))
            else:
                self.seen.append((type(record).__name__.lower(), record.label, thread))

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.flushed += 1
        return True

    def shutdown(self) -> None:
        self.shut += 1


def test_records_reach_sinks_in_order_durable_events_at_once() -> None:
    stream, tree = Recording(durable=True), Recording()
    processor = AgentTraceProcessor((stream, tree))
    caller = threading.current_thread().name
    processor.record(started("1"))
    processor.record(EventLogged(None, {"message_id": "msg_001"}, b"{}\n"))
    # The durable sink has the event before record() returned, in the caller's thread.
    assert [e for e in stream.seen if e[0] == "event"] == [("event", "msg_001", caller)]
    processor.record(ended("1"))
    assert processor.force_flush() is True
    assert [entry[:2] for entry in tree.seen] == [
        ("started", "1"),
        ("event", "msg_001"),
        ("ended", "1"),
    ]
    assert {entry[2] for entry in tree.seen} == {"agenttrace-worker"}
    assert tree.flushed == stream.flushed == 1
    processor.shutdown()


def test_records_no_sink_takes_are_never_queued() -> None:
    class OnlyEnds(Sink):
        takes = frozenset({Ended})

        def __init__(self) -> None:
            self.ends = 0

        def consume(self, records: Any) -> None:
            self.ends += len(records)

    sink = OnlyEnds()
    processor = AgentTraceProcessor((sink,))
    processor.record(started("1"))
    processor.record(Logged("origin", "1", "agenttrace.log", 1, {}))
    assert processor.worker.pending == 0  # nothing wants them: not even queued
    processor.record(ended("1"))
    processor.force_flush()
    assert sink.ends == 1
    processor.shutdown()


def test_a_failing_sink_is_reported_once_and_the_others_go_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(internal_errors, "raise_internal_errors", False)
    internal_errors.reset_reported()

    class Broken(Sink):
        takes = frozenset({Ended})

        def consume(self, records: Any) -> None:
            raise RuntimeError("broken sink")

    good = Recording()
    processor = AgentTraceProcessor((Broken(), good))
    with caplog.at_level(logging.WARNING, logger="agenttrace"):
        for label in ("1", "2", "3"):
            processor.record(ended(label))
        assert processor.force_flush() is True
    assert [label for _, label, _ in good.seen] == ["1", "2", "3"]
    warnings = [r for r in caplog.records if "broken sink" in r.getMessage()]
    assert len(warnings) == 1
    processor.shutdown()


def test_the_providers_flush_and_shutdown_reach_our_sinks() -> None:
    sink = Recording()
    processor = AgentTraceProcessor((sink,))
    provider = TracerProvider()
    provider.add_span_processor(processor)
    processor.record(ended("1"))
    assert provider.force_flush() is True
    assert sink.seen[0][:2] == ("ended", "1") and sink.flushed == 1
    provider.shutdown()
    assert sink.shut == 1
    processor.record(ended("2"))  # after shutdown: ignored, no error
    processor.shutdown()  # twice is safe
    assert sink.shut == 1 and len(sink.seen) == 1


def test_a_sink_comes_after_the_sinks_it_reads_from(tmp_path: Path) -> None:
    # The session file reads the runs the opTree sink builds from the same record: before it,
    # it would find a run not placed yet, or one already completed and gone.
    from agenttrace.recorder.optree_builder import OpTreeSink
    from agenttrace.recorder.store import SessionFileSink

    optree = OpTreeSink(spool_dir=tmp_path)
    session_file = SessionFileSink(tmp_path, optree)
    assert session_file.reads_from() == (optree,)
    with pytest.raises(ValueError, match="SessionFileSink reads what OpTreeSink builds"):
        AgentTraceProcessor((session_file, optree))
    with pytest.raises(ValueError, match="add that sink to the processor before it"):
        AgentTraceProcessor((session_file,))  # an opTree elsewhere is no better
    refused = AgentTraceProcessor((optree,))
    with pytest.raises(ValueError):
        refused.add_sink(SessionFileSink(tmp_path, OpTreeSink(spool_dir=tmp_path)))
    assert refused.sinks == (optree,)  # nothing half added
    refused.shutdown()
    processor = AgentTraceProcessor((optree, session_file))
    assert processor.sinks == (optree, session_file)
    processor.shutdown()


def test_the_sinks_init_assembles_come_after_those_they_read_from(traced: Traced) -> None:
    sinks = traced.handle.processor.sinks
    for index, sink in enumerate(sinks):
        assert all(read in sinks[:index] for read in sink.reads_from()), sink
    assert any(sink.reads_from() for sink in sinks)  # the session file's, at least


# --- durability: the record says where and when it is written ---------------------------------


class _Blocked:
    """Holds the processor's worker on a task until released (so nothing it would write is)."""

    def __init__(self, processor: AgentTraceProcessor) -> None:
        self.running, self.release = threading.Event(), threading.Event()
        processor.worker.put(_Deferred(self._hold))
        assert self.running.wait(WAIT)

    def _hold(self) -> None:
        self.running.set()
        self.release.wait(WAIT)


def _stream(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


def test_a_records_durability_decides_where_the_stream_writes_it(tmp_path: Path) -> None:
    session = Session("durable")
    stream = EventStreamSink(tmp_path)
    processor = AgentTraceProcessor((stream,))
    path = tmp_path / "durable.events.jsonl"
    blocked = _Blocked(processor)
    processor.record(Journaled(session, b'{"state":"outcome"}\n', WHENEVER))
    processor.record(Journaled(session, b'{"state":"soon"}\n', SOON))
    assert _stream(path) == b""  # the worker has them, and it is busy
    processor.record(Journaled(session, b'{"state":"intent"}\n', BEFORE_CALL_GOES_ON))
    # On disk as record() returns, with the worker still blocked: after the SOON line emitted
    # before it (the WHENEVER one waits for the worker).
    assert _stream(path) == b'{"state":"soon"}\n{"state":"intent"}\n'
    blocked.release.set()
    assert processor.force_flush() is True
    assert _stream(path) == b'{"state":"soon"}\n{"state":"intent"}\n{"state":"outcome"}\n'
    processor.shutdown()


def _open_descriptors(path: Path) -> int:
    """How many of this process's file descriptors are open on ``path``."""
    fds = Path("/proc/self/fd")
    return sum(os.path.realpath(fd) == str(path.resolve()) for fd in fds.iterdir())


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd (Linux)")
# A hang guard: before the fix the collection below waited for ever for a lock its own thread
# held (seen in make test: a worker stuck in EventStreamSink._release under _appender).
@pytest.mark.timeout(120)
def test_a_session_collected_while_the_stream_sink_holds_its_lock_does_not_hang(
    tmp_path: Path,
) -> None:
    stream = EventStreamSink(tmp_path)
    processor = AgentTraceProcessor((stream,))
    gone = Session("gone")
    processor.record(Journaled(gone, b'{"state":"intent"}\n', BEFORE_CALL_GOES_ON))
    path = tmp_path / "gone.events.jsonl"
    assert _open_descriptors(path) == 1
    collected = weakref.ref(gone)
    # A collection can start at any allocation, also on a thread writing another session's
    # line under the sink's lock: the gone session's finalizer then runs there.
    with stream._lock:
        del gone
        gc.collect()
    assert collected() is None
    # Its stream is closed by the next holder of the lock: the next write.
    processor.record(Journaled(Session("next"), b'{"state":"intent"}\n', BEFORE_CALL_GOES_ON))
    assert _open_descriptors(path) == 0
    assert path.read_bytes() == b'{"state":"intent"}\n'
    processor.shutdown()


def test_durable_sinks_get_soon_records_once_in_order_from_either_thread() -> None:
    caller = threading.current_thread().name
    durable, later = _Seen(durable=True), _Seen()
    processor = AgentTraceProcessor((durable, later))
    blocked = _Blocked(processor)
    processor.record(Journaled(None, b"free 1\n", SOON))
    processor.record(Journaled(None, b"free 2\n", SOON))
    processor.record(Journaled(None, b"paid\n", BEFORE_CALL_GOES_ON))
    processor.record(Journaled(None, b"free 3\n", SOON))
    processor.record(Journaled(None, b"done\n", WHENEVER))
    # The two free ones went with the paid one, in one call, in the caller's thread.
    assert durable.calls == [([b"free 1\n", b"free 2\n", b"paid\n"], caller)]
    blocked.release.set()
    assert processor.force_flush() is True
    assert durable.calls[1:] == [
        ([b"free 3\n"], "agenttrace-worker"),
        ([b"done\n"], "agenttrace-worker"),
    ]
    # A sink that is not durable gets every record on the worker, one at a time, in order.
    assert later.calls == [
        ([line], "agenttrace-worker")
        for line in (b"free 1\n", b"free 2\n", b"paid\n", b"free 3\n", b"done\n")
    ]
    processor.shutdown()


def test_a_record_waits_only_for_the_soon_records_of_its_own_type() -> None:
    caller = threading.current_thread().name
    durable = _Seen(durable=True)
    processor = AgentTraceProcessor((durable,))
    blocked = _Blocked(processor)
    processor.record(Journaled(None, b"free\n", SOON))
    processor.record(EventLogged(None, {}, b"event\n"))  # an event: not after accounting
    assert durable.calls == [([b"event\n"], caller)]
    blocked.release.set()
    assert processor.force_flush() is True
    assert durable.calls[1:] == [([b"free\n"], "agenttrace-worker")]
    processor.shutdown()


def test_an_ended_records_durability_follows_what_its_op_can_cost() -> None:
    def accounted(inline: bool) -> Any:
        return Accounted(None, "2023-11-14T22:13:21.234Z", inline=inline, make=lambda: None)  # type: ignore[arg-type,return-value]

    assert Ended("o", "0", 1, {}).durability is WHENEVER  # a run's end
    assert Ended("o", "1", 1, {}, accounted=accounted(False)).durability is SOON
    assert Ended("o", "1", 1, {}, accounted=accounted(True)).durability is BEFORE_CALL_GOES_ON


class _Seen(Sink):
    takes = frozenset({Journaled, EventLogged})

    def __init__(self, durable: bool = False) -> None:
        self.durable = durable
        self.calls: list[tuple[list[bytes], str]] = []

    def consume(self, records: Any) -> None:
        lines = [r.encoded() if type(r) is Journaled else r.line for r in records]
        self.calls.append((lines, threading.current_thread().name))
