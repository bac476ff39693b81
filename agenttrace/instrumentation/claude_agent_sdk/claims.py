"""Tool calls the ``PreToolUse`` hook (:mod:`.hooks`) settled before the program received them:
what the call's :class:`~.agents.ToolCall` takes over when the SDK yields its ``tool_use``.

The CLI asks the hook before it runs a tool, which may be before the program's loop has read
the message holding the call (always so for a sub-agent's calls: the CLI yields them after it
started them). The hook then journals the call's intent at the label its op is expected to get
and leaves a :class:`Claim` here, by the call id; the ``ToolCall`` made later takes it and
journals nothing again (its ``done`` or ``failed`` goes under the claimed key). A call the hook
denied leaves a claim with no step: nothing ran, nothing is journaled.

Labels claimed ahead are kept per run, so that an op whose label a claim took (the guess was
wrong: a request the CLI retried came between, say) never journals a second call at that key.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from agenttrace.tracing.journal.steps import Pending, Step

MAX_CLAIMS = 10_000
"""Claims kept for calls the program has not received yet (the oldest go first: a call the
program never reads, its stream abandoned, does not stay for ever)."""


@dataclass(frozen=True, slots=True)
class Claim:
    """What the hook did with a call: journaled its intent at ``step``'s key, denied it
    (``step`` is ``None``), or answered it from a replay's recording (a served
    :class:`Pending`)."""

    step: Step | Pending | None


_lock = threading.Lock()
_claims: OrderedDict[tuple[str, str], Claim] = OrderedDict()
"""(run, call id) -> the claim (a call id is the model's: unique, but kept to its run)."""
_labels: OrderedDict[str, dict[str, str]] = OrderedDict()
"""Per run: label -> the call id that claimed it ahead of its op (the newest runs kept)."""
_count = 0
"""Labels kept in :data:`_labels`, all runs together."""


def claim(call_id: str, run: str, step: Step | Pending | None, label: str | None = None) -> None:
    """The hook settled call ``call_id`` of ``run`` (its intent journaled at ``step.key``; a
    served call at ``label``, the label its op is expected to get)."""
    global _count
    with _lock:
        _claims[(run, call_id)] = Claim(step)
        while len(_claims) > MAX_CLAIMS:
            _claims.popitem(last=False)
        if type(step) is Step:
            label = step.key[1]
        if step is None or label is None:
            return
        labels = _labels.setdefault(run, {})
        _labels.move_to_end(run)
        if label not in labels:
            _count += 1
        labels[label] = call_id
        while _count > MAX_CLAIMS and len(_labels) > 1:
            _count -= len(_labels.popitem(last=False)[1])


def take(run: str, call_id: str) -> Claim | None:
    """The claim the hook left for ``call_id`` of ``run``, if any (taken: a call is received
    once)."""
    with _lock:
        return _claims.pop((run, call_id), None)


def claimed(run: str, call_id: str) -> bool:
    """Whether the hook settled ``call_id`` of ``run`` and the program has not received it."""
    with _lock:
        return (run, call_id) in _claims


def label_taken(run: str, label: str, call_id: str) -> bool:
    """Whether another call than ``call_id`` claimed the key ``label`` of ``run`` ahead."""
    with _lock:
        owner = _labels.get(run, {}).get(label)
    return owner is not None and owner != call_id


def taken(run: str, label: str) -> bool:
    """Whether a call claimed the key ``label`` of ``run`` ahead."""
    with _lock:
        return label in _labels.get(run, {})
