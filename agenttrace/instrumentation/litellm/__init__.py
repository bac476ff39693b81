"""litellm, patched with wrapt: one ``chat {model}`` span per LLM attempt.

Where each attempt passes (litellm 1.7x-1.10x, verified by the tests):

- ``litellm.completion`` (the package attribute users call) and ``litellm.main.completion`` (the
  module global that ``acompletion`` runs in an executor with ``acompletion=True``, and that
  litellm's sync retry loop calls) are both wrapped with the *attempt* wrapper. For async calls
  the inner call returns a coroutine; the span stays open until that coroutine finishes.
- ``litellm.acompletion``, ``Router.completion`` / ``Router.acompletion`` and calls with
  ``fallbacks`` only mark a *logical call*: attempts inside it are numbered 1, 2, ... and only the
  first opens a new turn, so retries and fallbacks stay in one turn.
- litellm's sync retry loop (``completion_with_retries``) runs *inside* the failed first attempt;
  its wrapper ends that attempt's span and puts the context back, so retries are siblings.
- Retries the OpenAI SDK makes inside one litellm call (``max_retries``) are invisible here: one
  litellm call is one attempt.

Streams come back as litellm's own ``CustomStreamWrapper`` type (a ``wrapt.ObjectProxy``) whose
span ends exactly once: exhausted, closed, failed or garbage-collected.

The modules, each importing only those before it: :mod:`.utils` (the shared state, names,
secrets, prices), :mod:`.attempt` (one attempt's span and what its response records),
:mod:`.streaming` (the stream proxy), :mod:`.patch` (the wrappers and their bookkeeping)
and this package (the instrumentor).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import wrapt

from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.redact import is_secret_key
from agenttrace.instrumentation.litellm.patch import patch_targets
from agenttrace.instrumentation.litellm.utils import WHERE, state

__all__ = ["LiteLLMInstrumentor", "instrument_when_imported"]


def _attribute(owner: Any, name: str) -> Any:
    """The attribute itself (for a class, not the bound method its descriptor would give)."""
    return vars(owner).get(name) if isinstance(owner, type) else getattr(owner, name, None)


class LiteLLMInstrumentor:
    """Patches litellm so every LLM attempt is a span; ``uninstrument`` puts it back exactly."""

    def instrument(self) -> None:
        """Patch litellm (imports it). A second call warns and changes nothing."""
        if state.patches:
            import logging

            logging.getLogger("agenttrace").warning("agenttrace: litellm is already instrumented")
            return
        import litellm
        from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper

        state.stream_type = CustomStreamWrapper
        state.config_secrets = tuple(
            name
            for name in dir(litellm)
            if not name.startswith("_")
            # litellm names provider keys openai_key, anthropic_key, ...: all are credentials
            and (is_secret_key(name) or name.endswith("_key"))
            and isinstance(getattr(litellm, name, None), (str, type(None)))
        )
        for owner, name, wrapper in patch_targets(litellm):
            wrapt.wrap_function_wrapper(owner, name, wrapper)
            state.patches.append((owner, name, _attribute(owner, name)))
        state.enabled = True

    def uninstrument(self) -> None:
        """Undo :meth:`instrument`: every patched attribute gets its original back.

        If another instrumentation wrapped litellm on top of ours, our layer stays inside theirs
        but passes calls straight through.
        """
        state.enabled = False
        for owner, name, ours in reversed(state.patches):
            if _attribute(owner, name) is ours:
                setattr(owner, name, ours.__wrapped__)
        state.patches.clear()

    @property
    def is_instrumented(self) -> bool:
        """True between ``instrument`` and ``uninstrument``."""
        return bool(state.patches)


def instrument_when_imported() -> Callable[[], None]:
    """Instrument litellm now if it is imported, else as soon as it is; returns the undo."""
    instrumentor = LiteLLMInstrumentor()
    cancelled = False

    def hook(module: Any) -> None:
        if cancelled or instrumentor.is_instrumented:
            return
        try:
            instrumentor.instrument()
        except Exception as exc:
            report_internal_error(WHERE, exc)

    if "litellm" in sys.modules:
        hook(sys.modules["litellm"])
    else:
        wrapt.register_post_import_hook(hook, "litellm")

    def undo() -> None:
        nonlocal cancelled
        cancelled = True
        if instrumentor.is_instrumented:
            instrumentor.uninstrument()

    return undo
