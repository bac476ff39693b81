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
(:func:`~agenttrace.model.message_copies.deep_copy`); a message holding anything else (a
number, which ``==`` equates with ``True`` or ``1.0``; a pydantic model) has no copy and is
hashed on every request. Finding the kept messages costs one list comparison in C per run of
them, and a search (in C too) of at most :data:`REACH` copies where a run starts. The copies
are the very objects the agent's alignment with its transcript keeps: when the alignment has
just compared the request with them (it vouches for them,
:mod:`~agenttrace.model.message_copies`), a run is checked by comparing those copies with these,
by identity, and what this comparison finds is left in turn for the reset a rewritten request
logs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import compress, count
from operator import indexOf, ne
from typing import Any

from agenttrace.model import journal as j
from agenttrace.model.events import Alignment
from agenttrace.model.message_copies import (
    ALIGNMENT,
    DIGESTS,
    UNVOUCHED,
    deep_copy,
    vouch,
    vouched_copies,
)

REACH = 64
"""How many of the kept copies past the last one matched are searched for a message that
starts a run: a window may drop that many messages at once and still have the rest of its
request found. Past it (a compaction that drops more) the rest is hashed again, once: the
request after it finds them kept."""

_UNKNOWN: Any = object()
"""The copy kept for a message that has none: equal to nothing but itself."""


_SIZE = 32
"""Bytes of a message's digest (sha256)."""


class MessageDigests:
    """One agent's kept messages: ``state`` is (copies, digests) of its last request's messages,
    the digests one after the other in one ``bytes`` (a run of them is then copied as one slice,
    not a thousand objects touched), set in one assignment, so two of its requests made at once
    in two threads each read a consistent pair (the second to finish is kept)."""

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state: tuple[list[Any], bytes] = ([], b"")

    def digests(self, messages: Sequence[Any], shared: Alignment | None = None) -> bytes:
        """The :func:`~agenttrace.model.journal.message_digest` of each of ``messages``, one
        after the other, hashing only those that equal none of the copies kept (and keeping
        these messages' copies for the next request). ``shared``: the agent's alignment memory,
        whose copies vouched for this request are taken as the messages' (and which is left
        what this comparison found)."""
        copies, digests = self.state
        vouched = None
        if shared is not None:
            vouched = vouched_copies(shared.vouched, messages, ALIGNMENT)
        found_copies: list[Any] = []
        found = bytearray()
        total, index, start = len(messages), 0, 0
        while index < total:
            message = messages[index]
            at = _position(copies, message, start)
            length = 0
            if at >= 0:
                length = min(total - index, len(copies) - at)
                there = copies[at : at + length]
                mine = vouched[index : index + length] if vouched is not None else None
                if mine is not None and mine == there:
                    # The alignment found each message equal to its copy just now, and its
                    # copies are these (identity, in C) or equal to them: the run is known.
                    there = mine
                elif messages[index : index + length] != there:  # the run ends early: where
                    here = messages[index : index + length]
                    length = next(compress(count(), map(ne, here, there)), length)
                    there = there[:length]
            if not length:  # a message none of the copies equals: hashed, and copied
                mine_copy = vouched[index] if vouched is not None else UNVOUCHED
                if mine_copy is UNVOUCHED or mine_copy is None:
                    mine_copy = deep_copy(message, _UNKNOWN)
                found_copies.append(mine_copy)
                found += j.message_digest(message)
                index += 1
                continue
            found_copies += there
            found += digests[at * _SIZE : (at + length) * _SIZE]
            index += length
            start = at + length
        joined = bytes(found)
        self.state = (found_copies, joined)
        if shared is not None:
            shared.vouched = vouch(messages, 0, found_copies, DIGESTS)
        return joined


def _position(copies: list[Any], message: Any, start: int) -> int:
    """Where ``message`` equals one of ``copies`` from ``start`` on (at most :data:`REACH`
    of them); -1 if it equals none."""
    if start >= len(copies):
        return -1
    try:
        # Not ``copies.index``: its error, raised for each message not found, holds the
        # message's repr (a long one's costs microseconds).
        return start + indexOf(copies[start : start + REACH], message)
    except ValueError:
        return -1


def llm_request_fingerprint(
    request: Mapping[str, Any],
    memory: MessageDigests | None = None,
    shared: Alignment | None = None,
) -> str:
    """The fingerprint of an LLM request (:func:`~agenttrace.model.journal.llm_request`);
    with the agent's ``memory``, its messages' digests are what the agent's last request
    already had, for those it sent again unchanged (``shared``: see
    :meth:`MessageDigests.digests`)."""
    messages = request.get("messages")
    if memory is None or not isinstance(messages, (list, tuple)):
        return j.llm_fingerprint(request)
    try:
        digests = memory.digests(messages, shared)
    except (TypeError, ValueError, RuntimeError):
        # A message that cannot be compared (an array's ==), or one another thread changes
        # while it is copied: hashed as it is, and the memory starts again.
        memory.state = ([], b"")
        if shared is not None:
            shared.vouched = None
        return j.llm_fingerprint(request)
    return j.llm_fingerprint(request, digests)


def memory_of(memories: dict[str, MessageDigests], agent_id: str) -> MessageDigests:
    """The agent's :class:`MessageDigests` in ``memories`` (made on its first request; two
    threads making it at once get the same one)."""
    memory = memories.get(agent_id)
    if memory is None:
        memory = memories.setdefault(agent_id, MessageDigests())
    return memory
