"""The Anthropic Python SDK, patched with wrapt: one ``chat {model}`` span per LLM attempt.

``Messages.create`` and ``AsyncMessages.create`` (``client.messages.create`` on any client:
``Anthropic``, ``AsyncAnthropic``, Bedrock and Vertex clients, any ``base_url``), their
``parse`` and ``messages.stream`` are wrapped on their classes, so every client, made before
the patch or after, is traced: plain replies and streams (``stream=True``, and the
``stream()`` helper's ``MessageStream``), and the same three of ``client.beta.messages``
(``BetaMessage`` replies: pydantic-ai's ``AnthropicModel`` calls them), as litellm's
attempts are (:mod:`.messages`, :mod:`.streaming`), answered from the journal in a re-entered
run (:mod:`.replay`), with the SDK's own retries as attempts of one call (:mod:`.retries`). The
attempts, logical calls and
transcript entries are the litellm instrumentation's own, read through :mod:`.request`'s view
of Anthropic's messages as litellm's, so the two record a conversation the same way.

The modules, each importing only those before it: :mod:`.request` (what a call asks, its
provider and price, the reply as litellm's, the shared state), :mod:`.streaming` (the stream
proxy), :mod:`.replay` (replies from the journal), :mod:`.messages` (the wrappers),
:mod:`.retries` (the SDK's retries) and this package (the instrumentor).
"""

from __future__ import annotations

from collections.abc import Callable

from agenttrace.instrumentation.anthropic.messages import (
    acreate_wrapper,
    beta_acreate_wrapper,
    beta_create_wrapper,
    beta_stream_wrapper,
    create_wrapper,
    stream_wrapper,
)
from agenttrace.instrumentation.anthropic.request import WHERE, state
from agenttrace.instrumentation.anthropic.retries import RETRY_METHOD, retry_wrapper
from agenttrace.instrumentation.litellm.sdk_patch import SDKInstrumentor
from agenttrace.instrumentation.on_import import instrument_on_import

__all__ = ["AnthropicInstrumentor", "instrument_when_imported"]

_TARGETS = (
    ("anthropic.resources.messages", "Messages", "create", create_wrapper),
    ("anthropic.resources.messages", "AsyncMessages", "create", acreate_wrapper),
    # parse sends its request itself (not through create): its reply is a ParsedMessage.
    ("anthropic.resources.messages", "Messages", "parse", create_wrapper),
    ("anthropic.resources.messages", "AsyncMessages", "parse", acreate_wrapper),
    ("anthropic.resources.messages", "Messages", "stream", stream_wrapper),
    ("anthropic.resources.messages", "AsyncMessages", "stream", stream_wrapper),
    # beta.messages: its own classes, whose calls send their requests themselves too.
    ("anthropic.resources.beta.messages.messages", "Messages", "create", beta_create_wrapper),
    ("anthropic.resources.beta.messages.messages", "AsyncMessages", "create", beta_acreate_wrapper),
    ("anthropic.resources.beta.messages.messages", "Messages", "parse", beta_create_wrapper),
    ("anthropic.resources.beta.messages.messages", "AsyncMessages", "parse", beta_acreate_wrapper),
    ("anthropic.resources.beta.messages.messages", "Messages", "stream", beta_stream_wrapper),
    ("anthropic.resources.beta.messages.messages", "AsyncMessages", "stream", beta_stream_wrapper),
    ("anthropic._base_client", "SyncAPIClient", RETRY_METHOD, retry_wrapper),
    ("anthropic._base_client", "AsyncAPIClient", RETRY_METHOD, retry_wrapper),
)
"""(module, class, method, wrapper) patched, on the class that defines the method."""


class AnthropicInstrumentor(SDKInstrumentor):
    """OpenTelemetry's instrumentor for the Anthropic SDK: every ``messages.create`` attempt
    becomes a ``chat {model}`` span (CLIENT) in agenttrace's agent/turn/op tree.

    ``instrument(tracer_provider=...)`` patches the SDK and, if agenttrace is not set up yet
    (zero-code: ``opentelemetry-instrument`` loads this class from its entry point), sets it up
    on that provider first. ``uninstrument()`` puts the SDK back exactly as it was.
    """

    instruments = ("anthropic >= 2.0",)
    targets = _TARGETS
    patch_state = state


def instrument_when_imported() -> Callable[[], None]:
    """Instrument the Anthropic SDK now if it is imported, else as soon as it is; the undo."""
    return instrument_on_import(AnthropicInstrumentor(), "anthropic", WHERE)
