"""Which logical call and attempt the running code belongs to, and how an attempt starts.

Three context variables: the logical call the program's call into litellm opened (every attempt
inside it is numbered by it), the attempt whose litellm call is running (nested calls into
``completion`` are part of it), and the attempt whose request is in flight (the OpenAI SDK's
retries end it and start the next: :mod:`.sdk_retries`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar, Token
from typing import Any

from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.runtime import runtime
from agenttrace.instrumentation.litellm.attempt import Attempt, Request
from agenttrace.instrumentation.litellm.calls import LogicalCall, begin
from agenttrace.instrumentation.litellm.utils import (
    WHERE,
    is_mocked,
    provider_and_model,
    remember_secrets,
    routed_by_router,
)
from agenttrace.tracing.llm_attributes import input_summary, request_attributes, request_outcome
from agenttrace.tracing.scopes import (
    OpScope,
    SessionScope,
    Tokens,
    current_scope,
    deactivate,
    make_current,
    start_op,
)
from agenttrace.tracing.turn_prompts import record_turn_prompts

call_var: ContextVar[LogicalCall | None] = ContextVar("agenttrace_litellm_call", default=None)
attempt_var: ContextVar[Attempt | None] = ContextVar("agenttrace_litellm_attempt", default=None)
live_var: ContextVar[Attempt | None] = ContextVar("agenttrace_litellm_live", default=None)


# --- logical calls --------------------------------------------------------------------------------


def enter_call(
    args: Sequence[Any], kwargs: dict[str, Any], chat: bool = True
) -> Token[LogicalCall | None] | None:
    """Open the logical call of a program's call into litellm (``chat``: not an embedding),
    unless one is open (then this is litellm calling itself); the token is for
    :func:`leave_call`."""
    if call_var.get() is not None:
        return None
    try:
        call = begin(args, kwargs, chat)
    except Exception as exc:
        report_internal_error(WHERE, exc)
        return None
    return call_var.set(call)


def leave_call(token: Token[LogicalCall | None] | None, raised: bool) -> None:
    """Close what :func:`enter_call` opened (``raised``: the call ends with an exception)."""
    if token is None:
        return
    call = call_var.get()
    call_var.reset(token)
    if call is not None:
        try:
            call.ended(raised)
        except Exception as exc:
            report_internal_error(WHERE, exc)


# --- attempts ---------------------------------------------------------------------------------


def describe(operation: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Request:
    """What a call into litellm's ``completion`` or ``embedding`` asks."""
    raw_model = kwargs.get("model", args[0] if args else None) or "unknown"
    provider, model = provider_and_model(str(raw_model), kwargs.get("custom_llm_provider"))
    remember_secrets(kwargs)
    if operation == sc.OP_CHAT:
        name = sc.SPAN_LLM.format(model=model)
        messages = kwargs.get("messages", args[1] if len(args) > 1 else None)
    else:
        name = sc.SPAN_EMBEDDING.format(model=model)
        messages = None
    chat = kwargs if operation == sc.OP_CHAT else None
    start = request_attributes(bool(kwargs.get("stream")), chat)
    outcome = request_outcome(model, provider, None, operation)  # numbered per attempt
    if is_mocked(operation, kwargs):
        outcome.set_mocked()  # on the span from its start: a failed mock says so too
    if operation != sc.OP_CHAT and runtime.settings.openinference:
        start[sc.OPENINFERENCE_SPAN_KIND] = sc.OI_EMBEDDING
    return Request(
        operation,
        name,
        start,
        model,
        str(raw_model),
        messages,
        outcome,
        routed_by_router(kwargs),
    )


def start_attempt(operation: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Attempt | None:
    """Start the span of an attempt of the current logical call (None: a failure of ours,
    reported; the call then runs untraced)."""
    return begin_attempt(lambda: describe(operation, args, kwargs), WHERE)


def begin_attempt(request: Callable[[], Request], where: str) -> Attempt | None:
    """Start the span of an attempt of the current logical call asking what ``request()``
    describes (None: a failure of ours, reported under ``where``; the call then runs
    untraced)."""
    try:
        asked = request()
        call = call_var.get()
        parent = current_scope()
        opened = open_span(asked, call)
        if opened is None:
            return None
        attempt = Attempt(opened[0], asked, parent, call)
        attempt.input = opened[1]
        return attempt
    except Exception as exc:
        report_internal_error(where, exc)
        return None


def run_attempt(
    wrapped: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    attempt: Attempt,
    finish: Callable[[Any, Attempt], Any],
) -> Any:
    """Send the call as ``attempt`` (its scope current; the SDK's retries see it); a failure
    ends it failed and passes through, a result is given to ``finish``."""
    token = attempt_var.set(attempt)
    activation = activate(attempt)
    try:
        result = wrapped(*args, **kwargs)
    except BaseException as error:
        deactivate_attempt(attempt, activation)
        attempt_var.reset(token)
        attempt.fail(error)
        raise
    deactivate_attempt(attempt, activation)
    attempt_var.reset(token)
    return finish(result, attempt)


async def arun_attempt(
    wrapped: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    attempt: Attempt,
    finish: Callable[[Any, Attempt], Any],
) -> Any:
    """Async :func:`run_attempt` (an SDK's coroutine, awaited with the attempt current)."""
    token = attempt_var.set(attempt)
    activation = activate(attempt)
    try:
        result = await wrapped(*args, **kwargs)
    except BaseException as error:
        deactivate_attempt(attempt, activation)
        attempt_var.reset(token)
        attempt.fail(error)
        raise
    deactivate_attempt(attempt, activation)
    attempt_var.reset(token)
    return finish(result, attempt)


def open_span(request: Request, call: LogicalCall | None) -> tuple[OpScope, Any] | None:
    """The span of the call's next attempt, in the current scope (a bare call: its implicit run)
    and the call's turn; with the new input messages it records. Its first attempt opens a new
    turn where turns are automatic; the next ones go on in that turn."""
    number = call.next_number() if call is not None else 1
    host = call.run.session if call is not None and call.run is not None else None
    outcome = request.outcome.copy()
    outcome.set_attempt(number)
    messages = request.messages
    new_input: list[Any] = []

    def summarise_input(session: SessionScope) -> dict[str, AttributeValue]:
        attributes, new = input_summary(session, messages)
        new_input.append(new)
        return attributes

    undo = make_current(host) if host is not None and current_scope() is None else None
    try:
        scope = start_op(
            sc.KIND_LLM,
            request.name,
            request.attributes,
            new_turn=number == 1 and request.operation == sc.OP_CHAT,
            more=summarise_input if messages else None,
            outcome=outcome,
        )
    finally:
        if undo is not None:
            undo()
    if messages:
        record_turn_prompts(scope, messages)
    if call is not None:
        call.attempt_started(scope)
    return scope, new_input[0] if new_input else None


Activation = tuple[Tokens | None, Token[Attempt | None]]


def activate(attempt: Attempt) -> Activation:
    """Make the attempt's scope current (and the attempt the one in flight); the undo is
    :func:`deactivate_attempt`."""
    live = live_var.set(attempt)
    try:
        tokens = attempt.scope.activate()
    except Exception as exc:
        report_internal_error(WHERE, exc)
        return None, live
    attempt.active = True
    return tokens, live


def deactivate_attempt(attempt: Attempt, activation: Activation) -> None:
    tokens, live = activation
    live_var.reset(live)
    if tokens is not None:
        attempt.active = False
        try:
            deactivate(tokens)
        except Exception as exc:
            report_internal_error(WHERE, exc)


def restore_parent(attempt: Attempt) -> Callable[[], None] | None:
    """Make the attempt's parent scope current again (if the attempt was active); the undo."""
    if not attempt.active:
        return None
    return make_current(attempt.parent)
