"""Context follows threads: pool tasks and threads started inside a traced scope nest in it.

Real threads, real pools and real spans. Nothing here waits on timing: threads that must run at
once meet at a barrier, and everything else is joined before it is looked at.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agenttrace
from agenttrace import semconv as sc
from agenttrace._internal.config import Settings
from agenttrace.formats.session.files import read_session_file
from agenttrace.formats.session.fullest import load_fullest
from agenttrace.instrumentation.threading import ThreadContextInstrumentor
from agenttrace.recorder.worker import Worker
from agenttrace.tracing.scopes import current_scope

from .conftest import Traced, attrs, outcome
from .helpers import subtrees

WAIT = 60  # seconds: generous, for a slow shared machine; a barrier or join never needs them


@pytest.fixture
def eager_switching() -> Iterator[None]:
    """Threads switch as often as the interpreter can, so that code run at once in several
    threads interleaves at every step: a missing lock shows up here, not on a user's machine."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


@agenttrace.tool
def fetch(n: int) -> int:
    return n * 10


def ids(span: ReadableSpan) -> tuple[int, int | None]:
    """(trace id, parent span id) of a span."""
    return span.context.trace_id, span.parent.span_id if span.parent else None


def runs(traced: Traced) -> dict[str, list[str]]:
    """``traced.tree()`` cut into one tree per root span, by the root's name."""
    trees: dict[str, list[str]] = {}
    current: list[str] = []
    for line in traced.tree():
        if not line.startswith(" "):
            current = trees.setdefault(line.split(" [")[0], [])
        current.append(line)
    return trees


def untraced_state() -> tuple[object, bool]:
    """What a thread sees of tracing: agenttrace's scope, and whether an OTel span is current."""
    return current_scope(), trace.get_current_span().get_span_context().is_valid


# --- pools -----------------------------------------------------------------------------------


def test_pool_tasks_nest_under_the_turn_as_if_called_inline(traced: Traced) -> None:
    @agenttrace.agent("Inline")
    def inline() -> list[int]:
        with agenttrace.turn():
            return [fetch(0), *map(fetch, [1, 2])]

    workers: set[int] = set()

    @agenttrace.tool("fetch")
    def pooled_fetch(n: int) -> int:
        workers.add(threading.get_ident())
        return n * 10

    @agenttrace.agent("Pooled")
    def pooled() -> list[int]:
        # One worker: the tasks run in the order they were submitted, as inline.
        with agenttrace.turn(), ThreadPoolExecutor(1) as pool:
            first = pool.submit(pooled_fetch, 0).result(timeout=WAIT)
            return [first, *pool.map(pooled_fetch, [1, 2], timeout=WAIT)]

    assert inline() == pooled() == [0, 10, 20]
    assert workers and threading.get_ident() not in workers
    trees = runs(traced)
    assert (
        trees["invoke_agent Pooled"][1:]
        == trees["invoke_agent Inline"][1:]
        == [
            "  turn 1 [1]",
            "    execute_tool fetch [1.1]",
            "    execute_tool fetch [1.2]",
            "    execute_tool fetch [1.3]",
        ]
    )
    session = traced.one("invoke_agent Pooled")
    turn = [s for s in traced.by_name("turn 1") if s.context.trace_id == session.context.trace_id]
    fetches = [s for s in traced.by_name("execute_tool fetch") if ids(s)[0] == ids(session)[0]]
    assert len(fetches) == 3
    assert {ids(s) for s in fetches} == {(session.context.trace_id, turn[0].context.span_id)}
    assert {attrs(s)[sc.AGENT_ID] for s in fetches} == {attrs(session)[sc.AGENT_ID]}
    assert {attrs(s)[sc.TXN_ID] for s in fetches} == {attrs(session)[sc.TXN_ID]}


def test_concurrent_pool_tasks_share_the_turn_with_distinct_labels(
    traced: Traced, eager_switching: None
) -> None:
    barrier = threading.Barrier(4)

    def at_once(n: int) -> int:
        barrier.wait(timeout=WAIT)  # all four tools start together
        return fetch(n)

    @agenttrace.agent("Fan")
    def fan_out() -> list[int]:
        with agenttrace.turn(), ThreadPoolExecutor(4) as pool:
            return list(pool.map(at_once, range(4), timeout=WAIT))

    assert fan_out() == [0, 10, 20, 30]
    turn = traced.one("turn 1")
    fetches = traced.by_name("execute_tool fetch")
    assert {ids(s) for s in fetches} == {(turn.context.trace_id, turn.context.span_id)}
    assert sorted(attrs(s)[sc.PATH] for s in fetches) == ["1.1", "1.2", "1.3", "1.4"]


def test_tools_started_at_once_in_a_session_join_one_auto_turn_and_claim_calls(
    traced: Traced, eager_switching: None
) -> None:
    """No explicit turns. Eight tools started at once in pool threads join one auto turn, as
    they would inline; after an LLM call asking for eight tool calls, eight tools started at
    once join its turn, each claiming a different call. Run ten times: an unguarded auto turn
    loses this race about one run in four."""
    calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": "fetch", "arguments": "{}"}}
        for i in range(8)
    ]

    @agenttrace.llm(model="openai/gpt-4o-mini")
    def ask() -> dict[str, Any]:
        return {
            "model": "gpt-4o-mini",
            "choices": [
                {
                    "message": {"role": "assistant", "content": None, "tool_calls": calls},
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2},
        }

    @agenttrace.agent("Auto")
    def auto() -> None:
        with ThreadPoolExecutor(8) as pool:
            barrier = threading.Barrier(8)
            list(pool.map(lambda n: (barrier.wait(timeout=WAIT), fetch(n)), range(8)))
            ask()
            barrier = threading.Barrier(8)
            list(pool.map(lambda n: (barrier.wait(timeout=WAIT), fetch(n)), range(8)))

    for _ in range(10):
        traced.exporter.clear()
        auto()
        spans = traced.spans()
        turns = sorted(attrs(s)[sc.PATH] for s in spans if s.name.startswith("turn"))
        assert turns == ["1", "2"]
        fetches = [attrs(s) for s in spans if s.name == "execute_tool fetch"]
        assert sorted(a[sc.PATH] for a in fetches) == sorted(
            [f"1.{i}" for i in range(1, 9)] + [f"2.{i}" for i in range(2, 10)]
        )
        claimed = sorted(a[sc.GEN_AI_TOOL_CALL_ID] for a in fetches if a[sc.PATH][0] == "2")
        assert claimed == [f"call_{i}" for i in range(8)]


def test_run_in_executor_nests_under_the_turn(traced: Traced) -> None:
    @agenttrace.agent("Async")
    async def run() -> int:
        async with agenttrace.turn():
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(None, fetch, 4)  # the loop's default executor

    assert asyncio.run(run()) == 40
    assert traced.tree() == [
        "invoke_agent Async [0]",
        "  turn 1 [1]",
        "    execute_tool fetch [1.1]",
    ]


def test_a_failing_pool_task_raises_its_own_exception_and_fails_its_span(traced: Traced) -> None:
    class Refused(Exception):
        pass

    error = Refused("no")

    @agenttrace.tool
    def refuse() -> None:
        raise error

    @agenttrace.agent("Failing")
    def run() -> None:
        with agenttrace.turn(), ThreadPoolExecutor(1) as pool:
            pool.submit(refuse).result(timeout=WAIT)

    with pytest.raises(Refused) as raised:
        run()
    assert raised.value is error
    span = traced.one("execute_tool refuse")
    assert outcome(span) == "failed"
    assert ids(span) == (
        traced.one("turn 1").context.trace_id,
        traced.one("turn 1").context.span_id,
    )


# --- threads ---------------------------------------------------------------------------------


def test_thread_targets_subclasses_and_timers_nest_under_the_turn(traced: Traced) -> None:
    class Fetcher(threading.Thread):
        def run(self) -> None:  # a subclass's own run is carried too
            fetch(1)

    started: list[threading.Thread] = []

    @agenttrace.agent("Threads")
    def run() -> None:
        with agenttrace.turn():
            for thread in (
                threading.Thread(target=fetch, args=(0,)),
                Fetcher(),
                threading.Timer(0, fetch, args=(2,)),
            ):
                started.append(thread)
                thread.start()
                thread.join(WAIT)  # one after another: labels in start order, as inline

    run()
    assert traced.tree() == [
        "invoke_agent Threads [0]",
        "  turn 1 [1]",
        "    execute_tool fetch [1.1]",
        "    execute_tool fetch [1.2]",
        "    execute_tool fetch [1.3]",
    ]
    # A finished thread keeps no context: its run is its own again.
    assert not any(thread.is_alive() or "run" in vars(thread) for thread in started)
    assert Fetcher.run is vars(Fetcher)["run"]


def test_a_thread_started_twice_still_says_so(traced: Traced) -> None:
    @agenttrace.agent("Twice")
    def run() -> None:
        thread = threading.Thread(target=fetch, args=(1,))
        thread.start()
        thread.join(WAIT)
        with pytest.raises(RuntimeError, match="only be started once"):
            thread.start()
        assert "run" not in vars(thread)

    run()
    assert len(traced.by_name("execute_tool fetch")) == 1


# --- sub-agents ------------------------------------------------------------------------------


@agenttrace.agent("Researcher")
def researcher(topic: str) -> str:
    with agenttrace.turn():
        return f"{topic}: {fetch(len(topic))}"


def test_an_agent_run_in_a_pool_thread_is_a_sub_agent_of_the_submitting_op(
    traced: Traced,
) -> None:
    @agenttrace.tool
    def delegate(topic: str) -> str:
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(researcher, topic).result(timeout=WAIT)

    @agenttrace.agent("Manager")
    def manager() -> list[str]:
        with agenttrace.turn():
            first = delegate("tea")
            # Submitted from the turn itself: a hosting op is opened for it, as inline.
            with ThreadPoolExecutor(1) as pool:
                second = pool.submit(researcher, "cafe").result(timeout=WAIT)
        return [first, second]

    assert manager() == ["tea: 30", "cafe: 40"]
    assert traced.tree() == [
        "invoke_agent Manager [0]",
        "  turn 1 [1]",
        "    execute_tool delegate [1.1]",
        "      invoke_agent Researcher [1.1:1]",
        "        turn 1 [1.1.1]",
        "          execute_tool fetch [1.1.1.1]",
        "    execute_tool Researcher [1.2]",
        "      invoke_agent Researcher [1.2:1]",
        "        turn 1 [1.2.1]",
        "          execute_tool fetch [1.2.1.1]",
    ]
    root = attrs(traced.one("invoke_agent Manager"))
    for span in traced.by_name("invoke_agent Researcher"):
        sub = attrs(span)
        assert sub[sc.TXN_PARENT] == root[sc.TXN_ID] == sub[sc.TXN_ORIGIN]
        assert sub[sc.CALL_PATH] == "Manager/Researcher"
        assert sub[sc.INGRESS_SOURCE] == "sub-agent"
        assert sub[sc.GEN_AI_AGENT_ID] != root[sc.GEN_AI_AGENT_ID]
    assert attrs(traced.one("execute_tool delegate"))[sc.KIND] == "session"
    assert len({s.context.trace_id for s in traced.spans()}) == 1


def test_sub_agents_started_at_once_under_one_op_get_distinct_labels(
    traced: Traced, eager_switching: None
) -> None:
    barrier = threading.Barrier(4)

    def at_once(topic: str) -> str:
        barrier.wait(timeout=WAIT)
        return researcher(topic)

    @agenttrace.tool
    def survey() -> list[str]:
        with ThreadPoolExecutor(4) as pool:
            return list(pool.map(at_once, ["a", "bb", "ccc", "dddd"], timeout=WAIT))

    @agenttrace.agent("Surveyor")
    def run() -> list[str]:
        with agenttrace.turn():
            return survey()

    assert run() == ["a: 10", "bb: 20", "ccc: 30", "dddd: 40"]
    survey_span = traced.one("execute_tool survey")
    subs = traced.by_name("invoke_agent Researcher")
    assert {ids(s) for s in subs} == {(survey_span.context.trace_id, survey_span.context.span_id)}
    assert sorted(attrs(s)[sc.PATH] for s in subs) == ["1.1:1", "1.1:2", "1.1:3", "1.1:4"]
    fetch_paths = sorted(attrs(s)[sc.PATH] for s in traced.by_name("execute_tool fetch"))
    assert fetch_paths == ["1.1.1.1", "1.1:2.1.1", "1.1:3.1.1", "1.1:4.1.1"]


def saved_tree(traced: Traced) -> list[tuple[str, bool]]:
    """The session file's opTree as (path label, ended) in document order."""
    traced.handle.shutdown()  # writes the session file
    (path,) = Path(traced.handle.settings.sessions_dir).glob("*.json.gz")
    found: list[tuple[str, bool]] = []

    def walk(node: dict[str, Any]) -> None:
        found.append((node["path"], "endedAt" in node))
        for child in subtrees(node):
            walk(child)

    for run in read_session_file(path).runs:
        walk(run)
    return found


def test_work_that_outlives_its_turn_is_saved_in_that_turn(traced: Traced) -> None:
    """A pool task still running when its turn ends, and one that only starts then, stay in
    the turn they were submitted in, in the spans and in the saved opTree."""
    running, finish, go, late_done = (threading.Event() for _ in range(4))

    @agenttrace.tool
    def slow() -> str:
        running.set()
        assert finish.wait(WAIT)
        return "slow"

    @agenttrace.tool
    def late() -> str:
        return "late"

    def late_task() -> None:
        assert go.wait(WAIT)
        late()
        late_done.set()

    @agenttrace.agent("Outlived")
    def run() -> None:
        with ThreadPoolExecutor(2) as pool:
            with agenttrace.turn():
                slow_result = pool.submit(slow)
                assert running.wait(WAIT)
                pool.submit(late_task)
            with agenttrace.turn():  # turn 1 has ended; its tasks go on
                go.set()
                assert late_done.wait(WAIT)
                fetch(1)
                finish.set()
                assert slow_result.result(timeout=WAIT) == "slow"

    run()
    assert traced.tree() == [
        "invoke_agent Outlived [0]",
        "  turn 1 [1]",
        "    execute_tool slow [1.1]",
        "    execute_tool late [1.2]",
        "  turn 2 [2]",
        "    execute_tool fetch [2.1]",
    ]
    assert saved_tree(traced) == [
        ("0", True),
        ("1", True),
        ("1.1", True),
        ("1.2", True),
        ("2", True),
        ("2.1", True),
    ]


def left_running(running: threading.Event, finish: threading.Event) -> threading.Thread:
    """An agent run that leaves a tool running in a thread, started (``running``) before the
    run ends; once ``finish`` is set, the tool runs a sub-agent and ends. The thread."""

    @agenttrace.agent("Helper")
    def helper() -> int:
        return fetch(2)

    @agenttrace.tool
    def background() -> int:
        running.set()
        assert finish.wait(WAIT)
        return helper()

    @agenttrace.agent("Leaver")
    def run() -> threading.Thread:
        with agenttrace.turn():
            worker = threading.Thread(target=background)
            worker.start()
            assert running.wait(WAIT)  # the tool has started: it ends after the run
        return worker

    return run()


def test_work_that_outlives_its_run_is_saved_in_that_run(traced: Traced) -> None:
    """A tool a run left running in a thread, and the sub-agent it runs after the run's end,
    land in the run's saved opTree ended, as in the spans: a late record of a run still
    reaches its session file (the session file read alone, not merged with the stream)."""
    finish = threading.Event()
    worker = left_running(threading.Event(), finish)
    finish.set()
    worker.join(WAIT)
    assert traced.tree() == [
        "invoke_agent Leaver [0]",
        "  turn 1 [1]",
        "    execute_tool background [1.1]",
        "      invoke_agent Helper [1.1:1]",
        "        turn 1 [1.1.1]",
        "          execute_tool fetch [1.1.1.1]",
    ]
    assert saved_tree(traced) == [
        ("0", True),
        ("1", True),
        ("1.1", True),
        ("1.1:1", True),
        ("1.1.1", True),
        ("1.1.1.1", True),
    ]


def test_a_file_written_before_the_late_work_ended_gets_it_from_the_stream(
    traced: Traced,
) -> None:
    """A session file written when the run's root had ended, its tool still running, and no
    write after it (as if the process were killed then): reading it with its stream gives the
    tool's end and the sub-agent's op, which only the stream has."""
    finish = threading.Event()
    worker = left_running(threading.Event(), finish)
    traced.handle.force_flush()
    (path,) = Path(traced.handle.settings.sessions_dir).glob("*.json.gz")
    early = path.read_bytes()
    (run,) = read_session_file(path).runs
    assert "endedAt" in run and "endedAt" not in run["turns"][0]["ops"][0]
    finish.set()
    worker.join(WAIT)
    traced.handle.force_flush()  # the stream has what ended since
    path.write_bytes(early)

    (run,) = load_fullest(path).runs
    (tool,) = run["turns"][0]["ops"]
    assert (tool["path"], tool["name"], tool["status"]) == ("1.1", "background", "ok")
    helper = tool["childSession"]
    assert (helper["path"], helper["agentName"]) == ("1.1:1", "Helper")
    (fetched,) = helper["turns"][0]["ops"]
    assert (fetched["path"], fetched["name"], fetched["status"]) == ("1.1.1.1", "fetch", "ok")


# --- reuse and leaks -------------------------------------------------------------------------


def test_reused_pool_threads_give_each_task_its_own_context(traced: Traced) -> None:
    """One worker thread, started inside run A's turn, serves run A, run B, then untraced code:
    each task sees the scope that submitted it, and the last sees none."""
    pool = ThreadPoolExecutor(1)
    workers: list[int] = []

    @agenttrace.tool("fetch")
    def where(n: int) -> int:
        workers.append(threading.get_ident())
        return n

    @agenttrace.agent
    def run_a() -> int:
        with agenttrace.turn():
            return pool.submit(where, 1).result(timeout=WAIT)

    @agenttrace.agent
    def run_b() -> int:
        with agenttrace.turn():
            return pool.submit(where, 2).result(timeout=WAIT)

    try:
        assert (run_a(), run_b()) == (1, 2)
        assert pool.submit(untraced_state).result(timeout=WAIT) == (None, False)
        assert pool.submit(where, 3).result(timeout=WAIT) == 3  # outside: a run of its own
    finally:
        pool.shutdown()
    assert len(set(workers)) == 1
    fetches = traced.by_name("execute_tool fetch")
    assert [attrs(s)[sc.PATH] for s in fetches] == ["1.1", "1.1", "1.1"]
    # Each under the turn of the run that submitted it; the untraced one in an implicit run.
    agents = [attrs(parent_of(traced, parent_of(traced, s)))[sc.GEN_AI_AGENT_NAME] for s in fetches]
    assert agents == ["run_a", "run_b", "agenttrace"]
    assert len({s.context.trace_id for s in fetches}) == 3


def parent_of(traced: Traced, child: ReadableSpan) -> ReadableSpan:
    """The span that is ``child``'s parent."""
    assert child.parent is not None
    (parent,) = [s for s in traced.spans() if s.context.span_id == child.parent.span_id]
    return parent


def test_no_context_is_left_behind_after_a_task(traced: Traced) -> None:
    pool = ThreadPoolExecutor(1)
    try:

        @agenttrace.agent("Leaky")
        def run() -> tuple[object, bool]:
            with agenttrace.turn():
                inside = pool.submit(untraced_state).result(timeout=WAIT)
                assert inside[0] is not None and inside[1]
                return inside

        run()
        # The same worker, right after: nothing of the run's context is left in it.
        assert pool.submit(untraced_state).result(timeout=WAIT) == (None, False)
    finally:
        pool.shutdown()
    # And nothing left in the thread that submitted: the run ended, so did its scope.
    assert untraced_state() == (None, False)


def test_agenttraces_own_worker_started_inside_a_run_keeps_no_context(traced: Traced) -> None:
    """A background thread agenttrace starts on demand (as after a fork) inside a run must not
    live on in that run's scope."""
    seen: list[tuple[object, bool]] = []
    done = threading.Event()
    worker = Worker(lambda item: (seen.append(untraced_state()), done.set()))

    @agenttrace.agent("Starter")
    def run() -> None:
        with agenttrace.turn():
            worker.put("first")  # starts the thread here

    try:
        run()
        assert done.wait(WAIT)
        assert seen == [(None, False)]
    finally:
        worker.stop(WAIT)


# --- switching it off ------------------------------------------------------------------------


def bare_threads_run() -> None:
    @agenttrace.agent("Parent")
    def run() -> None:
        with agenttrace.turn():
            thread = threading.Thread(target=fetch, args=(1,))
            thread.start()
            thread.join(WAIT)
            with ThreadPoolExecutor(1) as pool:
                pool.submit(fetch, 2).result(timeout=WAIT)

    run()


def assert_each_thread_started_its_own_trace(spans: list[ReadableSpan]) -> None:
    by_name: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    (parent,) = by_name["invoke_agent Parent"]
    fetches = by_name["execute_tool fetch"]
    assert len(fetches) == 2
    # Not carried: each tool is an implicit run of its own, in a trace of its own.
    assert len(by_name["invoke_agent agenttrace"]) == 2
    assert len({s.context.trace_id for s in [parent, *fetches]}) == 3
    assert [attrs(s)[sc.PATH] for s in fetches] == ["1.1", "1.1"]


@pytest.mark.init(propagate_threads=False)
def test_switched_off_threads_start_their_own_traces(traced: Traced) -> None:
    assert not ThreadContextInstrumentor().is_instrumented
    bare_threads_run()
    assert_each_thread_started_its_own_trace(traced.spans())


def test_the_environment_switches_it_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings.resolve(env={}).propagate_threads is True
    assert (
        Settings.resolve(env={"AGENTTRACE_PROPAGATE_THREADS": "false"}).propagate_threads is False
    )
    assert Settings.resolve(
        env={"AGENTTRACE_PROPAGATE_THREADS": "false"}, propagate_threads=True
    ).propagate_threads

    monkeypatch.setenv("AGENTTRACE_PROPAGATE_THREADS", "false")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agenttrace.use_session(None)
    handle = agenttrace.init(
        tracer_provider=provider,
        sessions_dir=tmp_path / "sessions",
        billing_file=tmp_path / "accounting.jsonl",
    )
    try:
        assert not ThreadContextInstrumentor().is_instrumented
        bare_threads_run()
        handle.force_flush()
        assert_each_thread_started_its_own_trace(list(exporter.get_finished_spans()))
    finally:
        handle.shutdown()
        provider.shutdown()


def is_wrapped(owner: type, name: str) -> bool:
    return hasattr(vars(owner)[name], "__wrapped__")


def test_shutdown_puts_threads_back_and_leaves_a_users_instrumentation_alone(
    traced: Traced, tmp_path: Path
) -> None:
    assert is_wrapped(threading.Thread, "start") and is_wrapped(ThreadPoolExecutor, "submit")
    traced.handle.shutdown()
    assert not is_wrapped(threading.Thread, "start")
    assert not is_wrapped(ThreadPoolExecutor, "submit")

    # Switched on by the user before init: init's shutdown leaves it on.
    instrumentor = ThreadContextInstrumentor()
    instrumentor.instrument()
    try:
        handle = agenttrace.init(
            tracer_provider=traced.provider,
            sessions_dir=tmp_path / "again",
            billing_file=tmp_path / "again.jsonl",
        )
        handle.shutdown()
        assert instrumentor.is_instrumented and is_wrapped(threading.Thread, "start")
    finally:
        instrumentor.uninstrument()
    assert not is_wrapped(threading.Thread, "start")


# --- beside OpenTelemetry's own threading instrumentation ------------------------------------


@pytest.mark.parametrize(
    ("on", "off"),
    [
        (["theirs", "ours"], ["ours", "theirs"]),
        (["ours", "theirs"], ["theirs", "ours"]),
        # Ours off while theirs still wraps it: ours stays inside theirs, passing through.
        # (Theirs off first while ours wraps it is not tested: their unwrap takes off whatever
        # wrapper is outermost, ours, and leaves their own in place.)
        (["ours", "theirs"], ["ours", "theirs"]),
    ],
    ids=["theirs-on-first", "ours-on-first", "ours-off-first"],
)
def test_opentelemetrys_threading_instrumentation_composes_with_ours(
    traced: Traced, on: list[str], off: list[str]
) -> None:
    """Both on, in either order: spans nest once and right; both off: nothing carried."""
    otel_threading = pytest.importorskip(
        "opentelemetry.instrumentation.threading",
        reason="opentelemetry-instrumentation-threading is not installed (its 0.66b1 pins "
        "opentelemetry-instrumentation 0.66b1; the lock has 0.66b2)",
    )
    instrumentors = {
        "theirs": otel_threading.ThreadingInstrumentor(),
        "ours": ThreadContextInstrumentor(),
    }
    traced.handle.shutdown()  # start from Python's own threading, then switch both on in order
    for name in on:
        instrumentors[name].instrument()
    handle = agenttrace.init(
        tracer_provider=traced.provider,
        sessions_dir=traced.handle.settings.sessions_dir,
        billing_file=traced.handle.settings.billing_file,
    )
    try:

        class Fetcher(threading.Thread):
            def run(self) -> None:
                fetch(2)

        @agenttrace.agent("Both")
        def run() -> None:
            with agenttrace.turn():
                with ThreadPoolExecutor(1) as pool:
                    pool.submit(fetch, 0).result(timeout=WAIT)
                for thread in (threading.Thread(target=fetch, args=(1,)), Fetcher()):
                    thread.start()
                    thread.join(WAIT)

        run()
        assert traced.tree() == [
            "invoke_agent Both [0]",
            "  turn 1 [1]",
            "    execute_tool fetch [1.1]",
            "    execute_tool fetch [1.2]",
            "    execute_tool fetch [1.3]",
        ]
    finally:
        handle.shutdown()  # leaves ours on: init did not switch it on
        for name in off:
            instrumentors[name].uninstrument()
    if off[0] != "ours":
        assert not is_wrapped(ThreadPoolExecutor, "submit")
        assert not is_wrapped(threading.Thread, "start")
    seen: list[tuple[object, bool]] = []

    @agenttrace.agent("Off")
    def off_run() -> None:
        thread = threading.Thread(target=lambda: seen.append(untraced_state()))
        thread.start()
        thread.join(WAIT)
        with ThreadPoolExecutor(1) as pool:
            seen.append(pool.submit(untraced_state).result(timeout=WAIT))

    off_run()
    assert seen == [(None, False), (None, False)]
    # On again: one layer of ours, not two.
    ThreadContextInstrumentor().instrument()
    try:
        layers = 0
        method: Any = vars(ThreadPoolExecutor)["submit"]
        while hasattr(method, "__wrapped__"):
            layers += 1
            method = method.__wrapped__
        assert layers == 1
    finally:
        ThreadContextInstrumentor().uninstrument()
