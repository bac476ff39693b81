"""What an LLM attempt's span says: request, response, tokens, cost, failure category.

Shared by the ``@llm`` decorator (any client) and the litellm patch. Responses and usage blocks
are read by duck typing, as objects or dicts, in the shapes OpenAI, Anthropic and litellm use.

Tokens follow the GenAI conventions: ``input_tokens`` counts *all* input, cache reads and cache
writes included. OpenAI-style usage already counts cached tokens inside ``prompt_tokens``;
Anthropic-style usage (``input_tokens`` with ``cache_read_input_tokens`` and
``cache_creation_input_tokens`` beside it) counts them on top, so they are added.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.util.types import AttributeValue

from agenttrace import semconv as sc
from agenttrace._internal.capture import Output, captures
from agenttrace._internal.runtime import runtime
from agenttrace.model.events import alignment, same_entry, server_side
from agenttrace.model.outcome import OutcomeBuilder, Usage
from agenttrace.tracing.content import recorded_content
from agenttrace.tracing.op_attributes import usage_span_attributes
from agenttrace.tracing.scopes import SessionScope

_MISSING = object()


def field(obj: Any, name: str) -> Any:
    """``obj.name`` or ``obj[name]``, ``None`` when absent."""
    if obj is None:
        return None
    if type(obj) is dict:  # the common cases first: an ABC isinstance check is slow
        return obj.get(name)
    if _is_plain_model(type(obj)):
        return _model_field(obj, name)
    value = getattr(obj, name, _MISSING)
    if value is not _MISSING:
        return value
    if isinstance(obj, Mapping):
        return obj.get(name)
    return None


# A pydantic model (litellm's responses, the OpenAI and Anthropic SDKs' objects) answers an
# attribute it lacks by raising AttributeError from its __getattr__, which costs ~2.5 µs: more
# than the rest of reading a field. A response is read for a dozen fields that are mostly
# absent (cache tokens, details blocks), so those models are read where pydantic keeps them.

_model_types: dict[type, bool] = {}
_class_names: dict[tuple[type, str], bool] = {}
_TYPES_KEPT = 512


def _is_plain_model(cls: type) -> bool:
    """True if ``cls`` is a pydantic model that keeps pydantic's own ``__getattr__`` (so what
    an instance has is its ``__dict__``, its extra fields, its private ones and its class's)."""
    known = _model_types.get(cls)
    if known is None:
        pydantic = sys.modules.get("pydantic")
        base = getattr(pydantic, "BaseModel", None) if pydantic is not None else None
        known = (
            isinstance(base, type)
            and issubclass(cls, base)
            and getattr(cls, "__getattr__", None) is getattr(base, "__getattr__", _MISSING)
            and isinstance(getattr(cls, "__private_attributes__", None), Mapping)
        )
        if len(_model_types) >= _TYPES_KEPT:
            _model_types.clear()
        _model_types[cls] = known
    return known


def _model_field(obj: Any, name: str) -> Any:
    """``field`` of a model :func:`_is_plain_model` accepted, without the exception."""
    namespace = getattr(obj, "__dict__", None)
    if namespace is not None:
        value = namespace.get(name, _MISSING)
        if value is not _MISSING:
            return value
    cls = type(obj)
    if name.startswith("_") or name in cls.__private_attributes__ or _class_has(cls, name):
        return getattr(obj, name, None)  # a property, a method, a private attribute
    extra = getattr(obj, "__pydantic_extra__", None)
    if extra:
        return extra.get(name)
    return None


def _class_has(cls: type, name: str) -> bool:
    known = _class_names.get((cls, name))
    if known is None:
        known = any(name in vars(klass) for klass in cls.__mro__)
        if len(_class_names) >= _TYPES_KEPT * 16:
            _class_names.clear()
        _class_names[(cls, name)] = known
    return known


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# --- provider and model --------------------------------------------------------------------

_PROVIDER_NAMES = {
    "openai": "openai",
    "text-completion-openai": "openai",
    "azure": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "anthropic": "anthropic",
    "bedrock": "aws.bedrock",
    "vertex_ai": "gcp.vertex_ai",
    "gemini": "gcp.gemini",
    "cohere": "cohere",
    "groq": "groq",
    "mistral": "mistral_ai",
    "deepseek": "deepseek",
    "xai": "x_ai",
    "perplexity": "perplexity",
    "watsonx": "ibm.watsonx.ai",
}


def provider_name(provider: str | None) -> str | None:
    """The GenAI conventions' name for a provider (litellm's ``custom_llm_provider``)."""
    if not provider:
        return None
    return _PROVIDER_NAMES.get(provider, provider)


def split_model(model: str, provider: str | None = None) -> tuple[str | None, str]:
    """``("openai", "gpt-4o")`` from ``"openai/gpt-4o"``; the provider argument wins."""
    if provider is None and "/" in model:
        prefix, _, rest = model.partition("/")
        return provider_name(prefix), rest
    return provider_name(provider), model


# --- tokens -----------------------------------------------------------------------------------


def usage_attributes(usage: Any) -> dict[str, AttributeValue]:
    """Token counts from an OpenAI-, Anthropic- or litellm-style usage block, as span
    attributes (an agent run's: an op's usage is its outcome's, ``OutcomeBuilder.set_usage``)."""
    counts = usage_of(usage)
    return usage_span_attributes(counts) if counts is not None else {}


def usage_of(usage: Any) -> Usage | None:
    """The token counts of an OpenAI-, Anthropic- or litellm-style usage block."""
    if usage is None:
        return None
    prompt = _int(field(usage, "prompt_tokens"))
    cache_read = _int(field(usage, "cache_read_input_tokens"))
    cache_write = _int(field(usage, "cache_creation_input_tokens"))
    prompt_details = field(usage, "prompt_tokens_details") or field(usage, "input_tokens_details")
    if cache_read is None:
        cache_read = _int(field(prompt_details, "cached_tokens"))
    if cache_write is None:
        cache_write = _int(field(prompt_details, "cache_creation_tokens")) or _int(
            field(prompt_details, "cache_write_tokens")
        )
    if prompt is not None:
        input_tokens: int | None = prompt  # OpenAI style: cache already inside
        output = _int(field(usage, "completion_tokens"))
    else:
        input_tokens = _int(field(usage, "input_tokens"))
        output = _int(field(usage, "output_tokens"))
        if input_tokens is not None and field(usage, "input_tokens_details") is None:
            # Anthropic style: cache reads and writes are billed on top of input_tokens.
            input_tokens += (cache_read or 0) + (cache_write or 0)
    completion_details = field(usage, "completion_tokens_details") or field(
        usage, "output_tokens_details"
    )
    reasoning = _int(field(completion_details, "reasoning_tokens"))
    return Usage(input_tokens, output, cache_read or 0, cache_write or 0, reasoning or 0)


# --- request and response ----------------------------------------------------------------------


def request_outcome(
    model: str, provider: str | None, attempt: int | None, operation: str = sc.OP_CHAT
) -> OutcomeBuilder:
    """What an attempt's outcome knows when it starts: its operation, requested model and
    provider, and its number (``None``: numbered when each attempt starts). Its span starts with
    them (``op_attributes.start_attributes``)."""
    outcome = OutcomeBuilder()
    outcome.set_operation(operation)
    outcome.set_request(model, provider or None)
    if attempt is not None:
        outcome.set_attempt(attempt)
    return outcome


def request_attributes(
    stream: bool = False, chat: Mapping[str, Any] | None = None
) -> dict[str, AttributeValue]:
    """Attributes an attempt has when it starts beside its outcome's: whether it streams and,
    given the ``chat`` call's keyword arguments, whether it is a final turn
    (:func:`final_turn`)."""
    attributes: dict[str, AttributeValue] = {sc.GEN_AI_REQUEST_STREAM: True} if stream else {}
    if chat is not None:
        attributes[sc.REQUEST_FINAL_TURN] = final_turn(chat)
    return attributes


def final_turn(kwargs: Mapping[str, Any]) -> bool:
    """Whether a chat request leaves the model nothing but to answer: it offers no tool
    (``tools``, or the older ``functions``), or forbids calling one (``tool_choice`` ``none``,
    OpenAI's string or Anthropic's ``{"type": "none"}``). Agents end their loop so."""
    choice = kwargs.get("tool_choice")
    if choice == "none" or (isinstance(choice, Mapping) and choice.get("type") == "none"):
        return True
    return not (kwargs.get("tools") or kwargs.get("functions"))


def asks_for_tools(response: Any) -> bool:
    """Whether a chat response asks the client to run a tool (OpenAI's ``tool_calls``, or an
    Anthropic ``tool_use`` block); one that does not is the agent's final answer."""
    if tool_calls_of(response):
        return True
    content = field(response, "content")
    if isinstance(content, Sequence) and not isinstance(content, str):
        return any(field(block, "type") == "tool_use" for block in content)
    return False


def request_messages(kwargs: Mapping[str, Any]) -> Any:
    """The chat a client call sends: its ``messages=``, after an Anthropic-style ``system=``
    given beside them as a system message (the agent's transcript starts with it)."""
    messages = kwargs.get("messages")
    system = kwargs.get("system")
    if system and isinstance(messages, Sequence) and not isinstance(messages, str):
        return [{"role": "system", "content": system}, *messages]
    return messages


def input_summary(session: SessionScope, messages: Any) -> tuple[dict[str, AttributeValue], Any]:
    """At request time: the request's size, where its input starts (:func:`input_delta`), and a
    copy of those input messages, serialised by :func:`input_content` (copying the list keeps
    what the agent appends to its transcript afterwards out of it).
    """
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        return {}, None
    attributes: dict[str, AttributeValue] = {sc.REQUEST_MESSAGES: len(messages)}
    new, after, rewritten = input_delta(session, messages)
    attributes[sc.INPUT_MESSAGES_SKIPPED] = len(messages) - len(new)
    if after is not None:
        attributes[sc.INPUT_AFTER] = after
    if rewritten:
        attributes[sc.INPUT_REWRITTEN] = True
    return attributes, list(new)


def input_content(new: Any, payloads: dict[str, str] | None = None) -> dict[str, AttributeValue]:
    """The new input messages as redacted, capped JSON: into ``payloads`` (the saved state),
    and as the span attribute when content goes on spans."""
    if new is None:
        return {}
    return recorded_content(payloads, sc.GEN_AI_INPUT_MESSAGES, new)


def input_delta(
    session: SessionScope, messages: Sequence[Any]
) -> tuple[Sequence[Any], str | None, bool]:
    """The input an LLM attempt records: (messages, the message id of the agent's previous
    reply when they leave it off, whether the history was rewritten).

    Recording the whole history on every attempt makes a trace grow with the square of its
    length. When the request extends the agent's logged transcript
    (:func:`~agenttrace.model.events.alignment`), everything up to and including the
    agent's previous reply is already recorded (in the event stream, and as the input and
    output of earlier attempts): the input is what follows that reply. What the agent's
    previous attempt in this run recorded is left off too, so a retry records nothing new.
    A first request, a request that rewrote the history (a ``transcript_reset`` follows in
    the stream) and, with ``input_deltas`` off, every request record the whole request.
    """
    record = session.run.session.agents.get(session.agent_id)
    transcript = record.transcript if record is not None else []
    histories = session.run.histories
    previous = histories.get(session.agent_id)
    count = len(messages)
    histories[session.agent_id] = (count, messages[-1] if count else None)
    memory = record.aligned if record is not None else None
    if memory is not None:
        # A new attempt: what an earlier one's comparisons found is not taken for this one (a
        # retry may send the same list, a message in it edited in place); the alignment that
        # follows vouches for this request, unless it recalls its last one.
        memory.vouched = None
    offset, kept = alignment(messages, transcript, memory)
    if kept < len(transcript):
        if not runtime.settings.input_deltas:
            return messages, None, True
        return (*_after_previous_reply(messages, transcript), True)
    if not runtime.settings.input_deltas:
        return messages, None, False
    start, after = 0, None
    last = _last_reply(transcript)
    if last is not None:
        start, after = offset + last[0] + 1, last[1]
    if previous is not None:
        seen, last = previous
        if start < seen <= count and _same_message(messages[seen - 1], last):
            start = seen  # the previous attempt recorded these (a retry: all of them)
    return messages[start:], after, False


REPLY_SEARCH = 64
"""How far from the end of a rewritten request its agent's previous reply is looked for."""


def _after_previous_reply(
    messages: Sequence[Any], transcript: Sequence[Mapping[str, Any]]
) -> tuple[Sequence[Any], str | None]:
    """For a request that rewrote the history (a window, a compaction): the messages after the
    agent's previous reply, if the request still holds it among its last :data:`REPLY_SEARCH`
    messages, and that reply's id; else the whole request. What came before the reply was sent
    before and is recorded (the ``transcript_reset`` in the stream says what the request was)."""
    last = _last_reply(transcript)
    if last is not None:
        entry = transcript[last[0]]
        for place in range(len(messages) - 1, max(-1, len(messages) - 1 - REPLY_SEARCH), -1):
            if same_entry(messages[place], entry):
                return messages[place + 1 :], last[1]
    return messages, None


def _last_reply(transcript: Sequence[Mapping[str, Any]]) -> tuple[int, str | None] | None:
    """Where the agent's last reply (its last assistant entry) is in ``transcript``, and its
    message id; ``None`` if it has said nothing yet."""
    for index in range(len(transcript) - 1, -1, -1):
        if transcript[index].get("role") == "assistant":
            reply = transcript[index].get("message_id")
            return index, reply if isinstance(reply, str) else None
    return None


def _same_message(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # exotic message objects that refuse comparison
        return False


def response_attributes(
    response: Any, outcome: OutcomeBuilder, payloads: dict[str, str] | None = None
) -> dict[str, AttributeValue]:
    """What a chat completion response (OpenAI/litellm or Anthropic shape) says: its model,
    usage and what a gateway says of the call set on ``outcome``; the rest returned as span
    attributes."""
    attributes: dict[str, AttributeValue] = {}
    model = field(response, "model")
    if isinstance(model, str) and model:
        outcome.set_response(model=model)
    response_id = field(response, "id")
    if isinstance(response_id, str) and response_id:
        attributes[sc.GEN_AI_RESPONSE_ID] = response_id
    reasons = finish_reasons(response)
    if reasons:
        attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] = reasons
    usage = field(response, "usage")
    counts = usage_of(usage)
    if counts is not None:
        outcome.set_usage(counts)
    gateway_outcome(outcome, response, usage)
    if field(response, "choices") is not None or field(response, "content") is not None:
        attributes[sc.RESPONSE_FINAL_ANSWER] = not asks_for_tools(response)
    if payloads is not None or captures(Output.SPAN, runtime.settings):
        output = output_messages(response)
        if output:
            attributes.update(recorded_content(payloads, sc.GEN_AI_OUTPUT_MESSAGES, output))
    return attributes


def gateway_outcome(outcome: OutcomeBuilder, response: Any, usage: Any) -> None:
    """What a gateway's response says about the call behind it (OpenRouter's, as litellm passes
    it on), set on ``outcome``: the provider that served it (the response's ``provider``) and
    what that provider charged (``usage.cost_details.upstream_inference_cost``)."""
    served_by = field(response, "provider")
    if isinstance(served_by, str) and served_by:
        outcome.set_response(provider=served_by)
    upstream = field(field(usage, "cost_details"), "upstream_inference_cost")
    if (
        isinstance(upstream, (int, float))
        and not isinstance(upstream, bool)
        and math.isfinite(upstream)
        and upstream >= 0
    ):
        outcome.set_upstream_cost(float(upstream))


def finish_reasons(response: Any) -> list[str]:
    """``finish_reason`` of each choice (or Anthropic's ``stop_reason``)."""
    choices = field(response, "choices")
    if isinstance(choices, Sequence):
        return [r for r in (field(c, "finish_reason") for c in choices) if isinstance(r, str)]
    stop = field(response, "stop_reason")
    return [stop] if isinstance(stop, str) else []


def output_messages(response: Any) -> list[dict[str, Any]]:
    """The response's messages as plain dicts (role, content, tool_calls)."""
    choices = field(response, "choices")
    if isinstance(choices, Sequence):
        messages = []
        for choice in choices:
            message = field(choice, "message")
            if message is not None:
                messages.append(_plain_message(message))
        return messages
    content = field(response, "content")
    if content is not None and field(response, "role") == "assistant":
        return [{"role": "assistant", "content": content}]
    return []


def tool_calls_of(response: Any) -> list[tuple[str, str, str]]:
    """(id, name, arguments) of each tool call the first choice asks the client to run (not a
    server tool's: its provider ran it)."""
    choices = field(response, "choices")
    if not isinstance(choices, Sequence) or not choices:
        return []
    message = field(choices[0], "message")
    calls = field(message, "tool_calls")
    result: list[tuple[str, str, str]] = []
    if isinstance(calls, Sequence):
        for call in calls:
            function = field(call, "function")
            call_id, name = field(call, "id"), field(function, "name")
            if isinstance(call_id, str) and isinstance(name, str) and not server_side(call):
                arguments = field(function, "arguments")
                result.append((call_id, name, arguments if isinstance(arguments, str) else ""))
    return result


def _plain_message(message: Any) -> dict[str, Any]:
    # Read the fields directly: a pydantic model_dump of litellm's Message costs more than the
    # rest of the span together.
    plain: dict[str, Any] = {"role": field(message, "role") or "assistant"}
    content = field(message, "content")
    if content is not None:
        plain["content"] = content
    calls = field(message, "tool_calls")
    if calls:
        plain["tool_calls"] = [
            {
                "id": field(call, "id"),
                "type": field(call, "type") or "function",
                "function": {
                    "name": field(field(call, "function"), "name"),
                    "arguments": field(field(call, "function"), "arguments"),
                },
            }
            for call in calls
        ]
    reasoning = field(message, "reasoning_content")
    if reasoning:
        plain["reasoning_content"] = reasoning
    return plain


# --- failures ---------------------------------------------------------------------------------

_CATEGORY_BY_CLASS = {
    "AuthenticationError": "auth",
    "PermissionDeniedError": "auth",
    "RateLimitError": "quota",
    "BudgetExceededError": "quota",
    "Timeout": "timeout",
    "APITimeoutError": "timeout",
    "TimeoutError": "timeout",
    "TimeoutException": "timeout",
    "ReadTimeout": "timeout",
    "ConnectTimeout": "timeout",
    "APIConnectionError": "network",
    "ConnectError": "network",
    "ConnectionError": "network",
    "RemoteProtocolError": "network",
    "ServiceUnavailableError": "model",
    "InternalServerError": "model",
    "NotFoundError": "model",
    "APIError": "model",
    "BadGatewayError": "model",
    "BadRequestError": "invalid",
    "ContextWindowExceededError": "invalid",
    "ContentPolicyViolationError": "invalid",
    "UnprocessableEntityError": "invalid",
    "UnsupportedParamsError": "invalid",
    "JSONSchemaValidationError": "invalid",
    "ValueError": "invalid",
    "TypeError": "invalid",
}


def classify_error(error: BaseException) -> str:
    """One of ``auth/quota/network/model/timeout/invalid`` for an LLM call's exception.

    litellm reports a refused connection as a 500 ``InternalServerError``; the transport error
    that caused it is further down the exception chain, so a generic ``model`` verdict is
    refined by looking there for a network or timeout failure.
    """
    category = _category(error)
    if category == "model":
        named = _category_by_body(error)
        if named is not None:
            return named
        cause = error.__cause__ or error.__context__
        for _ in range(10):
            if cause is None:
                break
            deeper = _category_by_class(cause)
            if deeper in ("network", "timeout"):
                return deeper
            cause = cause.__cause__ or cause.__context__
    return category


# An error's own name for itself, in the body an SDK keeps (``error.body``): what says what
# went wrong when the class does not, as for an error reported inside a stream, which the
# Anthropic SDK raises as a plain APIStatusError (Bedrock's ``throttlingException`` frame,
# a first-party ``overloaded_error`` event). Matched as lowercase substrings, in this order.
_CATEGORY_BY_ERROR_NAME = (
    ("throttl", "quota"),
    ("rate_limit", "quota"),
    ("ratelimit", "quota"),
    ("quota", "quota"),
    ("timeout", "timeout"),
    ("authentication", "auth"),
    ("permission", "auth"),
    ("accessdenied", "auth"),
    ("invalid_request", "invalid"),
    ("validation", "invalid"),
    ("too_large", "invalid"),
)


def _category_by_body(error: BaseException) -> str | None:
    """The category the error's body names (``{"error": {"type": ...}}``), if it names one."""
    body = getattr(error, "body", None)
    if not isinstance(body, Mapping):
        return None
    inner = body.get("error", body)
    if not isinstance(inner, Mapping):
        return None
    for key in ("type", "code"):
        name = inner.get(key)
        if isinstance(name, str):
            lowered = name.lower()
            for part, category in _CATEGORY_BY_ERROR_NAME:
                if part in lowered:
                    return category
    return None


def _category_by_class(error: BaseException) -> str | None:
    for cls in type(error).__mro__:
        category = _CATEGORY_BY_CLASS.get(cls.__name__)
        if category is not None:
            return category
    return None


def _category(error: BaseException) -> str:
    category = _category_by_class(error)
    if category is not None:
        return category
    status = getattr(error, "status_code", None)
    return status_category(status) if isinstance(status, int) else "model"


def status_category(status: Any) -> str:
    """agenttrace's failure category for an HTTP status a model API answered with (anything
    but an int: ``network``, no answer)."""
    if not isinstance(status, int) or isinstance(status, bool):
        return "network"
    if status in (401, 403):
        return "auth"
    if status in (402, 429):
        return "quota"
    if status == 408:
        return "timeout"
    if 400 <= status < 500:
        return "invalid"
    return "model"
