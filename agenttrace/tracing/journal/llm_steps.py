"""LLM attempts in the step journal (docs/journal.md), and answering them from it on a re-entry.

Every LLM attempt claims its step when it starts: an ``intent`` line (kind ``llm``, named by its
model, with its request's fingerprint) written in the caller, so the stream shows the call as
running at once (one write: not flushed to the disk first, since a request sent twice costs
money, not a second effect). Its ``done`` line keeps the exact response (a stream's chunks in
order), built and written by the background thread: the caller pays for the fingerprint and
one write. The fingerprint hashes only the messages the agent's last request did not send
(``agenttrace.model.request_digests``). In a re-entered run, an attempt the journal holds as
done with the same request is answered from it: the model is not called.

The callers: litellm's attempts (:func:`begin_llm_step`; the OpenAI SDK's retries inside one
call, :func:`begin_llm_retry`), and the calls of an ``@agenttrace.llm`` function and its
``with`` blocks (:func:`begin_call_step`), whose stream, if it yields one, is journaled chunk by
chunk (:func:`keep_chunk`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.redact import cap_text
from agenttrace._internal.runtime import runtime
from agenttrace.model import journal as j
from agenttrace.model import journal_lines as jl
from agenttrace.model.journal_lines import journal_bytes
from agenttrace.model.replay import ReplayDivergence
from agenttrace.model.request_digests import llm_request_fingerprint, memory_of
from agenttrace.tracing.journal.steps import WHERE
from agenttrace.tracing.scopes import OpScope, current_scope


@dataclass(slots=True)
class LLMStep:
    """An LLM attempt's step, while it runs."""

    key: jl.StepKey
    replayed: bool = False
    """It was answered from the journal: its outcome is journaled as ``replayed``."""
    model: str = ""
    recorded: j.Step | None = None
    """The journal's step that answers it (when ``replayed``)."""
    fingerprint: str = ""
    """Its request's: the next attempt of the same call (a retry) is journaled under it."""
    chunks: list[Any] | None = None
    """The items an ``@agenttrace.llm`` function's stream yielded so far (one past
    :data:`~agenttrace.model.journal_lines.JOURNAL_CHUNKS` at most: then the response is capped)."""


class ReplayedFailure(Exception):
    """How a re-entered run's LLM attempt ends when the journal answers it with its recorded
    failure (one the call was retried after: the next attempt is answered in turn). Its
    message is the recorded error."""


def begin_llm_step(
    scope: OpScope, model: str, kwargs: Mapping[str, Any], *, failures: bool = False
) -> j.Step | None:
    """Journal the LLM attempt ``scope`` starts (its ``intent``, written now). In a re-entered
    run, the journal's step if it answers this attempt (the response is not asked for): done,
    or, when the caller takes ``failures``, failed and asked again at the next place (the
    caller ends the attempt with :class:`ReplayedFailure` and goes on to the next attempt).

    A strict replay raises :class:`~agenttrace.model.replay.ReplayDivergence` when the
    recording does not answer the attempt: the caller ends the attempt with it."""
    if runtime.recorder is None or not runtime.settings.journal:
        return None
    try:
        request = j.llm_request(kwargs)
        return _begin(scope, model, _request_fingerprint(scope, request), True, failures, request)
    except ReplayDivergence:
        raise
    except Exception as exc:
        report_internal_error(WHERE, exc)
    return None


def begin_call_step(
    scope: OpScope,
    model: str,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    answer: bool = True,
) -> j.Step | None:
    """:func:`begin_llm_step` for a call of an ``@agenttrace.llm`` function: its request is its
    model and arguments (:func:`call_request`). ``answer=False``: it cannot be answered from the
    journal (a ``with`` block, whose body runs whatever the journal holds): in a re-entered run
    it is journaled as the next attempt at its place."""
    if runtime.recorder is None or not runtime.settings.journal:
        return None
    try:
        request = call_request(model, args, kwargs)
        return _begin(scope, model, _request_fingerprint(scope, request), answer, request=request)
    except ReplayDivergence:
        raise
    except Exception as exc:
        report_internal_error(WHERE, exc)
    return None


def begin_llm_retry(scope: OpScope, model: str, fingerprint: str | None) -> None:
    """Journal the next attempt of a call whose request the OpenAI SDK sends again (its
    ``fingerprint``: the first attempt's, see :func:`step_fingerprint`). It is never answered
    from the journal: the SDK is sending it."""
    if fingerprint is None or runtime.recorder is None or not runtime.settings.journal:
        return
    try:
        _begin(scope, model, fingerprint, False)
    except Exception as exc:
        report_internal_error(WHERE, exc)


def _request_fingerprint(scope: OpScope, request: Mapping[str, Any]) -> str:
    """The fingerprint of the LLM ``request`` of ``scope``'s agent, hashing only the messages
    its last request did not send."""
    session = scope.session
    memory = memory_of(session.run.digests, session.agent_id)
    record = session.run.session.agents.get(session.agent_id)
    return llm_request_fingerprint(request, memory, record.aligned if record is not None else None)


def step_fingerprint(scope: OpScope) -> str | None:
    """The request fingerprint of the journaled LLM attempt ``scope`` runs, if it has one."""
    step = scope.step
    return step.fingerprint if type(step) is LLMStep and step.fingerprint else None


def _begin(
    scope: OpScope,
    model: str,
    fingerprint: str,
    answer: bool,
    failures: bool = False,
    request: Mapping[str, Any] | None = None,
) -> j.Step | None:
    recorder = runtime.recorder
    if recorder is None:
        return None
    run = scope.session.run
    attempt = 1
    reentry = run.reentry
    if reentry is not None:
        plan = reentry.plan_llm(
            scope.label, fingerprint, failures and answer, request, scope.session.agent_id, model
        )
        if plan.what == "diverge":
            raise plan.result
        if plan.what in ("replay", "fail") and plan.step is not None:
            if answer:
                scope.step = LLMStep(plan.step.key, True, model, plan.step, fingerprint)
                scope.set_attribute(sc.REPLAYED, True)
                return plan.step
            attempt = plan.step.key[2] + 1
        else:
            attempt = plan.attempt
    key = (run.journal_run, scope.label, attempt)
    line = jl.intent_line(
        key,
        agent_id=scope.session.agent_id,
        name=model,
        effect=None,
        request_fingerprint=fingerprint,
        kind="llm",
    )
    recorder.journal(run.session, journal_bytes(line))
    scope.step = LLMStep(key, model=model, fingerprint=fingerprint)
    return None


def end_llm_step(
    scope: OpScope,
    model: str | None = None,
    response: Any = None,
    chunks: list[Any] | None = None,
    error: BaseException | None = None,
) -> None:
    """Journal how the attempt ended: ``done`` with its ``response`` or its stream's
    ``chunks`` (turned into JSON by the background thread), or ``failed`` with ``error``
    (``model``: the one its intent named, unless given)."""
    step = scope.step
    recorder = runtime.recorder
    if type(step) is not LLMStep or recorder is None:
        return
    scope.step = None
    model = model or step.model
    try:
        agent_id = scope.session.agent_id
        session = scope.session.run.session
        if step.replayed:
            if error is None or type(error) is ReplayedFailure:
                # At the run's own key: a re-entry's is the step's; a replay's, its new run's.
                key = (scope.session.run.journal_run, step.key[1], step.key[2])
                line = jl.replayed_line(key, agent_id=agent_id, kind="llm", name=model)
                recorder.journal(session, jl.encoded_later(line), later=True)
            return
        if error is not None:
            failed = jl.failed_line(
                step.key,
                agent_id=agent_id,
                kind="llm",
                name=model,
                error=cap_text(f"{type(error).__name__}: {error}", _cap()),
                applied="no",
            )
            recorder.journal(session, jl.encoded_later(failed), later=True)
            return
        if chunks is None:
            chunks = step.chunks  # an @agenttrace.llm function's stream (keep_chunk)
        # The line is typed here, with the response as it came; the background thread turns
        # the response into JSON and encodes the line once the response is complete.
        line = jl.done_line(
            step.key, agent_id=agent_id, kind="llm", name=model, result=response, chunks=chunks
        )
        recorder.journal(session, functools.partial(jl.response_bytes, line), later=True)
    except Exception as exc:
        report_internal_error(WHERE, exc)


def _cap() -> int:
    return runtime.settings.max_payload_bytes


def call_request(model: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """What a call of an ``@agenttrace.llm`` function asks, for its fingerprint: its model and
    arguments as data, built once as :func:`agenttrace.model.journal.fingerprint` reads it (the
    volatile keywords left out; an argument that is data already kept as it is, not copied).
    An object that is not data (the agent a method is called on, a client) counts as its kind,
    never as its ``str``, which may hold its address and differ per process: the same question
    asked by a resumed run has the same fingerprint."""
    volatile = j.VOLATILE_KEYS
    request = {key: j.kept_as_data(value) for key, value in kwargs.items() if key not in volatile}
    request["model"] = model
    if args:
        request["args"] = [j.kept_as_data(value) for value in args]
    return request


def keep_chunk(scope: OpScope, chunk: Any) -> None:
    """An ``@agenttrace.llm`` function's stream yielded ``chunk``: kept for the attempt's
    ``done`` line (up to one past :data:`~agenttrace.model.journal_lines.JOURNAL_CHUNKS`,
    which marks it capped)."""
    step = scope.step
    if type(step) is not LLMStep or step.replayed:
        return
    if step.chunks is None:
        step.chunks = [chunk]
    elif len(step.chunks) <= jl.JOURNAL_CHUNKS:
        step.chunks.append(chunk)


def replayed_step() -> j.Step | None:
    """The journal's step that answers the LLM attempt running now (its ``result``, or its
    stream's ``chunks``), if the journal answers it; ``None`` if the attempt is to be made."""
    step = _running_step()
    return step.recorded if step is not None and step.replayed else None


def _running_step() -> LLMStep | None:
    """The step of the LLM attempt the current scope runs, if it is one."""
    scope = current_scope()
    step = getattr(scope, "step", None) if isinstance(scope, OpScope) else None
    return step if type(step) is LLMStep else None


def ask_again() -> None:
    """The journal's answer for the LLM attempt running now cannot be given back as the
    function returned it (its return annotation does not take the recorded JSON): the attempt
    is made after all, journaled as the next attempt at its place (a request sent again costs
    money, never a second effect)."""
    step = _running_step()
    scope = current_scope()
    recorder = runtime.recorder
    if step is None or not step.replayed or not isinstance(scope, OpScope):
        return
    try:
        key = (step.key[0], step.key[1], step.key[2] + 1)
        scope.step = LLMStep(key, model=step.model, fingerprint=step.fingerprint)
        scope.set_attribute(sc.REPLAYED, False)
        if recorder is not None:
            line = jl.intent_line(
                key,
                agent_id=scope.session.agent_id,
                name=step.model,
                effect=None,
                request_fingerprint=step.fingerprint,
                kind="llm",
            )
            recorder.journal(scope.session.run.session, journal_bytes(line))
    except Exception as exc:
        report_internal_error(WHERE, exc)
