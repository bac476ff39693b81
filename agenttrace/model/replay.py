"""Replaying a finished run from its journal (docs/design/replay.md): the rules a replay adds to
a re-entry's (``agenttrace.model.reentry``), the error a strict replay raises where the run asks
something the recording did not, and the report of what could not be replayed.

A replay arms a :class:`~agenttrace.model.reentry.Reentry` like a resume does, with a
:class:`ReplayRules` on it; ``Reentry.plan`` and ``Reentry.plan_llm`` ask these rules where a
replay differs from a re-entry. This module decides and keeps count; it runs nothing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agenttrace.model.fork import Fork
from agenttrace.model.journal import Journal, Step
from agenttrace.model.journal_lines import RUN_LABEL
from agenttrace.model.served_bodies import ServedBodies

ReplayMode = Literal["strict", "lenient"]
REPLAY_MODES: tuple[ReplayMode, ...] = ("strict", "lenient")

MAX_FIELDS = 20
"""How many differing fields a :class:`ReplayDivergence` keeps."""


@dataclass(frozen=True)
class FieldDiff:
    """One field that differs between the recorded request and the one made now."""

    path: str
    """Where it is: ``amount``, ``messages[2].content``, ``model``."""
    recorded: Any
    now: Any

    def __str__(self) -> str:
        return f"{self.path}: {_short(self.recorded)} -> {_short(self.now)}"


class ReplayDivergence(Exception):
    """A strict replay reached a call the recording does not answer: another tool, model or
    request than the recorded step at that label (``fields``: a field-level diff of the two
    requests, as far as the recording keeps them), or a call the recorded run never made
    (``what``, if given, says what differs instead: a run a replay of several has no recorded
    run for)."""

    def __init__(
        self,
        label: str,
        kind: str,
        recorded: Step | None,
        name: str,
        fingerprint: str | None,
        fields: Sequence[FieldDiff] = (),
        what: str | None = None,
    ) -> None:
        self.label = label
        self.kind = kind
        self.recorded_name = recorded.name if recorded is not None else None
        self.recorded_fingerprint = recorded.fingerprint if recorded is not None else None
        self.name = name
        self.fingerprint = fingerprint
        self.fields = list(fields)
        if what is not None:
            pass
        elif recorded is None:
            what = f"the recorded run made no call at {label}; this {kind} call is new"
        elif recorded.kind != kind or recorded.name != name:
            what = f"the recorded {recorded.kind} call there was {recorded.name!r}"
        else:
            what = "its request differs from the recorded one"
        first = f" (first difference: {self.fields[0]})" if self.fields else ""
        more = f", and {len(self.fields) - 1} more field(s)" if len(self.fields) > 1 else ""
        super().__init__(f"replay diverged at {label}: {kind} {name!r}: {what}{first}{more}")


@dataclass(frozen=True)
class NotReplayed:
    """One step the replay ran live, and why."""

    label: str
    kind: str
    name: str
    why: str


@dataclass
class ReplayReport:
    """What a replay served from the recording, and what it could not (ran live instead)."""

    served: int = 0
    """Steps answered from the recording."""
    live: list[NotReplayed] = field(default_factory=list)
    """Steps that ran live, each with why (in the order they were reached)."""
    divergence: NotReplayed | None = None
    """The first call that asked something the recording did not (lenient: everything after it
    ran live)."""
    unasked: list[NotReplayed] = field(default_factory=list)
    """Recorded LLM and tool calls of the runs replayed that no call asked for: the code made
    fewer calls than the recording (filled once the block exits)."""

    @property
    def clean(self) -> bool:
        """Every step the run reached was served from the recording."""
        return not self.live and self.divergence is None

    def lines(self) -> list[str]:
        """The report as lines for a console."""
        lines = [f"{self.served} step(s) served from the recording, {len(self.live)} run live"]
        if self.divergence is not None:
            d = self.divergence
            lines.append(f"diverged at {d.label}: {d.kind} {d.name}: {d.why}")
        lines += [f"  live {n.label} {n.kind} {n.name}: {n.why}" for n in self.live]
        if self.unasked:
            lines.append(f"{len(self.unasked)} recorded call(s) never asked")
            lines += [f"  never asked {n.label} {n.kind} {n.name}" for n in self.unasked]
        return lines


@dataclass
class ReplayRules:
    """What a replay does where its rules are not a re-entry's (docs/design/replay.md)."""

    mode: ReplayMode
    until: str | None = None
    before: frozenset[str] | None = None
    """The labels the source journal started before its first step at ``until`` (``None``:
    no ``until``, every label is served)."""
    report: ReplayReport = field(default_factory=ReplayReport)
    live: bool = False
    """Everything runs live from now on (lenient after a divergence; ``until`` reached)."""
    run: Step | None = None
    """The source run's own journal line (its entry point's name and arguments' fingerprint)."""
    requests: Mapping[str, Sequence[Any]] | None = None
    """Per agent id: what the recording keeps of the messages its LLM requests sent (its
    transcript), for the field-level diff of an LLM call."""
    fork: Fork | None = None
    """A fork's overrides, for its LLM calls from ``until`` on (``agenttrace.forking``)."""
    bodies: ServedBodies | None = None
    """What the bodies of the tool calls it may serve logged, copied into the replay session
    as each is served (``agenttrace.model.served_bodies``)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def runs_live(self, label: str, kind: str, name: str) -> bool:
        """Whether the call at ``label`` runs live whatever the recording holds: everything
        after a lenient divergence, and from the first call not started before ``until``."""
        with self._lock:
            if not self.live and self.before is not None and label not in self.before:
                self.live = True  # the fork's label reached: from here on, live
            live = self.live
        if live:
            self._note(label, kind, name, "after the divergence" if self.diverged else "until")
        return live

    def fork_at(self, label: str) -> Fork | None:
        """The fork whose overrides the LLM call about to start at ``label`` is sent with: one
        at or after the fork's label (a label the source did not start before it), never one a
        lenient divergence sent live before it. Nothing is counted: :meth:`runs_live` does."""
        if self.fork is None or self.before is None or self.diverged:
            return None
        with self._lock:
            after = self.live or label not in self.before
        return self.fork if after else None

    @property
    def diverged(self) -> bool:
        return self.report.divergence is not None

    def served(self) -> None:
        with self._lock:
            self.report.served += 1

    def not_replayable(self, step: Step, label: str) -> None:
        """A recorded step that does not give back a reply: it runs live."""
        if step.state == "failed":
            why = f"its recorded outcome was an error ({step.error or 'failed'}): run live"
        elif step.state == "intent":
            why = "the recording has no outcome for it (in doubt)"
        elif step.capped:
            why = "its recorded result was too long to keep"
        else:
            why = "its recorded result cannot be given back (not replayable)"
        self._note(label, step.kind, step.name, why)

    def diverge(self, error: ReplayDivergence) -> ReplayDivergence | None:
        """The run asked something the recording did not: the error to raise (strict), or
        ``None`` and everything from here on runs live (lenient)."""
        why = str(error).split(": ", 2)[-1]
        with self._lock:
            if self.report.divergence is None:
                self.report.divergence = NotReplayed(error.label, error.kind, error.name, why)
            if self.mode == "strict":
                return error
            self.live = True
        self._note(error.label, error.kind, error.name, "diverged here")
        return None

    def note_live(self, label: str, kind: str, name: str, why: str) -> None:
        """A step the recording does not answer and that is no divergence (a value read
        inside ``agenttrace.deterministic()`` with no recorded value): it ran live, for
        ``why``."""
        self._note(label, kind, name, why)

    def _note(self, label: str, kind: str, name: str, why: str) -> None:
        with self._lock:
            self.report.live.append(NotReplayed(label, kind, name, why))


def labels_before(journal: Journal, origin: str, until: str) -> frozenset[str] | None:
    """The labels of ``origin``'s steps the journal started before its first step at
    ``until``, in start order (the order of their first lines); ``None`` if the run has no
    step at ``until``."""
    before: set[str] = set()
    for run, label, _ in journal.steps:
        if run != origin or label == RUN_LABEL:
            continue
        if label == until:
            return frozenset(before)
        before.add(label)
    return None


def tool_fields(recorded: Step | None, arguments_json: str) -> list[FieldDiff]:
    """The arguments that differ between a recorded tool call (its intent's canonical JSON)
    and the call made now, by key path."""
    if recorded is None or recorded.arguments is None:
        return []
    try:
        then, now = json.loads(recorded.arguments), json.loads(arguments_json)
    except ValueError:
        return [FieldDiff("arguments", recorded.arguments, arguments_json)]
    return list(_diff(then, now, ""))[:MAX_FIELDS]


def llm_fields(
    sent: Sequence[Any] | None,
    request: Mapping[str, Any] | None,
    recorded: Step | None,
    name: str,
) -> list[FieldDiff]:
    """The fields that differ between what the recording keeps of an LLM request (the model
    its step names; ``sent``: the agent's transcript as the source session's events have it)
    and the request made now (litellm's keywords; ``name``: its model as journaled)."""
    fields: list[FieldDiff] = []
    if recorded is not None and recorded.kind == "llm" and recorded.name != name:
        fields.append(FieldDiff("model", recorded.name, name))
    if request is None:
        return fields
    messages = request.get("messages")
    if sent is not None and isinstance(messages, Sequence):
        kept = [_entry(entry) for entry in sent]
        asked = [_entry(message) for message in messages]
        fields += _diff(kept[: len(asked)], asked, "messages")
    return fields[:MAX_FIELDS]


_ENTRY_FIELDS = ("role", "content", "name", "tool_call_id")


def _entry(message: Any) -> dict[str, Any]:
    """The fields of a message both a transcript entry and a request keep."""
    if not isinstance(message, Mapping):
        dump = getattr(message, "model_dump", None)
        message = dump() if callable(dump) else {}
    return {key: message.get(key) for key in _ENTRY_FIELDS if message.get(key) is not None}


def _diff(then: Any, now: Any, path: str) -> Iterable[FieldDiff]:
    if isinstance(then, Mapping) and isinstance(now, Mapping):
        for key in sorted(set(then) | set(now), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in then:
                yield FieldDiff(where, None, now[key])
            elif key not in now:
                yield FieldDiff(where, then[key], None)
            else:
                yield from _diff(then[key], now[key], where)
    elif isinstance(then, list) and isinstance(now, list):
        for index in range(max(len(then), len(now))):
            where = f"{path}[{index}]"
            if index >= len(then):
                yield FieldDiff(where, None, now[index])
            elif index >= len(now):
                yield FieldDiff(where, then[index], None)
            else:
                yield from _diff(then[index], now[index], where)
    elif then != now:
        yield FieldDiff(path or "value", then, now)


def _short(value: Any) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."
