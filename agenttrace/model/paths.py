"""opTree path labels, bijective with a node's position in the tree.

A node's position is an *address*: a tuple of 1-based integers read in threes,
``(turn, op, child_session, turn, op, child_session, ...)``. The root session is ``()``, its
turn ``k`` is ``(k,)``, op ``j`` of that turn is ``(k, j)``, the ``n``-th sub-agent session that
op hosts is ``(k, j, n)``, and so on to any depth.

The label is the address written compactly (docs/path-labels.md): ``k.j`` for an op, ``k`` for a
root turn, ``k.j.k2.j2`` for an op inside the (first) child session of op ``k.j``. A tool call that
runs several sub-agents (``discuss`` runs Jack and Jill) tells them apart with ``:n`` on the op:
the second child's ops are ``k.j:2.k2.j2``. The child session node itself is ``k.j:n`` and the
root session ``0``. Every address has exactly one label and every label parses back to its address.
"""

from __future__ import annotations

import functools

ROOT_LABEL = "0"

Address = tuple[int, ...]


def format_label(address: Address) -> str:
    """The canonical label of ``address``."""
    if not address:
        return ROOT_LABEL
    parts: list[str] = []
    last = len(address) - 1
    for i, value in enumerate(address):
        position = i % 3
        if position == 2:  # child session number, written on the op that hosts it
            if i == last or value != 1:
                parts[-1] += f":{value}"
        else:
            parts.append(str(value))
    return ".".join(parts)


@functools.lru_cache(maxsize=8192)
def parse_label(label: str) -> Address:
    """The address ``label`` names. Raises ``ValueError`` for anything not a canonical label.

    Cached: the opTree parses every span's label, and a session's labels repeat run after run.
    """
    if label == ROOT_LABEL:
        return ()
    address: list[int] = []
    segments = label.split(".")
    for i, segment in enumerate(segments):
        is_op = i % 2 == 1
        number, sep, session = segment.partition(":")
        address.append(_positive(number, label))
        if sep:
            if not is_op:
                raise ValueError(f"not a path label: {label!r} (':' only follows an op)")
            address.append(_positive(session, label))
        elif is_op and i < len(segments) - 1:
            address.append(1)
    result = tuple(address)
    if format_label(result) != label:
        raise ValueError(f"not a canonical path label: {label!r}")
    return result


def kind_of(address: Address) -> str:
    """``session``, ``turn`` or ``op``: what sits at ``address``."""
    if not address:
        return "session"
    return ("turn", "op", "session")[(len(address) - 1) % 3]


def _positive(text: str, label: str) -> int:
    if not text.isdigit() or text.startswith("0"):
        raise ValueError(f"not a path label: {label!r}")
    return int(text)
