"""A STD-008 document as a session: the import behind ``agenttrace tree``, ``stats``,
``dialog`` and ``export`` of a ``*-multi.json`` file.

The orchestrator's run is the root; each tool call is an op of it, and each sub-session a
sub-agent run under the call that triggered it (found where its ``parent_session_id`` says, else
anywhere; one with no call to hang on gets an op of its own, named after its agent, as agenttrace
gives an agent run started outside a tool call). The events are those agenttrace would have
logged: the user's prompt, each call and its result, the task a sub-agent heard (the caller's
``piece_of_text``) and what it answered (its output: the summary of a plain ``DeveloperOutput``,
else the output as JSON, else the ``summary`` of the message that reported it done).

What the document says that an opTree keeps nowhere else goes on the spans, where the STD-008
export reads it back: call ids (``gen_ai.tool.call.id``), agent types, tool categories, task ids
and priorities, the counts of ``subagent_info``, each agent as the document identified it, the
``task_title``, the ``collaboration`` and the ``summary`` (on the root), and each message as it
came (a span event on the run of the sub-session it is about, else on the root). So an imported
document exported again is the same document (docs/std008.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from agenttrace import semconv as sc
from agenttrace._internal.config import ReadLimits
from agenttrace._internal.times import clamp_ms, iso_ms
from agenttrace.formats.imported import Builder, Node, json_text, plain_id
from agenttrace.formats.session.files import LoadedFile, SessionFileError
from agenttrace.formats.std008.schema import check

SUCCESS = frozenset({"success", "succeeded", "completed", "complete", "ok", "done"})
"""Statuses of a session, sub-session or call that mean it went well."""
RUNNING = frozenset({"in_progress", "running", "pending", "started", "active"})
"""Statuses that mean it has not ended; any other ends it failed."""
LEVELS_PER_SUB_AGENT = 8
"""How many levels of JSON a sub-agent run adds to an opTree: the depth cap on nesting
(``AGENTTRACE_MAX_NESTING_DEPTH``) divided by this is how deep sub-sessions may nest."""


def read_std008(document: Any, path: Path, limits: ReadLimits | None = None) -> LoadedFile:
    """``document`` (decoded JSON from ``path``) as a session; :class:`SessionFileError` if
    it is not a STD-008 document."""
    limits = ReadLimits.from_env() if limits is None else limits
    problem = check(document, limits.nesting_depth)
    if problem is not None:
        raise SessionFileError(
            f"{path}: not a STD-008 document: {problem} (agenttrace validate lists every problem)"
        )
    return _Reader(document, path, max(1, limits.nesting_depth // LEVELS_PER_SUB_AGENT)).read()


class _Reader:
    def __init__(self, document: Mapping[str, Any], path: Path, max_depth: int) -> None:
        self.document = document
        self.path = path
        self.max_depth = max_depth
        session_id = document["session_id"]
        self.session_id = plain_id(session_id, f"std008:{session_id}")
        collaboration = document.get("collaboration") or {}
        self.orchestrator: Mapping[str, Any] = collaboration.get("orchestrator") or {
            "agent_id": "main",
            "agent_type": "architect",
        }
        self.identifiers: dict[str, Mapping[str, Any]] = {}
        for identifier in [self.orchestrator, *collaboration.get("participants", ())]:
            self.identifiers.setdefault(identifier["agent_id"], identifier)
        self.subs: list[Mapping[str, Any]] = list(document.get("sub_sessions") or ())
        for sub in self.subs:
            self.identifiers.setdefault(sub["agent"]["agent_id"], sub["agent"])
        self.messages: list[Mapping[str, Any]] = list(document.get("messages") or ())
        self.builder = Builder(self.session_id, "std008", iso_ms(document["created_at"]) or 0)
        self.hosted: dict[int, list[Mapping[str, Any]]] = {}
        """id(call) -> the sub-sessions it triggered; id(container) -> those without a call."""
        self.told: dict[int, dict[str, str]] = {}
        """id(op) -> the tasks its sub-agents heard, each its piece of text's message id."""
        self.runs: dict[int, Node] = {}
        """id(sub-session) -> its run."""
        self.index = {id(sub): index for index, sub in enumerate(self.subs)}
        """id(sub-session) -> where it is in the document."""
        self._place_sub_sessions()

    # -- where each sub-session goes ---------------------------------------------------------

    def _place_sub_sessions(self) -> None:
        containers: dict[str, Mapping[str, Any]] = {}
        for sub in self.subs:
            containers.setdefault(sub["sub_session_id"], sub)
        owner: dict[str, Mapping[str, Any]] = {}  # call id -> the container that holds it
        for container in (self.document, *self.subs):
            for call in container.get("tool_calls", ()):
                owner.setdefault(call["call_id"], container)
        parent_of: dict[int, tuple[Mapping[str, Any], Mapping[str, Any] | None]] = {}
        for sub in self.subs:
            parent = containers.get(sub["parent_session_id"], self.document)
            if parent is sub:
                parent = self.document
            trigger = sub["triggered_by_call_id"]
            call = _find(parent, trigger)
            if call is None and trigger in owner and owner[trigger] is not sub:
                parent = owner[trigger]
                call = _find(parent, trigger)
            parent_of[id(sub)] = (parent, call)
        # From the document down, so a loop of parents (a broken document) cannot recurse; a
        # sub-session no walk reaches hangs on the root.
        children: dict[int, list[Mapping[str, Any]]] = {}
        for sub in self.subs:
            children.setdefault(id(parent_of[id(sub)][0]), []).append(sub)
        depth = {id(self.document): 0}
        pending = [self.document]
        while pending:
            container = pending.pop()
            for sub in children.get(id(container), ()):
                if id(sub) in depth:
                    continue
                depth[id(sub)] = depth[id(container)] + 1
                if depth[id(sub)] > self.max_depth:
                    raise SessionFileError(
                        f"{self.path}: sub-sessions nested more than {self.max_depth} levels "
                        "deep (AGENTTRACE_MAX_NESTING_DEPTH)"
                    )
                pending.append(sub)
        for sub in self.subs:
            parent, call = parent_of[id(sub)]
            if id(sub) not in depth:
                parent, call = self.document, None
            key = id(call) if call is not None else id(parent)
            self.hosted.setdefault(key, []).append(sub)

    # -- building -----------------------------------------------------------------------------

    def read(self) -> LoadedFile:
        document = self.document
        builder = self.builder
        agent_id = self.orchestrator["agent_id"]
        model = _dig(document, "agent", "model_id")
        attributes: dict[str, Any] = {
            sc.AGENT_ROLE: self.orchestrator["agent_type"],
            sc.IMPORT_AGENT: json.dumps(self.orchestrator, ensure_ascii=False),
        }
        if isinstance(document.get("task_title"), str):
            attributes[sc.TASK_TITLE] = document["task_title"]
        if isinstance(document.get("collaboration"), Mapping):
            collaboration = json.dumps(document["collaboration"], ensure_ascii=False)
            attributes[sc.IMPORT_COLLABORATION] = collaboration
        read = _DOCUMENT_READ - ({"user_prompt"} if document.get("user_prompt") == "" else set())
        unread = _unread(document, read)  # an empty prompt is logged nowhere: kept as it came
        if unread is not None:
            attributes[sc.IMPORT_UNREAD] = unread
        if isinstance(document.get("summary"), Mapping):
            attributes[sc.IMPORT_SUMMARY] = json.dumps(document["summary"], ensure_ascii=False)
        root = builder.root(
            agent_id, self._name(agent_id), attributes, model if isinstance(model, str) else None
        )
        _mark_absent(root, document, ("task_title",))
        builder.created(
            root,
            root.started_ms,
            agent_id,
            self.identifiers[agent_id].get("name"),
            model if isinstance(model, str) else None,
        )
        prompt = document.get("user_prompt")
        if isinstance(prompt, str) and prompt:
            builder.event(
                root,
                root.started_ms,
                event_type="transcript_entry",
                agent_id=agent_id,
                role="user",
                content=prompt,
            )
        self._run(root, document)
        self._keep_messages(root)
        ended, error = self._end(document.get("status"), document.get("completed_at"), None)
        total = _dig(document, "summary", "total_duration_ms")
        builder.end_run(root, ended, _number(total), error)
        return builder.loaded(self.path, root)

    def _run(self, run: Node, container: Mapping[str, Any]) -> None:
        """The calls of ``container`` (the document or a sub-session) as ``run``'s ops."""
        for call in container.get("tool_calls", ()):
            self._call(run, call)
        for sub in self.hosted.get(id(container), ()):
            # A sub-session with no call to hang on: an op of its own, as agenttrace opens one
            # for an agent run started outside a tool call.
            start = iso_ms(sub["started_at"]) or run.started_ms
            name = self._name(sub["agent"]["agent_id"])
            op = self.builder.op(run, name, start, None, {sc.IMPLICIT: True})
            cause = self.builder.events[-1]["message_id"]
            child = self._sub(op, run, sub, cause)
            self.builder.end_op(op, child.data.get("endedAt"), None, child.data.get("error"), None)

    def _call(self, run: Node, call: Mapping[str, Any]) -> None:
        builder = self.builder
        start = iso_ms(call.get("started_at"))
        start = run.started_ms if start is None else start
        params = _dig(call, "input", "params")
        arguments = json_text(params) if isinstance(params, Mapping) else None
        attributes: dict[str, Any] = {sc.GEN_AI_TOOL_CALL_ID: call["call_id"]}
        if isinstance(call.get("tool_category"), str):
            attributes[sc.TOOL_CATEGORY] = call["tool_category"]
        for key, attribute in (
            ("tool_uses", sc.SUBAGENT_TOOL_USES),
            ("tokens_used", sc.SUBAGENT_TOKENS_USED),
        ):
            count = _dig(call, "subagent_info", key)
            if isinstance(count, int) and not isinstance(count, bool):
                attributes[attribute] = count
        info = call.get("subagent_info")
        if isinstance(info, Mapping):
            given = _unread(info, frozenset({"sub_session_id", "sub_session_ids"}))
            attributes[sc.IMPORT_SUBAGENT_INFO] = given or "{}"
        op = builder.op(run, call["tool_name"], start, arguments, attributes)
        _mark_absent(op, call, ("tool_category", "started_at", "ended_at", "duration_ms"))
        asked = builder.event(
            op,
            start,
            event_type="transcript_entry",
            agent_id=run.agent_id,
            role="assistant",
            tool_calls=[
                {
                    "id": call["call_id"],
                    "function": {"name": call["tool_name"], "arguments": arguments or "{}"},
                }
            ],
        )
        for sub in self.hosted.get(id(call), ()):
            self._sub(op, run, sub, asked)
        output = call.get("output") or {}
        result = json_text(output["result"]) if output.get("result") is not None else None
        duration = _number(call.get("duration_ms"))
        ended = iso_ms(call.get("ended_at"))
        if ended is None and duration is not None:
            ended = clamp_ms(start + duration)
        ended, error = self._end(output.get("status"), ended, output.get("error"))
        # A call the document says still runs, yet gave an end: its end comes back as given.
        unread = _unread(call, _CALL_READ - _ENDS if ended is None else _CALL_READ)
        if unread is not None:
            op.data["span"]["attributes"][sc.IMPORT_UNREAD] = unread
        if result is not None:
            builder.event(
                op,
                start if ended is None else ended,
                event_type="transcript_entry",
                agent_id=run.agent_id,
                role="tool",
                content=result,
                tool_call_id=call["call_id"],
            )
        builder.end_op(op, ended, duration, error, result)

    def _sub(self, op: Node, parent: Node, sub: Mapping[str, Any], cause: str) -> Node:
        builder = self.builder
        agent_id = sub["agent"]["agent_id"]
        task = sub["task"]
        start = iso_ms(sub["started_at"]) or parent.started_ms
        node = builder.child(
            op,
            parent,
            agent_id,
            self._name(agent_id),
            sub["sub_session_id"],
            start,
            {
                sc.AGENT_ROLE: sub["agent"]["agent_type"],
                sc.IMPORT_AGENT: json.dumps(sub["agent"], ensure_ascii=False),
                sc.TASK_ID: task["task_id"],
                sc.TASK_PRIORITY: task["priority"],
            },
        )
        self.runs[id(sub)] = node
        node.data["span"]["attributes"][sc.IMPORT_INDEX] = self.index[id(sub)]
        builder.created(op, start, agent_id, self.identifiers[agent_id].get("name"), cause=cause)
        # One text the call handed to several agents (the cafe's prompt) is one piece of text.
        told = self.told.setdefault(id(op.data), {})
        piece = told.get(task["description"])
        if piece is None:
            piece = told[task["description"]] = builder.event(
                op,
                start,
                event_type="piece_of_text",
                agent_id=parent.agent_id,
                content=task["description"],
                cause=cause,
            )
        builder.event(
            op,
            start,
            event_type="transcript_entry",
            agent_id=agent_id,
            role="user",
            content=task["description"],
            substance=piece,
        )
        self._run(node, sub)
        ended, error = self._end(sub.get("status"), sub.get("completed_at"), self._failure(sub))
        unread = _unread(sub, _SUB_SESSION_READ - _ENDS if ended is None else _SUB_SESSION_READ)
        if unread is not None:
            node.data["span"]["attributes"][sc.IMPORT_UNREAD] = unread
        answer = self._answer(sub) if error is None else None
        if answer:
            builder.event(
                node,
                start if ended is None else ended,
                event_type="transcript_entry",
                agent_id=agent_id,
                role="assistant",
                content=answer,
            )
        _mark_absent(node, sub, ("duration_ms",))
        builder.end_run(node, ended, _number(sub.get("duration_ms")), error)
        return node

    def _keep_messages(self, root: Node) -> None:
        """Each message, as the document gave it, on the run it is about."""
        # The first sub-session of an id or task wins, as everywhere in the reader.
        by_id = {sub["sub_session_id"]: sub for sub in reversed(self.subs)}
        by_task = {sub["task"]["task_id"]: sub for sub in reversed(self.subs)}
        for index, message in enumerate(self.messages):
            envelope = {key: value for key, value in message.items() if key != "payload"}
            payload = json.dumps(message.get("payload"), ensure_ascii=False)
            sub = _concerned(message, by_id, by_task)
            node = self.runs.get(id(sub), root) if sub is not None else root
            when = iso_ms(message.get("timestamp"))
            self.builder.span_event(
                node,
                node.started_ms if when is None else when,
                sc.EVENT_IMPORTED_MESSAGE,
                {
                    sc.IMPORT_MESSAGE: json.dumps(envelope, ensure_ascii=False),
                    sc.IMPORT_MESSAGE_PAYLOAD: payload,
                    sc.IMPORT_MESSAGE_INDEX: index,
                },
            )

    # -- what the document says about an outcome -----------------------------------------------

    def _end(self, status: Any, ended: Any, error: Any) -> tuple[int | None, str | None]:
        """(when it ended or None, the error if it failed) from a status and an end time."""
        ended_ms = ended if isinstance(ended, int) else iso_ms(ended)
        text = status.lower() if isinstance(status, str) else None
        if ended_ms is None or text in RUNNING:
            return None, None
        if text is None or text in SUCCESS:
            return ended_ms, None
        return ended_ms, error if isinstance(error, str) and error else f"status {status}"

    def _reports(self, sub: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
        """The payloads of messages about ``sub`` (by ``correlation_id``, or its task id)."""
        task_id = sub["task"]["task_id"]
        for message in self.messages:
            payload = message.get("payload")
            if not isinstance(payload, Mapping):
                continue
            if message.get("correlation_id") == sub["sub_session_id"] or (
                "correlation_id" not in message and payload.get("task_id") == task_id
            ):
                yield {**payload, "message_type": message.get("message_type")}

    def _failure(self, sub: Mapping[str, Any]) -> str | None:
        for payload in self._reports(sub):
            reason = payload.get("reason") or payload.get("error")
            if payload["message_type"] == "abort" and isinstance(reason, str) and reason:
                return reason
        output = sub.get("output")
        if isinstance(output, Mapping) and output.get("status") == "failed":
            summary = output.get("summary")
            return summary if isinstance(summary, str) and summary else None
        return None

    def _answer(self, sub: Mapping[str, Any]) -> str | None:
        output = sub.get("output")
        if isinstance(output, Mapping):
            if _plain(output):
                return str(output["summary"])
            return json_text(dict(output))
        for payload in self._reports(sub):
            summary = payload.get("summary")
            if payload["message_type"] in ("task_completion", "review_result") and isinstance(
                summary, str
            ):
                return summary
        return None

    def _name(self, agent_id: str) -> str:
        name = self.identifiers.get(agent_id, {}).get("name")
        return name if isinstance(name, str) and name else agent_id


_DOCUMENT_READ = frozenset(
    {
        "session_id",
        "task_title",
        "user_prompt",
        "created_at",
        "completed_at",
        "collaboration",
        "tool_calls",
        "sub_sessions",
        "messages",
        "summary",
    }
)
"""The keys of a document whose values an export makes again as they were; the others (its
``status``, its ``agent``, keys STD-008 does not name) are kept as they came."""
_CALL_READ = frozenset(
    {"call_id", "tool_name", "tool_category", "started_at", "ended_at", "duration_ms"}
    | {"subagent_info"}
)
"""Likewise for a call: its ``input`` and ``output`` are kept as they came."""
_SUB_SESSION_READ = frozenset(
    {"sub_session_id", "parent_session_id", "agent", "triggered_by_call_id", "started_at"}
    | {"completed_at", "duration_ms", "tool_calls"}
)
"""Likewise for a sub-session: its ``status``, ``task`` and ``output`` are kept as they came
(the output of one that failed says more than its error)."""
_ENDS = frozenset({"ended_at", "completed_at", "duration_ms"})
"""The keys of an end, kept as they came where the status says it has not ended."""


def _mark_absent(node: Node, value: Mapping[str, Any], keys: tuple[str, ...]) -> None:
    """Say on ``node``'s span which of ``keys`` (ones the export would write) ``value`` has
    not, so the export leaves them out too."""
    absent = [key for key in keys if key not in value]
    if absent:
        node.data["span"]["attributes"][sc.IMPORT_ABSENT] = absent


def _unread(value: Mapping[str, Any], read: frozenset[str]) -> str | None:
    """The keys of ``value`` not in ``read``, as a JSON object's text (None if there are none)."""
    rest = {key: item for key, item in value.items() if key not in read}
    return json.dumps(rest, ensure_ascii=False) if rest else None


def _concerned(
    message: Mapping[str, Any],
    by_id: Mapping[Any, Mapping[str, Any]],
    by_task: Mapping[Any, Mapping[str, Any]],
) -> Mapping[str, Any] | None:
    """The sub-session ``message`` is about: the one its ``correlation_id`` names, else the one
    whose task its payload names (a review's id first), else None."""
    correlation = message.get("correlation_id")
    if isinstance(correlation, str) and correlation in by_id:
        return by_id[correlation]
    payload = message.get("payload")
    for task_id in (
        _dig(payload, "review_id"),
        _dig(payload, "task", "task_id"),
        _dig(payload, "task_id"),
    ):
        if isinstance(task_id, str) and task_id in by_task:
            return by_task[task_id]
    return None


def _find(container: Mapping[str, Any], call_id: Any) -> Mapping[str, Any] | None:
    return next((c for c in container.get("tool_calls", ()) if c["call_id"] == call_id), None)


def _plain(output: Mapping[str, Any]) -> bool:
    """A ``DeveloperOutput`` that says no more than its summary (what agenttrace exports for an
    agent whose answer is text): the answer is that text."""
    changes = output.get("changes")
    return (
        set(output) == {"task_id", "status", "changes", "summary"}
        and isinstance(output.get("summary"), str)
        and isinstance(changes, Mapping)
        and not any(
            changes.get(key) for key in ("files_created", "files_modified", "files_deleted")
        )
    )


def _dig(value: Any, *keys: str) -> Any:
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _number(value: Any) -> float | None:
    """A duration as the document gives it (an int stays an int), or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value
