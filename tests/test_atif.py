"""ATIF trajectories (Harbor's Agent Trajectory Interchange Format): export with sub-agents
embedded, and ATIF files opened in every view, checked against the ``atif`` package's models."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

atif = pytest.importorskip("atif", reason="the [atif] extra needs Python 3.11 or later")

from agenttrace.formats.documents import read_document  # noqa: E402
from agenttrace.formats.session import schema  # noqa: E402
from agenttrace.formats.session.files import read_session_file  # noqa: E402
from agenttrace.formats.session.optree import hosted_sessions  # noqa: E402
from agenttrace.formats.session.totals import session_stats  # noqa: E402
from agenttrace.views.exports import to_jaeger  # noqa: E402
from agenttrace.views.exports.atif import SCHEMA_VERSION, to_atif  # noqa: E402

from .conftest import Traced  # noqa: E402
from .helpers import child_env  # noqa: E402
from .test_std008 import (  # noqa: E402
    _VALUES,
    DELETE,
    Recorded,
    _leaves,
    cafe_then_resumed,
    changed,
    cli,
    opened_in_every_view,
    record_cafe,
    run_team,
    session_document,
)

SUMMED = ("input_tokens", "output_tokens", "cache_read_tokens", "llm_attempts_ok", "tool_calls")


@pytest.fixture(scope="module")
def cafe(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    """The cafe demo's session (tests/test_std008.py records it)."""
    return record_cafe(tmp_path_factory.mktemp("atif"))


@pytest.fixture
def team(traced: Traced, tmp_path: Path) -> Path:
    """A team with roles, reviews and a failure (tests/test_std008.py runs it)."""
    return run_team(traced, tmp_path)


def write(tmp_path: Path, document: Any, name: str = "trajectory.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


def test_the_cafe_is_one_trajectory_with_jack_and_jill_embedded(cafe: Recorded) -> None:
    document = to_atif(cafe.snapshot)
    atif.Trajectory.model_validate(document)
    assert document["schema_version"] == SCHEMA_VERSION == "ATIF-v1.7"
    assert document["agent"]["extra"]["agent_id"] == "agent_001"
    sources = [step["source"] for step in document["steps"]]
    assert sources == ["user", "agent", "agent", "agent", "agent"]
    discuss = document["steps"][3]
    (call,) = discuss["tool_calls"]
    assert call["function_name"] == "discuss" and call["arguments"]["speakers"] == ["Jack", "Jill"]
    first, second = discuss["observation"]["results"]
    assert (first["content"], second["content"]) == (
        "Hi, I'm Jack. *extends hand*",
        "*smiles* Hello Jack, I'm Jill.",
    )
    embedded = document["subagent_trajectories"]
    assert [sub["agent"]["name"] for sub in embedded] == ["Jack", "Jill"]
    assert [ref["trajectory_id"] for ref in first["subagent_trajectory_ref"]] == [
        sub["trajectory_id"] for sub in embedded
    ]
    jill = embedded[1]["steps"]
    assert [(s["source"], s["message"]) for s in jill] == [
        ("system", "You are an aspiring author..."),
        ("user", "You meet in a cafe. Introduce yourselves."),
        ("user", "[Jack]: Hi, I'm Jack. *extends hand*"),  # heard before she spoke
        ("agent", "*smiles* Hello Jack, I'm Jill."),
    ]
    assert jill[-1]["metrics"]["prompt_tokens"] > 0
    totals = session_stats(cafe.loaded.runs)["total"]
    prompt = document["final_metrics"]["total_prompt_tokens"]
    prompt += sum(sub["final_metrics"]["total_prompt_tokens"] for sub in embedded)
    assert prompt == totals["input_tokens"]


def test_an_atif_export_opens_in_every_view_with_the_same_totals(
    cafe: Recorded, tmp_path: Path
) -> None:
    path = tmp_path / "cafe.json"
    result = cli("export", str(cafe.snapshot), "--format", "atif", "-o", str(path))
    assert result.exit_code == 0, result.stderr
    ours = json.loads(cli("stats", str(path), "--json").stdout)
    native = session_stats(read_session_file(cafe.snapshot).runs)
    assert {key: ours["total"][key] for key in SUMMED} == {
        key: native["total"][key] for key in SUMMED
    }
    assert ours["total"]["cost_usd"] == pytest.approx(native["total"]["cost_usd"])
    tree = cli("tree", str(path)).stdout
    assert "3.2:2 session Jill [agent_003] ok" in tree and "3.2:2.1.1 llm" in tree
    dialog = cli("dialog", str(path), "--agents", "Jack,Jill").stdout.splitlines()
    assert "Jack: Hi, I'm Jack. *extends hand*" in dialog
    (trace,) = json.loads(cli("export", str(path), "--format", "jaeger").stdout)["data"]
    names = {span["operationName"] for span in trace["spans"]}
    assert {"invoke_agent Jill", "execute_tool discuss", "chat claude-sonnet-4-5-20250929"} <= names
    assert cli("validate", str(path)).stdout == (
        f"{path}: valid ATIF trajectory (ATIF-v1.7, 5 step(s), 2 embedded sub-agent "
        "trajectory(ies))\n"
    )


@pytest.mark.parametrize("which", ["cafe", "team"])
def test_export_import_export_is_stable(which: str, request: Any, tmp_path: Path) -> None:
    session = request.getfixturevalue(which)
    source = session.snapshot if which == "cafe" else session
    first = to_atif(source)
    second = to_atif(read_document(write(tmp_path, first)))
    assert second == first


def _timed_nodes(runs: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Every run and op of ``runs``, sub-agents included: kind, name, start and duration."""
    found: list[tuple[Any, ...]] = []
    pending = list(reversed(runs))
    while pending:
        session = pending.pop()
        found.append(("run", session["agentName"], session["startedAt"], session["latencyMs"]))
        for turn in session["turns"]:
            for op in turn["ops"]:
                found.append((op["kind"], op["name"], op["startedAt"], op["latencyMs"]))
                pending.extend(reversed(list(hosted_sessions(op))))
    return found


async def test_a_round_trip_keeps_runs_apart_and_every_duration(
    traced: Traced, tmp_path: Path
) -> None:
    """The cafe, then resumed: two runs. Exported to ATIF and read back, they are two runs
    again, with their txn ids, and every run and op keeps its start and duration."""
    path = await cafe_then_resumed(traced, tmp_path)
    native = read_session_file(path)
    document = to_atif(path)
    assert [run["first_step"] for run in document["extra"]["runs"]] == [1, 6]
    back = read_document(write(tmp_path, document))
    assert [run["txnId"] for run in back.runs] == [run["txnId"] for run in native.runs]
    assert [run["success"] for run in back.runs] == [True, True]
    assert _timed_nodes(back.runs) == _timed_nodes(native.runs)
    assert len(_timed_nodes(native.runs)) == 20  # 2 runs, Jack's and Jill's 4, and 14 ops
    assert to_atif(back) == document


def test_tools_no_model_asked_for_are_steps_without_an_llm_call(team: Path) -> None:
    document = to_atif(team)
    delegate = document["steps"][1]  # plan, then delegate: plain function calls
    assert delegate["llm_call_count"] == 0 and "metrics" not in delegate
    (call,) = delegate["tool_calls"]
    (result,) = delegate["observation"]["results"]
    assert result["source_call_id"] == call["tool_call_id"]
    assert result["content"] == "Implemented the auth component"
    coder = document["subagent_trajectories"][0]
    assert coder["agent"]["name"] == "Coder"
    assert result["subagent_trajectory_ref"][0]["trajectory_id"] == coder["trajectory_id"]


HARBOR = {
    "schema_version": "ATIF-v1.8",
    "session_id": "run-42",
    "agent": {"name": "my-agent", "version": "1.0.0", "model_name": "claude-sonnet-4-6"},
    "steps": [
        {"step_id": 1, "source": "user", "message": "What time is it?"},
        {
            "step_id": 2,
            "timestamp": "2026-05-16T12:00:01Z",
            "source": "agent",
            "message": "Let me ask the clock agent.",
            "tool_calls": [{"tool_call_id": "c1", "function_name": "delegate", "arguments": {}}],
            "observation": {
                "results": [
                    {
                        "source_call_id": "c1",
                        "content": "It is noon.",
                        "subagent_trajectory_ref": [
                            {"trajectory_id": "clock-1"},
                            {"trajectory_path": "/etc/passwd"},
                        ],
                    }
                ]
            },
            "metrics": {"prompt_tokens": 120, "completion_tokens": 18, "cost_usd": 0.002},
        },
        {"step_id": 3, "source": "agent", "message": "It is noon."},
    ],
    "subagent_trajectories": [
        {
            "schema_version": "ATIF-v1.8",
            "trajectory_id": "clock-1",
            "agent": {"name": "clock", "version": "0.1"},
            "steps": [
                {"step_id": 1, "source": "user", "message": "time?"},
                {
                    "step_id": 2,
                    "source": "agent",
                    "message": "noon",
                    "metrics": {"prompt_tokens": 5, "completion_tokens": 1},
                },
            ],
        }
    ],
}
"""A trajectory as another tool writes it (the atif package's own example, with a sub-agent)."""


def test_a_trajectory_another_tool_wrote_opens_in_the_views(tmp_path: Path) -> None:
    path = write(tmp_path, HARBOR)
    loaded = read_document(path)
    schema.check_document(session_document(loaded), 200)
    lines = cli("tree", str(path)).stdout.splitlines()
    assert any("session my-agent [my-agent] ok" in line for line in lines)
    assert any("1.2:1 session clock [clock] ok" in line for line in lines)
    assert not any("/etc/passwd" in line for line in lines)  # a path reference is not read
    stats = json.loads(cli("stats", str(path), "--json").stdout)
    assert stats["total"]["input_tokens"] == 125 and stats["total"]["llm_attempts_ok"] == 3
    assert stats["total"]["cost_usd"] is None  # one attempt has no price: never shown as $0
    dialog = cli("dialog", str(path), "--agents", "my-agent,clock").stdout.splitlines()
    assert dialog == [
        "(my-agent) What time is it?",
        "my-agent: Let me ask the clock agent.",
        "(clock) time?",
        "clock: noon",
        "(my-agent's tool delegate returned) It is noon.",  # what the call gave back
        "my-agent: It is noon.",  # what the agent then said
    ]
    assert to_jaeger(path)["data"]


def test_validate_judges_an_atif_file_by_the_atif_models(tmp_path: Path) -> None:
    assert cli("validate", str(write(tmp_path, HARBOR))).exit_code == 0
    broken = json.loads(json.dumps(HARBOR))
    broken["steps"][1]["step_id"] = 5
    broken["steps"][0]["tool_calls"] = []
    result = cli("validate", str(write(tmp_path, broken)))
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "$.steps[0]: Value error, Field `tool_calls` is only valid on `source='agent'` steps "
        "(this step has source='user')."
    ]
    tree = cli("tree", str(write(tmp_path, broken)))
    assert tree.exit_code == 2
    assert tree.stderr.startswith(
        "agenttrace: error: "
    ) and "not an ATIF trajectory: $.steps[0]" in (tree.stderr)
    assert len(tree.stderr.splitlines()) == 1


def test_without_the_atif_package_one_line_says_how_to_get_it(
    cafe: Recorded, tmp_path: Path
) -> None:
    """Python 3.10 has no atif package: the command says so in one line. Here the import is
    blocked as Python does for a missing module (``sys.modules[name] = None``)."""
    path = write(tmp_path, HARBOR)
    program = (
        "import sys; sys.modules['atif'] = None; from agenttrace.cli import main; "
        "sys.argv = ['agenttrace', *sys.argv[1:]]; main()"
    )
    for args, line in (
        (
            ["export", str(cafe.snapshot), "--format", "atif"],
            "ATIF needs the atif package (Python 3.11 or later): "
            "pip install 'atif>=1.7,<2' (the [atif] extra)",
        ),
        (
            ["tree", str(path)],
            f"{path}: an ATIF trajectory; reading one needs the atif package (Python 3.11 or "
            "later): pip install 'atif>=1.7,<2' (the [atif] extra)",
        ),
    ):
        done = subprocess.run(
            [sys.executable, "-c", program, *args],
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=480,
        )
        assert (done.returncode, done.stderr) == (2, f"agenttrace: error: {line}\n")


# --- hostile trajectories ----------------------------------------------------------------------

_HARBOR_LEAVES = [path for path in _leaves(HARBOR) if path]


@pytest.mark.fuzz  # hostile documents by the hundred: in make test, not make check
@settings(max_examples=150, derandomize=True, database=None, deadline=None)
@given(
    changes=st.lists(
        st.tuples(st.sampled_from(_HARBOR_LEAVES), st.one_of(_VALUES, st.just(DELETE))),
        min_size=1,
        max_size=3,
    )
)
def test_any_trajectory_opens_or_is_refused_in_one_line(
    changes: list[tuple[tuple[Any, ...], Any]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = tmp_path_factory.mktemp("hostile-atif") / "trajectory.json"
    path.write_text(
        json.dumps(changed(json.loads(json.dumps(HARBOR)), changes)), errors="surrogatepass"
    )
    loaded = opened_in_every_view(path)
    if loaded is None:
        return
    atif.Trajectory.model_validate(to_atif(loaded))


def _timing_leaves(document: dict[str, Any]) -> list[tuple[Any, ...]]:
    """The paths of what agenttrace's export puts in ``extra`` fields: runs and durations."""
    return [path for path in _leaves(document) if "extra" in path and "agent" not in path]


@pytest.mark.fuzz  # hostile documents by the hundred: in make test, not make check
@settings(max_examples=120, derandomize=True, database=None, deadline=None)
@given(data=st.data())
def test_any_runs_and_durations_in_extra_open_or_are_refused_in_one_line(
    data: st.DataObject, cafe: Recorded, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The ``extra`` fields a reader takes runs and durations from are untrusted like the rest:
    any value there (a first step out of order, a time that is none, a duration of 10**21 ms
    or below 0, a list of runs in place of a number) opens in every view or is one line."""
    document = to_atif(cafe.snapshot)
    leaves = _timing_leaves(document)
    assert ("extra", "runs", 0, "latency_ms") in leaves
    changes = data.draw(
        st.lists(
            st.tuples(
                st.sampled_from(leaves),
                st.one_of(
                    _VALUES,
                    st.just(DELETE),
                    st.just([{"first_step": 1}] * 50),
                    st.just(10**400),
                ),
            ),
            min_size=1,
            max_size=3,
        )
    )
    path = tmp_path_factory.mktemp("hostile-extra") / "trajectory.json"
    path.write_text(json.dumps(changed(document, changes)), errors="surrogatepass")
    loaded = opened_in_every_view(path)
    if loaded is not None:
        atif.Trajectory.model_validate(to_atif(loaded))
