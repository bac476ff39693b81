"""Instrumenting agent and tool classes: names from the instance, streams that keep their run
open, return values left alone, ok_exceptions, and with-blocks that log what decorators log."""

from __future__ import annotations

import asyncio
import gc
import inspect
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import agenttrace
from agenttrace import semconv as sc
from agenttrace.formats.session.files import read_session_file, snapshot_path

from .conftest import Traced, attrs, outcome

LINKAGE = ("ts", "trace_id", "span_id")


def tool_call_reply(*calls: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    """An OpenAI-shaped reply asking for tool calls (id, name, arguments)."""
    return {
        "model": "gpt-x",
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(arguments)},
                        }
                        for call_id, name, arguments in calls
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }


def text_reply(text: str) -> dict[str, Any]:
    return {
        "model": "gpt-x",
        "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }


@agenttrace.llm("openai/gpt-x")
def chat(messages: list[Any], reply: dict[str, Any]) -> dict[str, Any]:
    return reply


def started_and_ended(traced: Traced, name: str) -> list[tuple[int, int]]:
    return [(s.start_time or 0, s.end_time or 0) for s in traced.by_name(name)]


# --- framework classes, as a framework ships them (no agenttrace in them) ------------------------


class SearchTool:
    """A framework's tool: the instance knows its name; ``__call__`` takes anything."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        return f"{self.name}: {args} {sorted(kwargs.items())}"


class Model:
    model_id = "openai/gpt-x"


class FrameworkAgent:
    """A framework's agent: ``run`` returns the answer, or a generator of steps when streaming."""

    def __init__(self, name: str, tools: dict[str, SearchTool], replies: list[Any]) -> None:
        self.name = name
        self.model = Model()
        self.tools = tools
        self.replies = replies
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": "find cats"}]

    def run(self, task: str, stream: bool = False) -> Any:
        self.messages.append({"role": "user", "content": task})
        if stream:
            return self._steps()
        steps = list(self._steps())
        return steps[-1]

    def _steps(self) -> Iterator[Any]:
        for reply in self.replies:
            response = chat(messages=self.messages, reply=reply)
            message = response["choices"][0]["message"]
            self.messages.append(message)
            for call in message.get("tool_calls") or ():
                function = call["function"]
                result = self.tools[function["name"]](**json.loads(function["arguments"]))
                self.messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": result}
                )
                yield result
            if message.get("content"):
                yield message["content"]


@pytest.fixture
def instrumented() -> Iterator[None]:
    agenttrace.instrument_agent(FrameworkAgent, name=lambda self: self.name)
    agenttrace.instrument_tool(SearchTool)
    try:
        yield
    finally:
        agenttrace.uninstrument_agent(FrameworkAgent)
        agenttrace.uninstrument_tool(SearchTool)


# --- names from the instance -------------------------------------------------------------------


def test_agent_name_is_honoured_on_methods_as_a_string_or_a_callable(traced: Traced) -> None:
    class Agent:
        def __init__(self, name: str) -> None:
            self.name = name
            self.language_model = "openai/gpt-x"

        @agenttrace.agent(name="researcher")
        def fixed(self) -> str:
            return "a"

        @agenttrace.agent(name=lambda self: f"{self.name}-bot", model=lambda self: "m/1")
        def computed(self) -> str:
            return "b"

        @agenttrace.agent
        def default(self) -> str:
            return "c"

    jack = Agent("Jack")
    assert (jack.fixed(), jack.computed(), jack.default()) == ("a", "b", "c")
    assert [s.name for s in traced.ours() if s.name.startswith("invoke_agent")] == [
        "invoke_agent researcher",
        "invoke_agent Jack-bot",
        "invoke_agent Jack",
    ]
    assert attrs(traced.one("invoke_agent Jack-bot"))[sc.AGENT_MODEL] == "m/1"
    assert attrs(traced.one("invoke_agent Jack"))[sc.AGENT_MODEL] == "openai/gpt-x"
    # One object, one agent, whatever each run is called.
    assert len({attrs(s)[sc.AGENT_ID] for s in traced.ours()}) == 1


def test_a_naming_callable_that_fails_is_reported(traced: Traced) -> None:
    class Agent:
        @agenttrace.agent(name=lambda self: self.missing)
        def run(self) -> str:
            return "ok"

    with pytest.raises(AttributeError):  # under the suite, internal errors are raised
        Agent().run()


def test_tool_names_come_from_the_instance(traced: Traced) -> None:
    class Tool:
        def __init__(self, name: str) -> None:
            self.name = name

        @agenttrace.tool(name=lambda self: self.name)
        def __call__(self, query: str, *more: str, limit: int = 3) -> str:
            return query.upper()

    search, fetch = Tool("search"), Tool("fetch")

    @agenttrace.agent
    def run() -> None:
        chat(messages=[], reply=tool_call_reply(("c1", "fetch", {"query": "x"})))
        search("cats", "dogs", "owls", limit=2)
        fetch("x")

    run()
    assert traced.tree() == [
        "invoke_agent run [0]",
        "  turn 1 [1]",
        "    chat gpt-x [1.1]",
        "    execute_tool search [1.2]",
        "    execute_tool fetch [1.3]",
    ]
    first = attrs(traced.one("execute_tool search"))
    # The *args tail is recorded under its own name; self is no argument.
    expected = {"query": "cats", "more": ["dogs", "owls"], "limit": 2}
    assert first[sc.TOOL_CHARS_IN] == len(json.dumps(expected))
    assert sc.GEN_AI_TOOL_CALL_ID not in first
    # The LLM asked for "fetch": the instance named fetch claims the call.
    assert attrs(traced.one("execute_tool fetch"))[sc.GEN_AI_TOOL_CALL_ID] == "c1"


def test_a_tool_called_by_a_tool_acts_for_the_same_reply(traced: Traced) -> None:
    @agenttrace.agent("Helper")
    def helper() -> None:
        pass

    @agenttrace.tool
    def inner() -> str:
        helper()
        return "done"

    @agenttrace.tool
    def outer() -> str:
        return inner()

    @agenttrace.agent("Boss")
    def boss() -> None:
        chat(messages=[], reply=tool_call_reply(("c1", "outer", {})))
        outer()

    boss()
    events = agenttrace.current_session().events
    reply = next(e for e in events if e.get("tool_calls"))
    # The agent the inner tool ran was caused by the reply that asked for the outer one.
    created = {e["name"]: e.get("cause") for e in events if e["event_type"] == "agent_created"}
    assert created == {"Boss": None, "Helper": reply["message_id"]}
    # Only the call the model asked for has its id, and a tool entry.
    assert attrs(traced.one("execute_tool outer"))[sc.GEN_AI_TOOL_CALL_ID] == "c1"
    assert sc.GEN_AI_TOOL_CALL_ID not in attrs(traced.one("execute_tool inner"))
    assert [e["tool_call_id"] for e in events if e.get("role") == "tool"] == ["c1"]


# --- instrument_agent / instrument_tool ---------------------------------------------------------


def test_instrument_agent_traces_a_framework_class_without_touching_its_code(
    traced: Traced, instrumented: None
) -> None:
    tools = {"search": SearchTool("search"), "fetch": SearchTool("fetch")}
    replies = [
        tool_call_reply(("c1", "search", {"q": "cats"}), ("c2", "fetch", {"url": "u"})),
        text_reply("Cats found."),
    ]
    session = agenttrace.new_session()
    answer = FrameworkAgent("researcher", tools, replies).run("find cats")
    assert answer == "Cats found."
    assert traced.tree() == [
        "invoke_agent researcher [0]",
        "  turn 1 [1]",
        "    chat gpt-x [1.1]",
        "    execute_tool search [1.2]",
        "    execute_tool fetch [1.3]",
        "  turn 2 [2]",
        "    chat gpt-x [2.1]",
    ]
    search = attrs(traced.one("execute_tool search"))
    assert search[sc.GEN_AI_TOOL_CALL_ID] == "c1"
    assert search[sc.TOOL_CHARS_IN] == len('{"q": "cats"}')
    # The tools' results entered the transcript as tool entries, the reply as the last entry.
    roles = [(e.get("role"), e.get("tool_call_id")) for e in session.events[1:]]
    assert roles == [
        ("user", None),
        ("user", None),
        ("assistant", None),
        ("tool", "c1"),
        ("tool", "c2"),
        ("assistant", None),
    ]
    assert session.events[-1]["content"] == "Cats found."


def test_instrumenting_is_idempotent_undoable_and_keeps_the_method_kind(traced: Traced) -> None:
    class Agent:
        name = "a"

        def run(self) -> str:
            return "sync"

        async def arun(self) -> str:
            return "async"

        def steps(self) -> Iterator[int]:
            yield 1

    run, arun, steps = Agent.__dict__["run"], Agent.__dict__["arun"], Agent.__dict__["steps"]
    agenttrace.instrument_agent(Agent, run=("run", "arun", "steps"))
    agenttrace.instrument_agent(Agent, run=("run", "arun", "steps"), name="second")
    assert inspect.iscoroutinefunction(Agent.arun)
    assert inspect.isgeneratorfunction(Agent.steps)
    assert Agent.run.__wrapped__ is run  # type: ignore[attr-defined]
    agent = Agent()
    assert agent.run() == "sync"
    assert asyncio.run(agent.arun()) == "async"
    assert list(agent.steps()) == [1]
    # Instrumented twice, wrapped once: one span a call, with the last options.
    assert [s.name for s in traced.ours()] == ["invoke_agent second"] * 3
    agenttrace.uninstrument_agent(Agent)
    assert (Agent.__dict__["run"], Agent.__dict__["arun"]) == (run, arun)
    assert Agent.__dict__["steps"] is steps
    agent.run()
    assert len(traced.ours()) == 3


def test_inherited_and_overridden_runs_are_one_run(traced: Traced) -> None:
    class Base:
        name = "base"

        def run(self) -> str:
            return "base"

    class Inherits(Base):
        name = "inherits"

    class Overrides(Base):
        name = "overrides"

        def run(self) -> str:
            return "over " + super().run()

    original = Base.__dict__["run"]
    agenttrace.instrument_agent(Base)
    agenttrace.instrument_agent(Inherits)  # inherits Base's wrapper: unwrapped, then its own
    agenttrace.instrument_agent(Overrides)
    try:
        assert "run" in Inherits.__dict__
        assert Inherits().run() == "base"
        assert Overrides().run() == "over base"  # super().run() is the same run
        assert Base().run() == "base"
        names = [s.name for s in traced.ours()]
        assert names == ["invoke_agent inherits", "invoke_agent overrides", "invoke_agent base"]
    finally:
        for cls in (Base, Inherits, Overrides):
            agenttrace.uninstrument_agent(cls)
    assert "run" not in Inherits.__dict__  # what we added is gone; Base has its own back
    assert Base.__dict__["run"] is original


def test_undo_leaves_a_method_someone_else_replaced(traced: Traced) -> None:
    class Agent:
        def run(self) -> int:
            return 1

    agenttrace.instrument_agent(Agent)

    def theirs(self: Agent) -> int:
        return 2

    Agent.run = theirs  # type: ignore[method-assign]
    agenttrace.uninstrument_agent(Agent)
    assert Agent.run is theirs


def test_instrumenting_what_is_not_an_instance_method_says_so() -> None:
    class Agent:
        @staticmethod
        def run() -> None: ...

    with pytest.raises(TypeError, match="staticmethod"):
        agenttrace.instrument_agent(Agent)
    with pytest.raises(AttributeError, match="no method 'go'"):
        agenttrace.instrument_agent(Agent, run="go")
    with pytest.raises(TypeError, match="a class"):
        agenttrace.instrument_agent(Agent(), run="run")  # type: ignore[type-var]
    with pytest.raises(TypeError, match="exception classes"):
        agenttrace.tool(ok_exceptions=("StopIteration",))  # type: ignore[arg-type]


def test_a_tool_class_is_named_by_instance_else_by_class(traced: Traced) -> None:
    class Nameless:
        def __call__(self, x: int) -> int:
            return x

    agenttrace.instrument_tool(Nameless)
    agenttrace.instrument_tool(SearchTool, name=lambda self: f"web_{self.name}")
    try:
        Nameless()(1)
        SearchTool("search")(q="x")
    finally:
        agenttrace.uninstrument_tool(Nameless)
        agenttrace.uninstrument_tool(SearchTool)
    assert attrs(traced.one("execute_tool Nameless"))[sc.TOOL_CHARS_IN] == len('{"x": 1}')
    assert traced.by_name("execute_tool web_search")
    assert "__call__" in SearchTool.__dict__ and "__call__" in Nameless.__dict__


# --- streams ------------------------------------------------------------------------------------


def test_a_returned_generator_keeps_the_run_open_until_closed(
    traced: Traced, instrumented: None
) -> None:
    tools = {"search": SearchTool("search")}
    replies = [tool_call_reply(("c1", "search", {"q": "a"})) for _ in range(3)]
    agent = FrameworkAgent("streamer", tools, replies)
    steps = agent.run("go", stream=True)
    assert inspect.isgenerator(steps)
    assert not traced.by_name("invoke_agent streamer")  # open: nothing ran yet
    first = next(steps)
    assert first == "search: () [('q', 'a')]"
    assert next(steps) == first
    assert not traced.by_name("invoke_agent streamer")  # still open between items
    steps.close()  # consumed partially, then closed
    (run,) = traced.by_name("invoke_agent streamer")
    assert outcome(run) == "ok"
    assert traced.tree() == [
        "invoke_agent streamer [0]",
        "  turn 1 [1]",
        "    chat gpt-x [1.1]",
        "    execute_tool search [1.2]",
        "  turn 2 [2]",
        "    chat gpt-x [2.1]",
        "    execute_tool search [2.2]",
    ]
    # The run covers the iteration: it ends after the last tool it ran.
    assert (run.end_time or 0) >= max(end for _, end in started_and_ended(traced, "chat gpt-x"))


def test_a_stream_that_fails_or_is_never_iterated_still_ends(
    traced: Traced, instrumented: None
) -> None:
    agent = FrameworkAgent("broken", {}, [tool_call_reply(("c1", "missing", {}))])
    steps = agent.run("go", stream=True)
    with pytest.raises(KeyError):
        next(steps)
    (run,) = traced.by_name("invoke_agent broken")
    assert outcome(run) == "failed"
    never = FrameworkAgent("idle", {}, []).run("go", stream=True)
    del never
    gc.collect()
    (idle,) = traced.by_name("invoke_agent idle")
    assert outcome(idle) == "ok" and idle.end_time is not None


async def test_a_returned_async_generator_keeps_the_run_open_until_aclose(
    traced: Traced,
) -> None:
    class AsyncAgent:
        name = "async-streamer"

        def run(self, n: int) -> AsyncIterator[int]:
            return self._stream(n)

        async def arun(self, n: int) -> AsyncIterator[int]:
            await asyncio.sleep(0)
            return self._stream(n)

        async def _stream(self, n: int) -> AsyncIterator[int]:
            for i in range(n):
                await asyncio.sleep(0)
                with agenttrace.tool("step", arguments={"i": i}) as call:
                    call.set_result(i)
                yield i

    agenttrace.instrument_agent(AsyncAgent, run=["run", "arun"])
    try:
        stream = AsyncAgent().run(5)
        assert inspect.isasyncgen(stream)
        assert [await stream.__anext__(), await stream.__anext__()] == [0, 1]
        assert not traced.by_name("invoke_agent async-streamer")
        await stream.aclose()
        collected = [i async for i in await AsyncAgent().arun(2)]
    finally:
        agenttrace.uninstrument_agent(AsyncAgent)
    assert collected == [0, 1]
    runs = traced.by_name("invoke_agent async-streamer")
    assert len(runs) == 2 and all(outcome(r) == "ok" for r in runs)
    assert traced.tree() == [
        "invoke_agent async-streamer [0]",
        "  turn 1 [1]",
        "    execute_tool step [1.1]",
        "    execute_tool step [1.2]",
        "invoke_agent async-streamer [0]",
        "  turn 1 [1]",
        "    execute_tool step [1.1]",
        "    execute_tool step [1.2]",
    ]


def test_a_tool_that_returns_a_generator_logs_each_item(traced: Traced) -> None:
    @agenttrace.tool
    def lines(n: int) -> Iterator[str]:
        return iter_lines(n)

    def iter_lines(n: int) -> Iterator[str]:
        for i in range(n):
            yield f"line {i}"

    @agenttrace.agent
    def run() -> list[str]:
        chat(messages=[], reply=tool_call_reply(("c1", "lines", {"n": 2})))
        return list(lines(2))

    session = agenttrace.new_session()
    assert run() == ["line 0", "line 1"]
    tool_entries = [e["content"] for e in session.events if e.get("role") == "tool"]
    assert tool_entries == ["line 0", "line 1"]
    assert attrs(traced.one("execute_tool lines"))[sc.TOOL_CHARS_OUT] == len("line 0line 1")


# --- return values and the transcript -----------------------------------------------------------


async def test_return_values_are_the_objects_the_function_returned(traced: Traced) -> None:
    text = "".join(["an ", "answer"])  # a str object of its own
    data = {"answer": 42}

    @agenttrace.agent
    def says() -> str:
        return text

    @agenttrace.agent
    async def asays() -> str:
        return text

    @agenttrace.tool
    def gives() -> dict[str, int]:
        return data

    session = agenttrace.new_session()
    result = says()
    assert result is text and type(result) is str
    result = await asays()
    assert result is text and type(result) is str
    assert gives() is data
    # The model said nothing: no assistant entry is made up for the answer.
    assert [e for e in session.events if e["event_type"] != "agent_created"] == []


def test_a_logged_string_returned_stays_that_one(traced: Traced) -> None:
    said = agenttrace.LoggedString("hi", "msg_777")

    @agenttrace.agent
    def relay() -> str:
        return said

    assert relay() is said


def test_the_llm_response_is_left_as_the_client_returned_it(traced: Traced) -> None:
    reply = text_reply("Hello")

    @agenttrace.agent
    def run() -> Any:
        return chat(messages=[], reply=reply)

    session = agenttrace.new_session()
    got = run()
    assert got is reply
    content = got["choices"][0]["message"]["content"]
    assert type(content) is str and content == "Hello"  # no LoggedString slipped in
    assert [e["content"] for e in session.events if e.get("role") == "assistant"] == ["Hello"]


def test_heard_plain_text_links_to_the_reply_that_said_it(traced: Traced) -> None:
    """A run returns its model's text as the plain ``str`` it is; the agent that hears it
    still gets the reply as its entry's substance (seed example 1's links)."""

    @agenttrace.agent_class
    class Speaker:
        def __init__(self, name: str) -> None:
            self.name = name
            self.language_model = "openai/gpt-x"

        @agenttrace.hears
        def harken(self, text: str) -> None:
            pass

        @agenttrace.agent
        def respond(self, line: str) -> str:
            response = chat(messages=[], reply=text_reply(line))
            return str(response["choices"][0]["message"]["content"])

    session = agenttrace.new_session()
    jack, jill = Speaker("Jack"), Speaker("Jill")
    said = jack.respond("Hello Jill, nice to meet you")
    assert type(said) is str
    jill.harken(said)
    jill.harken("[Jack]: " + said)  # a tagged copy (seed example 1) is the same reply
    jill.harken("something nobody said")
    jill.harken("A long preamble that quotes only at the end: " + said)  # mostly not the reply
    jack.respond("ok")
    jill.harken("ok, fine then")  # a short reply links only to text that is exactly it
    reply = next(e for e in session.events if e.get("role") == "assistant")
    heard = [e for e in session.events if e.get("role") == "user"]
    assert [e.get("substance") for e in heard] == [
        reply["message_id"],
        reply["message_id"],
        None,
        None,
        None,
    ]


def test_a_text_two_replies_said_links_to_neither_and_old_ones_are_forgotten(
    traced: Traced,
) -> None:
    from agenttrace.model.links import REPLIES_REMEMBERED

    session = agenttrace.new_session()
    speaker = session.allocate_agent_id()
    session.log_agent_created(speaker, name="Speaker")
    said = "the answer is forty-two"
    session.log_transcript_entry(speaker, {"role": "assistant", "content": said})
    assert session.reply_saying(said) is not None
    session.log_transcript_entry(speaker, {"role": "assistant", "content": said})
    assert session.reply_saying(said) is None  # which of the two? neither
    assert session.reply_saying("".join(["the answer ", "is forty-two"])) is None
    kept = session.log_transcript_entry(speaker, {"role": "assistant", "content": "a reply kept"})
    for n in range(REPLIES_REMEMBERED):
        session.log_transcript_entry(speaker, {"role": "assistant", "content": f"reply number {n}"})
    assert session.reply_saying("a reply kept") is None != kept  # pushed out: the index is bounded
    assert session.reply_saying(f"reply number {REPLIES_REMEMBERED - 1}") is not None
    assert session.reply_saying("") is None


# --- ok_exceptions ------------------------------------------------------------------------------


class FinalAnswer(Exception):
    """A framework's control flow: the answer travels up as an exception."""


def test_ok_exceptions_pass_through_without_failing_the_span(
    traced: Traced, tmp_path: Path
) -> None:
    error = FinalAnswer("42")

    @agenttrace.tool(ok_exceptions=FinalAnswer)
    def final_answer(answer: str) -> None:
        raise error

    @agenttrace.agent(ok_exceptions=(FinalAnswer,))
    def run() -> None:
        chat(messages=[], reply=tool_call_reply(("c1", "final_answer", {"answer": "42"})))
        final_answer("42")

    session = agenttrace.new_session()
    with pytest.raises(FinalAnswer) as caught:
        run()
    assert caught.value is error
    for name in ("execute_tool final_answer", "invoke_agent run"):
        span = traced.one(name)
        assert outcome(span) == "ok" and span.status.status_code.name == "UNSET"
        assert sc.ERROR_TYPE not in attrs(span)
        (event,) = [e for e in span.events if e.name == "exception"]
        assert dict(event.attributes or {})["exception.message"] == "42"
    # No result: nothing enters the transcript for the call.
    assert not [e for e in session.events if e.get("role") == "tool"]
    traced.handle.force_flush()
    (saved,) = read_session_file(snapshot_path(tmp_path / "sessions", session.session_id)).runs
    assert saved["success"] is True
    op = saved["turns"][0]["ops"][1]
    assert op["name"] == "final_answer" and op["status"] == "ok"
    assert [e["name"] for e in op["span"]["events"]] == ["exception"]
    assert op["span"]["status"] == {"code": "UNSET"}
    assert "failed" not in traced.output()


def test_other_exceptions_still_fail(traced: Traced) -> None:
    @agenttrace.tool(ok_exceptions=(FinalAnswer,))
    def broken() -> None:
        raise ValueError("no")

    with pytest.raises(ValueError):
        broken()
    assert outcome(traced.one("execute_tool broken")) == "failed"


# --- with-blocks log what decorators log ------------------------------------------------------


def _scenario(traced: Traced, form: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One run in a session of its own: an LLM asks for ``fetch``, which runs as a decorated
    function or as a with-block; returns the events and the attributes of our spans."""

    @agenttrace.tool(name="fetch")
    def fetch(url: str) -> dict[str, str]:
        return {"page": "<html/>"}

    @agenttrace.llm("openai/gpt-x")
    def ask(messages: list[Any]) -> dict[str, Any]:
        return tool_call_reply(("c1", "fetch", {"url": "u"}))

    @agenttrace.agent(name="Manual")
    def run() -> None:
        if form == "decorator":
            ask(messages=[])
            fetch("u")
            return
        with agenttrace.llm("openai/gpt-x") as attempt:
            attempt.record_response(tool_call_reply(("c1", "fetch", {"url": "u"})))
        with agenttrace.tool("fetch", arguments={"url": "u"}) as call:
            call.set_result({"page": "<html/>"})

    traced.exporter.clear()
    session = agenttrace.new_session()
    run()
    events = [{k: v for k, v in e.items() if k not in LINKAGE} for e in session.events]
    ids = (sc.TXN_ID, sc.TXN_ORIGIN, sc.SESSION_ID, sc.GEN_AI_CONVERSATION_ID)
    spans = [{k: v for k, v in attrs(s).items() if k not in ids} for s in traced.ours()]
    return events, spans


def test_with_blocks_log_exactly_what_decorators_log(traced: Traced) -> None:
    events, spans = _scenario(traced, "decorator")
    assert _scenario(traced, "with-block") == (events, spans)
    assert [e.get("role") for e in events] == [None, "assistant", "tool"]
    assert events[-1]["tool_call_id"] == "c1" and events[-1]["path"] == "1.2"
    assert events[-1]["content"] == '{"page": "<html/>"}'
    assert [s[sc.PATH] for s in spans] == ["0", "1", "1.1", "1.2"]
    assert spans[-1][sc.TOOL_CHARS_OUT] == len(events[-1]["content"])


def test_a_with_block_that_fails_logs_no_result(traced: Traced) -> None:
    @agenttrace.agent
    def run() -> None:
        chat(messages=[], reply=tool_call_reply(("c1", "fetch", {})))
        with agenttrace.tool("fetch", arguments={}) as call:
            call.set_result("partial")
            raise ValueError("no")

    session = agenttrace.new_session()
    with pytest.raises(ValueError):
        run()
    assert not [e for e in session.events if e.get("role") == "tool"]
    assert outcome(traced.one("execute_tool fetch")) == "failed"


def test_an_llm_generator_that_returns_the_response_logs_it(traced: Traced) -> None:
    @agenttrace.llm("openai/gpt-x")
    def streamed(messages: list[Any]) -> Iterator[str]:
        yield "Hel"
        yield "lo"
        return text_reply("Hello")

    @agenttrace.agent
    def run() -> list[str]:
        return list(streamed(messages=[]))

    session = agenttrace.new_session()
    assert run() == ["Hel", "lo"]
    assert [e.get("content") for e in session.events if e.get("role") == "assistant"] == ["Hello"]
    assert attrs(traced.one("chat gpt-x"))[sc.GEN_AI_USAGE_OUTPUT_TOKENS] == 2
