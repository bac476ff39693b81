"""``SessionViewer``: views of a session (docs/events.md), from a file or a live ``Session``.

It only follows the stream's links (``substance``, ``cause``, ``tool_call_id``): it never parses
tool arguments, so it works for any tool. Reads the older spelling too (``content_id``,
``caused_by``), through the same reader as ``resume``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeGuard

from agenttrace.formats.content import compact_json, content_text
from agenttrace.formats.documents import read_any
from agenttrace.formats.session.files import LoadedFile, find_session
from agenttrace.formats.session.fullest import load_pair
from agenttrace.formats.session.optree import agent_names
from agenttrace.model.events import (
    AGENT_CREATED,
    PIECE_OF_TEXT,
    TRANSCRIPT_ENTRY,
    TRANSCRIPT_RESET,
    infer_causes,
    normalize,
)
from agenttrace.model.resets import Replay, Rewrite
from agenttrace.session.state import Session


class SessionViewer:
    """Views of one session: agents, transcripts, the dialog, an agent's perspective, causality."""

    def __init__(
        self,
        source: str | Path | Session | Iterable[Mapping[str, Any]],
        run_names: Mapping[str, str] | None = None,
    ) -> None:
        """``source``: a session file or event stream path (or a STD-008 or ATIF document's),
        a session id (a ``str`` the command line would take as one: looked up in the sessions
        directory, ``AGENTTRACE_SESSIONS_DIR``, and read from both its files), a live
        ``Session``, or events. ``run_names``: agent id -> the name its runs carry
        (:func:`~agenttrace.formats.session.optree.agent_names`), for the agents the events leave
        unnamed (a root agent); read from the file when ``source`` is one. A reference that
        names no session raises :class:`~agenttrace.formats.session.files.SessionFileError`."""
        self._run_names = dict(run_names or {})
        if isinstance(source, (str, Path)):
            loaded = _read(source)
            self.events = loaded.events
            self._run_names = {**agent_names(loaded.runs), **self._run_names}
        elif isinstance(source, Session):
            self.events = list(source.events)
        else:
            self.events = [normalize(event) for event in source]
            infer_causes(self.events)
        self._by_id = {e["message_id"]: e for e in self.events if _is_text(e.get("message_id"))}
        # Each agent's entries (of the events as given here), found in one pass: a view of
        # every agent (the HTML page has each one's perspective) costs the events once, not
        # once per agent, which made a file with many agents take quadratic time.
        self._transcripts: dict[str, list[dict[str, Any]]] = {}
        self._histories: dict[str, list[dict[str, Any]]] = {}  # entries and resets
        self._rewrites: dict[int, Rewrite] = {}  # id() of a reset -> what it did
        current: dict[str, list[Any]] = {}  # each agent's transcript as the resets leave it
        replay = Replay()
        for event in self.events:
            agent = event.get("agent_id")
            kind = event.get("event_type")
            if not _is_text(agent) or kind not in (TRANSCRIPT_ENTRY, TRANSCRIPT_RESET):
                replay.other()
                continue
            self._histories.setdefault(agent, []).append(event)
            if kind == TRANSCRIPT_ENTRY:
                self._transcripts.setdefault(agent, []).append(event)
                replay.entry(agent, current.setdefault(agent, []), event)
            else:
                rewrite = replay.reset(agent, current.setdefault(agent, []), event)
                self._rewrites[id(event)] = rewrite
        replay.close()

    def list_agents(self) -> dict[str, str]:
        """agent id -> name: as it was created with, else the name its runs carry (the tree's
        and ``stats``' name for it), else the id itself."""
        agents: dict[str, str] = {}
        for event in self.events:
            agent_id, name = event.get("agent_id"), event.get("name")
            if event.get("event_type") == AGENT_CREATED and _is_text(agent_id):
                if not (_is_text(name) and name):
                    name = self._run_names.get(agent_id, agent_id)
                agents[agent_id] = name
        return agents

    def agent_ids(self, names_or_ids: Iterable[str]) -> list[str]:
        """Agent ids for a mix of names and ids; ``KeyError`` naming any that is unknown."""
        agents = self.list_agents()
        by_name = {name: agent_id for agent_id, name in agents.items()}
        result = []
        for item in names_or_ids:
            if item in agents:
                result.append(item)
            elif item in by_name:
                result.append(by_name[item])
            else:
                raise KeyError(item)
        return result

    def get_transcript(self, agent_id: str) -> list[dict[str, Any]]:
        """Every ``transcript_entry`` of ``agent_id``, in order."""
        return list(self._transcripts.get(agent_id, ()))

    def extract_dialog(self, agent_ids: Iterable[str]) -> list[dict[str, Any]]:
        """The distinct messages exchanged between the selected agents, each shown once: dicts
        of ``message_id``, ``agent_id``, ``speaker``, ``role``, ``content`` (as the agent sent
        it: a string, or a list of parts), ``text`` (the content as a person reads it,
        :func:`~agenttrace.formats.content.content_text`) and, for a tool result (role
        ``tool``), ``tool``: the name of the tool that returned it (``None`` when no call of
        the agent names it); the speaker of a tool result is the agent it was returned to.

        Entries are grouped by their ``substance`` (what they morally represent), so a prompt
        everyone heard or an utterance relayed to others appears once, with who said it. A
        ``transcript_reset`` of a selected agent is an item of role ``reset`` whose text says
        how many entries its history kept and dropped.
        """
        selected = set(agent_ids)
        names = self.list_agents()
        seen: set[str] = set()
        dialog: list[dict[str, Any]] = []
        tools: dict[tuple[str, str], str] = {}  # (agent, call id) -> the tool's name
        for entry in self.events:
            agent = entry.get("agent_id")
            kind = entry.get("event_type")
            if kind not in (TRANSCRIPT_ENTRY, TRANSCRIPT_RESET) or not _is_text(agent):
                continue
            # A tool result names its call by id only: the name is the call's, asked for by
            # the same agent earlier (ids are the model's, unique within one agent's calls).
            for call in _list(entry.get("tool_calls")):
                name = _tool_name(call)
                if isinstance(call, Mapping) and _is_text(call.get("id")) and name is not None:
                    tools[(agent, call["id"])] = name
            if agent not in selected:
                continue
            if kind == TRANSCRIPT_RESET:
                text = self._reset_text(entry)
                dialog.append(
                    {
                        "message_id": entry.get("message_id"),
                        "agent_id": agent,
                        "speaker": names.get(agent, agent),
                        "role": "reset",
                        "content": text,
                        "text": text,
                    }
                )
                continue
            reference = entry.get("substance") or entry.get("message_id")
            if not isinstance(reference, str) or reference in seen:
                continue
            seen.add(reference)
            original = self._by_id.get(reference, entry)
            content = original.get("content")
            if content is None:
                continue
            speaker = original.get("agent_id")
            role = (
                original.get("role", "text")
                if original.get("event_type") != PIECE_OF_TEXT
                else "text"
            )
            message = {
                "message_id": reference,
                "agent_id": speaker,
                "speaker": names.get(speaker, speaker) if isinstance(speaker, str) else None,
                "role": role,
                "content": content,
                "text": content_text(content),
            }
            if role == "tool":
                call = original.get("tool_call_id")
                message["tool"] = None
                if _is_text(speaker) and _is_text(call):
                    message["tool"] = tools.get((speaker, call))
            dialog.append(message)
        return dialog

    def extract_agent_perspective(self, agent_id: str) -> str:
        """What ``agent_id`` heard, did, said and received, one line each (content as
        :func:`~agenttrace.formats.content.content_text` renders it: text parts as their text,
        images and files as placeholders); a ``[Reset]`` line where its history was rewritten,
        the entries that follow it being what it was sent from there."""
        lines = []
        for entry in self._histories.get(agent_id, ()):
            if entry.get("event_type") == TRANSCRIPT_RESET:
                lines.append(f"[Reset]: {self._reset_text(entry)}")
                continue
            role, content = entry.get("role"), content_text(entry.get("content"))
            if role == "system":
                lines.append(f"[System]: {content}")
            elif role == "user":
                lines.append(f"[Heard]: {content}")
            elif role == "assistant" and entry.get("tool_calls"):
                calls = ", ".join(_call_text(call) for call in _list(entry["tool_calls"]))
                lines.append(f"[Action]: {f'{content} ' if content else ''}{calls}")
            elif role == "assistant":
                lines.append(f"[Said]: {content}")
            elif role == "tool":
                lines.append(f"[Received]: {content}")
        return "\n".join(lines)

    def _reset_text(self, reset: Mapping[str, Any]) -> str:
        """A ``transcript_reset`` as a person reads it: what stayed and what went."""
        rewrite = self._rewrites.get(id(reset))
        kept = _kept(reset)
        dropped = rewrite.dropped if rewrite is not None else 0
        reused = rewrite.moved if rewrite is not None else 0
        again = f", sent {reused} again" if reused else ""
        return (
            f"history rewritten: kept {_entries(kept)}{again}, dropped {dropped}, "
            "then what it was sent"
        )

    def build_causality_index(self) -> dict[str, str]:
        """message id -> the message it came from: a tool result's call, an entry's substance,
        a piece of text's or an agent's cause (the first one, when there are several)."""
        causality: dict[str, str] = {}
        call_messages: dict[str, str] = {}
        for event in self.events:
            message = event.get("message_id")
            if not isinstance(message, str):
                continue
            for call in _list(event.get("tool_calls")):
                if isinstance(call, Mapping) and isinstance(call.get("id"), str):
                    call_messages[call["id"]] = message
            parent: Any = None
            answers = event.get("tool_call_id")
            if answers and _is_text(answers):
                parent = call_messages.get(answers)
            if event.get("substance"):
                parent = event["substance"]
            cause = event.get("cause")
            if cause:
                parent = cause[0] if isinstance(cause, list) and cause else cause
            if isinstance(parent, str):
                causality[message] = parent
        return causality

    def trace_message_flow(self, message_id: str) -> list[dict[str, Any]]:
        """The chain of events that led to ``message_id``, oldest first."""
        causality = self.build_causality_index()
        chain: list[dict[str, Any]] = []
        current: str | None = message_id
        visited: set[str] = set()
        while current is not None and current not in visited:
            visited.add(current)
            event = self._by_id.get(current)
            if event is None:
                break
            chain.append(event)
            current = causality.get(current)
        return chain[::-1]

    def trace_content_references(self, content_msg_id: str) -> list[dict[str, Any]]:
        """Every transcript entry that represents the content of ``content_msg_id``."""
        return [
            e
            for e in self.events
            if e.get("event_type") == TRANSCRIPT_ENTRY and e.get("substance") == content_msg_id
        ]


def _read(source: str | Path) -> LoadedFile:
    """The session ``source`` names: a ``Path`` is a file; a ``str`` is what the command line
    makes of it (:func:`~agenttrace.formats.session.files.find_session`: a path, or an id in
    the sessions directory). An id names a session, not one of its files: both are read, as
    ``agenttrace dialog ID`` reads them (the stream's events, the session file's runs)."""
    path = source if isinstance(source, Path) else find_session(source)
    if isinstance(source, str) and path != Path(source):  # found by id
        return load_pair(path)[0]
    return read_any(path)


def _is_text(value: object) -> TypeGuard[str]:
    return isinstance(value, str)


def _kept(reset: Mapping[str, Any]) -> int:
    """A reset's ``kept`` (0 for anything a hand-built event holds there that is not a count)."""
    kept = reset.get("kept")
    return kept if type(kept) is int and kept > 0 else 0


def _entries(count: int) -> str:
    return f"{count} entr{'y' if count == 1 else 'ies'}"


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _function(call: Any) -> Mapping[str, Any]:
    """A tool call's ``function`` part (empty for whatever else a file holds there)."""
    function = call.get("function") if isinstance(call, Mapping) else None
    return function if isinstance(function, Mapping) else {}


def _tool_name(call: Any) -> str | None:
    """The name of the tool a call asks for, if it names one."""
    name = _function(call).get("name")
    return name if isinstance(name, str) and name else None


def _call_text(call: Any) -> str:
    """A tool call as ``name(arguments)``, whatever shape a file gave it (``?`` for a call
    that names no tool)."""
    arguments = _function(call).get("arguments")
    if not isinstance(arguments, str):  # a framework that hands them over parsed
        arguments = "" if arguments is None else compact_json(arguments)
    return f"{_tool_name(call) or '?'}({arguments})"


def format_dialog(dialog: list[dict[str, Any]]) -> str:
    """The dialog as text, one message per line: ``Jack: Hi, I'm Jack.`` (content as
    :func:`~agenttrace.formats.content.content_text` renders it). A tool result is labelled
    as what the tool returned, not as its agent speaking: ``(Host's tool ask_expert returned)
    Coffee.``"""
    lines = []
    for message in dialog:
        who = message.get("speaker") or "?"
        content = message.get("text")
        if not isinstance(content, str):  # a dialog built by hand, without the text
            content = content_text(message.get("content"))
        if message.get("role") == "system":
            lines.append(f"({who}'s instructions) {content}")
        elif message.get("role") == "reset":
            lines.append(f"({who}'s {content})")
        elif message.get("role") == "tool":
            tool = message.get("tool")
            what = f"tool {tool} returned" if isinstance(tool, str) and tool else "tool result"
            lines.append(f"({who}'s {what}) {content}")
        elif message.get("role") in ("text", "user"):
            lines.append(f"({who}) {content}")
        else:
            lines.append(f"{who}: {content}")
    return "\n".join(lines)
