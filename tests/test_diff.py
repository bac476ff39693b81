"""`agenttrace diff` and `agenttrace.diff_runs`: two recorded runs compared step by step.

Every run here is recorded for real: a small weather agent (an LLM loop with a ``lookup`` tool)
on the scripted model, traced by agenttrace into a sessions directory of its own. Variants of
it change one thing each (a reply, the system prompt, an inserted tool call, a tool's
arguments), and the diff must find that thing, where it happened, and nothing before it.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import litellm
import pytest
from opentelemetry.sdk.trace import TracerProvider

import agenttrace
from agenttrace.formats.session.files import SessionFileError
from agenttrace.testing import ScriptedModel
from agenttrace.views.diff.render import diff_lines

from .helpers import ROOT, child_env, record_demo_here, run_journal_child

MODEL = "anthropic/claude-sonnet-4-5-20250929"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
SUNNY = "It is sunny in Paris.\nTake sunglasses.\nNo umbrella needed."
RAINY = "It is sunny in Paris.\nTake an umbrella all the same.\nNo umbrella needed."
SCRIPT = [{"tool": "lookup", "input": {"city": "Paris"}}, {"text": SUNNY}]
BRIEF = "Be brief."


@agenttrace.tool
async def lookup(city: str) -> str:
    return f"sunny in {city}"


@agenttrace.tool
async def note(text: str) -> str:
    return "noted"


def weather_agent(
    system: str | None = None, insert_note: bool = False, shout: bool = False
) -> Callable[..., Any]:
    """The agent, changed as told: a system prompt, a ``note`` call before each lookup (a step
    the model did not ask for), the city upper-cased before the lookup (other arguments)."""

    @agenttrace.agent(name="weather")
    async def weather(options: dict[str, Any], prompt: str) -> str:
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        if system is not None:
            messages.insert(0, {"role": "system", "content": system})
        while True:
            reply = await litellm.acompletion(
                model=MODEL, messages=messages, tools=TOOLS, **options
            )
            message = reply.choices[0].message
            entry: dict[str, Any] = {"role": "assistant", "content": message.content}
            if message.tool_calls:
                entry["tool_calls"] = [call.model_dump() for call in message.tool_calls]
            messages.append(entry)
            if not message.tool_calls:
                return str(message.content)
            for call in message.tool_calls:
                city = json.loads(call.function.arguments)["city"]
                if insert_note:
                    await note(f"looking up {city}")
                result = await lookup(city.upper() if shout else city)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})

    return weather


def record(
    directory: Path,
    agent: Callable[..., Any] | None = None,
    script: list[Any] = SCRIPT,
    prompts: tuple[str, ...] = ("Weather in Paris?",),
    capture_content: bool = True,
    sessions_url: str | None = None,
    **options: Any,
) -> Path:
    """Record one session of ``agent`` (each of ``prompts`` a run of it, with ``options`` for
    litellm) on the scripted model answering ``script``; returns its session file."""
    sessions = directory / "sessions"
    agenttrace.use_session(None)
    tracing = agenttrace.init(
        tracer_provider=TracerProvider(),
        console="quiet",
        capture_content=capture_content,
        sessions_dir=sessions,
        sessions_url=sessions_url,
        billing_file=directory / "ledger.jsonl",
    )
    try:
        agenttrace.new_session()
        with ScriptedModel({"": script, BRIEF: script}) as model:
            options.update(api_key="offline-test-key", api_base=model.api_base)
            for prompt in prompts:
                asyncio.run((agent or weather_agent())(options, prompt))
        tracing.force_flush()
    finally:
        tracing.shutdown()
        agenttrace.use_session(None)
    (snapshot,) = sessions.glob("*.json.gz")
    return snapshot


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agenttrace.cli", "diff", *args],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=480,
    )


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record(tmp_path_factory.mktemp("baseline"))


def test_two_recordings_of_one_agent_are_the_same(baseline: Path, tmp_path: Path) -> None:
    again = record(tmp_path)
    result = cli(str(baseline), str(again), "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["same"] is True and document["first_divergence"] is None
    assert document["only_in_a"] == [] and document["only_in_b"] == []
    steps = [(step["a"], step["b"], step["kind"]) for step in document["steps"]]
    assert steps == [
        ("0", "0", "session"),
        ("1", "1", "turn"),
        ("1.1", "1.1", "llm"),
        ("1.2", "1.2", "tool"),
        ("2", "2", "turn"),
        ("2.1", "2.1", "llm"),
    ]
    llm = document["steps"][2]
    assert llm["differs"] == [] and llm["deltas"]["input_tokens"]["delta"] == 0
    assert llm["deltas"]["input_tokens"]["a"] > 0
    assert document["totals"]["llm_attempts"] == {"a": 2, "b": 2, "delta": 0}
    assert document["totals"]["tool_calls"] == {"a": 1, "b": 1, "delta": 0}
    # The text report says so too, and the API agrees.
    text = cli(str(baseline), str(again))
    assert text.returncode == 0 and "same: no divergence" in text.stdout
    assert agenttrace.diff_runs(baseline, again).same


def test_another_reply_is_a_response_divergence_with_a_text_diff(
    baseline: Path, tmp_path: Path
) -> None:
    other = record(tmp_path, script=[SCRIPT[0], {"text": RAINY}])
    result = cli(str(baseline), str(other), "--json")
    assert result.returncode == 1, result.stderr
    divergence = json.loads(result.stdout)["first_divergence"]
    assert (divergence["kind"], divergence["a"], divergence["b"]) == ("response", "2.1", "2.1")
    (change,) = divergence["changes"]
    assert change["path"] == "$[0].content"
    assert (change["a"], change["b"]) == (SUNNY, RAINY)
    assert "-Take sunglasses." in change["text_diff"]
    assert "+Take an umbrella all the same." in change["text_diff"]
    # Usage differs with the reply: the delta is B's output tokens less A's.
    diff = agenttrace.diff_runs(baseline, other)
    (step,) = [step for step in diff.steps if step.label_a == "2.1"]
    assert step.differs == ("response",)
    out = step.deltas()["output_tokens"]
    assert out["delta"] == out["b"] - out["a"] != 0  # type: ignore[operator]
    text = "\n".join(diff_lines(diff))  # the plain report, as without the [cli] extra
    assert "first divergence: response at A 2.1 / B 2.1" in text
    assert "+Take an umbrella all the same." in text


def test_a_changed_system_prompt_diverges_at_the_first_request(
    baseline: Path, tmp_path: Path
) -> None:
    briefed = record(tmp_path, weather_agent(system=BRIEF))
    diff = agenttrace.diff_runs(baseline, briefed)
    divergence = diff.first_divergence
    assert divergence is not None
    assert (divergence.kind, divergence.label_a, divergence.label_b) == ("request", "1.1", "1.1")
    changes = {change.path: change for change in divergence.diff.changes}
    assert changes["$.messages[0].role"].a == "user"
    assert changes["$.messages[0].role"].b == "system"
    assert changes["$.messages[0].content"].b == BRIEF
    assert changes["$.messages_sent"].a == 1 and changes["$.messages_sent"].b == 2


def test_another_temperature_is_a_request_divergence_by_its_fingerprint(
    baseline: Path, tmp_path: Path
) -> None:
    warmer = record(tmp_path, temperature=0.9, max_tokens=100)
    divergence = agenttrace.diff_runs(baseline, warmer).first_divergence
    assert divergence is not None
    assert (divergence.kind, divergence.label_b) == ("request", "1.1")
    # The span records neither: the journal's fingerprint, which hashes them, tells.
    assert "the request differs in what is not kept" in divergence.note
    (change,) = divergence.diff.changes
    assert change.path == "$.fingerprint" and change.a != change.b


def without_requests(session: Path, directory: Path) -> Path:
    """A copy of ``session`` whose ops keep no request (as an op a program opened itself with
    ``agenttrace.llm`` and gave none): only the journal's fingerprints are left of them."""
    document = json.loads(gzip.decompress(session.read_bytes()))
    for turn in document["runs"][0]["turns"]:
        for op in turn["ops"]:
            op.pop("request", None)
            op["span"]["attributes"].pop("agenttrace.request.messages", None)
    directory.mkdir()
    copy = directory / session.name
    copy.write_bytes(gzip.compress(json.dumps(document).encode()))
    return copy


def test_without_content_a_changed_request_is_told_by_its_fingerprint(
    baseline: Path, tmp_path: Path
) -> None:
    """No messages kept: the journal's fingerprints tell the requests apart, and the report
    says that is all it knows."""
    rome = record(tmp_path / "rome", prompts=("Weather in Rome?",))
    again = record(tmp_path / "again")
    plain = without_requests(baseline, tmp_path / "a")
    assert agenttrace.diff_runs(plain, without_requests(again, tmp_path / "b")).same
    divergence = agenttrace.diff_runs(plain, without_requests(rome, tmp_path / "c"))
    divergence = divergence.first_divergence
    assert divergence is not None
    assert (divergence.kind, divergence.label_a) == ("request", "1.1")
    assert "the content was not kept" in divergence.note
    (change,) = divergence.diff.changes
    assert change.path == "$.fingerprint" and change.a != change.b
    assert str(change.a).startswith("sha256:")


def test_an_inserted_tool_call_leaves_the_rest_paired(baseline: Path, tmp_path: Path) -> None:
    noted = record(tmp_path, weather_agent(insert_note=True))
    result = cli(str(baseline), str(noted), "--json")
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    assert document["only_in_a"] == []
    assert document["only_in_b"] == [{"label": "1.2", "kind": "tool", "name": "note", "steps": 1}]
    divergence = document["first_divergence"]
    assert (divergence["kind"], divergence["a"], divergence["b"]) == ("structure", None, "1.2")
    pairs = [(step["a"], step["b"]) for step in document["steps"] if step["kind"] != "turn"]
    # lookup is 1.2 in A and 1.3 in B: paired all the same, and the last call too.
    assert pairs == [("0", "0"), ("1.1", "1.1"), (None, "1.2"), ("1.2", "1.3"), ("2.1", "2.1")]
    assert [step["differs"] for step in document["steps"] if step["a"] == "1.2"] == [[]]


def test_other_tool_arguments_diverge_at_the_tool_call(baseline: Path, tmp_path: Path) -> None:
    shouted = record(tmp_path, weather_agent(shout=True))
    diff = agenttrace.diff_runs(baseline, shouted)
    divergence = diff.first_divergence
    assert divergence is not None
    assert (divergence.kind, divergence.label_a, divergence.label_b) == (
        "tool_arguments",
        "1.2",
        "1.2",
    )
    (change,) = divergence.diff.changes
    assert (change.path, change.a, change.b) == ("$.city", "Paris", "PARIS")
    (step,) = [step for step in diff.steps if step.label_a == "1.2"]
    assert step.differs == ("tool_arguments", "tool_result")
    later = [step for step in diff.steps if step.label_a == "2.1"]
    assert later[0].differs == ("request",)  # the result it sent back differs


def test_two_runs_of_one_session(tmp_path: Path) -> None:
    store = f"file://{tmp_path / 'store'}"
    prompts = ("Weather in Paris?", "Weather in Paris today?")
    session = record(tmp_path, prompts=prompts, sessions_url=store)
    session_id = session.name.removesuffix(".json.gz")
    sessions = str(session.parent)
    result = cli(f"{session_id}:1", f"{session_id}:2", "--json", "--sessions-dir", sessions)
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    assert (document["a"]["run"], document["b"]["run"]) == (1, 2)
    assert document["a"]["txn_id"] != document["b"]["txn_id"]
    divergence = document["first_divergence"]
    assert (divergence["kind"], divergence["a"]) == ("request", "1.1")
    assert divergence["changes"][0]["path"] == "$.messages[0].content"
    # Without :RUN, the last run: run 2 against itself is the same.
    same = cli(f"{session_id}:2", session_id, "--sessions-dir", sessions)
    assert same.returncode == 0, same.stderr
    # By its id in the session store the run shipped to, on a host with none of its files.
    elsewhere = str(tmp_path / "elsewhere")
    stored = cli(f"{session_id}:1", f"{session_id}:2", "--json", "--sessions-url", store,
                 "--sessions-dir", elsewhere)  # fmt: skip
    assert stored.returncode == 1, stored.stderr
    assert json.loads(stored.stdout)["first_divergence"] == divergence


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        (("nosuch", "{baseline}"), "no session 'nosuch'"),
        (("{baseline}:3", "{baseline}"), "no run 3 (it has 1)"),
        (("{baseline}:0", "{baseline}"), "RUN must be a run number"),
        (("{baseline}", "{baseline}:two"), "RUN must be a run number"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    baseline: Path, arguments: tuple[str, str], says: str
) -> None:
    result = cli(*(each.format(baseline=baseline) for each in arguments))
    assert result.returncode == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("agenttrace: error: ") and says in line


def test_a_hostile_session_file_is_compared_as_far_as_it_reads(
    baseline: Path, tmp_path: Path
) -> None:
    """Hand-edited where the session file's schema allows: a payload that is no JSON, one
    nested deeper than Python's stack, no accounting, no journal. What the file says is
    compared; a file its reader refuses is one line, exit 2."""
    document = json.loads(gzip.decompress(baseline.read_bytes()))
    run = document["runs"][0]
    run["turns"][0]["ops"][0]["request"]["payload"] = "[" * 5000
    run["turns"][1]["ops"][0]["response"]["payload"] = "[" * 3000 + "1" + "]" * 3000
    run["turns"][0]["ops"][1]["accounting"] = []
    document["journal"] = []
    hostile = tmp_path / "hostile.json.gz"
    hostile.write_bytes(gzip.compress(json.dumps(document).encode()))
    result = cli(str(baseline), str(hostile), "--json")
    assert result.returncode == 1, result.stderr
    compared = json.loads(result.stdout)
    divergence = compared["first_divergence"]
    assert (divergence["kind"], divergence["a"]) == ("request", "1.1")
    (change,) = divergence["changes"]
    assert change["path"] == "$.messages" and change["b"] == "[" * 400 + "…"  # capped
    differs = {step["a"]: step["differs"] for step in compared["steps"] if step["differs"]}
    assert differs == {"1.1": ["request"], "2.1": ["response"]}  # the tool's args: its op's
    (lookup,) = [step for step in compared["steps"] if step["a"] == "1.2"]
    assert lookup["deltas"]["latency_ms"]["b"] is not None
    run["turns"][0]["ops"][0]["path"] = 7
    hostile.write_bytes(gzip.compress(json.dumps(document).encode()))
    refused = cli(str(baseline), str(hostile))
    assert refused.returncode == 2 and refused.stdout == ""
    (line,) = refused.stderr.splitlines()
    assert "ops[0].path" in line


def test_the_api_refuses_a_missing_run(baseline: Path) -> None:
    with pytest.raises(SessionFileError, match="no run 2"):
        agenttrace.diff_runs(f"{baseline}:2", baseline)


def record_cafe(directory: Path, scripts: dict[str, Any]) -> Path:
    """The cafe demo (examples/cafe.py) recorded on the scripted model answering ``scripts``."""
    snapshot, _ = record_demo_here(directory, scripts)
    return snapshot


def test_a_sub_agent_s_other_reply_diverges_in_the_sub_agent(tmp_path: Path) -> None:
    """The cafe: Jack, a sub-agent the ``discuss`` tool runs, says something else."""
    from examples.cafe import JACK_PROMPT, SCRIPTS

    first = record_cafe(tmp_path / "a", SCRIPTS)
    jack = [{"text": "Hello, Jack here."}, *SCRIPTS[JACK_PROMPT][1:]]
    second = record_cafe(tmp_path / "b", {**SCRIPTS, JACK_PROMPT: jack})
    diff = agenttrace.diff_runs(first, second)
    divergence = diff.first_divergence
    assert divergence is not None
    assert (divergence.kind, divergence.label_a, divergence.label_b) == (
        "response",
        "3.2.1.1",
        "3.2.1.1",
    )
    (change,) = divergence.diff.changes
    assert (change.a, change.b) == ("Hi, I'm Jack. *extends hand*", "Hello, Jack here.")
    differs = {step.label_a: step.differs for step in diff.steps if step.differs}
    # Jill hears Jack's line, and the root gets it back from the tool (a generator tool, whose
    # items were its results: the journal keeps them).
    assert differs == {
        "3.2": ("tool_result",),
        "3.2.1.1": ("response",),
        "3.2:2.1.1": ("request",),
        "4.1": ("request",),
    }
    assert diff.only_in_a == diff.only_in_b == []
    (discuss,) = [step for step in diff.steps if step.label_a == "3.2"]
    assert discuss.usage_a is not None and discuss.usage_a.input_tokens  # its sub-agents'


SECRET = "s3cr3t-Canary-4b81"


@agenttrace.tool
async def login(url: str, password: str) -> str:
    return "logged in"


def test_a_secret_in_what_differs_is_never_printed(tmp_path: Path) -> None:
    """The arguments that differ hold a credential in a URL and a password: both runs' are
    shown as every output shows them (tests/test_leak_paths.py), the rest of the URL kept."""

    @agenttrace.agent(name="secretive")
    async def secretive(x: int) -> None:
        await login(f"https://api.example.com/v1/data?key={SECRET}&x={x}", f"{SECRET}{x}")

    sessions = []
    for x in (1, 2):
        agenttrace.use_session(None)
        tracing = agenttrace.init(
            tracer_provider=TracerProvider(),
            console="quiet",
            capture_content=True,
            sessions_dir=tmp_path / str(x),
            billing_file=tmp_path / "ledger.jsonl",
        )
        try:
            agenttrace.new_session()
            asyncio.run(secretive(x))
            tracing.force_flush()
        finally:
            tracing.shutdown()
            agenttrace.use_session(None)
        (snapshot,) = (tmp_path / str(x)).glob("*.json.gz")
        sessions.append(str(snapshot))
    for form in ((), ("--json",)):
        result = cli(*sessions, *form)
        assert result.returncode == 1, result.stderr
        assert SECRET not in result.stdout + result.stderr
        assert "key=[REDACTED]&x=2" in result.stdout
    document = json.loads(result.stdout)
    assert document["first_divergence"]["kind"] == "tool_arguments"
    assert [change["path"] for change in document["first_divergence"]["changes"]] == ["$.url"]


@pytest.mark.parametrize("size", [40, 1500])
def test_alignment_keeps_every_common_step_paired(size: int) -> None:
    """Steps inserted, one dropped and two renamed, in a long stretch that changed at both ends
    (so neither the common start nor the common end pairs it): every other step is paired with
    its own, by the exact common subsequence (40) or past its cell budget by difflib's
    matching blocks (1500)."""
    import random

    from agenttrace.views.diff.align import align

    rng = random.Random(size)
    a = [(index, rng.choice("lt")) for index in range(size)]
    b = [(-1, "x"), *a[1:10], (-2, "t"), *a[10:20], *a[21:30], (-3, "r"), *a[31:], (-4, "x")]
    pairs = align(a, b, key=lambda step: step)
    paired = [(x, y) for x, y in pairs if x is not None and y is not None]
    assert {x for x, y in paired if x == y} == set(a) - {a[0], a[20], a[30]}
    assert [y for x, y in pairs if x is None] == [(-2, "t"), (-4, "x")]
    assert [x for x, y in pairs if y is None] == [a[20]]
    # Where one step stands in place of another, the two are paired (kind or name changed).
    assert (a[0], (-1, "x")) in paired and (a[30], (-3, "r")) in paired
    assert len(pairs) == size + 2


def test_a_changed_step_before_an_added_one_is_paired_with_its_place() -> None:
    """A run killed in its first turn's tool call against the run that re-entered it: the
    turn's ops differ (the killed tool op has no result), and the re-entered run has a second
    turn. Nothing is common, yet turn 1 is turn 1: paired by position, the extra turn in B
    only (not both of B's turns "only in B" and A's turn "only in A")."""
    from agenttrace.views.diff.align import align

    pairs = align(["turn 1 killed"], ["turn 1 done", "turn 2"], key=lambda step: step)
    assert pairs == [("turn 1 killed", "turn 1 done"), (None, "turn 2")]
    pairs = align(["a", "b", "c"], ["a", "B"], key=lambda step: step)
    assert pairs == [("a", "a"), ("b", "B"), ("c", None)]


@pytest.mark.e2e
def test_a_run_killed_inside_a_tool_diverges_by_its_status(tmp_path: Path) -> None:
    """The shop agent of tests/journal_child.py, once to its end and once SIGKILLed inside its
    ``charge`` call, which may have had its effect: the charge is ``in doubt`` in the killed run,
    the first divergence, and the run never ended."""
    from .payment_server import PaymentServer

    for name, point, status in (("done", "never", 0), ("killed", "inside", -9)):
        payments = PaymentServer().start()  # a server of its own: the balance each run reads
        try:
            child = run_journal_child(tmp_path / name, payments.url, "effect", point)
        finally:
            payments.stop()
        assert child.returncode == status, child.stderr
    (first,) = (tmp_path / "done").glob("*.events.jsonl")
    (second,) = (tmp_path / "killed").glob("*.events.jsonl")
    diff = agenttrace.diff_runs(first, second)
    divergence = diff.first_divergence
    assert divergence is not None
    assert (divergence.kind, divergence.label_a, divergence.name) == ("status", "1.2", "charge")
    (change,) = divergence.diff.changes
    assert (change.path, change.a, change.b) == ("$.status", "ok", "in doubt")
    (root,) = [step for step in diff.steps if step.label_a == "0"]
    assert root.differs == ("status",)


@pytest.mark.e2e
def test_the_quickstart_killed_and_re_entered_differs_only_where_the_kill_did(
    tmp_path: Path,
) -> None:
    """The README's quick start, killed inside its tool call and run again (the re-entered
    run): its first LLM attempt, which the killed run's snapshot did not keep the messages and
    reply of and the re-entered run was answered from the journal, is the same step in both;
    turn 1 is paired with turn 1 though the killed one's ops differ, and turn 2 is only in B."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("<!-- test: saved as quickstart.py -->\n```python\n", 1)[1]
    (tmp_path / "quickstart.py").write_text(block.split("\n```", 1)[0], encoding="utf-8")
    env = child_env(AGENTTRACE_SESSIONS_DIR=str(tmp_path / "sessions"))
    for argv, status in ((["crash"], 9), ([], 0)):
        run = subprocess.run(
            [sys.executable, "quickstart.py", *argv],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=480,
        )  # fmt: skip
        assert run.returncode == status, run.stderr
    sessions = tmp_path / "sessions"
    diff = agenttrace.diff_runs("quickstart", "quickstart", run_a=1, run_b=2, sessions_dir=sessions)
    steps = {(step.label_a, step.label_b): step for step in diff.steps}
    assert steps["1.1", "1.1"].differs == ()  # the same request, the same reply
    assert ("1", "1") in steps and (None, "2") in steps
    # The killed tool call, known in the killed run only as its sub-agent's host, has the name
    # its journal step gives it: the same step as the re-entered run's, not a structure change.
    tool = steps["1.2", "1.2"]
    assert (tool.name_a, tool.name_b) == ("ask_expert", "ask_expert")
    assert "structure" not in tool.differs
    divergence = diff.first_divergence
    assert divergence is not None and divergence.label_a != "1.1"
