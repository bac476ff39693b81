"""Values an agent reads from the world inside ``agenttrace.deterministic()`` (random's seed,
``uuid.uuid4()``, the wall clock), kept in the step journal so that a replay, or a resume that
re-enters the run, gets the same ones (docs/design/replay.md, "Deterministic values").

A value is a step of kind ``value``: keyed by the label of the scope that read it and ``~n`` for
its n-th read there (``2.1~3``), so reads are numbered by the agent's own order at each place,
and a tool call a replay serves (its body, and the reads in it, not run) shifts no other place's
numbers. This module names the values, turns them into JSON and back, and decides what a
re-entered run does at a value's key; it writes nothing (``agenttrace.tracing.journal.values``
does).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from agenttrace.model.reentry import Reentry

VALUE_KIND: Literal["value"] = "value"
"""The journal ``kind`` of a value's step."""

ValueName = Literal["seed", "uuid4", "time", "time_ns"]


def _float(value: Any) -> float:
    if type(value) not in (int, float):
        raise TypeError(f"not a number: {value!r}")
    return float(value)


def _int(value: Any) -> int:
    if type(value) is not int:
        raise TypeError(f"not an integer: {value!r}")
    return value


def _uuid(value: Any) -> uuid.UUID:
    if not isinstance(value, str):
        raise TypeError(f"not a uuid's text: {value!r}")
    return uuid.UUID(value)


DECODERS: dict[str, Callable[[Any], Any]] = {
    "seed": _int,
    "uuid4": _uuid,
    "time": _float,
    "time_ns": _int,
}
"""Per value's name: its recorded JSON back as the value the agent read (a ``ValueError`` or
``TypeError`` for JSON that is not one)."""


def as_json(value: Any) -> Any:
    """A value as its step keeps it: a number as it is, a uuid as its text."""
    return str(value) if isinstance(value, uuid.UUID) else value


def value_label(label: str, index: int) -> str:
    """The step label of the ``index``-th value (from 1) read at path label ``label``."""
    return f"{label}~{index}"


ValueAction = Literal["serve", "record", "live"]


@dataclass(frozen=True)
class ValuePlan:
    """What a re-entered run does with a value read at a key: ``serve`` the recorded
    ``value``; ``record`` (read it now and journal it at the key); ``live`` (read it now,
    journal nothing: the key holds another read's value)."""

    what: ValueAction
    value: Any = None


def plan_value(reentry: Reentry, label: str, name: str) -> ValuePlan:
    """The plan for the value ``name`` read at step label ``label`` (:func:`value_label`) by
    the run ``reentry`` re-enters or replays: the recording's value if it read the same there.
    A replay counts a served value as served, and lists one it reads now in its report (never
    a divergence: the run asks nothing of the world by reading a clock)."""
    rules = reentry.replay
    if rules is not None and rules.runs_live(label, VALUE_KIND, name):
        return ValuePlan("record")
    step = reentry.journal.step(reentry.origin, label)
    why = None
    if step is None or step.kind != VALUE_KIND or step.state != "done":
        why = "no recorded value"
    elif step.name != name:
        why = f"the recording read {step.name} there"
    else:
        try:
            value = DECODERS[name](step.result)
        except (KeyError, TypeError, ValueError):
            why = f"its recorded value is not a {name}"
        else:
            if rules is not None:
                rules.served()
            return ValuePlan("serve", value)
    if rules is not None:
        rules.note_live(label, VALUE_KIND, name, why)
        return ValuePlan("record")  # at the replay run's own key: free
    # A resume: the interrupted run's key holds another read's value, or none.
    return ValuePlan("record" if step is None else "live")
