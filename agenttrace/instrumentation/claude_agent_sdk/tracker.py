"""One SDK session (a ``query()`` call, or a ``ClaudeSDKClient`` from connect to disconnect),
followed message by message as the program reads them.

Its exchanges (user input → the SDK's turns → its ``ResultMessage``) are agent runs: each
starts with the CLI's init ``SystemMessage`` and ends with a result. The CLI may hold a result
back while a background sub-agent runs and start the next exchange (the sub-agent's completion
notice) before it: results end the oldest exchange still open, messages go to the newest.

The SDK reports the session's cost and API time as running totals (a resumed session counts on
from the ``cost-state`` its transcript ends with); each run gets its exchange's share, the
difference from the previous result. The final output counts come from ``message_delta``
stream events when the program asked for them (``include_partial_messages=True``), else from the
CLI's transcript when the exchange (or the sub-agent) ends: see :mod:`.transcript`.

Nothing here changes a message or what the program receives; a failure of ours is reported
once and swallowed by the caller (:mod:`.patch`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from claude_agent_sdk import types as sdk
from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace._internal.capture import Output, captures
from agenttrace._internal.runtime import runtime
from agenttrace.tracing.llm_attributes import status_category, usage_attributes
from agenttrace.tracing.op_attributes import cost_span_attributes, error_span_attributes
from agenttrace.tracing.scopes import start_session

from . import transcript as tr
from .agents import AgentRun, Identity, ToolCall
from .messages import failed_attempt
from .utils import (
    API_ERROR_STATUS,
    BACKGROUND,
    CLI_VERSION,
    CWD,
    DURATION_API_MS,
    DURATION_MS,
    NUM_TURNS,
    PERMISSION_MODE,
    RESULT_SUBTYPE,
    SESSION_ID,
    STOP_REASON,
    SUBAGENT_TOOLS,
    TASK_ID,
    TERMINAL_REASON,
    TERMINAL_TASK,
    TOTAL_COST_USD,
    TOTAL_DURATION_API_MS,
    USER_INPUT,
    MessageLog,
    block_type,
    error_category,
    number,
    result_text,
    state,
)

MAX_FINALS = 10_000
"""Final usages kept for messages not ended yet (the oldest go first)."""


class ExchangeError(Exception):
    """An exchange whose ``ResultMessage`` has ``is_error`` (its subtype is the error type)."""


class Exchange:
    """One exchange: the main agent's run, from its init message to its result."""

    __slots__ = ("main",)

    def __init__(self, main: AgentRun) -> None:
        self.main = main


class SdkSession:
    """What one SDK session's messages build: runs, messages, tool calls, sub-agents."""

    def __init__(self, options: Any, owner: object = None, log: MessageLog | None = None) -> None:
        env = getattr(options, "env", None)
        self.env: dict[str, str] = dict(env) if isinstance(env, Mapping) else {}
        self.identity = owner if owner is not None else Identity(state.settings.agent_name)
        self.log = log
        self.exchanges: deque[Exchange] = deque()
        self.subagents: dict[str, AgentRun] = {}
        """Sub-agent runs by the id of the ``Agent`` call that runs them."""
        self.calls: dict[str, ToolCall] = {}
        self.tasks: dict[str, str] = {}
        """The ``Agent`` call id of each sub-agent task id."""
        self.unclaimed: dict[str, tuple[str, int, int | None, str | None]] = {}
        """Sub-agent tasks of calls the SDK did not yield, by call id: (task id, started,
        stopped, status)."""
        self.inputs: deque[tuple[str, int]] = deque()
        """User inputs sent and not yet taken by an exchange: (text, when)."""
        self.finals: dict[str, Any] = {}
        """Per message id: (final usage, stop reason), from stream events or transcripts."""
        self.streaming: dict[str | None, str] = {}
        """Per agent (its ``parent_tool_use_id``): the id of the message it is streaming."""
        self.session_id: str | None = None
        self.init: dict[str, Any] = {}
        self.model = "unknown"
        self.total_cost: float | None = None
        self.total_api_ms: float | None = None
        self.transcript: tr.TranscriptReader | None = None
        self.transcript_path: Path | None = None
        self.last_end_ns = self.last_seen_ns = time.time_ns()
        """When the previous exchange ended (or the session began): the next one began then,
        or when its input was sent, whichever came later."""
        self.closed = False

    # --- what the program sends -----------------------------------------------------------------

    def user_input(self, text: str) -> None:
        """The program sent ``text`` to the CLI (its exchange starts when the CLI takes it)."""
        self.inputs.append((text, time.time_ns()))

    # --- what the SDK yields --------------------------------------------------------------------

    def observe(self, message: Any) -> None:
        """Take one message the SDK yielded (as the program receives it)."""
        now = self.last_seen_ns = time.time_ns()
        try:
            if isinstance(message, sdk.StreamEvent):
                self._stream_event(message, now)
            elif isinstance(message, sdk.AssistantMessage):
                self._assistant(message, now)
            elif isinstance(message, sdk.UserMessage):
                self._user(message, now)
            elif isinstance(message, sdk.ResultMessage):
                self._result(message, now)
            elif isinstance(message, sdk.SystemMessage):
                self._system(message, now)
        finally:  # the exchange log gets every message, whatever tracing made of it
            if self.log is not None:
                self.log.log(message)

    def failed(self, error: BaseException) -> None:
        """The SDK raised ``error`` to the program: the exchanges open now failed with it."""
        now = time.time_ns()
        while self.exchanges:
            self._end_exchange(self.exchanges.popleft(), now, None, error)

    def close(self) -> None:
        """The SDK session is over (the stream ended, was closed, or the client disconnected):
        exchanges still open end as they are, without a result, when their last message came
        (a stream the program stopped reading is closed only when it is collected)."""
        if self.closed:
            return
        self.closed = True
        try:
            while self.exchanges:
                exchange = self.exchanges.popleft()
                exchange.main.scope.set_attribute(sc.STREAM_ABANDONED, True)
                self._end_exchange(exchange, self.last_seen_ns, None, None)
            self._settle_background(self.last_seen_ns, everyone=True)
        finally:
            if self.log is not None:
                self.log.close()

    # --- exchanges --------------------------------------------------------------------------------

    def _exchange(self, now: int) -> Exchange:
        """The newest open exchange (one is opened if none is: a stream without init)."""
        if not self.exchanges:
            self._open_exchange(now)
        return self.exchanges[-1]

    def _open_exchange(self, now: int) -> Exchange:
        text, sent = self.inputs.popleft() if self.inputs else (None, now)
        # Taken while another exchange runs (a background agent's notice): it starts now.
        started = now if self.exchanges else max(sent, self.last_end_ns)
        scope = start_session(
            self.identity_name(), owner=self.identity, model=self.init_model(), started_ns=started
        )
        attributes: dict[str, AttributeValue] = {}
        if self.session_id:
            attributes[sc.GEN_AI_CONVERSATION_ID] = self.session_id
            attributes[SESSION_ID] = self.session_id
        for key, name in (
            (CWD, "cwd"),
            (PERMISSION_MODE, "permissionMode"),
            (CLI_VERSION, "claude_code_version"),
        ):
            value = self.init.get(name)
            if isinstance(value, str) and value:
                attributes[key] = value
        if text is not None and captures(Output.SPAN, runtime.settings):
            attributes[USER_INPUT] = text  # capped and scrubbed by set_attribute
        for key, value in attributes.items():
            scope.set_attribute(key, value)
        main = AgentRun(scope, started)
        exchange = Exchange(main)
        self.exchanges.append(exchange)
        if text is not None:
            main.hear(text)
            if self.log is not None:
                self.log.log_user_input(text)
        return exchange

    def identity_name(self) -> str:
        name = getattr(self.identity, "name", None)
        return name if isinstance(name, str) and name else state.settings.agent_name

    def init_model(self) -> str | None:
        model = self.init.get("model")
        return model if isinstance(model, str) and model else None

    def _end_exchange(
        self,
        exchange: Exchange,
        now: int,
        result: sdk.ResultMessage | None,
        error: BaseException | None,
    ) -> None:
        main = exchange.main
        main.complete_current(self.finals)
        # The CLI's sub-agent transcripts are complete by the result, not when a sub-agent
        # ends: their messages are settled now, nested ones before those that ran them. A
        # background sub-agent still running goes on past the result when the SDK keeps the
        # session open for it (it does for hooks, ours included): it is settled by the first
        # result after its task ended, or when the session ends (:meth:`_settle_background`).
        for key, sub in reversed(list(self.subagents.items())):
            if not sub.ended and _main_of(sub) is main:
                if _in_background(sub) and not self.closed:
                    continue
                self._stop_subagent(key, now, None)
                self._finish_subagent(sub, now)
        if any(message.id not in self.finals for message in main.pending):
            self._read_transcript()
        main.settle(self.finals)
        attributes: dict[str, AttributeValue] = {}
        if result is not None:
            attributes.update(self._result_attributes(result))
            if result.is_error and error is None:
                text = result.result or "; ".join(result.errors or ()) or result.subtype
                error = ExchangeError(text)
                # An API error ends as subtype "success" with is_error: its reason says more.
                attributes.update(
                    error_span_attributes(
                        result.subtype
                        if result.subtype != "success"
                        else result.terminal_reason or "error_result"
                    )
                )
        self.last_end_ns = now
        main.end(now, error, **attributes)
        self._forget(main)
        self._settle_background(now)

    def _settle_background(self, now: int, everyone: bool = False) -> None:
        """Settle the background sub-agents whose exchange ended before them: those whose task
        ended (``everyone``: all, the session is over), then forget what their exchange left.
        Called at a result (the CLI's transcripts are complete by then) and at the end."""
        for key, sub in reversed(list(self.subagents.items())):
            main = _main_of(sub)
            if sub.ended or not main.ended or not (everyone or sub.stopped_ns is not None):
                continue
            self._stop_subagent(key, now, None)
            self._finish_subagent(sub, now)
            self._forget(main)

    def _forget(self, main: AgentRun) -> None:
        """Drop what an ended exchange's runs left here (a client's session may be long)."""
        for key, call in list(self.calls.items()):
            if _main_of(call.agent) is main and not _running(call.agent, self.subagents.get(key)):
                del self.calls[key]
                self.unclaimed.pop(key, None)
                sub = self.subagents.pop(key, None)
                if sub is not None and sub.task_id is not None:
                    self.tasks.pop(sub.task_id, None)

    def _result_attributes(self, result: sdk.ResultMessage) -> dict[str, AttributeValue]:
        attributes: dict[str, AttributeValue] = {
            RESULT_SUBTYPE: result.subtype,
            NUM_TURNS: result.num_turns,
            DURATION_MS: result.duration_ms,
        }
        if result.stop_reason:
            attributes[STOP_REASON] = result.stop_reason
        if result.terminal_reason:
            attributes[TERMINAL_REASON] = result.terminal_reason
        if result.api_error_status is not None:
            attributes[API_ERROR_STATUS] = result.api_error_status
        cost = number(result.total_cost_usd)
        if cost is not None:
            attributes[TOTAL_COST_USD] = cost
            previous = self.total_cost or 0.0
            # A total lower than the last one was counted afresh (a new CLI process).
            delta = round(cost - previous if cost >= previous else cost, 9)
            attributes.update(cost_span_attributes(delta))
            self.total_cost = cost
        api = number(result.duration_api_ms)
        if api is not None:
            attributes[TOTAL_DURATION_API_MS] = api
            previous = self.total_api_ms or 0.0
            attributes[DURATION_API_MS] = api - previous if api >= previous else api
            self.total_api_ms = api
        attributes.update(usage_attributes(result.usage))
        return attributes

    # --- messages ---------------------------------------------------------------------------------

    def _agent(self, parent_tool_use_id: str | None, now: int) -> AgentRun | None:
        """The run a message belongs to: a sub-agent's (started if this is its first
        message), else the newest exchange's main agent; ``None`` for a sub-agent that ended
        or a call not known (one of an exchange that ended): what it says is not traced."""
        if not parent_tool_use_id:
            return self._exchange(now).main
        sub = self.subagents.get(parent_tool_use_id)
        if sub is not None:
            return None if sub.stopped_ns is not None else sub
        call = self.calls.get(parent_tool_use_id)
        if call is not None and call.name in SUBAGENT_TOOLS:
            return self._start_subagent(call, now)
        return None

    def _start_subagent(self, call: ToolCall, now: int) -> AgentRun:
        # Its cause is the entry holding the call: logged first if the message is open.
        call.agent.complete_current(self.finals)
        sub = AgentRun.subagent(call, self.session_id, now)
        call.sub = sub
        self.subagents[call.id] = sub
        return sub

    def _stop_subagent(self, call_id: str, now: int, status: str | None) -> None:
        """The sub-agent's task ended: nothing more comes from it (its spans end with the
        exchange, when its transcript is complete, at the time it stopped)."""
        task = self.unclaimed.get(call_id)
        if task is not None and task[2] is None:
            self.unclaimed[call_id] = (task[0], task[1], now, status)
        sub = self.subagents.get(call_id)
        if sub is None or sub.stopped_ns is not None:
            return
        for key, child in list(self.subagents.items()):
            if child.call is not None and child.call.agent is sub:
                self._stop_subagent(key, now, None)
        sub.complete_current(self.finals)
        sub.stopped_ns = now
        sub.status = status

    def _finish_subagent(self, sub: AgentRun, now: int) -> None:
        entries = self._subagent_entries(sub)
        if entries:
            sub.adopt(entries, self.finals, lambda call: self._answered(call, now))
        elif any(message.id not in self.finals for message in sub.pending):
            self._read_transcript()  # sub-agents of old CLIs went to the session's file
        sub.settle(self.finals)
        attributes: dict[str, AttributeValue] = {}
        if sub.task_id:
            attributes[TASK_ID] = sub.task_id
        if sub.background:
            attributes[BACKGROUND] = True
        status = sub.status
        error = ExchangeError(f"sub-agent {status}") if status in ("failed", "killed") else None
        sub.end(sub.stopped_ns or now, error, **attributes)

    def _answered(self, call: ToolCall, now: int) -> None:
        """A tool call rebuilt from a sub-agent's transcript gets its result: if it ran a
        sub-agent the SDK said only had started (a nested one), that one is traced now."""
        self.calls[call.id] = call
        task = self.unclaimed.pop(call.id, None)
        if task is None or call.name not in SUBAGENT_TOOLS:
            return
        task_id, started_ns, stopped_ns, status = task
        sub = AgentRun.subagent(call, self.session_id, started_ns)
        call.sub = sub
        self.subagents[call.id] = sub
        sub.task_id = task_id
        sub.stopped_ns = stopped_ns or now
        sub.status = status
        self._finish_subagent(sub, now)

    def _assistant(self, message: sdk.AssistantMessage, now: int) -> None:
        agent = self._agent(message.parent_tool_use_id, now)
        if agent is None:
            return
        if message.error is not None:
            # The CLI's own message for a request that failed (model "<synthetic>").
            agent.complete_current(self.finals)
            text = "\n".join(
                str(getattr(b, "text", "")) for b in message.content if block_type(b) == "text"
            )
            failed_attempt(
                agent,
                self.init_model() or message.model,
                agent.last_ns,
                now,
                agent.attempt,
                error_category(message.error),
                text or str(message.error),
            )
            agent.attempt = 1
            agent.last_ns = now
            return
        message_id = message.message_id or f"{message.uuid or id(message)}"
        current = agent.message(message_id, message.model, message.usage, now)
        for block in message.content:
            current.add(block, now)
            if block_type(block) == "tool_use":
                call = ToolCall(
                    agent,
                    current,
                    getattr(block, "id", None),
                    getattr(block, "name", None),
                    getattr(block, "input", None),
                    now,
                )
                agent.calls.append(call)
                self.calls[call.id] = call

    def _user(self, message: sdk.UserMessage, now: int) -> None:
        agent = self._agent(message.parent_tool_use_id, now)
        if agent is None:
            return
        agent.complete_current(self.finals)
        content = message.content
        if isinstance(content, str):
            self._heard(agent, content)
        else:
            for block in content:
                kind = block_type(block)
                if kind == "tool_result":
                    self._tool_result(agent, block, now)
                elif kind == "text":
                    self._heard(agent, str(getattr(block, "text", "")))
        agent.last_ns = max(agent.last_ns, now)

    def _heard(self, agent: AgentRun, text: str) -> None:
        if text and text != agent.prompt:  # a sub-agent's prompt is echoed: logged already
            agent.hear(text)

    def _tool_result(self, agent: AgentRun, block: Any, now: int) -> None:
        call_id = getattr(block, "tool_use_id", None)
        call = self.calls.get(call_id) if isinstance(call_id, str) else None
        content = getattr(block, "content", None)
        if call is not None:
            sub = call.sub
            if sub is not None and sub.stopped_ns is None:
                sub.background = True  # the call returned while its agent runs on
            elif sub is not None and sub.status == "completed" and call.agent.call is None:
                # A sub-agent of the main agent: the SDK yielded its other messages, so its
                # final reply is the last of its transcript. (A deeper one's come from the
                # CLI's transcript when the exchange ends: its call's result gets no link.)
                sub.report()  # its final reply, which its call's result stands for
            call.finish(content, bool(getattr(block, "is_error", False)), now)
        agent.inputs.append(
            {"role": "tool", "tool_call_id": call_id, "content": result_text(content)}
        )

    def _result(self, message: sdk.ResultMessage, now: int) -> None:
        if message.session_id and self.session_id is None:
            self.session_id = message.session_id
        exchange = self.exchanges.popleft() if self.exchanges else self._pop_new(now)
        self._end_exchange(exchange, now, message, None)

    def _pop_new(self, now: int) -> Exchange:
        self._open_exchange(now)
        return self.exchanges.pop()

    def _system(self, message: sdk.SystemMessage, now: int) -> None:
        data = message.data if isinstance(message.data, Mapping) else {}
        subtype = message.subtype
        if subtype == "init":
            self._init(data, now)
        elif isinstance(message, sdk.TaskStartedMessage):
            call = self.calls.get(message.tool_use_id or "")
            if call is None and message.tool_use_id:
                # Called by a sub-agent whose messages the SDK does not yield (a nested one):
                # traced when its caller's transcript is read.
                self.unclaimed[message.tool_use_id] = (message.task_id, now, None, None)
                self.tasks[message.task_id] = message.tool_use_id
                return
            if call is None or call.name not in SUBAGENT_TOOLS:
                return
            sub = call.sub or self._start_subagent(call, now)
            sub.task_id = message.task_id
            self.tasks[message.task_id] = call.id
            if data.get("is_backgrounded") is True:
                sub.background = True
        elif isinstance(message, sdk.TaskNotificationMessage):
            if message.status in TERMINAL_TASK:
                call_id = message.tool_use_id or self.tasks.get(message.task_id, "")
                self._stop_subagent(call_id, now, message.status)
                ended = self.subagents.get(call_id)
                if ended is not None and isinstance(message.summary, str):
                    ended.summary = message.summary  # its final reply's text
        elif isinstance(message, sdk.TaskUpdatedMessage):
            if message.status in TERMINAL_TASK:
                self._stop_subagent(self.tasks.get(message.task_id, ""), now, message.status)
        elif subtype == "api_retry":
            parent = data.get("parent_tool_use_id")
            agent = self._agent(parent if isinstance(parent, str) else None, now)
            if agent is None:
                return
            agent.complete_current(self.finals)
            attempt = data.get("attempt")
            attempt = attempt if isinstance(attempt, int) and attempt >= 1 else agent.attempt
            status = data.get("error_status")
            failed_attempt(
                agent,
                self.init_model() or "unknown",
                agent.last_ns,
                now,
                attempt,
                status_category(status),
                f"API error {status}: {data.get('error')}",
            )
            agent.attempt = attempt + 1
            agent.last_ns = now

    def _init(self, data: Mapping[str, Any], now: int) -> None:
        self.init = dict(data)
        session_id = data.get("session_id")
        if isinstance(session_id, str) and session_id and self.session_id is None:
            self.session_id = session_id
            self._find_transcript(at_start=True)
        self._open_exchange(now)

    def _stream_event(self, message: sdk.StreamEvent, now: int) -> None:
        event = message.event if isinstance(message.event, Mapping) else {}
        key = message.parent_tool_use_id
        kind = event.get("type")
        if kind == "message_start":
            start = event.get("message")
            if isinstance(start, Mapping) and isinstance(start.get("id"), str):
                self.streaming[key] = start["id"]
        elif kind == "message_delta":
            message_id = self.streaming.get(key)
            delta = event.get("delta")
            if message_id is not None:
                stop = delta.get("stop_reason") if isinstance(delta, Mapping) else None
                self._final(message_id, event.get("usage"), stop if isinstance(stop, str) else None)
        elif kind == "message_stop":
            message_id = self.streaming.pop(key, None)
            agent = self.subagents.get(key) if key else None
            if agent is None and self.exchanges:
                agent = self.exchanges[-1].main
            if agent is not None and agent.current is not None and agent.current.id == message_id:
                agent.complete_current(self.finals)

    def _final(self, message_id: str, usage: Any, stop: str | None) -> None:
        if len(self.finals) >= MAX_FINALS:
            del self.finals[next(iter(self.finals))]
        self.finals[message_id] = (usage if isinstance(usage, Mapping) else None, stop)

    # --- the CLI's transcript ---------------------------------------------------------------------

    def _find_transcript(self, at_start: bool = False) -> None:
        """Find the session's transcript. ``at_start`` (the session's first init): what the
        file holds already is from earlier processes (a resumed session), so reading starts at
        its end, and the results count on from the totals of its last ``cost-state``."""
        if self.transcript is not None or self.session_id is None:
            return
        cwd = self.init.get("cwd")
        path = tr.session_file(
            tr.config_dir(self.env), cwd if isinstance(cwd, str) else None, self.session_id
        )
        if path is None:
            return
        self.transcript_path = path
        self.transcript = tr.TranscriptReader(path)
        if at_start:
            totals = self.transcript.skip_to_end()
            if totals is not None and self.total_cost is None:
                self.total_cost = totals.total_cost_usd
                self.total_api_ms = totals.total_api_ms

    def _read_transcript(self) -> None:
        self._find_transcript()
        if self.transcript is None:
            return
        for entry in self.transcript.read():
            if isinstance(entry, tr.AssistantEntry):
                self._final(entry.message_id, entry.usage, entry.stop_reason)

    def _subagent_entries(self, sub: AgentRun) -> list[tr.Entry]:
        if sub.task_id is None:
            return []
        self._find_transcript()
        if self.transcript_path is None:
            return []
        path = tr.subagent_file(self.transcript_path, sub.task_id)
        return tr.TranscriptReader(path).read() if path is not None else []


def _in_background(run: AgentRun) -> bool:
    """Whether ``run`` is (or runs under) a background sub-agent whose task has not ended."""
    while run.call is not None:
        if run.background and run.stopped_ns is None:
            return True
        run = run.call.agent
    return False


def _running(run: AgentRun, hosted: AgentRun | None) -> bool:
    """Whether a call of ``run`` (that runs ``hosted``, if it is an ``Agent`` call) belongs to
    a sub-agent still running after its exchange ended (see :meth:`SdkSession._end_exchange`)."""
    if hosted is not None and not hosted.ended:
        return True
    while run.call is not None:
        if not run.ended:
            return True
        run = run.call.agent
    return False


def _main_of(run: AgentRun) -> AgentRun:
    """The main agent's run a sub-agent was started from (through its ``Agent`` calls)."""
    while run.call is not None:
        run = run.call.agent
    return run
