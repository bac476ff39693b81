"""Console lines on stderr: ``[txn:<originTxnId>] <path> <kind>/<id>: <message>``.

The format is the same at every verbosity (docs/path-labels.md); the mode only decides how much
is printed:

- ``quiet`` (default): warnings and errors only: WRN/ERR logs, failed LLM attempts, tools, runs.
- ``verbose``: also one summary line per LLM attempt and tool call (latency, tokens, sizes, cost;
  ``no usage`` and ``cost unknown`` when the call reported no tokens or its model has no price),
  and VRB/THK/FIN logs.
- ``trace``: also the request and response bodies (capped and redacted, as on the span), and TRC.

Every line is grep-able by the run's origin txn id and maps to exactly one opTree node by path.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TextIO

from agenttrace import semconv as sc
from agenttrace._internal.capture import Output, captures
from agenttrace._internal.config import ConsoleMode, Settings
from agenttrace._internal.redact import scrub_json_text
from agenttrace.model.lifecycle import Ended, Logged, Started
from agenttrace.recorder.op_lines import end_lines
from agenttrace.recorder.sink import RecordwiseSink

_QUIET_LEVELS = frozenset({"WRN", "ERR"})
_VERBOSE_LEVELS = _QUIET_LEVELS | {"VRB", "THK", "FIN"}
_TRACE_LEVELS = _VERBOSE_LEVELS | {"TRC"}


def node_id(attributes: Mapping[str, Any]) -> str:
    """``<kind>/<id>`` for a span: ``llm/openai:gpt-4o``, ``tool/search``, ``session/Jack``."""
    kind = attributes.get(sc.KIND, "?")
    if kind == sc.KIND_LLM:
        provider = attributes.get(sc.GEN_AI_PROVIDER_NAME)
        model = attributes.get(sc.GEN_AI_REQUEST_MODEL, "?")
        return f"llm/{provider}:{model}" if provider else f"llm/{model}"
    if kind == sc.KIND_TURN:
        return f"turn/{attributes.get(sc.TURN_INDEX, '?')}"
    if attributes.get(sc.GEN_AI_OPERATION_NAME) == sc.OP_EXECUTE_TOOL:
        return f"{kind}/{attributes.get(sc.GEN_AI_TOOL_NAME, '?')}"
    return f"{kind}/{attributes.get(sc.GEN_AI_AGENT_NAME, '?')}"


def format_line(attributes: Mapping[str, Any], message: str) -> str:
    """One console line for the node whose span has ``attributes``."""
    return (
        f"[txn:{attributes.get(sc.TXN_ORIGIN, '-')}] {attributes.get(sc.PATH, '-')} "
        f"{node_id(attributes)}: {message}"
    )


class ConsoleSink(RecordwiseSink):
    """Writes console lines for agenttrace's scopes and logs to a stream (stderr by default)."""

    def __init__(
        self,
        mode: ConsoleMode = "quiet",
        stream: TextIO | Callable[[], TextIO] | None = None,
        max_body_bytes: int = 16384,
    ) -> None:
        self.mode = mode
        self._stream = stream
        self._lock = threading.Lock()
        self._levels = {
            "quiet": _QUIET_LEVELS,
            "verbose": _VERBOSE_LEVELS,
            "trace": _TRACE_LEVELS,
        }[mode]
        self._max_body_bytes = max_body_bytes
        # The request and response bodies: content, so the one rule says whether they show.
        self._bodies = captures(Output.CONSOLE, Settings(console=mode))
        # Each open scope's start and start attributes, by (origin, label): a line names its node.
        self._open: dict[tuple[str, str], tuple[int, Mapping[str, Any]]] = {}

    def _write(self, line: str) -> None:
        """Write one line: the console's boundary, where the redaction policy is applied (the
        records it reads were made outbound by their scopes; this holds for any line)."""
        line = scrub_json_text(line)
        stream = self._stream
        if stream is None:
            stream = sys.stderr  # looked up each time: tests and apps may swap it
        elif callable(stream):
            stream = stream()
        with self._lock:
            stream.write(line + "\n")
            stream.flush()

    handlers: ClassVar[dict[type, str]] = {Started: "_started", Ended: "_ended", Logged: "_logged"}

    def _started(self, record: Started) -> None:
        self._open[(record.origin, record.label)] = (record.started_ns, record.attributes)

    def _logged(self, record: Logged) -> None:
        opened = self._open.get((record.origin, record.label))
        if opened is None:
            return
        started = opened[1]
        attributes = record.attributes
        if record.name == sc.EVENT_LOG:
            level = attributes.get(sc.LOG_LEVEL, "VRB")
            if level in self._levels:
                self._write(format_line(started, f"{level} {attributes.get(sc.LOG_MESSAGE, '')}"))
        elif record.name == sc.EVENT_REASONING and "THK" in self._levels:
            text = str(attributes.get(sc.REASONING_TEXT, ""))
            self._write(format_line(started, f"THK {text}"))

    def _ended(self, record: Ended) -> None:
        opened = self._open.pop((record.origin, record.label), None)
        if opened is None or (record.error is None and self.mode == "quiet"):
            return  # quiet: only failures are printed
        started_ns, started = opened
        attributes = {**started, **record.attributes}
        # The lines the opTree keeps too (op_lines): printed here as this mode shows them.
        bodies = self._max_body_bytes if self._bodies else None
        for level, text in end_lines(record, started_ns, started, attributes, bodies):
            if level == "TRC" or level in self._levels:  # bodies: when content shows (above)
                self._write(format_line(attributes, f"{level} {text}"))  # scrubbed in _write
