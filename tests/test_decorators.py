"""The decorators on every kind of function, nesting, errors, and context propagation."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import agenttrace
from agenttrace import semconv as sc
from agenttrace._internal import errors as _internal_errors

from .conftest import Traced, attrs, duration_ms, outcome


def test_plain_functions_nest_session_turn_tool(traced: Traced) -> None:
    @agenttrace.tool
    def search(query: str, limit: int = 3) -> str:
        return f"results for {query}"

    @agenttrace.agent(name="Researcher")
    def run() -> str:
        with agenttrace.turn():
            return search("cats", limit=2)

    assert run() == "results for cats"
    assert traced.tree() == [
        "invoke_agent Researcher [0]",
        "  turn 1 [1]",
        "    execute_tool search [1.1]",
    ]
    tool = attrs(traced.one("execute_tool search"))
    assert tool[sc.KIND] == "tool"
    assert tool[sc.GEN_AI_OPERATION_NAME] == "execute_tool"
    assert tool[sc.GEN_AI_TOOL_NAME] == "search"
    assert tool[sc.TOOL_CHARS_IN] == len('{"query": "cats", "limit": 2}')
    assert tool[sc.TOOL_CHARS_OUT] == len("results for cats")
    assert outcome(traced.one("execute_tool search")) == "ok"
    assert duration_ms(traced.one("execute_tool search")) >= 0
    assert sc.STATUS not in tool and sc.LATENCY_MS not in tool  # the span's own say it
    session = attrs(traced.one("invoke_agent Researcher"))
    assert session[sc.GEN_AI_OPERATION_NAME] == "invoke_agent"
    assert session[sc.GEN_AI_AGENT_NAME] == "Researcher"
    assert session[sc.TXN_ID] == session[sc.TXN_ORIGIN] == tool[sc.TXN_ORIGIN]
    assert sc.TXN_PARENT not in session
    assert session[sc.CALL_PATH] == "Researcher"
    assert session[sc.SESSION_ID] == session[sc.TXN_ORIGIN]
    assert session[sc.INGRESS_SOURCE] == "cli"
    assert session["agenttrace.ingress.cli.pid"] > 0
    assert attrs(traced.one("turn 1"))[sc.TURN_INDEX] == 1


async def test_coroutines_and_gathered_sub_agents_nest(traced: Traced) -> None:
    class Agent:
        def __init__(self, name: str) -> None:
            self.name = name
            self.agent_id = f"agent_{name.lower()}"
            self.language_model = "test-model"

        @agenttrace.agent
        async def respond(self, prompt: str) -> str:
            await asyncio.sleep(0.01)
            return await self.think(prompt)

        @agenttrace.tool
        async def think(self, prompt: str) -> str:
            await asyncio.sleep(0.01)
            return f"{self.name}: {prompt}"

    @agenttrace.tool
    async def discuss(prompt: str) -> list[str]:
        return list(
            await asyncio.gather(Agent("Jack").respond(prompt), Agent("Jill").respond(prompt))
        )

    @agenttrace.agent("Root")
    async def root() -> list[str]:
        return await discuss("hi")

    assert await root() == ["Jack: hi", "Jill: hi"]
    tree = traced.tree()
    assert tree[:3] == [
        "invoke_agent Root [0]",
        "  turn 1 [1]",
        "    execute_tool discuss [1.1]",
    ]
    # Both children under the one tool call, with distinct labels, each with its own turn/op.
    assert sorted(tree[3:]) == sorted(
        [
            "      invoke_agent Jack [1.1:1]",
            "        turn 1 [1.1.1]",
            "          execute_tool think [1.1.1.1]",
            "      invoke_agent Jill [1.1:2]",
            "        turn 1 [1.1:2.1]",
            "          execute_tool think [1.1:2.1.1]",
        ]
    ) or sorted(tree[3:]) == sorted(
        [
            "      invoke_agent Jill [1.1:1]",
            "        turn 1 [1.1.1]",
            "          execute_tool think [1.1.1.1]",
            "      invoke_agent Jack [1.1:2]",
            "        turn 1 [1.1:2.1]",
            "          execute_tool think [1.1:2.1.1]",
        ]
    )
    discuss_span = attrs(traced.one("execute_tool discuss"))
    assert discuss_span[sc.KIND] == "session"
    jack = attrs(traced.one("invoke_agent Jack"))
    root_span = attrs(traced.one("invoke_agent Root"))
    assert jack[sc.GEN_AI_AGENT_ID] == "agent_jack"
    assert jack[sc.AGENT_MODEL] == "test-model"
    assert jack[sc.TXN_PARENT] == root_span[sc.TXN_ID]
    assert jack[sc.TXN_ORIGIN] == root_span[sc.TXN_ID] != jack[sc.TXN_ID]
    assert jack[sc.CALL_PATH] == "Root/Jack"
    assert jack[sc.INGRESS_SOURCE] == "sub-agent"
    assert jack["agenttrace.ingress.sub_agent.tool_name"] == "discuss"
    think = [attrs(s) for s in traced.by_name("execute_tool think")]
    assert {a[sc.AGENT_ID] for a in think} == {"agent_jack", "agent_jill"}


async def test_concurrent_tool_calls_in_one_turn(traced: Traced) -> None:
    @agenttrace.tool
    async def fetch(n: int) -> int:
        await asyncio.sleep(0.01 * (3 - n))
        return n

    @agenttrace.agent
    async def fan_out() -> list[int]:
        async with agenttrace.turn():
            return list(await asyncio.gather(*(fetch(n) for n in range(3))))

    assert await fan_out() == [0, 1, 2]
    paths = sorted(attrs(s)[sc.PATH] for s in traced.by_name("execute_tool fetch"))
    assert paths == ["1.1", "1.2", "1.3"]
    turn_id = traced.one("turn 1").context.span_id
    assert all(
        s.parent and s.parent.span_id == turn_id for s in traced.by_name("execute_tool fetch")
    )


def test_auto_turns_group_tools_after_each_llm_call(traced: Traced) -> None:
    @agenttrace.llm(model="openai/gpt-4o-mini")
    def ask(messages: list[dict[str, str]]) -> dict[str, Any]:
        return {
            "model": "gpt-4o-mini-2024",
            "choices": [
                {
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_9",
                                "type": "function",
                                "function": {"name": "lookup", "arguments": '{"q": "x"}'},
                            }
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 12, "completion_tokens": 4},
        }

    @agenttrace.tool
    def lookup(q: str) -> str:
        return q * 2

    @agenttrace.agent
    def loop() -> None:
        for _ in range(2):
            ask(messages=[{"role": "user", "content": "go"}])
            lookup("x")
            lookup("y")

    loop()
    assert traced.tree() == [
        "invoke_agent loop [0]",
        "  turn 1 [1]",
        "    chat gpt-4o-mini [1.1]",
        "    execute_tool lookup [1.2]",
        "    execute_tool lookup [1.3]",
        "  turn 2 [2]",
        "    chat gpt-4o-mini [2.1]",
        "    execute_tool lookup [2.2]",
        "    execute_tool lookup [2.3]",
    ]
    assert attrs(traced.by_name("turn 1")[0])[sc.IMPLICIT] is True
    lookups = [attrs(s) for s in traced.by_name("execute_tool lookup")]
    # The first lookup of each turn claims the LLM's tool call; the second finds none left.
    assert [a.get(sc.GEN_AI_TOOL_CALL_ID) for a in lookups] == ["call_9", None, "call_9", None]
    chat = attrs(traced.by_name("chat gpt-4o-mini")[0])
    assert chat[sc.GEN_AI_PROVIDER_NAME] == "openai"
    assert chat[sc.GEN_AI_USAGE_INPUT_TOKENS] == 12
    assert chat[sc.GEN_AI_RESPONSE_MODEL] == "gpt-4o-mini-2024"
    assert chat[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_calls",)
    assert chat[sc.ATTEMPT] == 1


def test_bare_llm_call_gets_a_session_and_turn(traced: Traced) -> None:
    @agenttrace.llm(model="m")
    def ask() -> None:
        return None

    ask()
    assert traced.tree() == ["invoke_agent agenttrace [0]", "  turn 1 [1]", "    chat m [1.1]"]
    assert attrs(traced.one("invoke_agent agenttrace"))[sc.IMPLICIT] is True


def test_sub_agent_called_without_a_tool_gets_a_hosting_op(traced: Traced) -> None:
    @agenttrace.agent("Child")
    def child() -> str:
        return "ok"

    @agenttrace.agent("Parent")
    def parent() -> str:
        with agenttrace.turn():
            return child()

    parent()
    assert traced.tree() == [
        "invoke_agent Parent [0]",
        "  turn 1 [1]",
        "    execute_tool Child [1.1]",
        "      invoke_agent Child [1.1:1]",
    ]
    host = attrs(traced.one("execute_tool Child"))
    assert host[sc.KIND] == "session" and host[sc.IMPLICIT] is True


def test_deep_nesting_labels_parse_back(traced: Traced) -> None:
    @agenttrace.agent
    def level(depth: int) -> int:
        if depth == 0:
            return 0
        return call_child(depth)

    @agenttrace.tool
    def call_child(depth: int) -> int:
        return level(depth - 1) + 1

    assert level(4) == 4
    labels = [attrs(s)[sc.PATH] for s in traced.ours()]
    assert len(labels) == len(set(labels))
    for label in labels:
        assert agenttrace.format_label(agenttrace.parse_label(label)) == label
    assert "1.1.1.1.1.1.1.1:1" in labels


def test_generators_nest_without_detach_warnings(
    traced: Traced, caplog: pytest.LogCaptureFixture
) -> None:
    @agenttrace.tool
    def numbers(n: int) -> Any:
        for i in range(n):
            agenttrace.log("VRB", f"yield {i}")
            yield i
        return "done"

    @agenttrace.agent
    def consume() -> list[int]:
        with agenttrace.turn():
            gen_a, gen_b = numbers(3), numbers(2)
            # Interleave two generators: each step runs inside its own span only.
            out = [next(gen_a), next(gen_b), next(gen_a), next(gen_b)]
            out += list(gen_a)
            return out

    with caplog.at_level(logging.WARNING):
        assert consume() == [0, 0, 1, 1, 2]
    assert "Failed to detach context" not in caplog.text
    spans = traced.by_name("execute_tool numbers")
    assert len(spans) == 2  # gen_b was abandoned: ended when collected
    for span in spans:
        logs = [e for e in span.events if e.name == sc.EVENT_LOG]
        assert all(dict(e.attributes or {})[sc.PATH] == attrs(span)[sc.PATH] for e in logs)
    assert sorted(len([e for e in s.events if e.name == sc.EVENT_LOG]) for s in spans) == [2, 3]


async def test_async_generators_nest_without_detach_warnings(
    traced: Traced, caplog: pytest.LogCaptureFixture
) -> None:
    @agenttrace.tool(name="stream_words")
    async def words() -> Any:
        for word in ("a", "b", "c"):
            await asyncio.sleep(0)
            yield word

    @agenttrace.agent
    async def reader() -> list[str]:
        return [w async for w in words()]

    with caplog.at_level(logging.WARNING):
        assert await reader() == ["a", "b", "c"]
        gen = words()
        assert await gen.__anext__() == "a"
        await gen.aclose()
    assert "Failed to detach context" not in caplog.text
    assert len(traced.by_name("execute_tool stream_words")) == 2
    assert traced.tree()[:3] == [
        "invoke_agent reader [0]",
        "  turn 1 [1]",
        "    execute_tool stream_words [1.1]",
    ]


def test_generator_send_and_throw_pass_through(traced: Traced) -> None:
    @agenttrace.tool
    def echo() -> Any:
        received = []
        try:
            while True:
                value = yield len(received)
                received.append(value)
        except KeyError:
            yield "caught"
        return received

    gen = echo()
    assert next(gen) == 0
    assert gen.send("x") == 1
    assert gen.throw(KeyError("k")) == "caught"
    with pytest.raises(StopIteration):
        next(gen)
    span = traced.one("execute_tool echo")
    assert outcome(span) == "ok"


def test_user_exceptions_pass_through_and_mark_failure(traced: Traced) -> None:
    class Boom(Exception):
        pass

    error = Boom("no luck")

    @agenttrace.tool
    def fails() -> None:
        raise error

    @agenttrace.agent
    def run() -> None:
        fails()

    with pytest.raises(Boom) as caught:
        run()
    assert caught.value is error
    tool = traced.one("execute_tool fails")
    assert outcome(tool) == "failed"
    assert (
        attrs(tool)[sc.ERROR_TYPE]
        == "test_user_exceptions_pass_through_and_mark_failure.<locals>.Boom"
    )
    assert tool.status.status_code.name == "ERROR"
    assert "no luck" in (tool.status.description or "")
    assert [e.name for e in tool.events] == ["exception"]
    assert outcome(traced.one("invoke_agent run")) == "failed"
    assert "tool/fails: WRN failed (" in traced.output()
    assert "session/run: ERR failed" in traced.output()


async def test_cancellation_still_ends_the_span(traced: Traced) -> None:
    started = asyncio.Event()

    @agenttrace.tool
    async def slow() -> None:
        started.set()
        await asyncio.sleep(10)

    task = asyncio.create_task(slow())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    span = traced.one("execute_tool slow")
    assert attrs(span)[sc.ERROR_TYPE] == "CancelledError"


def test_methods_bare_and_called_forms(traced: Traced) -> None:
    class Toolbox:
        @agenttrace.tool
        def plain(self, x: int) -> int:
            return x + 1

        @agenttrace.tool()
        def called(self, x: int) -> int:
            return x + 2

        @agenttrace.tool(name="renamed")
        def named(self, x: int) -> int:
            return x + 3

        @agenttrace.tool("positional")
        def positional(self, x: int) -> int:
            return x + 4

    box = Toolbox()
    assert (box.plain(1), box.called(1), box.named(1), box.positional(1)) == (2, 3, 4, 5)
    names = {s.name for s in traced.spans() if s.name.startswith("execute_tool")}
    assert names == {
        "execute_tool plain",
        "execute_tool called",
        "execute_tool renamed",
        "execute_tool positional",
    }
    # self is not part of the arguments
    assert attrs(traced.one("execute_tool plain"))[sc.TOOL_CHARS_IN] == len('{"x": 1}')
    assert Toolbox.plain.__name__ == "plain"


def test_context_managers_and_handles(traced: Traced) -> None:
    with agenttrace.agent("Manual"), agenttrace.turn():
        with agenttrace.tool("fetch", arguments={"url": "http://127.0.0.1/x"}) as call:
            call.set_result("<html/>")
            assert call.path == "1.1"
        with agenttrace.llm("anthropic/claude-x") as attempt:
            attempt.record_response(
                {
                    "model": "claude-x",
                    "role": "assistant",
                    "content": [{"type": "text", "text": "hi"}],
                    "stop_reason": "end_turn",
                    "usage": {
                        "input_tokens": 10,
                        "output_tokens": 5,
                        "cache_read_input_tokens": 30,
                        "cache_creation_input_tokens": 20,
                    },
                }
            )
    fetch = attrs(traced.one("execute_tool fetch"))
    assert fetch[sc.TOOL_CHARS_OUT] == len("<html/>")
    assert fetch[sc.TOOL_CHARS_IN] == len('{"url": "http://127.0.0.1/x"}')
    chat = attrs(traced.one("chat claude-x"))
    # Anthropic-style usage: cache reads and writes are on top of input_tokens.
    assert chat[sc.GEN_AI_USAGE_INPUT_TOKENS] == 60
    assert chat[sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 30
    assert chat[sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] == 20
    assert chat[sc.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)
    assert chat[sc.PATH] == "1.2"


@pytest.mark.init(propagate_threads=False)  # bind_context alone carries it (tests/test_threads.py)
def test_thread_pool_with_bind_context(traced: Traced) -> None:
    @agenttrace.tool
    def work(n: int) -> int:
        return n * n

    @agenttrace.agent
    def pool_run() -> list[int]:
        with agenttrace.turn(), ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(agenttrace.bind_context(work), n) for n in range(4)]
            results = [f.result() for f in futures]
        with agenttrace.turn(), agenttrace.ContextThreadPoolExecutor(2) as pool:
            results += list(pool.map(work, range(2)))
        return results

    assert pool_run() == [0, 1, 4, 9, 0, 1]
    turns = {
        s.context.span_id: attrs(s)[sc.PATH]
        for s in traced.by_name("turn 1") + traced.by_name("turn 2")
    }
    works = traced.by_name("execute_tool work")
    assert len(works) == 6
    assert sorted(turns[s.parent.span_id] for s in works if s.parent) == ["1"] * 4 + ["2"] * 2
    assert sorted(attrs(s)[sc.PATH] for s in works) == ["1.1", "1.2", "1.3", "1.4", "2.1", "2.2"]


def test_forced_internal_error_leaves_the_call_intact(
    traced: Traced, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agenttrace.tracing import decorators

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("bug in agenttrace")

    monkeypatch.setattr(_internal_errors, "raise_internal_errors", False)
    monkeypatch.setattr(decorators, "start_op", broken)
    _internal_errors.reset_reported()

    @agenttrace.tool
    def add(a: int, b: int) -> int:
        return a + b

    @agenttrace.tool
    async def aadd(a: int, b: int) -> int:
        return a + b

    with caplog.at_level(logging.WARNING, logger="agenttrace"):
        assert add(1, 2) == 3
        assert add(2, 2) == 4
        assert asyncio.run(aadd(1, 1)) == 2
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "internal error in tool span" in warnings[0].getMessage()
    assert "bug in agenttrace" in warnings[0].getMessage()
    assert traced.spans() == []


def test_internal_errors_are_raised_under_the_test_suite(
    traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agenttrace.tracing import decorators

    monkeypatch.setattr(decorators, "start_op", lambda *a, **k: 1 / 0)

    @agenttrace.tool
    def add(a: int, b: int) -> int:
        return a + b

    with pytest.raises(ZeroDivisionError):
        add(1, 2)


def test_logs_and_reasoning_are_span_events_and_console_lines(traced: Traced) -> None:
    @agenttrace.tool
    def check() -> None:
        agenttrace.log("VRB", "looking")
        agenttrace.log("WRN", "disk almost full", free_mb=12, api_key="sk-should-not-appear-123")
        agenttrace.thinking("maybe the disk")

    @agenttrace.agent
    def run() -> None:
        check()

    run()
    span = traced.one("execute_tool check")
    events = [(e.name, dict(e.attributes or {})) for e in span.events]
    assert [name for name, _ in events] == [sc.EVENT_LOG, sc.EVENT_LOG, sc.EVENT_REASONING]
    assert events[1][1][sc.LOG_LEVEL] == "WRN"
    assert events[1][1][sc.PATH] == "1.1"
    assert "sk-should-not-appear" not in events[1][1][sc.LOG_DETAILS]
    assert events[2][1][sc.REASONING_TEXT] == "maybe the disk"
    origin = attrs(span)[sc.TXN_ORIGIN]
    assert traced.output() == f"[txn:{origin}] 1.1 tool/check: WRN disk almost full\n"


@pytest.mark.console("verbose")
def test_verbose_console_summarises_each_op(traced: Traced) -> None:
    @agenttrace.tool
    def tiny(x: str) -> str:
        agenttrace.thinking("hmm")
        return x

    @agenttrace.agent
    def run() -> None:
        tiny("abc")

    run()
    lines = traced.output().splitlines()
    origin = attrs(traced.one("invoke_agent run"))[sc.TXN_ORIGIN]
    assert lines[0] == f"[txn:{origin}] 1.1 tool/tiny: THK hmm"
    assert lines[1].startswith(f"[txn:{origin}] 1.1 tool/tiny: VRB ok ")
    assert lines[1].endswith("chars in 12 out 3")
    assert lines[2].startswith(f"[txn:{origin}] 0 session/run: VRB agent run ok ")


def test_disabled_agenttrace_is_a_no_op(traced: Traced, monkeypatch: pytest.MonkeyPatch) -> None:
    from agenttrace._internal.runtime import runtime

    monkeypatch.setattr(runtime, "disabled", True)

    @agenttrace.tool
    def f(x: int) -> int:
        agenttrace.log("WRN", "nothing")
        return x

    @agenttrace.tool
    def g() -> Any:
        yield 1

    assert f(3) == 3
    assert list(g()) == [1]
    with agenttrace.tool("ctx") as call:
        call.set_result("x")
        assert call.path is None
    assert traced.spans() == []


def test_a_tool_result_agenttrace_cannot_record_still_ends_the_span(
    traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A result no JSON holds (a list that contains itself) is the user's to return: the call
    gives it back, agenttrace says once that it could not record it, and the tool's span ends
    in the call, as every span does (it stayed open, "in progress", for the rest of the run)."""
    monkeypatch.setattr(_internal_errors, "raise_internal_errors", False)
    _internal_errors.reset_reported()
    loop: list[Any] = []
    loop.append(loop)

    @agenttrace.tool
    def knot() -> list[Any]:
        return loop

    assert knot() is loop
    tool_span = traced.one("execute_tool knot")  # ended: the exporter has it
    assert tool_span.end_time is not None
    assert all(span.end_time is not None for span in traced.spans())
