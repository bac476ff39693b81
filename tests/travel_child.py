"""The other side of tests/test_cross_process.py: a real process that sets up its own tracer
provider, exporting every span as a JSON line to a file the test reads, and runs an agent.

Run as a script (``python tests/travel_child.py SPANS SESSIONS``) it is a subprocess started
with ``agenttrace.subprocess_env()``; imported, :func:`set_up` is a process pool's initializer
and :func:`pool_task` the task submitted to it.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

import agenttrace


class FileSpanExporter(SpanExporter):
    """Appends each span as one JSON line (ids as hex) to ``path``: one ``write`` per line on
    a file opened for appending, so several processes can share it."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = []
        for span in spans:
            context = span.get_span_context()
            assert context is not None
            lines.append(
                json.dumps(
                    {
                        "name": span.name,
                        "trace_id": format(context.trace_id, "032x"),
                        "span_id": format(context.span_id, "016x"),
                        "parent_span_id": format(span.parent.span_id, "016x")
                        if span.parent is not None
                        else None,
                        "pid": os.getpid(),
                        "kind": span.kind.name,
                        "attributes": dict(span.attributes or {}),
                    }
                )
                + "\n"
            )
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, "".join(lines).encode())
        finally:
            os.close(fd)
        return SpanExportResult.SUCCESS


def read_spans(path: str) -> list[dict[str, object]]:
    """Every span the processes exported to ``path``."""
    with open(path, encoding="utf-8") as file:
        return [json.loads(line) for line in file]


def set_up(spans: str, sessions: str) -> None:
    """A worker's (or a child's) own provider, exporting to ``spans``, and agenttrace on it."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(spans)))
    agenttrace.init(
        tracer_provider=provider,
        console="quiet",
        sessions_dir=sessions,
        billing_file=os.path.join(sessions, "accounting.jsonl"),
    )


def own_session(session_id: str) -> None:
    """A forked worker's initializer that starts a session of its own choosing."""
    agenttrace.new_session(session_id)


@agenttrace.tool
def double(x: int) -> int:
    """A tool the helper calls, so its run has an op of its own."""
    return 2 * x


@agenttrace.agent("helper")
def helper(x: int) -> int:
    """The sub-agent that runs in the other process."""
    return double(x)


def pool_task(x: int) -> tuple[int, int]:
    """What a pool runs: the helper agent, and the worker's pid."""
    return helper(x), os.getpid()


if __name__ == "__main__":
    set_up(sys.argv[1], sys.argv[2])
    print(helper(21))
    agenttrace.shutdown()
