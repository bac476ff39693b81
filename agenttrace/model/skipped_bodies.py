"""The tool calls whose bodies a re-entered run will not run, and what those bodies logged
(docs/journal.md, "Re-entry").

A re-entered run runs its code again from the start, so whatever it logs in its own agents'
transcripts it logs again, and a resume sets each transcript back to where the interrupted run
started. But a tool call the journal answers (done, or decided done) does not run its body: a
sub-agent that body created, or told something, is not told it again. So the events such a body
logged (anything under the call's label, and what other agents than its caller logged at the
label itself: a sub-agent's creation, what it heard) stand, and a sub-agent the interrupted run
created anywhere else (in a call that runs again) did not exist when the run started: the
re-entered run creates it again, as the first run did.

Events carry the label of the op they were logged in (``path``); a sub-agent run's labels are
its op's label and more (``2.2.1.1``, ``2.2:2.1.1``: docs/path-labels.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agenttrace.model import events as ev
from agenttrace.model.journal import Journal
from agenttrace.model.journal_lines import RUN_LABEL


@dataclass(frozen=True)
class SkippedBodies:
    """The tool calls of an interrupted run that its re-entry answers from the journal."""

    callers: Mapping[str, str | None]
    """Each such call's label -> the agent that made it (its own entries at that label, its
    tool result, are logged again by the re-entry)."""
    starts: Sequence[int]
    """How many events the session had logged when each attempt at the run started, in order
    (a run stopped at a call in doubt, or killed again, is re-entered again)."""

    def region(self, event: Mapping[str, Any]) -> str | None:
        """The label of the outermost answered call whose body logged ``event``, if any."""
        path = event.get("path")
        if not isinstance(path, str) or not self.callers:
            return None
        for label in _labels_within(path):
            if label not in self.callers:
                continue
            if label != path or event.get("agent_id") != self.callers[label]:
                return label
        return None

    def absent(self, events: Sequence[Mapping[str, Any]]) -> frozenset[str]:
        """The sub-agents created inside an attempt at the run (in a tool call's body) that the
        re-entry creates again: every one but those created by the last run of an answered
        call's body. They did not exist when the run started."""
        if not self.starts:
            return frozenset()
        created: list[tuple[str, int, str | None]] = []  # (agent, attempt, region)
        last_body: dict[str, int] = {}  # an answered call -> the last attempt that ran its body
        for event in events:
            number = ev.id_number(str(event.get("message_id", "")), ev.MESSAGE_PREFIX)
            if number is None or number <= self.starts[0]:
                continue
            attempt = sum(1 for start in self.starts if start < number)
            region = self.region(event)
            if region is not None:
                last_body[region] = max(last_body.get(region, 0), attempt)
            agent = event.get("agent_id")
            # Created in an op of the run (a tool call's body): a sub-agent. Not the run's own
            # agent, registered as its run starts (at ``0``), nor one the program made between
            # runs (no label).
            path = event.get("path")
            inside = isinstance(path, str) and "." in path
            if event.get("event_type") == ev.AGENT_CREATED and isinstance(agent, str) and inside:
                created.append((agent, attempt, region))
        return frozenset(
            agent
            for agent, attempt, region in created
            if region is None or last_body.get(region) != attempt
        )


def skipped_bodies(journal: Journal, origin: str) -> SkippedBodies:
    """The calls of the run ``origin`` whose bodies its re-entry does not run: the last attempt
    at each tool call's label is done with a result that answers (not capped, given back by
    its JSON) or decided done."""
    labels: dict[str, None] = {}  # in the order they started
    starts: dict[int, int] = {}
    for (run, label, attempt), step in journal.steps.items():
        if run != origin:
            continue
        if step.kind == "run" and label == RUN_LABEL and step.messages is not None:
            starts[attempt] = step.messages
        elif step.kind == "tool" and label not in labels:
            labels[label] = None
    last = {label: journal.latest(origin, label) for label in labels}
    callers = {
        label: step.agent_id
        for label, step in last.items()
        if step is not None
        and (
            step.decision == "done"
            or (
                step.decision is None
                and step.state == "done"
                and not step.capped
                and step.replayable
            )
        )
    }
    return SkippedBodies(callers, [starts[attempt] for attempt in sorted(starts)])


def _labels_within(path: str) -> list[str]:
    """``path`` and the labels of the ops it is under, outermost first (``2``, ``2.2``,
    ``2.2.1`` ... for ``2.2.1.2``)."""
    cuts = [index for index, char in enumerate(path) if char in ".:"]
    return [path[:index] for index in cuts] + [path]
