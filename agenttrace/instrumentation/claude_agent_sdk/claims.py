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

from agenttrace.tracing.steps import Step

MAX_CLAIMS = 10_000
"""Claims kept for calls the program has not received yet (the oldest go first: a call the
program never reads, its stream abandoned, does not stay for ever)."""


@dataclass(frozen=True, slots=True)
class Claim:
    """What the hook did with a call: journaled its intent at ``step``'s key, or denied it
    (``step`` is ``None``)."""

    step: Step | None


_lock = threading.Lock()
_claims: OrderedDict[str, Claim] = OrderedDict()
_labels: OrderedDict[tuple[str, str], str] = OrderedDict()
"""(run, label) -> the call id that claimed it ahead of its op."""


def claim(call_id: str, run: str, step: Step | None) -> None:
    """The hook settled call ``call_id`` of ``run`` (its intent journaled at ``step.key``)."""
    with _lock:
        _claims[call_id] = Claim(step)
        if step is not None:
            _labels[(run, step.key[1])] = call_id
        while len(_claims) > MAX_CLAIMS:
            _claims.popitem(last=False)
        while len(_labels) > MAX_CLAIMS:
            _labels.popitem(last=False)


def take(call_id: str) -> Claim | None:
    """The claim the hook left for ``call_id``, if any (taken: a call is received once)."""
    with _lock:
        return _claims.pop(call_id, None)


def claimed(call_id: str) -> bool:
    """Whether the hook settled ``call_id`` and the program has not received it yet."""
    with _lock:
        return call_id in _claims


def label_taken(run: str, label: str, call_id: str) -> bool:
    """Whether another call than ``call_id`` claimed the key ``label`` of ``run`` ahead."""
    with _lock:
        owner = _labels.get((run, label))
    return owner is not None and owner != call_id


def labels_of(run: str) -> set[str]:
    """The labels of ``run`` claimed ahead so far."""
    with _lock:
        return {label for (owner_run, label) in _labels if owner_run == run}
