"""The ``PreToolUse`` hook agenttrace adds to every traced ``query()`` and ``ClaudeSDKClient``:
a tool call's intent is on disk before the CLI runs the tool (docs/journal.md).

The CLI runs the tools, not this process, and asks each ``PreToolUse`` hook (through the SDK's
control protocol: a ``hook_callback`` request) before it runs one, with the tool's name, input
and ``tool_use_id`` (and ``agent_id`` inside a sub-agent). The hook answers at once:

- a call the program has received already (its ``tool_use`` message went through the tracker)
  was journaled then: nothing more to write;
- a call it has not received yet (the loop is busy elsewhere; a sub-agent's calls, which the
  CLI yields only after it started them) is journaled now, at the label its op is expected to
  get in its agent's run (the next op of the message under way, else op 2 of the agent's next
  turn: its chat attempt is op 1), with the same effect class and fingerprint; the op, made when
  the message comes, takes that step (:mod:`.claims`). A call whose agent the tracker does not
  know yet (a sub-agent of a sub-agent, whose messages the SDK never yields; an exchange whose
  first message the loop has not read) cannot be placed: nothing is written, a warning says so
  once, and the call runs, journaled as it is received (as before this hook).
- in a re-entered run (``agenttrace.resume``), a call the policy does not run again (in doubt,
  of class ``effect``, the CLI's tools having no verifier; or abandoned by ``agenttrace
  resolve``) is **denied**: the CLI does not run it and the model gets the reason (the call,
  and ``agenttrace resolve``) as the tool's error. A call the journal holds as done is not
  denied: the resumed CLI continues its own transcript, which already gave the model that
  call's result, so the same call asked again is the model's new request, and a denial would
  reach the model only as a failed call, never as the recorded result; it runs, journaled as
  the step's next attempt.

Otherwise the hook returns no decision: the CLI's permission rules, ``can_use_tool`` and the
user's own hooks (kept, run as before: the CLI runs the matchers of one event at once) decide.
Returning ``allow`` would skip ``can_use_tool`` and the permission prompt: it never does.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.runtime import runtime
from agenttrace.model import journal as j
from agenttrace.model import journal_lines as jl
from agenttrace.model.journal_lines import journal_bytes
from agenttrace.model.reentry import Reentry
from agenttrace.session.leases import token as lease_token
from agenttrace.tracing.journal.steps import Pending, Step, tool_request_json

from . import claims, replayed
from .agents import AgentRun, ToolCall
from .effects import tool_effect
from .tracker import SdkSession
from .utils import PRE_TOOL_USE, WHERE, deny, state, unplaced

EVENT = PRE_TOOL_USE


def journaling() -> bool:
    """Whether tool calls are journaled now (the hook is added only then)."""
    return runtime.recorder is not None and bool(runtime.settings.journal)


def with_hook(options: Any, session: SdkSession) -> Any:
    """A copy of the SDK ``options`` whose ``hooks`` have ours for ``session`` after the user's
    (the user's ``options`` are not changed); ``options`` as they are when the journal is off
    or they are not ``ClaudeAgentOptions``."""
    if options is None or not journaling() or not dataclasses.is_dataclass(options):
        return options
    from claude_agent_sdk import HookMatcher

    hooks = getattr(options, "hooks", None)
    merged: dict[str, list[Any]] = dict(hooks) if isinstance(hooks, Mapping) else {}
    ours = HookMatcher(hooks=[PreToolUse(session)])  # type: ignore[list-item]
    merged[EVENT] = [*merged.get(EVENT, []), ours]
    return dataclasses.replace(options, hooks=merged)  # type: ignore[type-var]


class PreToolUse:
    """The hook callback of one SDK session (the SDK awaits it with the hook's input, the
    ``tool_use_id`` and a context)."""

    __slots__ = ("session",)

    def __init__(self, session: SdkSession) -> None:
        self.session = session

    async def __call__(self, data: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        try:
            return self.decide(data, tool_use_id)
        except Exception as exc:  # ours: the call goes on, as if there were no hook
            report_internal_error(WHERE, exc)
            return {}

    def decide(self, data: Any, tool_use_id: str | None) -> dict[str, Any]:
        """The hook's answer: ``{}`` (no decision), or a denial."""
        if not state.enabled or runtime.disabled or not journaling():
            return {}
        if not isinstance(data, Mapping) or data.get("hook_event_name") != EVENT:
            return {}
        call_id = data.get("tool_use_id") or tool_use_id
        name = data.get("tool_name")
        if not isinstance(call_id, str) or not call_id or not isinstance(name, str):
            return {}
        call = self.session.calls.get(call_id)
        if call is not None:
            return _received(call)
        arguments = data.get("tool_input")
        agent_id = data.get("agent_id")
        return self.ahead(
            call_id,
            name,
            dict(arguments) if isinstance(arguments, Mapping) else {},
            agent_id if isinstance(agent_id, str) and agent_id else None,
        )

    def ahead(
        self, call_id: str, name: str, arguments: dict[str, Any], agent_id: str | None
    ) -> dict[str, Any]:
        """A call the program has not received yet: journaled at the label its op is expected
        to get (or denied, in a re-entered run)."""
        effect = tool_effect(name)
        if effect == "pure":
            return {}  # journals nothing anyway
        agent = self._agent(agent_id)
        if agent is None:
            unplaced("the CLI ran it in an agent the program has not received a message of yet")
            return {}
        run = agent.scope.run
        if claims.claimed(run.journal_run, call_id):
            return {}  # asked again: settled already
        label = _expected_label(agent, run.journal_run)
        if label is None:
            unplaced("its place in the agent's run could not be told before its message came")
            return {}
        fingerprint, arguments_json = tool_request_json(name, arguments)
        attempt = 1
        reentry = run.reentry
        if reentry is not None:
            plan = reentry.plan(label, name, fingerprint, call_id, arguments_json)
            if reentry.replay is not None and replayed.answers(plan):
                # A served call leaves the op its Pending: its span and `replayed` line.
                served = plan.what == "replay"
                pending = Pending(
                    plan, reentry, effect, fingerprint, arguments, arguments_json, None
                )
                pending.served = served
                if served:
                    replayed.copy_body(run.session, pending)
                claims.claim(call_id, run.journal_run, pending if served else None, label)
                return replayed.answer(plan)
            if plan.what in ("stop", "verify", "abandon"):
                claims.claim(call_id, run.journal_run, None)
                return deny(_refusal(reentry, plan.what, plan.step, name))
            label = plan.label or label
            attempt = plan.step.key[2] + 1 if plan.what == "replay" and plan.step else plan.attempt
        line = jl.intent_line(
            (run.journal_run, label, attempt),
            agent_id=agent.scope.agent_id,
            name=name,
            effect=effect,
            request_fingerprint=fingerprint,
            arguments=arguments_json,
            call_id=call_id,
            lease=lease_token(run.session),
        )
        runtime.recorder.journal(run.session, journal_bytes(line))  # type: ignore[union-attr]
        claims.claim(call_id, run.journal_run, Step((run.journal_run, label, attempt), effect))
        return {}

    def _agent(self, agent_id: str | None) -> AgentRun | None:
        """The run the call is made in: the sub-agent ``agent_id`` names (the SDK's task id of
        its ``Agent`` call), else the newest exchange's main agent; ``None`` if not known."""
        session = self.session
        if agent_id is not None:
            call_id = session.tasks.get(agent_id)
            sub = session.subagents.get(call_id) if call_id is not None else None
            if sub is None or sub.ended or sub.stopped_ns is not None:
                return None
            return sub
        return session.exchanges[-1].main if session.exchanges else None


def _received(call: ToolCall) -> dict[str, Any]:
    """A call the program received before the CLI asked: its intent is on disk already, unless
    a re-entry's journal decides it (a :class:`Pending` step on its op)."""
    op = call.op
    pending = op.step
    if type(pending) is not Pending:
        return {}
    plan = pending.plan
    if pending.reentry.replay is not None and replayed.answers(plan):
        if plan.what == "replay":
            replayed.served(op, pending)
        else:
            op.step = None  # denied: nothing runs, nothing is journaled
        return replayed.answer(plan)
    if plan.what == "replay" and plan.step is not None:
        run = op.session.run
        key = (run.journal_run, plan.label or op.label, plan.step.key[2] + 1)
        line = jl.intent_line(
            key,
            agent_id=op.session.agent_id,
            name=op.name,
            effect=pending.effect,
            request_fingerprint=pending.fingerprint,
            arguments=pending.arguments_json,
            call_id=call.id,
            lease=lease_token(run.session),
        )
        runtime.recorder.journal(run.session, journal_bytes(line))  # type: ignore[union-attr]
        op.step = Step(key, pending.effect)
        return {}
    op.step = None  # denied: nothing runs, nothing is journaled
    return deny(_refusal(pending.reentry, plan.what, plan.step, op.name))


def _refusal(reentry: Reentry, what: str, step: j.Step | None, name: str) -> str:
    """Why a re-entered run's call is denied, as the model (and the CLI's transcript) get it."""
    if what == "abandon":
        label = step.key[1] if step is not None else "?"
        return (
            f"agenttrace: the call of {name} at {label} was abandoned after an interruption "
            "(agenttrace resolve --abandon): it was not run again"
        )
    # ``verify`` too: the CLI's tools have no verifier, so the policy stops there.
    error = reentry.stopped or reentry.stop(step)
    return f"agenttrace: {error}"


_COUNT = re.compile(r"count\((\d+)\)")


def _peek(counter: Any) -> int | None:
    """The number ``next(counter)`` would give (an ``itertools.count``), without taking it."""
    found = _COUNT.fullmatch(repr(counter))
    return int(found.group(1)) if found else None


def _expected_label(agent: AgentRun, run: str) -> str | None:
    """The label the op of a call the CLI is about to run in ``agent`` is expected to get: the
    next op of the message under way (its other blocks came first), else op 2 of the agent's
    next turn (op 1 is the message's chat attempt); past any label claimed ahead already.
    ``None`` where it cannot be told (the agent's request was retried: its turn is open with
    failed attempts the hook cannot count)."""
    current = agent.current
    if current is not None and not current.complete:
        prefix, ordinal = current.op.turn.label, _peek(current.op.turn.op_counter)
    elif agent.attempt == 1:
        turn = _peek(agent.scope.turn_counter)
        if turn is None:
            return None
        prefix, ordinal = f"{agent.scope.prefix}{turn}", 2
    else:
        return None
    if ordinal is None:
        return None
    while claims.taken(run, f"{prefix}.{ordinal}"):
        ordinal += 1
    return f"{prefix}.{ordinal}"
