"""``Session``: the state registry (docs/events.md). It allocates agent and message ids (one
message counter for all events), knows every agent that ever existed with its transcript (the
done ones past ``done_agents_kept`` evicted from memory and read back from the stream on demand:
``Session.agent_stopped``), and logs the canonical events.

Each event goes, at once and in message-id order, to the scope it was logged in
(``Linkable.event_logged``: the tracing layer's scope puts it on its span, as a span event, and
hands it to agenttrace's recorder as an ``EventLogged`` record), or straight to the recorder when
it was logged outside any scope. The recorder's event-stream sink writes it in full as one
flushed JSON line.
``Session.load`` / :func:`resume` restore both counters, the registry and every transcript from
a session file or stream, so a resumed run never reuses an id.
"""

from __future__ import annotations

import collections
import functools
import itertools
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agenttrace._internal.checks import check_text, refuse
from agenttrace._internal.config import DEFAULT_DONE_AGENTS_KEPT
from agenttrace._internal.context import Linkable, current_linkable
from agenttrace._internal.runtime import runtime
from agenttrace._internal.times import event_ts
from agenttrace.formats.session.files import (
    LoadedFile,
    SessionFileError,
    check_session_id,
    read_session_file,
    segment_stem,
)
from agenttrace.formats.session.lease import Lease
from agenttrace.formats.session.unfinished import continued, without_unfinished
from agenttrace.model import events as ev
from agenttrace.model.ids import new_txn_id
from agenttrace.model.lifecycle import EventLogged
from agenttrace.model.links import Replies
from agenttrace.model.reentry import Reentry
from agenttrace.model.relays import CallAnswers
from agenttrace.model.replay_runs import ReplayRuns
from agenttrace.model.resets import MAX_MOVED, Plan, Replay, plan_reset
from agenttrace.session.agent_registry import AgentRegistry

logger = logging.getLogger("agenttrace")

DONE_AGENTS_KEPT = DEFAULT_DONE_AGENTS_KEPT
"""How many done agents a session keeps in memory before it evicts the oldest, unless the
``done_agents_kept`` setting says otherwise (:attr:`Session.done_agents_kept`)."""


@dataclass
class AgentRecord:
    """One agent the session knows, alive or not, rebuilt from the stream alone."""

    agent_id: str
    name: str | None = None
    language_model: str | None = None
    cause: Any = None
    """The event that created it: the message holding the tool call (``None`` for the root)."""
    parent_id: str | None = None
    """The agent whose tool call created this one."""
    created: str | None = None
    transcript: list[dict[str, Any]] = field(default_factory=list)
    """Its transcript: its ``transcript_entry`` events in order, less those a
    ``transcript_reset`` dropped (what it was last sent, and what it said and heard since)."""
    aligned: ev.Alignment = field(default_factory=ev.Alignment, repr=False, compare=False)
    """What its requests were found to share with the transcript (for :func:`ev.alignment`);
    not part of the agent's state."""

    def messages(self) -> list[dict[str, Any]]:
        """The transcript as chat messages, ready to send to a model again."""
        return [ev.api_message(entry) for entry in self.transcript]


class Session:
    """Event-stream backed registry of a multi-agent system (its API: docs/events.md).

    A fresh session's id is also the origin txn id of its first run and names its files;
    a resumed session keeps its id, so the next run appends to the same files. An id given must
    be a plain file name stem (:func:`check_session_id`; else :class:`SessionFileError`).

    ``writer``: the writer id of a process that joined a session another process started
    (``agenttrace.tracing.travel.writer_id``). It writes its own segment of the session,
    ``<session_id>.w/<writer>.*`` (:attr:`segment_stem`), and its message and agent ids carry
    the writer id (``msg_<writer>_001``), so they never collide with another writer's
    (docs/design/cross-process.md).
    """

    def __init__(self, session_id: str | None = None, *, writer: str | None = None) -> None:
        # The id names the session's files: never one that could lead out of their directory.
        self.session_id = check_session_id(session_id) if session_id else new_txn_id()
        self.writer = writer
        """The writer id of a joined process's session, ``None`` for the first writer's."""
        self.segment_stem = segment_stem(self.session_id, writer)
        """What its files are named by in the sessions directory (the id, for the first
        writer)."""
        self.directory: Path | None = None
        """Where its files are written when the program named them (``load_session`` of
        ``runs/chat.events.jsonl``: ``runs``); ``None``: init's sessions directory."""
        self._message_prefix = ev.writer_prefix(ev.MESSAGE_PREFIX, writer)
        self._agent_prefix = ev.writer_prefix(ev.AGENT_PREFIX, writer)
        self.message_counter = 0
        self.agent_counter = 0
        self._lock = threading.RLock()
        self.agents: AgentRegistry[AgentRecord] = AgentRegistry(
            self._agent_prefix, self._message_prefix, self._revive, self._lock
        )
        """Every agent that ever existed, by id: a dict whose evicted agents are revived from
        the event stream when looked up (``agenttrace.session.agent_registry``)."""
        self.events: list[dict[str, Any]] = []
        """The events in memory, in message-id order: every event of the session, less those
        of evicted agents (the stream on disk holds them all)."""
        self.lines: list[bytes | None] = []
        """The JSON line of each event in :attr:`events` as restored (``None``: made when
        needed, as for every event logged in this process; the sinks got theirs when it was
        logged)."""
        self.done_agents_kept = runtime.settings.done_agents_kept
        """How many done agents (none of their runs open) stay in memory; past that the oldest
        are evicted, in batches of this many, when the stream on disk holds all their events
        (docs/how-to/long-agents.md). 0: evict whenever one more is done."""
        self.stream_source: Callable[[], Path | None] | None = None
        """Set by the event-stream sink: the stream's path if every event logged so far is in
        it as logged (no outage, no redaction), else ``None``; eviction needs one."""
        self._evicted_from: Path | None = None
        self._running: dict[str, int] = {}
        """Agent id -> how many of its runs are open."""
        self._done: collections.OrderedDict[str, None] = collections.OrderedDict()
        """Done agents held in memory, oldest first."""
        self._restored_upto = 0
        """The message counter after a restore: agents created up to it are never evicted
        (their events are the restored prefix the sinks may read again)."""
        self.runs: list[dict[str, Any]] = []
        """opTree SessionNodes of earlier runs (from a session file)."""
        self.meta: dict[str, Any] = {}
        self.previous_trace: tuple[int, int] | None = None
        """(trace id, root span id) of the last run before a resume, for the new run's Link."""
        self.resumed_from: str | None = None
        self.run_count = 0
        self.restored_count = 0
        """How many events came from a file when the session was resumed."""
        self.accounted: list[dict[str, Any]] = []
        """The ``op_accounted`` lines of the stream it was resumed from (kept if the stream
        is ever rewritten from the restored session)."""
        self.restored_journal: list[dict[str, Any]] = []
        """The step-journal lines of the files it was resumed from, in order (the session file
        it writes holds them, before its own)."""
        self.cut_short: list[dict[str, Any]] = []
        """Events at the end of its stream whose write a crash cut short, left out when it was
        resumed (see ``agenttrace.formats.session.unfinished``)."""
        self.lease: Lease | None = None
        """The lease this process holds on it (a resumed session: ``agenttrace.session.leases``)."""
        self.store_lease: Any = None
        """Its lease in the session store, when resumed from one (a ``StoreLease``:
        ``agenttrace.session.store_leases``); its journal lines carry that lease's token."""
        self.reentry: Reentry | None = None
        """The interrupted run the next root run re-enters (``agenttrace.model.reentry``)."""
        self.replay_runs: ReplayRuns | None = None
        """A replay of several recorded runs: each root run takes the next one's re-entry
        (``agenttrace.model.replay_runs``), and ``reentry`` is unused."""
        self._by_name: dict[str, str] = {}
        self._agent_of: dict[str, str] = {}  # message id -> the agent whose event it is
        self._replay = Replay()
        """Transcripts as the events rebuild them (a reset's new entries follow it)."""
        self._replies = Replies()
        """Recent assistant replies, to link what agents hear to them (:meth:`reply_saying`)."""
        self._answers = CallAnswers()
        """What answered tool calls stand for, by call id (``agenttrace.model.relays``)."""

    # -- the Session API (docs/events.md) ----------------------------------------------------------

    def reply_saying(self, text: str, hearer: str | None = None) -> str | None:
        """The message id of the logged assistant reply that ``text`` stands for, among the last
        ``REPLIES_REMEMBERED`` replies; ``None`` if none does beyond doubt
        (``agenttrace.model.links``: the same ``str`` object, or the same content, exactly, with
        a tag around it or with parts redacted, from a reply long enough to tell apart and the
        only one that fits). ``hearer``: the agent that hears it; the reply must then come from
        an agent of its tree.

        This is how what one agent hears links to what another's model said when the text
        arrives as a plain ``str`` (an agent run returns what it returned, not a
        ``LoggedString``): the entry that hears it gets the reply as its ``substance``.
        """
        with self._lock:
            reachable = None if hearer is None else functools.partial(self._same_tree, hearer)
            return self._replies.find(text, reachable)

    def _same_tree(self, hearer: str, speaker: str | None) -> bool:
        """Whether ``hearer`` could have heard ``speaker``: they are in one agent tree (the same
        root), or both are top-level agents, between which the program itself relays."""
        if speaker is None:
            return False
        speaker_root, hearer_root = self._root_of(speaker), self._root_of(hearer)
        return speaker_root == hearer_root or (speaker_root == speaker and hearer_root == hearer)

    def _root_of(self, agent_id: str) -> str:
        seen = {agent_id}
        # Parents of evicted agents are known without reviving them.
        known, parent = self.agents.parent_of(agent_id)
        while known and parent is not None:
            if parent in seen:  # a cycle a file made up: stop at it
                break
            seen.add(parent)
            agent_id = parent
            known, parent = self.agents.parent_of(agent_id)
        return agent_id

    @staticmethod
    def load(session_file: str | Path) -> Session:
        """Load a session file or event stream and restore counters, registry and transcripts
        (without events whose write a crash cut short: see
        ``agenttrace.formats.session.unfinished``)."""
        path = Path(session_file)
        loaded, cut_short = without_unfinished(path, read_session_file(path))
        session = Session.from_file(loaded)
        session.cut_short = cut_short
        return session

    def allocate_agent_id(self) -> str:
        """A new, never used agent id (``agent_003``)."""
        with self._lock:
            self.agent_counter += 1
            return f"{self._agent_prefix}{self.agent_counter:03d}"

    def log_agent_created(
        self,
        agent_id: str,
        cause: str | list[str] | None = None,
        name: str | None = None,
        language_model: str | None = None,
        *,
        initial: Sequence[Mapping[str, Any] | Any] = (),
        at: Linkable | None = None,
    ) -> str:
        """Log an ``agent_created`` event and, in the same write, a ``transcript_entry`` for each
        message its transcript starts with (``initial``: a system prompt); returns the message id
        of the ``agent_created``. A crash in the middle of that write leaves no agent at all
        once resumed (see ``agenttrace.formats.session.unfinished``), never one without them."""
        builds: list[Callable[[str], dict[str, Any]]] = [
            lambda mid: ev.agent_created(
                mid, agent_id, cause=cause, name=name, language_model=language_model
            )
        ]
        for message in initial:
            entry = message if isinstance(message, Mapping) else ev.message_fields(message)
            builds.append(functools.partial(_entry, agent_id, entry))
        return self._log_all(builds, at)

    def log_transcript_entry(
        self,
        agent_id: str,
        message: Mapping[str, Any] | Any,
        substance: str | None = None,
        *,
        at: Linkable | None = None,
    ) -> str:
        """Log what enters ``agent_id``'s transcript; ``substance``: what it morally represents.
        A tool result given none answers a call whose answer is known by its id (the call's
        first result, logged with a ``substance``): it gets that one."""
        entry = message if isinstance(message, Mapping) else ev.message_fields(message)
        if substance is None:
            substance = self._answers.answer(agent_id, entry)
        return self._log(
            lambda mid: ev.transcript_entry(mid, agent_id, entry, substance=substance), at
        )

    def log_transcript_reset(
        self,
        agent_id: str,
        kept: int,
        messages: Sequence[Mapping[str, Any] | Any] = (),
        *,
        at: Linkable | None = None,
        heard: Callable[[Mapping[str, Any]], str | None] | None = None,
        vouched: Sequence[Any] | None = None,
    ) -> str:
        """Log that ``agent_id``'s transcript is now its first ``kept`` entries followed by
        ``messages``: a ``transcript_reset`` and, in the same write, a ``transcript_entry`` for
        each message that is not an entry the transcript already holds after the kept ones;
        those it does hold are referred to by their message ids (its ``reused``: see
        docs/events.md and :func:`~agenttrace.model.resets.plan_reset`), so a sliding window
        logs what is new in it, not the window. A new entry that is what the entry at its place
        said before (:func:`~agenttrace.model.events.same_entry`) has that entry's content as
        its ``substance``, so views show it once. ``vouched``: copies a comparison of this
        request just found ``messages`` equal to (:func:`~agenttrace.model.resets.plan_reset`).
        Returns the reset's message id."""
        if kept < 0:
            raise ValueError(f"kept must be >= 0, not {kept}")
        with self._lock:
            record = self.agents.get(agent_id)
            before = record.transcript if record is not None else []
            kept = min(kept, len(before))
            memory = record.aligned if record is not None else None
            plan = plan_reset(messages, before, kept, memory, vouched)
            reused = _reused_ids(plan, before)
            if reused is None:  # an entry without an id cannot be referred to: restate all
                plan = Plan.all_new(messages, kept)
            builds: list[Callable[[str], dict[str, Any]]] = [
                lambda mid: ev.transcript_reset(mid, agent_id, kept, len(plan.new), reused)
            ]
            for place, message in plan.new:
                entry = message if isinstance(message, Mapping) else ev.message_fields(message)
                old = before[place] if place < len(before) else None
                substance = self._answers.answer(agent_id, entry)
                if substance is None and old is not None and ev.same_entry(entry, old):
                    substance = old.get("substance") or old.get("message_id")
                if substance is None and heard is not None:
                    substance = heard(entry)
                builds.append(functools.partial(_entry, agent_id, entry, substance=substance))
            head = _remembered_head(memory, before, kept)
            result = self._log_all(builds, at)
            if memory is not None and record is not None:
                # What was just sent is known: the next request is compared to it in C.
                remembered = head + plan.copies
                transcript: list[Mapping[str, Any]] = list(record.transcript)
                aligned = len(remembered) == len(transcript)
                memory.state = (remembered, transcript) if aligned else ([], [])
            return result

    def log_piece_of_text(
        self,
        agent_id: str,
        content: str,
        cause: str | list[str],
        *,
        at: Linkable | None = None,
    ) -> str:
        """Log text a tool call made for delivery to agents; ``cause``: that tool call."""
        return self._log(lambda mid: ev.piece_of_text(mid, agent_id, content, cause), at)

    def revivify(self, agent_id: str) -> AgentRecord:
        """The agent's record, transcript included, rebuilt from the events (read back from
        the stream on disk if the agent was evicted)."""
        try:
            record = self.agents[agent_id]
        except KeyError:
            raise KeyError(f"no agent {agent_id!r} in session {self.session_id}") from None
        with self._lock:
            if agent_id not in self._running:  # revived while done: evictable again
                self._done[agent_id] = None
                self._done.move_to_end(agent_id)
        return record

    def agent(self, agent_id: str) -> AgentRecord:
        """The agent ``agent_id``, held or evicted (:meth:`revivify`)."""
        return self.revivify(agent_id)

    def agents_in_memory(self) -> int:
        """How many agent records the session holds in memory (the rest are evicted)."""
        return self.agents.held()

    # -- eviction (docs/how-to/long-agents.md) ----------------------------------------------

    def agent_running(self, agent_id: str) -> None:
        """A run of ``agent_id`` started: it is not done (the tracing layer calls this)."""
        with self._lock:
            self._running[agent_id] = self._running.get(agent_id, 0) + 1
            self._done.pop(agent_id, None)

    def agent_stopped(self, agent_id: str) -> list[str]:
        """A run of ``agent_id`` ended (after its end was recorded); with none of its runs
        open it is done, and done agents past :attr:`done_agents_kept` are evicted. Returns
        the ids of the agents evicted now (the caller drops what it keeps of them)."""
        source = self.stream_source  # asked outside the lock: the sink takes its own first
        path = source() if source is not None else None
        with self._lock:
            left = self._running.get(agent_id, 0) - 1
            if left > 0:
                self._running[agent_id] = left
                return []
            self._running.pop(agent_id, None)
            if agent_id in self.agents:
                self._done[agent_id] = None
            if path is not None and len(self._done) > 2 * self.done_agents_kept:
                return self._evict(path, len(self._done) - self.done_agents_kept)
            return []

    def _evict(self, path: Path, count: int) -> list[str]:
        """Evict up to ``count`` of the oldest done agents, whose events are all in ``path``
        (under the lock): their records, their events and lines, their message ids."""
        if self.reentry is not None or self.replay_runs is not None:
            return []  # a replay refers to events by their place in self.events
        if self._evicted_from is not None and self._evicted_from != path:
            return []  # revived from one stream only
        chosen: dict[str, AgentRecord] = {}
        while self._done and len(chosen) < count:
            agent_id, _ = self._done.popitem(last=False)
            record = self.agents._held.get(agent_id)
            if record is None:
                continue
            created = ev.id_number(record.created, self._message_prefix)
            if (
                created is not None
                and created > self._restored_upto
                and self.agents.evictable(agent_id, record.parent_id, record.created)
            ):
                chosen[agent_id] = record
        if not chosen:
            return []
        self._evicted_from = path
        kept_events: list[dict[str, Any]] = []
        kept_lines: list[bytes | None] = []
        agent_of = self._agent_of
        for event, line in zip(self.events, self.lines, strict=True):
            if event.get("agent_id") in chosen:
                agent_of.pop(event.get("message_id"), None)  # type: ignore[arg-type]
                continue
            kept_events.append(event)
            kept_lines.append(line)
        self.events, self.lines = kept_events, kept_lines
        for agent_id, record in chosen.items():
            for entry in record.transcript:  # entries a revived agent had (not in events)
                agent_of.pop(str(entry.get("message_id")), None)
            agent_of.pop(record.created, None)  # type: ignore[arg-type]
            self.agents.evict(agent_id, record.parent_id, record.created)  # type: ignore[arg-type]
        return list(chosen)

    def _owner_in_stream(self, message_id: str) -> str | None:
        """The agent whose event ``message_id`` is, read from the stream evicted agents'
        events are in (their message ids left memory with them)."""
        if ev.id_number(message_id, self._message_prefix) is None or self._evicted_from is None:
            return None
        for event in read_session_file(self._evicted_from).events:
            if event.get("message_id") == message_id:
                agent = event.get("agent_id")
                return agent if isinstance(agent, str) else None
        return None

    def _revive(self, agent_ids: list[str]) -> dict[str, AgentRecord]:
        """The records of evicted ``agent_ids``, rebuilt from the events the stream holds of
        them (read and validated as any reader does), their parents as they were."""
        if self._evicted_from is None:
            raise KeyError(f"agents of session {self.session_id} were evicted from no stream")
        wanted = set(agent_ids)
        loaded = read_session_file(self._evicted_from)
        rebuilt = Session(self.session_id, writer=self.writer)
        rebuilt.restore([e for e in loaded.events if e.get("agent_id") in wanted], None)
        revived: dict[str, AgentRecord] = {}
        for agent_id in agent_ids:
            _, parent = self.agents.parent_of(agent_id)
            record = rebuilt.agents.get(agent_id)
            if record is None:
                raise KeyError(f"agent {agent_id!r} is not in {self._evicted_from}")
            record.parent_id = parent
            revived[agent_id] = record
        return revived

    def list_agents(self) -> dict[str, str | None]:
        """agent id -> name, for every agent that ever existed."""
        return {agent_id: record.name for agent_id, record in self.agents.items()}

    def agent_named(self, name: str) -> AgentRecord | None:
        """The most recent agent of this name."""
        agent_id = self._by_name.get(name)
        if not agent_id:
            return None
        record: AgentRecord | None = self.agents.get(agent_id)
        return record

    def root(self) -> AgentRecord | None:
        """The first agent created without a cause."""
        for agent_id in self.agents:  # in creation order; revived one by one (the first, often)
            record: AgentRecord = self.agents[agent_id]
            if record.cause is None:
                return record
        return None

    def children(self, agent_id: str) -> list[AgentRecord]:
        """The agents created by ``agent_id``'s tool calls, in creation order."""
        return [r for r in self.agents.values() if r.parent_id == agent_id]

    # -- recording ----------------------------------------------------------------------------

    def _log(self, build: Callable[[str], dict[str, Any]], at: Linkable | None) -> str:
        """Allocate the next message id, build the event, record it (registry, scope, recorder).

        ``at``: the scope the event belongs to (default: the current one), for its linkage.
        """
        scope = at if at is not None else current_linkable()
        with self._lock:
            event, line = self._record(build, scope)
            _deliver(self, event, line, scope, 0)
        return str(event["message_id"])

    def _log_all(
        self, builds: Sequence[Callable[[str], dict[str, Any]]], at: Linkable | None
    ) -> str:
        """:meth:`_log` for events that are written together, in one write; returns the first
        one's message id. Each is delivered with how many more of the same write follow, and
        each line but the last is marked as continued
        (``agenttrace.formats.session.unfinished``)."""
        scope = at if at is not None else current_linkable()
        last = len(builds) - 1
        with self._lock:
            recorded = [self._record(build, scope, i < last) for i, build in enumerate(builds)]
            for index, (event, line) in enumerate(recorded):
                _deliver(self, event, line, scope, last - index)
        return str(recorded[0][0]["message_id"])

    def log_copies(
        self, builds: Sequence[Callable[[str], dict[str, Any]]], *, at: Linkable | None = None
    ) -> None:
        """Log events copied from another session (what the bodies of a replay's served tool
        calls logged: ``agenttrace.model.served_bodies``) in one write: each ``build`` is given
        the next message id; the event gets the time now and the linkage of ``at`` (default:
        the current scope), as any event logged now."""
        if builds:
            self._log_all(builds, at)

    def _record(
        self, build: Callable[[str], dict[str, Any]], scope: Linkable | None, more: bool = False
    ) -> tuple[dict[str, Any], bytes]:
        """The next event: its message id, linkage and line (``more``: marked as continued in
        the same write); in the registry (under the lock)."""
        self.message_counter += 1
        event = build(f"{self._message_prefix}{self.message_counter:03d}")
        event["ts"] = event_ts(time.time_ns())
        if scope is not None:
            trace_id, span_id = scope.link_ids()
            if trace_id is not None:
                event["trace_id"] = trace_id
                event["span_id"] = span_id
            event["path"] = scope.label
        self._apply(event)
        line = continued(_event_line(event)) if more else _event_line(event)
        self.events.append(event)
        self.lines.append(None)  # the sinks get it now; kept, it would double the event's size
        return event, line

    def _apply(self, event: dict[str, Any]) -> None:
        """Update the registry with one event (recording and replay alike)."""
        kind = event.get("event_type")
        agent = event.get("agent_id")
        if kind != ev.TRANSCRIPT_ENTRY:
            self._replay.other()  # the entries written with a reset came before this
        if not isinstance(agent, str):
            return
        message = event.get("message_id")
        if isinstance(message, str):
            self._agent_of[message] = agent
        if kind == ev.AGENT_CREATED:
            # An id the counter did not hand out (an agent that brought its own) moves the
            # counter past it, so allocate_agent_id never returns an id already in use.
            number = ev.id_number(agent, self._agent_prefix)
            if number is not None and number > self.agent_counter:
                self.agent_counter = number
            cause = event.get("cause")
            parent = None
            if isinstance(cause, str):
                parent = self._agent_of.get(cause)
                if parent is None and self._evicted_from is not None:
                    parent = self._owner_in_stream(cause)  # a message of an evicted agent
            record = AgentRecord(
                agent,
                _string(event.get("name")),
                _string(event.get("language_model")),
                cause,
                parent if parent != agent else None,  # not its own parent, whatever a file says
                message if isinstance(message, str) else None,
            )
            self.agents[agent] = record
            if record.name:
                self._by_name[record.name] = agent
        elif kind == ev.TRANSCRIPT_ENTRY:
            known = self.agents.get(agent)
            if known is None:  # an agent the stream never announced (a fragment of a stream)
                known = self.agents[agent] = AgentRecord(agent)
            self._replay.entry(agent, known.transcript, event)
            content = event.get("content")
            role = event.get("role")
            if role == "assistant" and isinstance(content, str) and content:
                # A reply a reset logged again stands for the one it repeats.
                self._remember_reply(content, event.get("substance") or message, agent)
            elif role == "tool":
                self._remember_answer(agent, event)
        elif kind == ev.TRANSCRIPT_RESET:
            known = self.agents.get(agent)
            kept = event.get("kept")
            if known is not None and type(kept) is int and kept >= 0:
                self._replay.reset(agent, known.transcript, event)

    def _remember_answer(self, agent: str, event: Mapping[str, Any]) -> None:
        """A tool result logged with a ``substance`` says what its call's answer stands for
        (the first one: a later result for the same call is not a new answer)."""
        call_id, substance = event.get("tool_call_id"), event.get("substance")
        if (
            isinstance(call_id, str)
            and isinstance(substance, str)
            and self._answers.answer(agent, event) is None
        ):
            self._answers.remember(agent, call_id, substance)

    def _remember_reply(self, content: str, message: object, agent: str) -> None:
        if isinstance(message, str):
            self._replies.remember(content, message, agent)

    # -- restoring ----------------------------------------------------------------------------

    @classmethod
    def from_file(cls, loaded: LoadedFile) -> Session:
        """A session restored from what :func:`read_session_file` read. The session id the file
        gives (its ``session_id``, else its name) names the files the session is written to:
        one that is not a plain name is a :class:`SessionFileError`."""
        session_id = loaded.session_id or _text(loaded.meta.get("session_id"))
        try:
            session = cls(session_id)
        except SessionFileError as exc:
            raise SessionFileError(f"{loaded.path}: its session id is refused: {exc}") from None
        try:
            session.restore(loaded.events, raw_lines=None)
        except SessionFileError as exc:
            raise SessionFileError(f"{loaded.path}: {exc}") from None
        session.runs = list(loaded.runs)
        session.accounted = list(loaded.accounted)
        session.restored_journal = list(loaded.journal)
        session.meta = dict(loaded.meta)
        session.previous_trace = _last_trace(loaded)
        # Runs the files know of, by any trace they left: a killed run may have logged no event
        # (a plain @agent function) and left only its op_accounted or journal lines. Counted
        # none, the next run would be named by the session id as the first was, and take its
        # journal keys and its tool calls' idempotency keys.
        traces = {t for e in (*loaded.events, *loaded.accounted) if (t := _text(e.get("trace_id")))}
        journaled = {run for line in loaded.journal if (run := _text(line.get("run")))}
        session.run_count = max(len(loaded.runs), len(traces), len(journaled))
        return session

    def restore(self, events: list[dict[str, Any]], raw_lines: list[bytes] | None) -> None:
        """Replay ``events`` into this (empty) session: registry, transcripts, both counters."""
        message_ids = agent_ids = 0
        for event in events:
            self._apply(event)
            if self._replay.moved > MAX_MOVED:
                raise SessionFileError(
                    f"its transcript resets reuse more than {MAX_MOVED:,} entries in all: "
                    "not a session agenttrace wrote"
                )
            number = ev.id_number(event.get("message_id", ""), self._message_prefix)
            if number is not None and number > message_ids:
                message_ids = number
            agent = event.get("agent_id")
            if isinstance(agent, str):
                number = ev.id_number(agent, self._agent_prefix)
                if number is not None and number > agent_ids:
                    agent_ids = number
        self._replay.close()
        self.events = events
        self.lines = list(raw_lines) if raw_lines is not None else [None] * len(events)
        self.message_counter = max(self.message_counter, message_ids)
        self.agent_counter = max(self.agent_counter, agent_ids)
        self._restored_upto = self.message_counter

    def restore_writers(self, segments: Sequence[Sequence[dict[str, Any]]]) -> None:
        """Replay the events of the session's other writers' ``segments`` (each in its file's
        order) into the registry: their agents and transcripts, which this session can then
        revivify. Their events stay theirs: this session's events, counters and files are its
        own writer's (their ids carry their writer ids, so none is ever allocated again)."""
        with self._lock:
            for events in segments:
                for event in events:
                    self._apply(event)
                    if self._replay.moved > MAX_MOVED:
                        raise SessionFileError(
                            f"its transcript resets reuse more than {MAX_MOVED:,} entries in "
                            "all: not a session agenttrace wrote"
                        )
                self._replay.close()

    def event_lines(self, count: int | None = None) -> list[bytes]:
        """Every event in :attr:`events` (its first ``count``) as its JSON line, made the
        first time it is asked for (the restored prefix is: the sinks read it again)."""
        with self._lock:
            lines = self.lines[:count] if count is not None else self.lines
            made = [
                line if line is not None else _event_line(self.events[index])
                for index, line in enumerate(lines)
            ]
            restored = min(len(made), self.restored_count)
            self.lines[:restored] = made[:restored]  # kept: new events' lines are not
            return made


def _reused_ids(plan: Plan, before: Sequence[Mapping[str, Any]]) -> list[Any] | None:
    """The plan's pieces as a reset's ``reused`` field (``None`` when it reuses nothing, as a
    reset was written before, or when an entry it reuses has no message id to refer to it)."""
    if not any(isinstance(piece, tuple) for piece in plan.pieces):
        return None
    wire: list[Any] = []
    for piece in plan.pieces:
        if isinstance(piece, int):
            wire.append(piece)
            continue
        first = before[piece[0]].get("message_id")
        last = before[piece[1] - 1].get("message_id")
        if not (isinstance(first, str) and isinstance(last, str)):
            return None
        wire.append([first, last])
    return wire


def _remembered_head(memory: ev.Alignment | None, before: Sequence[Any], kept: int) -> list[Any]:
    """What the agent's memory holds of the ``kept`` entries a reset keeps (``None`` where it
    holds nothing it can vouch for: that message is then compared in full next time)."""
    if memory is None:
        return [None] * kept
    sent, matched = memory.state
    known = min(kept, len(sent), len(matched))
    if known and not ev.same_prefix(matched, before, known):
        known = 0
    return list(sent[:known]) + [None] * (kept - known)


def _entry(
    agent_id: str, entry: Mapping[str, Any], message: str, substance: str | None = None
) -> dict[str, Any]:
    return ev.transcript_entry(message, agent_id, entry, substance=substance)


def _string(value: Any) -> str | None:
    """``value`` if it is a string: names read back from a file may be anything."""
    return value if isinstance(value, str) else None


def _text(value: Any) -> str | None:
    """``value`` if it is a non-empty string (a file read back may hold anything there)."""
    return value if isinstance(value, str) and value else None


_LINE = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "))
"""The stream's encoder, made once (``json.dumps`` with options builds one per call)."""


def _event_line(event: Mapping[str, Any]) -> bytes:
    """An event as its line of the stream (and, unchanged, of the session file).

    A lone surrogate (a file name decoded with ``surrogateescape``, or ``"\\ud800"`` read
    from a file) has no UTF-8: it is written as its JSON escape, which reads back as itself.
    """
    return (_LINE.encode(event) + "\n").encode("utf-8", "backslashreplace")


def _last_trace(loaded: LoadedFile) -> tuple[int, int] | None:
    """(trace id, span id) of the last run: its root node's, else the last event's."""
    candidates = itertools.chain(
        ((run.get("traceId"), run.get("spanId")) for run in reversed(loaded.runs)),
        ((event.get("trace_id"), event.get("span_id")) for event in reversed(loaded.events)),
    )
    for trace_id, span_id in candidates:
        if (
            isinstance(trace_id, str)
            and isinstance(span_id, str)
            and _TRACE_ID.match(trace_id)
            and _SPAN_ID.match(span_id)
        ):
            trace, span = int(trace_id, 16), int(span_id, 16)
            if trace and span:  # all zeros: OpenTelemetry's invalid context
                return trace, span
    return None


_TRACE_ID = re.compile(r"[0-9a-fA-F]{32}\Z")
_SPAN_ID = re.compile(r"[0-9a-fA-F]{16}\Z")


# --- where events go ------------------------------------------------------------------------


def _deliver(
    session: Session, event: dict[str, Any], line: bytes, scope: Linkable | None, more: int
) -> None:
    """Hand one event to its one way out, under the session's lock, in message-id order: the
    scope it was logged in (which adds it to its span and records it), else the recorder, if
    agenttrace is set up. ``more``: how many events logged with it, to be written in the same
    write, follow it (0 for most: an agent's creation is logged with the entries its
    transcript starts with)."""
    if scope is not None:
        scope.event_logged(session, event, line, more)
        return
    recorder = runtime.recorder
    if recorder is not None:
        recorder.record(EventLogged(session, event, line, more=more))


# --- the session agent code runs in ---------------------------------------------------------

_current: ContextVar[Session | None] = ContextVar("agenttrace_session", default=None)
_default_lock = threading.Lock()
_default: Session | None = None


def current_session() -> Session:
    """The session agent runs are recorded in: the one made current by :func:`use_session` or
    :func:`resume`, else one started on first use (a script's runs share it)."""
    session = _current.get()
    if session is not None:
        return session
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Session()
    return _default


def session_if_any() -> Session | None:
    """The session :func:`current_session` would return, or ``None`` if it would start one."""
    session = _current.get()
    return session if session is not None else _default


def use_session(session: Session | None) -> None:
    """Make ``session`` the current one for the rest of the process (``None``: a new one later)."""
    if session is not None and not isinstance(session, Session):
        refuse("agenttrace.use_session", "session", session, "an agenttrace.Session or None")
    global _default
    with _default_lock:
        _default = session
    _current.set(None)


@contextmanager
def session_here(session: Session | None) -> Iterator[None]:
    """Make ``session`` the current one in this context (a task: its thread or asyncio task),
    for the ``with`` block; ``None``: leave the current one as it is."""
    if session is None:
        yield
        return
    token = _current.set(session)
    try:
        yield
    finally:
        _current.reset(token)


def new_session(session_id: str | None = None) -> Session:
    """Start a new session and make it current; ``session_id``, if given, names its files
    (a plain file name stem: else :class:`SessionFileError`)."""
    check_text("agenttrace.new_session", "session_id", session_id)
    session = Session(session_id)
    use_session(session)
    return session
