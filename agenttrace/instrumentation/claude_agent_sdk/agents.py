"""An agent's part of an exchange (the main agent, or a sub-agent the ``Agent`` tool ran) and
the tool calls its messages make: the spans and transcript entries they get.

- An :class:`AgentRun` is the main agent's run of one exchange (its scope is the exchange's
  ``invoke_agent`` span) or one sub-agent's run (a session nested under its ``Agent`` call's
  span). It gathers its messages (:class:`~.messages.Message`), logs each as its transcript's
  assistant entry once complete, and keeps the messages whose final usage is still to come.
- A :class:`ToolCall` is one ``tool_use`` block: an ``execute_tool {name}`` span from the block
  to its ``tool_result``, with the call id, the input, the result (capped and redacted, in the
  saved state; on the span with content capture) and ``is_error`` as the span's status.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace.tracing.content import tool_payload
from agenttrace.tracing.scopes import OpScope, SessionScope, finish, start_op, start_session

from .messages import Message, current
from .transcript import CostState, Entry, UserEntry
from .utils import block_type, mcp_server_of, result_text


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
        attributes = tool_payload(
            payloads, sc.GEN_AI_TOOL_CALL_ARGUMENTS, sc.TOOL_CHARS_IN, self.input
        )
        attributes[sc.GEN_AI_TOOL_CALL_ID] = self.id
        server = mcp_server_of(self.name)
        if server is not None:
            attributes[sc.TOOL_MCP_SERVER] = server
        # In the message's turn, a sibling of its chat span (not a child of it).
        with current(message.op.turn):
            self.op: OpScope = start_op(sc.KIND_TOOL, self.name, attributes, started_ns=now)
        self.op.payloads.update(payloads)
        self.op.call_id = self.id

    def finish(self, content: Any, is_error: bool, now: int) -> None:
        """The call's ``tool_result`` came: log it as the caller's tool entry, end the span."""
        if self.done:
            return
        self.done = True
        text = result_text(content)
        scope = self.agent.scope
        scope.run.session.log_transcript_entry(
            scope.agent_id,
            {"role": "tool", "tool_call_id": self.id, "content": text},
            at=self.op,
        )
        attributes = tool_payload(
            self.op.payloads, sc.GEN_AI_TOOL_CALL_RESULT, sc.TOOL_CHARS_OUT, text
        )
        finish(self.op, ToolError(text) if is_error else None, attributes, ended_ns=now)

    def abandon(self, now: int) -> None:
        """End the span of a call that got no result (the exchange ended without one)."""
        if not self.done:
            self.done = True
            finish(self.op, None, {sc.TOOL_CHARS_OUT: 0}, ended_ns=now)


class AgentRun:
    """One agent's run within an exchange: the main agent's, or a sub-agent's."""

    __slots__ = (
        "agent_id",
        "attempt",
        "background",
        "call",
        "calls",
        "current",
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
            run.hear(prompt)
        return run

    def hear(self, text: str) -> None:
        """A user entry in the agent's transcript (its input), part of its next request."""
        entry = {"role": "user", "content": text}
        self.scope.run.session.log_transcript_entry(self.scope.agent_id, entry, at=self.scope)
        self.inputs.append(entry)

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
        message.entry_id = scope.run.session.log_transcript_entry(
            scope.agent_id, message.entry(), at=message.op
        )
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
