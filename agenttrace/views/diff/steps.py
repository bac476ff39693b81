"""What one step of a recorded run asked and got, read from its opTree node and the step
journal, in the shape two runs' steps are compared in.

An LLM attempt's request is its model, the parameters its span recorded, and the messages the
op's node keeps (``request.payload``: those new since the agent's last request, with how many it
sent and skipped; the session file keeps them whatever the spans carry); what a recording does
not keep (parameters no span attribute holds, the tools offered; every message of an op that
kept none) only its journal intent's fingerprint, which hashes the whole request, tells.
Its response is the assistant message the node keeps (``response.payload``), else the
journal's exact response. A tool call's arguments are its journal intent's (the canonical JSON
its fingerprint hashes), else the node's; its result is its journal ``done`` line's, else the
node's. Ids and times a provider makes up on every call (a response's or a tool call's id, its
creation time) and the usage (compared as deltas) are left out of an LLM exchange, so two
recordings of one conversation compare equal.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from msgspec import UNSET

from agenttrace.formats.session.optree import children, finite_number, hosted_sessions
from agenttrace.model.journal_lines import Step, journal_lines
from agenttrace.semconv import (
    ATTEMPT,
    GEN_AI_REQUEST_MODEL,
    INPUT_MESSAGES_SKIPPED,
    REQUEST_MESSAGES,
)

MADE_UP_KEYS = frozenset(
    {"id", "tool_call_id", "created", "usage", "system_fingerprint", "response_ms"}
)
"""Keys left out of an LLM request or response, at any depth: made up by the provider on every
call (ids, times) or compared elsewhere (usage)."""

MAX_NESTING = 64
"""Values nested deeper are kept as they are (a hostile file may nest thousands)."""


@dataclass(frozen=True)
class JournalStep:
    """The journal's lines of one step: its intent, and its outcome (``done`` or ``failed``)."""

    intent: Step | None = None
    outcome: Step | None = None


class JournalIndex:
    """A session's step journal by (run, label, attempt)."""

    def __init__(self, journal: Iterable[Mapping[str, Any]]) -> None:
        self._steps: dict[tuple[str, str], dict[int, JournalStep]] = {}
        self._served: set[tuple[str, str]] = set()
        for line in journal_lines(journal):
            if type(line) is not Step or line.kind == "run":
                continue
            label = line.path if isinstance(line.path, str) else line.step
            if line.state == "replayed":
                self._served.add((line.run, label))
            attempts = self._steps.setdefault((line.run, label), {})
            known = attempts.get(line.attempt, JournalStep())
            if line.state == "intent":
                known = JournalStep(line, known.outcome)
            elif line.state in ("done", "failed"):
                known = JournalStep(known.intent, line)
            attempts[line.attempt] = known

    def served(self, run: str | None, label: str) -> bool:
        """Whether the step at ``label`` of the run of origin ``run`` was answered from a
        recording (a replay's or a re-entry's ``replayed`` line): its body did not run."""
        return (str(run), label) in self._served

    def step(self, run: str | None, label: str, attempt: int | None) -> JournalStep:
        """The step at ``label`` of the run of origin ``run`` (its attempt ``attempt``, else
        its last), or an empty one."""
        attempts = self._steps.get((str(run), label))
        if not attempts:
            return JournalStep()
        if attempt in attempts:
            return attempts[attempt]
        return attempts[max(attempts)]


@dataclass(frozen=True)
class Exchange:
    """What a step sent and got back, as compared: ``request`` and ``response`` (an LLM
    attempt) or ``arguments`` and ``result`` (a tool call), ``None`` where nothing was kept;
    ``fingerprint``: its journal intent's; ``whole``: ``request`` holds what its fingerprint
    hashes, as far as a recording keeps it (an LLM request: its messages were kept; what the
    span does not record, such as its temperature or its tools, only the fingerprint says)."""

    request: Any = None
    response: Any = None
    fingerprint: str | None = None
    whole: bool = True
    exact: Any = None
    """An LLM attempt's request and response payloads as kept, ids included."""
    recorded: Any = None
    """An LLM attempt's response as its journal keeps it (``None`` where it has none): what
    two responses are compared by when only one op kept its payload."""

    @property
    def from_payload(self) -> bool:
        """``response`` is the op's payload (else the journal's)."""
        return isinstance(self.exact, tuple) and self.exact[1] is not None


def exchange(op: Mapping[str, Any], step: JournalStep) -> Exchange:
    """What the op ``op`` (an opTree op node) sent and got, its journal lines ``step``."""
    fingerprint = _text(step.intent.fingerprint) if step.intent is not None else None
    if op.get("kind") == "llm":
        request = _llm_request(op)
        whole = "messages" in request
        exact = (_payload(op, "request"), _payload(op, "response"))
        recorded = _recorded_response(step)
        payload = exact[1]
        response = _without_made_up(payload) if payload is not None else recorded
        return Exchange(request, response, fingerprint, whole, exact, recorded)
    arguments = _tool_arguments(op, step)
    return Exchange(arguments, _tool_result(op, step), fingerprint, arguments is not None)


REQUEST_PREFIX = "gen_ai.request."


def _llm_request(op: Mapping[str, Any]) -> dict[str, Any]:
    """The model, the parameters the span recorded (``gen_ai.request.*``: temperature,
    max_tokens, stream, ...), and the messages, with how many were sent and skipped, when
    the op kept them."""
    attributes = _span_attributes(op)
    parameters = {
        key.removeprefix(REQUEST_PREFIX): value
        for key, value in attributes.items()
        if isinstance(key, str) and key.startswith(REQUEST_PREFIX) and key != GEN_AI_REQUEST_MODEL
    }
    request: dict[str, Any] = {"model": op.get("name"), "parameters": parameters}
    payload = _payload(op, "request")
    if payload is not None:
        request["messages"] = _without_made_up(payload)
    for name, key in (("sent", REQUEST_MESSAGES), ("skipped", INPUT_MESSAGES_SKIPPED)):
        count = finite_number(attributes.get(key))
        if count is not None:
            request[f"messages_{name}"] = int(count)
    return request


def _recorded_response(step: JournalStep) -> Any:
    """An LLM attempt's response as its journal's outcome keeps it."""
    outcome = step.outcome
    if outcome is None:
        return None
    if outcome.state == "failed":
        return {"error": _text(outcome.error)}
    if outcome.chunks is not UNSET:
        return {"chunks": _without_made_up(outcome.chunks)}
    return None if outcome.result is UNSET else _without_made_up(outcome.result)


def _tool_arguments(op: Mapping[str, Any], step: JournalStep) -> Any:
    intent = step.intent
    if intent is not None and isinstance(intent.arguments, str):
        return _json(intent.arguments)
    return _payload(op, "request")


def _tool_result(op: Mapping[str, Any], step: JournalStep) -> Any:
    outcome = step.outcome
    if outcome is not None and outcome.state == "failed":
        return {"error": _text(outcome.error)}
    if outcome is not None and isinstance(outcome.result, str):
        return _json(outcome.result)
    return _payload(op, "response")


def _payload(op: Mapping[str, Any], key: str) -> Any:
    """The node's ``request`` or ``response`` payload, parsed when it is JSON."""
    part = op.get(key)
    payload = part.get("payload") if isinstance(part, Mapping) else None
    return None if payload is None else _json(payload)


def _json(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return value  # a text, or JSON cut at the payload cap: compared as text


def _span_attributes(op: Mapping[str, Any]) -> Mapping[str, Any]:
    span = op.get("span")
    attributes = span.get("attributes") if isinstance(span, Mapping) else None
    return attributes if isinstance(attributes, Mapping) else {}


def attempt_of(op: Mapping[str, Any]) -> int | None:
    """The op's attempt number (an LLM call's retry is its next attempt), if recorded."""
    number = finite_number(_span_attributes(op).get(ATTEMPT))
    return None if number is None else int(number)


def _without_made_up(value: Any, depth: int = 0) -> Any:
    if depth > MAX_NESTING:
        return value
    if isinstance(value, Mapping):
        return {
            key: _without_made_up(item, depth + 1)
            for key, item in value.items()
            if key not in MADE_UP_KEYS
        }
    if isinstance(value, list):
        return [_without_made_up(item, depth + 1) for item in value]
    return value


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Usage:
    """A step's tokens, cost and latency (``None``: not known), its sub-steps' included."""

    input_tokens: float | None = None
    output_tokens: float | None = None
    cost_usd: float | None = None
    latency_ms: float | None = None


def usage(node: Mapping[str, Any], level: str) -> Usage:
    """The tokens and cost of ``node`` at ``level`` (``op``: its accounting entries' and its
    sub-agents'; ``session`` or ``turn``: its ops', sub-agents included), and its latency."""
    inputs = outputs = cost = 0.0
    known_in = known_out = known_cost = False
    for entry in _entries(node, level):
        tokens = entry.get("tokens")
        if isinstance(tokens, Mapping):
            value = finite_number(tokens.get("inputTokens"))
            if value is not None:
                inputs, known_in = inputs + value, True
            value = finite_number(tokens.get("outputTokens"))
            if value is not None:
                outputs, known_out = outputs + value, True
        value = finite_number(entry.get("costUsd"))
        if value is not None:
            cost, known_cost = cost + value, True
    return Usage(
        inputs if known_in else None,
        outputs if known_out else None,
        cost if known_cost else None,
        _latency(node),
    )


def _entries(node: Mapping[str, Any], level: str) -> Iterable[Mapping[str, Any]]:
    """The accounting entries of ``node``'s ops, sub-agents included (as ``stats`` counts)."""
    if level == "op":
        yield from children(node, "accounting")
        pending = list(hosted_sessions(node))
    else:
        pending = [node]
    while pending:  # not recursive: sub-agents nest as deep as they did
        current = pending.pop()
        turns = children(current, "turns") if "turns" in current else [current]
        for turn in turns:
            for op in children(turn, "ops"):
                yield from children(op, "accounting")
                pending.extend(hosted_sessions(op))


def _latency(node: Mapping[str, Any]) -> float | None:
    latency = finite_number(node.get("latencyMs"))
    if latency is not None:
        return latency
    started, ended = finite_number(node.get("startedAt")), finite_number(node.get("endedAt"))
    return None if started is None or ended is None else max(0.0, ended - started)
