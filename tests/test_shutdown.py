"""A dead collector costs the exit at most the shutdown budget, and one warning says how many
spans were dropped; agenttrace's own outputs are written whatever the collector does.

Two dead collectors, both real sockets on 127.0.0.1: a port that refuses connections (the OTLP
HTTP exporter retries with backoff), and a server that accepts, reads and never answers.
Timings are asserted only as generous upper bounds (budget + 5 s).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

import agenttrace
from agenttrace._internal.config import DEFAULT_SHUTDOWN_TIMEOUT, Settings
from agenttrace.formats.session.files import read_session_file, snapshot_path, stream_path

from .helpers import child_env
from .otlp_receiver import OTLPReceiver

MARGIN = 5.0
"""Seconds allowed on top of the budget: process start-up and teardown on a loaded machine."""


class SilentCollector:
    """A TCP server on 127.0.0.1 that accepts connections, reads what comes, and never answers."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        self.got_data = threading.Event()
        """Set once a request's first bytes arrived."""
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except OSError:
                return  # closed
            with self._lock:
                if self._closed:
                    connection.close()
                    return
                self._connections.append(connection)
            threading.Thread(target=self._read, args=(connection,), daemon=True).start()

    def _read(self, connection: socket.socket) -> None:
        try:
            while connection.recv(65536):
                self.got_data.set()
        except OSError:
            pass

    def close(self) -> None:
        """Stop listening and close every connection (what was blocked on them ends)."""
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, []
        self._server.close()
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()


class RefusingPort:
    """A port on 127.0.0.1 bound but not listening: every connection is refused, and no other
    process can take the port while the test runs."""

    def __init__(self) -> None:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"

    def close(self) -> None:
        self._socket.close()


@pytest.fixture(params=["refused", "silent"])
def dead_collector(request: pytest.FixtureRequest) -> Iterator[SilentCollector | RefusingPort]:
    collector = RefusingPort() if request.param == "refused" else SilentCollector()
    yield collector
    collector.close()


def warning_pattern(url: str) -> str:
    return rf"agenttrace: (\d+) of (\d+) spans were not exported to {re.escape(url)}: "


# -- the setting -------------------------------------------------------------------------------


def test_the_budget_comes_from_agenttrace_then_the_otlp_timeout_then_the_default(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert Settings.resolve({}).shutdown_timeout == DEFAULT_SHUTDOWN_TIMEOUT
    assert Settings.resolve({"OTEL_EXPORTER_OTLP_TIMEOUT": "7"}).shutdown_timeout == 7.0
    both = {"OTEL_EXPORTER_OTLP_TIMEOUT": "7", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "2.5"}
    assert Settings.resolve(both).shutdown_timeout == 2.5
    ours = {**both, "AGENTTRACE_SHUTDOWN_TIMEOUT": "0.5"}
    assert Settings.resolve(ours).shutdown_timeout == 0.5
    assert Settings.resolve(ours, shutdown_timeout=9).shutdown_timeout == 9.0
    assert Settings.resolve({"AGENTTRACE_SHUTDOWN_TIMEOUT": "0"}).shutdown_timeout == 0.0
    # A value that is not seconds is said once and skipped, down to the next source.
    with caplog.at_level(logging.WARNING, logger="agenttrace"):
        bad = {"AGENTTRACE_SHUTDOWN_TIMEOUT": "soon", "OTEL_EXPORTER_OTLP_TIMEOUT": "4"}
        assert Settings.resolve(bad).shutdown_timeout == 4.0
        assert Settings.resolve({"AGENTTRACE_SHUTDOWN_TIMEOUT": "-1"}).shutdown_timeout == 3.0
        assert Settings.resolve({"OTEL_EXPORTER_OTLP_TIMEOUT": "nan"}).shutdown_timeout == 3.0
    said = [r.getMessage() for r in caplog.records if r.name == "agenttrace"]
    assert said == [
        "agenttrace: AGENTTRACE_SHUTDOWN_TIMEOUT='soon' is not seconds >= 0; ignoring it",
        "agenttrace: AGENTTRACE_SHUTDOWN_TIMEOUT='-1' is not seconds >= 0; ignoring it",
    ]
    for wrong in (-1, float("inf"), float("nan"), "3"):
        with pytest.raises(ValueError, match="shutdown_timeout must be seconds >= 0"):
            Settings.resolve({}, shutdown_timeout=wrong)


# -- explicit shutdown, in this process --------------------------------------------------------


def init_exporting(
    tmp_path: Path,
    endpoint: str,
    shutdown_timeout: float,
    provider: TracerProvider | None = None,
) -> agenttrace.Tracing:
    """agenttrace exporting to ``endpoint`` with the ``shutdown_timeout`` budget, its files in
    ``tmp_path``, on ``provider`` (default: a new one), litellm left alone."""
    return agenttrace.init(
        tracer_provider=provider if provider is not None else TracerProvider(),
        endpoint=endpoint,
        shutdown_timeout=shutdown_timeout,
        sessions_dir=tmp_path / "sessions",
        billing_file=tmp_path / "accounting.jsonl",
        instrument_litellm=False,
    )


def traced_work(runs: int) -> None:
    @agenttrace.tool
    def last() -> int:
        return 1

    @agenttrace.agent("Exiting")
    def run() -> None:
        last()

    for _ in range(runs):
        run()


@pytest.mark.slow  # waits out real back-offs and time-outs: make test, not make check
def test_explicit_shutdown_with_a_dead_collector_waits_the_budget_and_counts(
    dead_collector: SilentCollector | RefusingPort,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # export at once, not in 5 s
    agenttrace.use_session(None)
    handle = init_exporting(tmp_path, dead_collector.url, 1)
    session = agenttrace.new_session("dead-collector")
    traced_work(4)
    if isinstance(dead_collector, SilentCollector):
        # An export is in flight, waiting for an answer that never comes.
        assert dead_collector.got_data.wait(30)
    with caplog.at_level(logging.WARNING, logger="agenttrace"):
        started = time.monotonic()
        agenttrace.shutdown()
        elapsed = time.monotonic() - started
    assert elapsed < 1 + MARGIN
    said = [r.getMessage() for r in caplog.records if r.name == "agenttrace"]
    assert len(said) == 1, said
    found = re.match(warning_pattern(dead_collector.url), said[0])
    assert found and found.groups() == ("12", "12"), said[0]  # 4 runs of 3 spans
    assert said[0].endswith(
        "not taken within the 1 s shutdown budget "
        "(AGENTTRACE_SHUTDOWN_TIMEOUT or init(shutdown_timeout=...) sets it)"
    )
    assert handle.export is not None and handle.export.exported == 0
    # Our own outputs did not wait for the collector, and are whole.
    loaded = read_session_file(snapshot_path(tmp_path / "sessions", session.session_id))
    assert [run["success"] for run in loaded.runs] == [True] * 4


def test_an_exporter_that_gives_up_within_the_budget_is_counted_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exporter's own timeout (0.5 s) is shorter than the budget (30 s): it gives up on the
    refused port before the budget runs out, and the warning says so rather than blaming it."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "0.5")
    port = RefusingPort()
    try:
        init_exporting(tmp_path, port.url, 30)
        traced_work(2)
        with caplog.at_level(logging.WARNING, logger="agenttrace"):
            started = time.monotonic()
            agenttrace.shutdown()
            elapsed = time.monotonic() - started
    finally:
        port.close()
    assert elapsed < 0.5 + MARGIN
    said = [r.getMessage() for r in caplog.records if r.name == "agenttrace"]
    assert len(said) == 1, said
    found = re.match(warning_pattern(port.url) + "(.*)", said[0])
    assert found and found.groups() == (
        "6",
        "6",
        "the exporter or a full queue dropped them (OpenTelemetry's messages say why)",
    ), said[0]


def test_spans_a_full_queue_dropped_are_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch processor holds 4 spans here; the other spans it drops count as dropped too."""
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "4")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2")
    collector = SilentCollector()
    provider = TracerProvider()
    try:
        init_exporting(tmp_path, collector.url, 0.5, provider=provider)
        tracer = provider.get_tracer("app")
        tracer.start_span("first").end()
        assert collector.got_data.wait(30)  # the export thread is stuck on it
        for n in range(40):
            tracer.start_span(f"span {n}").end()
        with caplog.at_level(logging.WARNING, logger="agenttrace"):
            agenttrace.shutdown()
    finally:
        collector.close()
    said = [r.getMessage() for r in caplog.records if r.name == "agenttrace"]
    assert len(said) == 1, said
    found = re.match(warning_pattern(collector.url), said[0])
    assert found and found.groups() == ("41", "41"), said[0]


@pytest.mark.slow  # waits out real back-offs and time-outs: make test, not make check
def test_force_flush_with_a_silent_collector_keeps_to_its_timeout(tmp_path: Path) -> None:
    collector = SilentCollector()
    try:
        handle = init_exporting(tmp_path, collector.url, 0.5)
        traced_work(1)
        started = time.monotonic()
        assert handle.force_flush(timeout_millis=500) is False
        assert time.monotonic() - started < 0.5 + MARGIN
        assert collector.got_data.is_set()  # it did try
    finally:
        agenttrace.shutdown()
        collector.close()


def flush_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "agenttrace-export-flush"]


@pytest.mark.slow  # waits out real back-offs and time-outs: make test, not make check
def test_force_flush_with_a_refused_port_keeps_to_the_budget_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exporter would retry the refused port for ~31 s (a 60 s OTLP timeout); force_flush
    waits the 2 s budget, says the spans are not exported yet, and leaves them to the
    exporter's retries: once a collector listens on that port they arrive, and the next
    force_flush says all is exported."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "60")
    port = RefusingPort()
    receiver = None
    try:
        handle = init_exporting(tmp_path, port.url, 2)
        traced_work(2)
        before = set(flush_threads())  # of tests before, maybe not ended yet
        started = time.monotonic()
        assert agenttrace.force_flush() is False
        assert time.monotonic() - started < 2 + MARGIN  # not the exporter's 31 s of retries
        # Flushing again waits on the flush still retrying: no second thread behind it.
        assert agenttrace.force_flush() is False and agenttrace.force_flush() is False
        assert len(set(flush_threads()) - before) == 1
        assert handle.export is not None
        assert (handle.export.given, handle.export.exported) == (6, 0)
        port.close()
        receiver = OTLPReceiver(http_port=int(port.url.rsplit(":", 1)[1])).start()
        assert len(receiver.wait_for(6, timeout=480)) == 6  # the exporter's next retry
        assert agenttrace.force_flush() is True
        assert handle.export.exported == 6
    finally:
        agenttrace.shutdown()
        port.close()
        if receiver is not None:
            receiver.stop()


def test_force_flush_says_when_the_exporter_gave_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exporter gives up on the refused port within its 0.5 s timeout, long before the
    budget: the flush finished, but the spans were not exported, and it says so."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "0.5")
    port = RefusingPort()
    try:
        handle = init_exporting(tmp_path, port.url, 30)
        traced_work(1)
        assert agenttrace.force_flush() is False
        assert handle.export is not None and handle.export.exported == 0
    finally:
        agenttrace.shutdown()
        port.close()


def test_a_live_collector_gets_every_span_and_nothing_is_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = OTLPReceiver().start()
    try:
        handle = init_exporting(tmp_path, receiver.http_endpoint, 30)
        traced_work(5)
        with caplog.at_level(logging.WARNING, logger="agenttrace"):
            agenttrace.shutdown()
        assert len(receiver.wait_for(15)) == 15
    finally:
        receiver.stop()
    assert handle.export is not None
    assert (handle.export.given, handle.export.exported) == (15, 15)
    assert [r for r in caplog.records if r.name == "agenttrace"] == []


# -- at exit, in a child process ---------------------------------------------------------------

CHILD = """
import time, agenttrace
agenttrace.init()
session = agenttrace.new_session("dead-collector")

@agenttrace.tool
def last():
    return 1

@agenttrace.agent("Exiting")
def run():
    last()

for _ in range(RUNS):
    run()
print(session.session_id, time.time(), flush=True)
# no shutdown: the exit hook does it
"""
RUNS = 20


def exit_after_work(tmp_path: Path, **env: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Seconds from the end of the child's work to its exit, and what it printed."""
    full_env = child_env(
        AGENTTRACE_SESSIONS_DIR=str(tmp_path / "sessions"),
        AGENTTRACE_BILLING_FILE=str(tmp_path / "accounting.jsonl"),
        **env,
    )
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHILD).replace("RUNS", str(RUNS))],
        env=full_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=480,
    )
    exited = time.time()
    assert result.returncode == 0, result.stderr
    work_done = float(result.stdout.split()[1])
    return exited - work_done, result


@pytest.mark.e2e
def test_exit_with_a_dead_collector_takes_the_default_budget_and_says_why(
    dead_collector: SilentCollector | RefusingPort, tmp_path: Path
) -> None:
    elapsed, result = exit_after_work(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=dead_collector.url)
    print(f"\n{type(dead_collector).__name__}: exit {elapsed:.2f} s after the work")
    assert elapsed < DEFAULT_SHUTDOWN_TIMEOUT + MARGIN, result.stderr
    found = re.findall(warning_pattern(dead_collector.url) + "(.*)", result.stderr)
    assert len(found) == 1, result.stderr
    assert found[0][:2] == (str(3 * RUNS), str(3 * RUNS))
    assert found[0][2].startswith("not taken within the 3 s shutdown budget")
    # Our own outputs came first and are whole: every run in the session file, every tool
    # call in the ledger, the stream readable.
    sessions = tmp_path / "sessions"
    session_id = result.stdout.split()[0]
    loaded = read_session_file(snapshot_path(sessions, session_id))
    assert [run["success"] for run in loaded.runs] == [True] * RUNS
    ledger = [json.loads(line) for line in (tmp_path / "accounting.jsonl").read_text().splitlines()]
    assert [entry["providerLabel"] for entry in ledger] == ["last"] * RUNS
    stream = read_session_file(stream_path(sessions, session_id))
    assert stream.torn is None and [e["event_type"] for e in stream.events] == ["agent_created"]


@pytest.mark.parametrize(
    ("env", "budget"),
    [
        ({"OTEL_EXPORTER_OTLP_TIMEOUT": "1"}, "1"),
        ({"OTEL_EXPORTER_OTLP_TIMEOUT": "60", "AGENTTRACE_SHUTDOWN_TIMEOUT": "1.5"}, "1.5"),
        # Metrics to the same dead collector share the budget (they do not add their own).
        ({"OTEL_METRICS_EXPORTER": "otlp", "AGENTTRACE_SHUTDOWN_TIMEOUT": "1"}, "1"),
    ],
    ids=["OTEL_EXPORTER_OTLP_TIMEOUT", "AGENTTRACE_SHUTDOWN_TIMEOUT wins", "with metrics"],
)
@pytest.mark.e2e
def test_exit_keeps_to_the_budget_the_environment_sets(
    tmp_path: Path, env: dict[str, str], budget: str
) -> None:
    collector = SilentCollector()
    try:
        elapsed, result = exit_after_work(
            tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=collector.url, **env
        )
    finally:
        collector.close()
    assert elapsed < float(budget) + MARGIN, result.stderr
    assert f"not taken within the {budget} s shutdown budget" in result.stderr
