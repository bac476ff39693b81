"""Fixtures: a real TracerProvider with an in-memory exporter, and the local LLM server."""

from __future__ import annotations

import os
import tempfile

# Before litellm or agenttrace is imported: offline cost map, and internal errors re-raised.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
# A home of the suite's own: whatever falls back to ~/.agenttrace (here and in the processes
# the tests start) never touches the real one.
os.environ["HOME"] = tempfile.mkdtemp(prefix="agenttrace-test-home-")
os.environ["AGENTTRACE_RAISE_INTERNAL_ERRORS"] = "1"
for _name in list(os.environ):
    if _name.startswith(("AGENTTRACE_", "OTEL_")) and _name != "AGENTTRACE_RAISE_INTERNAL_ERRORS":
        del os.environ[_name]
# A suite started by a traced process (a CI step under a tracer) would join its trace: init()
# reads these (docs/how-to/cross-process.md); the tests that want them set them themselves.
for _name in ("TRACEPARENT", "TRACESTATE", "BAGGAGE"):
    os.environ.pop(_name, None)

import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agenttrace

from .chromium import CHROMIUM, MISSING, Chromium
from .fork_server import Forks
from .fuzz.tally import KEY as FUZZ_TALLY
from .fuzz.tally import merged as merged_fuzz_tallies
from .fuzz.tally import summary_lines as fuzz_summary_lines
from .helpers import cli_fork_server, journal_fork_server
from .llm_server import LLMServer


@dataclass
class Traced:
    """What a traced test sees: the finished spans and the console output."""

    exporter: InMemorySpanExporter
    provider: TracerProvider
    console: io.StringIO
    handle: agenttrace.Tracing

    def output(self) -> str:
        """The console lines so far (after the background worker has caught up)."""
        self.handle.force_flush()
        return self.console.getvalue()

    def spans(self) -> list[ReadableSpan]:
        self.handle.force_flush()
        return sorted(self.exporter.get_finished_spans(), key=lambda s: s.start_time or 0)

    def ours(self) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.attributes and "agenttrace.kind" in s.attributes]

    def by_name(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.by_name(name)
        assert len(found) == 1, f"expected one span {name!r}, got {[s.name for s in self.spans()]}"
        return found[0]

    def tree(self) -> list[str]:
        """Spans as indented ``name [path]`` lines, children under parents, in start order."""
        spans = self.spans()
        children: dict[int | None, list[ReadableSpan]] = {}
        ids = {s.context.span_id for s in spans}
        for span in spans:
            parent = span.parent.span_id if span.parent and span.parent.span_id in ids else None
            children.setdefault(parent, []).append(span)
        lines: list[str] = []

        def walk(parent: int | None, depth: int) -> None:
            for span in children.get(parent, []):
                path = (span.attributes or {}).get("agenttrace.path")
                lines.append("  " * depth + span.name + (f" [{path}]" if path else ""))
                walk(span.context.span_id, depth + 1)

        walk(None, 0)
        return lines


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def outcome(span: ReadableSpan) -> str:
    """``failed`` if the span's status is ERROR, else ``ok`` (no attribute repeats it)."""
    return "failed" if span.status.status_code.name == "ERROR" else "ok"


def duration_ms(span: ReadableSpan) -> float:
    """The span's duration from its own times, in milliseconds."""
    return ((span.end_time or 0) - (span.start_time or 0)) / 1e6


@pytest.fixture
def traced(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Traced]:
    """agenttrace initialised on a fresh provider; ``@pytest.mark.console("verbose")`` etc."""
    marker = request.node.get_closest_marker("console")
    init_kwargs = request.node.get_closest_marker("init")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    console = io.StringIO()
    agenttrace.use_session(None)  # each test records into a session of its own
    handle = agenttrace.init(
        tracer_provider=provider,
        console=marker.args[0] if marker else "quiet",
        console_stream=console,
        sessions_dir=tmp_path / "sessions",
        billing_file=tmp_path / "accounting.jsonl",
        **(init_kwargs.kwargs if init_kwargs else {}),
    )
    try:
        yield Traced(exporter, provider, console, handle)
    finally:
        handle.shutdown()
        provider.shutdown()


@pytest.fixture(scope="session")
def llm_server() -> Iterator[LLMServer]:
    server = LLMServer().start()
    yield server
    server.stop()


@pytest.fixture
def llm(llm_server: LLMServer) -> LLMServer:
    """The local LLM server, with an empty script and no recorded requests."""
    llm_server.reset()
    return llm_server


@pytest.fixture(scope="module")
def cli_forks() -> Iterator[Forks]:
    """The ``agenttrace`` command forked from a server that imported what it reads sessions
    with (``helpers.cli_fork_server``; ``test_cli.forked_agenttrace`` runs it), one server per
    test file that asks: the file's tests that run the command as a user does use a new
    interpreter instead."""
    with cli_fork_server() as forks:
        yield forks


@pytest.fixture(scope="module")
def journal_forks() -> Iterator[Forks]:
    """tests/journal_child.py's shop agent (killed, resumed) forked from a server that imported
    what it imports (``helpers.journal_fork_server``), one per test file that asks; the kill
    points are SIGKILLs of the process wherever it runs (tests/test_steps_journal.py runs the
    child in new interpreters)."""
    with journal_fork_server() as forks:
        yield forks


@pytest.fixture
def mcp_sdk_spans_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mcp SDK's own client spans (``MCP send tools/call ...``) not recorded in this process,
    whatever the suite did before: the SDK takes its tracer from the global provider, which an
    earlier test may have set (then its client span sits between the tool span and the server's,
    in a provider the test cannot read), or not. As in an application with no global provider."""
    otel = pytest.importorskip("mcp.shared._otel")
    monkeypatch.setattr(otel, "_tracer", trace.NoOpTracer())


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Chromium]:
    """Headless Chromium with a profile of its own (``tests/chromium.py``), closed after the
    test; a failure, not a skip, where it is not installed (``make test`` installs it)."""
    if not CHROMIUM.exists():
        pytest.fail(MISSING)
    chromium = Chromium(tmp_path / "profile")
    try:
        yield chromium
    finally:
        chromium.close()


_FUZZ_TALLIES: list[dict[str, Any]] = []
"""The fuzz tallies xdist workers handed over (tests/fuzz/conftest.py), for the run's end."""


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """On the xdist controller: keep what a finished worker's fuzz cases tallied."""
    tally = getattr(node, "workeroutput", {}).get(FUZZ_TALLY)
    if tally:
        _FUZZ_TALLIES.append(tally)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    """Under xdist, the fuzz suite's tally added up over the workers (one process prints its
    own, in tests/fuzz/conftest.py)."""
    if _FUZZ_TALLIES:
        for line in fuzz_summary_lines(*merged_fuzz_tallies(_FUZZ_TALLIES)):
            terminalreporter.write_line(line)
