"""An LLM attempt's whole request, read back from a session file without replaying its events.

An LLM op's ``request`` payload holds only what followed the agent's previous reply
(docs/how-to/long-agents.md,
"History deltas"), so the file does not grow with the square of a history. What the model was
sent is still in the file: the op's ``replyMessageId`` names the ``transcript_entry`` its
response became, and the request was the op's ``instructions`` (system messages sent beside
the transcript, when there were some) followed by the agent's transcript just before that entry
(``agenttrace.tracing.transcripts.log_request`` makes the transcript what the request sent
before the reply is logged).

Rebuilding that transcript by replaying the events costs what every reset moved, in a sliding
window the whole window per call. :class:`RequestIndex` goes once through the events and keeps,
for each agent, its transcript as *runs* of its entries (a window is two runs: the system
prompt, then the entries since the window's start), applying each ``transcript_reset`` to the
runs by the rule every reader shares (``agenttrace.model.resets``: the same bisection, the same
one scan) in time proportional to the runs, not to the transcript. A request is then read in
time proportional to its length. A transcript of too many runs (:data:`RUNS_LIMIT`) goes on as
a list, rewritten by :class:`~agenttrace.model.resets.Rewrite` itself and copied now and then
(:data:`SNAPSHOT_EVERY`), so no history costs more to index than a replay. Files written
before ``replyMessageId`` existed are read by the events' linkage instead: the op's reply is
the assistant entry logged in its span.
"""

from __future__ import annotations

import bisect
import copy
import itertools
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from agenttrace import semconv as sc
from agenttrace.formats.session.files import LoadedFile
from agenttrace.model.events import (
    AGENT_CREATED,
    MESSAGE_PREFIX,
    TRANSCRIPT_ENTRY,
    TRANSCRIPT_RESET,
    api_message,
    id_number,
)
from agenttrace.model.resets import PieceWalk, Rewrite, entry_number

Run = tuple[int, int]
"""``(start, stop)``: an agent's entries ``start`` to ``stop - 1``, counted in the order the
events logged them (the agent's ordinals)."""


class RequestUnavailable(LookupError):
    """The file cannot say what this op sent; the message says why, in one line."""


MARK_CHAIN = 32
"""A transcript remembered after a change shares its first runs with the one remembered before
it, at most this many times in a row; then it is kept whole. A long history with many runs (a
framework that clears old tool results) then costs its changed runs per reset, not all of them,
and a request is rebuilt from at most this many pieces."""


class _Track:
    """One agent as the index sees it: its entries in order, and its transcript as runs."""

    __slots__ = (
        "_depth",
        "_last",
        "entries",
        "ids",
        "listed",
        "mark_positions",
        "marks",
        "positions",
        "runs",
    )

    def __init__(self) -> None:
        self.entries: list[Mapping[str, Any]] = []
        self.positions: list[int] = []  # where each entry is among the events
        self.ids: dict[str, list[int]] = {}  # message id -> ordinals (one, unless a file lies)
        self.runs: list[list[int]] = []  # the transcript now, as [start, stop) runs
        # After each change: (the mark it shares its first runs with or -1, how many it shares,
        # the runs after those, how many entries the agent had logged).
        self.marks: list[tuple[int, int, tuple[Run, ...], int]] = []
        self.mark_positions: list[int] = []
        self._last: tuple[Run, ...] = ()  # the runs of the last mark, whole
        self._depth = 0  # marks in a row that share runs with the one before
        self.listed: _Listed | None = None  # from when its runs became too many

    def add(self, event: Mapping[str, Any], position: int) -> int:
        ordinal = len(self.entries)
        self.entries.append(event)
        self.positions.append(position)
        message = event.get("message_id")
        if isinstance(message, str):
            self.ids.setdefault(message, []).append(ordinal)
        return ordinal

    def mark(self, position: int) -> None:
        """Remember the transcript as it is after the event at ``position``: what a plain
        append does not explain (a reset, a reset's new entry, a new agent of the same id)."""
        now = tuple((run[0], run[1]) for run in self.runs)
        last = self._last
        shared = 0
        if self.marks and self._depth < MARK_CHAIN:
            limit = min(len(now), len(last))
            while shared < limit and now[shared] == last[shared]:
                shared += 1
        if shared:
            self.marks.append((len(self.marks) - 1, shared, now[shared:], len(self.entries)))
            self._depth += 1
        else:
            self.marks.append((-1, 0, now, len(self.entries)))
            self._depth = 0
        self.mark_positions.append(position)
        self._last = now

    def _marked_runs(self, index: int) -> list[Run]:
        chain: list[tuple[int, tuple[Run, ...]]] = []
        while index >= 0:
            base, shared, tail, _ = self.marks[index]
            chain.append((shared, tail))
            index = base
        runs: list[Run] = []
        for shared, tail in reversed(chain):
            del runs[shared:]
            runs.extend(tail)
        return runs

    def runs_after(self, position: int) -> list[Run]:
        """The transcript after the event at ``position``, as runs."""
        index = bisect.bisect_right(self.mark_positions, position) - 1
        result = self._marked_runs(index) if index >= 0 else []
        seen = self.marks[index][3] if index >= 0 else 0
        appended = bisect.bisect_right(self.positions, position)
        if appended > seen:  # entries appended since the mark: the next ordinals, in order
            _extend(result, (seen, appended))
        return result


def _extend(runs: list[Run], run: Run) -> None:
    """Append ``run`` to ``runs``, merged with the last one where it continues it."""
    if run[0] >= run[1]:
        return
    if runs and runs[-1][1] == run[0]:
        runs[-1] = (runs[-1][0], run[1])
    else:
        runs.append(run)


class _Rope:
    """The entries of some runs of a track, as a sequence (for bisection) with positions."""

    __slots__ = ("_offsets", "entries", "runs")

    def __init__(self, entries: list[Mapping[str, Any]], runs: list[Run]) -> None:
        self.entries = entries
        self.runs = runs
        self._offsets: list[int] = []
        total = 0
        for start, stop in runs:
            self._offsets.append(total)
            total += stop - start
        self._offsets.append(total)

    def __len__(self) -> int:
        return self._offsets[-1]

    def __getitem__(self, place: int) -> Mapping[str, Any]:
        index = bisect.bisect_right(self._offsets, place) - 1
        return self.entries[self.runs[index][0] + place - self._offsets[index]]

    def place_of(self, ordinal: int) -> int | None:
        for index, (start, stop) in enumerate(self.runs):
            if start <= ordinal < stop:
                return self._offsets[index] + ordinal - start
        return None

    def slice(self, first: int, stop: int) -> list[Run]:
        """The runs of places ``first`` to ``stop - 1``."""
        result: list[Run] = []
        index = bisect.bisect_right(self._offsets, first) - 1
        while first < stop and index < len(self.runs):
            start, end = self.runs[index]
            offset = self._offsets[index]
            begin = start + first - offset
            finish = min(end, start + stop - offset)
            result.append((begin, finish))
            first = offset + (finish - start)
            index += 1
        return result


class _Rewrite(PieceWalk):
    """:class:`agenttrace.model.resets.Rewrite` on a track's runs: the same pieces walked the
    same way (:class:`~agenttrace.model.resets.PieceWalk`), placed by the same bisection and
    the same one scan (found through the entry's id, not by reading every entry), so the
    transcript is the one a replay makes."""

    __slots__ = ("_before", "_track")

    def __init__(self, track: _Track, event: Mapping[str, Any]) -> None:
        super().__init__(event)
        kept = event.get("kept")
        kept = kept if type(kept) is int and kept > 0 else 0
        now = [(run[0], run[1]) for run in track.runs]
        whole = _Rope(track.entries, now)
        kept = min(kept, len(whole))
        self._track = track
        self._before = _Rope(track.entries, whole.slice(kept, len(whole)))
        track.runs = [list(run) for run in whole.slice(0, kept)]

    def _new(self, entry: Any) -> None:
        _append(self._track.runs, entry)  # an entry's ordinal

    def _place(self, first: str, last: str) -> None:
        start = self._position(first, self._cursor)
        stop = None if start is None else self._position(last, start)
        if start is None or stop is None:
            return
        for run in self._before.slice(start, stop + 1):
            runs = self._track.runs
            if runs and runs[-1][1] == run[0]:
                runs[-1][1] = run[1]
            else:
                runs.append([run[0], run[1]])
        self._cursor = stop + 1

    def _position(self, message_id: str, start: int) -> int | None:
        before = self._before
        ordinals = self._track.ids.get(message_id, ())
        if len(ordinals) == 1 and not self._scanned:
            # One entry has this id (always, in a file agenttrace wrote): the bisection finds
            # its place, or the scan does, unless it is before ``start`` (then neither does).
            at = before.place_of(ordinals[0])
            if at is not None and at >= start:
                return at
            self._scanned = True
            return None
        target = id_number(message_id, MESSAGE_PREFIX)
        if target is not None:
            place = bisect.bisect_left(before, target, lo=start, key=entry_number)
            if place < len(before) and before[place].get("message_id") == message_id:
                return place
        if self._scanned:
            return None
        # What the scan from ``start`` finds: the first place at or after it holding this id.
        found: int | None = None
        for ordinal in self._track.ids.get(message_id, ()):
            at = before.place_of(ordinal)
            if at is not None and at >= start and (found is None or at < found):
                found = at
        if found is None:
            self._scanned = True
        return found


def _append(runs: list[list[int]], ordinal: int) -> None:
    if runs and runs[-1][1] == ordinal:
        runs[-1][1] = ordinal + 1
    else:
        runs.append([ordinal, ordinal + 1])


RUNS_LIMIT = 64
"""A transcript of more runs than this (a framework that clears old tool results one by one)
is kept as a list from then on, rewritten as a replay does (in C: a list's slices), since runs
would cost more per reset than the entries they stand for."""

SNAPSHOT_EVERY = 64
"""Such a transcript is copied whole after this many changes; a request is rebuilt from the
last copy before it, by at most this many changes."""


class _Listed:
    """A track's transcript kept as a list of its entries, from the event at ``since`` on: each
    change logged, and the whole list copied every :data:`SNAPSHOT_EVERY` changes."""

    __slots__ = ("copies", "copy_positions", "log", "since", "transcript")

    def __init__(self, transcript: list[Mapping[str, Any]], since: int) -> None:
        self.transcript = transcript
        self.since = since
        self.log: list[tuple[int, str, Any]] = []  # (position, what, its entry or reset)
        self.copies: list[tuple[int, list[Mapping[str, Any]]]] = [(0, list(transcript))]
        self.copy_positions = [since]

    def change(self, position: int, what: str, value: Any) -> None:
        self.log.append((position, what, value))

    def settled(self, position: int) -> None:
        """No reset's write is open: copy the list if enough changes were made since."""
        if len(self.log) - self.copies[-1][0] >= SNAPSHOT_EVERY:
            self.copies.append((len(self.log), list(self.transcript)))
            self.copy_positions.append(position)

    def after(self, position: int) -> list[Mapping[str, Any]]:
        """The transcript after the event at ``position`` (``since`` or later)."""
        index = bisect.bisect_right(self.copy_positions, position) - 1
        start, copied = self.copies[index]
        transcript = list(copied)
        rewrite: Rewrite | None = None
        for at, what, value in itertools.islice(self.log, start, None):
            if at > position:
                break
            if what == "append":
                transcript.append(value)
            elif what == "clear":
                transcript = []
            elif what == "reset":
                rewrite = Rewrite(transcript, value)
                rewrite.start()
            elif rewrite is not None and what == "add":
                rewrite.add(value)
            elif rewrite is not None:  # finish
                rewrite.finish()
                rewrite = None
        return transcript


class _ListedPending:
    """A reset's write open on a listed transcript: :class:`Rewrite` itself, its steps logged."""

    __slots__ = ("_listed", "_rewrite", "_track")

    def __init__(self, track: _Track, rewrite: Rewrite) -> None:
        self._track = track
        self._rewrite = rewrite
        assert track.listed is not None
        self._listed = track.listed

    def add(self, ordinal: int) -> bool:
        entry = self._track.entries[ordinal]
        self._listed.change(self._track.positions[ordinal], "add", entry)
        return self._rewrite.add(entry)

    def finish(self) -> None:
        self._rewrite.finish()


class RequestIndex:
    """Every agent's transcript at every event of a session, kept as runs of its entries: built
    in one pass over ``events`` (in proportion to their number, whatever the resets moved),
    then :meth:`full_request` reads an LLM op's whole request in proportion to its length.

    The events are those of a session file (``LoadedFile.events``), in their order; they are
    not copied, so they must not change while the index is used."""

    def __init__(self, events: Sequence[Mapping[str, Any]]) -> None:
        self._events = events
        self._tracks: dict[str, _Track] = {}
        self._where: dict[str, int] = {}  # message id -> its first place among the events
        self._replies: dict[str, str] = {}  # span id -> the last assistant entry logged in it
        self._pending: tuple[_Track, _Rewrite | _ListedPending] | None = None
        for position, event in enumerate(events):
            self._apply(position, event)
        if self._pending is not None:
            self._close(len(events) - 1)

    def _apply(self, position: int, event: Mapping[str, Any]) -> None:
        """The event's effect on its agent's transcript: ``Session._apply`` and ``Replay``."""
        kind, agent = event.get("event_type"), event.get("agent_id")
        message = event.get("message_id")
        if isinstance(message, str):  # a list there (a file not validated) is no key
            self._where.setdefault(message, position)
        if kind != TRANSCRIPT_ENTRY:
            self._close(position)
        if not isinstance(agent, str):
            return
        if kind == AGENT_CREATED:
            track = self._tracks.setdefault(agent, _Track())
            if track.listed is not None:
                track.listed.transcript = []
                track.listed.change(position, "clear", None)
                track.listed.settled(position)
            else:
                track.runs = []  # a new agent of this id: an empty transcript
                track.mark(position)
        elif kind == TRANSCRIPT_ENTRY:
            track = self._tracks.setdefault(agent, _Track())
            ordinal = track.add(event, position)
            span = event.get("span_id")
            if (
                event.get("role") == "assistant"
                and isinstance(span, str)
                and isinstance(message, str)
            ):
                self._replies[span] = message
            pending = self._pending
            if pending is not None and pending[0] is track:
                if not pending[1].add(ordinal):
                    self._pending = None
                    self._settled(track, position)
                elif track.listed is None:
                    track.mark(position)
                return
            self._close(position)
            if track.listed is not None:
                track.listed.transcript.append(event)
                track.listed.change(position, "append", event)
                track.listed.settled(position)
            else:
                _append(track.runs, ordinal)
        elif kind == TRANSCRIPT_RESET:
            known = self._tracks.get(agent)
            kept = event.get("kept")
            if known is not None and type(kept) is int and kept >= 0:
                if known.listed is not None:
                    known.listed.change(position, "reset", event)
                    listed = Rewrite(known.listed.transcript, event)
                    if listed.start():
                        self._pending = (known, _ListedPending(known, listed))
                    else:
                        known.listed.change(position, "finish", None)
                        known.listed.settled(position)
                    return
                rewrite = _Rewrite(known, event)
                if rewrite.start():
                    self._pending = (known, rewrite)
                    known.mark(position)
                else:
                    self._settled(known, position)

    def _settled(self, track: _Track, position: int) -> None:
        """A change of ``track`` is complete (no reset's write open): remember it; a transcript
        of too many runs goes on as a list."""
        if track.listed is not None:
            track.listed.change(position, "finish", None)
            track.listed.settled(position)
            return
        track.mark(position)
        if len(track.runs) > RUNS_LIMIT:
            entries = track.entries
            transcript = [entries[o] for start, stop in track.runs for o in range(start, stop)]
            track.listed = _Listed(transcript, position)

    def _close(self, position: int) -> None:
        pending = self._pending
        if pending is not None:
            self._pending = None
            pending[1].finish()
            self._settled(pending[0], position)

    def transcript_before(self, message_id: str) -> tuple[str, list[Mapping[str, Any]]]:
        """(agent id, transcript entries) of the agent whose event ``message_id`` is, as its
        transcript stood just before that event."""
        position = self._where.get(message_id)
        if position is None:
            raise RequestUnavailable(f"{message_id} is not among the session's events")
        agent = self._events[position].get("agent_id")
        track = self._tracks.get(agent) if isinstance(agent, str) else None
        if track is None or not isinstance(agent, str):
            raise RequestUnavailable(f"{message_id} is no agent's transcript entry")
        if track.listed is not None and position - 1 >= track.listed.since:
            return agent, track.listed.after(position - 1)
        entries = track.entries
        transcript: list[Mapping[str, Any]] = []
        for start, stop in track.runs_after(position - 1):
            transcript.extend(entries[start:stop])
        return agent, transcript

    def full_request(self, op: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The messages the LLM attempt ``op`` (an OperationNode) sent, as its agent's
        transcript keeps them (``role``, ``content``, ``tool_calls``, ``tool_call_id``,
        ``name``: :func:`~agenttrace.model.events.api_message`, without a ``content`` that is
        none, or empty beside tool calls), its instructions first.

        Raises :class:`RequestUnavailable` when the file cannot say: not an LLM attempt, an
        attempt that failed (a request enters the transcript with its response), instructions
        cut by their cap, or events that do not rebuild as many messages as were sent."""
        if op.get("kind") != "llm":
            raise RequestUnavailable(f"op {_name(op)} is not an LLM attempt")
        reply = op.get("replyMessageId")
        instructions: list[dict[str, Any]] = []
        if isinstance(reply, str):
            instructions = _instructions(op)
        else:
            op_id = op.get("opId")
            reply = self._replies.get(op_id) if isinstance(op_id, str) else None
            if reply is None:
                why = (
                    "it failed, and a request enters its agent's transcript only with its response"
                    if op.get("status") == "failed"
                    else "no response of it entered its agent's transcript"
                )
                raise RequestUnavailable(f"op {_name(op)}: its request is not recorded: {why}")
        _, transcript = self.transcript_before(reply)
        messages = instructions + [_as_sent(entry) for entry in transcript]
        sent = _sent_count(op)
        if sent is not None and sent != len(messages):
            missing = (
                ""
                if "replyMessageId" in op
                else " (files written before replyMessageId do not record the instructions a "
                "request sent beside the transcript)"
            )
            raise RequestUnavailable(
                f"op {_name(op)} sent {sent} messages; the file rebuilds {len(messages)}{missing}"
            )
        return messages


def _as_sent(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A transcript entry as a chat message of a request: an assistant message that only calls
    tools without ``content`` (what clients send for one; the transcript does not tell an empty
    content from none: :func:`~agenttrace.model.events.same_entry`), no ``content: null``."""
    message = api_message(entry)
    if message.get("tool_calls") or not isinstance(message.get("content"), (str, type(None))):
        message = copy.deepcopy(message)  # nested parts of the file's events: not shared
    content = message.get("content")
    if content is None or (content == "" and message.get("tool_calls")):
        del message["content"]
    return message


def _instructions(op: Mapping[str, Any]) -> list[dict[str, Any]]:
    recorded = op.get("instructions")
    if recorded is None:
        return []
    payload = recorded.get("payload") if isinstance(recorded, Mapping) else None
    try:
        messages = msgspec.json.decode(payload) if isinstance(payload, str) else None
    except (msgspec.DecodeError, RecursionError):
        messages = None
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise RequestUnavailable(
            f"op {_name(op)}: its instructions were cut by the payload cap, as recorded"
        )
    return messages


def _sent_count(op: Mapping[str, Any]) -> int | None:
    span = op.get("span")
    attributes = span.get("attributes") if isinstance(span, Mapping) else None
    count = attributes.get(sc.REQUEST_MESSAGES) if isinstance(attributes, Mapping) else None
    return count if type(count) is int else None


def _name(op: Mapping[str, Any]) -> str:
    return str(op.get("path") or op.get("opId") or "?")


_indexes: list[tuple[weakref.ref[LoadedFile], int, RequestIndex]] = []
_indexes_lock = threading.Lock()
_INDEXES_KEPT = 4


def request_index(loaded: LoadedFile) -> RequestIndex:
    """The :class:`RequestIndex` of ``loaded``'s events, made on first use and kept while
    ``loaded`` is (for the last few files asked about)."""
    with _indexes_lock:
        for ref, count, index in _indexes:
            if ref() is loaded and count == len(loaded.events):
                return index
    index = RequestIndex(loaded.events)
    with _indexes_lock:
        _indexes[:] = [item for item in _indexes if item[0]() is not None][-(_INDEXES_KEPT - 1) :]
        _indexes.append((weakref.ref(loaded), len(loaded.events), index))
    return index


def full_request(loaded: LoadedFile, op: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The whole request the LLM op ``op`` (an OperationNode of ``loaded``'s runs) sent, from
    the session file alone: its instructions, then its agent's transcript as it stood when it
    sent it, as chat messages (see :meth:`RequestIndex.full_request`; raises
    :class:`RequestUnavailable` when the file cannot say). The first call for a file indexes
    its events once; each request then costs in proportion to its length."""
    return request_index(loaded).full_request(op)
