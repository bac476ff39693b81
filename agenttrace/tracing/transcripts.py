"""The responsibility model (docs/responsibility.md), applied by agenttrace's decorators and the
litellm patch, so agent code is logged without logging parameters in its signatures:

- an agent is registered when it is created (``@agent_class``) or first runs; inside a tool call
  its ``agent_created`` names that call as its ``cause``, and whatever its transcript already
  holds (a system prompt) is logged with it, in the same write;
- what it hears (``@hears`` on ``harken``) is a user entry whose ``substance`` is the message id
  the text carries (a :class:`LoggedString`); plain text that a tool call was given as an
  argument (``discuss``'s prompt) first becomes a ``piece_of_text`` caused by that call;
- what it says comes from the LLM: each response is an assistant entry (messages the agent
  added to its transcript without ``@hears`` are logged just before, so transcripts stay whole;
  a request that does not extend the logged transcript, a history the framework rewrote, is
  logged as a ``transcript_reset`` to what was sent);
  an agent run's return value, and the response the caller gets, are left exactly as they were:
  text another agent hears that equals a logged reply links to it by the session's memory of
  recent replies (:meth:`Session.reply_saying`), so plain ``str`` carries the id as well as a
  ``LoggedString`` does;
- a tool called for an LLM tool call logs its result (each item, for a generator) as the calling
  agent's tool entry, unless it returns ``None``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from agenttrace import semconv as sc
from agenttrace._internal.checks import check_decorated, check_text, refuse
from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.redact import recorded_json
from agenttrace._internal.runtime import runtime
from agenttrace.model.events import (
    MESSAGE_FIELDS,
    ContinuedMessages,
    LoggedString,
    alignment,
    message_fields,
    same_entry,
    substance_of,
)
from agenttrace.model.message_copies import DIGESTS, vouched_copies
from agenttrace.session.state import Session
from agenttrace.tracing.agents import (
    agent_of,
    register_agent,
    session_for_new_agent,
    str_attribute,
    tool_call_message,
)
from agenttrace.tracing.llm_attributes import field, tool_calls_of
from agenttrace.tracing.relays import delivered, replied
from agenttrace.tracing.scopes import OpScope, current_scope

T = TypeVar("T", bound=type)
F = TypeVar("F", bound=Callable[..., Any])


# --- agents ------------------------------------------------------------------------------------


def agent_class(
    cls: T | None = None,
    /,
    *,
    name: str = "name",
    model: str = "language_model",
    transcript: str = "transcript",
) -> Any:
    """Class decorator: creating an instance registers it as an agent (``allocate_agent_id`` +
    ``log_agent_created``, see docs/events.md). The attribute names say where the agent keeps
    its name, model and transcript; the instance gets its ``agent_id``."""
    api = "agenttrace.agent_class"
    for parameter, value in (("name", name), ("model", model), ("transcript", transcript)):
        if not (isinstance(value, str) and value.isidentifier()):
            refuse(api, parameter, value, "the name of an attribute of the instance")

    def decorate(klass: T) -> T:
        if not isinstance(klass, type):  # a function: an agent run, not a class of agents
            refuse(f"@{api}", "what it decorates", klass, "a class (a function: @agenttrace.agent)")
        original = klass.__init__  # type: ignore[misc]

        @functools.wraps(original)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            if runtime.disabled:
                return
            try:
                register_agent(
                    session_for_new_agent(),
                    name=str_attribute(self, name),
                    language_model=str_attribute(self, model),
                    initial=list(getattr(self, transcript, None) or ()),
                    owner=self,
                )
            except Exception as exc:
                report_internal_error("agent_class", exc)

        klass.__init__ = __init__  # type: ignore[misc]
        return klass

    return decorate(cls) if cls is not None else decorate


# --- hearing -----------------------------------------------------------------------------------


def hears(fn: F | None = None, /, *, role: str = "user") -> Any:
    """Method decorator for ``harken(self, text)``: what the agent hears enters its transcript.

    The entry's ``substance`` is the message id ``text`` carries; plain text that the running
    tool call got as an argument is first logged as a ``piece_of_text`` caused by that call.
    """
    check_text("agenttrace.hears", "role", role, optional=False)

    def decorate(method: F) -> F:
        check_decorated("agenttrace.hears", method)

        @functools.wraps(method)
        def wrapper(self: Any, text: Any, *args: Any, **kwargs: Any) -> Any:
            result = method(self, text, *args, **kwargs)
            if not runtime.disabled:
                try:
                    log_heard(self, text, role)
                except Exception as exc:
                    report_internal_error("hears", exc)
            return result

        return wrapper  # type: ignore[return-value]

    return decorate(fn) if fn is not None else decorate


def log_heard(owner: object, text: Any, role: str = "user") -> str:
    """Log that ``owner`` heard ``text``; returns the entry's message id."""
    session = session_for_new_agent()
    agent_id = agent_of(
        session, owner, str_attribute(owner, "name"), str_attribute(owner, "language_model")
    )
    substance = substance_of(text)
    if substance is None and isinstance(text, str):
        plain = str(text)
        substance = session.reply_saying(plain, agent_id) or _piece_for_argument(session, plain)
    return session.log_transcript_entry(
        agent_id, {"role": role, "content": str(text)}, substance=substance
    )


def _piece_for_argument(session: Session, text: str) -> str | None:
    scope = current_scope()
    if not isinstance(scope, OpScope) or not any(
        isinstance(argument, str) and argument == text for argument in scope.text_arguments
    ):
        return None
    pieces = scope.pieces
    if text not in pieces:
        cause = tool_call_message(scope)
        if cause is None:
            return None
        pieces[text] = session.log_piece_of_text(scope.session.agent_id, text, cause)
    return pieces[text]


def piece_of_text(content: str) -> LoggedString:
    """Log ``content`` as text the running tool call made for delivery to agents; deliver the
    returned ``LoggedString`` and each recipient's entry points to it as its ``substance``."""
    if not isinstance(content, str):
        refuse("agenttrace.piece_of_text", "content", content, "a string")
    scope = current_scope()
    session = session_for_new_agent()
    agent = scope.session.agent_id if scope is not None else None
    cause = tool_call_message(scope)
    if runtime.disabled or agent is None or cause is None:
        return LoggedString(content)
    return LoggedString(content, session.log_piece_of_text(agent, content, cause))


# --- saying --------------------------------------------------------------------------------------


def log_llm_exchange(scope: OpScope, messages: Any, response: Any) -> str | None:
    """Log an LLM response as the agent's assistant entry, after what the request holds that
    the agent's transcript does not (:func:`log_request`); offer its tool calls to the turn.
    Returns its id."""
    session = scope.session.run.session
    agent_id = scope.session.agent_id
    offset = log_request(session, agent_id, messages, scope)
    choices = field(response, "choices")
    message = field(choices[0], "message") if isinstance(choices, Sequence) and choices else None
    if message is None:
        return None
    entry = _reply_fields(message)
    entry["role"] = "assistant"
    message_id = session.log_transcript_entry(agent_id, entry, at=scope)
    replied(scope.session, message_id)
    if offset is not None:
        _refer_to_request(scope, message_id, messages[:offset])
    calls = tool_calls_of(response)
    if calls:
        scope.turn.offer_tool_calls([(*call, message_id) for call in calls])
    return message_id


def _refer_to_request(scope: OpScope, reply: str, instructions: Sequence[Any]) -> None:
    """Let the op's node say where its whole request is (``agenttrace.formats.session.requests``):
    the agent's transcript just before ``reply`` (its response's entry), after the system messages
    the request sent beside that transcript, if any. A message id and those few messages,
    whatever the history's length: the session file does not grow with it."""
    scope.payloads[sc.REQUEST_REPLY_MESSAGE] = reply
    if instructions:
        text = recorded_json(list(instructions), runtime.settings.max_payload_bytes)[1]
        scope.payloads[sc.REQUEST_INSTRUCTIONS] = text


def _reply_fields(message: Any) -> dict[str, Any]:
    """:func:`~agenttrace.model.events.message_fields` of a response's message, read with
    :func:`~agenttrace.tracing.llm_attributes.field` (a model's absent fields cost no
    exception)."""
    if isinstance(message, Mapping):
        return dict(message)
    fields: dict[str, Any] = {}
    for key in MESSAGE_FIELDS:
        value = field(message, key)
        if value is not None:
            fields[key] = value
    return fields


def log_tool_result(scope: OpScope, result: Any) -> None:
    """A tool's result (or one streamed item) as the calling agent's tool entry; its
    ``substance`` is the reply a framework's ids say it is (``scope.answer``), if any."""
    if result is None or scope.call_id is None:
        return
    content = result if isinstance(result, str) else json.dumps(result, default=str)
    session = scope.session.run.session
    session.log_transcript_entry(
        scope.session.agent_id,
        {"role": "tool", "tool_call_id": scope.call_id, "content": content},
        scope.answer,
        at=scope,
    )


def _heard_reply(session: Session, agent_id: str, entry: dict[str, Any]) -> str | None:
    """The reply a user message an agent put in its own history stands for (a framework that
    relays another agent's answer as a user message), by the session's rule; ``None`` for any
    other message. A tool's result is the tool's own content (a sub-agent's answer returned by
    a ``task`` tool is not said to be the answer: the format's examples do not link them)."""
    content = entry.get("content")
    if entry.get("role", "user") != "user" or not isinstance(content, str):
        return None
    return substance_of(content) or session.reply_saying(content, agent_id)


def _unsaid(messages: ContinuedMessages, transcript: Sequence[Mapping[str, Any]]) -> list[Any]:
    """What a request that continues a conversation its server keeps adds to the agent's
    transcript: each message, but for system messages the transcript already holds (the
    instructions such a request sends again each time)."""
    said = [e for e in transcript if e.get("role") == "system"]
    return [
        message
        for message in messages
        if message_fields(message).get("role") != "system"
        or not any(same_entry(message, e) for e in said)
    ]


def log_request(session: Session, agent_id: str, messages: Any, scope: OpScope) -> int | None:
    """Make the agent's logged transcript what its request sent.

    A request *extends* the transcript when its first messages are the transcript's entries,
    one for one (:func:`~agenttrace.model.events.alignment`: role, content, tool calls, tool
    call id and name, as :func:`~agenttrace.model.events.message_fields` reads them; system
    messages sent ahead of a transcript that has none are instructions beside it). Agents
    append to their transcripts, so then the messages after those are what the agent added
    without ``@hears``: they are logged as entries. Otherwise the framework rewrote the
    history (tool calls turned into text, a reply dropped, a new system prompt): a
    ``transcript_reset`` keeps the entries the request still starts with and logs the rest of
    it, so the transcript is exactly what was sent. One comparison per message.

    A request that continues a conversation its server keeps (:class:`ContinuedMessages`)
    sends only what is new: that is logged after the transcript, as an extension is.

    Returns how many messages the request sent ahead of the transcript (the ``offset`` of
    :func:`~agenttrace.model.events.alignment`): the transcript is now the rest of the
    request. ``None`` when there was nothing to log (no such agent, no messages) or the request
    continues a conversation its server keeps.
    """
    record = session.agents.get(agent_id)
    if record is None or not isinstance(messages, Sequence) or isinstance(messages, str):
        return None
    transcript = record.transcript
    run = scope.session

    def by_id(entry: Mapping[str, Any]) -> str | None:
        return delivered(session, run, entry) if run.hosted_by is not None else None

    offset: int | None
    new: Sequence[Any]
    if isinstance(messages, ContinuedMessages):
        # Only what is new was sent: it follows the transcript, it never rewrites it.
        offset, new = None, _unsaid(messages, transcript)
    else:
        offset, kept = alignment(messages, transcript, record.aligned)
        if kept < len(transcript):
            # What the fingerprint's comparison of this request found, if it made one: the
            # reset's runs are then checked against the same copies, by identity.
            vouched = vouched_copies(record.aligned.vouched, messages, DIGESTS)
            session.log_transcript_reset(
                agent_id,
                kept,
                messages[offset + kept :],
                at=scope,
                heard=by_id,
                vouched=vouched[offset + kept :] if vouched is not None else None,
            )
            return offset
        new = messages[offset + kept :]
    for message in new:
        entry = message_fields(message)
        substance = by_id(entry) or _heard_reply(session, agent_id, entry)
        session.log_transcript_entry(agent_id, entry, substance, at=scope)
    if new and offset is not None:
        # What was just logged is known too: the next request compares only what follows. (A
        # continued request's messages are not where a later request sends them: the replies
        # before them are the server's.)
        record.aligned.extend(new, transcript[len(transcript) - len(new) :])
    return offset
