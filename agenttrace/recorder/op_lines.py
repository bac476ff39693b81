"""The lines a node's end says, at the console's most detailed level: one function, read by the
console (which prints those its mode shows) and by the opTree (which keeps them all on the node,
whatever the console prints: docs/session-file.md, "Logs").

A line is ``(level, text)``: ``WRN``/``ERR`` for a failure, ``VRB`` for the summary of an op (or
an agent run) that succeeded, ``TRC`` for a request or response body. The bodies are made only
when asked for (``bodies``): the opTree does not copy them, its op node holds the same recorded
text as ``request`` and ``response``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agenttrace import semconv as sc
from agenttrace._internal.later import recorded_text
from agenttrace._internal.redact import cap_text
from agenttrace.model.lifecycle import Ended
from agenttrace.model.outcome import OpOutcome
from agenttrace.recorder.bare_outcome import bare_outcome

Line = tuple[str, str]
"""A level (``VRB WRN ERR TRC``) and the text after it."""

_MAX_REASON = 300

_BODIES = (
    (sc.GEN_AI_INPUT_MESSAGES, "request"),
    (sc.GEN_AI_OUTPUT_MESSAGES, "response"),
    (sc.GEN_AI_TOOL_CALL_ARGUMENTS, "arguments"),
    (sc.GEN_AI_TOOL_CALL_RESULT, "result"),
)


def end_lines(
    record: Ended,
    started_ns: int,
    started: Mapping[str, Any],
    attributes: Mapping[str, Any],
    max_body_bytes: int | None = None,
) -> list[Line]:
    """What the end of the node whose span started at ``started_ns`` with ``started`` says:
    its failure, else its summary (an LLM attempt, a tool call, an agent run), then, with
    ``max_body_bytes``, its bodies, each capped at that. ``attributes``: its start's attributes
    with its end's over them."""
    lines: list[Line] = []
    latency = _latency_text((record.ended_ns - started_ns) / 1e6)
    kind = attributes.get(sc.KIND)
    if record.error is not None:
        level = "ERR" if kind == sc.KIND_SESSION and not attributes.get(sc.TXN_PARENT) else "WRN"
        op = _carried_outcome(record)
        if op is not None:  # an op: its outcome says how it failed
            failure = _failure(op.error_type, op.attempt, latency, record.error)
        else:  # a run or a turn: its span does
            error_type, attempt = attributes.get(sc.ERROR_TYPE), attributes.get(sc.ATTEMPT)
            failure = _failure(error_type, attempt, latency, record.error)
        lines.append((level, failure))
    elif kind in (sc.KIND_LLM, sc.KIND_TOOL, sc.KIND_SESSION):
        if kind == sc.KIND_SESSION and (
            attributes.get(sc.GEN_AI_OPERATION_NAME) == sc.OP_INVOKE_AGENT
        ):
            lines.append(("VRB", f"agent run ok {latency}"))
        else:
            lines.append(("VRB", _summary(_outcome_of(record, started_ns, started), latency)))
    if max_body_bytes is not None:
        # The bodies from the record: there whether or not content goes on spans.
        bodies = record.payloads if record.payloads is not None else attributes
        for key, label in _BODIES:
            body = recorded_text(bodies.get(key))
            if body is not None:
                lines.append(("TRC", f"{label} {cap_text(body, max_body_bytes, _as_is)}"))
    return lines


def _as_is(text: str) -> str:
    return text


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
    """The line of an op that succeeded: an LLM attempt's tokens, first chunk and cost, a tool
    call's input and output sizes."""
    if not op.is_llm:
        chars_in = 0 if op.chars_in is None else op.chars_in
        chars_out = 0 if op.chars_out is None else op.chars_out
        return f"ok {latency}, chars in {chars_in} out {chars_out}"
    parts = [f"ok {latency}", f"attempt {1 if op.attempt is None else op.attempt}"]
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
