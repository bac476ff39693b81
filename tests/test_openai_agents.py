"""The OpenAI Agents SDK through its tracing processor: a real ``agents.Agent`` and ``Runner``
over real HTTP to the local scripted server (tests/llm_server.py), with the Chat Completions
model and the Responses model; its model calls are the OpenAI SDK instrumentation's spans."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import litellm  # noqa: F401  (loaded: its price map prices the OpenAI SDK's calls)
import openai
import pytest

agents = pytest.importorskip("agents")

from agents import (  # noqa: E402
    Agent,
    GuardrailFunctionOutput,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    ToolCallOutputItem,
    function_tool,
    input_guardrail,
)

from agenttrace import InDoubtToolCall  # noqa: E402
from agenttrace import semconv as sc  # noqa: E402
from agenttrace.formats.session.files import read_session_file  # noqa: E402
from agenttrace.instrumentation.openai_agents import tracing_processor  # noqa: E402

from .conftest import Traced, attrs, outcome  # noqa: E402
from .llm_server import LLMServer, Reply  # noqa: E402
from .test_llm_steps import rearm  # noqa: E402

KEY = "sk-agenttrace-agents-test-0001"


@pytest.fixture(autouse=True)
def no_export_to_openai(traced: Traced) -> None:
    """Only agenttrace's processor: the SDK's exporter to OpenAI's backend is dropped (no
    network). ``set_tracing_disabled`` would silence every processor, agenttrace's too."""
    assert tracing_processor() is not None  # init() added it, agents being imported
    agents.set_trace_processors([tracing_processor()])


def call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


@function_tool
def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


@input_guardrail
def polite(context: Any, agent: Any, user_input: Any) -> GuardrailFunctionOutput:
    """Never trips."""
    return GuardrailFunctionOutput(output_info={"polite": True}, tripwire_triggered=False)


def chat_model(llm: LLMServer) -> OpenAIChatCompletionsModel:
    client = openai.AsyncOpenAI(base_url=llm.api_base, api_key=KEY, max_retries=0)
    return OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)


def responses_model(llm: LLMServer) -> OpenAIResponsesModel:
    client = openai.AsyncOpenAI(base_url=llm.api_base, api_key=KEY, max_retries=0)
    return OpenAIResponsesModel(model="gpt-4o-mini", openai_client=client)


def desk(model: Any) -> Agent[Any]:
    """A triage agent that hands off to a billing agent with a refund tool."""
    billing = Agent(name="billing", instructions="Refund orders.", tools=[refund], model=model)
    return Agent(
        name="triage",
        instructions="Route the customer.",
        handoffs=[billing],
        input_guardrails=[polite],
        model=model,
    )


SCRIPT = (
    Reply(content="", tool_calls=[call("call_h", "transfer_to_billing", {})]),
    Reply(content="", tool_calls=[call("call_r", "refund", {"order_id": "A1"})]),
    Reply(content="Refunded A1."),
)

TREE = [
    "invoke_agent triage [0]",
    # The SDK runs an input guardrail next to the first model call; here it starts first.
    "  turn 1 [1]",
    "    execute_tool polite [1.1]",
    "  turn 2 [2]",
    "    chat gpt-4o-mini [2.1]",
    "    execute_tool transfer_to_billing [2.2]",
    "      invoke_agent billing [2.2:1]",
    "        turn 1 [2.2.1]",
    "          chat gpt-4o-mini [2.2.1.1]",
    "          execute_tool refund [2.2.1.2]",
    "        turn 2 [2.2.2]",
    "          chat gpt-4o-mini [2.2.2.1]",
]


def llm_spans(traced: Traced) -> list[Any]:
    return [s for s in traced.spans() if attrs(s).get(sc.KIND) == "llm"]


@pytest.mark.init(tool_effects={"refund": "idempotent"}, capture_content=True)
def test_a_run_with_a_handoff_and_a_tool_is_one_tree(traced: Traced, llm: LLMServer) -> None:
    llm.reset(*SCRIPT)
    result = Runner.run_sync(desk(chat_model(llm)), "Refund order A1, please.")
    assert result.final_output == "Refunded A1."

    assert traced.tree() == TREE
    # One LLM span per request the model server got: the SDK's generation spans make none.
    assert len(llm_spans(traced)) == len(llm.requests) == 3
    for span in llm_spans(traced):
        assert attrs(span)[sc.GEN_AI_USAGE_INPUT_TOKENS] == 11
        assert attrs(span)[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 7
        assert attrs(span)[sc.COST_USD] > 0
    tool = attrs(traced.one("execute_tool refund"))
    assert json.loads(tool[sc.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"order_id": "A1"}
    assert tool[sc.GEN_AI_TOOL_CALL_ID] == "call_r"
    handoff = attrs(traced.one("execute_tool transfer_to_billing"))
    assert handoff[sc.GEN_AI_TOOL_CALL_ID] == "call_h"
    guard = traced.one("execute_tool polite")
    assert attrs(guard)[sc.TOOL_CATEGORY] == "guardrail"
    assert outcome(guard) == "ok"


@pytest.mark.init(tool_effects={"refund": "idempotent"})
def test_the_saved_session_file_has_the_handoff_ended_and_the_agent_it_ran(
    traced: Traced, llm: LLMServer
) -> None:
    """The session file alone (not merged with the stream) has what the spans have: the
    handoff's op ended, and the billing agent's run under it, whatever order the SDK ends
    the agents in."""
    llm.reset(*SCRIPT)
    Runner.run_sync(desk(chat_model(llm)), "Refund order A1, please.")

    traced.handle.force_flush()
    (path,) = traced.handle.settings.sessions_dir.glob("*.json.gz")
    (triage,) = read_session_file(path).runs
    assert triage["agentName"] == "triage" and triage["success"] is True
    handoff = triage["turns"][1]["ops"][1]
    assert (handoff["path"], handoff["name"]) == ("2.2", "transfer_to_billing")
    assert handoff["status"] == "ok" and handoff["endedAt"] >= handoff["startedAt"]
    billing = handoff["childSession"]
    assert (billing["path"], billing["agentName"], billing["success"]) == ("2.2:1", "billing", True)
    ops = [op for turn in billing["turns"] for op in turn["ops"]]
    assert [(op["path"], op["name"], op["status"]) for op in ops] == [
        ("2.2.1.1", "gpt-4o-mini", "ok"),
        ("2.2.1.2", "refund", "ok"),
        ("2.2.2.1", "gpt-4o-mini", "ok"),
    ]
    # The agent that handed off ends with the trace, after the agent it handed to (the SDK's
    # turn span, the handoff span's parent, is no scope: its agent is found by the op's run).
    assert triage["span"]["endTimeUnixNano"] >= billing["span"]["endTimeUnixNano"]
    assert triage["endedAt"] >= handoff["endedAt"]


def stream_lines(traced: Traced) -> list[dict[str, Any]]:
    traced.handle.force_flush()
    (stream,) = traced.handle.settings.sessions_dir.glob("*.events.jsonl")
    return [json.loads(line) for line in stream.read_text().splitlines()]


@pytest.mark.init(tool_effects={"refund": "idempotent"})
def test_the_journal_and_the_transcripts_come_from_the_run(traced: Traced, llm: LLMServer) -> None:
    llm.reset(*SCRIPT)
    Runner.run_sync(desk(chat_model(llm)), "Refund order A1, please.")

    lines = stream_lines(traced)
    steps = [line for line in lines if line["event_type"] == "step" and line["kind"] == "tool"]
    # The refund's class is the application's init(tool_effects=...); a handoff and a guardrail
    # are pure: never journaled.
    assert [(s["name"], s.get("effect"), s["state"], s.get("call_id")) for s in steps] == [
        ("refund", "idempotent", "intent", "call_r"),
        ("refund", None, "done", None),
    ]
    assert json.loads(steps[0]["arguments"]) == {"order_id": "A1"}
    assert json.loads(steps[1]["result"]) == "refunded A1"
    created = {line["name"]: line for line in lines if line["event_type"] == "agent_created"}
    assert set(created) == {"triage", "billing"}
    entries = [line for line in lines if line["event_type"] == "transcript_entry"]
    by_agent: dict[str, list[str]] = {}
    for entry in entries:
        by_agent.setdefault(entry["agent_id"], []).append(entry["role"])
    triage, billing = created["triage"]["agent_id"], created["billing"]["agent_id"]
    assert "user" in by_agent[triage] and "assistant" in by_agent[triage]
    assert by_agent[billing][-1] == "assistant"
    assert "tool" in by_agent[billing]  # the refund's result, in the agent that called it
    said = [e for e in entries if e["agent_id"] == billing and e["role"] == "assistant"]
    assert said[-1]["content"] == "Refunded A1."


@pytest.mark.parametrize(
    ("make", "streamed"),
    [
        pytest.param(responses_model, False, id="responses"),
        pytest.param(chat_model, True, id="chat-streamed"),
        # The Agents SDK streams Responses through with_streaming_response.
        pytest.param(responses_model, True, id="responses-streamed"),
    ],
)
async def test_an_async_run_each_model_and_streamed(
    traced: Traced, llm: LLMServer, make: Any, streamed: bool
) -> None:
    llm.reset(
        Reply(content="", tool_calls=[call("call_r", "refund", {"order_id": "B2"})]),
        Reply(content="Refunded B2."),
    )
    billing = Agent(name="billing", tools=[refund], model=make(llm))
    if streamed:
        result: Any = Runner.run_streamed(billing, "Refund B2.")
        async for _ in result.stream_events():
            pass
    else:
        result = await Runner.run(billing, "Refund B2.")
    assert result.final_output == "Refunded B2."

    assert [line.strip() for line in traced.tree()] == [
        "invoke_agent billing [0]",
        "turn 1 [1]",
        "chat gpt-4o-mini [1.1]",
        "execute_tool refund [1.2]",
        "turn 2 [2]",
        "chat gpt-4o-mini [2.1]",
    ]
    assert len(llm_spans(traced)) == len(llm.requests) == 2
    assert attrs(traced.one("execute_tool refund"))[sc.GEN_AI_TOOL_CALL_ID] == "call_r"


@input_guardrail
def rude(context: Any, agent: Any, user_input: Any) -> GuardrailFunctionOutput:
    """Always trips."""
    return GuardrailFunctionOutput(output_info={"rude": True}, tripwire_triggered=True)


@pytest.mark.init(capture_content=True)
def test_a_tripped_guardrail_is_recorded_and_its_exception_passes_through(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(Reply(content="never used"))
    guarded = Agent(
        name="guarded", input_guardrails=[rude], model=chat_model(llm), instructions="Help."
    )
    with pytest.raises(agents.InputGuardrailTripwireTriggered):
        Runner.run_sync(guarded, "hello")

    guard = traced.one("execute_tool rude")
    assert json.loads(attrs(guard)[sc.GEN_AI_TOOL_CALL_RESULT]) == {"triggered": True}
    assert outcome(traced.one("invoke_agent guarded")) == "failed"


def test_the_entry_point_names_the_instrumentor() -> None:
    from importlib import metadata

    from agenttrace.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    (entry,) = [
        e
        for e in metadata.entry_points(group="opentelemetry_instrumentor")
        if e.name == "agenttrace_openai_agents"
    ]
    assert entry.load() is OpenAIAgentsInstrumentor


def test_an_agent_called_as_a_tool_is_a_sub_agent_of_that_call(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(
        Reply(content="", tool_calls=[call("call_b", "ask_billing", {"input": "refund A1"})]),
        Reply(content="", tool_calls=[call("call_r", "refund", {"order_id": "A1"})]),
        Reply(content="Refunded A1."),
        Reply(content="All done."),
    )
    billing = Agent(name="billing", tools=[refund], model=chat_model(llm))
    asks = billing.as_tool(tool_name="ask_billing", tool_description="Ask billing.")
    boss = Agent(name="boss", tools=[asks], model=chat_model(llm))
    assert Runner.run_sync(boss, "Refund A1.").final_output == "All done."

    assert traced.tree() == [
        "invoke_agent boss [0]",
        "  turn 1 [1]",
        "    chat gpt-4o-mini [1.1]",
        "    execute_tool ask_billing [1.2]",
        "      invoke_agent billing [1.2:1]",
        "        turn 1 [1.2.1]",
        "          chat gpt-4o-mini [1.2.1.1]",
        "          execute_tool refund [1.2.1.2]",
        "        turn 2 [1.2.2]",
        "          chat gpt-4o-mini [1.2.2.1]",
        "  turn 2 [2]",
        "    chat gpt-4o-mini [2.1]",
    ]


def test_two_runs_in_one_sdk_trace_are_two_runs(traced: Traced, llm: LLMServer) -> None:
    """What a handoff keeps open ends when the trace's next run starts, not under it."""
    llm.reset(*SCRIPT, Reply(content="Anything else?"))
    model = chat_model(llm)
    with agents.trace("support"):
        Runner.run_sync(desk(model), "Refund order A1, please.")
        Runner.run_sync(Agent(name="closer", model=model), "Bye.")

    roots = [line for line in traced.tree() if not line.startswith(" ")]
    assert roots == ["invoke_agent triage [0]", "invoke_agent closer [0]"]
    assert len(traced.tree()) == len(TREE) + 3


def test_after_shutdown_the_processor_stays_added_but_inert(traced: Traced, llm: LLMServer) -> None:
    from agenttrace.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    traced.handle.shutdown()
    assert not OpenAIAgentsInstrumentor().is_instrumented
    llm.reset(Reply(content="Hi."))
    assert Runner.run_sync(Agent(name="quiet", model=chat_model(llm)), "Hi.").final_output == "Hi."
    assert traced.exporter.get_finished_spans() == ()


@function_tool
def charge(order_id: str) -> str:
    """Charge an order; B2's card is refused."""
    if order_id == "B2":
        raise ValueError("card refused")
    return f"charged {order_id}"


@pytest.mark.init(capture_content=True)
def test_parallel_calls_get_their_own_arguments_and_a_failing_tool_fails_its_op(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(
        Reply(
            content="",
            tool_calls=[
                call("call_1", "charge", {"order_id": "A1"}),
                call("call_2", "charge", {"order_id": "B2"}),
            ],
        ),
        Reply(content="One charged."),
    )
    cashier = Agent(name="cashier", tools=[charge], model=chat_model(llm))
    assert Runner.run_sync(cashier, "Charge A1 and B2.").final_output == "One charged."

    ops = {
        attrs(span)[sc.GEN_AI_TOOL_CALL_ID]: span for span in traced.by_name("execute_tool charge")
    }
    assert json.loads(attrs(ops["call_1"])[sc.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"order_id": "A1"}
    assert json.loads(attrs(ops["call_2"])[sc.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"order_id": "B2"}
    assert outcome(ops["call_1"]) == "ok"
    assert outcome(ops["call_2"]) == "failed"  # the SDK told the model; the op says it failed


paid: list[str] = []
"""The orders ``pay`` paid, in order: its side effect."""


@function_tool
def pay(order_id: str) -> str:
    """Pay an order: an effect, and a result that says which payment it was."""
    paid.append(order_id)
    return f"paid {order_id} (payment {len(paid)})"


@pytest.mark.parametrize(
    ("sensitive", "streamed"),
    [
        pytest.param(True, False, id="run"),
        # Without the SDK's sensitive data its span has no output: the op and the journal
        # still get the tool's, from its body.
        pytest.param(False, False, id="no-span-output"),
        pytest.param(True, True, id="streamed"),
    ],
)
@pytest.mark.init(tool_effects={"pay": "effect"})
def test_a_re_entered_run_is_answered_from_the_journal_without_the_model_or_the_tool(
    traced: Traced, llm: LLMServer, tmp_path: Path, sensitive: bool, streamed: bool
) -> None:
    config = RunConfig(trace_include_sensitive_data=sensitive)
    cashier = Agent(name="cashier", tools=[pay], model=chat_model(llm))

    async def stream() -> Any:
        result = Runner.run_streamed(cashier, "Pay A1.", run_config=config)
        async for _ in result.stream_events():
            pass
        return result

    def run() -> Any:
        if streamed:
            return asyncio.run(stream())
        return Runner.run_sync(cashier, "Pay A1.", run_config=config)

    paid.clear()
    llm.reset(
        Reply(content="", tool_calls=[call("call_p", "pay", {"order_id": "A1"})]),
        Reply(content="Paid A1."),
    )
    assert run().final_output == "Paid A1."
    traced.handle.force_flush()
    rearm(tmp_path)  # as a resume of this run, killed, would
    llm.reset()
    llm.default = Reply(content="not asked")

    again = run()

    assert again.final_output == "Paid A1."
    assert llm.requests == [] and paid == ["A1"]  # neither the model nor the tool again
    (output,) = [item.output for item in again.new_items if isinstance(item, ToolCallOutputItem)]
    assert output == "paid A1 (payment 1)"  # the recorded result, as the agent saw it
    first, second = traced.by_name("execute_tool pay")  # one op per call
    assert sc.REPLAYED not in attrs(first) and attrs(second)[sc.REPLAYED] is True
    assert outcome(second) == "ok"
    steps = [
        (line["state"], line.get("result"))
        for line in stream_lines(traced)
        if line["event_type"] == "step" and line["kind"] == "tool"
    ]
    assert steps == [
        ("intent", None),
        ("done", json.dumps("paid A1 (payment 1)")),
        ("replayed", None),
    ]


@pytest.mark.init(tool_effects={"pay": "effect"})
def test_a_re_entry_stops_at_an_effect_in_doubt_without_running_it(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    paid.clear()
    llm.reset(
        Reply(content="", tool_calls=[call("call_p", "pay", {"order_id": "A1"})]),
        Reply(content="Paid A1."),
    )
    cashier = Agent(name="cashier", tools=[pay], model=chat_model(llm))
    Runner.run_sync(cashier, "Pay A1.")
    traced.handle.force_flush()
    # Killed after the payment's intent, before its outcome: nothing says whether it happened.
    rearm(tmp_path, keep=lambda line: not (line["kind"] == "tool" and line["state"] == "done"))
    llm.reset()
    llm.default = Reply(content="not asked")

    # The SDK raises its UserError from agenttrace's, which names the call in doubt.
    with pytest.raises(agents.UserError) as raised:
        Runner.run_sync(cashier, "Pay A1.")

    assert isinstance(raised.value.__cause__, InDoubtToolCall)
    assert paid == ["A1"] and llm.requests == []
