"""Re-entering an interrupted run (docs/journal.md, "Re-entry"): what to do with each step the
re-entered run reaches, from what the journal says became of it there.

A resume that re-enters arms a :class:`Reentry` on the session; the next root run takes it and
journals under the interrupted run's origin, so its steps have the same keys (and its tool calls
the same idempotency keys) as the ones it repeats. For each step it reaches, :meth:`Reentry.plan`
says: run it (as which attempt), answer it from the journal (``replay``), ask the tool's verifier
(``verify``), stop the resume (``stop``: :class:`InDoubtToolCall`) or refuse it (``abandon``:
:class:`AbandonedToolCall`, the user's decision).

This module decides; it writes nothing and runs nothing (``agenttrace.tracing.journal.steps`` does).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agenttrace._internal.redact import cap_text, scrub_json_text
from agenttrace.model.journal import EFFECTS, Journal, Step
from agenttrace.model.replay import ReplayDivergence, ReplayRules, llm_fields, tool_fields
from agenttrace.model.rewind import Rewound, rewind_transcripts
from agenttrace.model.skipped_bodies import skipped_bodies
from agenttrace.model.unanswered import UnansweredPolicy

SHOWN_ARGUMENT_BYTES = 512
"""How much of an in-doubt call's arguments :class:`InDoubtToolCall` shows (redacted first)."""

InDoubtAction = Literal["retry", "verify", "stop"]
IN_DOUBT_ACTIONS: tuple[InDoubtAction, ...] = ("retry", "verify", "stop")

DEFAULT_POLICY: Mapping[str, InDoubtAction] = {
    "pure": "retry",
    "read": "retry",
    "idempotent": "retry",  # with the same idempotency key: the target does it once
    "effect": "verify",  # the tool's verifier if it has one, else stop
}
"""What a re-entry does with a call in doubt (its intent journaled, its outcome not), per
effect class. Done steps are always answered from the journal and failed steps that were not
applied always run again: only the in-doubt case is a choice."""

Planned = Literal["run", "replay", "fail", "verify", "stop", "abandon", "diverge"]


def check_policy(policy: Mapping[str, str] | None) -> dict[str, InDoubtAction]:
    """The default policy with ``policy``'s entries over it; a ``ValueError`` naming what is
    wrong for an unknown effect class or action."""
    checked = dict(DEFAULT_POLICY)
    for effect, action in (policy or {}).items():
        if effect not in EFFECTS:
            raise ValueError(f"policy: {effect!r} is not an effect class ({', '.join(EFFECTS)})")
        if action not in IN_DOUBT_ACTIONS:
            raise ValueError(
                f"policy: {effect}: {action!r} is not one of {', '.join(IN_DOUBT_ACTIONS)}"
            )
        checked[effect] = action
    return checked


@dataclass(frozen=True)
class Plan:
    """What to do with one step a re-entered run reached."""

    what: Planned
    attempt: int = 1
    """The attempt to journal it as, when it runs."""
    step: Step | None = None
    """The journal's step at that place (its last attempt), if any."""
    result: Any = None
    """The result to answer with (``replay``), or the error to raise (``diverge``: a strict
    replay's :class:`~agenttrace.model.replay.ReplayDivergence`)."""
    label: str | None = None
    """The label to journal it under: the journal's step's, which a call that started in
    another order than the first time (parallel calls) has at another place."""


@dataclass(frozen=True)
class Verdict:
    """What a tool's verifier (``@agenttrace.tool(verify=fn)``) found out about a call in doubt:
    ``Verdict.done(result)`` (it happened; ``result`` is what the tool would have returned),
    ``Verdict.not_applied()`` (it did not happen: run it) or ``Verdict.unknown()`` (the resume
    stops with :class:`InDoubtToolCall`)."""

    outcome: Literal["done", "not_applied", "unknown"]
    result: Any = None

    @classmethod
    def done(cls, result: Any = None) -> Verdict:
        """The call's effect happened; ``result`` is what the tool would have returned."""
        return cls("done", result)

    @classmethod
    def not_applied(cls) -> Verdict:
        """The call's effect did not happen: it may run."""
        return cls("not_applied")

    @classmethod
    def unknown(cls) -> Verdict:
        """Nothing can be said: the call stays in doubt."""
        return cls("unknown")


class InDoubtToolCall(Exception):
    """A re-entered run reached a tool call that was in doubt (it started before the crash and
    left no outcome) and that the resume policy does not run again: its effect may have
    happened. ``calls`` are the in-doubt calls of the run: decide each with ``agenttrace
    resolve`` (or give the tool a verifier), then resume again."""

    def __init__(self, calls: list[Step], shown: Mapping[str, str] | None = None) -> None:
        self.calls = calls
        names = "; ".join(
            f"{step.key[1]} {step.name}({(shown or {}).get(step.key[1], '')})" for step in calls
        )
        super().__init__(
            f"{len(calls)} tool call{'s' if len(calls) != 1 else ''} in doubt, not run again: "
            f"{names} (agenttrace doubts lists them; agenttrace resolve decides)"
        )


class UnanswerableToolCall(InDoubtToolCall):
    """A re-entered run reached a tool call that ended, but whose recorded result cannot be
    given back as the tool returned it (an object of a class the tool's return annotation does
    not name, a result too long to keep), and whose effect class is not run again: the journal
    does not hand back a value of another type, so the resume stops here."""

    def __init__(
        self, step: Step, why: str, calls: list[Step], shown: Mapping[str, str] | None = None
    ) -> None:
        super().__init__([step, *calls], shown)
        Exception.__init__(
            self,
            f"the call of {step.name} at {step.key[1]} ended, but its result cannot be given "
            f"back as it was returned ({why}), and a call of class {step.effect!r} is not run "
            "again: annotate the tool's return type (a dataclass, a pydantic model, plain "
            "types), give it a verifier, or decide it with agenttrace resolve",
        )


def _why_unanswerable(step: Step) -> str:
    if step.capped:
        return "it was too long to keep"
    return "its JSON is not the value, and no return annotation names the value's type"


class AbandonedToolCall(Exception):
    """The tool call was in doubt and its user decided to abandon it (``agenttrace resolve
    --abandon``): it is not run again, and the agent sees this error as the tool's failure."""

    effect_applied = False  # nothing ran: the journal's failed line says so


@dataclass
class Reentry:
    """An interrupted run armed for re-entry: the next root run takes it."""

    origin: str
    """The interrupted run's origin: the re-entered run journals under it."""
    attempt: int
    """The re-entered run's own attempt (the interrupted run's + 1)."""
    journal: Journal
    policy: Mapping[str, InDoubtAction]
    name: str | None = None
    """The interrupted run's name (its entry point's)."""
    fingerprint: str | None = None
    """Of the arguments the interrupted run's entry point was called with (``None`` in a
    journal of an earlier release: then any next run re-enters it)."""
    unanswered: UnansweredPolicy = "reply"
    """How the tool calls the crash left without a result are answered if the next run turns
    out to be a new one (the resume's ``unanswered_tool_calls``)."""
    rewound: Rewound | None = None
    """What setting the transcripts back changed, to undo if the next run is a new one."""
    taken: bool = False
    claimed: set[str] = field(default_factory=set)
    """The labels of the journal's tool steps a call of the re-entered run has matched."""
    fresh: set[str] = field(default_factory=set)
    """The labels this re-entry gave requests that were not the journal's at their place."""
    asked: set[str] = field(default_factory=set)
    """A replay's: the labels its run's LLM attempts asked at (the tool calls' are
    ``claimed``)."""
    stopped: InDoubtToolCall | None = None
    """Once a call stopped the resume, every later call of the run stops with it."""
    shown: dict[str, str] = field(default_factory=dict)
    """Each in-doubt call's arguments as an error may show them (redacted, capped), by label."""
    replay: ReplayRules | None = None
    """A replay's rules (``agenttrace.model.replay``), where the run re-entered is a finished
    one replayed into a new session; ``None`` for a resume's re-entry."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _tools: list[Step] | None = field(default=None, repr=False)

    def take(self) -> bool:
        """Whether this run is the one that re-enters (the first root run to ask)."""
        with self._lock:
            if self.taken:
                return False
            self.taken = True
            return True

    def plan(
        self,
        label: str,
        name: str,
        fingerprint: str | None,
        call_id: str | None = None,
        arguments: str | None = None,
    ) -> Plan:
        """What to do with the tool call ``name`` the re-entered run makes at ``label``: the
        journal's step for it is the one with the model's ``call_id``, else the one at
        ``label`` if it asked the same, else one of the same request elsewhere that no call has
        matched (parallel calls may start in another order). ``arguments``: the call's, as the
        journal keeps them (a replay's divergence shows how they differ)."""
        if self.stopped is not None:
            return Plan("stop")
        rules = self.replay
        if rules is not None and rules.runs_live(label, "tool", name):
            return Plan("run")
        with self._lock:
            step = self._matching(label, name, fingerprint, call_id)
            if step is not None:
                self.claimed.add(step.key[1])
        if step is None:
            at = self.journal.latest(self.origin, label)
            if rules is not None:  # a replay: the recording does not answer this call
                fields = tool_fields(at, arguments) if arguments is not None else []
                error = ReplayDivergence(label, "tool", at, name, fingerprint, fields)
                diverged = rules.diverge(error)
                return Plan("run") if diverged is None else Plan("diverge", result=diverged)
            if at is None:
                return Plan("run")
            # The run asks something else at this place (its code or its inputs changed): the
            # journal does not answer it, but a call there in doubt, unmatched, still stops it.
            if (
                at.in_doubt
                and at.key[1] not in self.claimed
                and self.policy.get(at.effect, "stop") != "retry"
            ):
                return Plan("stop", step=at)
            # Another request than the one journaled here (or the step here was claimed by a
            # call that started at another place): a call of its own, under a label of its
            # own, so it never takes the other call's idempotency key, nor hides its step from
            # a later re-entry.
            return Plan("run", label=self._fresh(label))
        again, place = step.key[2] + 1, step.key[1]
        if rules is not None:  # a replay serves a result, or runs the call live
            return _replay_tool(rules, step, label)
        if step.decision is not None:
            if step.decision == "done":
                return Plan("replay", step=step, result=decided_result(step.result), label=place)
            if step.decision == "abandon":
                return Plan("abandon", step=step, label=place)
            return Plan("run", again, step, label=place)  # not_applied, retry
        if step.state == "done" and not step.capped and step.replayable:
            return Plan("replay", step=step, result=recorded_result(step.result), label=place)
        if step.state == "failed" and step.applied == "no":
            return Plan("run", again, step, label=place)
        # In doubt: started with no outcome, failed with its effect unknown, or done with a
        # result too long to have been kept or that its JSON does not give back.
        action = self.policy.get(step.effect, "stop")
        return Plan("run" if action == "retry" else action, again, step, label=place)

    def _matching(
        self, label: str, name: str, fingerprint: str | None, call_id: str | None
    ) -> Step | None:
        tools = [
            step
            for step in self._tool_steps()
            if step.key[1] not in self.claimed and step.name == name
        ]
        if call_id is not None:
            for step in tools:
                if step.call_id == call_id:
                    return step
        for step in tools:
            if step.key[1] == label and (
                not fingerprint or not step.fingerprint or step.fingerprint == fingerprint
            ):
                return step
        if fingerprint:
            for step in tools:
                if step.fingerprint == fingerprint:
                    return step
        return None

    def unasked(self) -> list[Step]:
        """A replay's recorded LLM and tool calls (the last attempt at each place) that no
        call of its run asked for, in the order they started: the run made fewer calls than
        the recording. None inside a tool call the replay matched (its body did not run when
        served), and none if no run took this re-entry (a run never started is counted apart).
        """
        if not self.taken:
            return []
        with self._lock:
            asked = self.asked | self.claimed
            inside = tuple(f"{label}." for label in self.claimed)
        last: dict[str, Step] = {}
        for (run, label, _), step in self.journal.steps.items():
            if run == self.origin and step.kind in ("llm", "tool"):
                last[label] = step
        return [
            step
            for label, step in last.items()
            if label not in asked and not label.startswith(inside)
        ]

    def _fresh(self, label: str) -> str:
        """A label for another request at ``label``'s place: ``label/2``, ``label/3``, ...,
        the first that neither the journal nor an earlier call of this re-entry used."""
        with self._lock:
            n = 2
            while (
                f"{label}/{n}" in self.fresh
                or self.journal.latest(self.origin, f"{label}/{n}") is not None
            ):
                n += 1
            self.fresh.add(f"{label}/{n}")
            return f"{label}/{n}"

    def _tool_steps(self) -> list[Step]:
        """The last attempt of each tool call of the interrupted run, in the order they
        started (made once)."""
        if self._tools is None:
            last: dict[str, Step] = {}
            for (run, label, _), step in self.journal.steps.items():
                if run == self.origin and step.kind == "tool":
                    last[label] = step
            self._tools = list(last.values())
        return self._tools

    def plan_llm(
        self,
        label: str,
        fingerprint: str,
        failures: bool = False,
        request: Mapping[str, Any] | None = None,
        agent_id: str | None = None,
        name: str = "llm",
    ) -> Plan:
        """What to do with the LLM attempt the re-entered run makes at ``label``: answered from
        the journal if it holds one done with the same request (``replay``), else sent (as the
        next attempt at that place, if it had one: a reply never received is asked again).

        ``failures``: the caller can end an attempt as its recorded failure and go on to the
        call's next attempt itself (litellm's calls): a failed attempt whose request the journal
        shows asked again at the next place of its turn (the OpenAI SDK's retry, litellm's, the
        program's) is answered with its failure (``fail``), so the call's attempts keep their
        places and the one that got the reply is answered from the journal too.

        A replay (``self.replay``) serves only a done step of the same request; another
        request, or none recorded there, is a divergence (``request``: the one made now, and
        ``agent_id``: whose, and ``name``: its model as journaled, for its field-level diff),
        and a recorded failure runs live."""
        step = self.journal.latest(self.origin, label)
        rules = self.replay
        if rules is not None:
            return self._replay_llm(rules, label, fingerprint, step, request, agent_id, name)
        if step is None:
            return Plan("run")
        if step.kind != "llm":  # a tool's place the first time: the run diverged
            return Plan("run", step.key[2] + 1)
        if step.fingerprint == fingerprint:
            if step.state == "done" and not step.capped:
                return Plan("replay", step=step, result=step.result)
            if failures and step.state == "failed" and self._asked_again(step):
                return Plan("fail", step=step)
        return Plan("run", step.key[2] + 1, step)

    def _replay_llm(
        self,
        rules: ReplayRules,
        label: str,
        fingerprint: str,
        step: Step | None,
        request: Mapping[str, Any] | None,
        agent_id: str | None,
        name: str,
    ) -> Plan:
        with self._lock:
            self.asked.add(label)
        if rules.runs_live(label, "llm", name):
            return Plan("run")
        if step is None or step.kind != "llm" or step.fingerprint != fingerprint:
            sent = (rules.requests or {}).get(agent_id or "")
            fields = llm_fields(sent, request, step, name)
            error = ReplayDivergence(label, "llm", step, name, fingerprint, fields)
            diverged = rules.diverge(error)
            return Plan("run") if diverged is None else Plan("diverge", result=diverged)
        if step.state == "done" and not step.capped:
            rules.served()
            return Plan("replay", step=step, result=step.result)
        rules.not_replayable(step, label)
        return Plan("run")

    def _asked_again(self, step: Step) -> bool:
        """Whether the op after ``step`` in its turn is an LLM attempt of the same request."""
        after = self.journal.latest(self.origin, next_label(step.key[1]))
        return after is not None and after.kind == "llm" and after.fingerprint == step.fingerprint

    def stop(self, step: Step | None, why: str | None = None) -> InDoubtToolCall:
        """The error that stops the resume at ``step``: it names every call of the run the
        policy does not run again (``step`` first). A step that ended but whose result cannot
        be given back (``why``) stops it with :class:`UnanswerableToolCall`."""
        calls = [
            other
            for other in self.journal.in_doubt_of(self.origin)
            if self.policy.get(other.effect, "stop") != "retry" and other is not step
        ]
        error: InDoubtToolCall
        if step is not None and (
            why is not None or (step.state == "done" and (step.capped or not step.replayable))
        ):
            error = UnanswerableToolCall(step, why or _why_unanswerable(step), calls, self.shown)
        else:
            error = InDoubtToolCall(([step] if step is not None else []) + calls, self.shown)
        self.stopped = error
        return error


def _replay_tool(rules: ReplayRules, step: Step, label: str) -> Plan:
    """A replay's plan for a tool call the recording has a step for: its result if it
    recorded one that gives back what the tool returned (or one decided done), else live."""
    if step.decision == "done":
        result = decided_result(step.result)
    elif step.decision is None and step.state == "done" and not step.capped and step.replayable:
        result = recorded_result(step.result)
    else:
        rules.not_replayable(step, label)
        return Plan("run")
    rules.served()
    return Plan("replay", step=step, result=result, label=step.key[1])


def next_label(label: str) -> str:
    """The path label of the op after ``label``'s in the same turn (``1.2`` after ``1.1``)."""
    turn, _, index = label.rpartition(".")
    return f"{turn}.{int(index) + 1}" if turn and index.isdigit() else label + ".next"


def recorded_result(result: Any) -> Any:
    """A done step's result as the tool returned it: the journal keeps it as JSON text."""
    if not isinstance(result, str):
        return result
    try:
        return json.loads(result)
    except ValueError:
        return result  # written by an earlier release as the text itself


def decided_result(result: Any) -> Any:
    """The result a user gave ``agenttrace resolve --done``: JSON if the file held JSON, else
    its text."""
    return recorded_result(result)


def arm_reentry(
    session: Any,
    journal: Journal,
    events: Sequence[Mapping[str, Any]],
    policy: Mapping[str, InDoubtAction],
    unanswered: UnansweredPolicy = "reply",
) -> Reentry | None:
    """Arm ``session`` (an ``agenttrace.Session`` just restored from a file whose events are
    ``events``) to re-enter its interrupted run, if its journal has one and it was not an
    implicit run: every agent's transcript is set back to what it was when that run started (a
    ``transcript_reset`` each, logged now), so the run's code, called again, sends what it sent
    then. Returns the :class:`Reentry`, or ``None``. Whether the next run is the interrupted
    one is decided when it starts (``agenttrace.session.reentry_match``)."""
    run = journal.interrupted_run()
    if run is None or run.messages is None or run.implicit:
        return None
    reentry = Reentry(
        run.key[0],
        run.key[2] + 1,
        journal,
        policy,
        name=run.name,
        fingerprint=run.fingerprint,
        unanswered=unanswered,
    )
    for step in journal.in_doubt_of(reentry.origin):
        if step.arguments is not None:
            reentry.shown[step.key[1]] = cap_text(
                step.arguments, SHOWN_ARGUMENT_BYTES, scrub_json_text
            )
    skipped = skipped_bodies(journal, reentry.origin)
    reentry.rewound = rewind_transcripts(session, events, run.messages, skipped)
    session.reentry = reentry
    return reentry
