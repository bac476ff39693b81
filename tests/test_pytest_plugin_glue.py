"""The pytest plugin joined to cassettes and the lint (issue 37 items 2 and 4 through the
``agent_trace`` fixture): test files run by pytest (``pytester``, in this process) whose tests
are marked ``agent_cassette`` record on a first run and replay with the scripted model stopped
on the next, ``--agent-cassette-mode=none`` fails a call the cassette does not answer, and
``--agenttrace-lint`` warns about, or fails, a test whose agent loops on a tool."""

from __future__ import annotations

import gzip
import json

import litellm
import pytest

import pytest_agenttrace

# Each of agenttrace's modules the plugin uses imported here, before any pytester run: an
# in-process run forgets the modules first imported during it, and a second copy of them would
# have state of its own.
from agenttrace.testing import ScriptedModel
from agenttrace.testing.capture import capturing
from agenttrace.testing.cassette_options import MARKER_LINE
from agenttrace.testing.cassettes import CASSETTE_MODES
from agenttrace.testing.lint_gate import LINT_MODES, lint_gate
from agenttrace.views.lint import LintSettings

pytest_plugins = ["pytester"]

AGENT = '''
import json
import os

import litellm
import pytest

import agenttrace
# Each of agenttrace's modules the plugin uses imported here, before any pytester run: an
# in-process run forgets the modules first imported during it, and a second copy of them would
# have state of its own.
from agenttrace.testing import ScriptedModel

LOOP = "Look it up until you are sure."
SCRIPTS = {
    "": [{"tool": "lookup", "input": {"city": "Paris"}}, {"text": "Sunny in Paris."}],
    LOOP: [{"tool": "lookup", "input": {"city": "Paris"}}] * 4 + [{"text": "Sunny, surely."}],
}
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]


@agenttrace.tool(effect="read")
def lookup(city):
    return f"sunny in {city}"


LLM = {}  # litellm's model, api_base and api_key: not an argument, the port changes each run


@agenttrace.agent(name="Weather")
def weather(question, system=None):
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": question})
    while True:
        message = litellm.completion(**LLM, messages=messages, tools=TOOLS).choices[0].message
        calls = [call.model_dump() for call in message.tool_calls or []]
        messages.append({"role": "assistant", "content": message.content, "tool_calls": calls})
        if not calls:
            return message.content
        for call in message.tool_calls:
            result = lookup(**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


@pytest.fixture
def llm():
    """The scripted model; stopped before the test when GLUE_MODEL=stopped (nothing answers)."""
    with ScriptedModel(SCRIPTS) as model:
        options = {"model": "anthropic/claude-sonnet-4-5", "api_base": model.api_base,
                   "api_key": "offline"}
        LLM.update(options)
        if os.environ.get("GLUE_MODEL") != "stopped":
            yield
            return
    yield
'''

CASSETTE_TESTS = """
import json

import pytest
from agenttrace.testing import assert_trajectory, assert_tree

from conftest import weather


@pytest.mark.agent_cassette("paris")
def test_paris(agent_trace, llm):
    assert weather("Weather in Paris?") == "Sunny in Paris."
    assert_trajectory(agent_trace, [("lookup", {"city": "Paris"})])
    assert_tree(agent_trace, {"name": "invoke_agent Weather", "children": [
        {"name": "turn 1", "children": [{"kind": "llm"}, {"name": "execute_tool lookup"}]},
        {"name": "turn 2", "children": [{"kind": "llm"}]},
    ]})
    assert agent_trace.transcript("Weather")[-1]["content"] == "Sunny in Paris."
    assert agent_trace.session.session_id != "test_paris"  # the cassette's, not the fixture's
    assert agent_trace.lint() == []
    replayed = {s.attributes.get("agenttrace.replayed") for s in agent_trace.spans} - {None}
    print("REPLAYED" if replayed else "RECORDED", "billed", len(agent_trace.ledger))
    print("SNAPSHOT", json.dumps(agent_trace.snapshot()))


@pytest.mark.agent_cassette("failed")
def test_failed_records_nothing(agent_trace, llm):
    weather("Weather in Paris?")
    raise AssertionError("failed after its calls")


@pytest.mark.agent_cassette("paris")
def test_rome(agent_trace, llm):
    weather("Weather in Rome?")
"""


@pytest.fixture(scope="module")
def warmed(tmp_path_factory: pytest.TempPathFactory) -> None:
    """One traced litellm call before any pytester run, so that the modules litellm imports at
    its first call (and the warnings they give once) are not met, and forgotten, during one."""
    with capturing(tmp_path_factory.mktemp("warm")), ScriptedModel({"": []}) as model:
        messages = [{"role": "user", "content": "hi"}]
        litellm.completion(
            model="anthropic/claude-sonnet-4-5",
            api_base=model.api_base,
            api_key="offline",
            messages=messages,
        )


@pytest.fixture
def project(pytester: pytest.Pytester, warmed: None) -> pytest.Pytester:
    pytester.makeconftest(AGENT)
    return pytester


def test_the_plugin_declares_the_cassette_option_and_marker_as_cassette_options_does() -> None:
    # The plugin cannot import agenttrace when loaded, so it keeps its own copy of the modes;
    # the marker's line is the plugin's, which cassette_options takes.
    assert pytest_agenttrace.CASSETTE_MODES == CASSETTE_MODES
    assert MARKER_LINE is pytest_agenttrace.CASSETTE_MARKER_LINE
    assert pytest_agenttrace.LINT_MODES == LINT_MODES
    assert lint_gate("off").settings == LintSettings()


def test_the_options_and_markers_import_nothing_of_agenttrace(pytester: pytest.Pytester) -> None:
    # In a process of its own: this one has imported agenttrace already.
    pytester.makepyfile(
        test_quiet="""
        import sys
        import pytest

        @pytest.mark.agent_cassette("x")
        def test_nothing_imported():
            assert not [m for m in sys.modules if m.split(".")[0] == "agenttrace"]
        """
    )
    result = pytester.runpytest_subprocess(
        "-p",
        "no:randomly",
        "--strict-markers",
        "--agent-cassette-mode=none",
        "--agenttrace-lint=error",
    )
    result.assert_outcomes(passed=1)


def snapshots(result: pytest.RunResult) -> list[str]:
    """The snapshots a run of ``CASSETTE_TESTS`` printed (one a line, as JSON)."""
    return [line.split("SNAPSHOT ", 1)[1] for line in result.outlines if "SNAPSHOT " in line]


def test_a_marked_test_records_then_replays_with_the_model_stopped(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.makepyfile(test_glue=CASSETTE_TESTS)
    cassettes = project.path / "cassettes" / "test_glue"
    first = project.runpytest("-p", "no:randomly", "-s", "--strict-markers", "-k", "not rome")
    first.assert_outcomes(passed=1, failed=1)
    first.stdout.fnmatch_lines(["*RECORDED billed 3*", "*failed after its calls*"])
    assert not (cassettes / "failed.session.json.gz").exists()  # a failed test records nothing
    recorded = json.loads(gzip.decompress((cassettes / "paris.session.json.gz").read_bytes()))
    assert "offline" not in json.dumps(recorded)  # the API key, redacted

    monkeypatch.setenv("GLUE_MODEL", "stopped")
    arguments = ("-p", "no:randomly", "-s", "--agenttrace-lint=error")
    again = project.runpytest(*arguments, "-k", "paris", "--agent-cassette-mode=none")
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["*REPLAYED billed 0*"])  # a replay spends nothing
    # The default normal form leaves out what only a replay marks: one snapshot for both runs.
    assert snapshots(again) == snapshots(first) and len(snapshots(first)) == 1

    other = project.runpytest(*arguments, "-k", "rome", "--agent-cassette-mode=none")
    # The test fails where the replay diverged, and its tear-down says which cassette.
    other.assert_outcomes(failed=1, errors=1)
    other.stdout.fnmatch_lines(
        [
            "*CassetteMismatch: cassette *paris.session.json.gz (mode 'none') does not answer "
            "this run: replay diverged at 0: run 'Weather': its request differs *",
        ]
    )


LINT_TESTS = """
from conftest import LOOP, weather


def test_loop(agent_trace, llm):
    assert weather("Weather in Paris?", system=LOOP) == "Sunny, surely."
    assert [f.rule for f in agent_trace.lint(repeat_min_calls=3)] == ["AT101"]
    assert agent_trace.lint(repeat_min_calls=5) == []


def test_clean(agent_trace, llm):
    assert weather("Weather in Paris?") == "Sunny in Paris."
    assert agent_trace.lint() == []
"""


def test_lint_fails_or_warns_about_a_looping_test_and_passes_a_clean_one(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(test_lint=LINT_TESTS)
    failed = project.runpytest("-p", "no:randomly", "--agenttrace-lint=error")
    failed.assert_outcomes(passed=2, errors=1)  # test_loop passed, then failed its tear-down
    failed.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_loop*",
            "*TraceLintFailure: agenttrace lint found defects in session test_loop:",
            "*run 1  AT101 repeated-tool-call  lookup called 4 times in a row*",
            "*1 finding(s)*",
        ]
    )
    assert "teardown of test_clean" not in failed.stdout.str()

    warned = project.runpytest("-p", "no:randomly", "--agenttrace-lint=warn")
    warned.assert_outcomes(passed=2, warnings=1)
    warned.stdout.fnmatch_lines(["*TraceLintWarning: agenttrace lint found defects*"])

    # The ini options: the mode, and thresholds (the command line's are applied after them).
    project.makeini("[pytest]\nagenttrace_lint = error\nagenttrace_lint_set = repeat_min_calls=5\n")
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=2)
    bad = project.runpytest("-p", "no:randomly", "--agenttrace-lint-set=loops=2")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--agenttrace-lint-set: 'loops=2': expected NAME=VALUE*"])
