"""Misuse of the public API is a clear error at once, at the line that made it (issue 31).

Every case below misuses one public entry point on the line marked ``# MISTAKE``: each must
raise the ``TypeError`` or ``ValueError`` it names, at that call (the traceback's last frame
outside agenttrace is that line, not a wrapper's later call), with a message naming the mistake,
whether agenttrace records or is disabled. Then the forms that are no mistake (generators,
coroutines, methods, staticmethods, classmethods, callable objects) are shown to still work.
"""

from __future__ import annotations

import asyncio
import functools
import linecache
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import agenttrace
from agenttrace._internal import errors as internal_errors
from agenttrace._internal.runtime import runtime

from .conftest import Traced

PACKAGE = Path(agenttrace.__file__).resolve().parent
MARK = "# MISTAKE"


class Planner:
    """An agent class the cases decorate, instrument or misuse."""

    name = "Planner"

    def run(self, task: str) -> str:
        return task


# --- the cases: each misuses the API once, on the line marked MISTAKE ---------------------------


def agent_on_a_class() -> None:
    @agenttrace.agent  # MISTAKE
    class Agent:
        pass


def agent_called_on_a_class() -> None:
    @agenttrace.agent(name="planner")  # MISTAKE
    class Agent:
        pass


def tool_on_a_class() -> None:
    @agenttrace.tool  # MISTAKE
    class Search:
        def __call__(self, query: str) -> str:
            return query


def turn_on_a_class() -> None:
    @agenttrace.turn  # MISTAKE
    class Step:
        pass


def llm_on_a_class() -> None:
    @agenttrace.llm(model="gpt-x")  # MISTAKE
    class Client:
        pass


def tool_on_a_property() -> None:
    class Search:
        @agenttrace.tool  # MISTAKE
        @property
        def results(self) -> list[str]:
            return []


def tool_on_a_string() -> None:
    agenttrace.tool("search")("not a function")  # MISTAKE


def tool_in_a_with_block_with_arguments_not_a_mapping() -> None:
    with agenttrace.tool("fetch", arguments="not a mapping"):  # MISTAKE
        pass


def record_response_on_a_tool_block() -> None:
    with agenttrace.tool("fetch", arguments={"url": "u"}) as call:
        call.record_response({"choices": []})  # MISTAKE


def set_result_on_an_llm_block() -> None:
    with agenttrace.llm("gpt-x") as attempt:
        attempt.set_result("page")  # MISTAKE


def set_result_on_an_agent_block() -> None:
    with agenttrace.agent("Planner") as run:
        run.set_result("done")  # MISTAKE


def set_attribute_with_a_key_not_a_string() -> None:
    with agenttrace.tool("fetch", arguments={}) as call:
        call.set_attribute(5, "x")  # type: ignore[arg-type]  # MISTAKE


def set_attribute_with_a_dict() -> None:
    with agenttrace.tool("fetch", arguments={}) as call:
        call.set_attribute("page", {"url": "u"})  # type: ignore[arg-type]  # MISTAKE


class Case:
    """One misuse: what it raises, and what the message must say."""

    def __init__(
        self, name: str, misuse: Callable[[], Any], error: type[Exception], *says: str
    ) -> None:
        self.name, self.misuse, self.error, self.says = name, misuse, error, says

    def __repr__(self) -> str:
        return self.name


CASES = [
    # Decorators on what they cannot decorate: refused with what to do instead.
    Case(
        "agent-on-class",
        agent_on_a_class,
        TypeError,
        "@agenttrace.agent decorates a function",
        "not the class",
        "Agent",
        "decorate its method",
        "agenttrace.instrument_agent(",
    ),
    Case(
        "agent-called-on-class",
        agent_called_on_a_class,
        TypeError,
        "not the class",
        "instrument_agent",
    ),
    Case(
        "tool-on-class",
        tool_on_a_class,
        TypeError,
        "@agenttrace.tool decorates a function",
        "not the class",
        "Search",
        "decorate its method",
        "agenttrace.instrument_tool(",
    ),
    Case(
        "turn-on-class",
        turn_on_a_class,
        TypeError,
        "@agenttrace.turn",
        "not the class Step",
    ),
    Case(
        "llm-on-class",
        llm_on_a_class,
        TypeError,
        "@agenttrace.llm",
        "not the class Client",
    ),
    Case(
        "tool-on-property",
        tool_on_a_property,
        TypeError,
        "not a property",
        "below @property",
    ),
    Case(
        "tool-on-string",
        tool_on_a_string,
        TypeError,
        "@agenttrace.tool",
        "must be a function or method",
        "'not a function'",
    ),
    # Decorator options: the parameter, what it got, what it takes.
    Case(
        "tool-name-int",
        lambda: agenttrace.tool(name=5),  # MISTAKE
        TypeError,
        "agenttrace.tool: name must be a string or a callable of the instance",
        "5 (int)",
    ),
    Case(
        "tool-positional-int",
        lambda: agenttrace.tool(5),  # MISTAKE
        TypeError,
        "name must be",
        "5 (int)",
    ),
    Case(
        "tool-name-empty",
        lambda: agenttrace.tool(""),  # MISTAKE
        ValueError,
        "name must be a non-empty string",
        "''",
    ),
    Case(
        "tool-name-a-class",
        lambda: agenttrace.tool(name=Planner),  # MISTAKE
        TypeError,
        "name must be",
        "the class Planner",
    ),
    Case(
        "tool-name-twice",
        lambda: agenttrace.tool("a", name="b"),  # MISTAKE
        TypeError,
        "name given twice",
        "'a'",
        "'b'",
    ),
    Case(
        "tool-arguments-str",
        lambda: agenttrace.tool(arguments="not a mapping"),  # MISTAKE
        TypeError,
        "agenttrace.tool: arguments must be a mapping",
        "'not a mapping'",
    ),
    Case(
        "tool-arguments-in-with",
        tool_in_a_with_block_with_arguments_not_a_mapping,
        TypeError,
        "arguments must be a mapping",
        "'not a mapping'",
    ),
    Case(
        "tool-effect",
        lambda: agenttrace.tool(effect="dangerous"),  # MISTAKE
        ValueError,
        "effect must be one of pure, read, idempotent, effect",
        "'dangerous'",
    ),
    Case(
        "tool-verify",
        lambda: agenttrace.tool(verify=5),  # MISTAKE
        TypeError,
        "verify must be a callable",
        "5 (int)",
    ),
    Case(
        "tool-ok-exceptions-instance",
        lambda: agenttrace.tool(ok_exceptions=ValueError()),  # MISTAKE
        TypeError,
        "agenttrace.tool: ok_exceptions takes exception classes",
        "ValueError()",
    ),
    Case(
        "tool-category",
        lambda: agenttrace.tool(category=""),  # MISTAKE
        ValueError,
        "category '' is not a name",
    ),
    Case(
        "tool-provider",
        lambda: agenttrace.tool(provider=7),  # MISTAKE
        ValueError,
        "provider 7 is not a name",
    ),
    Case(
        "agent-name-int",
        lambda: agenttrace.agent(name=5),  # MISTAKE
        TypeError,
        "agenttrace.agent: name must be a string",
        "5 (int)",
    ),
    Case(
        "agent-id-float",
        lambda: agenttrace.agent(agent_id=3.5),  # MISTAKE
        TypeError,
        "agent_id must be",
        "3.5 (float)",
    ),
    Case(
        "agent-model-list",
        lambda: agenttrace.agent(model=["gpt"]),  # MISTAKE
        TypeError,
        "model must be",
        "['gpt'] (list)",
    ),
    Case(
        "agent-ingress-str",
        lambda: agenttrace.agent("a", ingress="cli"),  # MISTAKE
        TypeError,
        "ingress must be a mapping",
        "'cli'",
    ),
    Case(
        "agent-role",
        lambda: agenttrace.agent("a", role="tester"),  # MISTAKE
        ValueError,
        "role 'tester' is not one of architect, developer, reviewer",
    ),
    Case(
        "agent-role-int",
        lambda: agenttrace.agent("a", role=5),  # MISTAKE
        TypeError,
        "role must be one of architect, developer, reviewer",
        "5 (int)",
    ),
    Case(
        "agent-ok-exceptions-list",
        lambda: agenttrace.agent(ok_exceptions=[KeyError]),  # MISTAKE
        TypeError,
        "ok_exceptions takes exception classes (or a tuple of them)",
        "[<class",
    ),
    Case(
        "run-name-int",
        lambda: agenttrace.run(name=5),  # MISTAKE
        TypeError,
        "agenttrace.run: name must be",
        "5 (int)",
    ),
    Case(
        "run-name-twice",
        lambda: agenttrace.run("a", name="b"),  # MISTAKE
        TypeError,
        "agenttrace.run: name given twice",
    ),
    Case(
        "llm-model-int",
        lambda: agenttrace.llm(model=4),  # MISTAKE
        TypeError,
        "agenttrace.llm: model must be a string",
        "4 (int)",
    ),
    Case(
        "llm-provider-empty",
        lambda: agenttrace.llm("m", provider=" "),  # MISTAKE
        ValueError,
        "provider must be a non-empty string",
    ),
    Case(
        "llm-model-twice",
        lambda: agenttrace.llm("m", model="n"),  # MISTAKE
        TypeError,
        "model given twice",
    ),
    Case(
        "turn-named",
        lambda: agenttrace.turn("plan"),  # MISTAKE
        TypeError,
        "agenttrace.turn",
        "'plan'",
        "a turn takes no name",
    ),
    # With-block handles: each takes what its block is for.
    Case(
        "record-response-on-tool",
        record_response_on_a_tool_block,
        TypeError,
        "Handle.record_response takes an LLM response",
        "with agenttrace.tool(...)",
    ),
    Case(
        "set-result-on-llm",
        set_result_on_an_llm_block,
        TypeError,
        "Handle.set_result takes a tool's result",
        "with agenttrace.llm(...)",
    ),
    Case(
        "set-result-on-agent",
        set_result_on_an_agent_block,
        TypeError,
        "Handle.set_result",
        "with agenttrace.agent(...)",
    ),
    Case(
        "set-attribute-key",
        set_attribute_with_a_key_not_a_string,
        TypeError,
        "set_attribute: key must be a string",
        "5 (int)",
    ),
    Case(
        "set-attribute-dict",
        set_attribute_with_a_dict,
        TypeError,
        "set_attribute: value must be a str, bool, int or float",
        "{'url': 'u'} (dict)",
    ),
    # Logs.
    Case(
        "log-bogus",
        lambda: agenttrace.log("BOGUS", "x"),  # MISTAKE
        ValueError,
        "agenttrace.log: level must be one of VRB WRN ERR TRC THK FIN",
        "'BOGUS'",
    ),
    Case(
        "log-level-int",
        lambda: agenttrace.log(3, "x"),  # MISTAKE
        TypeError,
        "level must be one of",
        "3 (int)",
    ),
    Case(
        "log-message-dict",
        lambda: agenttrace.log("WRN", {"free": 1}),  # MISTAKE
        TypeError,
        "agenttrace.log: message must be a string",
        "(dict)",
    ),
    Case(
        "thinking-bytes",
        lambda: agenttrace.thinking(b"hmm"),  # MISTAKE
        TypeError,
        "agenttrace.thinking: text must be a string",
        "b'hmm' (bytes)",
    ),
    # init.
    Case(
        "init-service-name",
        lambda: agenttrace.init(service_name=5),  # MISTAKE
        TypeError,
        "agenttrace.init: service_name must be a string",
        "5 (int)",
    ),
    Case(
        "init-console",
        lambda: agenttrace.init(console="loud"),  # MISTAKE
        ValueError,
        "console must be one of quiet, verbose, trace",
        "'loud'",
    ),
    Case(
        "init-flag-str",
        lambda: agenttrace.init(capture_content="yes"),  # MISTAKE
        TypeError,
        "capture_content must be True or False",
        "'yes'",
    ),
    Case(
        "init-journal-str",
        lambda: agenttrace.init(journal="false"),  # MISTAKE
        TypeError,
        "journal must be True or False",
        "'false'",
    ),
    Case(
        "init-payload-zero",
        lambda: agenttrace.init(max_payload_bytes=0),  # MISTAKE
        ValueError,
        "max_payload_bytes must be a whole number >= 1",
        "0 (int)",
    ),
    Case(
        "init-done-agents-negative",
        lambda: agenttrace.init(done_agents_kept=-1),  # MISTAKE
        ValueError,
        "done_agents_kept must be a whole number >= 0",
        "-1 (int)",
    ),
    Case(
        "init-payload-str",
        lambda: agenttrace.init(max_payload_bytes="16k"),  # MISTAKE
        TypeError,
        "max_payload_bytes must be a whole number",
        "'16k'",
    ),
    Case(
        "init-sessions-dir",
        lambda: agenttrace.init(sessions_dir=5),  # MISTAKE
        TypeError,
        "sessions_dir must be a path",
        "5 (int)",
    ),
    Case(
        "init-std008-dir",
        lambda: agenttrace.init(std008_dir=["out"]),  # MISTAKE
        TypeError,
        "std008_dir must be a path",
        "['out'] (list)",
    ),
    Case(
        "init-provider",
        lambda: agenttrace.init(tracer_provider="jaeger"),  # MISTAKE
        TypeError,
        "tracer_provider must be an opentelemetry.sdk.trace.TracerProvider",
        "'jaeger'",
    ),
    Case(
        "init-protocol",
        lambda: agenttrace.init(protocol="ftp"),  # MISTAKE
        ValueError,
        "protocol must be one of http/protobuf, http, grpc",
        "'ftp'",
    ),
    Case(
        "init-instrument-unknown",
        lambda: agenttrace.init(instrument=["nope"]),  # MISTAKE
        ValueError,
        "cannot instrument 'nope'",
    ),
    Case(
        "init-instrument-int",
        lambda: agenttrace.init(instrument=[5]),  # MISTAKE
        TypeError,
        "instrument[0] must be a library name",
        "5 (int)",
    ),
    Case(
        "init-timeout",
        lambda: agenttrace.init(shutdown_timeout=-1),  # MISTAKE
        ValueError,
        "shutdown_timeout must be a number >= 0",
        "-1",
    ),
    Case(
        "init-stream",
        lambda: agenttrace.init(console_stream=5),  # MISTAKE
        TypeError,
        "console_stream must be a text stream",
        "5 (int)",
    ),
    Case(
        "init-tool-effects",
        lambda: agenttrace.init(tool_effects={"x": "bad"}),  # MISTAKE
        ValueError,
        "tool_effects",
        "'bad'",
    ),
    # Sessions.
    Case(
        "load-session-int",
        lambda: agenttrace.load_session(5),  # MISTAKE
        TypeError,
        "agenttrace.load_session: session_file must be a path",
        "5 (int)",
    ),
    Case(
        "load-session-policy",
        lambda: agenttrace.load_session("s", policy={"effect": "yolo"}),  # MISTAKE
        ValueError,
        "policy: effect: 'yolo' is not one of",
    ),
    Case(
        "load-session-unanswered",
        lambda: agenttrace.load_session("s", unanswered_tool_calls="drop"),  # MISTAKE
        ValueError,
        "unanswered_tool_calls must be one of reply, keep",
        "'drop'",
    ),
    Case(
        "load-session-factory",
        lambda: agenttrace.load_session("s", agent_factory="Agent"),  # MISTAKE
        TypeError,
        "agent_factory must be a callable",
        "'Agent'",
    ),
    Case(
        "resume-empty",
        lambda: agenttrace.resume(""),  # MISTAKE
        ValueError,
        "agenttrace.resume: path_or_id must be a non-empty string",
    ),
    Case(
        "resume-policy-str",
        lambda: agenttrace.resume("s", policy="retry"),  # MISTAKE
        TypeError,
        "policy must be a mapping",
        "'retry'",
    ),
    Case(
        "resume-force-str",
        lambda: agenttrace.resume("s", force="yes"),  # MISTAKE
        TypeError,
        "force must be True or False",
        "'yes'",
    ),
    Case(
        "new-session-int",
        lambda: agenttrace.new_session(7),  # MISTAKE
        TypeError,
        "agenttrace.new_session: session_id must be a string",
        "7 (int)",
    ),
    Case(
        "use-session-str",
        lambda: agenttrace.use_session("s1"),  # MISTAKE
        TypeError,
        "agenttrace.use_session: session must be an agenttrace.Session",
        "'s1'",
    ),
    # The sub-agent API (docs/responsibility.md), classes, threads, the opTree.
    Case(
        "agent-class-attribute",
        lambda: agenttrace.agent_class(name=5),  # MISTAKE
        TypeError,
        "agenttrace.agent_class: name must be the name of an attribute",
        "5 (int)",
    ),
    Case(
        "agent-class-on-function",
        lambda: agenttrace.agent_class(print),  # MISTAKE
        TypeError,
        "@agenttrace.agent_class",
        "must be a class",
        "@agenttrace.agent",
    ),
    Case(
        "hears-role",
        lambda: agenttrace.hears(role=5),  # MISTAKE
        TypeError,
        "agenttrace.hears: role must be a string",
        "5 (int)",
    ),
    Case(
        "hears-on-class",
        lambda: agenttrace.hears(Planner),  # MISTAKE
        TypeError,
        "@agenttrace.hears decorates a function or method, not the class Planner",
    ),
    Case(
        "piece-of-text-int",
        lambda: agenttrace.piece_of_text(5),  # MISTAKE
        TypeError,
        "agenttrace.piece_of_text: content must be a string",
        "5 (int)",
    ),
    Case(
        "instrument-agent-name",
        lambda: agenttrace.instrument_agent(Planner, name=5),  # MISTAKE
        TypeError,
        "agenttrace.instrument_agent: name must be",
        "5 (int)",
    ),
    Case(
        "instrument-tool-arguments",
        lambda: agenttrace.instrument_tool(Planner, call="run", arguments="x"),  # MISTAKE
        TypeError,
        "agenttrace.instrument_tool: arguments must be a mapping",
        "'x'",
    ),
    Case(
        "instrument-agent-instance",
        lambda: agenttrace.instrument_agent(Planner()),  # MISTAKE
        TypeError,
        "instrument_agent takes a class",
    ),
    Case(
        "instrument-agent-run-int",
        lambda: agenttrace.instrument_agent(Planner, run=5),  # MISTAKE
        TypeError,
        "agenttrace.instrument_agent: run must be a method name or a list of them",
        "5 (int)",
    ),
    Case(
        "uninstrument-tool-instance",
        lambda: agenttrace.uninstrument_tool(Planner()),  # MISTAKE
        TypeError,
        "agenttrace.uninstrument_tool: cls must be a class",
        "(Planner)",
    ),
    Case(
        "tracing-instrument-int",
        lambda: agenttrace.init().instrument(5),  # MISTAKE
        TypeError,
        "Tracing.instrument: library must be a string",
        "5 (int)",
    ),
    Case(
        "bind-context",
        lambda: agenttrace.bind_context("work"),  # MISTAKE
        TypeError,
        "agenttrace.bind_context: fn must be a callable",
        "'work'",
    ),
    Case(
        "on-optree-callback",
        lambda: agenttrace.on_optree(None),  # MISTAKE
        TypeError,
        "agenttrace.on_optree: callback must be a callable",
        "None",
    ),
    Case(
        "on-optree-interval",
        lambda: agenttrace.on_optree(print, min_interval=-1),  # MISTAKE
        ValueError,
        "min_interval must be a number >= 0",
        "-1 (int)",
    ),
]


@pytest.fixture(params=["recording", "disabled"])
def mode(request: pytest.FixtureRequest, traced: Traced, monkeypatch: pytest.MonkeyPatch) -> str:
    """agenttrace recording, or disabled (``OTEL_SDK_DISABLED``): a misuse raises either way."""
    if request.param == "disabled":
        monkeypatch.setattr(runtime, "disabled", True)
    return str(request.param)


def _last_user_line(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    """The source line of the traceback's last frame outside agenttrace's package."""
    outside = [entry for entry in excinfo.traceback if PACKAGE not in Path(str(entry.path)).parents]
    assert outside, "the traceback has no frame outside agenttrace"
    last = outside[-1]
    return linecache.getline(str(last.path), last.lineno + 1)


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_a_misuse_raises_at_the_line_that_made_it(case: Case, mode: str) -> None:
    with pytest.raises(case.error) as excinfo:
        case.misuse()
    assert type(excinfo.value) is case.error, excinfo.value
    message = str(excinfo.value)
    for fragment in case.says:
        assert fragment in message, (fragment, message)
    assert "\n" not in message  # one line
    assert "internal error" not in message
    assert MARK in _last_user_line(excinfo), excinfo.getrepr(style="short")


def test_a_refused_instrument_tool_leaves_the_class_as_it_was(traced: Traced) -> None:
    run = Planner.run
    with pytest.raises(TypeError):
        agenttrace.instrument_tool(Planner, call="run", verify="yes")
    assert Planner.run is run


# --- what is no mistake still works ------------------------------------------------------------


class Agent:
    """An agent whose methods are each kind of callable the decorators take."""

    name = "Scout"

    @agenttrace.agent
    def run(self, task: str) -> str:
        return self.search(task) + self.static(task) + self.klass(task)

    @agenttrace.tool
    def search(self, query: str) -> str:
        return f"search:{query};"

    @staticmethod
    @agenttrace.tool
    def static(query: str) -> str:
        return f"static:{query};"

    @agenttrace.tool
    @classmethod
    def klass(cls, query: str) -> str:
        return f"{cls.__name__}:{query}"


def test_methods_staticmethods_and_classmethods_still_work(traced: Traced) -> None:
    assert Agent().run("cafe") == "search:cafe;static:cafe;Agent:cafe"
    assert sorted(span.name for span in traced.ours()) == [
        "execute_tool klass",
        "execute_tool search",
        "execute_tool static",
        "invoke_agent Scout",
        "turn 1",
    ]


def test_generators_and_coroutines_still_work(traced: Traced) -> None:
    @agenttrace.tool
    def pages(n: int) -> Iterator[int]:
        yield from range(n)

    @agenttrace.tool
    async def fetch(url: str) -> str:
        return url.upper()

    @agenttrace.tool
    async def chunks(n: int) -> AsyncIterator[int]:
        for i in range(n):
            yield i

    @agenttrace.agent
    async def main() -> tuple[list[int], str, list[int]]:
        return list(pages(3)), await fetch("u"), [i async for i in chunks(2)]

    assert asyncio.run(main()) == ([0, 1, 2], "U", [0, 1])
    names = [span.name for span in traced.ours()]
    for name in ("execute_tool pages", "execute_tool fetch", "execute_tool chunks"):
        assert name in names


def test_callable_objects_and_partials_are_decorated_under_their_class_name(
    traced: Traced,
) -> None:
    class Lookup:
        def __call__(self, key: str) -> str:
            return key * 2

    def join(a: str, b: str) -> str:
        return a + b

    looked = agenttrace.tool(Lookup())
    joined = agenttrace.tool(functools.partial(join, "x"))
    with agenttrace.agent("Solo"):
        assert looked("k") == "kk"
        assert joined("y") == "xy"
    names = [span.name for span in traced.ours()]
    assert "execute_tool Lookup" in names
    assert "execute_tool partial" in names


def test_a_level_in_any_case_is_a_level(traced: Traced) -> None:
    with agenttrace.tool("note", arguments={}):
        agenttrace.log("wrn", "disk almost full", free_mb=12)
    (span,) = traced.by_name("execute_tool note")
    (event,) = [event for event in span.events if event.name != "exception"]
    assert event.attributes is not None
    assert event.attributes["agenttrace.log.level"] == "WRN"


# --- what only shows when the code runs: reported, and the call runs on -------------------------


def test_an_arguments_callable_that_returns_no_mapping_is_reported_and_the_call_runs_on(
    traced: Traced, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(internal_errors, "raise_internal_errors", False)
    internal_errors.reset_reported()

    @agenttrace.tool(arguments=lambda query: query)  # returns a string, not a mapping
    def search(query: str) -> str:
        return f"found {query}"

    with agenttrace.agent("Scout"):
        assert search("cafe") == "found cafe"
        assert search("bar") == "found bar"
    assert len(traced.by_name("execute_tool search")) == 2  # recorded, with the call's arguments
    warnings = [r.getMessage() for r in caplog.records if r.name == "agenttrace"]
    assert warnings == [
        "agenttrace: agenttrace.tool: the arguments callable must return a mapping of argument "
        "names to values, not 'cafe'; the call's own arguments are recorded (your code still "
        "runs)"
    ]


def test_under_the_tests_such_a_mistake_is_raised(traced: Traced) -> None:
    @agenttrace.tool(arguments=lambda query: [query])
    def search(query: str) -> str:
        return query

    with pytest.raises(TypeError, match=r"must return a mapping .* not \['cafe'\] \(list\)"):
        search("cafe")
