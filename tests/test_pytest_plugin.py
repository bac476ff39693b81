"""The pytest plugin (``agent_trace``), ``assert_tree``, ``assert_trajectory``, ``find`` and
``snapshot``: real test files run by pytest (``pytester``, in this process) against the agents
of tests/plugin_agents.py on the scripted model, and the assertions' failures read back.
"""

from __future__ import annotations

import os
import re
from datetime import timedelta
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

import agenttrace

# Imported here, before any pytester run: an in-process run forgets the modules first imported
# during it, and a second copy of agenttrace's modules would have state of its own.
import agenttrace.testing.assertions
import agenttrace.testing.capture
from agenttrace.testing import CapturedRun, ScriptedModel, assert_trajectory, assert_tree
from agenttrace.testing.capture import AlreadyTracing, capturing

from . import plugin_agents
from .helpers import ROOT, python_says
from .plugin_agents import SCRIPTS, host, llm_options

pytest_plugins = ["pytester"]

AGENTS = Path(plugin_agents.__file__).read_text(encoding="utf-8")
HOW_TO = (ROOT / "docs" / "how-to" / "testing.md").read_text(encoding="utf-8")
(EXAMPLE,) = re.findall(r"which runs this file with pytest -->\n```python\n(.*?)```", HOW_TO, re.S)
CONFTEST = """
import pytest
from agenttrace.testing import ScriptedModel
from plugin_agents import SCRIPTS, llm_options

@pytest.fixture
def llm():
    with ScriptedModel(SCRIPTS) as model:
        yield llm_options(model)
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> CapturedRun:
    """One run of the host agent, captured: read after the capture ended, as it stays."""
    directory = tmp_path_factory.mktemp("recorded")
    with capturing(directory, "recorded") as captured, ScriptedModel(SCRIPTS) as model:
        host(llm_options(model), "Tea or coffee?")
    return captured


@pytest.fixture
def project(pytester: pytest.Pytester, recorded: CapturedRun) -> pytest.Pytester:
    """A project whose tests run the agents, each test with the scripted model as ``llm``.
    After ``recorded``: the modules litellm imports at its first call are imported by then, not
    during a run that forgets them."""
    pytester.makepyfile(plugin_agents=AGENTS)
    pytester.makeconftest(CONFTEST)
    return pytester


def test_the_plugin_is_an_entry_point_that_imports_nothing_when_loaded() -> None:
    (plugin,) = entry_points(group="pytest11", name="agenttrace")
    code = (
        f"import sys; import {plugin.value}; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('agenttrace', 'litellm', 'opentelemetry')))"
    )
    loaded = python_says(code)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "[]"


def test_agenttrace_testing_imports_the_assertions_when_first_named() -> None:
    code = (
        "import sys, agenttrace.testing as t; "
        "before = 'agenttrace.testing.assertions' in sys.modules; "
        "t.assert_tree; print(before, 'agenttrace.testing.assertions' in sys.modules, "
        "'litellm' in sys.modules)"
    )
    loaded = python_says(code)
    assert loaded.stdout.split() == ["False", "True", "False"], loaded.stderr


def test_test_files_use_the_fixture_and_read_failures(project: pytest.Pytester) -> None:
    """One pytest run (each costs seconds) of test files that use the fixture: the run read
    back, a failing ``assert_tree`` and its diff, the marker, a second test from a clean start,
    and the how-to page's example."""
    project.makepyfile(
        test_host="""
        import re
        from agenttrace.testing import assert_tree, assert_trajectory
        from plugin_agents import host

        def test_host(agent_trace, llm):
            assert host(llm, "Tea or coffee?") == "Coffee, in the sun."
            assert_tree(agent_trace, {
                "kind": "session", "name": "invoke_agent Host", "status": "ok",
                "children": [
                    {"name": "turn 1", "children": [
                        {"kind": "llm"},
                        {"name": "execute_tool ask_expert", "children": [
                            {"kind": "session", "name": "invoke_agent Expert", "label": "1.2:1"},
                            {"name": "execute_tool note",
                             "attributes": {"gen_ai.tool.call.arguments": {"text": str}}},
                        ]},
                    ]},
                    ...,
                    {"name": "turn 3", "children": [..., {"status": "failed",
                        "attributes": {"error.type": "ValueError"}}]},
                ],
            })
            assert_trajectory(agent_trace, [
                ("ask_expert", {"question": re.compile("coffee")}), "note", "lookup",
                "check_spelling",
            ])
            said = {"role": "assistant", "content": "Coffee."}
            assert agent_trace.transcript("Expert")[-1] == said
            assert [e["type"] for e in agent_trace.ledger].count("llm") == 4
            assert agent_trace.events[0]["event_type"] == "agent_created"
            assert agent_trace.session.session_id == "test_host"
            assert {s.name for s in agent_trace.spans} >= {"invoke_agent Host", "turn 3"}
            assert (agent_trace.sessions_dir / "test_host.events.jsonl").exists()

        def test_again_from_a_clean_start(agent_trace, llm):
            host(llm, "Tea or coffee?")
            assert len(agent_trace.tree()) == 1
            assert agent_trace.transcript("agent_001")[0]["content"] == "Tea or coffee?"
        """,
        test_wrong="""
        from agenttrace.testing import assert_tree
        from plugin_agents import host

        def test_wrong(agent_trace, llm):
            host(llm, "Tea or coffee?")
            assert_tree(agent_trace, {"name": "invoke_agent Host", "children": [
                {"name": "turn 1", "children": [
                    ..., {"name": "execute_tool ask_expert",
                          "attributes": {"gen_ai.tool.call.arguments": {"question": "Milk?"}}},
                ]},
                ...,
            ]})
        """,
        test_weather=EXAMPLE,
        test_marked="""
        import pytest

        @pytest.mark.agent_trace(capture_content=False, service_name="shop")
        def test_marked(agent_trace):
            assert agent_trace.tracing.settings.capture_content is False
            assert agent_trace.tracing.settings.service_name == "shop"

        def test_unmarked(agent_trace):
            assert agent_trace.tracing.settings.capture_content is True
        """,
    )
    result = project.runpytest("-p", "no:randomly", "--strict-markers")
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*the captured tree is not the one expected:",
            "*'execute_tool ask_expert' [[]1.2[]]: attribute gen_ai.tool.call.arguments: "
            "expected {'question': 'Milk?'}, got {'question': 'Tea or coffee?'}",
            "*--- expected",
            "*+++ actual",
            "*-      @ gen_ai.tool.call.arguments = {'question': 'Milk?'}",
            "*+      @ gen_ai.tool.call.arguments = {'question': 'Tea or coffee?'}",
        ]
    )
    assert "assertions.py" not in result.stdout.str()  # its frames hidden
    # Torn down: agenttrace can be set up again in this process.
    with capturing(project.path / "after") as captured:
        assert captured.tracing.enabled


def test_the_capture_refuses_to_start_under_another_init(tmp_path: Path) -> None:
    agenttrace.use_session(None)
    handle = agenttrace.init(
        tracer_provider=TracerProvider(),
        sessions_dir=tmp_path / "s",
        billing_file=tmp_path / "ledger.jsonl",
        console="quiet",
    )
    try:
        with pytest.raises(AlreadyTracing, match="not at import time"), capturing(tmp_path):
            pass
    finally:
        handle.shutdown()
        agenttrace.use_session(None)


def test_the_capture_pins_its_settings_and_ships_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTTRACE_SESSIONS_URL", "file:///nowhere/sessions")
    monkeypatch.setenv("AGENTTRACE_CAPTURE_CONTENT", "false")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    with capturing(tmp_path) as captured:
        settings = captured.tracing.settings
        assert (settings.sessions_url, settings.capture_content, settings.disabled) == (
            None,
            True,
            False,
        )
        assert settings.sessions_dir == tmp_path / "sessions"
    assert os.environ["AGENTTRACE_SESSIONS_URL"] == "file:///nowhere/sessions"


def test_two_runs_give_the_same_snapshot(recorded: CapturedRun, tmp_path: Path) -> None:
    with capturing(tmp_path, "again") as again, ScriptedModel(SCRIPTS) as model:
        host(llm_options(model), "Tea or coffee?")
    assert again.snapshot() == recorded.snapshot()
    text = recorded.snapshot(text=True)
    assert again.snapshot(text=True) == text
    assert isinstance(text, str)
    assert text.splitlines()[:6] == [
        "session invoke_agent Host [0]",
        "  turn turn 1 [1]",
        "    llm chat claude-sonnet-4-5-20250929 [1.1]",
        "      @ agenttrace.attempt = 1",
        "    tool execute_tool ask_expert [1.2]",
        '      @ gen_ai.tool.call.arguments = {"question": "Tea or coffee?"}',
    ]
    assert "    tool execute_tool check_spelling [3.2] failed" in text.splitlines()
    assert not re.search(r"[0-9a-f]{16}|\d{10}", text)  # no span ids, no times


def test_the_normal_form_keeps_the_attributes_asked_for(recorded: CapturedRun) -> None:
    (root,) = recorded.tree(attributes=["gen_ai.agent.name"])
    assert root["attributes"] == {"gen_ai.agent.name": "Host"}
    assert root["children"][0]["attributes"] == {}
    (everything,) = recorded.tree(attributes="*")
    assert everything["attributes"]["agenttrace.session.id"] == "recorded"


FIND = [
    ({"name_equals": "execute_tool lookup"}, ["2.2"]),
    ({"name_contains": "Expert"}, ["1.2:1"]),
    ({"name_matches_regex": r"execute_tool (n|l)"}, ["1.3", "2.2"]),
    ({"has_attributes": {"gen_ai.tool.name": "note"}}, ["1.3"]),
    ({"has_attributes": {"gen_ai.response.finish_reasons": ["tool_calls"]}}, ["1.1", "2.1"]),
    ({"has_attribute_keys": ["error.type"]}, ["3.2"]),
    ({"min_duration": 3600, "name_contains": "turn"}, []),
    ({"max_duration": timedelta(hours=1), "name_contains": "turn 3"}, ["3"]),
    ({"not_": {"name_contains": "chat"}, "name_contains": "turn 1"}, ["1", "1.2.1"]),
    ({"and_": [{"name_contains": "execute"}, {"has_attribute_keys": ["error.type"]}]}, ["3.2"]),
    ({"or_": [{"name_equals": "turn 2"}, {"name_equals": "execute_tool note"}]}, ["1.3", "2"]),
    ({"min_child_count": 2, "name_contains": "turn"}, ["1", "2", "3"]),
    ({"max_child_count": 0, "name_contains": "execute"}, ["1.3", "2.2", "3.2"]),
    ({"some_child_has": {"name_equals": "invoke_agent Expert"}}, ["1.2"]),
    ({"all_children_have": {"name_contains": "chat"}, "name_contains": "turn"}, ["1.2.1"]),
    ({"no_child_has": {"name_contains": "execute"}, "name_contains": "turn"}, ["1.2.1"]),
    ({"min_descendant_count": 9}, ["0"]),
    ({"max_descendant_count": 1, "name_contains": "invoke"}, []),
    ({"some_descendant_has": {"name_equals": "execute_tool note"}}, ["0", "1", "1.2"]),
    (
        {"all_descendants_have": {"name_matches_regex": "turn|chat"}, "min_child_count": 1},
        ["1.2:1", "1.2.1"],
    ),
    ({"no_descendant_has": {"name_contains": "execute"}, "name_contains": "invoke"}, ["1.2:1"]),
    (
        {
            "some_descendant_has": {"name_contains": "chat"},
            "name_contains": "execute",
            "stop_recursing_when": {"name_contains": "invoke"},
        },
        [],
    ),
    ({"min_depth": 4}, ["1.2.1", "1.2.1.1"]),
    ({"max_depth": 0}, ["0"]),
    ({"some_ancestor_has": {"name_equals": "invoke_agent Expert"}}, ["1.2.1", "1.2.1.1"]),
    ({"all_ancestors_have": {"name_contains": "o"}, "min_depth": 1}, ["1", "2", "3"]),
    ({"no_ancestor_has": {"name_contains": "turn"}}, ["0", "1", "2", "3"]),
    (
        {
            "some_ancestor_has": {"name_contains": "Host"},
            "name_contains": "chat",
            "stop_recursing_when": {"name_contains": "invoke"},
        },
        ["1.1", "2.1", "3.1"],
    ),
]


@pytest.mark.parametrize(("query", "labels"), FIND, ids=[str(q) for q, _ in FIND])
def test_find_reads_each_span_query_field(
    recorded: CapturedRun, query: dict[str, Any], labels: list[str]
) -> None:
    assert [node.label for node in recorded.find(query)] == labels


def test_find_refuses_what_is_not_a_query(recorded: CapturedRun) -> None:
    with pytest.raises(ValueError, match="not SpanQuery fields: name_is"):
        recorded.find({"name_is": "turn 1"})  # type: ignore[typeddict-unknown-key]
    with pytest.raises(ValueError, match="'or_' cannot be combined"):
        recorded.find({"or_": [{"name_equals": "a"}], "name_equals": "b"})
    with pytest.raises(TypeError, match="a dict of conditions"):
        recorded.find("turn 1")  # type: ignore[arg-type]


def test_assert_tree_matchers(recorded: CapturedRun) -> None:
    assert_tree(
        recorded,
        {
            "name": re.compile("Host$"),
            "label": "0",
            "children": [
                {"name": "turn 1", "children": ...},
                {
                    "name": lambda name: name.startswith("turn"),
                    "children": [
                        {"kind": "llm", "attributes": {"gen_ai.usage.input_tokens": int}},
                        {
                            "attributes": {"gen_ai.tool.call.arguments": {"city": "Paris"}},
                            "children": [],
                        },
                    ],
                },
                {"label": "3", "status": "ok"},
            ],
        },
    )
    assert_tree(recorded.tree(), [{"kind": "session"}])  # a normal form, a list of roots
    with pytest.raises(AssertionError, match=r"unexpected node 'invoke_agent Host'"):
        assert_tree(recorded, [])
    with pytest.raises(ValueError, match="not keys of a tree node: 'chidlren'"):
        assert_tree(recorded, {"chidlren": []})


def test_assert_tree_reports_missing_and_unexpected_children(recorded: CapturedRun) -> None:
    with pytest.raises(AssertionError) as failed:
        assert_tree(
            recorded,
            {
                "children": [
                    {"name": "turn 1", "children": ...},
                    {"name": "turn 2", "children": [{"kind": "llm"}]},
                    {"name": "turn 3", "children": ...},
                    {"name": "turn 4"},
                ]
            },
        )
    message = str(failed.value)
    assert "'turn 2' [2]: unexpected node 'execute_tool lookup' [2.2]" in message
    assert "'invoke_agent Host' [0]: no node for expected name='turn 4'" in message
    assert "+    name='execute_tool lookup' kind='tool' label='2.2' status='ok'" in message
    assert "-  name='turn 4'" in message


def test_assert_trajectory_modes(recorded: CapturedRun) -> None:
    made = ["ask_expert", "note", "lookup", "check_spelling"]
    assert_trajectory(recorded, made)
    assert_trajectory(recorded, [..., ("lookup", {"city": "Paris"}), ...])
    assert_trajectory(recorded, list(reversed(made)), mode="unordered")
    assert_trajectory(recorded, [*made, "refund"], mode="subset")
    assert_trajectory(recorded, ["lookup"], mode="superset")
    assert_trajectory(recorded, [{"name": "ask_expert", "arguments": {...: ...}}, ...])
    assert_trajectory(recorded, made, agent="Host")  # note is called by Host's tool
    assert_trajectory(recorded, [], agent="Expert")
    for calls, mode in (
        (made[:3], "strict"),
        (made[:3], "unordered"),
        (made[1:], "subset"),
        ([*made, "refund"], "superset"),
    ):
        with pytest.raises(AssertionError, match=rf"\({mode}\) differ"):
            assert_trajectory(recorded, calls, mode=mode)


def test_assert_trajectory_prints_the_calls_that_differ(recorded: CapturedRun) -> None:
    with pytest.raises(AssertionError) as failed:
        assert_trajectory(
            recorded,
            [
                ("ask_expert", {"question": "Milk?"}),
                "note",
                ("lookup", {"city": str, "units": ...}),
            ],
        )
    assert str(failed.value).splitlines() == [
        "the tool calls (strict) differ (- expected, + made):",
        "  - 'ask_expert' {'question': 'Milk?'}",
        "  + 'ask_expert' {'question': 'Tea or coffee?'}",
        "    'note' {'text': 'asked: Tea or coffee?'}",
        "  - 'lookup' {'city': <any str>, 'units': ...}",
        "  + 'lookup' {'city': 'Paris'}",
        "  + 'check_spelling' {'text': 'Coffee, in the sun.'}",
    ]
    with pytest.raises(AssertionError) as failed:
        assert_trajectory(recorded, ["lookup", "refund"], mode="superset")
    assert "  expected, not made:\n    'refund' ...\n" in str(failed.value)
    with pytest.raises(ValueError, match="mode is one of"):
        assert_trajectory(recorded, [], mode="exact")


def test_reading_after_the_capture(recorded: CapturedRun) -> None:
    assert recorded.session.session_id == "recorded"
    assert [m["role"] for m in recorded.transcript("Expert")] == ["system", "user", "assistant"]
    with pytest.raises(KeyError, match=r"agent_002 \(Expert\)"):
        recorded.transcript("Critic")
