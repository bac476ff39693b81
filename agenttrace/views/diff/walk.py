"""Two runs' opTrees walked together: their steps paired (:mod:`.align`), each pair compared
(:mod:`.steps`, :mod:`.compare`), every divergence found in run order.

Run order: a step's request (an LLM attempt's, a tool call's arguments) is where it starts,
before the sub-agents it hosts; its status and its response (or result) where it ends, after
them; a run's status after its last step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from agenttrace._internal.redact import redacted_copy
from agenttrace.formats.session.optree import children, hosted_sessions
from agenttrace.formats.session.rebuilt import INTERRUPTED
from agenttrace.views.account import IN_DOUBT
from agenttrace.views.diff.align import align
from agenttrace.views.diff.compare import ABSENT, field_diff
from agenttrace.views.diff.result import Divergence, OnlyIn, StepDiff
from agenttrace.views.diff.steps import Exchange, JournalIndex, attempt_of, exchange, usage

Node = Mapping[str, Any]

HOSTING = "session"
"""The kind of a tool call's op whose body ran a sub-agent (it hosts that agent's session)."""


class Walk:
    """The walk of two runs (``a`` and ``b``: root run nodes, each with its session's journal);
    ``max_bytes``: each string shown is capped so (the redaction policy of every output)."""

    def __init__(
        self,
        journals: tuple[JournalIndex, JournalIndex],
        origins: tuple[str | None, str | None],
        max_bytes: int | None,
    ) -> None:
        self.journals = journals
        self.origins = origins
        self.max_bytes = max_bytes
        self.steps: list[StepDiff] = []
        self.first: Divergence | None = None
        """The first divergence in run order."""
        self.divergences = 0
        """How many there are."""
        self.only_in_a: list[OnlyIn] = []
        self.only_in_b: list[OnlyIn] = []
        self.ids_differ = False
        """An LLM exchange so far differed in what it kept, ids a provider made up included (a
        tool call's): every later request's fingerprint then differs for that alone, and no
        longer says whether anything else differs."""

    def run(self, a: Node, b: Node) -> None:
        self._pair(a, b, "session", 0)

    # --- pairing --------------------------------------------------------------------------

    def _pair(self, a: Node | None, b: Node | None, level: str, depth: int) -> None:
        """A pair of steps at ``level`` of the tree (``session``, ``turn`` or ``op``), or a
        step of one run only, and what is under it."""
        if a is None or b is None:
            self._only(a, b, level, depth)
            return
        kind_a, kind_b = _kind(a, level), _kind(b, level)
        index = len(self.steps)
        self.steps.append(self._step(a, b, level, kind_a, depth))
        found: list[str] = []
        if level == "op" and kind_a != kind_b and self._served_for(a, b, kind_a, kind_b):
            kind_a = kind_b = HOSTING  # the same call: one side's body ran a sub-agent
        if (kind_a, _name(a)) != (kind_b, _name(b)):
            fields = {"kind": kind_a, "name": _name(a)}, {"kind": kind_b, "name": _name(b)}
            found.append(self._diverge("structure", a, b, kind_a, fields))
        elif level == "session":
            found += self._session(a, b, depth)
        elif level == "turn":
            self._children(a, b, "ops", _op_key, "op", depth)
        else:
            found += self._op(a, b, kind_a, depth)
        if found:
            self.steps[index] = dataclasses.replace(self.steps[index], differs=tuple(found))

    def _children(
        self,
        a: Node,
        b: Node,
        key: str,
        by: Callable[[Node], Hashable],
        level: str,
        depth: int,
    ) -> None:
        """The steps under ``a`` and ``b`` (their ``key``: ``turns``, ``ops``, or ``hosted``,
        the sub-agent runs an op hosted), paired by ``by`` (:func:`.align.align`)."""
        items_a = list(children(a, key)) if key != "hosted" else list(hosted_sessions(a))
        items_b = list(children(b, key)) if key != "hosted" else list(hosted_sessions(b))
        for x, y in align(items_a, items_b, by):
            self._pair(x, y, level, depth + 1)

    def _session(self, a: Node, b: Node, depth: int) -> list[str]:
        self._children(a, b, "turns", _turn_key, "turn", depth)
        return self._status(a, b, "session", _session_status)

    def _op(self, a: Node, b: Node, kind: str, depth: int) -> list[str]:
        found: list[str] = []
        ex_a = exchange(a, self._journal(0, a))
        ex_b = exchange(b, self._journal(1, b))
        llm = kind == "llm"
        asked = "request" if llm else "tool_arguments"
        found += self._compare(asked, a, b, kind, ex_a.request, ex_b.request, ex_a, ex_b)
        if not self._body_not_run(a, b):
            self._children(a, b, "hosted", _session_key, "session", depth)
        status = self._status(a, b, kind, _op_status)
        found += status
        if not status:  # a call that failed in one run has no result to compare there
            got = "response" if llm else "tool_result"
            found += self._compare(got, a, b, kind, *_responses(ex_a, ex_b))
        if llm and field_diff(ex_a.exact, ex_b.exact):
            self.ids_differ = True
        return found

    def _only(self, a: Node | None, b: Node | None, level: str, depth: int) -> None:
        node = a if a is not None else b
        assert node is not None
        step_kind = _kind(node, level)
        only = OnlyIn(_label(node), step_kind, self._shown(_name(node)), _count(node, level))
        (self.only_in_a if a is not None else self.only_in_b).append(only)
        here = {"kind": step_kind, "name": _name(node)}
        values = (here, ABSENT) if a is not None else (ABSENT, here)
        self.steps.append(self._step(a, b, level, step_kind, depth, ("structure",)))
        self._diverge("structure", a, b, step_kind, values)

    # --- comparing ------------------------------------------------------------------------

    def _compare(
        self,
        what: str,
        a: Node,
        b: Node,
        kind: str,
        value_a: Any,
        value_b: Any,
        ex_a: Exchange | None = None,
        ex_b: Exchange | None = None,
    ) -> list[str]:
        """A divergence ``what`` when the two values differ (both known); else, for two
        requests (``ex_a``, ``ex_b``) whose parts kept agree, when their journal fingerprints
        differ: a request not kept whole (an op with no messages), or one that differs where a
        recording keeps nothing (its parameters, its tools), as long as no made-up id made
        the fingerprints differ (:attr:`ids_differ`)."""
        if ex_a is not None and ex_b is not None and ex_a.whole != ex_b.whole:
            # One op kept its messages, the other did not (a run killed before its snapshot
            # kept them): what only one side kept is not a difference; the fingerprints tell.
            value_a, value_b = _kept_by_both(value_a), _kept_by_both(value_b)
        if value_a is not None and value_b is not None and field_diff(value_a, value_b):
            return [self._diverge(what, a, b, kind, (value_a, value_b))]
        if ex_a is None or ex_b is None:
            return []
        fingerprints = (ex_a.fingerprint, ex_b.fingerprint)
        if None in fingerprints or fingerprints[0] == fingerprints[1]:
            return []
        if not (ex_a.whole and ex_b.whole):
            note = "the content was not kept (no messages in the op): the fingerprints differ"
        elif self.ids_differ or field_diff(ex_a.exact[0], ex_b.exact[0]):
            return []  # told apart by ids a provider made up: no difference of substance
        else:
            note = (
                "the model and messages kept agree: the request differs in what is not kept "
                "(its parameters, its tools, a message past the payload cap), as its "
                "fingerprint says"
            )
        values = ({"fingerprint": fingerprints[0]}, {"fingerprint": fingerprints[1]})
        return [self._diverge(what, a, b, kind, values, note)]

    def _status(self, a: Node, b: Node, kind: str, status: Callable[[Node], str]) -> list[str]:
        if status(a) == status(b):
            return []
        return [self._diverge("status", a, b, kind, ({"status": status(a)}, {"status": status(b)}))]

    def _diverge(
        self,
        what: str,
        a: Node | None,
        b: Node | None,
        kind: str,
        values: tuple[Any, Any],
        note: str = "",
    ) -> str:
        """Record a divergence ``what`` at ``a``/``b`` between ``values`` (two values that
        differ; :data:`ABSENT` for a step one run does not have). Its field diff is the one of
        the values as they may be shown: secrets replaced, strings capped (every output's
        policy, ``agenttrace.views.public``), so a secret is never printed, even at a path
        whose key does not say it is one."""
        self.divergences += 1
        if self.first is not None:  # only the first is reported whole: the rest are counted
            return what
        name = _name(a) if a is not None else _name(b) if b is not None else None
        shown = [value if value is ABSENT else self._shown(value) for value in values]
        diff = field_diff(*shown)
        if not diff:  # the values differ in what is not shown
            note = note or "they differ only where a value is not shown (a secret, or past the cap)"
        self.first = Divergence(
            what,
            None if a is None else _label(a),
            None if b is None else _label(b),
            kind,
            self._shown(name),
            diff,
            note,
        )
        return what

    def _shown(self, value: Any) -> Any:
        return redacted_copy(value, self.max_bytes)

    def _served_for(self, a: Node, b: Node, kind_a: str, kind_b: str) -> bool:
        """Whether ``a`` and ``b`` are the same tool call, one side answered from a recording
        (a ``tool`` op) where the other ran its body, which hosted a sub-agent (a ``session``
        op)."""
        if {kind_a, kind_b} != {"tool", HOSTING}:
            return False
        side = 0 if kind_a == "tool" else 1
        label = _label((a, b)[side])
        return label is not None and self.journals[side].served(self.origins[side], label)

    def _body_not_run(self, a: Node, b: Node) -> bool:
        """Whether one side's call was answered from a recording (a replay, a re-entry) and
        so ran no sub-agent where the other's did: what its body did is the recording's, not
        another structure, and its hosted runs are not compared."""
        for side, op in enumerate((a, b)):
            label = _label(op)
            served = label is not None and self.journals[side].served(self.origins[side], label)
            if served and not any(True for _ in hosted_sessions(op)):
                return True
        return False

    def _journal(self, side: int, op: Node) -> Any:
        label = _label(op)
        if label is None:
            return self.journals[side].step(None, "", None)
        return self.journals[side].step(self.origins[side], label, attempt_of(op))

    def _step(
        self,
        a: Node | None,
        b: Node | None,
        level: str,
        kind: str,
        depth: int,
        found: tuple[str, ...] = (),
    ) -> StepDiff:
        """The step ``a``/``b`` at ``level`` (``session``, ``turn`` or ``op``) of kind ``kind``."""
        return StepDiff(
            None if a is None else _label(a),
            None if b is None else _label(b),
            kind,
            None if a is None else self._shown(_name(a)),
            None if b is None else self._shown(_name(b)),
            depth,
            None if a is None else usage(a, level),
            None if b is None else usage(b, level),
            found,
            None if a is None else _status_of(a, level),
            None if b is None else _status_of(b, level),
        )


def _kind(node: Node, level: str) -> str:
    """A node's kind: ``session`` or ``turn`` by its level, an op's own (``llm``, ``tool``)."""
    if level != "op":
        return level
    kind = node.get("kind")
    return kind if isinstance(kind, str) else "op"


def _name(node: Node) -> str | None:
    for key in ("agentName", "name"):
        value = node.get(key)
        if isinstance(value, str):
            return value
    return None


def _label(node: Node) -> str | None:
    label = node.get("path")
    return label if isinstance(label, str) else None


def _op_key(op: Node) -> Hashable:
    return (_kind(op, "op"), _name(op))


def _turn_key(turn: Node) -> Hashable:
    """A turn is known by the steps it took: an inserted turn leaves the others paired."""
    return tuple(_op_key(op) for op in children(turn, "ops"))


def _session_key(session: Node) -> Hashable:
    return _name(session)


def _status_of(node: Node, level: str) -> str | None:
    """A step's status as a report shows it (a turn has none of its own)."""
    if level == "session":
        return _session_status(node)
    return _op_status(node) if level == "op" else None


def _session_status(session: Node) -> str:
    if session.get("endedAt") is None:
        attributes = session.get("attributes")
        cut = isinstance(attributes, Mapping) and attributes.get(INTERRUPTED) is True
        return "interrupted" if cut else "in progress"
    return "ok" if session.get("success") else "failed"


def _op_status(op: Node) -> str:
    """``ok``, ``failed``; for an op that never ended, as ``tree`` says it: ``in doubt`` (a tool
    call a kill cut short that may have had its effect), ``interrupted``, ``in progress``."""
    attributes = op.get("attributes")
    if op.get("endedAt") is None and isinstance(attributes, Mapping):
        if isinstance(attributes.get(IN_DOUBT), str):
            return "in doubt"
        if attributes.get(INTERRUPTED) is True:
            return "interrupted"
    status = op.get("status")
    return status if isinstance(status, str) else "in progress"


def _count(node: Node, level: str) -> int:
    """How many steps ``node`` (at ``level``) is, itself and every step under it."""
    count = 0
    pending: list[tuple[Node, str]] = [(node, level)]
    while pending:  # not recursive: sub-agents nest as deep as they did
        current, level = pending.pop()
        count += 1
        if level == "session":
            pending.extend((turn, "turn") for turn in children(current, "turns"))
        elif level == "turn":
            pending.extend((op, "op") for op in children(current, "ops"))
        else:
            pending.extend((child, "session") for child in hosted_sessions(current))
    return count


MESSAGE_KEYS = ("messages", "messages_sent", "messages_skipped")
"""What an LLM request holds only when its op kept its messages."""


def _kept_by_both(request: Any) -> Any:
    """An LLM request without its messages (compared where only one side kept them)."""
    if not isinstance(request, dict):
        return request
    return {key: value for key, value in request.items() if key not in MESSAGE_KEYS}


def _responses(ex_a: Exchange, ex_b: Exchange) -> tuple[Any, Any]:
    """The two responses in one form: the ops' payloads, or where only one op kept its payload
    (a run killed before its snapshot kept it) the journal's responses, or nothing to compare
    (``None``) when a side has neither."""
    if ex_a.from_payload == ex_b.from_payload:
        return ex_a.response, ex_b.response
    return ex_a.recorded, ex_b.recorded
