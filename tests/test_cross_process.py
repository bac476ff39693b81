"""Identity that travels: a subprocess started with ``agenttrace.subprocess_env()`` and a task
of ``agenttrace.ProcessPoolExecutor`` (spawn, forkserver, fork) join the trace and the session
of the op that started them.

Every process is real, with a real ``TracerProvider`` of its own exporting to a file the test
reads (``tests/travel_child.py``); the parent's spans are also written there, so one file holds
the whole trace.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import multiprocessing
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import baggage, trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import agenttrace
from agenttrace.tracing import travel
from agenttrace.tracing.env_carrier import join_from_environment
from tests import travel_child
from tests.conftest import Traced

CHILD = Path(travel_child.__file__)
METHODS = multiprocessing.get_all_start_methods()
needs_fork = pytest.mark.skipif("fork" not in METHODS, reason="no fork on this platform")


def _session_runs(sessions: Path, not_id: str) -> list[dict[str, Any]]:
    """The runs of every session file in ``sessions`` but the parent's (``not_id``), and of
    its joined writers' segments (``<not_id>.w/``)."""
    runs: list[dict[str, Any]] = []
    for path in sorted([*sessions.glob("*.json.gz"), *sessions.glob(f"{not_id}.w/*.json.gz")]):
        if path.name != f"{not_id}.json.gz":
            runs.extend(json.loads(gzip.decompress(path.read_bytes()))["runs"])
    return runs


class Parent:
    """The parent side: an agent whose tool hands work to another process."""

    def __init__(self, traced: Traced, tmp_path: Path) -> None:
        self.spans = str(tmp_path / "spans.jsonl")
        traced.provider.add_span_processor(
            SimpleSpanProcessor(travel_child.FileSpanExporter(self.spans))
        )
        self.child_sessions = tmp_path / "child-sessions"
        self.child_sessions.mkdir()
        self.tool_span: Any = None
        self.session_id = agenttrace.current_session().session_id
        self.txn_id = ""

    def run(self, hand_over: Any) -> Any:
        parent = self

        @agenttrace.tool(name="delegate")
        def delegate() -> Any:
            parent.tool_span = trace.get_current_span().get_span_context()
            return hand_over()

        @agenttrace.agent("boss")
        def boss() -> Any:
            parent.txn_id = str(
                dict(trace.get_current_span().attributes)["agenttrace.txn.id"]  # type: ignore[attr-defined]
            )
            return delegate()

        return boss()

    def check_child(
        self, sessions: Path, child_pid: int | None = None, *, segment: bool = False
    ) -> None:
        """One trace; the child's root span under the tool span; its records name the parent's
        session, run and op, and a writer of its own. ``segment``: the child records into the
        parent's sessions directory, so it writes a segment of the parent's session
        (tests/test_session_writers.py), else a session of its own."""
        spans = travel_child.read_spans(self.spans)
        assert len({span["trace_id"] for span in spans}) == 1
        child_roots = [span for span in spans if span["name"] == "invoke_agent helper"]
        assert len(child_roots) == 1
        root = child_roots[0]
        assert root["trace_id"] == format(self.tool_span.trace_id, "032x")
        assert root["parent_span_id"] == format(self.tool_span.span_id, "016x")
        assert root["pid"] != os.getpid()
        if child_pid is not None:
            assert root["pid"] == child_pid
        attributes = root["attributes"]
        assert attributes["agenttrace.ingress.joined.session_id"] == self.session_id
        assert attributes["agenttrace.ingress.joined.parent_txn_id"] == self.txn_id
        assert attributes["agenttrace.ingress.joined.parent_path"] == "1.1"
        writer = attributes["agenttrace.ingress.joined.writer_id"]
        assert writer.endswith(f"-{root['pid']}")
        assert attributes["agenttrace.ingress.joined.parent_writer_id"] == travel.writer_id()
        # One machine: the child's clock is its parent's (its lines merge by their ts alone).
        assert attributes["agenttrace.ingress.joined.clock"] == travel.clock_id()
        assert attributes["agenttrace.ingress.joined.parent_clock"] == travel.clock_id()
        # The child's own session file (or segment), as it was written.
        runs = _session_runs(sessions, self.session_id)
        helpers = [run for run in runs if run["agentName"] == "helper"]
        assert len(helpers) == 1
        # The run's span as recorded: in the parent's trace, under the parent's op.
        assert helpers[0]["traceId"] == root["trace_id"]
        assert helpers[0]["span"]["parentSpanId"] == root["parent_span_id"]
        joined = [run["attributes"]["ingress"] for run in helpers]
        assert joined[0]["source"] == "joined"
        assert joined[0]["joined"]["session_id"] == self.session_id
        assert joined[0]["joined"]["parent_txn_id"] == self.txn_id
        assert joined[0]["joined"]["parent_path"] == "1.1"
        assert joined[0]["joined"]["writer_id"] == writer
        if segment:
            assert [run["sessionId"] for run in runs] == [self.session_id]
        else:
            assert all(run["sessionId"] != self.session_id for run in runs)


def test_inject_carries_the_trace_and_identity_and_extract_reads_them(traced: Traced) -> None:
    carrier: dict[str, str] = {}

    @agenttrace.agent("boss")
    def boss() -> None:
        agenttrace.inject(carrier)

    boss()
    root = traced.exporter.get_finished_spans()[0]
    assert root.context is not None
    assert set(carrier) == {"traceparent", "baggage"}
    context = agenttrace.extract(carrier)
    joined = travel.joined_from(context)
    assert joined is not None
    assert joined.span_context.trace_id == root.context.trace_id
    assert joined.span_context.span_id == root.context.span_id
    assert joined.session_id == agenttrace.current_session().session_id
    assert joined.txn_id == dict(root.attributes or {})["agenttrace.txn.id"]
    assert joined.path == "0"
    assert joined.writer_id == travel.writer_id()


def test_baggage_goes_only_to_allowed_destinations(traced: Traced) -> None:
    carriers: dict[str, dict[str, str]] = {}

    @agenttrace.agent("boss")
    def boss() -> None:
        for destination in ("http://127.0.0.1:8080/x", "http://[::1]/", "https://example.com/"):
            agenttrace.inject(carriers.setdefault(destination, {}), destination=destination)

    boss()
    assert "baggage" in carriers["http://127.0.0.1:8080/x"]
    assert "baggage" in carriers["http://[::1]/"]
    assert set(carriers["https://example.com/"]) == {"traceparent"}
    assert travel.baggage_allowed(None)
    assert not travel.baggage_allowed("https://example.com/")


@pytest.mark.init(baggage_hosts=["Example.COM"])
def test_baggage_hosts_extend_the_allow_list(traced: Traced) -> None:
    assert travel.baggage_allowed("https://example.com:8443/v1")
    assert not travel.baggage_allowed("https://other.example.com/")


def test_init_refuses_baggage_hosts_that_are_not_names() -> None:
    with pytest.raises(TypeError, match="baggage_hosts"):
        agenttrace.init(baggage_hosts="example.com")


def test_subprocess_joins_the_trace_and_session(traced: Traced, tmp_path: Path) -> None:
    parent = Parent(traced, tmp_path)

    def hand_over() -> str:
        env = agenttrace.subprocess_env()
        assert env["TRACEPARENT"].startswith("00-")
        assert "agenttrace.session.id" in env["BAGGAGE"]
        done = subprocess.run(
            [sys.executable, str(CHILD), parent.spans, str(parent.child_sessions)],
            env=env,
            capture_output=True,
            text=True,
            timeout=480,
            check=True,
        )
        return done.stdout

    assert parent.run(hand_over).strip() == "42"
    parent.check_child(parent.child_sessions)


def test_asyncio_subprocess_joins_the_trace_and_session(traced: Traced, tmp_path: Path) -> None:
    parent = Parent(traced, tmp_path)

    async def start() -> bytes:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(CHILD),
            parent.spans,
            str(parent.child_sessions),
            env=agenttrace.subprocess_env(),
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await process.communicate()
        assert process.returncode == 0
        return out

    assert parent.run(lambda: asyncio.run(start())).strip() == b"42"
    parent.check_child(parent.child_sessions)


def test_subprocess_env_drops_a_stale_parent_outside_any_span() -> None:
    env = agenttrace.subprocess_env({"TRACEPARENT": "00-stale", "TRACESTATE": "a=b", "PATH": "/x"})
    assert env == {"PATH": "/x"}


@pytest.mark.parametrize(
    "method",
    [
        "spawn",
        pytest.param(
            "forkserver",
            marks=pytest.mark.skipif("forkserver" not in METHODS, reason="no forkserver here"),
        ),
        pytest.param("fork", marks=needs_fork),
    ],
)
def test_process_pool_task_joins_the_trace_and_session(
    traced: Traced, tmp_path: Path, method: str
) -> None:
    parent = Parent(traced, tmp_path)
    forked = method == "fork"
    # A forked worker inherits the parent's set-up (its provider writes the same file, its
    # sessions go to the parent's directory: it writes a segment of the parent's session); the
    # others set up their own.
    sessions = tmp_path / "sessions" if forked else parent.child_sessions
    pool = agenttrace.ProcessPoolExecutor(
        max_workers=1,
        mp_context=multiprocessing.get_context(method),
        initializer=None if forked else travel_child.set_up,
        initargs=() if forked else (parent.spans, str(parent.child_sessions)),
    )
    with pool:
        value, pid = parent.run(lambda: pool.submit(travel_child.pool_task, 21).result(60))
    assert value == 42
    parent.check_child(sessions, child_pid=pid, segment=forked)


def test_a_joined_process_passes_its_parent_on_outside_its_own_spans(traced: Traced) -> None:
    """A grandchild started outside any span of a joined child still joins the remote op."""
    trace_id, span_id = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    leave = join_from_environment(
        {
            "TRACEPARENT": f"00-{trace_id}-{span_id}-01",
            "BAGGAGE": "agenttrace.session.id=s1,agenttrace.path=1.2,agenttrace.writer.id=w-1",
        }
    )
    try:
        env = agenttrace.subprocess_env({})
    finally:
        leave()
    assert env["TRACEPARENT"] == f"00-{trace_id}-{span_id}-01"
    joined = travel.joined_from(
        agenttrace.extract({"traceparent": env["TRACEPARENT"], "baggage": env["BAGGAGE"]})
    )
    assert joined is not None
    assert (joined.session_id, joined.path, joined.writer_id) == ("s1", "1.2", "w-1")
    assert agenttrace.subprocess_env({}) == {}  # left: nothing joined any more


@needs_fork
def test_pool_map_carries_the_context_of_each_call(traced: Traced, tmp_path: Path) -> None:
    """``map`` submits each chunk through ``submit``: every task runs under the op."""
    parent = Parent(traced, tmp_path)
    pool = agenttrace.ProcessPoolExecutor(
        max_workers=2, mp_context=multiprocessing.get_context("fork")
    )
    with pool:
        results = parent.run(lambda: list(pool.map(travel_child.pool_task, [1, 2, 3])))
    assert [value for value, _ in results] == [2, 4, 6]
    helpers = [
        span
        for span in travel_child.read_spans(parent.spans)
        if span["name"] == "invoke_agent helper"
    ]
    assert len(helpers) == 3
    assert {span["parent_span_id"] for span in helpers} == {
        format(parent.tool_span.span_id, "016x")
    }


@needs_fork
def test_a_forked_worker_keeps_the_session_its_initializer_made(
    traced: Traced, tmp_path: Path
) -> None:
    """Only the session inherited from the parent is dropped, not one the worker made."""
    parent = Parent(traced, tmp_path)
    pool = agenttrace.ProcessPoolExecutor(
        max_workers=1,
        mp_context=multiprocessing.get_context("fork"),
        initializer=travel_child.own_session,
        initargs=("worker-own",),
    )
    with pool:
        parent.run(lambda: pool.submit(travel_child.pool_task, 21).result(60))
    document = json.loads(gzip.decompress((tmp_path / "sessions/worker-own.json.gz").read_bytes()))
    assert [run["agentName"] for run in document["runs"]] == ["helper"]
    assert document["runs"][0]["attributes"]["ingress"]["joined"]["session_id"] == (
        parent.session_id
    )


def test_each_pool_task_carries_the_op_that_submitted_it(traced: Traced, tmp_path: Path) -> None:
    """Per task, not per worker: one worker runs tasks submitted by two different ops."""
    spans = str(tmp_path / "spans.jsonl")
    sessions = tmp_path / "child-sessions"
    sessions.mkdir()
    traced.provider.add_span_processor(SimpleSpanProcessor(travel_child.FileSpanExporter(spans)))
    tool_spans: list[str] = []
    pool = agenttrace.ProcessPoolExecutor(
        max_workers=1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=travel_child.set_up,
        initargs=(spans, str(sessions)),
    )

    @agenttrace.tool(name="delegate")
    def delegate(x: int) -> int:
        tool_spans.append(format(trace.get_current_span().get_span_context().span_id, "016x"))
        value, _ = pool.submit(travel_child.pool_task, x).result(60)
        return int(value)

    @agenttrace.agent("boss")
    def boss() -> int:
        return delegate(1) + delegate(2)

    with pool:
        assert boss() == 6
    helpers = [s for s in travel_child.read_spans(spans) if s["name"] == "invoke_agent helper"]
    assert [s["parent_span_id"] for s in helpers] == tool_spans
    assert len({s["pid"] for s in helpers}) == 1
    assert [s["attributes"]["agenttrace.ingress.joined.parent_path"] for s in helpers] == [
        "1.1",
        "1.2",
    ]


def test_a_malformed_traceparent_is_ignored_with_one_warning(
    traced: Traced, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(travel, "_warned", False)
    with caplog.at_level(logging.WARNING, logger="agenttrace"):
        join_from_environment({"TRACEPARENT": "00-not-a-trace", "BAGGAGE": "x"})()
        join_from_environment({"TRACEPARENT": "garbage"})()
    assert travel.joined_parent() is None
    # agenttrace's one warning (OpenTelemetry's baggage propagator says its own about "x")
    assert [r.getMessage() for r in caplog.records if r.name == "agenttrace"] == [
        "agenttrace: malformed TRACEPARENT in the environment; ignored"
    ]

    @agenttrace.agent("alone")
    def alone() -> None:
        pass

    alone()
    assert traced.exporter.get_finished_spans()[0].parent is None


def test_malformed_baggage_joins_the_trace_without_the_identity(
    traced: Traced, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(travel, "_warned", False)
    trace_id, span_id = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    environ = {
        "TRACEPARENT": f"00-{trace_id}-{span_id}-01",
        "BAGGAGE": "agenttrace.path=not..a..label,agenttrace.session.id=../etc",
    }
    with caplog.at_level(logging.WARNING, logger="agenttrace"):
        leave = join_from_environment(environ)
    try:

        @agenttrace.agent("joined")
        def joined() -> None:
            pass

        joined()
    finally:
        leave()
    ours = [r.getMessage() for r in caplog.records if r.name == "agenttrace"]
    assert len(ours) == 1 and "BAGGAGE" in ours[0]
    span = traced.exporter.get_finished_spans()[0]
    assert span.parent is not None and format(span.parent.span_id, "016x") == span_id
    assert format(span.context.trace_id, "032x") == trace_id  # type: ignore[union-attr]
    attributes = dict(span.attributes or {})
    assert attributes["agenttrace.ingress.source"] == "joined"
    assert "agenttrace.ingress.joined.session_id" not in attributes
    assert baggage.get_all() == {}


def test_a_clock_id_in_baggage_is_16_hex_digits_never_a_host_name() -> None:
    span = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    carrier = {"traceparent": span, "baggage": f"agenttrace.clock={travel.clock_id()}"}
    joined = travel.joined_from(agenttrace.extract(carrier))
    assert joined is not None and joined.clock == travel.clock_id()
    assert len(joined.clock) == 16 and socket.gethostname() not in joined.clock
    carrier["baggage"] = f"agenttrace.clock={socket.gethostname()}.example"
    with pytest.raises(travel.MalformedIdentity, match="not a clock id"):
        travel.joined_from(agenttrace.extract(carrier))
