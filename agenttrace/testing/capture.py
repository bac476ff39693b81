"""``capturing``: agenttrace set up for one test and torn down after it, the one place the
``agent_trace`` fixture does both: with the test's cassette entered inside it, when it has one,
and its session linted at its end, when asked.

What is deterministic, and what is not:

- the normal form (``CapturedRun.tree``, ``.snapshot``) has no ids and no times at all: it is the
  same from run to run of the same agent;
- the session's id is the one given (the fixture gives the test's name), and agent and message
  ids count from 1 in it (``agent_001``, ``msg_001``), as in any new session;
- OpenTelemetry trace and span ids, and the txn ids of later runs and sub-agents, stay random:
  agenttrace and the OpenTelemetry SDK take them to be unique in a process, and a test process
  runs many tests; span and event times are the clock's (``SpanQuery``'s duration conditions
  read them).

The settings that change what is captured are pinned rather than read from the environment
(a developer's ``AGENTTRACE_CAPTURE_CONTENT`` or ``OTEL_SDK_DISABLED`` does not change a test),
and ``AGENTTRACE_SESSIONS_URL`` is ignored, so a test never ships its sessions to a store.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agenttrace.testing.captured import CapturedRun

if TYPE_CHECKING:
    from agenttrace.testing.cassettes import UseCassette
    from agenttrace.testing.lint_gate import LintGate

PINNED: dict[str, Any] = {
    "console": "quiet",
    "capture_content": True,
    "disabled": False,
    "redacted_save": False,
    "openinference": False,
    "input_deltas": True,
    "journal": True,
    "propagate_threads": True,
    "service_name": "agenttrace-test",
}
"""``init`` arguments the capture gives unless told otherwise: content on spans (a tool's
arguments are what a trajectory is compared on), no console lines, the defaults of the rest."""


class AlreadyTracing(RuntimeError):
    """agenttrace was initialised before the capture (``agenttrace.init()`` at import time, say):
    its spans would go to that provider, not the test's."""


@contextmanager
def capturing(
    directory: str | Path,
    session_id: str = "test",
    *,
    cassette: UseCassette | None = None,
    lint: LintGate | None = None,
    **init_arguments: Any,
) -> Iterator[CapturedRun]:
    """Set agenttrace up on a fresh ``TracerProvider`` with an in-memory exporter, the sessions
    directory and ledger in ``directory``, and a new session ``session_id``; yield what it
    captures; tear it all down (the session made current before is not restored: none is).
    The run yielded can still be read after the block.

    ``cassette`` (``agenttrace.testing.use_cassette(...)``, not entered): the block runs inside
    it, after ``agenttrace.init``, and the run yielded describes the cassette's session (the
    one recorded, or the replay's). ``lint``: its thresholds are the run's ``lint()``'s; it is
    called with the run when the block (and the cassette) ended without an error, before
    anything is torn down.

    ``init_arguments`` go to ``agenttrace.init`` over :data:`PINNED`. Raises
    :class:`AlreadyTracing` when ``agenttrace.init`` was called before and not shut down.
    """
    # Imported here, not at the top: loading the pytest plugin must not load the SDK.
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import agenttrace

    directory = Path(directory)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    arguments: dict[str, Any] = {
        **PINNED,
        "sessions_dir": directory / "sessions",
        "billing_file": directory / "ledger.jsonl",
        "console_stream": io.StringIO(),
        **init_arguments,
        "tracer_provider": provider,
    }
    agenttrace.use_session(None)
    store = os.environ.pop("AGENTTRACE_SESSIONS_URL", None)
    try:
        tracing = agenttrace.init(**arguments)
    finally:
        if store is not None:
            os.environ["AGENTTRACE_SESSIONS_URL"] = store
    if tracing.provider is not provider:
        provider.shutdown()
        raise AlreadyTracing(
            "agenttrace.init() was called before this test and not shut down, so its spans go "
            "to that provider: call agenttrace.init() in your entry point, not at import time "
            "(or shut its handle down before the test)"
        )
    # Made now, not at the first write: a cassette's replay takes the lease of its session in
    # it before anything is written there.
    Path(arguments["sessions_dir"]).mkdir(parents=True, exist_ok=True)
    captured = CapturedRun(
        tracing,
        exporter,
        agenttrace.new_session(session_id),
        Path(arguments["sessions_dir"]),
        Path(arguments["billing_file"]),
    )
    if lint is not None:
        captured.lint_settings = lint.settings
    try:
        if cassette is None:
            yield captured
        else:
            with cassette as used:
                # The cassette's session is current only inside it: the run keeps it after.
                captured.use_session(used.session)
                yield captured
        if lint is not None:
            lint(captured)
    finally:
        captured.close()  # still readable after the block, as it was at its end
        try:
            tracing.shutdown()
        finally:
            provider.shutdown()
            agenttrace.use_session(None)
