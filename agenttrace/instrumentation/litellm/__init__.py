"""litellm, patched with wrapt: one ``chat {model}`` span per LLM attempt.

Where each attempt passes (litellm 1.7x-1.10x, verified by the tests):

- ``litellm.completion`` (the package attribute users call) and ``litellm.main.completion`` (the
  module global that ``acompletion`` runs in an executor with ``acompletion=True``, and that
  litellm's sync retry loop calls) are both wrapped with the *attempt* wrapper. For async calls
  the inner call returns a coroutine; the span stays open until that coroutine finishes.
- The entry point the program calls opens a *logical call* (:mod:`.calls`): ``completion``,
  ``acompletion``, ``completion_with_retries``, ``Router.completion`` / ``Router.acompletion``
  and calls with ``fallbacks``. Attempts inside it are numbered 1, 2, ... and only the first
  opens a new turn, so retries and fallbacks stay in one turn. A failed logical call waits
  where it was made: the program's next call there with the same messages continues it
  (the re-request rule, told in :mod:`.calls`).
- litellm's sync retry loop (``completion_with_retries``) runs *inside* the failed first attempt;
  its wrapper ends that attempt's span and puts the context back, so retries are siblings.
- The OpenAI SDK's own retries inside one litellm call (``max_retries``, and ``num_retries``,
  which litellm 1.105 hands to the SDK) are seen where the SDK decides to retry
  (:mod:`.sdk_retries`): each HTTP request is an attempt.

Streams come back as litellm's own ``CustomStreamWrapper`` type (a ``wrapt.ObjectProxy``) whose
span ends exactly once: exhausted, closed, failed or garbage-collected.

The modules, each importing only those before it: :mod:`.utils` (the shared state, names,
secrets, prices), :mod:`.calls` (logical calls, and where failed ones wait for a re-request),
:mod:`.attempt` (one attempt's span and what its response records), :mod:`.tracking` (the call
and attempt the running code belongs to), :mod:`.stream_proxy` (a stream's proxy and its end,
which the SDKs' streams share too), :mod:`.streaming` (litellm's stream proxy),
:mod:`.sdk_attempt` (an SDK call as an attempt: the OpenAI and Anthropic SDKs' wrappers),
:mod:`.sdk_retries` (the OpenAI SDK's retries, and the Anthropic SDK's),
:mod:`.sdk_patch` (the SDK instrumentors' patch table), :mod:`.patch` (the wrappers),
:mod:`.early_imports` (names bound to litellm's functions before the patch) and this package
(the instrumentor).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, ClassVar

from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.redact import is_secret_key
from agenttrace.instrumentation.base import (
    NO_OTHER_LIBRARY,
    LibraryInstrumentor,
    unwrap_attributes,
    wrap_attributes,
)
from agenttrace.instrumentation.litellm import early_imports
from agenttrace.instrumentation.litellm.calls import forget_pending_calls
from agenttrace.instrumentation.litellm.patch import patch_targets
from agenttrace.instrumentation.litellm.utils import WHERE, state
from agenttrace.instrumentation.on_import import instrument_on_import
from agenttrace.tracing.implicit import end_runs

__all__ = ["LiteLLMInstrumentor", "instrument_when_imported"]


class LiteLLMInstrumentor(LibraryInstrumentor):
    """OpenTelemetry's instrumentor for litellm: every LLM attempt becomes a ``chat {model}`` span
    (CLIENT) in agenttrace's agent/turn/op tree.

    ``instrument(tracer_provider=..., meter_provider=...)`` patches litellm and, if agenttrace is
    not set up yet (zero-code: ``opentelemetry-instrument python app.py`` loads this class from
    its ``opentelemetry_instrumentor`` entry point), sets it up on those providers (default: the
    global ones) first. A second ``instrument()`` warns and changes nothing; ``uninstrument()``
    puts litellm back exactly as it was.
    """

    instruments = ("litellm >= 1.75",)
    init_options: ClassVar[dict[str, Any] | None] = NO_OTHER_LIBRARY

    def patch(self, **options: Any) -> None:
        """Patch litellm (``look_for_early_imports``: see :func:`_patch`)."""
        _patch(look_for_early_imports=options.get("look_for_early_imports", True))

    def unpatch(self) -> None:
        """Put litellm back as it was."""
        _unpatch()

    def patched(self) -> bool:
        """Whether litellm is patched."""
        return bool(state.patches)


def _patch(look_for_early_imports: bool = True) -> None:
    """Patch litellm (imports it). If it was imported before, warn about names bound to its
    functions by then (:mod:`.early_imports`), unless told nobody could have bound them."""
    if state.patches:
        return
    look_for_early_imports = look_for_early_imports and "litellm" in sys.modules
    import litellm
    from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper

    unpatched = early_imports.originals(litellm) if look_for_early_imports else frozenset()
    state.stream_type = CustomStreamWrapper
    state.config_secrets = tuple(
        name
        for name in dir(litellm)
        if not name.startswith("_")
        # litellm names provider keys openai_key, anthropic_key, ...: all are credentials
        and (is_secret_key(name) or name.endswith("_key"))
        and isinstance(getattr(litellm, name, None), (str, type(None)))
    )
    wrap_attributes(state, patch_targets(litellm))  # each owner holds its attribute itself
    if unpatched:
        try:
            early_imports.warn_about(early_imports.holders(unpatched))
        except Exception as exc:  # only a warning: litellm stays patched
            report_internal_error(WHERE, exc)


def _unpatch() -> None:
    """Every patched attribute gets its original back. If another instrumentation wrapped
    litellm on top of ours, our layer stays inside theirs but passes calls straight through."""
    state.enabled = False
    end_runs()  # the implicit runs of bare calls: no more calls will join them
    forget_pending_calls()
    unwrap_attributes(state)


def instrument_when_imported() -> Callable[[], None]:
    """Instrument litellm now if it is imported, else as soon as it is; returns the undo. In
    the second case the patch is in place before any module can bind litellm's functions."""
    imported = "litellm" in sys.modules
    return instrument_on_import(
        LiteLLMInstrumentor(), "litellm", WHERE, look_for_early_imports=imported
    )
