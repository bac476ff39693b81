"""How a ``transcript_reset`` rewrites an agent's transcript (docs/events.md): the one rule the
writer and every reader share.

A reset keeps the transcript's first ``kept`` entries. Its ``reused`` field, when it has one,
says what follows them, piece by piece: ``[first, last]`` (two message ids) is the run of
entries of the transcript *before* the reset from ``first`` to ``last``, and an integer ``n``
is the next ``n`` ``transcript_entry`` events written with the reset (new entries). So a sliding
window or a compaction refers to what is already recorded and carries in full only what is new.
A reset without ``reused`` (every file written before it existed) is ``[entries]``: all its
entries follow the kept ones.

Pieces reuse entries in the order the transcript had them, each at most once. Message ids
usually increase along a transcript (always, unless a reset put a new entry before entries it
reused, as a compaction's summary): a reader finds a piece by bisection and, where that fails,
by one scan forward, so its work for a reset is in proportion to the transcript at most, never a
search per entry.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping, Sequence
from operator import indexOf
from typing import Any, TypeVar

from agenttrace.model.events import (
    MESSAGE_PREFIX,
    TRANSCRIPT_ENTRY,
    TRANSCRIPT_RESET,
    Alignment,
    id_number,
    message_fields,
    same_entry,
    same_prefix,
)
from agenttrace.model.events import copy_of_message as _copy

Piece = tuple[str, str] | int
"""``(first, last)``: reused entries, by message id; an ``int``: that many new entries."""

MAX_MOVED = 200_000_000
"""Reused entries a restored session's resets may place in all (a window loop of 10,000 calls
over 1,000 messages places 10 million): past it the file is refused, not read for minutes."""

MAX_PIECES = 10_000
"""A reset with more pieces than this is not one agenttrace wrote: its ``reused`` is ignored."""


def reused_pieces(event: Mapping[str, Any]) -> list[Piece] | None:
    """The reset's ``reused`` as pieces; ``None`` when it has none or it is not well formed
    (its counts must add up to its ``entries``): the reset then reads as files written before
    ``reused`` existed, its entries following the kept ones."""
    value = event.get("reused")
    if not isinstance(value, list) or len(value) > MAX_PIECES:
        return None
    pieces: list[Piece] = []
    new = 0
    for item in value:
        if type(item) is int and item >= 0:
            pieces.append(item)
            new += item
        elif (
            isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], str)
            and isinstance(item[1], str)
        ):
            pieces.append((item[0], item[1]))
        else:
            return None
    entries = event.get("entries")
    if (type(entries) is int and entries != new) or (entries is None and new):
        return None
    return pieces


def restated_entries(event: Mapping[str, Any]) -> int:
    """How many of the entries written with the reset restate the agent's context rather than
    add to it: all of them for a reset that reuses nothing, else those before its last reused
    piece (a compaction's summary); the ones after it are what the agent added since its
    previous request (a window loop's new user message)."""
    entries = event.get("entries")
    count = entries if type(entries) is int and entries > 0 else 0
    pieces = reused_pieces(event)
    if not pieces or not any(isinstance(piece, tuple) for piece in pieces):
        return count
    last = max(i for i, piece in enumerate(pieces) if isinstance(piece, tuple))
    return sum(piece for piece in pieces[:last] if isinstance(piece, int))


_Event = TypeVar("_Event", bound=Mapping[str, Any])


def as_it_happened(events: Iterable[_Event]) -> Iterator[_Event]:
    """``events`` without the transcript entries a ``transcript_reset`` restated
    (:func:`restated_entries`): the agent's context as a rewritten request sent it again, not
    new turns. What a view of what happened (an exchange log, a trajectory, a STD-008 document)
    reads; a view of an agent's current transcript replays the resets instead (``Session``)."""
    restated: dict[Any, int] = {}  # agent -> entries of its last reset still to skip
    for event in events:
        kind, agent = event.get("event_type"), event.get("agent_id")
        if kind == TRANSCRIPT_RESET:
            restated[agent] = restated_entries(event)
        elif kind == TRANSCRIPT_ENTRY and restated.get(agent):
            restated[agent] -= 1
            continue
        yield event


def wire_pieces(pieces: Sequence[Piece]) -> list[Any]:
    """Pieces as the event's ``reused`` field holds them (JSON arrays for the pairs)."""
    return [list(piece) if isinstance(piece, tuple) else piece for piece in pieces]


class PieceWalk:
    """How a reset's pieces are walked, whatever holds the transcript (:class:`Rewrite`: a list
    of entries; ``agenttrace.formats.session.requests``: runs of them): the reused runs up to the
    first new entry at :meth:`start`, each new entry then the runs up to the next at :meth:`add`,
    the runs left at :meth:`finish`. A subclass says how a new entry and a run are placed."""

    __slots__ = ("_cursor", "_pieces", "_scanned", "_waiting")

    def __init__(self, event: Mapping[str, Any]) -> None:
        pieces = reused_pieces(event)
        if pieces is None:
            entries = event.get("entries")
            pieces = [entries if type(entries) is int and entries > 0 else 0]
        self._pieces = list(reversed(pieces))  # popped from the end: in order
        self._cursor = 0  # where in the transcript before the reset the next run may start
        self._waiting = 0  # new entries the current count piece still expects
        self._scanned = False  # a scan found nothing: later pieces are only bisected

    def start(self) -> bool:
        """Place what precedes the first new entry; whether new entries are expected."""
        self._advance()
        return self._waiting > 0

    def add(self, entry: Any) -> bool:
        """Place a new entry (the next one the reset expects), then what precedes the next;
        whether more new entries are expected."""
        self._new(entry)
        self._waiting -= 1
        self._advance()
        return self._waiting > 0

    def finish(self) -> None:
        """The write ended: place the reused runs still to come (new entries not seen are
        missing)."""
        self._waiting = 0
        while self._pieces:
            piece = self._pieces.pop()
            if not isinstance(piece, int):
                self._place(*piece)

    def _advance(self) -> None:
        while self._waiting == 0 and self._pieces:
            piece = self._pieces.pop()
            if isinstance(piece, int):
                self._waiting = piece
            else:
                self._place(*piece)

    def _new(self, entry: Any) -> None:
        raise NotImplementedError

    def _place(self, first: str, last: str) -> None:
        raise NotImplementedError


class Rewrite(PieceWalk):
    """A reset being applied to one agent's transcript (a list of entries), in place.

    :meth:`start` keeps the first ``kept`` entries and places the reused runs up to the first
    new entry; each following ``transcript_entry`` of the same write goes through :meth:`add`
    (the new entry, then the reused runs up to the next new one); :meth:`finish` places what
    is left when the write ends (new entries a crash cut short are then simply missing).
    ``moved`` counts the reused entries placed, for a reader's bound on a file's work.
    """

    __slots__ = ("_before", "_transcript", "moved")

    def __init__(self, transcript: list[Any], event: Mapping[str, Any]) -> None:
        super().__init__(event)
        kept = event.get("kept")
        kept = kept if type(kept) is int and kept > 0 else 0
        self._transcript = transcript
        self._before = transcript[kept:]
        del transcript[kept:]
        self.moved = 0

    @property
    def dropped(self) -> int:
        """How many entries after the kept ones it dropped (once finished)."""
        return len(self._before) - self.moved

    def _new(self, entry: Any) -> None:
        self._transcript.append(entry)

    def _place(self, first: str, last: str) -> None:
        before, cursor = self._before, self._cursor
        start = self._position(first, cursor)
        stop = None if start is None else self._position(last, start)
        if start is None or stop is None:
            return
        self._transcript.extend(before[start : stop + 1])
        self.moved += stop + 1 - start
        self._cursor = stop + 1

    def _position(self, message_id: str, start: int) -> int | None:
        """Where the entry ``message_id`` is in the transcript before the reset, at ``start`` or
        after it: by bisection on the increasing message ids; when they are not in order (a
        hand-made file), by a scan, and after one scan that found nothing, no more scans (so a
        reset costs at most one pass however many pieces it names). ``None`` if not there."""
        entries = self._before
        target = id_number(message_id, MESSAGE_PREFIX)
        if target is not None:
            place = bisect.bisect_left(entries, target, lo=start, key=entry_number)
            if place < len(entries) and entries[place].get("message_id") == message_id:
                return place
        if self._scanned:
            return None
        for place in range(start, len(entries)):
            entry = entries[place]
            if isinstance(entry, dict) and entry.get("message_id") == message_id:
                return place
        self._scanned = True
        return None


class Replay:
    """Transcripts rebuilt from events in their order, as every reader does it: an entry is
    appended to its agent's transcript, unless it is one of the new entries of the reset just
    before it (those are placed where the reset says); a reset is applied with :class:`Rewrite`.
    ``moved`` counts the reused entries placed so far (a reader's bound on a file's work)."""

    __slots__ = ("_pending", "moved")

    def __init__(self) -> None:
        self._pending: tuple[Any, Rewrite] | None = None
        self.moved = 0

    def entry(self, agent: Any, transcript: list[Any], event: Any) -> None:
        """A ``transcript_entry`` of ``agent``, whose transcript is ``transcript``."""
        pending = self._pending
        if pending is not None and pending[0] == agent:
            if not pending[1].add(event):
                self.close()
            return
        self.close()
        transcript.append(event)

    def reset(self, agent: Any, transcript: list[Any], event: Mapping[str, Any]) -> Rewrite:
        """A ``transcript_reset`` of ``agent``: applied at once, up to its first new entry."""
        self.close()
        rewrite = Rewrite(transcript, event)
        if rewrite.start():
            self._pending = (agent, rewrite)
        else:
            self.moved += rewrite.moved
        return rewrite

    def other(self) -> None:
        """Any other event: the write of a reset's entries is over."""
        if self._pending is not None:
            self.close()

    def close(self) -> None:
        """Finish the reset still waiting for entries, if any."""
        pending = self._pending
        if pending is not None:
            self._pending = None
            pending[1].finish()
            self.moved += pending[1].moved


def entry_number(entry: Any) -> int:
    """An entry's message-id number (-1 for one that has none): the bisection's key."""
    number = id_number(entry.get("message_id"), MESSAGE_PREFIX) if isinstance(entry, dict) else None
    return -1 if number is None else number


# --- writing: what a rewritten request reuses ------------------------------------------------


class Plan:
    """What a reset logs for a rewritten request (:func:`plan_reset`)."""

    __slots__ = ("copies", "new", "pieces")

    def __init__(self) -> None:
        self.pieces: list[tuple[int, int] | int] = []
        """In order: ``(start, stop)``, a run of the transcript's entries reused; ``n``: the
        next ``n`` of :attr:`new`."""
        self.new: list[tuple[int, Any]] = []
        """The messages logged as new entries, each with its place in the new transcript."""
        self.copies: list[Any] = []
        """For each message planned, what :class:`~agenttrace.model.events.Alignment`
        remembers of it."""

    @classmethod
    def all_new(cls, messages: Sequence[Any], kept: int) -> Plan:
        """A plan that reuses nothing: every message is a new entry after the kept ones."""
        plan = cls()
        for place, message in enumerate(messages, kept):
            plan._add_new(place, message)
        return plan

    def _add_new(self, place: int, message: Any, copy: Any = None) -> None:
        pieces = self.pieces
        if pieces and isinstance(pieces[-1], int):
            pieces[-1] += 1
        else:
            pieces.append(1)
        self.new.append((place, message))
        self.copies.append(copy if type(copy) is dict else _copy(message))


def plan_reset(
    messages: Sequence[Any],
    transcript: Sequence[Mapping[str, Any]],
    kept: int,
    memory: Alignment | None = None,
    vouched: Sequence[Any] | None = None,
) -> Plan:
    """How a reset keeping ``transcript``'s first ``kept`` entries logs ``messages`` (what the
    request sent after them): each message that is an entry of the transcript after the kept
    ones (:func:`~agenttrace.model.events.same_entry`, in the transcript's order, each entry
    at most once) is reused; the others are new.

    In proportion to what changed, not to the request: a run of reused messages is found
    from its first one, and checked against the copies the agent's ``memory`` keeps of the
    messages its earlier requests sent (one list comparison, in C); only messages the memory
    does not know are compared one by one, and only new ones are searched for. ``vouched``:
    for each of ``messages``, a copy another comparison of this request just found it equal to
    (:mod:`~agenttrace.model.message_copies`; anything else where it found none): a run whose
    copies are the memory's is then checked by identity, without looking at the messages.
    """
    messages = list(messages)
    if vouched is not None and len(vouched) != len(messages):
        vouched = None
    sent, matched = memory.state if memory is not None else ([], [])
    known = min(len(sent), len(matched), len(transcript))
    if known and not same_prefix(matched, transcript, known):
        known = 0  # the memory is of another transcript (a reset it did not see): unused
    plan = Plan()
    finder = _Finder(transcript, kept, sent, known)
    place = kept
    index = 0
    while index < len(messages):
        message = messages[index]
        start = finder.start_of(message)
        if start is None:
            plan._add_new(place, message, vouched[index] if vouched is not None else None)
            index += 1
            place += 1
            continue
        length, checked = finder.run_length(messages, index, start, vouched)
        plan.pieces.append((start, start + length))
        if vouched is not None and checked:
            # The same objects as the other memory's, or equal to them: kept as they are,
            # so the next request finds both memories holding one set of copies.
            plan.copies.extend(vouched[index : index + checked])
        else:
            plan.copies.extend(sent[start : start + checked])
        for offset in range(index + checked, index + length):
            copy = vouched[offset] if vouched is not None else None
            plan.copies.append(copy if type(copy) is dict else _copy(messages[offset]))
        finder.cursor = start + length
        index += length
        place += length
    return plan


class _Finder:
    """Where in a transcript the messages of a rewritten request are (for :func:`plan_reset`)."""

    __slots__ = ("_by_content", "_indexed_from", "_known", "_sent", "_transcript", "cursor")

    def __init__(
        self, transcript: Sequence[Mapping[str, Any]], kept: int, sent: list[Any], known: int
    ) -> None:
        self._transcript = transcript
        self._sent = sent
        self._known = known  # positions below this have a trusted copy in ``sent`` (or None)
        self._by_content: dict[Any, list[int]] = {}
        self._indexed_from = len(transcript)
        self.cursor = kept  # entries before it are kept or already reused

    def start_of(self, message: Any) -> int | None:
        """The position, at the cursor or after it, of an entry that ``message`` is."""
        transcript, cursor = self._transcript, self.cursor
        if cursor >= len(transcript):
            return None
        entry = transcript[cursor]
        if message is entry or same_entry(message, entry):
            return cursor
        lowest = cursor
        if type(message) is dict and cursor < self._known:
            try:
                # Not ``list.index``: its error, raised for each new message, holds the
                # message's repr (a long one's costs microseconds).
                return cursor + indexOf(self._sent[cursor : self._known], message)
            except ValueError:
                # The memory vouches that no entry it knows is this message: only the entries
                # logged since the agent's last request (its reply) are left to look at.
                lowest = self._known
        return self._by_text(message, lowest)

    def run_length(
        self, messages: list[Any], index: int, start: int, vouched: Sequence[Any] | None = None
    ) -> tuple[int, int]:
        """How many messages from ``index`` on are the entries from ``start`` on (at least
        one: the first is), and how many of those the memory's copies vouch for (``vouched``:
        see :func:`plan_reset`)."""
        transcript, sent = self._transcript, self._sent
        checked = 0
        if start < self._known:
            span = min(len(messages) - index, self._known - start)
            if vouched is not None and vouched[index : index + span] == sent[start : start + span]:
                checked = span  # copies equal to the messages, equal to the memory's
            elif messages[index : index + span] == sent[start : start + span]:
                checked = span
            else:
                while checked < span and messages[index + checked] == sent[start + checked]:
                    checked += 1
        length = max(checked, 1)
        while index + length < len(messages) and start + length < len(transcript):
            message, entry = messages[index + length], transcript[start + length]
            if not (message is entry or same_entry(message, entry)):
                break
            length += 1
        return length, checked

    def _by_text(self, message: Any, lowest: int) -> int | None:
        """A search by content for a message the memory cannot place: an index of the entries
        from ``lowest`` on by their content, built at most once per reset for each place it
        starts from (and only for the entries the memory does not know, for a plain dict)."""
        transcript = self._transcript
        if lowest < self._indexed_from:
            index: dict[Any, list[int]] = {}
            for place in range(lowest, len(transcript)):
                text = transcript[place].get("content")
                index.setdefault(text if isinstance(text, str) else None, []).append(place)
            self._by_content, self._indexed_from = index, lowest
        fields = message if isinstance(message, Mapping) else message_fields(message)
        content = fields.get("content")
        for place in self._by_content.get(content if isinstance(content, str) else None, ()):
            if place >= lowest and same_entry(message, transcript[place]):
                return place
        return None
