"""The canonical event stream (docs/events.md): ``agent_created``, ``transcript_entry``,
``transcript_reset``, ``piece_of_text``, and ``LoggedString``, the ``str`` that carries a message
id through ordinary code.

An event is a plain dict whose first keys are the format's own (``message_id``, ``event_type``,
``agent_id``, ...), followed by the linkage fields agenttrace adds, which do not change the
meaning of the others: ``ts``, ``trace_id``, ``span_id``, ``path``. Readers also accept the
older spelling (``content_id`` for ``substance``, ``caused_by`` for ``cause``); see
:func:`normalize`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, SupportsIndex, TypeVar

from agenttrace.model.message_copies import ALIGNMENT, UNVOUCHED, Vouched, deep_copy, vouch

AGENT_CREATED = "agent_created"
TRANSCRIPT_ENTRY = "transcript_entry"
TRANSCRIPT_RESET = "transcript_reset"
PIECE_OF_TEXT = "piece_of_text"
EVENT_TYPES = (AGENT_CREATED, TRANSCRIPT_ENTRY, TRANSCRIPT_RESET, PIECE_OF_TEXT)

LINKAGE_FIELDS = ("ts", "trace_id", "span_id", "path")
"""Fields agenttrace adds for linkage; they never change the meaning of the format's own."""

MESSAGE_PREFIX = "msg_"
AGENT_PREFIX = "agent_"


_Event = TypeVar("_Event", bound=Mapping[str, Any])


def message_id(number: int) -> str:
    """``msg_001`` for 1 (three digits at least, more when needed: ``msg_1000``)."""
    return f"{MESSAGE_PREFIX}{number:03d}"


def agent_id(number: int) -> str:
    """``agent_001`` for 1."""
    return f"{AGENT_PREFIX}{number:03d}"


def writer_prefix(prefix: str, writer: str | None) -> str:
    """The prefix of the ids a writer allocates: ``msg_`` for a session's first writer,
    ``msg_3f9a0c1b-4242_`` for a joined one (its writer id inside, so the ids of processes
    writing one session never collide: docs/design/cross-process.md)."""
    return prefix if writer is None else f"{prefix}{writer}_"


_MAX_ID_DIGITS = 18
"""More digits than any counter reaches; an id with more (``msg_999...``, read from a file) is
not one agenttrace allocated, and ``int`` refuses 4,300 digits and more anyway."""


def id_number(identifier: object, prefix: str) -> int | None:
    """The counter value behind ``msg_012``/``agent_003``; ``None`` for ids not of that form.

    Only ASCII digits count: ``str.isdigit`` also takes superscripts and circled digits, which
    ``int`` refuses, and other scripts' digits, which agenttrace never writes.
    """
    if isinstance(identifier, str) and identifier.startswith(prefix):
        digits = identifier[len(prefix) :]
        if 0 < len(digits) <= _MAX_ID_DIGITS and digits.isascii() and digits.isdigit():
            return int(digits)
    return None


class LoggedString(str):
    """A ``str`` that carries the ``message_id`` of the content it morally represents.

    What an agent says comes back as one (its own id); a formatted copy keeps the original's id
    (``utterance.derive(f"[Jack]: {utterance}")``, or ``"[Jack]: " + utterance``), and logging
    an incoming message reads ``getattr(text, "message_id", None)`` as its ``substance``.
    Operational code treats it as a plain string.
    """

    message_id: str | None

    def __new__(cls, content: object, message_id: str | None = None) -> LoggedString:
        instance = super().__new__(cls, content)
        instance.message_id = message_id
        return instance

    def derive(self, content: object) -> LoggedString:
        """A new text that represents the same content (a formatted or hook-edited copy)."""
        return LoggedString(content, self.message_id)

    def __add__(self, other: str) -> LoggedString:
        return LoggedString(str.__add__(self, other), self.message_id)

    def __radd__(self, other: str) -> LoggedString:
        return LoggedString(other + str(self), self.message_id)

    def __mod__(self, values: Any) -> LoggedString:
        return LoggedString(str.__mod__(self, values), self.message_id)

    def format(self, *args: object, **kwargs: object) -> LoggedString:
        return LoggedString(str.format(self, *args, **kwargs), self.message_id)

    def strip(self, chars: str | None = None) -> LoggedString:
        return LoggedString(str.strip(self, chars), self.message_id)

    def replace(self, old: str, new: str, count: SupportsIndex = -1) -> LoggedString:
        return LoggedString(str.replace(self, old, new, count), self.message_id)

    def __reduce__(self) -> tuple[Any, ...]:
        return (LoggedString, (str(self), self.message_id))

    def __repr__(self) -> str:
        return f"LoggedString({str.__repr__(self)}, message_id={self.message_id!r})"


def substance_of(text: object) -> str | None:
    """The message id a text carries (``None`` for a plain string)."""
    value = getattr(text, "message_id", None)
    return value if isinstance(value, str) else None


# --- building events --------------------------------------------------------------------------


def agent_created(
    message: str,
    agent: str,
    *,
    cause: str | list[str] | None = None,
    name: str | None = None,
    language_model: str | None = None,
) -> dict[str, Any]:
    """An ``agent_created`` event (no ``cause`` for the root agent)."""
    event: dict[str, Any] = {"message_id": message, "event_type": AGENT_CREATED, "agent_id": agent}
    if cause is not None:
        event["cause"] = cause
    if name is not None:
        event["name"] = name
    if language_model is not None:
        event["language_model"] = language_model
    return event


def transcript_entry(
    message: str, agent: str, entry: Mapping[str, Any], *, substance: str | None = None
) -> dict[str, Any]:
    """A ``transcript_entry`` event for ``entry`` (role, content, tool_calls, ...)."""
    event: dict[str, Any] = {
        "message_id": message,
        "event_type": TRANSCRIPT_ENTRY,
        "agent_id": agent,
        "role": entry.get("role", "user"),
    }
    if entry.get("content") is not None:
        event["content"] = entry["content"]
    for key in ("tool_calls", "tool_call_id", "name"):
        value = entry.get(key)
        if value:
            # The format's ids and names are strings (readers check it): an int id becomes "5".
            event[key] = tool_calls(value) if key == "tool_calls" else str(value)
    if substance is not None:
        event["substance"] = substance
    return event


def transcript_reset(
    message: str, agent: str, kept: int, entries: int, reused: list[Any] | None = None
) -> dict[str, Any]:
    """A ``transcript_reset`` event: ``agent``'s transcript is now its first ``kept`` entries,
    then the ``entries`` transcript entries that follow it in the same write (the rest of what
    the agent was sent), placed among the runs of earlier entries it ``reused`` when it has
    that field (``agenttrace.model.resets``)."""
    event = {
        "message_id": message,
        "event_type": TRANSCRIPT_RESET,
        "agent_id": agent,
        "kept": kept,
        "entries": entries,
    }
    if reused is not None:
        event["reused"] = reused
    return event


def piece_of_text(message: str, agent: str, content: str, cause: str | list[str]) -> dict[str, Any]:
    """A ``piece_of_text`` event: text a tool call made, to be delivered to agents."""
    return {
        "message_id": message,
        "event_type": PIECE_OF_TEXT,
        "agent_id": agent,
        "content": str(content),
        "cause": cause,
    }


def tool_calls(calls: Iterable[Any]) -> list[dict[str, Any]]:
    """Tool calls as the stream writes them: ``{"id", "function": {"name", "arguments"}}``.

    ``type`` is left out when it is ``"function"`` (the only type; see docs/events.md)
    and restored by :func:`api_message` for a model request. ``arguments`` is JSON text, as
    models write it: arguments given as an object are written as their JSON.
    """
    result = []
    for call in calls:
        function = _get(call, "function")
        plain: dict[str, Any] = {"id": _get(call, "id")}
        kind = _get(call, "type")
        if kind and kind != "function":
            plain["type"] = kind
        arguments = _get(function, "arguments") or ""
        plain["function"] = {
            "name": _get(function, "name"),
            "arguments": arguments if isinstance(arguments, str) else _json_text(arguments),
        }
        result.append(plain)
    return result


MESSAGE_FIELDS = ("role", "content", "tool_calls", "tool_call_id", "name")

SERVER_TOOL_CALLS = frozenset({"server_tool_use", "mcp_tool_use"})
"""Tool call types the model's provider runs itself (Anthropic's web search, web fetch, code
execution; its MCP connector's calls): shown with the reply's tool calls, their results in the
same reply; the client never runs or answers them."""


def server_side(call: Any) -> bool:
    """Whether a tool call (a dict, or an object with ``type``) is one its provider runs."""
    return _get(call, "type") in SERVER_TOOL_CALLS


class ContinuedMessages(list):  # type: ignore[type-arg]
    """A request's messages that continue a conversation its server keeps (the Responses
    API's ``previous_response_id``): only what is new is sent, so they follow the agent's
    logged transcript rather than restate it, and are never read as a rewrite of it."""

    __slots__ = ()


def message_fields(message: Any) -> dict[str, Any]:
    """A chat message (a dict, or an object such as litellm's ``Message``) as a plain dict of
    the fields a transcript entry keeps."""
    if isinstance(message, Mapping):
        return dict(message)
    fields: dict[str, Any] = {}
    for key in MESSAGE_FIELDS:
        value = getattr(message, key, None)
        if value is not None:
            fields[key] = value
    return fields


# --- does a request extend a transcript? ----------------------------------------------------------


def same_entry(message: Any, entry: Mapping[str, Any]) -> bool:
    """Whether the chat message ``message`` is what the transcript entry ``entry`` says: whether
    :func:`transcript_entry` of its :func:`message_fields` would have the same ``role``,
    ``content``, ``tool_calls``, ``tool_call_id`` and ``name`` (ids, linkage and ``substance``
    aside). An empty content and none are the same (an assistant message that only calls tools
    comes back with either).

    Cheap on purpose: it runs for every message of every request (a dict's fields are read in
    place; tool calls are only normalised when the message has some).
    """
    get = (message if isinstance(message, Mapping) else message_fields(message)).get
    if get("role", "user") != entry.get("role"):
        return False
    content = get("content")
    logged = entry.get("content")
    if content != logged and not (_empty(content) and _empty(logged)):
        return False
    calls = get("tool_calls")
    logged_calls = entry.get("tool_calls")
    if (calls or logged_calls) and (
        not calls or not logged_calls or not _same_calls(tool_calls(calls), logged_calls)
    ):
        return False
    for key in ("tool_call_id", "name"):
        value = get(key)
        if (str(value) if value else None) != (entry.get(key) or None):
            return False
    return True


def _same_calls(calls: list[dict[str, Any]], logged: Any) -> bool:
    """Whether normalised tool calls are the logged ones. Arguments that differ as text but
    parse to the same JSON are the same: a framework may send back the model's call arguments
    re-serialised (pydantic-ai 2.78 sends ``{"a":2}`` for the model's ``{"a": 2}``)."""
    if calls == logged:
        return True
    if not isinstance(logged, list) or len(calls) != len(logged):
        return False
    for call, entry in zip(calls, logged, strict=True):
        if not isinstance(entry, Mapping) or call.keys() != entry.keys():
            return False
        for key, value in call.items():
            if key == "function":
                if not _same_function(value, entry[key]):
                    return False
            elif value != entry[key]:
                return False
    return True


def _same_function(function: dict[str, Any], logged: Any) -> bool:
    if function == logged:
        return True
    if not isinstance(logged, Mapping) or function.get("name") != logged.get("name"):
        return False
    return bool(_json_value(function.get("arguments")) == _json_value(logged.get("arguments")))


def _json_value(text: Any) -> Any:
    """``text`` parsed as JSON, or a marker equal to nothing else when it is not JSON."""
    if not isinstance(text, str):
        return object()
    try:
        return json.loads(text)
    except ValueError:
        return object()


def _empty(content: Any) -> bool:
    return content is None or (isinstance(content, str) and not content)


INSTRUCTION_ROLES = ("system", "developer")
"""Roles of the instructions a request may carry beside an agent's transcript."""


class Alignment:
    """What an agent's earlier requests were found to share with its transcript, so that the
    next request is compared in proportion to what is new in it, not to its length.

    ``state`` is (deep copies of the messages that matched, the transcript entries they
    matched), set in one assignment so that a reader in another thread sees a consistent pair.
    A message of a later request that compares equal to the copy taken then, opposite the same
    entry, is the same message: one list comparison in C. A message changed in place since (its
    dict edited, or a list or dict in it) no longer equals its copy and is compared in full.
    Copies follow :func:`~agenttrace.model.message_copies.deep_copy`; a message that has none
    (``None`` in ``state``) is compared in full every time.

    ``vouched``: what the last comparison of a request with copies found (this memory's, or the
    fingerprint's digests', which hold the same copy objects), for the next reader of the same
    request to compare copies by identity instead of messages
    (:mod:`~agenttrace.model.message_copies`).
    """

    __slots__ = ("last", "state", "vouched")

    def __init__(self) -> None:
        self.state: tuple[list[Any], list[Mapping[str, Any]]] = ([], [])
        self.vouched: Vouched | None = None
        self.last: tuple[Any, ...] | None = None
        """The last request aligned and its result: an LLM call aligns its request when it
        starts (its span's input) and when its reply is logged; the second time, with the
        same request and the same transcript, costs a few identity checks."""

    def recall(self, messages: Sequence[Any], entries: Sequence[Any]) -> tuple[int, int] | None:
        """The alignment of ``messages`` with ``entries`` if it was the last one made and
        neither has changed since (same objects, lengths, last items, memory)."""
        last = self.last
        if (
            last is None
            or last[0] is not messages
            or last[1] != len(messages)
            or last[2] is not entries
            or last[3] != len(entries)
            or last[4] is not self.state
        ):
            return None
        if (messages and last[5] is not messages[-1]) or (entries and last[6] is not entries[-1]):
            return None
        return last[7]  # type: ignore[no-any-return]

    def remember(
        self, messages: Sequence[Any], entries: Sequence[Any], result: tuple[int, int]
    ) -> None:
        """Keep the alignment just made for :meth:`recall`."""
        self.last = (
            messages,
            len(messages),
            entries,
            len(entries),
            self.state,
            messages[-1] if messages else None,
            entries[-1] if entries else None,
            result,
        )

    def extend(self, messages: Sequence[Any], entries: Sequence[Mapping[str, Any]]) -> None:
        """``messages`` were just logged as ``entries``, at the end of the transcript."""
        sent, matched = self.state
        if len(entries) == len(messages) and len(sent) == len(matched):
            self.state = (sent + [copy_of_message(m) for m in messages], matched + list(entries))


def alignment(
    messages: Sequence[Any],
    entries: Sequence[Mapping[str, Any]],
    memory: Alignment | None = None,
) -> tuple[int, int]:
    """How a request lines up with an agent's transcript: ``(offset, kept)``.

    ``offset`` counts the request's leading system (or developer) messages when the transcript
    is not empty and does not start with one: instructions sent beside the transcript, not part
    of it (a hook's, or Anthropic's ``system=``). ``kept`` counts the messages after those that
    are the transcript's first entries (:func:`same_entry`). The request *extends* the
    transcript when ``kept == len(entries)``; its messages from ``offset + kept`` on are then
    what the transcript lacks. One comparison per message, at most ``len(entries)`` of them;
    with the agent's ``memory`` (:class:`Alignment`), the messages its earlier requests already
    matched cost an identity check each, and only the others are compared.
    """
    if memory is not None:
        known = memory.recall(messages, entries)
        if known is not None:
            return known
    offset = 0
    if entries and entries[0].get("role") not in INSTRUCTION_ROLES:
        while offset < len(messages) and _role(messages[offset]) in INSTRUCTION_ROLES:
            offset += 1
    count = min(len(messages) - offset, len(entries))
    start = 0
    if memory is not None:
        sent, matched = memory.state
        start = _known_prefix(messages, offset, entries, sent, matched, count)
    kept = count
    for index in range(start, count):
        if not same_entry(messages[offset + index], entries[index]):
            kept = index
            break
    if memory is not None:
        sent, matched = memory.state
        head = sent[:start] if start < len(sent) else sent  # equal to the messages, all copies
        learnt = [copy_of_message(m) for m in messages[offset + start : offset + kept]]
        copies = head + learnt if learnt else head
        if kept > start:
            # Only what was learnt is written: a request that diverged from what the memory
            # knows (a window) leaves it as it was, for the reset that follows to find its
            # runs in.
            shown = entries[:kept]
            memory.state = (copies, shown if isinstance(shown, list) else list(shown))
        if None in learnt:  # a message without a copy: none vouches for it
            copies = head + [UNVOUCHED if copy is None else copy for copy in learnt]
        memory.vouched = vouch(messages, offset, copies, ALIGNMENT)
        memory.remember(messages, entries, (offset, kept))
    return offset, kept


def _known_prefix(
    messages: Sequence[Any],
    offset: int,
    entries: Sequence[Mapping[str, Any]],
    sent: list[Any],
    matched: list[Mapping[str, Any]],
    count: int,
) -> int:
    """How many of the request's first messages are, unchanged, ones an earlier request of the
    agent matched to the very same transcript entries."""
    known = min(count, len(sent))
    if not known:
        return 0
    # The common case in C: the whole history sent again, the transcript as it was.
    # Slices only where needed (see same_prefix); the entries first, the cheaper comparison.
    if same_prefix(matched, entries, known):
        window = messages[offset : offset + known]
        if (window if isinstance(window, list) else list(window)) == (
            sent if known == len(sent) else sent[:known]
        ):
            return known
    for index in range(known):
        copy = sent[index]
        if copy is None or entries[index] is not matched[index]:
            return index
        if messages[offset + index] != copy:
            return index
    return known


def same_prefix(matched: list[Any], entries: Sequence[Any], known: int) -> bool:
    """Whether ``entries`` starts with the first ``known`` of ``matched``, the very objects (a
    memory's entries still the transcript's), sliced only where needed: a slice touches every
    entry it holds, and litellm's own work has left them out of the caches."""
    shown = entries[:known]
    return (shown if isinstance(shown, list) else list(shown)) == (
        matched if known == len(matched) else matched[:known]
    )


def copy_of_message(message: Any) -> Any:
    """A deep copy of a plain message (:func:`~agenttrace.model.message_copies.deep_copy`);
    ``None`` for any other (it is then compared in full each time)."""
    if type(message) is dict:
        return deep_copy(message, None)
    return None


def _role(message: Any) -> Any:
    if isinstance(message, Mapping):
        return message.get("role", "user")
    return getattr(message, "role", None) or "user"


def api_message(event: Mapping[str, Any]) -> dict[str, Any]:
    """The chat message a transcript entry stands for, ready for an LLM request.

    An entry read from a file may lack a role: it is a user message, as
    :func:`transcript_entry` makes an entry logged without one.
    """
    message: dict[str, Any] = {"role": event.get("role", "user"), "content": event.get("content")}
    calls = event.get("tool_calls")
    if calls and isinstance(calls, list):
        message["tool_calls"] = [
            {"type": call.get("type", "function"), **call}
            for call in calls
            if isinstance(call, Mapping)
        ]
    for key in ("tool_call_id", "name"):
        if event.get(key):
            message[key] = event[key]
    return message


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


# --- reading ---------------------------------------------------------------------------------


def normalize(event: Mapping[str, Any]) -> dict[str, Any]:
    """An event in the current spelling: ``content_id`` becomes ``substance`` and ``caused_by``
    becomes ``cause`` (the older spelling, docs/events.md). Parents that the older spelling
    leaves implicit are filled in by :func:`infer_causes` over the whole stream."""
    if "content_id" not in event and "caused_by" not in event:
        return dict(event)
    result: dict[str, Any] = {}
    for key, value in event.items():
        if key == "content_id":
            result["substance"] = value
        elif key == "caused_by":
            result["cause"] = value
        else:
            result[key] = value
    return result


def infer_causes(events: list[dict[str, Any]]) -> None:
    """Give ``agent_created`` events without ``cause`` (the older spelling) the ``task`` call
    that made them.

    The older spelling places a creation between the parent's tool call to ``task`` and its
    result, with the agent's name in the call's arguments: a creation gets the newest open call
    that asked for its name, else the newest open one. A creation while no ``task`` call is open
    gets no cause: the root. The stream's first agent is no exception: a stream that starts
    inside a session (a sub-agent created in the call of an agent the stream never saw created;
    docs/events.md, "Older spelling read back") gives it its parent too, and the root is then
    the agent no call created (``Session.root``).
    """
    import json

    # Open calls as stacks, newest last: every one, and those by the name they asked for.
    # Answered calls are dropped from the top as they surface, so each creation costs O(1)
    # amortised however many calls a (hostile) stream holds.
    open_calls: list[tuple[str, str]] = []  # (message_id, call id)
    by_name: dict[str, list[tuple[str, str]]] = {}
    answered: set[str] = set()

    def newest(stack: list[tuple[str, str]]) -> str | None:
        while stack and stack[-1][1] in answered:
            stack.pop()
        return stack[-1][0] if stack else None

    for event in events:
        kind = event.get("event_type")
        message = event.get("message_id")
        if kind == TRANSCRIPT_ENTRY and isinstance(message, str):
            for call in _calls(event.get("tool_calls")):
                function = call.get("function")
                if not isinstance(function, Mapping) or function.get("name") != "task":
                    continue
                text = function.get("arguments")
                try:
                    arguments = json.loads(text) if isinstance(text, str) and text else {}
                except (ValueError, RecursionError):
                    arguments = {}
                name = arguments.get("name", "") if isinstance(arguments, dict) else ""
                call_id = call.get("id", "")
                entry = (message, call_id if isinstance(call_id, str) else "")
                open_calls.append(entry)
                if isinstance(name, str) and name:
                    by_name.setdefault(name, []).append(entry)
            answer = event.get("tool_call_id")
            if event.get("role") == "tool" and answer and isinstance(answer, str):
                answered.add(answer)
        elif kind == AGENT_CREATED:
            if "cause" in event:
                continue
            name = event.get("name")
            named = by_name.get(name) if isinstance(name, str) else None
            cause = (newest(named) if named else None) or newest(open_calls)
            if cause is not None:
                event["cause"] = cause


def _calls(calls: Any) -> Iterable[Mapping[str, Any]]:
    """The tool calls of an entry that are objects (a file may hold anything there)."""
    if isinstance(calls, list):
        return [call for call in calls if isinstance(call, Mapping)]
    return ()
