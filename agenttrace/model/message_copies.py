"""Copies of the messages an agent sent, and what one comparison of a request with them vouches
for: shared by the memories that keep them, so a request is compared with them once.

Two memories of an agent keep copies of the messages its requests sent: the alignment with its
transcript (:class:`~agenttrace.model.events.Alignment`) and the digests of its fingerprint
(``agenttrace.model.request_digests``). A message of the next request that equals a kept copy
is, unchanged, the message sent then; one edited in place since (its dict, or a list in it) no
longer equals its copy. A copy is deep and holds only what ``==`` tells apart exactly
(dicts with string keys, lists, strings and ``None``): a message holding anything else (a
number, which ``==`` equates with ``True`` or ``1.0``; a pydantic model) has none.

Both memories hold the *same* copy objects, so the second to look at a request need not compare
its messages again: the first leaves a :data:`Vouched` (the request, and for each of its
messages from some place on the copy it was found to equal), and the second compares those
copies with its own, which Python's list equality does by identity, in C, a few nanoseconds a
message. Only a request of the same object, length and last message is vouched for, as the
alignment's own memory of its last request is (:meth:`~agenttrace.model.events.Alignment.recall`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

DEPTH = 32
"""How deep a message is copied; one deeper has no copy."""

UNVOUCHED: Any = object()
"""In a :data:`Vouched` list: a message no copy vouches for. Equal to nothing but itself, and
never kept as a copy, so a comparison of vouched copies with kept ones never matches it."""

Vouched = tuple[Sequence[Any], int, Any, int, list[Any], str]
"""``(request, its length, its last message, base, copies, by)``: ``copies[k]`` equals the
request's message ``base + k`` (or is :data:`UNVOUCHED`, or another memory's marker for a
message without a copy, which no kept copy is); ``by``: the memory that compared (:data:`ALIGNMENT`
or :data:`DIGESTS`). A memory takes only what the other found: its own finding would vouch for
its own copies, whatever the messages have become since."""

ALIGNMENT = "alignment"
"""A :data:`Vouched` of the alignment with the transcript, made when an attempt starts."""

DIGESTS = "digests"
"""A :data:`Vouched` of the fingerprint's digests, made after the alignment, for the reset."""


class _NoCopy(Exception):
    """A message holds something a copy could not tell apart from what replaces it."""


def deep_copy(message: Any, missing: Any) -> Any:
    """A deep copy of ``message`` that ``==`` tells apart exactly as its canonical JSON does;
    ``missing`` if it holds anything else."""
    try:
        return _copied(message, 0)
    except _NoCopy:
        return missing


def _copied(value: Any, depth: int) -> Any:
    kind = type(value)
    if kind is str or value is None:
        return value
    if depth >= DEPTH:
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


def vouch(messages: Sequence[Any], base: int, copies: list[Any], by: str) -> Vouched:
    """What one comparison by ``by`` found: ``copies[k]`` equals ``messages[base + k]``."""
    return (messages, len(messages), messages[-1] if messages else None, base, copies, by)


def vouched_copies(vouched: Vouched | None, messages: Sequence[Any], by: str) -> list[Any] | None:
    """For each of ``messages`` (from the first on), the copy ``vouched`` says it equals
    (:data:`UNVOUCHED` where it says nothing); ``None`` if ``vouched`` is not of this request
    (another list, or this one since grown, shrunk or given a new last message) or not by
    ``by``."""
    if (
        vouched is None
        or vouched[5] != by
        or vouched[0] is not messages
        or vouched[1] != len(messages)
        or (messages and vouched[2] is not messages[-1])
    ):
        return None
    base, copies = vouched[3], vouched[4]
    tail = len(messages) - base - len(copies)
    return [UNVOUCHED] * base + copies + [UNVOUCHED] * max(tail, 0)
