"""An agent's part of an exchange (the main agent, or a sub-agent the ``Agent`` tool ran) and
the tool calls its messages make: the spans and transcript entries they get.

- An :class:`AgentRun` is the main agent's run of one exchange (its scope is the exchange's
  ``invoke_agent`` span) or one sub-agent's run (a session nested under its ``Agent`` call's
  span). It gathers its messages (:class:`~.messages.Message`), logs each as its transcript's
  assistant entry once complete, and keeps the messages whose final usage is still to come.
- A :class:`ToolCall` is one ``tool_use`` block: an ``execute_tool {name}`` span from the block
  to its ``tool_result``, with the call id, the input, the result (capped and redacted, in the
  saved state; on the span with content capture) and ``is_error`` as the span's status.

The SDK's ids say what passes through an ``Agent`` call, so the links are made from them, not
from the text (docs/events.md, "Which reply heard text stands for"): the sub-agent's prompt is a
``piece_of_text`` of the call (the ``tool_use`` block's input; the SDK echoes it with the call's
id as ``parent_tool_use_id``), and the call's ``tool_result`` (its ``tool_use_id``) stands for
the sub-agent's final reply when the sub-agent ended before its call returned.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace.model.outcome import OutcomeBuilder
from agenttrace.tracing.content import tool_payload
from agenttrace.tracing.journal.steps import Pending, begin_tool_step, end_tool_step
from agenttrace.tracing.relays import piece_for
from agenttrace.tracing.scopes import OpScope, SessionScope, finish, start_op, start_session

from . import claims
from .effects import tool_effect
from .messages import Message, current
from .replayed import recorded_text
from .transcript import CostState, Entry, UserEntry
from .utils import block_type, mcp_server_of, result_text, unplaced


class ToolError(Exception):
    """A tool call whose result the CLI marked ``is_error``."""


class Identity:
    """Who an agent is across exchanges: ``agent_of`` sets ``agent_id`` on first use."""

    __slots__ = ("agent_id", "name")

    def __init__(self, name: str | None = None, agent_id: str | None = None) -> None:
        self.name = name
        if agent_id is not None:
            self.agent_id = agent_id


class ToolCall:
    """One ``tool_use`` block and its span."""

    __slots__ = ("agent", "done", "id", "input", "name", "op", "sub")

    def __init__(
        self, agent: AgentRun, message: Message, call_id: Any, name: Any, input: Any, now: int
    ) -> None:
        self.agent = agent
        self.id: str = str(call_id or "")
        self.name: str = str(name or "tool")
        self.input: dict[str, Any] = dict(input) if isinstance(input, Mapping) else {}
        self.done = False
        self.sub: AgentRun | None = None
        payloads: dict[str, Any] = {}
        outcome = OutcomeBuilder()
        attributes = tool_payload(payloads, sc.GEN_AI_TOOL_CALL_ARGUMENTS, self.input, outcome)
        attributes[sc.GEN_AI_TOOL_CALL_ID] = self.id
        server = mcp_server_of(self.name)
        if server is not None:
            outcome.set_mcp_server(server)
        # In the message's turn, a sibling of its chat span (not a child of it).
        with current(message.op.turn):
            self.op: OpScope = start_op(
                sc.KIND_TOOL, self.name, attributes, started_ns=now, outcome=outcome
            )
        self.op.payloads.update(payloads)
        self.op.call_id = self.id
        # The CLI runs the tool, not this process. Its PreToolUse hook (.hooks) journals the
        # intent before the CLI runs it: if the hook came first, the call takes that step (or
        # the hook's denial); else the intent is journaled now, and the hook finds it.
        run = self.op.session.run.journal_run
        taken = claims.take(run, self.id)
        if taken is not None:
            self.op.step = taken.step
            if type(taken.step) is Pending:  # a replay's hook answered it from the recording
                self.op.set_attribute(sc.REPLAYED, True)
        elif claims.label_taken(run, self.op.label, self.id):
            # Another call claimed this key ahead (a guess that proved wrong): journaling this
            # one there would mix two calls' lines, so it is not journaled.
            unplaced("its label was claimed ahead by another call")
        else:
            begin_tool_step(self.op, tool_effect(self.name), self.input)

    def finish(self, content: Any, is_error: bool, now: int) -> None:
        """The call's ``tool_result`` came: log it as the caller's tool entry, end the span.
        A sub-agent that ended before it (not one the call left running in the background)
        answered the call: the entry stands for its final reply."""
        if self.done:
            return
        self.done = True
        text = result_text(content)
        pending = self.op.step
        if type(pending) is Pending and pending.served:
            # Answered from a replay's recording: the CLI's denial carried the recorded
            # result (the protocol marks it an error); the call ends as it did then.
            text, is_error = recorded_text(pending.plan), False
        scope = self.agent.scope
        sub = self.sub
        answer = sub.answer if sub is not None and sub.stopped_ns is not None else None
        scope.run.session.log_transcript_entry(
            scope.agent_id,
            {"role": "tool", "tool_call_id": self.id, "content": text},
            None if is_error else answer,
            at=self.op,
        )
        attributes = tool_payload(
            self.op.payloads, sc.GEN_AI_TOOL_CALL_RESULT, text, self.op.outcome
        )
        error = ToolError(text) if is_error else None
        end_tool_step(self.op, text, error)
        finish(self.op, error, attributes, ended_ns=now)

    def abandon(self, now: int) -> None:
        """End the span of a call that got no result (the exchange ended without one)."""
        if not self.done:
            self.done = True
            self.op.outcome.set_sizes(chars_out=0)
            finish(self.op, None, ended_ns=now)


class AgentRun:
    """One agent's run within an exchange: the main agent's, or a sub-agent's."""

    __slots__ = (
        "agent_id",
        "answer",
        "attempt",
        "background",
        "call",
        "calls",
        "current",
        "early",
        "ended",
        "inputs",
        "last_ns",
        "messages",
        "name",
        "pending",
        "prompt",
        "scope",
        "status",
        "stopped_ns",
        "summary",
        "task_id",
    )

    def __init__(self, scope: SessionScope, started_ns: int, call: ToolCall | None = None) -> None:
        self.scope = scope
        self.call = call
        self.name = scope.name
        self.current: Message | None = None
        self.messages: dict[str, Message] = {}
        self.pending: list[Message] = []
        """Complete messages whose span waits for the final usage."""
        self.calls: list[ToolCall] = []
        self.inputs: list[dict[str, Any]] = []
        """What the agent's next request adds to its conversation (input, tool results)."""
        self.last_ns = started_ns
        """When the agent last got something: its next request went out then."""
        self.attempt = 1
        """The attempt number of its next request (after failed ones the CLI retried)."""
        self.ended = False
        self.background = False
        self.task_id: str | None = None
        self.prompt: str | None = None
        self.stopped_ns: int | None = None
        """When a sub-agent's task ended (its span ends then, later: see the tracker)."""
        self.status: str | None = None
        self.answer: str | None = None
        """The message id of its last reply that called no tool: its answer so far."""
        self.summary: str | None = None
        """The text of its final reply, as the SDK's notice that it completed says it."""
        self.early: str | None = None
        """The message id of its final reply, logged from :attr:`summary` before the CLI's
        transcript gave the message (:meth:`report`); the message takes that id."""

    @classmethod
    def subagent(cls, call: ToolCall, conversation_id: str | None, now: int) -> AgentRun:
        """Start the sub-agent ``call`` (an ``Agent`` tool call) runs, under its span: a new
        agent, created by the message that holds the call (its ``cause``)."""
        kind = call.input.get("subagent_type")
        name = kind if isinstance(kind, str) and kind else "general-purpose"
        identity = Identity(name)
        with current(call.op):
            scope = start_session(name, owner=identity, started_ns=now)
        if conversation_id:
            scope.set_attribute(sc.GEN_AI_CONVERSATION_ID, conversation_id)
        run = cls(scope, now, call)
        prompt = call.input.get("prompt")
        if isinstance(prompt, str):
            run.prompt = prompt
            # The text the call passes on, as a tool's: a piece of text caused by the call.
            run.hear(prompt, piece_for(scope.run.session, call.op, prompt) if prompt else None)
        return run

    def hear(self, text: str, substance: str | None = None) -> None:
        """A user entry in the agent's transcript (its input), part of its next request."""
        entry = {"role": "user", "content": text}
        self.scope.run.session.log_transcript_entry(
            self.scope.agent_id, entry, substance, at=self.scope
        )
        self.inputs.append(entry)

    def report(self) -> None:
        """The sub-agent's call returned after it completed, before the CLI's transcript gave
        its final reply (the SDK does not yield it): log that reply now, from the text its
        completion notice gave (:attr:`summary`), so that the call's result can stand for it;
        the message takes this entry when the transcript is read."""
        if self.answer is not None or self.early is not None or not self.summary:
            return
        self.complete_current()
        entry = {"role": "assistant", "content": self.summary}
        self.early = self.answer = self.scope.run.session.log_transcript_entry(
            self.scope.agent_id, entry, at=self.scope
        )

    def take_inputs(self) -> list[dict[str, Any]]:
        inputs, self.inputs = self.inputs, []
        return inputs

    def message(self, message_id: str, model: str, usage: Any, now: int) -> Message:
        """The message ``message_id`` of this agent (started now if it is a new one)."""
        found = self.current
        if found is not None and found.id == message_id:
            return found
        self.complete_current()
        found = Message(self, message_id, model, usage, self.last_ns, self.attempt)
        self.attempt = 1
        self.messages[message_id] = found
        self.current = found
        return found

    def complete_current(self, finals: Mapping[str, Any] | None = None) -> None:
        """No more blocks will come for the current message: log its transcript entry (the
        id its tool calls point to) and end its span if its final usage is known."""
        message = self.current
        if message is None:
            return
        self.current = None
        self.complete(message, finals)

    def complete(self, message: Message, finals: Mapping[str, Any] | None = None) -> None:
        message.complete = True
        scope = self.scope
        entry = message.entry()
        if self.early is not None and "tool_calls" not in entry:
            # The final reply, logged already when its call returned (:meth:`report`).
            early, self.early = self.early, None
            message.entry_id = self._replace_early(early, entry, message.op)
        else:
            message.entry_id = scope.run.session.log_transcript_entry(
                scope.agent_id, entry, at=message.op
            )
            if entry.get("content") and "tool_calls" not in entry:
                self.answer = message.entry_id
        for call in self.calls:
            if call.op.call_message is None and any(
                block.get("id") == call.id for block in message.blocks
            ):
                call.op.call_message = message.entry_id
        self.last_ns = max(self.last_ns, message.last_ns)
        final = finals.get(message.id) if finals is not None else None
        if final is not None:
            message.set_final(*final)
            message.finish()
        else:
            self.pending.append(message)

    def _replace_early(self, early: str, entry: dict[str, Any], at: OpScope) -> str:
        """The entry of the final reply logged early (:meth:`report`) from the notice's text:
        that one if the reply says just that; else (the notice gave its last text block only)
        the transcript ends with the whole reply instead, a reset that keeps what came before
        it and stands for the same reply. Its message id."""
        session = self.scope.run.session
        record = session.agents.get(self.scope.agent_id)
        transcript = record.transcript if record is not None else []
        if (
            entry.get("content") == self.summary
            or not transcript
            or transcript[-1].get("message_id") != early
        ):
            return early
        session.log_transcript_reset(
            self.scope.agent_id, len(transcript) - 1, [entry], at=at, heard=lambda _: early
        )
        whole = transcript[-1].get("message_id")
        return whole if isinstance(whole, str) else early

    def settle(self, finals: Mapping[str, Any]) -> None:
        """End the spans of complete messages, with their final usage where it is known."""
        for message in self.pending:
            final = finals.get(message.id)
            if final is not None:
                message.set_final(*final)
            message.finish()
        self.pending = []

    def adopt(
        self,
        entries: list[Entry],
        finals: dict[str, Any],
        answered: Callable[[ToolCall], None],
    ) -> None:
        """A sub-agent's transcript, in order: final usage and stop reasons into ``finals``,
        the blocks the SDK did not yield into their messages, and the messages it yielded
        nothing of (its final report, and all of a nested sub-agent's) logged and traced now,
        with their tool calls, at the times the transcript gives. ``answered(call)`` is told
        of each such call just before its result is applied (a nested ``Agent`` call's
        sub-agent is traced then)."""
        previous_ns: int | None = None
        rebuilt: Message | None = None  # a message the SDK did not yield, being rebuilt
        calls = {call.id: call for call in self.calls}

        def complete_rebuilt() -> None:
            nonlocal rebuilt
            if rebuilt is not None:
                self.complete(rebuilt, finals)
                rebuilt = None

        for entry in entries:
            if isinstance(entry, CostState):
                continue
            if isinstance(entry, UserEntry):
                complete_rebuilt()
                at = entry.ts_ns or previous_ns or self.last_ns
                for result in entry.results:
                    call = calls.get(result.tool_use_id)
                    if call is not None and not call.done:
                        answered(call)
                        call.finish(result.content, result.is_error, at)
                previous_ns = entry.ts_ns or previous_ns
                continue
            finals[entry.message_id] = (entry.usage, entry.stop_reason)
            message = self.messages.get(entry.message_id)
            if message is not None and message is not rebuilt:
                message.adopt_blocks(entry.blocks)  # yielded in part (its tool calls)
            else:
                if message is None:
                    complete_rebuilt()
                    started = previous_ns or entry.ts_ns or self.last_ns
                    model = entry.model or "unknown"
                    message = Message(self, entry.message_id, model, entry.usage, started, 1)
                    self.messages[message.id] = message
                    rebuilt = message
                at = entry.ts_ns or message.last_ns
                for block in entry.blocks:
                    message.add(block, at)
                    if block_type(block) == "tool_use":
                        call_id, name = block.get("id"), block.get("name")
                        call = ToolCall(self, message, call_id, name, block.get("input"), at)
                        self.calls.append(call)
                        calls[call.id] = call
            previous_ns = entry.ts_ns or previous_ns
        complete_rebuilt()

    def end(self, now: int, error: BaseException | None = None, **extra: AttributeValue) -> None:
        """End the run's span (a sub-agent's: the main agent's run is the exchange's)."""
        if self.ended:
            return
        self.ended = True
        for call in self.calls:
            call.abandon(now)
        finish(self.scope, error, dict(extra), ended_ns=max(now, self.last_ns))
