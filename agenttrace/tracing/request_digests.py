"""The fingerprint of an agent's LLM request in proportion to what is new in it.

An LLM request's fingerprint (:func:`agenttrace.model.journal.llm_fingerprint`) hashes each
message on its own; an agent's next request mostly sends the same messages again, whole
(an append-only loop) or shifted (a sliding window drops the oldest exchange). Each agent keeps
:class:`MessageDigests`: a copy of every message its last request sent, with its digest. A
message of the next request that compares equal to a kept copy has that copy's digest; only
the others are hashed.

What makes this safe is the comparison with a copy, never the message's identity: a message
edited in place since (the same dict, new content) no longer equals its copy and is hashed
again. A copy is deep and holds only what ``==`` tells apart exactly as canonical JSON does
(dicts with string keys, lists, strings and ``None``); a message holding anything else (a
number, which ``==`` equates with ``True`` or ``1.0``; a pydantic model) has no copy and is
hashed on every request. Finding the kept messages costs one list comparison in C per run of
them, and a search (in C too) of at most :data:`REACH` copies where a run starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import compress, count
from operator import ne
from typing import Any

from agenttrace.model import journal as j

REACH = 64
"""How many of the kept copies past the last one matched are searched for a message that
starts a run: a window may drop that many messages at once and still have the rest of its
request found. Past it (a compaction that drops more) the rest is hashed again, once: the
request after it finds them kept."""

_DEPTH = 32
"""How deep a message is copied; one deeper has no copy (it is hashed every time)."""


class _NoCopy(Exception):
    """A message holds something a copy could not tell apart from what replaces it."""


_UNKNOWN: Any = object()
"""The copy kept for a message that has none: equal to nothing but itself."""


class MessageDigests:
    """One agent's kept messages: ``state`` is (copies, digests) of its last request's messages,
    set in one assignment, so two of its requests made at once in two threads each read a
    consistent pair (the second to finish is kept)."""

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state: tuple[list[Any], list[bytes]] = ([], [])

    def digests(self, messages: Sequence[Any]) -> list[bytes]:
        """The :func:`~agenttrace.model.journal.message_digest` of each of ``messages``,
        hashing only those that equal none of the copies kept (and keeping these messages'
        copies for the next request)."""
        copies, digests = self.state
        found_copies: list[Any] = []
        found: list[bytes] = []
        total, index, start = len(messages), 0, 0
        while index < total:
            message = messages[index]
            at = _position(copies, message, start)
            length = 0
            if at >= 0:
                length = min(total - index, len(copies) - at)
                here = messages[index : index + length]
                there = copies[at : at + length]
                if here != there:  # the run ends before one of them does: where, in C
                    length = next(compress(count(), map(ne, here, there)), length)
            if not length:  # a message none of the copies equals: hashed, and copied
                found_copies.append(_copy(message))
                found.append(j.message_digest(message))
                index += 1
                continue
            found_copies += copies[at : at + length]
            found += digests[at : at + length]
            index += length
            start = at + length
        self.state = (found_copies, found)
        return found


def _position(copies: list[Any], message: Any, start: int) -> int:
    """Where ``message`` equals one of ``copies`` from ``start`` on (at most :data:`REACH`
    of them); -1 if it equals none."""
    try:
        return copies.index(message, start, start + REACH)
    except ValueError:
        return -1


def _copy(message: Any) -> Any:
    """A deep copy of a message that ``==`` tells apart exactly as its canonical JSON does;
    :data:`_UNKNOWN` if it holds anything else."""
    try:
        return _copied(message, 0)
    except _NoCopy:
        return _UNKNOWN


def _copied(value: Any, depth: int) -> Any:
    kind = type(value)
    if kind is str or value is None:
        return value
    if depth >= _DEPTH:
        raise _NoCopy
    if kind is dict:
        copy = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NoCopy
            copy[key] = _copied(item, depth + 1)
        return copy
    if kind is list:
        return [_copied(item, depth + 1) for item in value]
    raise _NoCopy


def llm_request_fingerprint(
    request: Mapping[str, Any], memory: MessageDigests | None = None
) -> str:
    """The fingerprint of an LLM request (:func:`~agenttrace.model.journal.llm_request`);
    with the agent's ``memory``, its messages' digests are what the agent's last request
    already had, for those it sent again unchanged."""
    messages = request.get("messages")
    if memory is None or not isinstance(messages, (list, tuple)):
        return j.llm_fingerprint(request)
    try:
        digests = memory.digests(messages)
    except (TypeError, ValueError, RuntimeError):
        # A message that cannot be compared (an array's ==), or one another thread changes
        # while it is copied: hashed as it is, and the memory starts again.
        memory.state = ([], [])
        return j.llm_fingerprint(request)
    return j.llm_fingerprint(request, digests)


def memory_of(memories: dict[str, MessageDigests], agent_id: str) -> MessageDigests:
    """The agent's :class:`MessageDigests` in ``memories`` (made on its first request; two
    threads making it at once get the same one)."""
    memory = memories.get(agent_id)
    if memory is None:
        memory = memories.setdefault(agent_id, MessageDigests())
    return memory
