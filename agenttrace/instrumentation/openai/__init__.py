"""The OpenAI Python SDK, patched with wrapt: one ``chat {model}`` span per LLM attempt.

``Completions.create`` and ``AsyncCompletions.create`` (``client.chat.completions.create``, on
any client: ``OpenAI``, ``AsyncOpenAI``, ``AzureOpenAI``, any ``base_url``) and their ``parse``
are wrapped on their classes, so every client, made before the patch or after, is traced: plain
replies and streams (``stream=True``, and the ``stream()`` helper, which calls ``create``), as
litellm's attempts are (:mod:`.chat`, :mod:`.streaming`), answered from the journal in a
re-entered run (:mod:`.replay`), with the SDK's own retries as attempts of one call
(:mod:`.retries`); ``responses.create`` and ``.parse`` (``Responses``, ``AsyncResponses``) likewise
(:mod:`.responses`). The attempts, logical calls and transcript entries are the litellm
instrumentation's own (its :mod:`tracking <agenttrace.instrumentation.litellm.tracking>`,
:mod:`calls <agenttrace.instrumentation.litellm.calls>` and :mod:`attempt
<agenttrace.instrumentation.litellm.attempt>`), so the two record a call the same way, and a
litellm call, which reaches the SDK from inside its own attempt, stays one span.

The modules, each importing only those before it: :mod:`.request` (what a call asks, its
provider and price, the shared state), :mod:`.streaming` (the stream proxy), :mod:`.replay`
(replies from the journal), :mod:`.chat` (the wrappers), :mod:`.responses` (the Responses
API's), :mod:`.retries` (the SDK's retries)
and this package (the instrumentor).
"""

from __future__ import annotations

from collections.abc import Callable

from agenttrace.instrumentation.litellm.sdk_patch import SDKInstrumentor
from agenttrace.instrumentation.on_import import instrument_on_import
from agenttrace.instrumentation.openai.chat import acreate_wrapper, create_wrapper
from agenttrace.instrumentation.openai.request import WHERE, state
from agenttrace.instrumentation.openai.responses import acreate_wrapper as aresponses_wrapper
from agenttrace.instrumentation.openai.responses import create_wrapper as responses_wrapper
from agenttrace.instrumentation.openai.retries import RETRY_METHOD, retry_wrapper

__all__ = ["OpenAIInstrumentor", "instrument_when_imported"]

_TARGETS = (
    ("openai.resources.chat", "Completions", "create", create_wrapper),
    ("openai.resources.chat", "AsyncCompletions", "create", acreate_wrapper),
    # parse sends its request itself (not through create): its reply is a ParsedChatCompletion.
    ("openai.resources.chat", "Completions", "parse", create_wrapper),
    ("openai.resources.chat", "AsyncCompletions", "parse", acreate_wrapper),
    # The Responses API (openai >= 1.66; its stream() helper calls create).
    ("openai.resources.responses", "Responses", "create", responses_wrapper),
    ("openai.resources.responses", "AsyncResponses", "create", aresponses_wrapper),
    ("openai.resources.responses", "Responses", "parse", responses_wrapper),
    ("openai.resources.responses", "AsyncResponses", "parse", aresponses_wrapper),
    ("openai._base_client", "SyncAPIClient", RETRY_METHOD, retry_wrapper),
    ("openai._base_client", "AsyncAPIClient", RETRY_METHOD, retry_wrapper),
)
"""(module, class, method, wrapper) patched: on the class that defines the method, which
``openai.resources.chat`` exports in every 1.x and 2.x layout (one module, later a package)."""


class OpenAIInstrumentor(SDKInstrumentor):
    """OpenTelemetry's instrumentor for the OpenAI SDK: every ``chat.completions.create``
    attempt becomes a ``chat {model}`` span (CLIENT) in agenttrace's agent/turn/op tree.

    ``instrument(tracer_provider=...)`` patches the SDK and, if agenttrace is not set up yet
    (zero-code: ``opentelemetry-instrument`` loads this class from its entry point), sets it up
    on that provider first. ``uninstrument()`` puts the SDK back exactly as it was.
    """

    instruments = ("openai >= 1.92",)
    targets = _TARGETS
    targets_missing_ok = True  # an SDK older than the Responses API lacks its module
    patch_state = state


def instrument_when_imported() -> Callable[[], None]:
    """Instrument the OpenAI SDK now if it is imported, else as soon as it is; the undo."""
    return instrument_on_import(OpenAIInstrumentor(), "openai", WHERE)
