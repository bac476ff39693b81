"""The session's agents, some held in memory and some evicted to the event stream
(docs/how-to/long-agents.md, "Done agents leave memory").

An agent that is done (no run of it open) can be *evicted*: its record leaves memory and the
registry keeps only what it needs to answer without reading the stream, in tables indexed by
the agent's counter number (8 bytes each per table): when it was created (to list agents in
creation order) and its parent (so the agent tree can be walked, ``Session._root_of``, without
reviving anyone). Looking an evicted agent up (``registry[agent_id]``, ``.get``) *revives* it:
its record is rebuilt from the stream on disk by the ``revive`` callback and held again.

Only agents whose id is the session's own counter form (``agent_007``, or
``agent_<writer>_007``) and whose parent is one too are ever evicted: the tables are indexed by
those numbers. Whatever else is held for good.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeVar

from agenttrace.model import events as ev

R = TypeVar("R")

_NONE = -1
"""In the tables: not evicted (created), no parent (parent)."""


class AgentRegistry(MutableMapping[str, R]):
    """agent id -> record, as a dict, with records of evicted agents revived on access.

    ``prefix`` and ``message_prefix``: the session's agent and message id prefixes (``agent_``
    and ``msg_``, or a joined writer's). ``revive``: rebuilds the records of the ids given from
    the stream (every id it is given was evicted), returning them by id; ``lock``: the session's
    (reentrant) lock. Iteration yields every agent's id, held or evicted, in creation order and
    revives none; ``values()`` and ``items()`` revive every evicted agent, in one read.
    """

    def __init__(
        self,
        prefix: str,
        message_prefix: str,
        revive: Callable[[list[str]], dict[str, R]] | None = None,
        lock: AbstractContextManager[Any] | None = None,
    ) -> None:
        self._prefix = prefix
        self._message_prefix = message_prefix
        self._held: dict[str, R] = {}
        self._created = array("q")
        """By agent number: the message number of its ``agent_created`` if evicted, else -1."""
        self._parent = array("q")
        """By agent number: its parent's agent number if evicted (-1: no parent)."""
        self._evicted = 0
        self.revive = revive
        self._lock: AbstractContextManager[Any] = lock if lock is not None else nullcontext()
        """The session's lock (reentrant): a revival reads and inserts under it, as the session
        registers and evicts under it."""

    # -- the dict interface --------------------------------------------------------------------

    def __getitem__(self, agent_id: str) -> R:
        record = self._held.get(agent_id)
        if record is not None:
            return record
        if not self.is_evicted(agent_id):
            raise KeyError(agent_id)
        with self._lock:
            if agent_id not in self._held:  # another thread may have revived it meanwhile
                self._revive_ids([agent_id])
            return self._held[agent_id]

    def __setitem__(self, agent_id: str, record: R) -> None:
        self._forget(agent_id)
        self._held[agent_id] = record

    def __delitem__(self, agent_id: str) -> None:
        if self._forget(agent_id):
            return
        del self._held[agent_id]

    def __contains__(self, agent_id: object) -> bool:
        return agent_id in self._held or (isinstance(agent_id, str) and self.is_evicted(agent_id))

    def __len__(self) -> int:
        return len(self._held) + self._evicted

    def __iter__(self) -> Iterator[str]:
        if not self._evicted:
            return iter(list(self._held))
        ordered: list[tuple[int, int, str]] = []
        for place, (agent_id, record) in enumerate(self._held.items()):
            created = ev.id_number(getattr(record, "created", None), self._message_prefix)
            ordered.append((created if created is not None else _NONE, place, agent_id))
        for number, created in enumerate(self._created):
            if created != _NONE:
                ordered.append((created, 0, self._agent_id(number)))
        ordered.sort(key=lambda item: (item[0], item[1]))
        return iter([agent_id for _, _, agent_id in ordered])

    def values(self) -> Any:
        self.revive_all()
        return super().values()

    def items(self) -> Any:
        self.revive_all()
        return super().items()

    # -- eviction --------------------------------------------------------------------------------

    def held(self) -> int:
        """How many records are in memory."""
        return len(self._held)

    def evicted(self) -> int:
        """How many agents are evicted (their records only in the stream)."""
        return self._evicted

    def number(self, agent_id: object) -> int | None:
        """The counter number of an id of the session's own form (``None`` for any other)."""
        number = ev.id_number(agent_id, self._prefix)
        if number is None or agent_id != self._agent_id(number):
            return None  # agent_7 or agent_0007: not an id the counter made
        return number

    def evictable(self, agent_id: str, parent_id: str | None, created: str | None) -> bool:
        """Whether the tables can stand for this agent once its record is dropped."""
        return (
            agent_id in self._held
            and self.number(agent_id) is not None
            and (parent_id is None or self.number(parent_id) is not None)
            and ev.id_number(created, self._message_prefix) is not None
        )

    def evict(self, agent_id: str, parent_id: str | None, created: str) -> None:
        """Drop the record of ``agent_id`` (:meth:`evictable` must have said yes)."""
        number = self.number(agent_id)
        created_number = ev.id_number(created, self._message_prefix)
        assert number is not None and created_number is not None
        parent = _NONE if parent_id is None else self.number(parent_id)
        self._grow(number)
        del self._held[agent_id]
        if self._created[number] == _NONE:
            self._evicted += 1
        self._created[number] = created_number
        self._parent[number] = _NONE if parent is None else parent

    def is_evicted(self, agent_id: str) -> bool:
        """Whether ``agent_id`` is evicted (known, but not in memory)."""
        number = self.number(agent_id)
        return number is not None and number < len(self._created) and self._created[number] >= 0

    def parent_of(self, agent_id: str) -> tuple[bool, str | None]:
        """(known, parent id) of an agent, held or evicted, without reviving it."""
        record = self._held.get(agent_id)
        if record is not None:
            return True, getattr(record, "parent_id", None)
        if not self.is_evicted(agent_id):
            return False, None
        number = self.number(agent_id)
        assert number is not None
        parent = self._parent[number]
        return True, None if parent == _NONE else self._agent_id(parent)

    def revive_all(self) -> None:
        """Revive every evicted agent, in one read of the stream."""
        with self._lock:
            if self._evicted:
                ids = [self._agent_id(n) for n, c in enumerate(self._created) if c != _NONE]
                self._revive_ids(ids)

    def _revive_ids(self, ids: Iterable[str]) -> None:
        wanted = list(ids)
        if self.revive is None:
            raise KeyError(f"agent {wanted[0]!r} was evicted and cannot be revived")
        revived = self.revive(wanted)
        for agent_id in wanted:
            self[agent_id] = revived[agent_id]

    def _forget(self, agent_id: str) -> bool:
        """Clear ``agent_id``'s evicted slot; whether it was evicted."""
        if not self.is_evicted(agent_id):
            return False
        number = self.number(agent_id)
        assert number is not None
        self._created[number] = _NONE
        self._parent[number] = _NONE
        self._evicted -= 1
        return True

    def _grow(self, number: int) -> None:
        missing = number + 1 - len(self._created)
        if missing > 0:
            self._created.extend([_NONE] * missing)
            self._parent.extend([_NONE] * missing)

    def _agent_id(self, number: int) -> str:
        return f"{self._prefix}{number:03d}"
