"""LLM attempts in the step journal (docs/journal.md), and answering them from it on a re-entry.

Every LLM attempt claims its step when it starts: an ``intent`` line (kind ``llm``, named by its
model, with its request's fingerprint) written in the caller, so the stream shows the call as
running at once (one write: not flushed to the disk first, since a request sent twice costs
money, not a second effect). Its ``done`` line keeps the exact response (a stream's chunks in
order), built and written by the background thread: the caller pays for the fingerprint and
one write. In a re-entered run, an attempt the journal holds as done with the same request is
answered from it: the model is not called.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.redact import cap_text
from agenttrace._internal.runtime import runtime
from agenttrace.model import journal as j
from agenttrace.tracing.journal_io import journal_bytes
from agenttrace.tracing.scopes import OpScope, current_scope
from agenttrace.tracing.steps import JOURNAL_RESULT_BYTES, WHERE

JOURNAL_CHUNKS = 100_000
"""The most chunks of a stream the journal keeps (past it the response is marked capped)."""


@dataclass(slots=True)
class LLMStep:
    """An LLM attempt's step, while it runs."""

    key: j.StepKey
    replayed: bool = False
    """It was answered from the journal: its outcome is journaled as ``replayed``."""
    model: str = ""
    recorded: j.Step | None = None
    """The journal's step that answers it (when ``replayed``)."""


def begin_llm_step(scope: OpScope, model: str, kwargs: Mapping[str, Any]) -> j.Step | None:
    """Journal the LLM attempt ``scope`` starts (its ``intent``, written now). In a re-entered
    run, the journal's step if it answers this attempt (the response is not asked for)."""
    recorder = runtime.recorder
    if recorder is None or not runtime.settings.journal:
        return None
    try:
        run = scope.session.run
        request_fingerprint = j.fingerprint(j.llm_request(kwargs))
        attempt = 1
        reentry = run.reentry
        if reentry is not None:
            plan = reentry.plan_llm(scope.label, request_fingerprint)
            if plan.what == "replay" and plan.step is not None:
                scope.step = LLMStep(plan.step.key, True, model, plan.step)
                scope.set_attribute(sc.REPLAYED, True)
                return plan.step
            attempt = plan.attempt
        key = (run.journal_run, scope.label, attempt)
        line = j.intent_line(
            key,
            agent_id=scope.session.agent_id,
            name=model,
            effect=None,
            request_fingerprint=request_fingerprint,
            kind="llm",
        )
        recorder.journal(run.session, journal_bytes(line))
        scope.step = LLMStep(key, model=model)
    except Exception as exc:
        report_internal_error(WHERE, exc)
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
            if error is None:
                line = j.replayed_line(step.key, agent_id=agent_id, kind="llm", name=model)
                recorder.journal(session, journal_bytes(line), later=True)
            return
        if error is not None:
            failed = j.failed_line(
                step.key,
                agent_id=agent_id,
                kind="llm",
                name=model,
                error=cap_text(f"{type(error).__name__}: {error}", _cap()),
                applied="no",
            )
            recorder.journal(session, journal_bytes(failed), later=True)
            return
        key = step.key
        recorder.journal(session, lambda: _done(key, agent_id, model, response, chunks), later=True)
    except Exception as exc:
        report_internal_error(WHERE, exc)


def _done(key: j.StepKey, agent_id: str, model: str, response: Any, chunks: Any) -> bytes:
    """The ``done`` line (in the background: the response is read once it is complete). A
    response past :data:`JOURNAL_RESULT_BYTES` is marked ``capped`` and not kept."""
    if chunks is not None:
        kept = [_plain(chunk) for chunk in chunks[:JOURNAL_CHUNKS]]
        line = j.done_line(key, agent_id=agent_id, kind="llm", name=model, chunks=kept)
    else:
        line = j.done_line(key, agent_id=agent_id, kind="llm", name=model, result=_plain(response))
    data = journal_bytes(line)
    if len(data) <= JOURNAL_RESULT_BYTES and (chunks is None or len(chunks) <= JOURNAL_CHUNKS):
        return data
    capped = j.done_line(key, agent_id=agent_id, kind="llm", name=model, capped=True)
    return journal_bytes(capped)


def _plain(value: Any) -> Any:
    """A response or chunk as JSON-ready data (a pydantic model, litellm's, as its dump),
    without the signatures of thinking blocks: opaque, kept in no file (a replayed reply's
    thinking blocks have none)."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            value = dump(mode="json")
        except Exception:
            value = dump()
    return _unsigned(value)


def _unsigned(value: Any, depth: int = 0) -> Any:
    if depth > 32:
        return value
    if isinstance(value, dict):
        return {
            key: _unsigned(item, depth + 1) for key, item in value.items() if key != "signature"
        }
    if isinstance(value, list):
        return [_unsigned(item, depth + 1) for item in value]
    return value


def _cap() -> int:
    return runtime.settings.max_payload_bytes


def call_request(model: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """What a call of an ``@agenttrace.llm`` function asks, for its fingerprint: its model and
    arguments as data. An object that is not data (the agent a method is called on, a client)
    counts as its kind, never as its ``str``, which may hold its address and differ per
    process: the same question asked by a resumed run has the same fingerprint."""
    request = {str(key): j.as_data(value) for key, value in kwargs.items()}
    request["model"] = model
    if args:
        request["args"] = [j.as_data(value) for value in args]
    return j.llm_request(request)


def replayed_result() -> Any:
    """The recorded response of the LLM attempt running now, if the journal answers it (a
    re-entered run's); :data:`NOT_REPLAYED` if the attempt is to be made."""
    scope = current_scope()
    step = getattr(scope, "step", None) if isinstance(scope, OpScope) else None
    if type(step) is LLMStep and step.replayed and step.recorded is not None:
        return step.recorded.result
    return NOT_REPLAYED


NOT_REPLAYED: Any = object()
"""What :func:`replayed_result` gives for an attempt the journal does not answer."""
