"""A fork's overrides on a litellm attempt it sends live (docs/design/replay.md, "Fork").

The attempt's span is open when its label, and so whether it is at or after the fork's label,
is known: the overrides are applied then, before the step is journaled and the call is sent, and
the span is told the model the request now names (its name, ``gen_ai.request.model``, the
outcome the ledger bills). The journal's intent is written after, from the request as sent.
"""

from __future__ import annotations

from typing import Any

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace.instrumentation.litellm.attempt import Attempt
from agenttrace.instrumentation.litellm.tracking import describe
from agenttrace.instrumentation.litellm.utils import WHERE

_POSITIONAL = ("model", "messages")
"""``completion``'s first positional parameters, named when a fork rewrites a call."""


def forked(
    attempt: Attempt, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The (args, kwargs) the chat attempt is sent with: a fork's overrides applied when the
    session is a fork and the attempt is at or after its label, else as given. Whatever fails
    in here is ours: reported, and the call goes as the program made it."""
    try:
        reentry = attempt.scope.session.run.reentry
        rules = reentry.replay if reentry is not None else None
        fork = rules.fork_at(attempt.scope.label) if rules is not None else None
        if fork is None or len(args) > len(_POSITIONAL):
            return args, kwargs
        named = {**dict(zip(_POSITIONAL, args, strict=False)), **kwargs}
        sent = fork.request(named)
        if sent.get("model") != named.get("model"):
            _rename(attempt, sent)
        return (), sent
    except Exception as exc:
        report_internal_error(WHERE, exc)
        return args, kwargs


def _rename(attempt: Attempt, sent: dict[str, Any]) -> None:
    """Tell the open span and the attempt the model the request is sent to."""
    request = describe(attempt.operation, (), sent)
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
