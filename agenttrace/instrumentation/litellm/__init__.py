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
"""

from __future__ import annotations

import functools
import inspect
import itertools
import sys
import time
import weakref
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import Any

import wrapt
from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.redact import is_secret_key
from agenttrace._internal.runtime import runtime
from agenttrace.instrumentation.litellm.attempt import Attempt, offer_tool_calls, result_attributes
from agenttrace.instrumentation.litellm.utils import (
    WHERE,
    cost_from_tokens,
    is_fallback_orchestration,
    is_stream,
    provider_and_model,
    remember_secrets,
    state,
)
from agenttrace.tracing.llm_attributes import (
    field,
    input_content,
    input_summary,
    request_attributes,
)
from agenttrace.tracing.scopes import (
    SessionScope,
    Tokens,
    current_scope,
    deactivate,
    make_current,
    start_op,
)


class _Call:
    """One logical LLM call: the attempts litellm makes for it (retries, fallbacks)."""

    __slots__ = ("attempts",)

    def __init__(self) -> None:
        self.attempts = itertools.count(1)


_call: ContextVar[_Call | None] = ContextVar("agenttrace_litellm_call", default=None)
_attempt: ContextVar[Attempt | None] = ContextVar("agenttrace_litellm_attempt", default=None)


# --- the wrappers ---------------------------------------------------------------------------------


def _enter_call() -> Token[_Call | None] | None:
    """Mark a logical call unless one is open; the token resets it."""
    if _call.get() is None:
        return _call.set(_Call())
    return None


def _attempt_wrapper(operation: str) -> Callable[..., Any]:
    """The wrapper for ``completion`` (``operation="chat"``) and ``embedding``."""
    async_flag = "acompletion" if operation == sc.OP_CHAT else "aembedding"

    def wrapper(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if runtime.disabled or not state.enabled or _attempt.get() is not None:
            return wrapped(*args, **kwargs)
        call_token = _enter_call()
        try:
            if operation == sc.OP_CHAT and is_fallback_orchestration(kwargs):
                # The attempts arrive as their own litellm.acompletion calls, inside this one.
                return wrapped(*args, **kwargs)
            attempt = _start_attempt(operation, args, kwargs)
            if attempt is None:
                return wrapped(*args, **kwargs)
            token = _attempt.set(attempt)
            tokens = _activate(attempt)
            try:
                result = wrapped(*args, **kwargs)
            except BaseException as error:
                _deactivate(attempt, tokens)
                _attempt.reset(token)
                attempt.fail(error)
                raise
            _deactivate(attempt, tokens)
            _attempt.reset(token)
            if kwargs.get(async_flag) and inspect.isawaitable(result):
                return _finish_awaited(result, attempt)
            return _finish(result, attempt)
        finally:
            if call_token is not None:
                _call.reset(call_token)

    return wrapper


async def _finish_awaited(awaitable: Any, attempt: Attempt) -> Any:
    """Await the coroutine litellm's async path returned, inside the attempt's span."""
    tokens = _activate(attempt)
    try:
        result = await awaitable
    except BaseException as error:
        _deactivate(attempt, tokens)
        attempt.fail(error)
        raise
    _deactivate(attempt, tokens)
    return _finish(result, attempt, price_it=True)


def _finish(result: Any, attempt: Attempt, price_it: bool = False) -> Any:
    """End the attempt with ``result``; a stream gets a proxy that ends it later.

    Only what the agent's next step needs is done here: the tool calls the response asks for
    are offered to the turn, so the tool spans that follow find their call ids. Everything
    else is computed by the background worker when it ends the span. ``price_it``: on litellm's
    async path the price is added to the response only after the attempt returns, so agenttrace
    prices it from the tokens itself.
    """
    try:
        if is_stream(result):
            return _StreamProxy(result, attempt)
        offer_tool_calls(attempt, result)
        attempt.succeed(functools.partial(_completed_attributes, attempt, result, price_it))
    except Exception as exc:
        report_internal_error(WHERE, exc)
        attempt.done = True
    return result


def _completed_attributes(
    attempt: Attempt, result: Any, price_it: bool
) -> dict[str, AttributeValue]:
    attributes = result_attributes(attempt, result)
    if price_it and sc.COST_USD not in attributes:
        litellm = sys.modules.get("litellm")
        cost = cost_from_tokens(litellm, attempt.raw_model, attributes) if litellm else None
        if cost is not None:
            attributes[sc.COST_USD] = cost
    return attributes


def _logical_call_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """For sync entry points that may make several attempts (``Router.completion``)."""
    token = _enter_call()
    try:
        return wrapped(*args, **kwargs)
    finally:
        if token is not None:
            _call.reset(token)


async def _async_logical_call_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """For ``acompletion``, ``Router.acompletion``: attempts run in executors and coroutines."""
    token = _enter_call()
    try:
        return await wrapped(*args, **kwargs)
    finally:
        if token is not None:
            _call.reset(token)


def _retry_loop_wrapper(
    wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``completion_with_retries``: runs inside the failed first attempt; make retries siblings."""
    attempt = _attempt.get()
    if attempt is None:
        return wrapped(*args, **kwargs)
    error = sys.exc_info()[1]
    attempt.fail(error if error is not None else RuntimeError("litellm retried the call"))
    token = _attempt.set(None)
    restored = _restore_parent(attempt)
    try:
        return wrapped(*args, **kwargs)
    finally:
        if restored is not None:
            restored()
        _attempt.reset(token)


def _restore_parent(attempt: Attempt) -> Callable[[], None] | None:
    """Make the attempt's parent scope current again (if the attempt was active); the undo."""
    if not attempt.active:
        return None
    return make_current(attempt.parent)


# --- attempt bookkeeping ---------------------------------------------------------------------


def _start_attempt(operation: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Attempt | None:
    try:
        call = _call.get()
        number = next(call.attempts) if call is not None else 1
        raw_model = kwargs.get("model", args[0] if args else None) or "unknown"
        provider, model = provider_and_model(str(raw_model), kwargs.get("custom_llm_provider"))
        remember_secrets(kwargs)
        parent = current_scope()
        if operation == sc.OP_CHAT:
            name = sc.SPAN_LLM.format(model=model)
            messages = kwargs.get("messages", args[1] if len(args) > 1 else None)
        else:
            name = sc.SPAN_EMBEDDING.format(model=model)
            messages = None
        start = request_attributes(model, provider, number, bool(kwargs.get("stream")))
        if operation != sc.OP_CHAT:
            start[sc.GEN_AI_OPERATION_NAME] = operation
            start[sc.OPENINFERENCE_SPAN_KIND] = sc.OI_EMBEDDING
        new_input: list[Any] = []

        def summarise_input(session: SessionScope) -> dict[str, AttributeValue]:
            attributes, new = input_summary(session, messages)
            new_input.append(new)
            return attributes

        scope = start_op(
            sc.KIND_LLM,
            name,
            start,
            new_turn=number == 1 and operation == sc.OP_CHAT,
            more=summarise_input if messages else None,
        )
        attempt = Attempt(scope, operation, model, str(raw_model), messages, parent)
        if new_input:
            attempt.input = new_input[0]
        return attempt
    except Exception as exc:
        report_internal_error(WHERE, exc)
        return None


def _activate(attempt: Attempt) -> Tokens | None:
    try:
        tokens = attempt.scope.activate()
    except Exception as exc:
        report_internal_error(WHERE, exc)
        return None
    attempt.active = True
    return tokens


def _deactivate(attempt: Attempt, tokens: Tokens | None) -> None:
    if tokens is not None:
        attempt.active = False
        try:
            deactivate(tokens)
        except Exception as exc:
            report_internal_error(WHERE, exc)


# --- streams ------------------------------------------------------------------------------------


class _StreamState:
    """What a stream proxy needs to end its span; held apart so the proxy can be collected."""

    __slots__ = ("attempt", "first_chunk_ns", "stream")

    def __init__(self, attempt: Attempt, stream: Any) -> None:
        self.attempt = attempt
        self.stream = stream
        self.first_chunk_ns: int | None = None

    def chunk(self) -> None:
        if self.first_chunk_ns is None:
            self.first_chunk_ns = time.time_ns()

    def complete(self, abandoned: bool = False) -> None:
        attempt = self.attempt
        if attempt.done:
            return
        chunks = list(getattr(self.stream, "chunks", None) or ())
        built = None
        try:
            built = _build_stream_response(attempt, chunks)
            if built is not None and not abandoned:
                offer_tool_calls(attempt, built)  # the streamed reply enters the transcript
        except Exception as exc:
            report_internal_error(WHERE, exc)
        attempt.succeed(functools.partial(_stream_attributes, self, built, abandoned))

    def fail(self, error: BaseException) -> None:
        self.attempt.fail(error)


def _build_stream_response(attempt: Attempt, chunks: list[Any]) -> Any:
    """The whole response a stream delivered, assembled by litellm."""
    litellm = sys.modules.get("litellm")
    if litellm is None or not chunks:
        return None
    return litellm.stream_chunk_builder(chunks=chunks, messages=attempt.messages)


def _stream_attributes(
    state: _StreamState, built: Any, abandoned: bool
) -> dict[str, AttributeValue]:
    attempt = state.attempt
    attributes = input_content(attempt.input)
    if state.first_chunk_ns is not None:
        attributes[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = (
            state.first_chunk_ns - attempt.scope.started_ns
        ) / 1e9
    if abandoned:
        attributes[sc.STREAM_ABANDONED] = True
    litellm = sys.modules.get("litellm")
    if litellm is None or built is None:
        return attributes
    attributes.update(result_attributes(attempt, built))
    if not attributes.get(sc.GEN_AI_USAGE_INPUT_TOKENS) and not attributes.get(
        sc.GEN_AI_USAGE_OUTPUT_TOKENS
    ):
        attributes.update(_estimated_usage(litellm, attempt, built))
    if sc.COST_USD not in attributes or not attributes[sc.COST_USD]:
        cost = cost_from_tokens(litellm, attempt.raw_model, attributes)
        if cost is not None:
            attributes[sc.COST_USD] = cost
    return attributes


def _estimated_usage(litellm: Any, attempt: Attempt, built: Any) -> dict[str, AttributeValue]:
    """Count tokens ourselves when the provider streamed none (no ``include_usage``)."""
    text = ""
    choices = field(built, "choices") or []
    if choices:
        text = field(field(choices[0], "message"), "content") or ""
    try:
        prompt = int(litellm.token_counter(model=attempt.model, messages=attempt.messages or []))
        completion = int(litellm.token_counter(model=attempt.model, text=text)) if text else 0
    except Exception:  # an unknown model for the tokenizer: leave tokens unknown
        return {}
    return {
        sc.GEN_AI_USAGE_INPUT_TOKENS: int(prompt),
        sc.GEN_AI_USAGE_OUTPUT_TOKENS: int(completion),
        sc.USAGE_ESTIMATED: True,
    }


class _StreamProxy(wrapt.ObjectProxy[Any]):
    """litellm's stream, as its own type, ending the attempt's span exactly once."""

    def __init__(self, stream: Any, attempt: Attempt) -> None:
        super().__init__(stream)
        state = _StreamState(attempt, stream)
        self._self_state = state
        # Abandoned without being exhausted or closed: end the span when the proxy is collected.
        self._self_finalizer = weakref.finalize(self, state.complete, True)

    def __iter__(self) -> _StreamProxy:
        return self

    def __next__(self) -> Any:
        state = self._self_state
        try:
            chunk = self.__wrapped__.__next__()
        except StopIteration:
            self._self_finalizer.detach()
            state.complete()
            raise
        except BaseException as error:
            self._self_finalizer.detach()
            state.fail(error)
            raise
        state.chunk()
        return chunk

    def __aiter__(self) -> _StreamProxy:
        return self

    async def __anext__(self) -> Any:
        state = self._self_state
        try:
            chunk = await self.__wrapped__.__anext__()
        except StopAsyncIteration:
            self._self_finalizer.detach()
            state.complete()
            raise
        except BaseException as error:
            self._self_finalizer.detach()
            state.fail(error)
            raise
        state.chunk()
        return chunk

    def close(self) -> None:
        """Stop reading: the span ends now, with what was received."""
        self._self_finalizer.detach()
        self._self_state.complete(abandoned=True)
        close = getattr(self.__wrapped__, "close", None)
        if callable(close):
            close()

    async def aclose(self) -> None:
        """Async :meth:`close`."""
        self._self_finalizer.detach()
        self._self_state.complete(abandoned=True)
        await self.__wrapped__.aclose()

    def __enter__(self) -> _StreamProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# --- instrument / uninstrument --------------------------------------------------------------------


def _patch_targets(litellm: Any) -> list[tuple[Any, str, Callable[..., Any]]]:
    import litellm.main as litellm_main

    chat = _attempt_wrapper(sc.OP_CHAT)
    embeddings = _attempt_wrapper(sc.OP_EMBEDDINGS)
    targets: list[tuple[Any, str, Callable[..., Any]]] = [
        (litellm_main, "completion", chat),
        (litellm, "completion", chat),
        (litellm, "acompletion", _async_logical_call_wrapper),
        (litellm_main, "embedding", embeddings),
        (litellm, "embedding", embeddings),
        (litellm, "aembedding", _async_logical_call_wrapper),
        (litellm, "completion_with_retries", _retry_loop_wrapper),
        (litellm, "acompletion_with_retries", _retry_loop_wrapper),
    ]
    router = getattr(litellm, "Router", None)
    if router is not None:
        for method, wrapper in (
            ("completion", _logical_call_wrapper),
            ("acompletion", _async_logical_call_wrapper),
            ("embedding", _logical_call_wrapper),
            ("aembedding", _async_logical_call_wrapper),
        ):
            targets.append((router, method, wrapper))
    return [(owner, name, wrapper) for owner, name, wrapper in targets if hasattr(owner, name)]


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
        for owner, name, wrapper in _patch_targets(litellm):
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
