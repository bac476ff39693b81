"""The step journal's lines as typed values (docs/journal.md), defined once: the writers build
them, the readers decode them, and the session file's schema validates and publishes them
(``agenttrace.formats.session.schema`` names :class:`Step` and :class:`StepDecision`).

A line is encoded as the event stream writes its lines (``", "`` and ``": "`` between items,
text as UTF-8, a lone surrogate as its escape): its fields in the order of the struct, an
absent one (``UNSET``) left out. One order serves every kind of line because each kind's
fields are a subsequence of it, so a line reads and re-encodes to the bytes it was written as.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from agenttrace._internal.times import event_ts
from agenttrace.model.constrained import (
    FINGERPRINT_PATTERN,
    AgentId,
    Label,
    StepLabel,
    Timestamp,
    without_surrogates,
)

STEP = "step"
"""The ``event_type`` of a journal line."""
STEP_DECISION = "step_decision"
"""The ``event_type`` of a user's decision about an in-doubt step."""

RUN_LABEL = "0"
"""The label of a run's own line (its root's path label)."""

StepKey = tuple[str, str, int]
"""(run origin, path label, attempt)."""

States = Literal["intent", "done", "failed", "replayed"]
Kinds = Literal["tool", "llm", "run", "value"]
Effects = Literal["pure", "read", "idempotent", "effect"]
Applied = Literal["no", "unknown"]
Decisions = Literal["done", "not_applied", "retry", "abandon"]

JOURNAL_RESULT_BYTES = 1 << 20
"""The most of a step's result (a tool's JSON, an LLM response) the journal keeps: a longer one
is cut and marked ``capped``, and a re-entry does not answer from it."""
JOURNAL_CHUNKS = 100_000
"""The most chunks of a stream the journal keeps (past it the response is marked capped)."""

_Run = Annotated[str, Meta(min_length=1, max_length=256, description="The run's origin id.")]
_Attempt = Annotated[int, Meta(ge=1, le=1_000_000, description="1 for the first attempt.")]
_Fingerprint = Annotated[
    str,
    Meta(
        pattern=FINGERPRINT_PATTERN,
        description="Of the request (a run's line: of its entry point's arguments).",
    ),
]


class _Line(Struct, kw_only=True, forbid_unknown_fields=True, gc=False):
    """A line of the journal: a JSON object with no key the format does not name.

    ``gc=False``: a line holds JSON data (or, until it is encoded, an LLM response), never
    itself, and thousands of them would otherwise each cost the cyclic collector."""


class Step(_Line, tag_field="event_type", tag=STEP):
    """A line of the step journal (docs/journal.md): an LLM attempt or a tool call started
    (``intent``: on disk before a tool's body runs), returned (``done``), raised (``failed``)
    or, reached again by a re-entered run, was answered from the journal (``replayed``); a root
    run started (kind ``run``) or ended; a value the agent read inside
    ``agenttrace.deterministic()`` (kind ``value``: one ``done`` line). A line of the stream
    only, no canonical event."""

    # The order is the order on disk: each kind of line's fields are a subsequence of it.
    run: _Run
    step: StepLabel
    attempt: _Attempt
    agent_id: AgentId
    kind: Kinds
    name: Annotated[str, Meta(max_length=4096)]
    state: States
    path: (
        Annotated[
            Label,
            Meta(description="The op's path label, where it is not the step's (docs/journal.md)."),
        ]
        | UnsetType
    ) = UNSET
    effect: Effects | UnsetType = UNSET
    capped: (
        Annotated[bool, Meta(description="The result was cut to the payload cap.")] | UnsetType
    ) = UNSET
    replayable: (
        Annotated[
            bool,
            Meta(
                description="False: a tool's result JSON does not give back what it returned "
                "(a re-entry does not answer from it)."
            ),
        ]
        | UnsetType
    ) = UNSET
    messages: (
        Annotated[
            int,
            Meta(ge=0, description="A run's line: the events logged before the run started."),
        ]
        | UnsetType
    ) = UNSET
    fingerprint: _Fingerprint | UnsetType = UNSET
    arguments: Annotated[str, Meta(description="A tool's arguments, as JSON.")] | UnsetType = UNSET
    call_id: str | UnsetType = UNSET
    chunks: list[Any] | UnsetType = UNSET
    result: Any = UNSET
    error: str | UnsetType = UNSET
    applied: Applied | UnsetType = UNSET
    implicit: (
        Annotated[
            bool,
            Meta(description="A run's line: a run made around LLM calls outside a decorated run."),
        ]
        | UnsetType
    ) = UNSET
    process: (
        Annotated[
            str,
            Meta(max_length=64, description="A run's line: a random token of its process."),
        ]
        | UnsetType
    ) = UNSET
    pid: (
        Annotated[int, Meta(ge=0, description="A run's line: the id of its process.")] | UnsetType
    ) = UNSET
    lease: Annotated[str, Meta(max_length=64)] | UnsetType = UNSET
    ts: Timestamp | UnsetType = UNSET

    @property
    def key(self) -> StepKey:
        """The step's key: (run origin, label, attempt)."""
        return self.run, self.step, self.attempt


class StepDecision(_Line, tag_field="event_type", tag=STEP_DECISION):
    """A user's decision about an in-doubt step (``agenttrace resolve``)."""

    run: _Run
    step: StepLabel
    attempt: _Attempt
    decision: Decisions
    result: Any = UNSET
    evidence: Annotated[str, Meta(max_length=65536)] | UnsetType = UNSET
    ts: Timestamp | UnsetType = UNSET

    @property
    def key(self) -> StepKey:
        """The decided step's key: (run origin, label, attempt)."""
        return self.run, self.step, self.attempt


JournalLine = Step | StepDecision
"""One line of the step journal (docs/journal.md)."""


# --- building ----------------------------------------------------------------------------------


def intent_line(
    key: StepKey,
    *,
    agent_id: str,
    name: str,
    effect: str | None,
    request_fingerprint: str,
    arguments: str | None = None,
    call_id: str | None = None,
    lease: str | None = None,
    kind: Kinds = "tool",
    path: str | None = None,
) -> Step:
    """A step starts: a tool call is about to run (the line is on disk before its body runs),
    or an LLM attempt (``kind="llm"``, named by its model; no effect class) is being sent.
    ``path``: the path label of the op making it, where that is not the step's label (a
    re-entry's call matched to a step at another place, or given a label of its own)."""
    run, label, attempt = key
    return Step(
        run=run,
        step=label,
        attempt=attempt,
        agent_id=agent_id,
        kind=kind,
        name=name,
        state="intent",
        path=path if path is not None and path != label else UNSET,
        effect=_given(effect),
        fingerprint=request_fingerprint,
        arguments=_given(arguments),
        call_id=_given(call_id),
        lease=_given(lease),
    )


def done_line(
    key: StepKey,
    *,
    agent_id: str,
    kind: Kinds,
    name: str,
    result: Any = None,
    request_fingerprint: str | None = None,
    chunks: list[Any] | None = None,
    lease: str | None = None,
    capped: bool = False,
    replayable: bool = True,
) -> Step:
    """A step returned: a tool's ``result`` (JSON text), an LLM attempt's response (``result``,
    as JSON) or its stream's ``chunks`` in order. ``capped``: the result was cut to the payload
    cap, so it cannot stand for the call on a re-entry. ``replayable`` false: the JSON does not
    give back what the tool returned (an object of a class no annotation rebuilds), so it
    cannot stand for the call either."""
    run, label, attempt = key
    return Step(
        run=run,
        step=label,
        attempt=attempt,
        agent_id=agent_id,
        kind=kind,
        name=name,
        state="done",
        capped=True if capped else UNSET,
        replayable=False if not replayable else UNSET,
        fingerprint=_given(request_fingerprint),
        chunks=_given(chunks),
        result=result if chunks is None else UNSET,  # ``null`` when there is none
        lease=_given(lease),
    )


def failed_line(
    key: StepKey,
    *,
    agent_id: str,
    kind: Kinds,
    name: str,
    error: str,
    applied: Applied,
    lease: str | None = None,
) -> Step:
    """A step raised ``error``; ``applied``: whether its effect happened (``no`` when the tool
    said so, or for a step with no effect; else ``unknown``)."""
    run, label, attempt = key
    return Step(
        run=run,
        step=label,
        attempt=attempt,
        agent_id=agent_id,
        kind=kind,
        name=name,
        state="failed",
        error=error,
        applied=applied,
        lease=_given(lease),
    )


def decision_line(
    key: StepKey, decision: Decisions, *, result: str | None = None, evidence: str | None = None
) -> StepDecision:
    """A user's decision about an in-doubt step (``agenttrace resolve``): ``done`` (with the
    ``result`` the tool would have returned), ``not_applied``, ``retry`` or ``abandon``."""
    run, label, attempt = key
    return StepDecision(
        run=run,
        step=label,
        attempt=attempt,
        decision=decision,
        result=_given(result),
        evidence=_given(evidence),
    )


def run_line(
    run: str,
    attempt: int,
    *,
    agent_id: str,
    name: str,
    messages: int,
    arguments_fingerprint: str | None = None,
    implicit: bool = False,
    process: str | None = None,
    pid: int | None = None,
) -> Step:
    """A root run started (kind ``run``, at the root label): ``messages`` events of the session
    were logged before it, so a re-entry knows each agent's transcript as the run found it. Its
    ``done`` line says the run ended; a run line without one is an interrupted run.

    ``arguments_fingerprint`` (its ``fingerprint``): of the arguments its entry point ``name``
    was called with, so that a resume re-enters it only for a call with the same ones (the
    arguments themselves are not kept). ``implicit``: a run ``init()`` made around LLM calls
    outside any decorated run, which no resume re-enters. ``process``: a random token of the
    process running it, so that a live view knows a later process's runs from this one's: the
    calls this one left in flight did not end, they were interrupted. ``pid``: that process's
    id, so that a view knows, before any session file says so, whether it still runs."""
    return Step(
        run=run,
        step=RUN_LABEL,
        attempt=attempt,
        agent_id=agent_id,
        kind="run",
        name=name,
        state="intent",
        messages=messages,
        fingerprint=_given(arguments_fingerprint),
        implicit=True if implicit else UNSET,
        process=_given(process),
        pid=_given(pid),
    )


def value_line(key: StepKey, *, agent_id: str, name: str, value: Any) -> Step:
    """A value the agent read inside ``agenttrace.deterministic()`` (``name``: ``seed``,
    ``uuid4``, ``time``, ``time_ns``), as JSON (a number, or a uuid's text): one ``done`` line
    and no ``intent`` (reading it has no effect to be in doubt about), at the label of the scope
    that read it and ``~n`` for its n-th read there (``agenttrace.model.recorded_values``)."""
    run, label, attempt = key
    return Step(
        run=run,
        step=label,
        attempt=attempt,
        agent_id=agent_id,
        kind="value",
        name=name,
        state="done",
        result=value,
    )


def replayed_line(key: StepKey, *, agent_id: str, kind: Kinds, name: str) -> Step:
    """A re-entered run reached the step at ``key`` and was answered from the journal: the
    step was not run again (the stream says so; the step stays as it was)."""
    run, label, attempt = key
    return Step(
        run=run,
        step=label,
        attempt=attempt,
        agent_id=agent_id,
        kind=kind,
        name=name,
        state="replayed",
    )


def _given(value: Any) -> Any:
    return UNSET if value is None else value


# --- encoding ----------------------------------------------------------------------------------


def journal_bytes(line: JournalLine, now_ns: int | None = None) -> bytes:
    """``line`` encoded as the stream's lines are (the same encoder's spacing), with its
    newline; stamped with the time (``now_ns``, else now) unless it has one
    (:func:`encoded_later`)."""
    if now_ns is not None or line.ts is UNSET:
        line.ts = event_ts(time.time_ns() if now_ns is None else now_ns)
    data = msgspec.to_builtins(line)  # its fields in order, the absent ones left out
    # Field by field: text, whole numbers, booleans and null are written by msgspec (in C) as
    # the stream's encoder writes them, and have no separators inside to space out; anything
    # else (a result, chunks) by that encoder. A lone surrogate, which msgspec refuses, takes
    # the encoder's way for the whole line (its escape).
    parts: list[bytes] = []
    try:
        for key, value in data.items():
            prefix = _KEYS.get(key)
            if prefix is None:
                prefix = _KEYS[key] = b'"' + key.encode() + b'": '
            kind = type(value)
            if (
                kind is str
                or kind is bool
                or value is None
                or (kind is int and _INT_MIN <= value < _INT_END)
            ):
                parts.append(prefix + _ENCODE(value))
            else:
                parts.append(prefix + _LINE.encode(value).encode("utf-8", "backslashreplace"))
    except UnicodeEncodeError:
        return (_LINE.encode(data) + "\n").encode("utf-8", "backslashreplace")
    return b"{" + b", ".join(parts) + b"}\n"


_LINE = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "))
_ENCODE = msgspec.json.encode
_KEYS: dict[str, bytes] = {}
"""Per field name: its key as a line writes it, with the separator after it (few names)."""
_INT_MIN, _INT_END = -(1 << 63), 1 << 64
"""The integers msgspec encodes (an attempt, a pid); others take the encoder's way."""


def encoded_later(line: JournalLine) -> Callable[[], bytes]:
    """``line``, stamped with the time now, as what encodes it: handed to the recorder's
    background thread (``recorder.journal(session, encoded_later(line), later=True)``), which
    encodes it there, off the caller's path. The line is the caller's no longer."""
    line.ts = event_ts(time.time_ns())
    return functools.partial(journal_bytes, line)


def response_bytes(line: Step) -> bytes:
    """An LLM attempt's ``done`` line (``result``: its response as it came, a pydantic model or
    a dataclass; or ``chunks``: its stream's, in order), encoded: by agenttrace's background
    thread, once the response is complete. The response is kept as its JSON data, thinking
    blocks' signatures included (a re-entered run gives them back: Anthropic refuses a thinking
    block sent back without its signature; the journal is the only place they are kept); one past
    :data:`JOURNAL_RESULT_BYTES` encoded, or of more than :data:`JOURNAL_CHUNKS` chunks, or
    that is not data, is marked ``capped`` and not kept."""
    chunks = line.chunks
    if type(chunks) is list:
        kept = [response_data(chunk) for chunk in chunks[:JOURNAL_CHUNKS]]
        data_line = msgspec.structs.replace(line, chunks=kept, result=UNSET)
    else:
        data_line = msgspec.structs.replace(line, result=response_data(line.result))
    try:
        data: bytes | None = journal_bytes(data_line)
    except (TypeError, ValueError):  # a response that is not data: kept in no file, capped
        data = None
    if (
        data is not None
        and len(data) <= JOURNAL_RESULT_BYTES
        and (type(chunks) is not list or len(chunks) <= JOURNAL_CHUNKS)
    ):
        return data
    capped = msgspec.structs.replace(line, capped=True, chunks=UNSET, result=None)
    return journal_bytes(capped)


def response_data(value: Any) -> Any:
    """A response or chunk as JSON-ready data (a pydantic model, litellm's, as its dump; a
    dataclass as its fields, which its function's return annotation rebuilds on a replay)."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            value = dump(mode="json")
        except Exception:
            value = dump()
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        with contextlib.suppress(TypeError, ValueError):  # a field that is not data: capped
            value = msgspec.to_builtins(value)
    return value


# --- decoding ----------------------------------------------------------------------------------


def decode_line(value: Mapping[str, Any]) -> JournalLine | None:
    """A decoded line of a stream or a session file's journal as its typed line, checked as
    the schema checks it; ``None`` for a line of another kind or one the format refuses."""
    if value.get("event_type") not in (STEP, STEP_DECISION):
        return None
    try:
        line: JournalLine = msgspec.convert(value, JournalLine)
    except UnicodeEncodeError:  # a lone surrogate in free text (see below)
        return _with_surrogates(value)
    except msgspec.ValidationError:
        return None
    return line


def journal_lines(values: Iterable[Mapping[str, Any] | JournalLine]) -> list[JournalLine]:
    """The journal's lines among ``values`` (decoded lines of a stream or a session file's
    journal, or lines already typed), in order; anything else left out."""
    lines: list[JournalLine] = []
    for value in values:
        line = value if isinstance(value, (Step, StepDecision)) else decode_line(value)
        if line is not None:
            lines.append(line)
    return lines


def _with_surrogates(value: Mapping[str, Any]) -> JournalLine | None:
    """A line holding a lone surrogate (text with no UTF-8, which the journal writes as its
    escape: a tool's arguments, a result), whose patterns msgspec cannot check: checked with
    each one as U+FFFD (:func:`~agenttrace.model.constrained.without_surrogates`), and kept as
    it was."""
    try:
        msgspec.convert(without_surrogates(value), JournalLine)
    except msgspec.ValidationError:
        return None
    fields = {key: item for key, item in value.items() if key != "event_type"}
    return Step(**fields) if value.get("event_type") == STEP else StepDecision(**fields)
