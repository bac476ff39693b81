"""Tool calls in the step journal (docs/journal.md), and what a running tool call can ask about
its own step.

A tool call whose effect class is not ``pure`` writes an ``intent`` line before its body runs
(on disk: a kill that comes next finds it) and a ``done`` or ``failed`` line when it ends. A
``pure`` call only computes from its arguments: running it again after a crash is harmless, so
it journals nothing. ``AGENTTRACE_JOURNAL=false`` (``init(journal=False)``) turns the journal
off.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from agenttrace import semconv as sc
from agenttrace._internal.caps import fits
from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.redact import cap_text
from agenttrace._internal.runtime import runtime
from agenttrace.model import journal as j
from agenttrace.model import journal_lines as jl
from agenttrace.model.journal_lines import JOURNAL_RESULT_BYTES, journal_bytes
from agenttrace.model.reentry import AbandonedToolCall, Plan, Reentry, Verdict
from agenttrace.session.leases import token as lease_token
from agenttrace.session.replay import copy_served_body
from agenttrace.tracing.journal.tool_results import (
    NotRebuilt,
    Returns,
    gives_back,
    stream_gives_back,
    stream_parts,
)
from agenttrace.tracing.scopes import OpScope, current_scope

Effect = Literal["pure", "read", "idempotent", "effect"]
WHERE = "step journal"


def idempotency_key() -> str | None:
    """The idempotency key of the tool call running now: the same for each of its attempts and
    on every resume of its run (session, run, step label and tool), so an API that honours an
    ``Idempotency-Key`` header does the call's effect once however often it is sent. ``None``
    outside a tool call agenttrace traces (or with agenttrace off): send none then.

    The key stays yours and the journal's: agenttrace never puts it on a span, a log, a console
    line, a metric or an export.
    """
    scope = current_scope()
    if not isinstance(scope, OpScope) or scope.kind == sc.KIND_LLM:
        return None
    run = scope.session.run
    # A call a re-entry matched to a step at another place (parallel calls that started in
    # another order) keeps that step's label, and so its key.
    step = scope.step
    if type(step) is Step:
        label = step.key[1]
    elif type(step) is Pending:  # answered, verified or stopped: the journal's step's place
        label = step.plan.label or scope.label
    else:
        label = scope.label
    return j.idempotency_key(run.session_id, run.journal_run, label, scope.name)


def check_effect(effect: str) -> Effect:
    """``effect`` if it is an effect class, else a ``ValueError`` naming them."""
    if effect not in j.EFFECTS:
        raise ValueError(f"effect must be one of {', '.join(j.EFFECTS)}, not {effect!r}")
    return effect  # type: ignore[return-value]


@dataclass(slots=True)
class Step:
    """A tool call's step, while it runs."""

    key: jl.StepKey
    effect: str
    returns: Returns | None = None
    """What the tool's function returns, as its annotation says (a decorated function's)."""


@dataclass(slots=True)
class Pending:
    """A re-entered run's tool call that the journal answers, refuses or leaves to the tool's
    verifier: settled by :func:`settle` where the body would run."""

    plan: Plan
    reentry: Reentry
    effect: str
    fingerprint: str
    arguments: Any
    arguments_json: str
    """The arguments as the journal keeps them (:func:`tool_request_json`)."""
    verifier: Callable[..., Any] | None
    served: bool = False
    """It was answered (from the journal, or by its verifier): the body did not run."""


def begin_tool_step(
    scope: OpScope, effect: str, arguments: Any, verifier: Callable[..., Any] | None = None
) -> None:
    """Journal the tool call ``scope`` is about to make (its ``intent``), unless it is pure
    or the journal is off; the line is written before this returns. In a re-entered run, the
    journal may answer the call instead (a :class:`Pending` on ``scope.step``)."""
    recorder = runtime.recorder
    if effect == "pure" or recorder is None or not runtime.settings.journal:
        return
    try:
        run = scope.session.run
        request_fingerprint, text = tool_request_json(scope.name, arguments)
        label, attempt = scope.label, 1
        reentry = run.reentry
        if reentry is not None:
            plan = reentry.plan(scope.label, scope.name, request_fingerprint, scope.call_id, text)
            if plan.what != "run":
                scope.step = Pending(
                    plan, reentry, effect, request_fingerprint, arguments, text, verifier
                )
                return
            label, attempt = plan.label or scope.label, plan.attempt
        _intent(scope, (run.journal_run, label, attempt), effect, request_fingerprint, text)
    except Exception as exc:
        report_internal_error(WHERE, exc)


def _intent(
    scope: OpScope,
    key: jl.StepKey,
    effect: str,
    request_fingerprint: str,
    arguments_json: str,
    returns: Returns | None = None,
) -> None:
    recorder = runtime.recorder
    if recorder is None:
        return
    line = jl.intent_line(
        key,
        agent_id=scope.session.agent_id,
        name=scope.name,
        effect=effect,
        request_fingerprint=request_fingerprint,
        arguments=arguments_json,
        call_id=scope.call_id,
        lease=lease_token(scope.session.run.session),
        path=scope.label,
    )
    recorder.journal(scope.session.run.session, journal_bytes(line))
    scope.step = Step(key, effect, returns)


def pending_step(returns: Returns | None = None) -> Pending | None:
    """The current tool call's :class:`Pending` step, if the journal decides it (a re-entered
    run); ``None`` for every other call (its body just runs). ``returns``: what the tool's
    function returns, for the journal to check that its result can be given back."""
    scope = current_scope()
    step = getattr(scope, "step", None)
    if type(step) is Step:
        step.returns = returns
        return None
    return step if type(step) is Pending else None


def answered(pending: Pending, returns: Returns | None = None) -> tuple[bool, Any]:
    """Where the body of a tool call the journal decides would run: (True, the recorded result
    as the tool returned it: the body does not run), or (False, None) when that result cannot
    be rebuilt (``returns``: the function's annotation does not take it) and the call's class
    runs again (its new attempt is journaled: the body runs next); else the error that stops or
    refuses it. ``verify`` is left to the caller (the verifier may be a coroutine): see
    :func:`verified`."""
    plan = pending.plan
    if plan.what == "replay" and returns is not None:
        try:
            return True, _served(pending, returns.rebuild(plan.result))
        except NotRebuilt as error:
            _unanswerable(pending, returns, str(error))  # raises unless the body runs again
            return False, None
    return True, settle(pending)


def answered_stream(
    pending: Pending, returns: Returns | None = None
) -> tuple[bool, list[Any], Any]:
    """:func:`answered` for a generator tool: (True, the items it yielded, the value it
    returned) as recorded, or (False, [], None) when its returned value cannot be rebuilt and
    the call runs again; else the error that stops or refuses it."""
    plan = pending.plan
    if plan.what != "replay":
        settle(pending)  # raises: only a replayed call is answered
    items, returned = stream_parts(plan.result)
    if returned is not None and returns is not None:
        try:
            returned = returns.rebuild(returned)
        except NotRebuilt as error:
            _unanswerable(pending, returns, str(error))  # raises unless the body runs again
            return False, [], None
    return True, items, _served(pending, returned)


def _served(pending: Pending, result: Any) -> Any:
    pending.served = True
    scope = current_scope()
    if isinstance(scope, OpScope):
        scope.set_attribute(sc.REPLAYED, True)
        # The body does not run: a replay's session gets what it logged in the recording now,
        # and only now (a call that runs live instead logs its own).
        try:
            session = scope.session.run.session
            copy_served_body(
                session, pending.reentry, pending.plan.step, scope.call_message, at=scope
            )
        except Exception as exc:
            report_internal_error(WHERE, exc)
    return result


def _unanswerable(pending: Pending, returns: Returns, why: str) -> None:
    """A done call whose recorded result cannot be given back: run again (as its next attempt)
    if its class's policy is ``retry``, else the resume stops."""
    scope = current_scope()
    if _retried(pending) and isinstance(scope, OpScope):
        _run_again(scope, pending, returns)
        return
    raise pending.reentry.stopped or pending.reentry.stop(pending.plan.step, why)


def _retried(pending: Pending) -> bool:
    """Whether the policy runs the call again: its step's effect class (the class the call
    declares, where the journal has no step) is ``retry``."""
    step = pending.plan.step
    effect = step.effect if step is not None else pending.effect
    return pending.reentry.policy.get(effect) == "retry"


def _run_again(scope: OpScope, pending: Pending, returns: Returns | None = None) -> None:
    """Journal the call's next attempt at its place (its intent, now): the body runs next."""
    plan, step = pending.plan, pending.plan.step
    effect = step.effect if step is not None else pending.effect
    attempt = step.key[2] + 1 if step is not None else plan.attempt
    key = (scope.session.run.journal_run, plan.label or scope.label, attempt)
    _intent(scope, key, effect, pending.fingerprint, pending.arguments_json, returns)


def settle(pending: Pending) -> Any:
    """Where the body of a tool call the journal decides would run: the recorded result as it
    was kept (the body does not run), or the error that refuses it (see :func:`answered`)."""
    plan = pending.plan
    scope = current_scope()
    if plan.what == "replay":
        return _served(pending, plan.result)
    if plan.what == "diverge":  # a strict replay: the recording does not answer this call
        raise plan.result
    if plan.what == "abandon":
        label = plan.step.key[1] if plan.step is not None else "?"
        name = scope.name if isinstance(scope, OpScope) else "tool"
        raise AbandonedToolCall(
            f"the call of {name} at {label} was abandoned after an interruption "
            "(agenttrace resolve --abandon): it was not run again"
        )
    raise pending.reentry.stopped or pending.reentry.stop(plan.step)


def verified(pending: Pending, verdict: Any, returns: Returns | None = None) -> tuple[bool, Any]:
    """Take a verifier's verdict on the call in doubt: (True, the result to return) when it
    happened (journaled as the user's decision would be), (False, None) when it did not (its
    new attempt is journaled: the body runs next); else the error that stops the resume."""
    scope = current_scope()
    plan = pending.plan
    if not isinstance(verdict, Verdict):
        raise TypeError(f"a tool's verifier returns an agenttrace.Verdict, not {verdict!r}")
    if verdict.outcome == "done" and isinstance(scope, OpScope):
        recorder = runtime.recorder
        if recorder is not None and plan.step is not None:
            line = jl.decision_line(
                plan.step.key,
                "done",
                result=journal_json(verdict.result),
                evidence="the tool's verifier",
            )
            recorder.journal(scope.session.run.session, journal_bytes(line))
        return True, _served(pending, verdict.result)
    if verdict.outcome == "not_applied" and isinstance(scope, OpScope):
        run = scope.session.run
        key = (run.journal_run, plan.label or scope.label, plan.attempt)
        _intent(scope, key, pending.effect, pending.fingerprint, pending.arguments_json, returns)
        return False, None
    raise pending.reentry.stopped or pending.reentry.stop(plan.step)


def block_step(scope: OpScope) -> BaseException | None:
    """For a tool written as a ``with`` block, whose block cannot be skipped: a step the journal
    decides runs again if its class's policy is ``retry`` (its next attempt journaled now);
    else the error the ``with`` statement raises before the block runs."""
    pending = scope.step
    if type(pending) is not Pending:
        return None
    plan = pending.plan
    if plan.what == "diverge":
        scope.step = None
        return plan.result  # type: ignore[no-any-return]
    if plan.what == "abandon":
        try:
            settle(pending)
        except AbandonedToolCall as error:
            return error
    if plan.what != "stop" and _retried(pending):
        _run_again(scope, pending)
        return None
    scope.step = None
    return pending.reentry.stopped or pending.reentry.stop(plan.step)


def end_tool_step(
    scope: OpScope, result: Any, error: BaseException | None, *, streamed: bool = False
) -> None:
    """Journal how the tool call ended (``done`` with its result, or ``failed``), if its
    intent was journaled; a call the journal answered is journaled as ``replayed``.
    ``streamed``: a generator tool, whose ``result`` is its items and returned value
    (``tool_results.stream_result``)."""
    step = scope.step
    recorder = runtime.recorder
    if step is None or recorder is None:
        return
    scope.step = None
    try:
        agent_id = scope.session.agent_id
        lease = lease_token(scope.session.run.session)
        if type(step) is Pending:
            if step.served and error is None and step.plan.step is not None:
                # At the run's own key: a re-entry's is the step's; a replay's, its new run's.
                _, label, attempt = step.plan.step.key
                key = (scope.session.run.journal_run, label, attempt)
                line = jl.replayed_line(key, agent_id=agent_id, kind="tool", name=scope.name)
                recorder.journal(scope.session.run.session, jl.encoded_later(line), later=True)
            return
        if error is None:
            text, capped = kept_json(result)
            line = jl.done_line(
                step.key,
                agent_id=agent_id,
                kind="tool",
                name=scope.name,
                result=text,
                capped=capped,
                lease=lease,
                replayable=capped
                or (
                    stream_gives_back(step.returns, result)
                    if streamed
                    else gives_back(step.returns, result, text)
                ),
            )
        else:
            line = jl.failed_line(
                step.key,
                agent_id=agent_id,
                kind="tool",
                name=scope.name,
                error=cap_text(f"{type(error).__name__}: {error}", _cap()),
                applied=_applied(step.effect, error),
                lease=lease,
            )
        # Written in the background: what must be on disk before the body runs is the intent.
        # A kill before this line is written leaves a call that ended in doubt: resumed with
        # care, never run again as if it had not happened.
        recorder.journal(scope.session.run.session, jl.encoded_later(line), later=True)
    except Exception as exc:
        report_internal_error(WHERE, exc)


def _applied(effect: str, error: BaseException) -> Literal["no", "unknown"]:
    """Whether a failed call's effect happened: ``no`` for a call with none (``read``), or when
    the exception says so (an ``effect_applied`` attribute that is ``False``); else unknown."""
    if effect in ("pure", "read") or getattr(error, "effect_applied", None) is False:
        return "no"
    return "unknown"


def journal_json(value: Any) -> str:
    """``value`` as JSON text (verbatim: the journal is state, like the transcript; a string as
    a JSON string, so a replay gives back what the tool returned), capped."""
    try:
        text = _ENCODE(value).decode("utf-8", "surrogatepass")
    except (TypeError, ValueError, OverflowError, UnicodeDecodeError):
        text = json.dumps(value, ensure_ascii=False, default=_jsonable)
    return _capped(text)


def tool_request_json(name: str, arguments: Any) -> tuple[str, str]:
    """A tool call's request fingerprint and its arguments as the journal's ``intent`` keeps
    them, from one serialisation of the arguments on the caller's thread: their canonical JSON
    (sorted keys) is hashed for the fingerprint and is the ``arguments`` text. Arguments that
    are not plain data (a pydantic model) are serialised twice, as the fingerprint (their
    ``str``) and the journal (their JSON dump) count them differently.

    The span's payload is not this text: it is the arguments as the call gave them (in their
    order), redacted and capped, made off the caller's thread unless the span carries it
    (``tracing/content.py``)."""
    plain = arguments if type(arguments) is dict else _plain(arguments)
    request_fingerprint, data = j.tool_call_request(name, plain)
    if data is None:
        return request_fingerprint, journal_json(arguments)
    try:
        return request_fingerprint, _capped(data.decode("utf-8", "surrogatepass"))
    except UnicodeDecodeError:
        return request_fingerprint, journal_json(arguments)


def _capped(text: str) -> str:
    return text if len(text) <= _cap() // 4 else cap_text(text, _cap(), _as_is)


def kept_json(value: Any) -> tuple[str, bool]:
    """``value`` as JSON text as the journal keeps a result: whole, or cut past
    :data:`JOURNAL_RESULT_BYTES` (then ``True``)."""
    try:
        text = _ENCODE(value).decode("utf-8", "surrogatepass")
    except (TypeError, ValueError, OverflowError, UnicodeDecodeError):
        text = json.dumps(value, ensure_ascii=False, default=_jsonable)
    if len(text) <= JOURNAL_RESULT_BYTES // 4 or fits(text, JOURNAL_RESULT_BYTES):
        return text, False
    return cap_text(text, JOURNAL_RESULT_BYTES, _as_is), True


def _plain(arguments: Any) -> Any:
    return dict(arguments) if hasattr(arguments, "items") else arguments


def _as_is(text: str) -> str:
    return text


def _cap() -> int:
    return runtime.settings.max_payload_bytes


def _jsonable(value: Any) -> Any:
    """What msgspec cannot encode itself, as JSON data: a pydantic model as its JSON dump
    (a re-entry rebuilds it from that), anything else as its ``str``."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        try:
            return dump(mode="json")
        except Exception:
            pass
    return str(value)


_ENCODE = msgspec.json.Encoder(enc_hook=_jsonable).encode
"""JSON in C, non-ASCII text as UTF-8 (as the event stream writes it)."""
