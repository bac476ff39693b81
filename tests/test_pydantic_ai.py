"""pydantic-ai through its instrumentation: real ``pydantic_ai.Agent``s whose ``OpenAIChatModel``
asks the local scripted server (tests/llm_server.py) over real HTTP, on a real TracerProvider.
Each run is an agent run, each model request the OpenAI SDK's one LLM span, each function tool
an op, and an agent run from inside a tool a sub-agent of that tool call."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

pydantic_ai = pytest.importorskip(
    "pydantic_ai", reason="the [pydantic-ai] extra needs Python 3.11 or later"
)

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.agent import Agent as AgentClass  # noqa: E402
from pydantic_ai.models.anthropic import AnthropicModel  # noqa: E402
from pydantic_ai.models.instrumented import InstrumentationSettings  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel  # noqa: E402
from pydantic_ai.providers.anthropic import AnthropicProvider  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402
from pydantic_ai.toolsets.function import FunctionToolset  # noqa: E402

import agenttrace  # noqa: E402
from agenttrace import semconv as sc  # noqa: E402
from agenttrace.formats.session.files import snapshot_path  # noqa: E402
from agenttrace.instrumentation.pydantic_ai import PydanticAIInstrumentor  # noqa: E402

from .anthropic_server import AnthropicServer, text, tool_use  # noqa: E402
from .anthropic_server import Reply as ClaudeReply  # noqa: E402
from .conftest import Traced, attrs, outcome  # noqa: E402
from .helpers import child_env  # noqa: E402
from .llm_server import LLMServer, Reply  # noqa: E402
from .test_anthropic_sdk import MODEL, aclient, claude, server  # noqa: E402
from .test_llm_steps import rearm  # noqa: E402
from .test_zero_code import run_instrumented  # noqa: E402

__all__ = ["claude", "server"]  # the Anthropic server's fixtures, used by name

KEY = "sk-agenttrace-pydantic-ai-test-0001"


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every connection these tests open goes to 127.0.0.1: pydantic-ai prices its usage with
    genai-prices, which could fetch a price list; an attempt elsewhere is refused and kept."""
    elsewhere: list[Any] = []
    connect = socket.socket.connect

    def loopback(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else None
        if host is not None and not ipaddress.ip_address(host).is_loopback:
            elsewhere.append(address)
            raise OSError(f"the tests are offline: {address}")
        return connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", loopback)
    yield elsewhere
    assert elsewhere == []


def model(llm: LLMServer) -> OpenAIChatModel:
    provider = OpenAIProvider(base_url=llm.api_base, api_key=KEY)
    return OpenAIChatModel("gpt-4o-mini", provider=provider)


def call(name: str, arguments: dict[str, Any], call_id: str) -> Reply:
    """A reply that calls tool ``name``."""
    tool_call = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return Reply(content="", tool_calls=[tool_call])


def adder(llm: LLMServer, **options: Any) -> Agent[None, str]:
    """An agent with one tool, ``add``."""
    agent = Agent(model(llm), name="adder", **options)

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    return agent


def tree(traced: Traced) -> list[tuple[str, str, str]]:
    """agenttrace's spans as (path, kind, name), in start order."""
    return [
        (attrs(s)[sc.PATH], attrs(s)[sc.KIND], s.name) for s in traced.ours() if sc.PATH in attrs(s)
    ]


def llm_spans(traced: Traced) -> list[Any]:
    return [s for s in traced.spans() if attrs(s).get(sc.KIND) == "llm"]


def transcripts(traced: Traced, tmp_path: Path) -> dict[str, list[tuple[str, str]]]:
    """Each agent's transcript in the event stream, by its name: (role, content or tool)."""
    traced.handle.force_flush()
    names: dict[str, str] = {}
    entries: dict[str, list[tuple[str, str]]] = {}
    for stream in (tmp_path / "sessions").glob("*.events.jsonl"):
        for line in stream.read_text().splitlines():
            event = json.loads(line)
            if event.get("event_type") == "agent_created":
                names[event["agent_id"]] = event["name"]
            if event.get("event_type") == "transcript_entry":
                calls = [c["function"]["name"] for c in event.get("tool_calls") or ()]
                said = event.get("content") or ",".join(calls)
                entries.setdefault(event["agent_id"], []).append((event["role"], str(said)))
    return {names[agent]: said for agent, said in entries.items()}


ADDER_TREE = [
    ("0", "session", "invoke_agent adder"),
    ("1", "turn", "turn 1"),
    ("1.1", "llm", "chat gpt-4o-mini"),
    ("1.2", "tool", "execute_tool add"),
    ("2", "turn", "turn 2"),
    ("2.1", "llm", "chat gpt-4o-mini"),
]


@pytest.mark.init(capture_content=True)
def test_run_sync_is_one_run_with_its_requests_and_tool_call(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    llm.script.extend([call("add", {"a": 2, "b": 3}, "call_1"), Reply(content="It is 5")])
    result = adder(llm).run_sync("What is 2 + 3?")

    assert result.output == "It is 5"
    assert tree(traced) == ADDER_TREE
    assert len({s.context.trace_id for s in traced.spans()}) == 1
    tool = attrs(traced.one("execute_tool add"))
    assert tool[sc.GEN_AI_TOOL_CALL_ID] == "call_1"
    assert json.loads(tool[sc.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"a": 2, "b": 3}
    assert tool[sc.GEN_AI_TOOL_CALL_RESULT] == "5"
    for span in llm_spans(traced):
        assert attrs(span)[sc.GEN_AI_USAGE_INPUT_TOKENS] == 11
        assert attrs(span)[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 7
    assert transcripts(traced, tmp_path) == {
        "adder": [
            ("user", "What is 2 + 3?"),
            ("assistant", "add"),
            ("tool", "5"),
            ("assistant", "It is 5"),
        ]
    }


def test_async_run_and_a_run_driven_node_by_node_through_iter(
    traced: Traced, llm: LLMServer
) -> None:
    agent = adder(llm)

    async def main() -> list[str]:
        outputs = [(await agent.run("What is 2 + 3?")).output]
        async with agent.iter("What is 2 + 3?") as run:
            async for _node in run:  # the requests and the tool run in this body
                pass
        assert run.result is not None
        outputs.append(run.result.output)
        return outputs

    llm.script.extend([call("add", {"a": 2, "b": 3}, "call_1"), Reply(content="five")] * 2)
    assert asyncio.run(main()) == ["five", "five"]
    runs = traced.by_name("invoke_agent adder")
    assert len(runs) == 2
    assert len({run.context.trace_id for run in runs}) == 2, "one trace per run"
    assert tree(traced) == ADDER_TREE * 2
    assert [outcome(run) for run in runs] == ["ok", "ok"]
    assert attrs(runs[0])[sc.GEN_AI_AGENT_ID] == attrs(runs[1])[sc.GEN_AI_AGENT_ID]


def test_run_stream_ends_its_run_when_the_caller_leaves_the_block(
    traced: Traced, llm: LLMServer
) -> None:
    agent = adder(llm)

    async def main() -> list[str]:
        async with agent.run_stream("What is 2 + 3?") as response:
            # The streamed reply is read here, in the caller: the run is still open.
            assert not traced.by_name("invoke_agent adder")
            return [text async for text in response.stream_text(delta=True)]

    llm.script.extend([call("add", {"a": 2, "b": 3}, "call_1"), Reply(content="It is five")])
    assert "".join(asyncio.run(main())) == "It is five"
    assert tree(traced) == ADDER_TREE
    streamed = llm_spans(traced)[-1]
    assert attrs(streamed)[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 7  # pydantic-ai asks for usage
    run = traced.one("invoke_agent adder")
    assert (run.end_time or 0) >= (streamed.end_time or 0)


@pytest.mark.init(capture_content=True)
def test_a_delegated_agent_is_a_sub_agent_of_the_tool_that_ran_it_at_any_depth(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    leaf = adder(llm)
    helper = Agent(model(llm), name="helper")
    boss = Agent(model(llm), name="boss")

    @helper.tool_plain
    async def compute(question: str) -> str:
        return (await leaf.run(question)).output

    # Both tools are async: pydantic-ai 2.78 refuses run_sync inside a tool (it can deadlock).
    @boss.tool_plain
    async def ask_helper(question: str) -> str:
        return (await helper.run(question)).output

    llm.script.extend(
        [
            call("ask_helper", {"question": "2 + 3?"}, "call_boss"),
            call("compute", {"question": "2 + 3?"}, "call_helper"),
            call("add", {"a": 2, "b": 3}, "call_add"),
            Reply(content="5"),
            Reply(content="the helper says 5"),
            Reply(content="It is 5"),
        ]
    )
    assert boss.run_sync("What is 2 + 3?").output == "It is 5"
    assert tree(traced) == [
        ("0", "session", "invoke_agent boss"),
        ("1", "turn", "turn 1"),
        ("1.1", "llm", "chat gpt-4o-mini"),
        ("1.2", "session", "execute_tool ask_helper"),
        ("1.2:1", "session", "invoke_agent helper"),
        ("1.2.1", "turn", "turn 1"),
        ("1.2.1.1", "llm", "chat gpt-4o-mini"),
        ("1.2.1.2", "session", "execute_tool compute"),
        ("1.2.1.2:1", "session", "invoke_agent adder"),
        ("1.2.1.2.1", "turn", "turn 1"),
        ("1.2.1.2.1.1", "llm", "chat gpt-4o-mini"),
        ("1.2.1.2.1.2", "tool", "execute_tool add"),
        ("1.2.1.2.2", "turn", "turn 2"),
        ("1.2.1.2.2.1", "llm", "chat gpt-4o-mini"),
        ("1.2.2", "turn", "turn 2"),
        ("1.2.2.1", "llm", "chat gpt-4o-mini"),
        ("2", "turn", "turn 2"),
        ("2.1", "llm", "chat gpt-4o-mini"),
    ]
    assert len({s.context.trace_id for s in traced.spans()}) == 1
    helper_run = attrs(traced.one("invoke_agent helper"))
    assert helper_run[sc.TXN_PARENT] == attrs(traced.one("invoke_agent boss"))[sc.TXN_ID]
    # In the event stream each sub-agent is caused by the reply that called its tool.
    events = [
        json.loads(line)
        for stream in (tmp_path / "sessions").glob("*.events.jsonl")
        for line in stream.read_text().splitlines()
    ]
    calls = {
        call["id"]: event["message_id"]
        for event in events
        if event.get("event_type") == "transcript_entry"
        for call in event.get("tool_calls") or ()
    }
    causes = {
        event["name"]: event.get("cause")
        for event in events
        if event.get("event_type") == "agent_created"
    }
    assert causes == {"boss": None, "helper": calls["call_boss"], "adder": calls["call_helper"]}


def test_with_pydantic_ai_s_own_instrumentation_each_request_is_still_one_llm_span(
    traced: Traced, llm: LLMServer
) -> None:
    before = AgentClass._instrument_default
    Agent.instrument_all(InstrumentationSettings(tracer_provider=traced.provider))
    try:
        llm.script.extend([call("add", {"a": 2, "b": 3}, "call_1"), Reply(content="It is 5")])
        assert adder(llm).run_sync("What is 2 + 3?").output == "It is 5"
    finally:
        Agent.instrument_all(before)

    assert tree(traced) == ADDER_TREE  # ours: one LLM span per request, as without it
    assert len(llm.requests) == 2
    # pydantic-ai's own spans, beside ours under our run: its run, requests and tool call.
    theirs = [s for s in traced.spans() if sc.KIND not in attrs(s)]
    assert sorted(s.name for s in theirs) == [
        "chat gpt-4o-mini",
        "chat gpt-4o-mini",
        "execute_tool add",
        "invoke_agent adder",
    ]
    run = next(s for s in traced.ours() if s.name == "invoke_agent adder")
    their_run = next(s for s in theirs if s.name == "invoke_agent adder")
    assert their_run.parent is not None and their_run.parent.span_id == run.context.span_id
    assert all(s.context.trace_id == run.context.trace_id for s in theirs)


def test_a_failed_run_fails_its_span_and_the_error_passes_through(
    traced: Traced, llm: LLMServer
) -> None:
    agent = Agent(model(llm), name="failing")
    llm.script.append(Reply(status=400, error_message="bad request"))  # not retried
    with pytest.raises(Exception) as raised:
        agent.run_sync("hi")
    assert "bad request" in str(raised.value)
    assert outcome(traced.one("invoke_agent failing")) == "failed"


def test_uninstrument_puts_pydantic_ai_back(traced: Traced, llm: LLMServer) -> None:
    instrumentor = PydanticAIInstrumentor()
    assert instrumentor.is_instrumented
    wrapped_iter = vars(AgentClass)["iter"]
    instrumentor.uninstrument()
    try:
        assert vars(AgentClass)["iter"] is wrapped_iter.__wrapped__
        assert not hasattr(vars(FunctionToolset)["call_tool"], "__wrapped__")
        llm.script.append(Reply(content="plain"))
        assert Agent(model(llm), name="plain").run_sync("hi").output == "plain"
        # Only the SDK's request is traced, in an implicit run of its own.
        assert "invoke_agent plain" not in [s.name for s in traced.ours()]
        assert len(llm_spans(traced)) == 1
    finally:
        instrumentor.instrument()
    assert vars(AgentClass)["iter"] is not wrapped_iter.__wrapped__


@pytest.mark.init(instrument_pydantic_ai=False)
def test_init_can_leave_pydantic_ai_alone(traced: Traced, llm: LLMServer) -> None:
    llm.script.append(Reply(content="plain"))
    assert Agent(model(llm), name="plain").run_sync("hi").output == "plain"
    assert not traced.by_name("invoke_agent plain")
    assert len(llm_spans(traced)) == 1  # the SDK's call is still traced


@pytest.mark.init(capture_content=True)
def test_parallel_calls_of_one_tool_each_answer_their_own_tool_call(
    traced: Traced, llm: LLMServer
) -> None:
    both = call("add", {"a": 1, "b": 2}, "call_a")
    assert both.tool_calls is not None
    both.tool_calls += call("add", {"a": 3, "b": 4}, "call_b").tool_calls or []
    llm.script.extend([both, Reply(content="3 and 7")])
    assert adder(llm).run_sync("1 + 2 and 3 + 4?").output == "3 and 7"
    answered = {
        attrs(s)[sc.GEN_AI_TOOL_CALL_ID]: attrs(s)[sc.GEN_AI_TOOL_CALL_RESULT]
        for s in traced.by_name("execute_tool add")
    }
    assert answered == {"call_a": "3", "call_b": "7"}


def test_run_stream_sync_is_one_run(traced: Traced, llm: LLMServer) -> None:
    llm.script.extend([call("add", {"a": 2, "b": 3}, "call_1"), Reply(content="It is five")])
    with adder(llm).run_stream_sync("What is 2 + 3?") as response:
        # pydantic-ai drives the run on a loop of its own; the reply is read here.
        assert "".join(response.stream_text(delta=True)) == "It is five"
    assert tree(traced) == ADDER_TREE


@pytest.mark.init(tool_effects={"add": "pure"})
def test_a_tool_s_effect_class_is_init_s_else_its_function_s(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    agent = adder(llm)

    def lookup(key: str) -> str:
        return key.upper()

    lookup.agenttrace_effect = "read"  # type: ignore[attr-defined]
    agent.tool_plain(lookup)
    reply = call("add", {"a": 2, "b": 3}, "call_add")
    assert reply.tool_calls is not None
    reply.tool_calls += call("lookup", {"key": "k"}, "call_lookup").tool_calls or []
    llm.script.extend([reply, Reply(content="done")])
    assert agent.run_sync("go").output == "done"

    traced.handle.force_flush()
    intents = [
        (event["name"], event["effect"])
        for stream in (tmp_path / "sessions").glob("*.events.jsonl")
        for event in map(json.loads, stream.read_text().splitlines())
        if event.get("event_type") == "step"
        and event.get("kind") == "tool"
        and event.get("state") == "intent"
    ]
    assert intents == [("lookup", "read")]  # a pure tool is never journaled


ZERO_CODE = """\
import sys

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

provider = OpenAIProvider(base_url=sys.argv[1], api_key="sk-zero-code")
assistant = Agent(OpenAIChatModel("gpt-4o-mini", provider=provider), name="assistant")
print(assistant.run_sync("Say hi").output)
"""


@pytest.mark.e2e  # runs a whole program as a user does: make test, not make check
def test_opentelemetry_instrument_traces_a_plain_pydantic_ai_script(
    tmp_path: Path, llm: LLMServer
) -> None:
    (entry,) = [
        e
        for e in metadata.entry_points(group="opentelemetry_instrumentor")
        if e.name == "agenttrace_pydantic_ai"
    ]
    assert entry.load() is PydanticAIInstrumentor
    llm.default = Reply(content="hi")
    script = tmp_path / "app.py"
    script.write_text(ZERO_CODE)
    env = child_env(
        OTEL_SERVICE_NAME="zero-code-app",
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
        AGENTTRACE_SESSIONS_DIR=str(tmp_path / "sessions"),
        AGENTTRACE_BILLING_FILE=str(tmp_path / "ledger.jsonl"),
        AGENTTRACE_RAISE_INTERNAL_ERRORS="1",
    )
    _, spans = run_instrumented([str(script), llm.api_base], env)
    # Ours (the dev venv also has other OpenAI instrumentations, whose spans come too).
    ours = sorted((s.attributes[sc.PATH], s.name) for s in spans if sc.KIND in s.attributes)
    assert ours == [
        ("0", "invoke_agent assistant"),
        ("1", "turn 1"),
        ("1.1", "chat gpt-4o-mini"),
    ]
    assert len(llm.requests) == 1


def test_the_responses_api_model_is_traced_the_same_way(traced: Traced, llm: LLMServer) -> None:
    provider = OpenAIProvider(base_url=llm.api_base, api_key=KEY)
    agent = Agent(OpenAIResponsesModel("gpt-4o-mini", provider=provider), name="responder")
    llm.script.append(Reply(content="Hello from responses"))
    assert agent.run_sync("hi").output == "Hello from responses"
    assert tree(traced) == [
        ("0", "session", "invoke_agent responder"),
        ("1", "turn", "turn 1"),
        ("1.1", "llm", "chat gpt-4o-mini"),
    ]
    assert llm.requests[0].path.endswith("/responses")
    assert attrs(llm_spans(traced)[0])[sc.GEN_AI_USAGE_OUTPUT_TOKENS] > 0


def test_a_resumed_session_goes_on_with_the_same_agents_by_name(
    traced: Traced, llm: LLMServer
) -> None:
    def delegating() -> Agent[None, str]:
        helper = Agent(model(llm), name="helper")
        boss = Agent(model(llm), name="boss")

        @boss.tool_plain
        async def ask_helper(question: str) -> str:
            return (await helper.run(question)).output

        return boss

    script = [
        call("ask_helper", {"question": "q"}, "call_1"),
        Reply(content="a"),
        Reply(content="done"),
    ]
    llm.script.extend(script)
    assert delegating().run_sync("go").output == "done"
    traced.handle.force_flush()
    first = agenttrace.current_session()

    # A new program: the session read back from its file, the agents built again.
    agenttrace.use_session(None)
    session = agenttrace.resume(
        snapshot_path(traced.handle.settings.sessions_dir, first.session_id)
    )
    llm.script.extend(script)
    assert delegating().run_sync("again").output == "done"
    traced.handle.force_flush()

    assert session.session_id == first.session_id
    assert sorted(session.agents) == ["agent_001", "agent_002"] and session.agent_counter == 2
    ids = [attrs(s)[sc.AGENT_ID] for s in traced.spans() if s.name.startswith("invoke_agent ")]
    assert ids == ["agent_001", "agent_002"] * 2


@pytest.mark.parametrize("stream", [False, True])
def test_a_re_entered_run_is_answered_from_the_journal_without_the_model_or_the_tool(
    traced: Traced, llm: LLMServer, tmp_path: Path, stream: bool
) -> None:
    added: list[int] = []
    agent = Agent(model(llm), name="adder")

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        added.append(a + b)
        return a + b

    async def streamed() -> str:
        async with agent.run_stream("What is 2 + 3?") as response:
            return await response.get_output()

    def run() -> str:
        return asyncio.run(streamed()) if stream else agent.run_sync("What is 2 + 3?").output

    llm.script.extend([call("add", {"a": 2, "b": 3}, "call_1"), Reply(content="It is 5")])
    assert run() == "It is 5"
    traced.handle.force_flush()
    rearm(tmp_path)  # as a resume of this run, killed, would
    llm.reset()
    llm.default = Reply(content="not asked")
    assert run() == "It is 5"
    assert llm.requests == [] and added == [5]  # neither the model nor the tool again


def test_an_anthropic_model_s_requests_are_one_llm_span_each(
    traced: Traced, claude: AnthropicServer
) -> None:
    """``AnthropicModel`` sends its requests through ``client.beta.messages.create``: each is
    one ``chat`` span of its turn, as ``OpenAIChatModel``'s are."""
    claude.reset(
        ClaudeReply(blocks=[tool_use("add", {"a": 2, "b": 3}, id="toolu_1")]),
        ClaudeReply(blocks=[text("It is 5")]),
    )
    provider = AnthropicProvider(anthropic_client=aclient(claude))
    # max_tokens set: newer pydantic-ai asks for its model's maximum, which the SDK refuses
    # unstreamed before sending, and then streams it: two attempts of one call.
    agent = Agent(
        AnthropicModel(MODEL, provider=provider), name="adder", model_settings={"max_tokens": 64}
    )

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    assert agent.run_sync("What is 2 + 3?").output == "It is 5"
    assert len(claude.message_requests()) == 2
    assert tree(traced) == [
        (path, kind, name.replace("gpt-4o-mini", MODEL)) for path, kind, name in ADDER_TREE
    ]
    for span in llm_spans(traced):
        assert attrs(span)[sc.GEN_AI_PROVIDER_NAME] == "anthropic"
