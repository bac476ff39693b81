"""What the bodies of a replay's served tool calls logged, copied into the replay session when
(and only when) a call is served (docs/design/replay.md, "The replay session").

A replay serves a tool call without running its body, so what that body logged in the source
run (a sub-agent's creation, what it heard and said: ``agenttrace.model.skipped_bodies``) is
copied from the recording. It is copied when the call is served, not when the replay starts: a
call the replay reaches after a lenient divergence runs its body live, and what it logs then is
the only record of it; copied as well, it would be there twice.

A copy is logged now, in the served call's scope: it gets the replay session's next message id,
the time now and the call's label, trace and span (the source's would name a trace the replay
session has no run of: a reader would take them for a run of its own), and keeps what it says
(its agent, role, content, ...). An id it refers to (an agent's ``cause``, an entry's
``substance``, a reset's ``reused``) becomes its copy's where it names an event copied before,
and the served call's own message (the assistant entry holding it, in the replay) where a
``cause`` names one the source run logged outside the body (the entry that held the call
there); any other is left as the source's, which the replay session never allocates (its
message counter starts past the source's ids: ``agenttrace.session.replay``). Agent ids are the
source's, and so is the agents' registry the replay rebuilds the program's agents from.

This module decides what to log; it logs nothing (``Session.log_copies`` does).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agenttrace.model import events as ev
from agenttrace.model.skipped_bodies import SkippedBodies

Build = Callable[[str], dict[str, Any]]
"""An event, given its message id (``Session.log_copies`` allocates it)."""


@dataclass
class ServedBodies:
    """The events each tool call a replay may serve logged in its body, by the call's label,
    copied once each (:meth:`take`)."""

    bodies: dict[str, list[dict[str, Any]]]
    """The label of each call the replay may serve -> what its body logged (the source's
    events, in their order), until it is taken."""
    start: int
    """The message number the source run started at (its run line's ``messages``): an id up
    to it is one the replay session holds as the source's."""
    ids: dict[str, str] = field(default_factory=dict)
    """The source's message id of each event copied so far -> its copy's."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def take(self, label: str, call_message: str | None = None) -> list[Build]:
        """The copies of what the body of the call at ``label`` (the source's label of the
        step it was served from) logged, to log now, in order; empty once taken, and for a call
        whose body logged nothing. ``call_message``: the replay's message id of the assistant
        entry holding the call, which a copied ``cause`` naming the source's gets."""
        with self._lock:
            events = self.bodies.pop(label, [])
        return [self._copy(event, call_message) for event in events]

    def _copy(self, event: Mapping[str, Any], call_message: str | None) -> Build:
        def build(message_id: str) -> dict[str, Any]:
            # Called in order, under the session's lock: an event's copy knows the ids of the
            # copies before it (a reset reusing entries copied just before).
            copy: dict[str, Any] = {"message_id": message_id}
            copy.update((k, v) for k, v in event.items() if k not in _REPLAYS_OWN)
            if "cause" in copy:
                copy["cause"] = self._cause(copy["cause"], call_message)
            if "substance" in copy:
                copy["substance"] = self._id(copy["substance"])
            if isinstance(copy.get("reused"), list):
                copy["reused"] = [self._piece(piece) for piece in copy["reused"]]
            source = event.get("message_id")
            if isinstance(source, str):
                with self._lock:
                    self.ids[source] = message_id
            return copy

        return build

    def _copied(self, value: Any) -> str | None:
        """The id of the copy of the source's event ``value`` names, if it was copied."""
        if not isinstance(value, str):
            return None
        with self._lock:
            return self.ids.get(value)

    def _id(self, value: Any) -> Any:
        copied = self._copied(value)
        return value if copied is None else copied

    def _cause(self, cause: Any, call_message: str | None) -> Any:
        if isinstance(cause, list):
            return [self._cause(one, call_message) for one in cause]
        copied = self._copied(cause)
        if copied is not None:
            return copied
        number = ev.id_number(str(cause), ev.MESSAGE_PREFIX)
        if call_message is not None and number is not None and number > self.start:
            # Logged in the run, outside the body: the source's entry holding the call. In
            # the replay, the entry holding the call served.
            return call_message
        return cause

    def _piece(self, piece: Any) -> Any:
        if isinstance(piece, list):
            return [self._id(one) for one in piece]
        return piece


_REPLAYS_OWN = frozenset(("message_id", *ev.LINKAGE_FIELDS))
"""What a copy gets from the replay session, not the source's event."""


def served_bodies(
    events: Sequence[Mapping[str, Any]], count: int, start: int, skipped: SkippedBodies
) -> ServedBodies:
    """What the bodies of ``skipped``'s calls logged after the first ``count`` of ``events``
    (the events up to message number ``start``, where the run started), by the label of the
    outermost call each event was logged in."""
    bodies: dict[str, list[dict[str, Any]]] = {}
    for event in events[count:]:
        label = skipped.region(event)
        if label is not None:
            bodies.setdefault(label, []).append(dict(event))
    return ServedBodies(bodies, start)
