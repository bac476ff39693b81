"""One assistant message (one message id) of one agent: its ``chat {model}`` span and its
transcript entry.

The SDK yields every content block of a message as an ``AssistantMessage`` of its own, all with
the same ``message_id`` and the usage of ``message_start``: a :class:`Message` gathers them
into one LLM attempt. Its span starts when the agent's request went out (the time of what the
agent got last: the user's input or its tool results) and ends when its last block came; its
usage is the one of ``message_start`` (input and cache counts) with the **final** output count,
from the ``message_delta`` stream event (``include_partial_messages=True``) or the CLI's
transcript. Until one of those gave it, the span stays open (it is ended with its own end time).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace.tracing.llm_attributes import (
    input_content,
    request_outcome,
    response_attributes,
)
from agenttrace.tracing.logs import thinking
from agenttrace.tracing.scopes import (
    OpScope,
    Scope,
    SessionScope,
    finish,
    make_current,
    start_op,
)

from .utils import OUTPUT_FINAL, PROVIDER, block_dict, block_type, field


class AgentRun(Protocol):
    """The run a message belongs to (``agents.AgentRun``)."""

    scope: SessionScope

    def take_inputs(self) -> list[dict[str, Any]]:
        """What its next request adds to the conversation (taken once)."""
        ...


@contextlib.contextmanager
def current(scope: Scope) -> Iterator[None]:
    """``scope`` current for the ``with`` body only (never across the user's loop)."""
    undo = make_current(scope)
    try:
        yield
    finally:
        undo()


class ModelError(Exception):
    """A failed model request the CLI reported (a synthetic error message, a retry)."""


class Message:
    """The blocks of one message id so far, and its span."""

    __slots__ = (
        "agent",
        "blocks",
        "complete",
        "done",
        "entry_id",
        "final_output",
        "id",
        "inputs",
        "last_ns",
        "model",
        "op",
        "stop_reason",
        "usage",
    )

    def __init__(
        self,
        agent: AgentRun,
        message_id: str,
        model: str,
        usage: Mapping[str, Any] | None,
        started_ns: int,
        attempt: int,
    ) -> None:
        self.agent = agent
        self.id = message_id
        self.model = model
        self.usage: dict[str, Any] = dict(usage) if isinstance(usage, Mapping) else {}
        self.final_output: int | None = None
        self.stop_reason: str | None = None
        self.blocks: list[dict[str, Any]] = []
        self.inputs = agent.take_inputs()
        self.entry_id: str | None = None
        self.complete = False  # no more blocks will come
        self.done = False  # its span ended
        self.last_ns = started_ns
        with current(agent.scope):
            self.op: OpScope = start_op(
                sc.KIND_LLM,
                sc.SPAN_LLM.format(model=model),
                None,
                new_turn=attempt == 1,  # a retry stays in the turn of its failed attempt
                started_ns=started_ns,
                outcome=request_outcome(model, PROVIDER, attempt),
            )

    def add(self, block: Any, now: int) -> None:
        """One more content block of the message."""
        self.last_ns = now
        plain = block_dict(block)
        if plain is None:
            return
        self.blocks.append(plain)
        if plain["type"] == "thinking" and isinstance(plain["thinking"], str):
            with current(self.op):
                thinking(plain["thinking"])

    def tool_calls(self) -> list[dict[str, Any]]:
        """The message's tool calls, in the transcript's shape."""
        return [
            {
                "id": block["id"],
                "function": {"name": block["name"], "arguments": json.dumps(block["input"])},
            }
            for block in self.blocks
            if block["type"] == "tool_use"
        ]

    def entry(self) -> dict[str, Any]:
        """The agent's transcript entry for the message (text, and tool calls)."""
        texts = [b["text"] for b in self.blocks if b["type"] == "text" and b["text"]]
        entry: dict[str, Any] = {"role": "assistant"}
        if texts:
            entry["content"] = "\n".join(texts)
        calls = self.tool_calls()
        if calls:
            entry["tool_calls"] = calls
        return entry

    def set_final(self, usage: Mapping[str, Any] | None, stop_reason: str | None) -> None:
        """The message's final usage (a ``message_delta`` or a transcript entry)."""
        output = field(usage, "output_tokens") if usage is not None else None
        if isinstance(output, int) and not isinstance(output, bool):
            self.final_output = output
        if stop_reason is not None:
            self.stop_reason = stop_reason

    def adopt_blocks(self, blocks: list[Mapping[str, Any]]) -> None:
        """Blocks the transcript has and the SDK did not yield (a sub-agent's text)."""
        seen = {json.dumps(b, sort_keys=True, default=str) for b in self.blocks}
        for block in blocks:
            plain = block_dict(dict(block)) if block_type(block) else None
            if plain is not None and json.dumps(plain, sort_keys=True, default=str) not in seen:
                self.blocks.append(plain)

    def finish(self) -> None:
        """End the span (once), at the time its last block came."""
        if self.done:
            return
        self.done = True
        finish(self.op, None, self._attributes, ended_ns=self.last_ns)

    def _attributes(self) -> dict[str, AttributeValue]:
        usage = dict(self.usage)
        final = self.final_output is not None
        if final:
            usage["output_tokens"] = self.final_output
        else:  # message_start's count (1) is not the message's: leave it unknown
            usage.pop("output_tokens", None)
        response: dict[str, Any] = {
            "id": self.id,
            "model": self.model,
            "role": "assistant",
            "content": self.blocks,
            "usage": usage,
        }
        if self.stop_reason:
            response["stop_reason"] = self.stop_reason
        payloads = self.op.payloads
        attributes = input_content(self.inputs, payloads) if self.inputs else {}
        attributes.update(response_attributes(response, self.op.outcome, payloads))
        if not final:
            attributes[OUTPUT_FINAL] = False
        return attributes


def failed_attempt(
    agent: AgentRun,
    model: str,
    started_ns: int,
    ended_ns: int,
    attempt: int,
    category: str,
    description: str,
) -> None:
    """A model request that failed (the CLI retries it, or gave up): a failed LLM attempt."""
    with current(agent.scope):
        op = start_op(
            sc.KIND_LLM,
            sc.SPAN_LLM.format(model=model),
            None,
            new_turn=attempt == 1,
            started_ns=started_ns,
            outcome=request_outcome(model, PROVIDER, attempt),
        )
    op.outcome.set_error(category)
    finish(op, ModelError(description), ended_ns=ended_ns)
