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
import time
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.redact import cap_text
from agenttrace._internal.runtime import runtime
from agenttrace._internal.times import event_ts
from agenttrace.model import journal as j
from agenttrace.session.leases import token as lease_token
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
    return j.idempotency_key(scope.session.run.session_id, scope.origin, scope.label, scope.name)


def check_effect(effect: str) -> Effect:
    """``effect`` if it is an effect class, else a ``ValueError`` naming them."""
    if effect not in j.EFFECTS:
        raise ValueError(f"effect must be one of {', '.join(j.EFFECTS)}, not {effect!r}")
    return effect  # type: ignore[return-value]


@dataclass(slots=True)
class Step:
    """A tool call's step, while it runs."""

    key: j.StepKey
    effect: str


def begin_tool_step(scope: OpScope, effect: str, arguments: Any) -> None:
    """Journal the tool call ``scope`` is about to make (its ``intent``), unless it is pure
    or the journal is off; the line is written before this returns."""
    recorder = runtime.recorder
    if effect == "pure" or recorder is None or not runtime.settings.journal:
        return
    try:
        key = (scope.origin, scope.label, 1)
        text = _json(arguments)
        line = j.intent_line(
            key,
            agent_id=scope.session.agent_id,
            name=scope.name,
            effect=effect,
            request_fingerprint=j.tool_fingerprint(scope.name, _plain(arguments)),
            arguments=text,
            call_id=scope.call_id,
            lease=lease_token(scope.session.run.session),
        )
        recorder.journal(scope.session.run.session, _line(line))
        scope.step = Step(key, effect)
    except Exception as exc:
        report_internal_error(WHERE, exc)


def end_tool_step(scope: OpScope, result: Any, error: BaseException | None) -> None:
    """Journal how the tool call ended (``done`` with its result, or ``failed``), if its
    intent was journaled."""
    step = scope.step
    recorder = runtime.recorder
    if step is None or recorder is None:
        return
    scope.step = None
    try:
        agent_id = scope.session.agent_id
        lease = lease_token(scope.session.run.session)
        if error is None:
            line = j.done_line(
                step.key,
                agent_id=agent_id,
                kind="tool",
                name=scope.name,
                result=_json(result),
                lease=lease,
            )
        else:
            line = j.failed_line(
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
        recorder.journal(scope.session.run.session, _line(line), later=True)
    except Exception as exc:
        report_internal_error(WHERE, exc)


def _applied(effect: str, error: BaseException) -> Literal["no", "unknown"]:
    """Whether a failed call's effect happened: ``no`` for a call with none (``read``), or when
    the exception says so (an ``effect_applied`` attribute that is ``False``); else unknown."""
    if effect in ("pure", "read") or getattr(error, "effect_applied", None) is False:
        return "no"
    return "unknown"


def _json(value: Any) -> str:
    """``value`` as JSON text (verbatim: the journal is state, like the transcript), capped."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = _ENCODE(value).decode("utf-8", "surrogatepass")
        except (TypeError, ValueError, OverflowError, UnicodeDecodeError):
            text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _cap() // 4 else cap_text(text, _cap(), _as_is)


def _plain(arguments: Any) -> Any:
    return dict(arguments) if hasattr(arguments, "items") else arguments


def _as_is(text: str) -> str:
    return text


def _cap() -> int:
    return runtime.settings.max_payload_bytes


def _line(line: dict[str, Any]) -> bytes:
    """The line as the event stream writes its lines (the same encoder's spacing)."""
    line["ts"] = event_ts(time.time_ns())
    return (_LINE.encode(line) + "\n").encode("utf-8", "backslashreplace")


_LINE = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "))
_ENCODE = msgspec.json.Encoder(enc_hook=str).encode
"""JSON in C, non-ASCII text as UTF-8 (as the event stream writes it)."""
