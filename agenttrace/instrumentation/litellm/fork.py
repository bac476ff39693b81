"""A fork's overrides on an LLM attempt it sends live (docs/design/replay.md, "Fork"): a
litellm call's (:func:`forked`) or an LLM SDK's (:func:`sdk_forked`: the OpenAI SDK's chat
completions and Responses API, the Anthropic SDK's messages).

The attempt's span is open when its label, and so whether it is at or after the fork's label,
is known: the overrides are applied then, before the step is journaled and the call is sent,
and the span is told the model the request now names (its name, ``gen_ai.request.model``, the
outcome the ledger bills). The journal's intent is written after, from the request as sent.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Mapping
from typing import Any

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace.instrumentation.litellm.attempt import Attempt, Request
from agenttrace.instrumentation.litellm.tracking import describe
from agenttrace.instrumentation.litellm.utils import WHERE
from agenttrace.model.fork import Fork, RequestShape

_POSITIONAL = ("model", "messages")
"""``completion``'s first positional parameters, named when a fork rewrites a call."""


def forked(
    attempt: Attempt, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The (args, kwargs) the litellm chat attempt is sent with: a fork's overrides applied
    when the session is a fork and the attempt is at or after its label, else as given.
    Whatever fails in here is ours: reported, and the call goes as the program made it."""
    try:
        fork = fork_of(attempt)
        if fork is None or len(args) > len(_POSITIONAL):
            return args, kwargs
        named = {**dict(zip(_POSITIONAL, args, strict=False)), **kwargs}
        sent = fork.request(named)
        if sent.get("model") != named.get("model"):
            rename(attempt, describe(attempt.operation, (), sent))
        return (), sent
    except Exception as exc:
        report_internal_error(WHERE, exc)
        return args, kwargs


def sdk_forked(
    attempt: Attempt,
    kwargs: dict[str, Any],
    shape: RequestShape,
    described: Callable[[dict[str, Any]], Request],
    method: Callable[..., Any],
) -> dict[str, Any]:
    """The keywords an SDK attempt (the SDKs take keywords only) is sent with: as
    :func:`forked`, the system prompt where the API's ``shape`` puts it, a setting ``method``
    (the SDK's) does not name in the request's body (:func:`in_body`); ``described`` tells
    what the request as sent asks (the SDK's ``describe`` on the client called)."""
    try:
        fork = fork_of(attempt)
        if fork is None:
            return kwargs
        sent = in_body(method, fork.request(kwargs, shape), kwargs.keys())
        if sent.get("model") != kwargs.get("model"):
            rename(attempt, described(sent))
        return sent
    except Exception as exc:
        report_internal_error(attempt.request.where, exc)
        return kwargs


def in_body(
    method: Callable[..., Any], sent: dict[str, Any], kept: Collection[str] = ()
) -> dict[str, Any]:
    """``sent`` with each keyword ``method`` does not name (but those ``kept``: the program's)
    moved into ``extra_body``, the SDKs' way of sending a field of the request they do not
    name. A setting the SDK release does not know (Anthropic's ``temperature`` in a release
    that dropped it) goes to the API as litellm sends an unknown setting, not into a
    ``TypeError``."""
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):  # no signature to read: every keyword as given
        return sent
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return sent
    unnamed = [key for key in sent if key not in parameters and key not in kept]
    if not unnamed:
        return sent
    given = sent.get("extra_body")
    body = dict(given) if isinstance(given, Mapping) else {}
    body.update((key, sent[key]) for key in unnamed)
    moved = {key: value for key, value in sent.items() if key not in unnamed}
    moved["extra_body"] = body
    return moved


def fork_of(attempt: Attempt) -> Fork | None:
    """The fork the attempt is sent with the overrides of (None: no fork, or a label before
    the fork's)."""
    reentry = attempt.scope.session.run.reentry
    rules = reentry.replay if reentry is not None else None
    return rules.fork_at(attempt.scope.label) if rules is not None else None


def rename(attempt: Attempt, request: Request) -> None:
    """Tell the open span and the attempt the model the request is sent to: ``request``, what
    the request as sent asks."""
    # The transcript and the recorded input stay the program's messages (a system prompt
    # override included or not: the same either way); the span opened with them.
    request.messages = attempt.request.messages
    provider = request.outcome.provider
    outcome = attempt.request.outcome.copy()  # the call's next attempts go on from it
    outcome.set_request(request.model, provider)
    request.outcome = outcome
    attempt.request = request
    scope = attempt.scope
    scope.outcome.set_request(request.model, provider)
    scope.span.update_name(request.name)
    scope.set_attribute(sc.GEN_AI_REQUEST_MODEL, request.model)
    if provider:
        scope.set_attribute(sc.GEN_AI_PROVIDER_NAME, provider)
