"""smolagents, traced: real agents (``CodeAgent``, ``ToolCallingAgent``, a managed agent) on
``LiteLLMModel`` against the scripted OpenAI-compatible server on 127.0.0.1, nothing mocked.

Each agent run is a session named after the agent, each step a turn, each tool call an op with
its call id; a code agent's code is an op, and a managed agent is a sub-agent run under the call
that ran it, caused by its manager's message. Spans are compared as exact trees; the session
file's opTree, the event stream's agent tree and transcripts, and a resume are checked too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

import agenttrace
from agenttrace import semconv as sc
from agenttrace.formats.session.files import read_session_file, snapshot_path, stream_path
from agenttrace.formats.session.optree import hosted_sessions, op_parents
from agenttrace.model.events import api_message
from agenttrace.views.tree import render_optree

from .conftest import Traced, attrs, outcome
from .helpers import canonical_events
from .llm_server import LLMServer, Reply
from .test_litellm import KEY, MODEL
from .test_retries import QUICK

smolagents = pytest.importorskip("smolagents")  # the [smolagents] extra, in the lock
tool = smolagents.tool  # smolagents reads a tool's source: it must say ``@tool``

SMOL = pytest.mark.init(instrument=["smolagents"], capture_content=True)
TASK = "Find the capital of France"
REPORT = "Here is the final answer from your managed agent 'researcher':\nParis"


# --- the agents and their scripts ----------------------------------------------------------------


@tool
def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: the city's name
    """
    return f"{city} is a capital"


def model(llm: LLMServer, **kwargs: Any) -> Any:
    return smolagents.LiteLLMModel(model_id=MODEL, api_base=llm.api_base, api_key=KEY, **kwargs)


def researcher(llm: LLMServer, **kwargs: Any) -> Any:
    return smolagents.ToolCallingAgent(
        tools=[lookup],
        model=model(llm, **kwargs),
        name="researcher",
        description="Looks things up.",
        verbosity_level=0,
    )


def code_manager(llm: LLMServer) -> Any:
    return smolagents.CodeAgent(
        tools=[], model=model(llm), managed_agents=[researcher(llm)], verbosity_level=0
    )


def code(source: str) -> Reply:
    """A code agent's reply: a thought, then the code to run."""
    return Reply(content=f"Thought: I will run this.\n<code>\n{source}\n</code>")


def calls(*wanted: tuple[str, dict[str, Any], str]) -> Reply:
    """A tool-calling reply: (tool, arguments, call id) for each call."""
    return Reply(
        content="",
        tool_calls=[
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for name, args, call_id in wanted
        ],
    )


RESEARCH = (
    calls(("lookup", {"city": "Paris"}, "call_lookup")),
    calls(("final_answer", {"answer": "Paris"}, "call_answer")),
)
DELEGATE = code(f'report = researcher(task="{TASK}")\nfinal_answer(report)')


# --- what the tests read -------------------------------------------------------------------------


def described(traced: Traced) -> list[tuple[str, str, str, str, str | None]]:
    """Each span of the tree, in tree order: (indented name, path, kind, agent id, call id)."""
    by_line = {}
    for span in traced.spans():
        a = attrs(span)
        by_line[(span.name, a.get(sc.PATH))] = (
            a[sc.KIND],
            a[sc.AGENT_ID],
            a.get(sc.GEN_AI_TOOL_CALL_ID),
        )
    rows = []
    for line in traced.tree():
        name, _, path = line.strip().rpartition(" [")
        indent = line[: len(line) - len(line.lstrip())]
        rows.append((indent + name, path.rstrip("]"), *by_line[(name, path.rstrip("]"))]))
    return rows


def optree(node: dict[str, Any]) -> list[str]:
    """A session file's run as ``path kind name`` lines, sub-agent runs under their op."""
    lines = [f"{node['path']} session {node['agentName']} {node['agentId']}"]
    for turn in node["turns"]:
        lines.append(f"{turn['path']} turn")
        for op in turn["ops"]:
            lines.append(f"{op['path']} {op['kind']} {op['name']} {op['status']}")
            for child in hosted_sessions(op):
                lines.extend(optree(child))
    return lines


def saved(traced: Traced) -> Any:
    traced.handle.force_flush()
    session = agenttrace.current_session()
    return read_session_file(snapshot_path(traced.handle.settings.sessions_dir, session.session_id))


def sent(llm: LLMServer, index: int) -> list[dict[str, Any]]:
    """The messages of the ``index``-th request the server received."""
    messages: list[dict[str, Any]] = llm.requests[index].body["messages"]
    return messages


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """smolagents' own retry waits a minute or more before asking again: not in a test."""
    monkeypatch.setattr(smolagents.models, "RETRY_WAIT", 0)


# --- a tool-calling agent ------------------------------------------------------------------------


@SMOL
def test_a_tool_calling_agent_run_is_a_session_with_a_turn_per_step(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(*RESEARCH)
    agent = researcher(llm)

    answer = agent.run(TASK)

    # What smolagents returns, untouched: its own text type, not a LoggedString.
    assert type(answer) is smolagents.agent_types.AgentText and answer == "Paris"
    assert described(traced) == [
        ("invoke_agent researcher", "0", "session", "agent_001", None),
        ("  turn 1", "1", "turn", "agent_001", None),
        ("    chat gpt-4o-mini", "1.1", "llm", "agent_001", None),
        ("    execute_tool lookup", "1.2", "tool", "agent_001", "call_lookup"),
        ("  turn 2", "2", "turn", "agent_001", None),
        ("    chat gpt-4o-mini", "2.1", "llm", "agent_001", None),
        ("    execute_tool final_answer", "2.2", "tool", "agent_001", "call_answer"),
    ]
    spans = traced.spans()
    assert len({s.context.trace_id for s in spans}) == 1
    assert {outcome(s) for s in spans} == {"ok"}
    run = attrs(traced.one("invoke_agent researcher"))
    assert run[sc.GEN_AI_AGENT_NAME] == "researcher"
    assert run[sc.AGENT_MODEL] == MODEL
    tool = attrs(traced.one("execute_tool lookup"))
    assert json.loads(tool[sc.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"city": "Paris"}
    assert tool[sc.GEN_AI_TOOL_CALL_RESULT] == "Paris is a capital"
    assert attrs(traced.one("execute_tool final_answer"))[sc.GEN_AI_TOOL_CALL_RESULT] == "Paris"
    # A step's turn ends with the step, before the next step's LLM call.
    first, second = traced.by_name("turn 1")[0], traced.by_name("turn 2")[0]
    assert (first.end_time or 0) <= (second.start_time or 0)


# --- a code agent --------------------------------------------------------------------------------


@SMOL
def test_a_code_agent_runs_its_code_as_an_op_with_the_tools_it_calls_under_it(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(code('print(lookup(city="Paris"))'), code('final_answer("Paris")'))
    agent = smolagents.CodeAgent(tools=[lookup], model=model(llm), verbosity_level=0)

    assert agent.run(TASK) == "Paris"

    assert described(traced) == [
        ("invoke_agent CodeAgent", "0", "session", "agent_001", None),
        ("  turn 1", "1", "turn", "agent_001", None),
        ("    chat gpt-4o-mini", "1.1", "llm", "agent_001", None),
        ("    execute_tool python_interpreter", "1.2", "tool", "agent_001", None),
        # Called by the code, which smolagents runs in a thread pool of its own: same trace.
        ("      execute_tool lookup", "1.3", "tool", "agent_001", None),
        ("  turn 2", "2", "turn", "agent_001", None),
        ("    chat gpt-4o-mini", "2.1", "llm", "agent_001", None),
        ("    execute_tool python_interpreter", "2.2", "tool", "agent_001", None),
        ("      execute_tool final_answer", "2.3", "tool", "agent_001", None),
    ]
    assert len({s.context.trace_id for s in traced.spans()}) == 1
    first, second = traced.by_name("execute_tool python_interpreter")
    assert json.loads(attrs(first)[sc.GEN_AI_TOOL_CALL_ARGUMENTS]) == {
        "code": 'print(lookup(city="Paris"))'
    }
    assert json.loads(attrs(first)[sc.GEN_AI_TOOL_CALL_RESULT]) == {
        "output": None,
        "logs": "Paris is a capital\n",
        "is_final_answer": False,
    }
    assert json.loads(attrs(second)[sc.GEN_AI_TOOL_CALL_RESULT])["is_final_answer"] is True
    # final_answer ends the code with an exception smolagents uses for control flow: no failure.
    assert {outcome(s) for s in traced.spans()} == {"ok"}


@SMOL
def test_code_that_fails_fails_its_op_and_the_agent_goes_on(traced: Traced, llm: LLMServer) -> None:
    llm.reset(code("1 / 0"), code('final_answer("done")'))
    agent = smolagents.CodeAgent(tools=[], model=model(llm), verbosity_level=0)

    assert agent.run(TASK) == "done"

    failed = traced.by_name("execute_tool python_interpreter")[0]
    assert outcome(failed) == "failed"
    assert outcome(traced.one("invoke_agent CodeAgent")) == "ok"
    assert [line.strip() for line in traced.tree()][1:3] == ["turn 1 [1]", "chat gpt-4o-mini [1.1]"]


# --- managed agents ------------------------------------------------------------------------------


@SMOL
def test_a_managed_agent_runs_under_the_code_that_called_it(traced: Traced, llm: LLMServer) -> None:
    llm.reset(DELEGATE, *RESEARCH)
    manager = code_manager(llm)

    assert manager.run("What is the capital of France?") == REPORT

    assert described(traced) == [
        ("invoke_agent CodeAgent", "0", "session", "agent_001", None),
        ("  turn 1", "1", "turn", "agent_001", None),
        ("    chat gpt-4o-mini", "1.1", "llm", "agent_001", None),
        ("    execute_tool python_interpreter", "1.2", "tool", "agent_001", None),
        ("      execute_tool researcher", "1.3", "session", "agent_001", None),
        ("        invoke_agent researcher", "1.3:1", "session", "agent_002", None),
        ("          turn 1", "1.3.1", "turn", "agent_002", None),
        ("            chat gpt-4o-mini", "1.3.1.1", "llm", "agent_002", None),
        ("            execute_tool lookup", "1.3.1.2", "tool", "agent_002", "call_lookup"),
        ("          turn 2", "1.3.2", "turn", "agent_002", None),
        ("            chat gpt-4o-mini", "1.3.2.1", "llm", "agent_002", None),
        ("            execute_tool final_answer", "1.3.2.2", "tool", "agent_002", "call_answer"),
        ("      execute_tool final_answer", "1.4", "tool", "agent_001", None),
    ]
    spans = traced.spans()
    assert len({s.context.trace_id for s in spans}) == 1  # the pool thread started no trace
    assert {outcome(s) for s in spans} == {"ok"}
    call = attrs(traced.one("execute_tool researcher"))
    assert json.loads(call[sc.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"task": TASK}
    assert call[sc.GEN_AI_TOOL_CALL_RESULT] == REPORT
    sub = attrs(traced.one("invoke_agent researcher"))
    run = attrs(traced.one("invoke_agent CodeAgent"))
    assert sub[sc.TXN_PARENT] == run[sc.TXN_ID]
    assert sub[sc.CALL_PATH] == "CodeAgent/researcher"

    # The event stream: the researcher was created by the manager's reply that holds the code.
    events = saved(traced).events
    created = [e for e in events if e["event_type"] == "agent_created"]
    reply = next(e for e in events if e["agent_id"] == "agent_001" and e.get("role") == "assistant")
    assert reply["content"] == DELEGATE.content
    assert [(e["agent_id"], e.get("name"), e.get("cause")) for e in created] == [
        ("agent_001", "CodeAgent", None),
        ("agent_002", "researcher", reply["message_id"]),
    ]
    # The task the code handed the researcher is a piece of text of that reply.
    task = first_heard(events, "agent_002")
    piece = by_id(events)[task["substance"]]
    assert (piece["content"], piece["cause"]) == (TASK, reply["message_id"])
    # The session file's opTree: the sub-agent's run under the call that ran it.
    (tree,) = saved(traced).runs
    assert optree(tree) == [
        "0 session CodeAgent agent_001",
        "1 turn",
        "1.1 llm gpt-4o-mini ok",
        "1.2 tool python_interpreter ok",
        "1.3 session researcher ok",
        "1.3:1 session researcher agent_002",
        "1.3.1 turn",
        "1.3.1.1 llm gpt-4o-mini ok",
        "1.3.1.2 tool lookup ok",
        "1.3.2 turn",
        "1.3.2.1 llm gpt-4o-mini ok",
        "1.3.2.2 tool final_answer ok",
        "1.4 tool final_answer ok",
    ]
    # Its ops are one list, but each op's span says which op it ran in: the code's op (1.2)
    # ran the researcher's call (1.3) and final_answer (1.4), and the views nest them so.
    assert op_parents(tree["turns"][0]["ops"]) == [None, None, 1, 1]
    depth = {
        line.lstrip("│├└─ ").split(" ")[0]: len(line) - len(line.lstrip("│├└─ "))
        for line in render_optree([tree])
    }
    assert depth["1.1"] == depth["1.2"] < depth["1.3"] == depth["1.4"] < depth["1.3:1"]
    # Each request the model got is one LLM attempt, counted once (no span for smolagents'
    # own generate() besides litellm's): three in the ledger, with the server's usage.
    ledger = traced.handle.settings.billing_file.read_text().splitlines()
    charged = [json.loads(line) for line in ledger if json.loads(line)["type"] == "llm"]
    assert [(c["path"], c["agentId"], c["tokens"]["inputTokens"]) for c in charged] == [
        ("1.1", "agent_001", 11),
        ("1.3.1.1", "agent_002", 11),
        ("1.3.2.1", "agent_002", 11),
    ]
    # The manager's transcript is the one request it sent and the reply it got.
    session = agenttrace.current_session()
    manager_messages = session.revivify("agent_001").messages()
    assert json.loads(json.dumps(manager_messages)) == [
        *sent(llm, 0),
        {"role": "assistant", "content": DELEGATE.content},
    ]
    # The researcher heard its task, asked for a tool call, got its result: in the stream, before
    # its second request rewrote that step as text (a transcript_reset; resume restores what it
    # last sent: test_a_resumed_agent_has_the_messages_it_last_sent).
    researcher = [e for e in events if e["agent_id"] == "agent_002"][1:]
    first = [api_message(e) for e in researcher[:4]]
    assert json.loads(json.dumps(first[:2])) == sent(llm, 1)
    assert first[2]["tool_calls"][0]["id"] == "call_lookup"
    assert first[3] == {
        "role": "tool",
        "content": "Paris is a capital",
        "tool_call_id": "call_lookup",
    }
    assert researcher[4]["event_type"] == "transcript_reset"


class Rebuilt:
    """What a ``load_session`` factory builds: the record, and sub-agents by name."""

    def __init__(self, record: agenttrace.AgentRecord) -> None:
        self.record = record
        self.subagents: dict[str, Rebuilt] = {}


@SMOL
def test_load_session_finds_the_managed_agent_under_its_manager(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(DELEGATE, *RESEARCH)
    code_manager(llm).run("What is the capital of France?")
    traced.handle.force_flush()
    session_id = agenttrace.current_session().session_id

    root, session = agenttrace.load_session(
        snapshot_path(traced.handle.settings.sessions_dir, session_id),
        lambda record, session: Rebuilt(record),
    )
    assert (root.record.agent_id, root.record.name) == ("agent_001", "CodeAgent")
    assert list(root.subagents) == ["researcher"]
    assert root.subagents["researcher"].record.agent_id == "agent_002"
    assert session.session_id == session_id


@SMOL
def test_a_tool_calling_manager_runs_its_managed_agent_in_the_tool_call(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(
        calls(("researcher", {"task": TASK}, "call_delegate")),
        *RESEARCH,
        calls(("final_answer", {"answer": "Paris"}, "call_done")),
    )
    manager = smolagents.ToolCallingAgent(
        tools=[],
        model=model(llm),
        managed_agents=[researcher(llm)],
        name="manager",
        verbosity_level=0,
    )

    assert manager.run("What is the capital of France?") == "Paris"

    assert described(traced) == [
        ("invoke_agent manager", "0", "session", "agent_001", None),
        ("  turn 1", "1", "turn", "agent_001", None),
        ("    chat gpt-4o-mini", "1.1", "llm", "agent_001", None),
        ("    execute_tool researcher", "1.2", "session", "agent_001", "call_delegate"),
        ("      invoke_agent researcher", "1.2:1", "session", "agent_002", None),
        ("        turn 1", "1.2.1", "turn", "agent_002", None),
        ("          chat gpt-4o-mini", "1.2.1.1", "llm", "agent_002", None),
        ("          execute_tool lookup", "1.2.1.2", "tool", "agent_002", "call_lookup"),
        ("        turn 2", "1.2.2", "turn", "agent_002", None),
        ("          chat gpt-4o-mini", "1.2.2.1", "llm", "agent_002", None),
        ("          execute_tool final_answer", "1.2.2.2", "tool", "agent_002", "call_answer"),
        ("  turn 2", "2", "turn", "agent_001", None),
        ("    chat gpt-4o-mini", "2.1", "llm", "agent_001", None),
        ("    execute_tool final_answer", "2.2", "tool", "agent_001", "call_done"),
    ]
    events = saved(traced).events
    asked = next(e for e in events if e["agent_id"] == "agent_001" and e.get("tool_calls"))
    (created,) = [e for e in events if e["event_type"] == "agent_created" and e.get("cause")]
    assert (created["agent_id"], created["cause"]) == ("agent_002", asked["message_id"])
    # The report the researcher's run made is the manager's tool entry for the call.
    answered = [e for e in events if e.get("tool_call_id") == "call_delegate"]
    assert [(e["agent_id"], e["content"]) for e in answered] == [("agent_001", REPORT)]


@SMOL
def test_a_managed_agent_called_outside_any_run_is_only_its_run(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(*RESEARCH)

    assert researcher(llm)(TASK) == REPORT  # what smolagents reports to a manager

    assert [line.strip() for line in traced.tree()][:2] == [
        "invoke_agent researcher [0]",
        "turn 1 [1]",
    ]
    assert not traced.by_name("execute_tool researcher")


# --- links by the calls' ids ---------------------------------------------------------------------


def by_id(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["message_id"]: e for e in events}


def first_heard(events: list[dict[str, Any]], agent: str) -> dict[str, Any]:
    """The first user entry of ``agent``: the task its manager gave it."""
    return next(e for e in events if e["agent_id"] == agent and e.get("role") == "user")


def answered(events: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    (entry,) = [e for e in events if e.get("role") == "tool" and e.get("tool_call_id") == call_id]
    return entry


@SMOL
def test_a_managed_agents_task_and_short_answer_link_by_the_call_whatever_their_text(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(
        calls(("researcher", {"task": TASK}, "call_delegate")),
        calls(("final_answer", {"answer": "Yes."}, "call_answer")),
        calls(("final_answer", {"answer": "Yes."}, "call_done")),
    )
    sub = researcher(llm)
    # smolagents' own templates around what passes through the call, edited as a hook would:
    # the task the researcher is sent no longer holds the manager's words.
    sub.prompt_templates["managed_agent"]["task"] = "Your manager asks: {{ task | upper }}"
    sub.prompt_templates["managed_agent"]["report"] = "{{ name }} says: {{ final_answer }}"
    manager = smolagents.ToolCallingAgent(
        tools=[], model=model(llm), managed_agents=[sub], name="manager", verbosity_level=0
    )

    assert manager.run("Is Paris the capital of France?") == "Yes."

    events = saved(traced).events
    ids = by_id(events)
    asking = next(e for e in events if e["agent_id"] == "agent_001" and e.get("tool_calls"))
    task = first_heard(events, "agent_002")
    assert TASK not in json.dumps(task["content"]) and TASK.upper() in json.dumps(task["content"])
    # The task the researcher heard is the text the manager's call passed on: a piece of text
    # of that call, caused by the reply that holds it.
    piece = ids[task["substance"]]
    assert (piece["event_type"], piece["agent_id"], piece["content"], piece["cause"]) == (
        "piece_of_text",
        "agent_001",
        TASK,
        asking["message_id"],
    )
    # The manager's tool entry is the researcher's answer, "Yes." (which no content rule
    # links): its final_answer call's entry, the answer in the researcher's own words.
    report = answered(events, "call_delegate")
    assert report["content"] == "researcher says: Yes."
    final = ids[report["substance"]]
    assert (final["agent_id"], final["tool_call_id"], final["content"]) == (
        "agent_002",
        "call_answer",
        "Yes.",
    )
    # The other tool entries are the tools' own content.
    assert "substance" not in answered(events, "call_answer")
    assert "substance" not in answered(events, "call_done")


@SMOL
def test_a_managed_code_agents_answer_is_the_reply_whose_code_gave_it(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(
        calls(("coder", {"task": TASK}, "call_coder")),
        code('final_answer("Yes.")'),
        calls(("final_answer", {"answer": "Yes."}, "call_done")),
    )
    coder = smolagents.CodeAgent(
        tools=[], model=model(llm), name="coder", description="Codes.", verbosity_level=0
    )
    manager = smolagents.ToolCallingAgent(
        tools=[], model=model(llm), managed_agents=[coder], name="manager", verbosity_level=0
    )

    assert manager.run("Is Paris the capital of France?") == "Yes."

    events = saved(traced).events
    # Its code called final_answer, which logs no entry of its own: the reply holding the code.
    reply = by_id(events)[answered(events, "call_coder")["substance"]]
    assert (reply["agent_id"], reply["role"]) == ("agent_002", "assistant")
    assert 'final_answer("Yes.")' in reply["content"]


SAME = "The capital of France is Paris."


@SMOL
def test_two_managed_agents_saying_the_same_are_told_apart_by_their_calls(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(
        calls(("alpha", {"task": TASK}, "call_alpha")),
        calls(("final_answer", {"answer": SAME}, "call_answer_alpha")),
        calls(("beta", {"task": TASK}, "call_beta")),
        calls(("final_answer", {"answer": SAME}, "call_answer_beta")),
        calls(("final_answer", {"answer": SAME}, "call_done")),
    )
    team = [
        smolagents.ToolCallingAgent(
            tools=[], model=model(llm), name=name, description="Knows.", verbosity_level=0
        )
        for name in ("alpha", "beta")
    ]
    manager = smolagents.ToolCallingAgent(
        tools=[], model=model(llm), managed_agents=team, name="manager", verbosity_level=0
    )

    assert manager.run("What is the capital of France?") == SAME

    events = saved(traced).events
    ids = by_id(events)
    agents = {e["name"]: e["agent_id"] for e in events if e["event_type"] == "agent_created"}
    holders = {
        call["id"]: e["message_id"]
        for e in events
        if e["agent_id"] == agents["manager"]
        for call in e.get("tool_calls") or ()
    }
    for name in ("alpha", "beta"):
        # Both were given the same task and gave the same answer: each call says whose.
        task = ids[first_heard(events, agents[name])["substance"]]
        assert (task["content"], task["cause"]) == (TASK, holders[f"call_{name}"])
        report = answered(events, f"call_{name}")
        assert report["content"].endswith(SAME)
        final = ids[report["substance"]]
        assert (final["agent_id"], final["tool_call_id"]) == (agents[name], f"call_answer_{name}")


# --- streams, retries, threads -------------------------------------------------------------------


@SMOL
def test_a_streamed_run_stays_open_until_its_generator_ends(traced: Traced, llm: LLMServer) -> None:
    llm.reset(*RESEARCH)
    agent = researcher(llm)

    steps = agent.run(TASK, stream=True)
    assert not traced.by_name("invoke_agent researcher")  # a generator: nothing ran yet
    next(steps)
    assert not traced.by_name("invoke_agent researcher")  # running
    rest = list(steps)

    assert isinstance(rest[-1], smolagents.memory.FinalAnswerStep)
    assert rest[-1].output == "Paris"
    assert [line for line in traced.tree() if "turn" in line or "invoke" in line] == [
        "invoke_agent researcher [0]",
        "  turn 1 [1]",
        "  turn 2 [2]",
    ]
    run = traced.one("invoke_agent researcher")
    assert all((s.end_time or 0) <= (run.end_time or 0) for s in traced.spans())


@SMOL
def test_a_streamed_run_closed_early_ends_then(traced: Traced, llm: LLMServer) -> None:
    llm.reset(*RESEARCH)
    steps = researcher(llm).run(TASK, stream=True)
    for item in steps:
        if isinstance(item, smolagents.memory.ActionStep):
            break
    # The step is over, so is its turn; the run goes on.
    assert [attrs(s)[sc.PATH] for s in traced.spans()] == ["1", "1.1", "1.2"]
    steps.close()

    assert outcome(traced.one("invoke_agent researcher")) == "ok"
    assert len(llm.requests) == 1  # the second step never ran
    assert [line.strip() for line in traced.tree()] == [
        "invoke_agent researcher [0]",
        "turn 1 [1]",
        "chat gpt-4o-mini [1.1]",
        "execute_tool lookup [1.2]",
    ]


@SMOL
def test_a_429_smolagents_retries_is_attempt_2_of_the_same_call(
    traced: Traced, llm: LLMServer, no_backoff: None
) -> None:
    # litellm told not to retry (max_retries=0), so smolagents' own retry asks again.
    llm.reset(Reply(status=429), *RESEARCH)
    agent = researcher(llm, max_retries=0)

    assert agent.run(TASK) == "Paris"

    assert len(llm.requests) == 3
    assert sent(llm, 0) == sent(llm, 1)
    assert [line.strip() for line in traced.tree()][:5] == [
        "invoke_agent researcher [0]",
        "turn 1 [1]",
        "chat gpt-4o-mini [1.1]",
        "chat gpt-4o-mini [1.2]",
        "execute_tool lookup [1.3]",
    ]
    chats = traced.by_name("chat gpt-4o-mini")
    assert [(attrs(s)[sc.ATTEMPT], outcome(s)) for s in chats] == [
        (1, "failed"),
        (2, "ok"),
        (1, "ok"),
    ]
    assert attrs(chats[0])[sc.ERROR_TYPE] == "quota"
    assert outcome(traced.one("invoke_agent researcher")) == "ok"


@SMOL
def test_a_429_the_openai_sdk_retries_is_attempt_2_of_the_same_call(
    traced: Traced, llm: LLMServer
) -> None:
    # LiteLLMModel's defaults: litellm has the OpenAI SDK retry (after the 1 ms it is told).
    llm.reset(Reply(status=429, headers=QUICK), *RESEARCH)

    assert researcher(llm).run(TASK) == "Paris"

    chats = traced.by_name("chat gpt-4o-mini")
    assert [(attrs(s)[sc.ATTEMPT], attrs(s)[sc.PATH], outcome(s)) for s in chats] == [
        (1, "1.1", "failed"),
        (2, "1.2", "ok"),
        (1, "2.1", "ok"),
    ]
    assert len(traced.by_name("turn 1")) == 1


@SMOL
def test_parallel_tool_calls_are_ops_of_one_turn(traced: Traced, llm: LLMServer) -> None:
    llm.reset(
        calls(("lookup", {"city": "Paris"}, "call_p"), ("lookup", {"city": "Rome"}, "call_r")),
        calls(("final_answer", {"answer": "both"}, "call_answer")),
    )

    assert researcher(llm).run(TASK) == "both"

    # smolagents runs them at once in a pool: labels in the order they started, one trace.
    tools = [s for s in traced.by_name("execute_tool lookup")]
    assert {
        (attrs(s)[sc.GEN_AI_TOOL_CALL_ID], attrs(s)[sc.GEN_AI_TOOL_CALL_RESULT]) for s in tools
    } == {
        ("call_p", "Paris is a capital"),
        ("call_r", "Rome is a capital"),
    }
    assert sorted(attrs(s)[sc.PATH] for s in tools) == ["1.2", "1.3"]
    turn = traced.one("turn 1")
    assert all(s.parent is not None and s.parent.span_id == turn.context.span_id for s in tools)
    assert len({s.context.trace_id for s in traced.spans()}) == 1


@pytest.mark.init(instrument=["smolagents"], capture_content=True, instrument_openai=False)
def test_steps_are_turns_with_a_model_agenttrace_does_not_see(
    traced: Traced, llm: LLMServer
) -> None:
    # OpenAIServerModel calls the OpenAI SDK, here left alone: no LLM span, but each step's ops
    # are still a turn of their own (tests/test_openai_sdk_smolagents.py: the SDK traced).
    llm.reset(*RESEARCH)
    unseen = smolagents.OpenAIServerModel(
        model_id="gpt-4o-mini", api_base=llm.api_base, api_key=KEY
    )
    agent = smolagents.ToolCallingAgent(tools=[lookup], model=unseen, verbosity_level=0)

    assert agent.run(TASK) == "Paris"

    assert [line.strip() for line in traced.tree()] == [
        "invoke_agent ToolCallingAgent [0]",
        "turn 1 [1]",
        "execute_tool lookup [1.1]",
        "turn 2 [2]",
        "execute_tool final_answer [2.1]",
    ]


@SMOL
def test_a_planning_step_is_a_turn_of_its_own(traced: Traced, llm: LLMServer) -> None:
    llm.reset(Reply(content="1. Look it up."), calls(("final_answer", {"answer": "Paris"}, "c1")))
    agent = smolagents.ToolCallingAgent(
        tools=[lookup], model=model(llm), planning_interval=5, verbosity_level=0
    )

    assert agent.run(TASK) == "Paris"

    assert [line.strip() for line in traced.tree()] == [
        "invoke_agent ToolCallingAgent [0]",
        "turn 1 [1]",
        "chat gpt-4o-mini [1.1]",
        "turn 2 [2]",
        "chat gpt-4o-mini [2.1]",
        "execute_tool final_answer [2.2]",
    ]


# --- resume --------------------------------------------------------------------------------------


@SMOL
def test_the_session_resumes_with_the_same_agents(traced: Traced, llm: LLMServer) -> None:
    llm.reset(DELEGATE, *RESEARCH)
    code_manager(llm).run("What is the capital of France?")
    traced.handle.force_flush()
    first = agenttrace.current_session()
    sessions = traced.handle.settings.sessions_dir
    before = canonical_events(stream_path(sessions, first.session_id))

    # A new program: the session read back from its file, the agents built again.
    agenttrace.use_session(None)
    session = agenttrace.resume(snapshot_path(sessions, first.session_id))
    llm.reset(DELEGATE, *RESEARCH)
    assert code_manager(llm).run("And of Italy?") == REPORT
    traced.handle.force_flush()

    assert session.session_id == first.session_id
    # The same two agents go on, by name: no new agent, no id used twice.
    assert sorted(session.agents) == ["agent_001", "agent_002"] and session.agent_counter == 2
    after = session.events
    assert after[: len(before)] == before
    ids = [e["message_id"] for e in after]
    assert ids == [f"msg_{i:03d}" for i in range(1, len(ids) + 1)]
    assert not [e for e in after[len(before) :] if e["event_type"] == "agent_created"]
    roots = traced.by_name("invoke_agent CodeAgent")
    subs = traced.by_name("invoke_agent researcher")
    assert [attrs(s)[sc.AGENT_ID] for s in roots + subs] == ["agent_001"] * 2 + ["agent_002"] * 2
    previous, resumed = roots
    assert resumed.links and resumed.links[0].context.trace_id == previous.context.trace_id
    runs = read_session_file(snapshot_path(sessions, first.session_id)).runs
    assert [run["agentId"] for run in runs] == ["agent_001", "agent_001"]


# --- transcripts match what was sent (rewritten histories) ---------------------------------------


@SMOL
def test_a_resumed_agent_has_the_messages_it_last_sent(traced: Traced, llm: LLMServer) -> None:
    llm.reset(DELEGATE, *RESEARCH)
    code_manager(llm).run("What is the capital of France?")
    traced.handle.force_flush()
    sessions = traced.handle.settings.sessions_dir
    session_id = agenttrace.current_session().session_id
    agenttrace.use_session(None)
    session = agenttrace.resume(snapshot_path(sessions, session_id))

    # The researcher's second request rewrote its first step as text ("Calling tools: ...",
    # "Observation: ..."): resume restores exactly that, then the reply to it.
    last = sent(llm, 2)
    messages = json.loads(json.dumps(session.revivify("agent_002").messages()))
    assert messages[: len(last)] == last
    assert messages[len(last)]["tool_calls"][0]["id"] == "call_answer"


# --- switching it on and off ---------------------------------------------------------------------


def targets() -> dict[str, Any]:
    """Every attribute the instrumentation patches, as smolagents holds it now."""
    from smolagents.local_python_executor import LocalPythonExecutor
    from smolagents.memory import CallbackRegistry
    from smolagents.remote_executors import RemotePythonExecutor
    from smolagents.tools import PipelineTool, Tool

    return {
        "run": vars(smolagents.MultiStepAgent)["run"],
        "__call__": vars(smolagents.MultiStepAgent)["__call__"],
        "Tool": vars(Tool)["__call__"],
        "PipelineTool": vars(PipelineTool)["__call__"],
        "local": vars(LocalPythonExecutor)["__call__"],
        "remote": vars(RemotePythonExecutor)["__call__"],
        "callback": vars(CallbackRegistry)["callback"],
    }


@pytest.fixture
def pristine() -> Iterator[dict[str, Any]]:
    """smolagents as it is without agenttrace (no test may leave it patched)."""
    original = targets()
    yield original
    assert targets() == original


def test_uninstrument_restores_everything(
    traced: Traced, llm: LLMServer, pristine: dict[str, Any]
) -> None:
    from agenttrace.instrumentation.smolagents import SmolagentsInstrumentor

    instrumentor = SmolagentsInstrumentor()
    instrumentor.instrument()
    assert all(targets()[name] is not pristine[name] for name in pristine)
    instrumentor.uninstrument()
    assert targets() == pristine

    llm.reset(*RESEARCH)
    researcher(llm).run(TASK)
    names = {s.name for s in traced.spans()}
    assert "invoke_agent researcher" not in names and "execute_tool lookup" not in names


def test_init_instrument_and_instrument_smolagents(tmp_path: Any, pristine: dict[str, Any]) -> None:
    with pytest.raises(
        ValueError,
        match="cannot instrument 'crewai': it knows anthropic, claude_agent_sdk, litellm, mcp, "
        "openai, openai_agents, pydantic_ai, smolagents",
    ):
        agenttrace.init(instrument=["crewai"])
    handle = agenttrace.init(
        tracer_provider=TracerProvider(),
        sessions_dir=tmp_path / "s",
        billing_file=tmp_path / "b.jsonl",
    )
    try:
        assert targets() == pristine
        agenttrace.instrument_smolagents()  # on the running setup
        patched = targets()
        assert all(patched[name] is not pristine[name] for name in pristine)
        agenttrace.instrument_smolagents()  # again, and through init: never wrapped twice
        assert agenttrace.init(instrument=["smolagents"]) is handle
        assert targets() == patched
    finally:
        handle.shutdown()  # undoes it
    assert targets() == pristine


def test_the_entry_point_names_the_instrumentor() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11
    from pathlib import Path

    from agenttrace.instrumentation.smolagents import SmolagentsInstrumentor

    project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
    entry = project["project"]["entry-points"]["opentelemetry_instrumentor"][
        "agenttrace_smolagents"
    ]
    module, _, name = entry.partition(":")
    assert getattr(__import__(module, fromlist=[name]), name) is SmolagentsInstrumentor
    assert SmolagentsInstrumentor().instrumentation_dependencies() == ("smolagents >= 1.25",)
