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
from agenttrace._internal.later import recorded_text
from agenttrace._internal.redact import cap_text, scrub_json_text
from agenttrace.model.lifecycle import Ended, Logged, Started
from agenttrace.model.outcome import OpOutcome
from agenttrace.recorder.bare_outcome import bare_outcome
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
        latency = _latency_text((record.ended_ns - started_ns) / 1e6)
        kind = attributes.get(sc.KIND)
        if record.error is not None:
            level = (
                "ERR" if kind == sc.KIND_SESSION and not attributes.get(sc.TXN_PARENT) else "WRN"
            )
            op = _carried_outcome(record)
            if op is not None:  # an op: its outcome says how it failed
                failure = _failure(op.error_type, op.attempt, latency, record.error)
            else:  # a run or a turn: its span does
                error_type, attempt = attributes.get(sc.ERROR_TYPE), attributes.get(sc.ATTEMPT)
                failure = _failure(error_type, attempt, latency, record.error)
            self._write(format_line(attributes, f"{level} {failure}"))
        elif self.mode != "quiet" and kind in (sc.KIND_LLM, sc.KIND_TOOL, sc.KIND_SESSION):
            if kind == sc.KIND_SESSION and (
                attributes.get(sc.GEN_AI_OPERATION_NAME) == sc.OP_INVOKE_AGENT
            ):
                summary = f"VRB agent run ok {latency}"
            else:
                summary = _summary(_outcome_of(record, started_ns, started), latency)
            self._write(format_line(attributes, summary))
        if self._bodies:
            # The bodies from the record: there whether or not content goes on spans.
            bodies = record.payloads if record.payloads is not None else attributes
            for key, label in _BODIES:
                body = recorded_text(bodies.get(key))
                if body is not None:
                    text = cap_text(body, self._max_body_bytes, _as_is)  # scrubbed in _write
                    self._write(format_line(attributes, f"TRC {label} {text}"))


_MAX_REASON = 300


def _as_is(text: str) -> str:
    return text


_BODIES = (
    (sc.GEN_AI_INPUT_MESSAGES, "request"),
    (sc.GEN_AI_OUTPUT_MESSAGES, "response"),
    (sc.GEN_AI_TOOL_CALL_ARGUMENTS, "arguments"),
    (sc.GEN_AI_TOOL_CALL_RESULT, "result"),
)


def _latency_text(latency_ms: float) -> str:
    return f"{latency_ms:.0f}ms"


def _failure(error_type: Any, attempt: Any, latency: str, error: str) -> str:
    what = "failed"
    if error_type:
        what += f" ({error_type})"
    prefix = f"attempt {attempt} " if attempt else ""
    # One line: an exception message may carry a whole traceback (litellm's do).
    description = error.strip().split("\n", 1)[0][:_MAX_REASON]
    return f"{prefix}{what} after {latency}: {description}".rstrip(": ")


def _known(count: Any) -> str:
    return "?" if count is None else str(count)


def _carried_outcome(record: Ended) -> OpOutcome | None:
    """An op's typed outcome, as its record carries it: on its accounting, else (an op
    answered from the journal: nothing was bought) on the record itself; ``None`` for a run, a
    turn, or a record made by hand."""
    if record.accounted is not None:
        return record.accounted.op
    return record.outcome


def _outcome_of(record: Ended, started_ns: int, started: Mapping[str, Any]) -> OpOutcome:
    """The op's typed outcome (:func:`_carried_outcome`), else, for a record made by hand, what
    its start says of it."""
    op = _carried_outcome(record)
    if op is not None:
        return op
    return bare_outcome(started, started_ns, record.ended_ns, record.error)


def _summary(op: OpOutcome, latency: str) -> str:
    """The verbose line of an op that succeeded: an LLM attempt's tokens, first chunk and
    cost, a tool call's input and output sizes."""
    if not op.is_llm:
        chars_in = 0 if op.chars_in is None else op.chars_in
        chars_out = 0 if op.chars_out is None else op.chars_out
        return f"VRB ok {latency}, chars in {chars_in} out {chars_out}"
    parts = [f"VRB ok {latency}", f"attempt {1 if op.attempt is None else op.attempt}"]
    usage = op.usage
    if usage is not None and (usage.input is not None or usage.output is not None):
        parts.append(
            f"tokens in {_known(usage.input)} (cache r {usage.cache_read} w {usage.cache_write}) "
            f"out {_known(usage.output)}"
        )
    else:
        parts.append("no usage")
    ttfc = op.time_to_first_chunk
    if isinstance(ttfc, (int, float)):
        parts.append(f"first chunk {ttfc * 1000:.0f}ms")
    cost = op.cost_usd
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        parts.append(f"${cost:.6f}")
    else:  # a model missing from litellm's price map: unknown, never $0
        parts.append("cost unknown")
    return ", ".join(parts)
