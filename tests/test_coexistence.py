"""One span, never two (issue 34 item 4), with another OpenTelemetry instrumentation of the same
SDK on beside agenttrace: OpenTelemetry contrib's ``opentelemetry-instrumentation-openai-v2``
and OpenLLMetry's ``opentelemetry-instrumentation-openai`` and ``-anthropic``, each turned on
before agenttrace's and after it, on the same real TracerProvider, the real SDKs over HTTP to
the scripted servers on 127.0.0.1.

Whatever the order, agenttrace makes exactly one LLM span per attempt and one transcript entry
per message; the other instrumentation adds a span of its own, nested with ours: the one
instrumented last wraps the SDK's method outside the other, so its span is the parent. A
re-entered run answered from the journal never calls the model; the other's span shows then
only when it is the outer one (it sees the replayed reply come back). docs/how-to/coexistence.md
says what the user sees."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import litellm
import openai
import pytest
import wrapt
from opentelemetry import trace
from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor as LLMetryAnthropic
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.instrumentation.openai import OpenAIInstrumentor as LLMetryOpenAI
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as ContribOpenAI
from opentelemetry.sdk.trace import ReadableSpan

import agenttrace
from agenttrace import semconv as sc
from agenttrace.instrumentation.anthropic import _TARGETS as anthropic_targets
from agenttrace.instrumentation.anthropic import AnthropicInstrumentor
from agenttrace.instrumentation.anthropic.request import state as anthropic_state
from agenttrace.instrumentation.litellm import LiteLLMInstrumentor
from agenttrace.instrumentation.openai import _TARGETS as openai_targets
from agenttrace.instrumentation.openai import OpenAIInstrumentor
from agenttrace.instrumentation.openai.request import state as openai_state

from . import test_anthropic_sdk as claude_sdk
from . import test_openai_sdk as openai_sdk
from .anthropic_server import AnthropicServer
from .conftest import Traced, attrs
from .llm_server import LLMServer
from .test_anthropic_sdk import claude, server
from .test_litellm import http
from .test_llm_steps import rearm
from .test_openai_sdk_litellm import AGAIN

__all__ = ["claude", "server"]  # the fixtures, used by name

THEIRS: dict[str, tuple[type[BaseInstrumentor], type[BaseInstrumentor]]] = {
    # name: (their instrumentor, ours of the same SDK)
    "contrib-openai-v2": (ContribOpenAI, OpenAIInstrumentor),
    "openllmetry-openai": (LLMetryOpenAI, OpenAIInstrumentor),
    "openllmetry-anthropic": (LLMetryAnthropic, AnthropicInstrumentor),
}


def their_spans(traced: Traced) -> list[ReadableSpan]:
    """The spans agenttrace did not make: the other instrumentation's."""
    return [s for s in traced.spans() if sc.KIND not in attrs(s)]


def llm_spans(traced: Traced) -> list[ReadableSpan]:
    return [s for s in traced.spans() if attrs(s).get(sc.KIND) == sc.KIND_LLM]


def roles(traced: Traced, tmp_path: Path) -> list[str]:
    """The roles of the transcript entries in the event stream, in order."""
    return [
        entry["role"]
        for entries in openai_sdk.transcripts(traced, tmp_path).values()
        for entry in entries
        if entry["event_type"] == "transcript_entry"
    ]


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


class Both:
    """Their instrumentor and ours of one SDK, both on, in a given order; undone in the reverse
    order (each of them puts back what it wrapped, so the outer one goes first)."""

    def __init__(self, name: str, theirs_first: bool, traced: Traced) -> None:
        their_class, our_class = THEIRS[name]
        self.name = name
        self.theirs, self.ours = their_class(), our_class()
        self.theirs_first = theirs_first
        assert self.ours.is_instrumented_by_opentelemetry  # init() turned ours on
        if theirs_first:
            self.ours.uninstrument()
            self.theirs.instrument(tracer_provider=traced.provider)
            self.ours.instrument(skip_dep_check=True)
        else:
            self.theirs.instrument(tracer_provider=traced.provider)

    def undo(self) -> None:
        if not self.theirs.is_instrumented_by_opentelemetry:
            return
        if self.theirs_first:  # ours is the outer wrapper: off first, then theirs, then ours
            self.ours.uninstrument()
            self.theirs.uninstrument()
            self.ours.instrument(skip_dep_check=True)
        else:
            self.theirs.uninstrument()

    @property
    def openai(self) -> bool:
        return self.name != "openllmetry-anthropic"


def _sdk_methods() -> list[tuple[type, str]]:
    """The SDK methods agenttrace wraps, which the others wrap too (on their classes)."""
    found = []
    for module, owner_name, name, _ in (*openai_targets, *anthropic_targets):
        owner = getattr(importlib.import_module(module), owner_name, None)
        if owner is not None and name in vars(owner):
            found.append((owner, name))
    return found


@pytest.fixture(autouse=True)
def sdk_methods_put_back() -> Iterator[None]:
    """After each test (and agenttrace's shutdown, which takes its own wrappers off), each SDK
    method is the SDK's own again, whatever wrapper another instrumentation left on it:
    OpenLLMetry's OpenAI ``uninstrument()`` (0.62.4) leaves its wrapper of
    ``chat.completions.create`` on openai 2.x, which would make spans in later tests."""
    yield
    assert not openai_state.patches and not anthropic_state.patches
    for owner, name in _sdk_methods():
        method = vars(owner)[name]
        while isinstance(method, wrapt.FunctionWrapper):
            method = method.__wrapped__
        setattr(owner, name, method)


@pytest.fixture(params=sorted(THEIRS))
def name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["theirs-first", "ours-first"])
def both(request: pytest.FixtureRequest, name: str, traced: Traced) -> Iterator[Both]:
    made = Both(name, request.param == "theirs-first", traced)
    try:
        yield made
    finally:
        made.undo()


def ask(both: Both, llm: LLMServer, claude: AnthropicServer, stream: bool) -> tuple[Any, str]:
    """One call through the SDK both instrument, in an agent's turn: the reply as the SDK (and
    the instrumentations) gave it, and its text (a stream read to its end)."""

    @agenttrace.agent("Asker")
    def run() -> tuple[Any, str]:
        if both.openai:
            reply = openai_sdk.client(llm).chat.completions.create(
                model="gpt-4o-mini", messages=openai_sdk.HI, stream=stream
            )
            if stream:
                return reply, "".join(c.choices[0].delta.content or "" for c in reply if c.choices)
            return reply, str(reply.choices[0].message.content)
        message = claude_sdk.client(claude).messages.create(
            model=claude_sdk.MODEL, max_tokens=64, messages=claude_sdk.HI, stream=stream
        )
        if stream:
            deltas = [e.delta for e in message if e.type == "content_block_delta"]
            return message, "".join(d.text for d in deltas if d.type == "text_delta")
        return message, str(message.content[0].text)

    return run()


def check_reply(both: Both, reply: Any, stream: bool, theirs_reached: bool = True) -> None:
    """A plain reply is the SDK's own object. A stream is what the wrappers made of the SDK's:
    contrib's is its own ``ChatStreamWrapper``, no ``openai.Stream`` (behind our proxy when
    ours is outside; a reply replayed inside ours never reaches contrib's, and is the SDK's
    ``Stream``); OpenLLMetry's and ours are proxies that pass for the SDK's stream."""
    if not stream:
        assert type(reply) is (
            openai.types.chat.ChatCompletion if both.openai else anthropic.types.Message
        )
    elif both.name == "contrib-openai-v2" and theirs_reached:
        assert reply.__class__.__name__ == "ChatStreamWrapper"
        assert not isinstance(reply, openai.Stream)
    else:
        assert isinstance(reply, openai.Stream if both.openai else anthropic.Stream)


def requests(both: Both, llm: LLMServer, claude: AnthropicServer) -> int:
    return len(llm.requests) if both.openai else len(claude.message_requests())


INSIDE_OURS = "theirs inside our LLM span"
BESIDE_THE_TURN = "theirs in our agent's span, beside the turn of our LLM span"


def nesting(traced: Traced, ours: ReadableSpan, theirs: ReadableSpan) -> str:
    """How their span and ours nest. The wrapper instrumented last is the outer one: theirs
    inside, its span is our LLM span's child; theirs outside, it starts before agenttrace's
    turn does (the LLM call opens the turn), so it is the agent's child, beside the turn."""
    if parent_of(theirs) == ours.context.span_id:
        return INSIDE_OURS
    agent = next(s for s in traced.spans() if attrs(s).get(sc.KIND) == sc.KIND_SESSION)
    turn = next(s for s in traced.spans() if attrs(s).get(sc.KIND) == sc.KIND_TURN)
    if parent_of(theirs) == agent.context.span_id and parent_of(ours) == turn.context.span_id:
        return BESIDE_THE_TURN
    return "something else"


@pytest.mark.parametrize("stream", [False, True])
def test_one_agenttrace_span_and_their_own_nested_with_it(
    traced: Traced,
    tmp_path: Path,
    llm: LLMServer,
    claude: AnthropicServer,
    both: Both,
    stream: bool,
) -> None:
    reply, said = ask(both, llm, claude, stream)
    assert said == "Hello!"  # a stream still streams, through both wrappers
    check_reply(both, reply, stream)
    assert requests(both, llm, claude) == 1
    (ours,) = llm_spans(traced)
    assert attrs(ours)[sc.ATTEMPT] == 1
    assert roles(traced, tmp_path) == ["user", "assistant"]
    (theirs,) = their_spans(traced)
    assert nesting(traced, ours, theirs) == (INSIDE_OURS if both.theirs_first else BESIDE_THE_TURN)
    # Whatever nests in whatever, agenttrace's tree is its own: the LLM op in the agent's turn.
    assert [line.strip() for line in traced.tree() if "[" in line] == [
        "invoke_agent Asker [0]",
        "turn 1 [1]",
        f"{ours.name} [1.1]",
    ]
    # Nothing is left current after the call: the next span is a root again.
    assert not trace.get_current_span().get_span_context().is_valid


@pytest.mark.parametrize("stream", [False, True])
def test_a_re_entered_run_does_not_call_the_model_with_theirs_on(
    traced: Traced,
    tmp_path: Path,
    llm: LLMServer,
    claude: AnthropicServer,
    both: Both,
    stream: bool,
) -> None:
    ask(both, llm, claude, stream)
    assert len(their_spans(traced)) == 1
    traced.handle.force_flush()
    rearm(tmp_path)
    again, said = ask(both, llm, claude, stream)
    assert said == "Hello!"
    check_reply(both, again, stream, theirs_reached=not both.theirs_first)
    assert requests(both, llm, claude) == 1  # the first run's only
    replayed = [s for s in llm_spans(traced) if attrs(s).get(sc.REPLAYED)]
    assert len(replayed) == 1 and len(llm_spans(traced)) == 2
    # Inside ours, theirs is not reached (no request is made); outside, it sees the replayed
    # reply come back and makes its span as for a call.
    assert len(their_spans(traced)) == (1 if both.theirs_first else 2)


def test_a_stream_inside_contrib_s_leaves_no_ended_span_current(
    traced: Traced, llm: LLMServer
) -> None:
    """contrib's openai-v2 makes its span current when a stream starts and detaches it when
    the stream ends; inside ours, that detach restored our attempt's context in the caller's
    after our wrapper had put the caller's back, so our ended LLM span stayed current and
    parented every span that came after (agenttrace's next run included)."""
    made = Both("contrib-openai-v2", True, traced)
    try:
        stream = openai_sdk.client(llm).chat.completions.create(
            model="gpt-4o-mini", messages=openai_sdk.HI, stream=True
        )
        list(stream)
        assert not trace.get_current_span().get_span_context().is_valid
        with agenttrace.agent("Next"):
            pass
        (ours,) = llm_spans(traced)
        assert traced.one("invoke_agent Next").parent is None
        assert ours.end_time is not None
    finally:
        made.undo()


def test_with_theirs_uninstrumented_ours_goes_on_alone(
    traced: Traced, llm: LLMServer, claude: AnthropicServer, both: Both
) -> None:
    """Undone in the reverse order, theirs is gone and ours goes on; but OpenLLMetry's OpenAI
    ``uninstrument()`` (0.62.4, on openai 2.x) leaves its wrapper of ``chat.completions.create``
    in place, so its spans go on after it (its bug, with agenttrace or without)."""
    both.undo()
    ask(both, llm, claude, False)
    assert len(llm_spans(traced)) == 1
    assert len(their_spans(traced)) == (1 if both.name == "openllmetry-openai" else 0)


def test_with_ours_uninstrumented_theirs_goes_on_alone(
    traced: Traced, llm: LLMServer, claude: AnthropicServer, name: str
) -> None:
    made = Both(name, True, traced)
    made.ours.uninstrument()
    try:
        ask(made, llm, claude, False)
        assert llm_spans(traced) == []
        assert len(their_spans(traced)) == 1
    finally:
        made.theirs.uninstrument()
        made.ours.instrument(skip_dep_check=True)


def fresh_litellm_clients() -> None:
    """litellm keeps its SDK clients, whose ``with_raw_response`` methods were bound to the
    wrappers of the time (another test's instrumentations, on another provider): new ones."""
    litellm.in_memory_llm_clients_cache.flush_cache()


def test_a_litellm_call_with_contrib_openai_v2_on_is_one_agenttrace_span(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    """litellm sends an OpenAI-compatible request through the OpenAI SDK: with contrib's
    instrumentation of that SDK on too, a litellm call, plain or streamed, is still one
    agenttrace LLM span (its attempt), and contrib's span of the SDK call inside it, where
    there is one, is that span's child. (litellm 1.110 posts its chat requests with the SDK's
    client.post, under contrib's wrappers: contrib makes no span of them there; older litellm
    calls chat.completions.create, and contrib's span nests under ours.)"""
    fresh_litellm_clients()
    theirs = ContribOpenAI()
    theirs.instrument(tracer_provider=traced.provider)
    try:
        litellm.completion(**http(llm))
        again = [*openai_sdk.HI, {"role": "assistant", "content": "Hello!"}, AGAIN]
        list(litellm.completion(**http(llm, stream=True, messages=again)))
    finally:
        theirs.uninstrument()
    assert len(llm.requests) == 2
    first, second = llm_spans(traced)
    assert roles(traced, tmp_path) == ["user", "assistant", "user", "assistant"]
    contrib = [parent_of(s) for s in their_spans(traced)]
    assert contrib in ([], [first.context.span_id, second.context.span_id])
    assert not trace.get_current_span().get_span_context().is_valid


def test_with_litellm_s_instrumentation_off_contrib_outside_ours_does_not_make_it_traced(
    traced: Traced, llm: LLMServer
) -> None:
    """litellm's own raw SDK calls are left untraced when litellm's instrumentation is off
    (tests/test_openai_sdk_litellm.py); contrib's wrapper between litellm and ours made them
    look like a user's, so they were traced anyway."""
    fresh_litellm_clients()
    theirs = ContribOpenAI()
    theirs.instrument(tracer_provider=traced.provider)
    LiteLLMInstrumentor().uninstrument()
    try:
        litellm.completion(**http(llm))
    finally:
        LiteLLMInstrumentor().instrument(skip_dep_check=True)
        theirs.uninstrument()
    assert len(llm.requests) == 1
    assert llm_spans(traced) == []
    assert len(their_spans(traced)) <= 1  # none where litellm posts past the SDK's create
