"""init() alone: the LLM calls of one agent make one run, against the local server over real HTTP.

The agents here are written as people write them without agenttrace: a loop that asks the model,
appends the reply and the tool results, and asks again; no decorator anywhere. The rules they
exercise are the ones ``agenttrace.tracing.implicit`` documents: a call whose messages extend an
open run's last request is its next turn; any other call is a new agent, nested under the run
whose work is still going on around it (handed over to a task or thread, made deeper in the
stack, or while that run's reply waits for its tool calls), else a new root run.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import litellm
import pytest
from opentelemetry.sdk.trace import ReadableSpan

import agenttrace
from agenttrace import semconv as sc
from agenttrace.formats.session.optree import hosted_sessions

from .conftest import Traced, attrs, outcome
from .llm_server import LLMServer, Reply
from .test_litellm import MODEL, http, llm_spans

MANAGER = "You are the manager. Delegate research."
RESEARCHER = "You are the researcher. Answer briefly."
PLANNER = "You plan."
WRITER = "You write."
RUN = "invoke_agent agenttrace"
WAIT = 60.0


def tool_call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


def asks_for(*calls: dict[str, Any]) -> Reply:
    return Reply(content="", tool_calls=list(calls))


def ask(llm: LLMServer, messages: list[Any]) -> Any:
    """The agents' model helper: one litellm call."""
    return litellm.completion(**http(llm, messages=messages))


def run_agent(
    llm: LLMServer,
    system: str,
    task: str,
    tools: dict[str, Callable[..., str]] | None = None,
) -> str:
    """An agent loop as written without agenttrace: ask, append the reply and the results of
    the tools it asked for, ask again, until a reply asks for none."""
    messages: list[Any] = [{"role": "system", "content": system}, {"role": "user", "content": task}]
    for _ in range(10):
        message = ask(llm, messages).choices[0].message
        calls = message.tool_calls or []
        messages.append(
            {
                "role": "assistant",
                "content": message.content,
                **({"tool_calls": [c.model_dump() for c in calls]} if calls else {}),
            }
        )
        if not calls:
            return str(message.content)
        for call in calls:
            result = (tools or {})[call.function.name](**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    raise AssertionError("the agent did not finish")


def unflushed(traced: Traced, name: str = RUN) -> list[ReadableSpan]:
    """The spans named ``name`` exported so far, without a flush (a flush ends the implicit
    runs that have no call running)."""
    return [s for s in traced.exporter.get_finished_spans() if s.name == name]


def agent_ids(spans: list[ReadableSpan]) -> list[str]:
    return [attrs(s)[sc.AGENT_ID] for s in spans]


def span_by_id(traced: Traced, span_id: int) -> ReadableSpan:
    (span,) = [s for s in traced.spans() if s.context.span_id == span_id]
    return span


def events_file(tmp_path: Path) -> Path:
    (path,) = (tmp_path / "sessions").glob("*.events.jsonl")
    return path


# --- one agent ---------------------------------------------------------------------------------


@pytest.mark.init(capture_content=True)
def test_the_calls_of_one_agent_loop_are_one_run_with_a_turn_each(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(
        asks_for(tool_call("c1", "search", q="a")), asks_for(tool_call("c2", "search", q="b"))
    )
    answer = run_agent(llm, PLANNER, "plan a trip", {"search": lambda q: f"found {q}"})
    assert answer == "Hello!"
    assert unflushed(traced) == []  # open until it is known that no more calls come
    assert traced.tree() == [
        f"{RUN} [0]",
        "  turn 1 [1]",
        "    chat gpt-4o-mini [1.1]",
        "  turn 2 [2]",
        "    chat gpt-4o-mini [2.1]",
        "  turn 3 [3]",
        "    chat gpt-4o-mini [3.1]",
    ]
    (run,) = traced.by_name(RUN)
    chats = llm_spans(traced)
    assert {s.context.trace_id for s in traced.spans()} == {run.context.trace_id}
    assert attrs(run)[sc.IMPLICIT] is True
    assert attrs(run)[sc.AGENT_MODEL] == "openai/gpt-4o-mini"
    assert set(agent_ids([run, *chats])) == {"agent_001"}
    assert outcome(run) == "ok"
    # It ended with its last call (at the flush that told it no more calls come).
    assert run.end_time == chats[-1].end_time
    # Each turn records only what the loop appended after the agent's previous reply.
    sent = [json.loads(attrs(s)[sc.GEN_AI_INPUT_MESSAGES]) for s in chats]
    assert [[m["role"] for m in turn] for turn in sent] == [["system", "user"], ["tool"], ["tool"]]
    assert [attrs(s)[sc.INPUT_MESSAGES_SKIPPED] for s in chats] == [0, 3, 5]


@pytest.mark.init(service_name="trip-planner")
def test_an_implicit_agent_is_named_after_the_service(traced: Traced, llm: LLMServer) -> None:
    run_agent(llm, PLANNER, "plan")
    (run,) = traced.by_name("invoke_agent trip-planner")
    assert attrs(run)[sc.GEN_AI_AGENT_NAME] == "trip-planner"
    assert attrs(run)[sc.GEN_AI_AGENT_ID] == "agent_001"


def test_the_same_request_asked_again_after_a_success_is_the_next_turn(
    traced: Traced, llm: LLMServer
) -> None:
    messages = [{"role": "user", "content": "hi"}]
    ask(llm, messages)
    ask(llm, messages)
    assert traced.tree() == [
        f"{RUN} [0]",
        "  turn 1 [1]",
        "    chat gpt-4o-mini [1.1]",
        "  turn 2 [2]",
        "    chat gpt-4o-mini [2.1]",
    ]


def test_a_framework_that_rebuilds_its_messages_each_step_is_still_one_run(
    traced: Traced, llm: LLMServer
) -> None:
    """New dicts every step, content as parts, a cache mark moved to the last message: the
    same messages all the same."""

    def rebuilt(steps: list[str]) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": [{"type": "text", "text": PLANNER}]},
            *(
                {"role": role, "content": [{"type": "text", "text": text}]}
                for step in steps
                for role, text in (("user", step), ("assistant", f"did {step}"))
            ),
        ]
        del messages[-1]  # the last step has no reply yet
        for message in messages:
            message["content"][0].pop("cache_control", None)
        messages[-1]["content"][0]["cache_control"] = {"type": "ephemeral"}
        return messages

    ask(llm, rebuilt(["one"]))
    ask(llm, rebuilt(["one", "two"]))
    ask(llm, rebuilt(["one", "two", "three"]))
    assert len(traced.by_name(RUN)) == 1
    assert len(traced.by_name("turn 3")) == 1


# --- agents one after another ----------------------------------------------------------------


def test_two_agents_one_after_the_other_are_two_runs_of_two_agents(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(asks_for(tool_call("c1", "search", q="x")))
    plan = run_agent(llm, PLANNER, "plan", {"search": lambda q: "found"})
    planner_calls = unflushed(traced, "chat gpt-4o-mini")
    # The writer's first call is where the planner's run is known to have ended.
    assert unflushed(traced) == []
    run_agent(llm, WRITER, plan)
    (ended,) = unflushed(traced)
    assert ended.end_time == planner_calls[-1].end_time
    planner, writer = traced.by_name(RUN)
    assert agent_ids([planner, writer]) == ["agent_001", "agent_002"]
    assert planner.context.trace_id != writer.context.trace_id
    assert [attrs(s)[sc.PATH] for s in (planner, writer)] == ["0", "0"]
    # The writer's trace links to the planner's.
    assert [link.context.span_id for link in writer.links] == [planner.context.span_id]
    assert [len(traced.by_name(f"turn {n}")) for n in (1, 2)] == [2, 1]


def test_the_same_agent_given_a_new_task_is_a_new_run(traced: Traced, llm: LLMServer) -> None:
    """Same system prompt, a new conversation: what it says does not extend what it was asked
    before, so it is another run, and another agent (its own transcript)."""
    for task in ("first task", "second task"):
        run_agent(llm, PLANNER, task)
    runs = traced.by_name(RUN)
    assert agent_ids(runs) == ["agent_001", "agent_002"]
    assert len({r.context.trace_id for r in runs}) == 2


# --- sub-agents --------------------------------------------------------------------------------


@pytest.mark.init(capture_content=True)
def test_an_agent_run_by_a_tool_of_another_is_its_sub_agent(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    llm.reset(
        asks_for(tool_call("c1", "research", question="why?")),  # the manager
        asks_for(tool_call("c2", "lookup", term="why")),  # the researcher
        Reply(content="because"),  # the researcher's answer
        Reply(content="done: because"),  # the manager's
    )

    def research(question: str) -> str:
        return run_agent(llm, RESEARCHER, question, {"lookup": lambda term: "a reason"})

    assert run_agent(llm, MANAGER, "find out", {"research": research}) == "done: because"
    assert traced.tree() == [
        f"{RUN} [0]",
        "  turn 1 [1]",
        "    chat gpt-4o-mini [1.1]",
        "    execute_tool research [1.2]",  # the manager's tool call that ran the researcher
        f"      {RUN} [1.2:1]",
        "        turn 1 [1.2.1]",
        "          chat gpt-4o-mini [1.2.1.1]",
        "        turn 2 [1.2.2]",
        "          chat gpt-4o-mini [1.2.2.1]",
        "  turn 2 [2]",
        "    chat gpt-4o-mini [2.1]",
    ]
    assert attrs(traced.one("execute_tool research"))[sc.GEN_AI_TOOL_CALL_ID] == "c1"
    manager, researcher = traced.by_name(RUN)
    assert agent_ids([manager, researcher]) == ["agent_001", "agent_002"]
    assert len({s.context.trace_id for s in traced.spans()}) == 1
    researcher_calls = [s for s in llm_spans(traced) if attrs(s)[sc.AGENT_ID] == "agent_002"]
    assert researcher.end_time == researcher_calls[-1].end_time
    assert attrs(researcher)[sc.TXN_PARENT] == attrs(manager)[sc.TXN_ID]

    # The session's stream and file tell the same: two agents, the researcher created by the
    # manager's reply, each with its own transcript.
    traced.handle.shutdown()
    (session_file,) = (tmp_path / "sessions").glob("*.json.gz")
    _, from_file = agenttrace.load_session(session_file)
    assert [child.agent_id for child in from_file.children("agent_001")] == ["agent_002"]
    (optree,) = from_file.runs
    (host,) = [op for op in optree["turns"][0]["ops"] if op["kind"] == "session"]
    assert [child["agentId"] for child in hosted_sessions(host)] == ["agent_002"]
    root, session = agenttrace.load_session(events_file(tmp_path))
    assert root.agent_id == "agent_001"
    assert [child.agent_id for child in session.children("agent_001")] == ["agent_002"]
    researcher_record = session.agents["agent_002"]
    assert researcher_record.cause == session.agents["agent_001"].transcript[2]["message_id"]
    assert [(e["role"], e.get("content")) for e in session.agents["agent_001"].transcript] == [
        ("system", MANAGER),
        ("user", "find out"),
        ("assistant", ""),
        ("tool", "because"),
        ("assistant", "done: because"),
    ]
    assert [(e["role"], e.get("content")) for e in researcher_record.transcript] == [
        ("system", RESEARCHER),
        ("user", "why?"),
        ("assistant", ""),
        ("tool", "a reason"),
        ("assistant", "because"),
    ]


def test_each_sub_agent_is_hosted_by_the_tool_call_that_ran_it(
    traced: Traced, llm: LLMServer
) -> None:
    """A reply asks for three calls of two tools, each running a sub-agent on its argument:
    each sub-agent's op is named after its call (found by the task the call handed over) and
    carries its id; a call no task names stays unknown: the service's name."""
    llm.reset(
        asks_for(
            tool_call("c1", "search", query="cats and dogs"),
            tool_call("c2", "summarize", text="the findings so far"),
            tool_call("c3", "summarize", text="ignored"),
        ),
        Reply(content="found"),  # the searcher
        Reply(content="summed up"),  # the summarizer
        Reply(content="what?"),  # the agent the third call runs with a task of its own
        Reply(content="done"),  # the manager
    )

    def search(query: str) -> str:
        return run_agent(llm, RESEARCHER, query)

    def summarize(text: str) -> str:
        return run_agent(llm, WRITER, text if text != "ignored" else "a task nobody gave")

    run_agent(llm, MANAGER, "go", {"search": search, "summarize": summarize})
    hosts = [
        (s.name, attrs(s)[sc.PATH], attrs(s).get(sc.GEN_AI_TOOL_CALL_ID))
        for s in traced.spans()
        if s.name.startswith("execute_tool")
    ]
    assert hosts == [
        ("execute_tool search", "1.2", "c1"),
        ("execute_tool summarize", "1.3", "c2"),
        ("execute_tool summarize", "1.4", "c3"),  # the only call left of one name
    ]


def test_a_sub_agent_no_tool_call_can_be_told_for_is_hosted_by_the_service(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(
        asks_for(tool_call("c1", "search", query="x"), tool_call("c2", "fetch", url="y")),
        Reply(content="found"),  # an agent started by search, with a task of its own
        Reply(content="done"),
    )

    def search(query: str) -> str:
        return run_agent(llm, RESEARCHER, "something else entirely")

    run_agent(llm, MANAGER, "go", {"search": search, "fetch": lambda url: "page"})
    (host,) = [s for s in traced.spans() if s.name.startswith("execute_tool")]
    assert host.name == "execute_tool agenttrace"
    assert sc.GEN_AI_TOOL_CALL_ID not in attrs(host)


def test_an_agent_called_deeper_in_the_stack_is_a_sub_agent(traced: Traced, llm: LLMServer) -> None:
    """A manager whose reply is text (no tool calls) runs a sub-agent from its own code: the
    sub-agent's calls come from deeper in the stack than the manager's, so it is nested."""
    llm.reset(Reply(content="RESEARCH: why?"))

    def manager() -> None:
        messages: list[Any] = [{"role": "system", "content": MANAGER}]
        messages.append({"role": "user", "content": "find out"})
        reply = ask(llm, messages).choices[0].message.content
        messages.append({"role": "assistant", "content": reply})
        found = run_agent(llm, RESEARCHER, reply.removeprefix("RESEARCH: "))
        messages.append({"role": "user", "content": found})
        ask(llm, messages)

    manager()
    assert [attrs(s)[sc.PATH] for s in traced.by_name(RUN)] == ["0", "1.2:1"]
    assert [len(traced.by_name(f"turn {n}")) for n in (1, 2)] == [2, 1]


def quick_research(llm: LLMServer, question: str) -> str:
    """A one-call agent that calls litellm itself (no helper)."""
    messages = [{"role": "system", "content": RESEARCHER}, {"role": "user", "content": question}]
    return str(litellm.completion(**http(llm, messages=messages)).choices[0].message.content)


def test_an_agent_called_no_deeper_than_its_caller_is_taken_for_a_new_run(
    traced: Traced, llm: LLMServer
) -> None:
    """The rule's documented limit: a manager that asks through a helper runs a sub-agent that
    calls litellm itself, both as deep in the stack, after a reply that asked for a tool.
    Nothing the rule reads says the manager's work goes on, so the sub-agent's call ends its
    run, and its next call is a new run (``agenttrace.run`` draws the boundary instead)."""
    llm.reset(asks_for(tool_call("c1", "research", question="why?")))
    messages: list[Any] = [
        {"role": "system", "content": MANAGER},
        {"role": "user", "content": "find out"},
    ]
    ask(llm, messages)
    messages.append({"role": "assistant", "content": ""})
    messages.append({"role": "user", "content": quick_research(llm, "why?")})
    ask(llm, messages)
    assert [attrs(s)[sc.PATH] for s in traced.by_name(RUN)] == ["0", "0", "0"]
    assert agent_ids(traced.by_name(RUN)) == ["agent_001", "agent_002", "agent_003"]


def test_agents_that_end_on_a_tool_call_run_one_after_the_other_are_two_runs(
    traced: Traced, llm: LLMServer
) -> None:
    """Agents that answer with a ``final_answer`` tool call: the first one's last reply asked
    for a tool, and the second is still not its sub-agent."""
    llm.reset(
        asks_for(tool_call("c1", "final_answer", answer="plan")),
        asks_for(tool_call("c2", "final_answer", answer="text")),
    )
    for system in (PLANNER, WRITER):
        messages = [{"role": "system", "content": system}, {"role": "user", "content": "go"}]
        ask(llm, messages)
    runs = traced.by_name(RUN)
    assert [attrs(s)[sc.PATH] for s in runs] == ["0", "0"]
    assert len({r.context.trace_id for r in runs}) == 2


def test_an_agent_started_deeper_after_another_returned_is_taken_for_its_sub_agent(
    traced: Traced, llm: LLMServer
) -> None:
    """The other documented limit: only depths are compared, so an agent whose calls come from
    deeper than those of the agent that ran before it is taken for that one's sub-agent."""
    quick_research(llm, "first")  # calls litellm itself
    run_agent(llm, PLANNER, "then")  # asks through a helper: one frame deeper
    assert [attrs(s)[sc.PATH] for s in traced.by_name(RUN)] == ["0", "1.2:1"]


def test_an_agent_that_rewrites_its_history_starts_a_new_run(
    traced: Traced, llm: LLMServer
) -> None:
    messages: list[Any] = [{"role": "system", "content": PLANNER}, {"role": "user", "content": "a"}]
    ask(llm, messages)
    messages += [{"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "b"}]
    ask(llm, messages)
    summarised = [messages[0], {"role": "user", "content": "so far: a, b"}]
    ask(llm, summarised)
    runs = traced.by_name(RUN)
    assert agent_ids(runs) == ["agent_001", "agent_002"]
    assert [attrs(s)[sc.PATH] for s in runs] == ["0", "0"]


def test_a_thread_started_after_an_agent_finished_is_taken_for_its_work_until_a_flush(
    traced: Traced, llm: LLMServer
) -> None:
    """A long-lived program: the run stays open after the agent's last call, and a thread
    started then carries it. ``force_flush`` ends it, so a thread started after that is free."""

    def in_a_thread() -> None:
        thread = threading.Thread(target=run_agent, args=(llm, WRITER, "a request"))
        thread.start()
        thread.join(WAIT)
        assert not thread.is_alive()

    run_agent(llm, PLANNER, "at startup")
    in_a_thread()
    assert [attrs(s)[sc.PATH] for s in traced.by_name(RUN)] == ["0", "1.2:1"]
    in_a_thread()  # after the flush (traced.by_name flushed)
    assert [attrs(s)[sc.PATH] for s in traced.by_name(RUN)] == ["0", "1.2:1", "0"]


# --- tasks and threads -----------------------------------------------------------------------


async def run_agent_async(llm: LLMServer, system: str, task: str, turns: int = 2) -> None:
    messages: list[Any] = [{"role": "system", "content": system}, {"role": "user", "content": task}]
    for _ in range(turns):
        reply = await litellm.acompletion(**http(llm, messages=messages))
        messages.append({"role": "assistant", "content": reply.choices[0].message.content})
        messages.append({"role": "user", "content": "go on"})


async def test_agents_gathered_in_two_tasks_are_two_runs(traced: Traced, llm: LLMServer) -> None:
    await asyncio.gather(
        run_agent_async(llm, PLANNER, "plan"), run_agent_async(llm, WRITER, "write")
    )
    for _ in range(100):  # each run ends with its task (done callbacks: the next iterations)
        if len(unflushed(traced)) == 2:
            break
        await asyncio.sleep(0)
    runs = unflushed(traced)
    assert len(runs) == 2
    assert sorted(agent_ids(runs)) == ["agent_001", "agent_002"]
    assert len({r.context.trace_id for r in runs}) == 2
    for run in runs:
        turns = [
            s
            for s in traced.by_name("turn 2")
            if s.parent and s.parent.span_id == run.context.span_id
        ]
        assert len(turns) == 1  # two calls of each agent: two turns of its run


async def test_agents_gathered_inside_an_agents_work_are_its_sub_agents(
    traced: Traced, llm: LLMServer
) -> None:
    messages: list[Any] = [
        {"role": "system", "content": MANAGER},
        {"role": "user", "content": "go"},
    ]
    await litellm.acompletion(**http(llm, messages=messages))
    await asyncio.gather(
        run_agent_async(llm, RESEARCHER, "one", turns=1),
        run_agent_async(llm, RESEARCHER, "two", turns=1),
    )
    messages += [{"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "both"}]
    await litellm.acompletion(**http(llm, messages=messages))
    runs = traced.by_name(RUN)
    assert sorted(attrs(r)[sc.PATH] for r in runs) == ["0", "1.2:1", "1.3:1"]
    assert len({s.context.trace_id for s in traced.spans()}) == 1
    assert sorted(agent_ids(runs)) == ["agent_001", "agent_002", "agent_003"]


def test_agents_run_in_a_thread_pool_are_runs_of_their_own(traced: Traced, llm: LLMServer) -> None:
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda task: run_agent(llm, PLANNER, task), ["one", "two", "three"]))
    runs = traced.by_name(RUN)
    assert len(runs) == 3
    assert len({r.context.trace_id for r in runs}) == 3
    assert sorted(agent_ids(runs)) == ["agent_001", "agent_002", "agent_003"]


def test_sub_agents_a_tool_runs_in_a_thread_pool_nest_under_its_turn(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(asks_for(tool_call("c1", "research", q="a"), tool_call("c2", "research", q="b")))
    pool = ThreadPoolExecutor(2)

    def research(q: str) -> str:
        # Each sub-agent in a pool thread: the context the tool handed over comes along.
        return pool.submit(run_agent, llm, RESEARCHER, q).result(timeout=WAIT)

    try:
        run_agent(llm, MANAGER, "go", {"research": research})
    finally:
        pool.shutdown()
    runs = traced.by_name(RUN)
    assert sorted(attrs(r)[sc.PATH] for r in runs) == ["0", "1.2:1", "1.3:1"]
    assert len({s.context.trace_id for s in traced.spans()}) == 1
    manager = runs[0]
    for sub in runs[1:]:
        host = span_by_id(traced, sub.parent.span_id if sub.parent else 0)
        turn = span_by_id(traced, host.parent.span_id if host.parent else 0)
        assert turn.name == "turn 1" and turn.parent is not None
        assert turn.parent.span_id == manager.context.span_id
        assert (sub.end_time or 0) <= (manager.end_time or 0)


def test_the_runs_of_threads_that_ended_end_at_the_next_call(
    traced: Traced, llm: LLMServer
) -> None:
    """A thread per request, each asking the model once, no flush ever: a thread's end is seen
    at the next bare call anywhere, so the open runs do not pile up."""
    for n in range(5):
        thread = threading.Thread(target=run_agent, args=(llm, WRITER, f"request {n}"))
        thread.start()
        thread.join(WAIT)
        assert not thread.is_alive()
    assert len(unflushed(traced)) == 4  # each call saw the threads before it end
    run_agent(llm, PLANNER, "in the main thread")
    runs = unflushed(traced)
    assert len(runs) == 5 and len({r.context.trace_id for r in runs}) == 5
    assert all(outcome(r) == "ok" for r in runs)


@pytest.mark.init(propagate_threads=False)
def test_with_thread_propagation_off_pool_threads_start_runs_of_their_own(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(asks_for(tool_call("c1", "research", q="a")))
    with ThreadPoolExecutor(1) as pool:

        def research(q: str) -> str:
            return pool.submit(run_agent, llm, RESEARCHER, q).result(timeout=WAIT)

        run_agent(llm, MANAGER, "go", {"research": research})
    manager, researcher = traced.by_name(RUN)
    assert [attrs(s)[sc.PATH] for s in (manager, researcher)] == ["0", "0"]
    assert manager.context.trace_id != researcher.context.trace_id
    # The manager's own calls still make one run: the pool's run is not in its context.
    assert len([s for s in llm_spans(traced) if attrs(s)[sc.AGENT_ID] == "agent_001"]) == 2
    assert len(traced.by_name("turn 2")) == 1


# --- drawing the boundary ---------------------------------------------------------------------


def test_with_run_every_call_inside_is_a_turn_of_that_run(traced: Traced, llm: LLMServer) -> None:
    with agenttrace.run("research") as run:
        assert run.path == "0"
        run_agent(llm, PLANNER, "one")
        run_agent(llm, WRITER, "two")  # another system prompt: still this run's turn
    run_agent(llm, PLANNER, "after")  # outside: an implicit run again
    assert traced.tree() == [
        "invoke_agent research [0]",
        "  turn 1 [1]",
        "    chat gpt-4o-mini [1.1]",
        "  turn 2 [2]",
        "    chat gpt-4o-mini [2.1]",
        f"{RUN} [0]",
        "  turn 1 [1]",
        "    chat gpt-4o-mini [1.1]",
    ]
    research = traced.one("invoke_agent research")
    assert sc.IMPLICIT not in attrs(research)
    assert attrs(research)[sc.GEN_AI_AGENT_NAME] == "research"


def test_run_decorates_a_function_and_takes_its_name(traced: Traced, llm: LLMServer) -> None:
    @agenttrace.run
    def solve(task: str) -> str:
        return run_agent(llm, PLANNER, task)

    assert solve("x") == "Hello!"
    with agenttrace.run():  # no name: named as an implicit run would be
        ask(llm, [{"role": "user", "content": "hi"}])
    assert [s.name for s in traced.spans() if attrs(s).get(sc.KIND) == "session"] == [
        "invoke_agent solve",
        RUN,
    ]


# --- failures, flushes, streams, embeddings -----------------------------------------------------


def test_a_call_that_fails_and_is_asked_again_stays_in_its_turn_of_the_run(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(Reply(), Reply(status=429))
    messages: list[Any] = [{"role": "system", "content": PLANNER}, {"role": "user", "content": "a"}]
    ask(llm, messages)
    messages += [{"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "b"}]
    with pytest.raises(litellm.RateLimitError):
        ask(llm, messages)
    ask(llm, messages)  # what frameworks do: catch it, ask again
    assert traced.tree() == [
        f"{RUN} [0]",
        "  turn 1 [1]",
        "    chat gpt-4o-mini [1.1]",
        "  turn 2 [2]",
        "    chat gpt-4o-mini [2.1]",
        "    chat gpt-4o-mini [2.2]",
    ]
    assert [(attrs(s)[sc.ATTEMPT], outcome(s)) for s in llm_spans(traced)] == [
        (1, "ok"),
        (1, "failed"),
        (2, "ok"),
    ]
    assert outcome(traced.one(RUN)) == "ok"
    assert "ERR" not in traced.output()


def test_a_run_whose_last_call_failed_ends_failed_at_that_time(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(Reply(), Reply(status=401))
    messages: list[Any] = [{"role": "user", "content": "a"}]
    ask(llm, messages)
    messages += [{"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "b"}]
    with pytest.raises(litellm.AuthenticationError):
        ask(llm, messages)
    run = traced.one(RUN)  # the flush ends it: no call of it is running
    assert outcome(run) == "failed"
    assert run.end_time == llm_spans(traced)[-1].end_time


def test_a_flush_leaves_a_run_open_while_its_stream_is_read(traced: Traced, llm: LLMServer) -> None:
    stream = litellm.completion(**http(llm, stream=True))
    traced.handle.force_flush()
    assert unflushed(traced) == []  # its call is still running
    assert "".join(c.choices[0].delta.content or "" for c in stream) == "Hello!"
    run = traced.one(RUN)
    assert run.end_time == llm_spans(traced)[0].end_time


def test_an_embedding_joins_the_run_it_is_made_in(traced: Traced, llm: LLMServer) -> None:
    litellm.embedding(model=MODEL_EMBED, input=["query"], api_base=llm.api_base, api_key="sk-x")
    messages: list[Any] = [{"role": "user", "content": "answer with the context"}]
    ask(llm, messages)
    messages += [{"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "more"}]
    litellm.embedding(model=MODEL_EMBED, input=["more"], api_base=llm.api_base, api_key="sk-x")
    ask(llm, messages)
    assert traced.tree() == [
        f"{RUN} [0]",
        "  turn 1 [1]",
        "    embeddings text-embedding-3-small [1.1]",
        "  turn 2 [2]",
        "    chat gpt-4o-mini [2.1]",
        "    embeddings text-embedding-3-small [2.2]",
        "  turn 3 [3]",
        "    chat gpt-4o-mini [3.1]",
    ]


MODEL_EMBED = "openai/text-embedding-3-small"


# --- smolagents under init() alone --------------------------------------------------------------


def test_a_smolagents_manager_and_its_managed_researcher(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    smolagents = pytest.importorskip("smolagents")
    llm.reset(
        Reply(content="Thought: ask\n<code>\nr = researcher(task='find it')\nprint(r)\n</code>"),
        asks_for(tool_call("c1", "final_answer", answer="42")),
        Reply(content="Thought: done\n<code>\nfinal_answer('it is 42')\n</code>"),
    )
    model = smolagents.LiteLLMModel(model_id=MODEL, api_base=llm.api_base, api_key="sk-test")
    researcher = smolagents.ToolCallingAgent(
        tools=[], model=model, name="researcher", description="Finds things.", verbosity_level=0
    )
    manager = smolagents.CodeAgent(
        tools=[], model=model, managed_agents=[researcher], verbosity_level=0
    )
    assert manager.run("What is it?") == "it is 42"
    assert traced.tree() == [
        f"{RUN} [0]",
        "  turn 1 [1]",
        "    chat gpt-4o-mini [1.1]",
        "    execute_tool agenttrace [1.2]",
        f"      {RUN} [1.2:1]",
        "        turn 1 [1.2.1]",
        "          chat gpt-4o-mini [1.2.1.1]",
        "  turn 2 [2]",
        "    chat gpt-4o-mini [2.1]",
    ]
    assert len({s.context.trace_id for s in traced.spans()}) == 1
    assert agent_ids(traced.by_name(RUN)) == ["agent_001", "agent_002"]
    traced.handle.shutdown()
    root, session = agenttrace.load_session(events_file(tmp_path))
    assert root.agent_id == "agent_001"
    assert [child.agent_id for child in session.children("agent_001")] == ["agent_002"]
