"""A session as a STD-008 multi-agent session document: ``agenttrace export SESSION
--format std008``.

The root agent is the orchestrator; every agent a tool call ran is a participant, and each of
its runs a sub-session triggered by that tool call, which carries ``subagent_info``. Tools an
agent called go to the ``tool_calls`` of its own (sub-)session. A session without sub-agents is
the single-agent form of STD-008's section 8.1 (``collaboration.mode: "single"``).

What the session does not say comes from documented defaults (docs/how-to/exports.md, "STD-008"):

- ``agent_type``: the ``role`` given to ``@agenttrace.agent``, else ``architect`` for the
  root and ``developer`` for the others;
- ``tool_category``: the ``category`` given to ``@agenttrace.tool``, else ``interaction`` for
  a call that ran agents, ``perception`` for a name that reads (:data:`PERCEPTION_NAMES`) and
  ``action`` for the rest;
- a sub-session's task is the prompt the call gave (an argument named ``prompt``, ``task``,
  ...), else what its agent heard in that call; its priority ``medium``;
- ``messages`` follow from the runs: a ``task_assignment`` (``review_request`` for a
  reviewer) when a sub-agent starts, a ``task_completion`` (``review_result``) when it ends,
  an ``abort`` when it fails; an ``acknowledgment`` and ``task_progress`` for what a sub-agent
  told its parent agent while it worked (:meth:`_Exporter._reports`), and a ``feedback``
  instead of the assignment when a parent agent's words to a sub-agent reply to its earlier
  answer (:meth:`_Exporter._answered`);
- a reviewer's verdict is its answer's first word (``approved``, ``changes_requested``,
  ``rejected``) or the ``verdict`` of an answer that is a JSON object.

Ids are the session's own: agent ids, a sub-session's txn id, a tool call's
``gen_ai.tool.call.id`` (``tool-<path label>`` where there is none or it repeats). What an
import of a document recorded on its spans (ids, types, categories, task ids, the counts of
``subagent_info``; the title, the collaboration, the agents' identifiers, the summary, every
message and the keys it maps nowhere else) is written back as it came, so import and export give
the same document (docs/std008.md).
"""

from __future__ import annotations

import bisect
import json
import os
import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import msgspec

from agenttrace import semconv as sc
from agenttrace._internal.times import iso_ms, ts_nanoseconds
from agenttrace.formats.content import content_text
from agenttrace.formats.session.files import LoadedFile, SessionFileError
from agenttrace.formats.session.optree import children, finite_number, hosted_sessions, session_ops
from agenttrace.formats.std008 import schema as std008_schema
from agenttrace.model.resets import as_it_happened

AGENT_TYPES = ("architect", "developer", "reviewer")
"""STD-008's agent types (``AgentIdentifier.agent_type``)."""
VERDICTS = ("approved", "changes_requested", "rejected")
"""A reviewer's verdicts (``ReviewerOutput.verdict``)."""
DEFAULT_PRIORITY = "medium"
PERCEPTION_NAMES = re.compile(
    r"(^|[_\-\s.])(read|grep|glob|search|find|list|ls|view|look|fetch|get|open|cat|query|"
    r"inspect|browse|scan)([_\-\s.]|$)",
    re.IGNORECASE,
)
"""A tool whose name has one of these words reads rather than acts: ``perception``."""
_TASK_ARGUMENTS = ("prompt", "task", "description", "instructions", "query", "message", "input")
"""Arguments of a call that ran a sub-agent, in the order they are taken as its task."""
_VERDICT_WORD = re.compile(r"^\W*(approved|changes[ _-]requested|rejected)\b", re.IGNORECASE)
_TITLE_CHARS = 80
_MULTI_AGENT_SUMMARY = ("agents", "tasks", "review_iterations")
"""What the summary of a multi-agent document must have (section 3.6)."""


def std008_document(loaded: LoadedFile) -> dict[str, Any]:
    """``loaded`` as a STD-008 document (a JSON object), as it is: an export redacts it first
    (``agenttrace.views.exports.to_std008``). :class:`SessionFileError` for a file with no
    opTree (an event stream alone)."""
    if not any(isinstance(run, Mapping) for run in loaded.runs):
        raise SessionFileError(f"{loaded.path}: no opTree in it, nothing to export")
    return _Exporter(loaded.runs, loaded.events, loaded.session_id).document()


def file_name(document: Mapping[str, Any], directory: Path) -> str:
    """The name STD-008's section 2.1 gives ``document`` in ``directory``:
    ``{date}-{sequence}-{task-summary}-multi.json`` (``.json`` for a single-agent session),
    the sequence one past the highest of that date already there."""
    created = iso_ms(document.get("created_at"))
    date = _iso(created)[:10] if created is not None else "0000-00-00"
    prompt = document.get("user_prompt") or document.get("task_title")
    summary = slug(prompt if isinstance(prompt, str) else "") or "session"
    multi = _dig(document, "collaboration", "mode") == "multi_agent"
    suffix = "-multi.json" if multi else ".json"
    taken = re.compile(rf"^{re.escape(date)}-(\d{{3,}})-")
    try:
        names = os.listdir(directory)
    except OSError:
        names = []
    highest = max((int(m.group(1)) for n in names if (m := taken.match(n))), default=0)
    return f"{date}-{highest + 1:03d}-{summary}{suffix}"


def slug(text: str, words: int = 5, limit: int = 40) -> str:
    """A task summary for a file name: the first ``words`` words of ``text``, ASCII letters
    and digits only, lower case, joined by ``-``, at most ``limit`` characters."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    parts = re.findall(r"[a-z0-9]+", ascii_text.lower())[:words]
    result = ""
    for part in parts:
        candidate = f"{result}-{part}" if result else part
        if len(candidate) > limit:
            break
        result = candidate
    return result or (parts[0][:limit] if parts else "")


def write_document(document: Mapping[str, Any], output: Path) -> Path:
    """Write a STD-008 ``document`` to ``output``: a file, or a directory in which it gets its
    section 2.1 name (never replacing a file there). Returns the file written."""
    text = json.dumps(document, ensure_ascii=False, indent=2) + "\n"
    data = text.encode("utf-8", "backslashreplace")
    if not output.is_dir():
        output.write_bytes(data)
        return output
    for _ in range(1000):  # another writer may take a sequence number first
        path = output / file_name(document, output)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        return path
    raise FileExistsError(f"{output}: no free sequence number for {path.name}")


# --- the walk ----------------------------------------------------------------------------------


@dataclass
class _Run:
    """One agent run (a SessionNode) as the document sees it."""

    node: Mapping[str, Any]
    number: int
    """Which run of the session it belongs to (1-based): labels restart with each run."""
    parent: _Run | None
    trigger: Mapping[str, Any] | None
    """The op that ran it (None for a root run)."""
    spans: set[str] = field(default_factory=set)
    """The span ids of the run, its turns and its ops (not those of runs inside it)."""
    tools: list[Mapping[str, Any]] = field(default_factory=list)
    children: list[_Run] = field(default_factory=list)
    key: str = ""
    """Its id in the document: its txn id, told apart if a damaged file repeats one."""

    @property
    def agent_id(self) -> str:
        return _text(self.node.get("agentId")) or "agent"

    @property
    def txn_id(self) -> str:
        return _text(self.node.get("txnId")) or _text(self.node.get("id")) or self.agent_id

    def attribute(self, key: str) -> Any:
        return _span_attribute(self.node, key)

    def subtree(self) -> Iterator[_Run]:
        yield self
        for child in self.children:
            yield from child.subtree()


class _Exporter:
    def __init__(
        self,
        runs: list[dict[str, Any]],
        events: list[dict[str, Any]],
        session_id: str | None,
    ) -> None:
        self.events = events
        self.roots = [
            self._walk(run, number, None, None)
            for number, run in enumerate(runs, 1)
            if isinstance(run, Mapping)
        ]
        first = self.roots[0].node if self.roots else {}
        self.session_id = (
            session_id or _text(first.get("sessionId")) or _text(first.get("id")) or "session"
        )
        self.orchestrator = self.roots[0].agent_id if self.roots else "agent"
        self.subs = [
            child for root in self.roots for run in root.subtree() for child in run.children
        ]
        self.subs.sort(key=lambda run: _ms(run.node.get("startedAt")) or 0)
        self.sub_spans = {span for sub in self.subs for span in sub.spans}
        """The spans of every sub-agent run: what an agent hears there, a sub-agent told it."""
        self.names: dict[str, str] = {}
        self.entries: dict[str, list[dict[str, Any]]] = {}
        """Each agent's transcript entries, in order (found once: a view per sub-agent run
        would otherwise cost every event each time), as they happened (no restated context)."""
        self.order: dict[int, int] = {}
        """id(entry) -> where it is in the stream (of the events as they happened)."""
        self.in_span: dict[str, list[dict[str, Any]]] = {}
        """The transcript entries logged in each span, in order."""
        self.resets: dict[str, list[int]] = {}
        """Each agent's ``transcript_reset`` events, as places in the stream."""
        self.asked: dict[str, list[int]] = {}
        """Each agent's user entries other than a sub-agent's reports, as places in the stream."""
        for place, event in enumerate(as_it_happened(events)):
            kind, agent = event.get("event_type"), event.get("agent_id")
            if kind == "agent_created" and _text(event.get("name")):
                self.names.setdefault(str(agent), str(event["name"]))
            elif kind == "transcript_entry" and isinstance(agent, str):
                self.entries.setdefault(agent, []).append(event)
                self.order[id(event)] = place
                span = _text(event.get("span_id"))
                if span is not None:
                    self.in_span.setdefault(span, []).append(event)
                if event.get("role") == "user" and span not in self.sub_spans:
                    self.asked.setdefault(agent, []).append(place)
            elif kind == "transcript_reset" and isinstance(agent, str):
                self.resets.setdefault(agent, []).append(place)
        self.previous: dict[int, _Run] = {}
        """id(sub-agent run) -> the run of the same agent before it."""
        latest: dict[str, _Run] = {}
        for sub in self.subs:
            if sub.agent_id in latest:
                self.previous[id(sub)] = latest[sub.agent_id]
            latest[sub.agent_id] = sub
        self.call_ids: dict[int, str] = {}
        self._number_calls()
        taken = {self.session_id}
        for root in self.roots:
            for run in root.subtree():
                run.key = unique(run.txn_id, taken)

    def _walk(
        self,
        node: Mapping[str, Any],
        number: int,
        parent: _Run | None,
        trigger: Mapping[str, Any] | None,
    ) -> _Run:
        run = _Run(node, number, parent, trigger)
        run.spans.update(s for s in (_text(node.get("spanId")), _span_id(node)) if s is not None)
        for turn in children(node, "turns"):
            run.spans.update(s for s in (_text(turn.get("id")), _span_id(turn)) if s is not None)
            for op in children(turn, "ops"):
                run.spans.update(s for s in (_text(op.get("opId")), _span_id(op)) if s is not None)
                # An op that ran agents is a tool call, whatever a damaged file calls it.
                if op.get("kind") in (sc.KIND_TOOL, sc.KIND_SESSION) or any(hosted_sessions(op)):
                    run.tools.append(op)
                for child in hosted_sessions(op):
                    run.children.append(self._walk(child, number, run, op))
        return run

    def _number_calls(self) -> None:
        """A call id for every tool op: its ``gen_ai.tool.call.id`` where that is unique in
        the document, else one made from its run and path label."""
        taken: set[str] = set()
        for root in self.roots:
            for run in root.subtree():
                for op in run.tools:
                    call_id = _text(_span_attribute(op, sc.GEN_AI_TOOL_CALL_ID))
                    if call_id is None or call_id in taken:
                        label = _text(op.get("path")) or str(len(taken) + 1)
                        call_id = (
                            f"tool-{label}" if run.number == 1 else f"tool-r{run.number}-{label}"
                        )
                        while call_id in taken:
                            call_id += "'"
                    taken.add(call_id)
                    self.call_ids[id(op)] = call_id

    # -- the document ---------------------------------------------------------------------------

    def document(self) -> dict[str, Any]:
        first = self.roots[0].node if self.roots else {}
        last = self.roots[-1].node if self.roots else {}
        document: dict[str, Any] = {"session_id": self.session_id}
        prompt = self._user_prompt()
        title = self.roots[0].attribute(sc.TASK_TITLE) if self.roots else None
        if not isinstance(title, str):  # an imported document's own, even empty, stays
            title = None
        if title is None and prompt is not None:
            title = _title(prompt)
        if title is not None:
            document["task_title"] = title
        if prompt is not None:
            document["user_prompt"] = prompt
        created = _ms(first.get("startedAt"))
        if created is not None:
            document["created_at"] = _iso(created)
        completed = _ms(last.get("endedAt"))
        if completed is not None:
            document["completed_at"] = _iso(completed)
        document["status"] = _session_status(last)
        model = self._model()
        if model is not None:
            document["agent"] = {"model_id": model}
        multi = bool(self.subs)
        given = self._kept_collaboration()
        participants: list[dict[str, Any]] = [] if given is None else list(given["participants"])
        seen: set[str] = {self.orchestrator, *(p["agent_id"] for p in participants)}
        # The root agent of a later run is the orchestrator again (a resume); in a file whose
        # runs have different roots, those others take part too.
        for sub in [*self.roots[1:], *self.subs]:
            if sub.agent_id not in seen:
                seen.add(sub.agent_id)
                participants.append(self._identifier(sub))
        outcomes = {id(sub): self._outcome(sub) for sub in self.subs}
        kept = self._kept_messages() if self.imported else None
        messages = kept if kept is not None else self._messages(outcomes)
        # An agent that only sends or receives messages (a document's) takes part too.
        for message in messages:
            for key in ("from_agent", "to_agent"):
                identifier = message[key]
                if identifier["agent_id"] not in seen:
                    seen.add(identifier["agent_id"])
                    participants.append(identifier)
        document["collaboration"] = {
            "mode": "multi_agent" if multi else "single",
            "pattern": "master_worker" if given is None else given["pattern"],
            "orchestrator": (
                given["orchestrator"]
                if given is not None
                else self._identifier(self.roots[0])
                if self.roots
                else _unknown()
            ),
            "participants": participants,
        }
        document["tool_calls"] = [
            self._tool_call(op, root) for root in self.roots for op in root.tools
        ]
        listed = self.subs
        if self.imported:  # in the document's order, which need not be the order they started
            listed = sorted(self.subs, key=lambda sub: _count(sub.attribute(sc.IMPORT_INDEX)) or 0)
        document["sub_sessions"] = [self._sub_session(sub, outcomes[id(sub)]) for sub in listed]
        document["messages"] = messages
        summary = self._kept_summary() if self.imported else None
        document["summary"] = summary if summary is not None else self._summary(outcomes)
        if self.roots:
            document = self._without_absent(document, self.roots[0].node)
        unread = self._unread(self.roots[0].node) if self.roots else None
        if unread is not None and isinstance(unread.get("status", ""), str):
            return _with(document, unread, None, ("status", "agent"))
        return document

    @property
    def imported(self) -> bool:
        """Whether the session is a STD-008 document read: its messages and summary are the
        document's, kept as they came."""
        resource = self.roots[0].node.get("resource") if self.roots else None
        return bool(_dig(resource, "attributes", sc.IMPORT_FORMAT) == "std008")

    def _kept_messages(self) -> list[dict[str, Any]] | None:
        """The messages of the document the session was read from, in its order (None if one
        of them no longer reads as a message: each string is capped on the way out)."""
        kept: list[tuple[int, int, dict[str, Any]]] = []
        for root in self.roots:
            for run in root.subtree():
                span = run.node.get("span")
                for event in children(span if isinstance(span, Mapping) else {}, "events"):
                    if event.get("name") != sc.EVENT_IMPORTED_MESSAGE:
                        continue
                    attributes = event.get("attributes")
                    if not isinstance(attributes, Mapping):
                        return None
                    message = _json_object(_text(attributes.get(sc.IMPORT_MESSAGE)))
                    if message is None:
                        return None
                    payload = attributes.get(sc.IMPORT_MESSAGE_PAYLOAD)
                    message["payload"] = _json_value(payload) if isinstance(payload, str) else None
                    if not _conforms(message, std008_schema.AgentMessage):
                        return None
                    index = _count(attributes.get(sc.IMPORT_MESSAGE_INDEX))
                    kept.append((index if index is not None else len(kept), len(kept), message))
        kept.sort(key=lambda item: (item[0], item[1]))
        return [message for _, _, message in kept]

    def _unread(self, node: Mapping[str, Any]) -> dict[str, Any] | None:
        """What the imported document said of ``node`` (the root, a call, a sub-agent run)
        that the export does not make again: its keys as they came (empty if it had none);
        None if the session is no imported document, or they no longer read as an object
        (cut by a cap)."""
        if not self.imported:
            return None
        text = _span_attribute(node, sc.IMPORT_UNREAD)
        return {} if text is None else _json_object(_text(text))

    def _without_absent(self, part: dict[str, Any], node: Mapping[str, Any]) -> dict[str, Any]:
        """``part`` without the keys the imported document did not have there."""
        absent = _span_attribute(node, sc.IMPORT_ABSENT) if self.imported else None
        if not isinstance(absent, list):
            return part
        return {key: value for key, value in part.items() if key not in absent}

    def _given_subagent_info(self, op: Mapping[str, Any]) -> dict[str, Any] | None:
        """The ``subagent_info`` an imported document gave ``op``, but its links."""
        if not self.imported:
            return None
        given = _json_object(_text(_span_attribute(op, sc.IMPORT_SUBAGENT_INFO)))
        if given is None or not _conforms(given, std008_schema.SubagentInfo):
            return None
        return given

    def _kept_collaboration(self) -> dict[str, Any] | None:
        """The collaboration of the document the session was read from, if it still reads as
        one and names the same orchestrator (else the export makes one)."""
        if not self.imported:
            return None
        text = _text(self.roots[0].attribute(sc.IMPORT_COLLABORATION))
        kept = _json_object(text)
        if kept is None or not _conforms(kept, std008_schema.Collaboration):
            return None
        return kept if kept["orchestrator"]["agent_id"] == self.roots[0].agent_id else None

    def _kept_summary(self) -> dict[str, Any] | None:
        """The summary of the document the session was read from, if it still reads as one
        (with the figures a multi-agent one needs, when the export has sub-sessions)."""
        text = _text(self.roots[0].attribute(sc.IMPORT_SUMMARY)) if self.roots else None
        summary = _json_object(text)
        if summary is None or not _conforms(summary, std008_schema.Summary):
            return None
        if self.subs and not set(_MULTI_AGENT_SUMMARY) <= set(summary):
            return None  # a document that called itself single-agent, yet had sub-sessions
        return summary

    def _identifier(self, run: _Run) -> dict[str, Any]:
        kept = _json_object(_text(run.attribute(sc.IMPORT_AGENT))) if self.imported else None
        if (
            kept is not None
            and _conforms(kept, std008_schema.AgentIdentifier)
            and kept["agent_id"] == run.agent_id
        ):
            return kept  # as the imported document identified it
        identifier: dict[str, Any] = {"agent_id": run.agent_id, "agent_type": self._type(run)}
        name = _text(run.node.get("agentName")) or self.names.get(run.agent_id)
        if name and name != run.agent_id:
            identifier["name"] = name
        return identifier

    def _type(self, run: _Run) -> str:
        role = _text(run.attribute(sc.AGENT_ROLE))
        if role in AGENT_TYPES:
            return role
        return "architect" if run.parent is None else "developer"

    def _user_prompt(self) -> str | None:
        """The first thing the root agent heard from its user (an entry no other agent said)."""
        for event in self.entries.get(self.orchestrator, ()):
            if event.get("role") == "user" and not event.get("substance"):
                text = content_text(event.get("content"))
                if text:
                    return text
        return None

    def _model(self) -> str | None:
        if self.roots:
            attributes = self.roots[0].node.get("attributes")
            if isinstance(attributes, Mapping) and _text(attributes.get(sc.AGENT_MODEL)):
                return str(attributes[sc.AGENT_MODEL])
        for event in self.events:
            if event.get("event_type") == "agent_created" and event.get("agent_id") == (
                self.orchestrator
            ):
                return _text(event.get("language_model"))
        return None

    # -- tool calls -----------------------------------------------------------------------------

    def _tool_call(self, op: Mapping[str, Any], run: _Run) -> dict[str, Any]:
        call: dict[str, Any] = {
            "call_id": self.call_ids[id(op)],
            "tool_name": _text(op.get("name")) or "tool",
            "tool_category": _category(op),
        }
        started = _ms(op.get("startedAt"))
        if started is not None:
            call["started_at"] = _iso(started)
        ended = _ms(op.get("endedAt"))
        if ended is not None:
            call["ended_at"] = _iso(ended)
        duration = _duration(op)
        if duration is not None and ended is not None:
            call["duration_ms"] = duration
        call["input"] = {"params": _params(op)}
        output: dict[str, Any] = {"status": _call_status(op)}
        result = self._result(op, run)
        if result is not None:
            output["result"] = result
        if op.get("status") == sc.STATUS_FAILED and _text(op.get("error")):
            output["error"] = op["error"]
        call["output"] = output
        hosted = [child for child in run.children if child.trigger is op]
        if hosted:
            call["subagent_info"] = self._subagent_info(op, hosted)
        call = self._without_absent(call, op)
        return _with(call, self._unread(op), std008_schema.ToolCall, ("input", "output"))

    def _result(self, op: Mapping[str, Any], run: _Run) -> str | None:
        """What the call gave back as recorded; for a tool that streamed its results (no single
        return value), the results its agent received in that call, one a line."""
        response = op.get("response")
        if isinstance(response, Mapping) and isinstance(response.get("payload"), str):
            return str(response["payload"])
        call_id = _text(_span_attribute(op, sc.GEN_AI_TOOL_CALL_ID))
        span = _text(op.get("opId")) or _span_id(op)
        if call_id is None or span is None:
            return None
        received = [
            content_text(event.get("content"))
            for event in self.entries.get(run.agent_id, ())
            if event.get("role") == "tool"
            and event.get("tool_call_id") == call_id
            and event.get("span_id") == span
        ]
        return "\n".join(received) if received else None

    def _subagent_info(self, op: Mapping[str, Any], hosted: list[_Run]) -> dict[str, Any]:
        info: dict[str, Any] = {
            "subagent_type": self._type(hosted[0]),
            "sub_session_id": hosted[0].key,
        }
        if len(hosted) > 1:  # one call that ran several agents (the cafe's discuss)
            info["sub_session_ids"] = [run.key for run in hosted]
        given = self._given_subagent_info(op)
        if given is not None:  # an imported document's: its type and counts as it gave them
            links: dict[str, Any] = {
                key: info[key] for key in ("sub_session_id", "sub_session_ids") if key in info
            }
            return {**given, **links}
        uses = _count(_span_attribute(op, sc.SUBAGENT_TOOL_USES))
        if uses is None:
            uses = sum(len(run.tools) for child in hosted for run in child.subtree())
        info["tool_uses"] = uses
        tokens = _count(_span_attribute(op, sc.SUBAGENT_TOKENS_USED))
        if tokens is None:
            tokens = _tokens(run for child in hosted for run in child.subtree())
        if tokens is not None:
            info["tokens_used"] = tokens
        return info

    # -- sub-sessions -------------------------------------------------------------------------

    def _parent_session_id(self, run: _Run) -> str:
        parent = run.parent
        return self.session_id if parent is None or parent.parent is None else parent.key

    def _task_id(self, run: _Run) -> str:
        recorded = _text(run.attribute(sc.TASK_ID))
        if recorded is not None:
            return recorded
        prefix = "review" if self._type(run) == "reviewer" else "task"
        return f"{prefix}-{run.key}"

    def _outcome(self, run: _Run) -> _Outcome:
        answer = self._answer(run)
        status = _session_status(run.node)
        outcome = _Outcome(status=status, answer=answer)
        if self._type(run) == "reviewer" and answer is not None:
            outcome.verdict = _verdict(answer)
        return outcome

    def _sub_session(self, run: _Run, outcome: _Outcome) -> dict[str, Any]:
        sub: dict[str, Any] = {
            "sub_session_id": run.key,
            "parent_session_id": self._parent_session_id(run),
            "agent": self._identifier(run),
            "triggered_by_call_id": self.call_ids.get(id(run.trigger), "")
            if run.trigger is not None
            else "",
            "task": {
                "task_id": self._task_id(run),
                "description": self._task(run),
                "priority": _text(run.attribute(sc.TASK_PRIORITY)) or DEFAULT_PRIORITY,
            },
        }
        started = _ms(run.node.get("startedAt"))
        if started is not None:
            sub["started_at"] = _iso(started)
        ended = _ms(run.node.get("endedAt"))
        if ended is not None:
            sub["completed_at"] = _iso(ended)
        sub["status"] = outcome.status
        duration = _duration(run.node)
        if duration is not None and ended is not None:
            sub["duration_ms"] = duration
        sub["tool_calls"] = [self._tool_call(op, run) for op in run.tools]
        output = self._output(run, outcome)
        if output is not None:
            sub["output"] = output
        sub = self._without_absent(sub, run.node)
        return _with(sub, self._unread(run.node), std008_schema.SubAgentSession, ("output",))

    def _task(self, run: _Run) -> str:
        """What the sub-agent was asked: the call's prompt argument, else the first thing it
        heard in that call, else the call's arguments as recorded."""
        trigger = run.trigger or {}
        arguments = _params(trigger)
        for key in _TASK_ARGUMENTS:
            if isinstance(arguments.get(key), str) and arguments[key]:
                return str(arguments[key])
        span = _text(trigger.get("opId")) or _span_id(trigger)
        for event in self.entries.get(run.agent_id, ()):
            if span is not None and event.get("role") == "user" and event.get("span_id") == span:
                return content_text(event.get("content"))
        request = trigger.get("request")
        if isinstance(request, Mapping) and isinstance(request.get("payload"), str):
            return str(request["payload"])
        return ""

    def _answer(self, run: _Run) -> str | None:
        """The run's last words: its agent's last assistant entry with content, logged in the
        run's own spans (or, in a file whose events name no span, during the run); for an
        agent that said none, what the call that ran it returned."""
        answer: str | None = None
        start = _ms(run.node.get("startedAt"))
        end = _ms(run.node.get("endedAt"))
        for event in self.entries.get(run.agent_id, ()):
            if event.get("role") != "assistant":
                continue
            span = event.get("span_id")
            if span is not None:
                inside = span in run.spans
            else:
                when = ts_nanoseconds(str(event.get("ts")))
                inside = (
                    when is not None
                    and start is not None
                    and start <= when // 1_000_000 <= (end if end is not None else when)
                )
            text = content_text(event.get("content")) if inside else ""
            if text:
                answer = text
        return answer if answer is not None else self._returned(run)

    def _returned(self, run: _Run) -> str | None:
        """What the call that ran ``run``, and it alone, gave back: the answer of an agent
        that said nothing through a model (a plain function)."""
        trigger, parent = run.trigger, run.parent
        if trigger is None or parent is None:
            return None
        if sum(child.trigger is trigger for child in parent.children) != 1:
            return None
        response = trigger.get("response")
        if isinstance(response, Mapping) and isinstance(response.get("payload"), str):
            return str(response["payload"]) or None
        return None

    def _output(self, run: _Run, outcome: _Outcome) -> dict[str, Any] | None:
        """A developer's ``DeveloperOutput`` (its answer as the summary; agenttrace sees no
        files, so ``changes`` lists none unless the answer is such an object itself); a
        reviewer's ``ReviewerOutput`` only when its answer is one (the verification it did
        is not otherwise known). None while the run goes on."""
        if outcome.status == "in_progress":
            return None
        structured = _json_object(outcome.answer)
        if self._type(run) == "reviewer":
            if structured is not None and {"verdict", "findings", "verification"} <= set(
                structured
            ):
                return {
                    "review_id": self._task_id(run),
                    "task_id": self._reviewed_task(run),
                    **structured,
                }
            return None
        if structured is not None and {"changes", "summary"} <= set(structured):
            return {"task_id": self._task_id(run), "status": _task_status(run), **structured}
        failed = outcome.status == "failed"
        summary = (_text(run.node.get("error")) or "failed") if failed else outcome.answer
        return {
            "task_id": self._task_id(run),
            "status": "failed" if failed else "completed",
            "changes": {"files_created": [], "files_modified": [], "files_deleted": []},
            "summary": summary or "",
        }

    def _reviewed_task(self, run: _Run) -> str:
        """The task a reviewer reviews: the last non-reviewer sub-session of the same parent
        that ended before it started (its own task id if there is none)."""
        start = _ms(run.node.get("startedAt")) or 0
        reviewed = None
        for other in self.subs:
            ended = _ms(other.node.get("endedAt"))
            if (
                other.parent is run.parent
                and self._type(other) != "reviewer"
                and ended is not None
                and ended <= start
            ):
                reviewed = other
        return self._task_id(reviewed if reviewed is not None else run)

    # -- messages -----------------------------------------------------------------------------

    def _messages(self, outcomes: Mapping[int, _Outcome]) -> list[dict[str, Any]]:
        pending: list[tuple[int, int, dict[str, Any]]] = []
        replied: dict[int, int] = {}  # id(feedback) -> id(the run whose result it answers)
        results: dict[int, dict[str, Any]] = {}  # id(run) -> the message of its result
        for sub in self.subs:
            parent = self._identifier(sub.parent) if sub.parent else _unknown()
            agent = self._identifier(sub)
            task_id = self._task_id(sub)
            started = _ms(sub.node.get("startedAt"))
            if started is not None:
                message, answered = self._start(sub, outcomes, parent, agent)
                if answered is not None:
                    replied[id(message)] = id(answered)
                pending.append((started, len(pending), message))
            for when, kind, text in self._reports(sub):
                status = "accepted" if kind == "acknowledgment" else "in_progress"
                report = {"task_id": task_id, "status": status, "message": text}
                when = (started or 0) if when is None else when
                pending.append((when, len(pending), _message(kind, agent, parent, report, sub)))
            ended = _ms(sub.node.get("endedAt"))
            if ended is not None:
                message = self._result_message(sub, outcomes[id(sub)], agent, parent)
                results[id(sub)] = message
                pending.append((ended, len(pending), message))
        pending.sort(key=lambda item: (item[0], item[1]))
        ids = {id(item[2]): f"msg-{number:03d}" for number, item in enumerate(pending, 1)}
        messages = []
        for number, (when, _, message) in enumerate(pending, 1):
            numbered = {
                "message_id": ids[id(message)],
                "timestamp": _iso(when),
                "sequence_number": number,
                **message,
            }
            result = results.get(replied.get(id(message), 0))
            if result is not None:
                numbered["reply_to"] = ids[id(result)]
            messages.append(numbered)
        return messages

    def _start(
        self,
        run: _Run,
        outcomes: Mapping[int, _Outcome],
        parent: dict[str, Any],
        agent: dict[str, Any],
    ) -> tuple[dict[str, Any], _Run | None]:
        """The message that started ``run``: a ``feedback`` on the earlier run whose answer it
        replies to (returned too), else a ``review_request`` to a reviewer or a
        ``task_assignment``."""
        task_id = self._task_id(run)
        payload: dict[str, Any]
        if self._type(run) == "reviewer":
            payload = {
                "review_id": task_id,
                "task_id": self._reviewed_task(run),
                "description": self._task(run),
            }
            return _message("review_request", parent, agent, payload, run), None
        answered = self._answered(run, outcomes)
        if answered is not None:
            payload = {"task_id": task_id, "feedback": self._task(run)}
            return _message("feedback", parent, agent, payload, run), answered
        payload = {
            "task": {"task_id": task_id, "task_description": self._task(run)},
            "priority": _text(run.attribute(sc.TASK_PRIORITY)) or DEFAULT_PRIORITY,
        }
        return _message("task_assignment", parent, agent, payload, run), None

    def _result_message(
        self, run: _Run, outcome: _Outcome, agent: dict[str, Any], parent: dict[str, Any]
    ) -> dict[str, Any]:
        """The message that ``run`` ended with: an ``abort``, a ``review_result`` or a
        ``task_completion``."""
        task_id = self._task_id(run)
        payload: dict[str, Any]
        if outcome.status == "failed":
            payload = {"task_id": task_id, "status": "failed"}
            if _text(run.node.get("error")):
                payload["reason"] = run.node["error"]
            kind = "abort"
        elif self._type(run) == "reviewer":
            payload = {"review_id": task_id, "task_id": self._reviewed_task(run)}
            if outcome.verdict is not None:
                payload["verdict"] = outcome.verdict
            kind = "review_result"
        else:
            payload = {"task_id": task_id, "status": "completed"}
            kind = "task_completion"
        if outcome.answer is not None and outcome.status != "failed":
            payload["summary"] = outcome.answer
        return _message(kind, agent, parent, payload, run)

    def _reports(self, run: _Run) -> list[tuple[int | None, str, str]]:
        """What ``run``'s agent told its parent agent while it worked, each (when, message
        type, text): what the parent's transcript got inside the run's own spans, and what the
        call that ran it alone streamed to its agent before its last result (that one is the
        answer). The first is an ``acknowledgment`` if it came before the sub-agent said
        anything through a model in the run, the others ``task_progress``."""
        parent, trigger = run.parent, run.trigger
        if parent is None or trigger is None or parent.agent_id == run.agent_id:
            return []
        heard = self._logged(run.spans, parent.agent_id)
        call_id = _text(_span_attribute(trigger, sc.GEN_AI_TOOL_CALL_ID))
        call_span = _text(trigger.get("opId")) or _span_id(trigger)
        if call_id is not None and call_span is not None:
            streamed = [
                entry
                for entry in self._logged({call_span}, parent.agent_id, "tool")
                if entry.get("tool_call_id") == call_id
            ]
            if sum(child.trigger is trigger for child in parent.children) == 1:
                heard.extend(streamed[:-1])
                heard.sort(key=lambda entry: self.order[id(entry)])
        said = self._logged(run.spans, run.agent_id, "assistant")
        first_said = self.order[id(said[0])] if said else None
        reports: list[tuple[int | None, str, str]] = []
        for entry in heard:
            text = content_text(entry.get("content"))
            if not text:
                continue
            acknowledges = not reports and (
                first_said is None or self.order[id(entry)] < first_said
            )
            when = ts_nanoseconds(str(entry.get("ts")))
            reports.append(
                (
                    None if when is None else when // 1_000_000,
                    "acknowledgment" if acknowledges else "task_progress",
                    text,
                )
            )
        return reports

    def _answered(self, run: _Run, outcomes: Mapping[int, _Outcome]) -> _Run | None:
        """The earlier run of the same agent whose answer ``run`` replies to: the same parent
        agent ran both, what the sub-agent hears first in ``run`` (in its spans or the call's)
        continues its conversation after that answer (no ``transcript_reset`` in between), and
        nobody spoke to the parent agent in between (a user entry of its own other than a
        sub-agent's report: then it answers that). None if ``run`` starts afresh."""
        previous = self.previous.get(id(run))
        if (
            previous is None
            or run.parent is None
            or previous.parent is None
            or previous.parent.agent_id != run.parent.agent_id
            or outcomes[id(previous)].status != "success"
        ):
            return None
        answers = [
            entry
            for entry in self._logged(previous.spans, run.agent_id, "assistant")
            if content_text(entry.get("content"))
        ]
        call_span = _text((run.trigger or {}).get("opId")) or _span_id(run.trigger or {})
        spans = run.spans if call_span is None else {*run.spans, call_span}
        heard = self._logged(spans, run.agent_id, "user")
        if not answers or not heard:
            return None
        answer, first = self.order[id(answers[-1])], self.order[id(heard[0])]
        if first < answer:
            return None
        for places in (self.resets.get(run.agent_id, []), self.asked.get(run.parent.agent_id, [])):
            # Something in between: the sub-agent's history was rewritten, or the parent agent
            # was asked something it then answered.
            if bisect.bisect_right(places, answer) < bisect.bisect_left(places, first):
                return None
        return previous

    def _logged(self, spans: Iterable[str], agent: str, role: str | None = None) -> list[Any]:
        """``agent``'s transcript entries (of ``role``) logged in ``spans``, in order."""
        found = [
            entry
            for span in spans
            for entry in self.in_span.get(span, ())
            if entry.get("agent_id") == agent and (role is None or entry.get("role") == role)
        ]
        found.sort(key=lambda entry: self.order[id(entry)])
        return found

    # -- the summary ------------------------------------------------------------------------------

    def _summary(self, outcomes: Mapping[int, _Outcome]) -> dict[str, Any]:
        total = sum(_duration(root.node) or 0.0 for root in self.roots)
        created: list[str] = []
        modified: list[str] = []
        for sub in self.subs:
            output = self._output(sub, outcomes[id(sub)])
            changes = output.get("changes") if output else None
            if isinstance(changes, Mapping):
                created.extend(_paths(changes.get("files_created")))
                modified.extend(_paths(changes.get("files_modified")))
        summary: dict[str, Any] = {
            "total_duration_ms": total,
            "tool_calls_count": sum(len(root.tools) for root in self.roots),
            "files_created": list(dict.fromkeys(created)),
            "files_modified": list(dict.fromkeys(modified)),
        }
        by_agent: dict[str, list[_Run]] = {}
        for sub in self.subs:
            by_agent.setdefault(sub.agent_id, []).append(sub)
        developers: list[dict[str, Any]] = []
        reviewers: list[dict[str, Any]] = []
        for runs in by_agent.values():
            row = self._agent_summary(runs)
            (reviewers if row["agent_type"] == "reviewer" else developers).append(row)
        agents: dict[str, Any] = {
            "architect": self._agent_summary(self.roots) if self.roots else _unknown_summary(),
            "developers": developers,
        }
        if reviewers:
            agents["reviewer"] = reviewers[-1]
        summary["agents"] = agents
        tasks = [sub for sub in self.subs if self._type(sub) != "reviewer"]
        summary["tasks"] = {
            "total": len(tasks),
            "completed": sum(outcomes[id(sub)].status == "success" for sub in tasks),
            "failed": sum(outcomes[id(sub)].status == "failed" for sub in tasks),
        }
        reviews = [sub for sub in self.subs if self._type(sub) == "reviewer"]
        summary["review_iterations"] = len(reviews)
        verdicts = [outcomes[id(sub)].verdict for sub in reviews if outcomes[id(sub)].verdict]
        if verdicts and verdicts[-1] in ("approved", "rejected"):
            summary["final_verdict"] = verdicts[-1]
        return summary

    def _agent_summary(self, runs: list[_Run]) -> dict[str, Any]:
        last = runs[-1]
        status = _session_status(last.node)
        return {
            "agent_id": last.agent_id,
            "agent_type": self._type(runs[0]),
            "tool_calls_count": sum(len(run.tools) for run in runs),
            "duration_ms": sum(_duration(run.node) or 0.0 for run in runs),
            "status": {"success": "completed", "failed": "failed"}.get(status, "in_progress"),
        }


@dataclass
class _Outcome:
    status: str
    answer: str | None
    verdict: str | None = None


def _message(
    kind: str, sender: dict[str, Any], receiver: dict[str, Any], payload: Any, run: _Run
) -> dict[str, Any]:
    return {
        "from_agent": sender,
        "to_agent": receiver,
        "message_type": kind,
        "payload": payload,
        "correlation_id": run.key,
    }


# --- small readers ------------------------------------------------------------------------------


def unique(wanted: str, taken: set[str]) -> str:
    """``wanted``, or ``wanted-2``, ``wanted-3``, ... if that is taken; added to ``taken``."""
    key, number = wanted, 1
    while key in taken:
        number += 1
        key = f"{wanted}-{number}"
    taken.add(key)
    return key


def _unknown() -> dict[str, Any]:
    return {"agent_id": "agent", "agent_type": "architect"}


def _unknown_summary() -> dict[str, Any]:
    return {
        **_unknown(),
        "tool_calls_count": 0,
        "duration_ms": 0,
        "status": "in_progress",
    }


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _dig(value: Any, *keys: str) -> Any:
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _span_id(node: Mapping[str, Any]) -> str | None:
    return _text(_dig(node, "span", "spanId"))


def _span_attribute(node: Mapping[str, Any], key: str) -> Any:
    attributes = _dig(node, "span", "attributes")
    return attributes.get(key) if isinstance(attributes, Mapping) else None


def _ms(value: Any) -> int | None:
    """A time in ms as a file records it (an integer in range), else None."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**53:
        return None
    return value


def _duration(node: Mapping[str, Any]) -> float | None:
    """A node's latency as recorded (an int stays an int), if it is a duration: a finite
    number, not negative (a damaged file may hold anything)."""
    value = node.get("latencyMs")
    number = finite_number(value)
    return value if number is not None and number >= 0 else None


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _iso(ms: int) -> str:
    """``ms`` since the epoch as ISO 8601 UTC with milliseconds (``2026-01-26T10:00:05.000Z``)."""
    try:
        moment = _EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        moment = datetime.max.replace(tzinfo=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _session_status(node: Mapping[str, Any]) -> str:
    if _ms(node.get("endedAt")) is None:
        return "in_progress"
    return "success" if node.get("success") is True else "failed"


def _task_status(run: _Run) -> str:
    return {"success": "completed", "failed": "failed"}.get(_session_status(run.node), "partial")


def _call_status(op: Mapping[str, Any]) -> str:
    status = op.get("status")
    if status == sc.STATUS_OK:
        return "success"
    return "error" if status == sc.STATUS_FAILED else "in_progress"


def _category(op: Mapping[str, Any]) -> str:
    recorded = _text(_span_attribute(op, sc.TOOL_CATEGORY))
    if recorded is not None:
        return recorded
    if op.get("kind") == sc.KIND_SESSION:
        return "interaction"
    name = _text(op.get("name")) or ""
    return "perception" if PERCEPTION_NAMES.search(name) else "action"


def _params(op: Mapping[str, Any]) -> dict[str, Any]:
    """A call's arguments as recorded: the object they were, or ``{"arguments": text}`` when
    the record is not one (a value capped to fit, an argument list that was not an object)."""
    request = op.get("request")
    payload = request.get("payload") if isinstance(request, Mapping) else None
    if not isinstance(payload, str):
        return {}
    parsed = _json_object(payload)
    return parsed if parsed is not None else {"arguments": payload}


def _with(
    part: dict[str, Any],
    unread: Mapping[str, Any] | None,
    kind: type | None,
    made: tuple[str, ...],
) -> dict[str, Any]:
    """``part`` of the document with what the imported document said of it put back
    (``unread``; None: nothing to put back), without the keys in ``made`` that the export made
    where the document had none; if it is still a ``kind`` then."""
    if unread is None:
        return part
    merged = {**{key: value for key, value in part.items() if key not in made}, **unread}
    return merged if kind is None or _conforms(merged, kind) else part


def _json_value(text: str) -> Any:
    """``text`` as the JSON value it holds, or as itself if it holds none (capped on the way
    out: a payload cut short is its text)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def _conforms(value: Any, kind: type) -> bool:
    """Whether ``value`` (decoded JSON) is a ``kind`` of the STD-008 structs."""
    try:
        msgspec.convert(value, kind)
    except (msgspec.ValidationError, UnicodeEncodeError):
        return False
    return True


def _json_object(text: str | None) -> dict[str, Any] | None:
    if not text or not text.lstrip().startswith("{"):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _tokens(runs: Iterable[_Run]) -> int | None:
    """Tokens in and out of every LLM attempt of ``runs`` (None if none reported any)."""
    total: int | None = None
    for run in runs:
        for op in session_ops(run.node):
            for entry in children(op, "accounting"):
                tokens = entry.get("tokens")
                if entry.get("type") != "llm" or not isinstance(tokens, Mapping):
                    continue
                for key in ("inputTokens", "outputTokens"):
                    count = _count(tokens.get(key))
                    if count is not None:
                        total = (total or 0) + count
    return total


def _verdict(answer: str) -> str | None:
    structured = _json_object(answer)
    if structured is not None:
        verdict = structured.get("verdict")
        return verdict if verdict in VERDICTS else None
    match = _VERDICT_WORD.match(answer)
    if match is None:
        return None
    return re.sub(r"[ _-]", "_", match.group(1).lower())


def _title(prompt: str) -> str:
    line = prompt.strip().splitlines()[0] if prompt.strip() else ""
    if len(line) <= _TITLE_CHARS:
        return line
    return line[: _TITLE_CHARS - 1].rstrip() + "…"


def _paths(value: Any) -> Iterator[str]:
    if isinstance(value, list):
        for item in value:
            path = item.get("path") if isinstance(item, Mapping) else item
            if isinstance(path, str):
                yield path
