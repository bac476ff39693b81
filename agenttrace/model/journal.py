"""The step journal (docs/journal.md): what each LLM attempt and tool call of a run did, so that
resuming an interrupted run never repeats a side effect, and replay and fork can serve a run's
steps from what it recorded.

A **step** is one LLM attempt or one tool call, keyed by its position, claimed when it starts:
the run it belongs to (the run's origin), its path label in that run (``2.1``: op 1 of turn 2;
stable whatever order parallel calls finish in) and its attempt. Its lines, in the event stream
beside the canonical events, say what became of it:

- ``intent``: a tool call is about to run (written and flushed before its body runs), with its
  name, effect class, request fingerprint and arguments;
- ``done``: it returned (a tool's result; an LLM attempt's exact response, or its stream's
  chunks in order);
- ``failed``: it raised, and whether its effect was applied (``no``; ``unknown``);
- nothing: the process died. An intent without an outcome is **in doubt**.

A user's decision about an in-doubt call (``agenttrace resolve``) is a ``step_decision`` line.
Which step a new run's call is, and what to do with it, are decided by :class:`Journal`.

This module is the fingerprint, the idempotency key and the reader; the lines themselves are
typed in :mod:`agenttrace.model.journal_lines`. It writes nothing itself (the event stream's
sink does).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from agenttrace.model.journal_lines import (
    RUN_LABEL,
    Decisions,
    JournalLine,
    States,
    StepDecision,
    StepKey,
    decode_line,
    journal_lines,
)
from agenttrace.model.journal_lines import Step as StepLine

EFFECTS = ("pure", "read", "idempotent", "effect")
"""A tool's effect class, from none to an effect outside the process that may not be repeated:
``pure`` (computes from its arguments), ``read`` (reads the world, changes nothing),
``idempotent`` (changes the world; doing it twice with the same idempotency key is doing it
once), ``effect`` (changes the world; the default: nothing is known)."""

DECISIONS: tuple[Decisions, ...] = ("done", "not_applied", "retry", "abandon")

VOLATILE_KEYS = frozenset(
    {
        "id",
        "timestamp",
        "created",
        "created_at",
        "request_id",
        "metadata",
        "user",
        "timeout",
        "max_retries",
        "num_retries",
        "api_key",
        "api_base",
        "base_url",
        "extra_headers",
        "headers",
        "mock_response",
        "stream_options",
        "litellm_call_id",
        "litellm_logging_obj",
    }
)
"""Keys a request's fingerprint leaves out at any depth: ids, times, where it was sent, with
which credentials and how often it may be retried (litellm's retry loop asks again with its
retries set to 0); none changes what was asked."""


def fingerprint(request: Any, volatile: frozenset[str] = VOLATILE_KEYS) -> str:
    """``sha256:`` and the hex digest of ``request`` as canonical JSON (sorted keys, no spaces,
    the ``volatile`` keys left out at any depth, anything not JSON as its ``str``): the same
    question asked again has the same fingerprint. A tool call's arguments are its question
    whole (``tool_fingerprint``): none of their keys is volatile. An LLM request's is
    :func:`llm_fingerprint`."""
    return "sha256:" + _sha256(canonical(request, volatile)).hexdigest()


_PIECE = 1984
"""The most bytes hashed in one call: under 2,048, past which hashlib lets go of the GIL while
it hashes, and a caller whose program has another thread busy (agenttrace's own background
thread, an agent's) then waits for it back for up to the switch interval, 5 ms: more than
hashing megabytes costs. A whole number of sha256 blocks (64 bytes)."""


def _sha256(*parts: bytes) -> hashlib._Hash:
    """sha256 of ``parts`` one after the other, hashed holding the GIL (:data:`_PIECE`)."""
    hasher = hashlib.sha256()
    for part in parts:
        if len(part) < _PIECE:
            hasher.update(part)
            continue
        view = memoryview(part)
        for start in range(0, len(view), _PIECE):
            hasher.update(view[start : start + _PIECE])
    return hasher


def canonical(value: Any, volatile: frozenset[str] = VOLATILE_KEYS) -> bytes:
    """``value`` as canonical JSON: sorted keys, no spaces, the ``volatile`` keys left out at
    any depth, anything not JSON as its ``str``."""
    if volatile:
        data = _canonical_as_is(value, volatile)
        if data is not None:  # nothing to leave out: the value's JSON, encoded in C
            return data
    stable = _stable(value) if volatile else value
    try:
        return _CANONICAL.encode(stable)
    except (TypeError, ValueError, OverflowError):  # what msgspec refuses: the stdlib's way
        return json.dumps(
            stable, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
        ).encode("utf-8", "surrogatepass")


LLM_FINGERPRINT = b"agenttrace llm request 2\n"
"""What an LLM request's fingerprint starts from: the version of its definition (a journal
written under another never answers a request of this one: the request is asked again)."""


def message_digest(message: Any) -> bytes:
    """The sha256 digest (32 bytes) of one message of an LLM request as canonical JSON, its
    volatile keys left out at any depth."""
    return _sha256(canonical(message)).digest()


def llm_fingerprint(
    request: Mapping[str, Any], digests: Sequence[bytes] | bytes | None = None
) -> str:
    """The fingerprint of an LLM request (:func:`llm_request`): ``sha256:`` and the hex digest
    of :data:`LLM_FINGERPRINT`, the canonical JSON of all but its messages (model, tools,
    parameters) and the :func:`message_digest` of each message in order. So a caller that
    knows the digests of the messages it sent before (``digests``, one per message of
    ``request["messages"]``, or all of them one after the other in one ``bytes``) pays only
    for the new ones. A request whose messages are not a list is fingerprinted whole, as
    :func:`fingerprint` does it, after the same prefix."""
    messages = request.get("messages")
    if not isinstance(messages, (list, tuple)):
        return "sha256:" + _sha256(LLM_FINGERPRINT, canonical(request)).hexdigest()
    if digests is None:
        digests = [message_digest(message) for message in messages]
    joined = digests if isinstance(digests, bytes) else b"".join(digests)
    if len(joined) != 32 * len(messages):
        raise ValueError(f"{len(joined) // 32} digests for {len(messages)} messages")
    rest = canonical({key: value for key, value in request.items() if key != "messages"})
    return "sha256:" + _sha256(LLM_FINGERPRINT, rest, joined).hexdigest()


def tool_fingerprint(name: str, arguments: Mapping[str, Any]) -> str:
    """The fingerprint of a tool call: its name and its arguments, every key of them."""
    return fingerprint(tool_request(name, arguments), frozenset())


def tool_call_request(name: str, arguments: Mapping[str, Any]) -> tuple[str, bytes | None]:
    """A tool call's :func:`tool_fingerprint` and, when its arguments are plain data, their
    canonical JSON, serialised once for both: the fingerprint hashes the canonical JSON of
    ``{"arguments": ..., "tool": name}``, which is these bytes between two fixed pieces, so the
    same bytes serve the journal's ``arguments`` too. ``None`` for arguments that are not plain
    data (the fingerprint counts such an object as its ``str``, the journal as its JSON dump:
    the two forms differ, and each is made as before)."""
    try:
        data = _PLAIN_CANONICAL.encode(arguments)
    except (TypeError, ValueError, OverflowError):
        return tool_fingerprint(name, arguments), None
    request = b"".join((b'{"arguments":', data, b',"tool":', _CANONICAL.encode(name), b"}"))
    hashed = _sha256(request)  # one piece: the bytes are copied once, not hashed in five calls
    return "sha256:" + hashed.hexdigest(), data


_CANONICAL = msgspec.json.Encoder(order="sorted", enc_hook=str)
"""Canonical JSON in C: keys sorted, no spaces, anything else as its ``str``."""


def _refuse(value: Any) -> Any:
    raise TypeError(type(value).__name__)


_PLAIN_CANONICAL = msgspec.json.Encoder(order="sorted", enc_hook=_refuse)
"""Canonical JSON in C of plain data only (a pydantic message needs the walk)."""


def _canonical_as_is(request: Any, volatile: frozenset[str]) -> bytes | None:
    """The request's canonical JSON as it is, if it holds only plain data and no key to leave
    out at any depth (a key's JSON, ``"id":``, appears nowhere in it: text that holds one is
    escaped, ``\"id\":``); else ``None``, and the walk does it."""
    try:
        data = _PLAIN_CANONICAL.encode(request)
    except (TypeError, ValueError, OverflowError):
        return None
    keys = _VOLATILE_JSON if volatile is VOLATILE_KEYS else _keys_json(volatile)
    return None if keys.search(data) else data


def _keys_json(keys: frozenset[str]) -> re.Pattern[bytes]:
    """Any of ``keys`` as a JSON object's key (one pass over the text, in C)."""
    names = b"|".join(re.escape(key.encode()) for key in sorted(keys))
    return re.compile(b'"(?:' + names + b')":')


_VOLATILE_JSON = _keys_json(VOLATILE_KEYS)


_LEAVES = frozenset({str, int, float, bool, type(None)})
"""Types a request's walk keeps as they are (checked by exact type: the common case, fast)."""


def _stable(value: Any, depth: int = 0) -> Any:
    if depth > 64:
        return str(value)
    if isinstance(value, Mapping):
        stable = {}
        for key, item in value.items():
            name = key if type(key) is str else str(key)
            if name not in VOLATILE_KEYS:
                stable[name] = item if type(item) in _LEAVES else _stable(item, depth + 1)
        return stable
    if isinstance(value, (list, tuple)):
        return [item if type(item) in _LEAVES else _stable(item, depth + 1) for item in value]
    if hasattr(value, "model_dump"):  # a pydantic message (litellm's Message)
        try:
            return _stable(value.model_dump(exclude_none=True), depth + 1)
        except Exception:
            return str(value)
    return value


_AS_DATA_DEPTH = 32


def as_data(value: Any, depth: int = 0) -> Any:
    """``value`` as a fingerprint counts an argument: data as it is (a pydantic model as its
    dump), any other object as its kind, never as its ``str``, which may hold its address and
    differ per process."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if depth >= _AS_DATA_DEPTH:
        return "..."
    dump = getattr(value, "model_dump", None)  # a pydantic message (an SDK's types)
    if callable(dump):
        try:
            value = dump(mode="json")
        except Exception:
            return type(value).__qualname__
    if isinstance(value, Mapping):
        return {str(key): as_data(item, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_data(item, depth + 1) for item in value]
    return type(value).__qualname__


def kept_as_data(value: Any) -> Any:
    """``value`` itself if it is data (what msgspec encodes without help, in C: JSON types, and
    dataclasses, dates, enums, sets, which the fingerprint encodes by their content in a stable
    order), not walked or copied; else its shape (:func:`as_data`)."""
    if type(value) in _LEAVES:
        return value
    try:
        _PLAIN.encode(value)
    except (TypeError, ValueError, OverflowError):
        return as_data(value)
    return value


_PLAIN = msgspec.json.Encoder(enc_hook=_refuse)
"""Encodes data only (unsorted: a check, not the canonical text)."""


def llm_request(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """What an LLM request asks, for its fingerprint: the model, the messages, the tools and the
    parameters that change the answer (where it is sent and with which key do not)."""
    return {key: kwargs[key] for key in sorted(kwargs) if key not in VOLATILE_KEYS}


def tool_request(name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """What a tool call asks, for its fingerprint: its name and arguments."""
    return {"tool": name, "arguments": dict(arguments)}


def idempotency_key(session_id: str, run: str, label: str, tool: str) -> str:
    """The key of one logical tool call (the same for each of its attempts and on every resume
    of the run): ``at-`` and 32 hex digits. It stays in the local journal: never on a span, a
    log, a console line, a metric or an export."""
    seed = "\0".join((session_id, run, label, tool))
    return "at-" + hashlib.sha256(seed.encode("utf-8", "surrogatepass")).hexdigest()[:32]


# --- reading ------------------------------------------------------------------------------------


@dataclass
class Step:
    """What the journal knows of one step."""

    key: StepKey
    kind: str
    name: str
    agent_id: str | None = None
    effect: str = "effect"
    fingerprint: str | None = None
    arguments: str | None = None
    call_id: str | None = None
    state: States = "intent"
    result: Any = None
    chunks: list[Any] | None = None
    error: str | None = None
    applied: str | None = None
    decision: Decisions | None = None
    evidence: str | None = None
    capped: bool = False
    """Its recorded result was cut to the payload cap: it cannot answer a re-entry."""
    replayable: bool = True
    """Its recorded result gives back what the tool returned (else it cannot answer a
    re-entry: the JSON of an object no annotation rebuilds)."""
    messages: int | None = None
    """A run's line: how many events the session had logged before the run started."""
    implicit: bool = False
    """A run's line: the run was one ``init()`` made around LLM calls outside a decorated run."""

    @property
    def in_doubt(self) -> bool:
        """A tool call that started and left no outcome (nor a user's decision since)."""
        return self.kind == "tool" and self.state == "intent" and self.decision is None

    @property
    def outcome(self) -> str:
        """``done``, ``failed``, ``in doubt`` or the decision taken for it (``decided: ...``)."""
        if self.decision is not None:
            return f"decided: {self.decision}"
        return "in doubt" if self.state == "intent" else self.state


class Journal:
    """The steps a session's journal lines record, by key (later lines update earlier ones)."""

    def __init__(self, lines: Iterable[Mapping[str, Any] | JournalLine] = ()) -> None:
        self.steps: dict[StepKey, Step] = {}
        for line in journal_lines(lines):
            self.add(line)

    def add(self, line: Mapping[str, Any] | JournalLine) -> None:
        """Take one journal line, typed or as decoded JSON (anything else is ignored)."""
        if not isinstance(line, (StepLine, StepDecision)):
            typed = decode_line(line)
            if typed is None:
                return
            line = typed
        key = (line.run, line.step, line.attempt)
        if type(line) is StepLine:
            self._step(key, line)
            return
        step = self.steps.get(key)
        if step is not None and type(line) is StepDecision:
            step.decision = line.decision
            step.evidence = _text(line.evidence)
            if line.decision == "done":
                step.result = _given(line.result)

    def _step(self, key: StepKey, line: StepLine) -> None:
        state = line.state
        step = self.steps.get(key)
        if step is None and state == "replayed":
            # A replay session's: the step it served is the source session's (its files name
            # it); the line says only that it was served, not what became of a step here.
            return
        if step is None:
            step = self.steps[key] = Step(key, line.kind, line.name)
        step.agent_id = line.agent_id or step.agent_id
        if state == "intent":
            step.messages = _given(line.messages)
            step.implicit = line.implicit is True
            step.effect = _text(line.effect) or "effect"
            step.fingerprint = _text(line.fingerprint)
            step.arguments = _text(line.arguments)
            step.call_id = _text(line.call_id)
        elif state == "done":
            step.state = "done"
            step.result = _given(line.result)
            step.chunks = _given(line.chunks)
            step.fingerprint = _text(line.fingerprint) or step.fingerprint
            step.capped = line.capped is True
            step.replayable = line.replayable is not False
            step.decision = None
        elif state == "failed":
            step.state = "failed"
            step.error = _text(line.error)
            step.applied = _text(line.applied) or "unknown"
            step.decision = None

    def in_doubt(self) -> list[Step]:
        """The tool calls that started and left no outcome, in the order they started (the
        last attempt of each: one a re-entry ran again is no longer in doubt)."""
        last: dict[tuple[str, str], Step] = {}
        for (run, label, _), step in self.steps.items():
            if step.kind == "tool":
                last[run, label] = step
        return [step for step in last.values() if step.in_doubt]

    def step(self, run: str, label: str, attempt: int = 1) -> Step | None:
        """The step at that place, if the journal has it."""
        return self.steps.get((run, label, attempt))

    def latest(self, run: str, label: str) -> Step | None:
        """The last attempt the journal has at that place (a re-entry that ran a step again
        journals it as the next attempt)."""
        found: Step | None = None
        attempt = 1
        while (step := self.steps.get((run, label, attempt))) is not None:
            found, attempt = step, attempt + 1
        return found

    def interrupted_run(self) -> Step | None:
        """The last run's own line if that run never ended (its process was killed): the run a
        resume re-enters. ``None`` if the last run ended, or no run was journaled."""
        last: Step | None = None
        for step in self.steps.values():
            if step.kind == "run":
                last = step
        if last is None:
            return None
        latest = self.latest(last.key[0], RUN_LABEL)
        return latest if latest is not None and latest.state == "intent" else None

    def in_doubt_of(self, run: str) -> list[Step]:
        """The last attempt of each tool call of ``run`` that is in doubt, in the order they
        started."""
        return [step for step in self.in_doubt() if step.key[0] == run]


def _given(value: Any) -> Any:
    """A line's field as the reader keeps it: ``None`` when the line has none."""
    return None if value is msgspec.UNSET else value


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
