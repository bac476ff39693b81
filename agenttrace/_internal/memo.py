"""A memo of values made once per key, kept small.

The keys are names (op names, tool names, providers): a few recur on every call, but some are
made up per call (a name with an id in it), so a memo that kept every key would grow with the
run. At :data:`LIMIT` keys it starts over: only recent keys are kept, which is where the few
that recur are.
"""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")

LIMIT = 1024
"""How many keys a memo holds before it starts over."""


class BoundedMemo(dict[K, V]):
    """A dict of made values (read with ``get``) that :meth:`keep` clears at :data:`LIMIT`
    keys."""

    __slots__ = ()

    def keep(self, key: K, value: V) -> V:
        """Remember ``value`` for ``key``; ``value``."""
        if len(self) >= LIMIT:  # names made up per call: keep only recent ones
            self.clear()
        self[key] = value
        return value
