"""Trace lint (docs/lint.md): a corpus of bad sessions, each seeded with one defect, in which
``lint_session`` finds exactly that defect's rule and nothing else, and clean sessions (the
cafe demo, a run with a sub-agent) in which it finds nothing.

Every session is recorded for real: small programs (decorated agents and tools, litellm) on
the scripted OpenAI-compatible server on 127.0.0.1 (tests/llm_server.py). Defects no real
program makes (a step that never ended, an orphan run, a sub-agent outside its caller's trace,
a $0 price, a call left in doubt) are seeded by editing a clean recorded file, written alone
into a directory of its own (no event stream beside it to add back what was taken out).
"""

from __future__ import annotations

import gzip
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import litellm
import pytest

import agenttrace
from agenttrace.cli import main
from agenttrace.formats.session.fullest import load_fullest
from agenttrace.views.lint import Finding, LintSettings, lint_session

from .conftest import Traced
from .helpers import record_demo_here
from .llm_server import LLMServer, Reply
from .test_litellm import http
from .test_retries import failed

CONTENT = pytest.mark.init(capture_content=True)


# --- the programs --------------------------------------------------------------------------------


@agenttrace.tool
def lookup(city: str) -> str:
    return f"sunny in {city}"


@agenttrace.tool
def convert(celsius: int) -> str:
    return f"{celsius * 9 // 5 + 32} F"


@agenttrace.tool
def charge(amount: int) -> str:
    raise ValueError("card declined")


@agenttrace.tool
def status(job: str) -> str:
    return "pending"


@agenttrace.tool
def wait_for(job: str) -> str:
    """Polls the job's status, as a tool of a real agent might, and gives up."""
    result = ""
    for _ in range(4):
        result = status(job)
    return result


def make_delegate(llm: LLMServer) -> Callable[..., str]:
    @agenttrace.agent("Helper")
    def helper(task: str) -> str:
        reply = litellm.completion(**http(llm, messages=[{"role": "user", "content": task}]))
        return str(reply.choices[0].message.content)

    @agenttrace.tool
    def delegate(task: str) -> str:
        return helper(task)

    return delegate


def call(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> Reply:
    """A reply asking for one tool call."""
    function = {"name": name, "arguments": json.dumps(arguments)}
    return Reply(content="", tool_calls=[{"id": call_id, "type": "function", "function": function}])


def loop_agent(llm: LLMServer, prompt: str = "Weather in Paris?") -> str:
    """An agent's loop: ask the model, run the tools it asks for, until it answers in text."""
    tools: dict[str, Callable[..., str]] = {
        "lookup": lookup,
        "convert": convert,
        "charge": charge,
        "wait_for": wait_for,
        "delegate": make_delegate(llm),
    }

    @agenttrace.agent("Looper")
    def run() -> str:
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        while True:
            message = litellm.completion(**http(llm, messages=messages)).choices[0].message
            entry: dict[str, Any] = {"role": "assistant", "content": message.content}
            if message.tool_calls:
                entry["tool_calls"] = [each.model_dump() for each in message.tool_calls]
            messages.append(entry)
            if not message.tool_calls:
                return str(message.content)
            for each in message.tool_calls:
                try:
                    result = tools[each.function.name](**json.loads(each.function.arguments))
                except ValueError as exc:
                    result = f"error: {exc}"
                messages.append({"role": "tool", "tool_call_id": each.id, "content": result})

    return run()


def saved(traced: Traced) -> Path:
    """The session file the test recorded."""
    traced.handle.force_flush()
    (snapshot,) = traced.handle.settings.sessions_dir.glob("*.json.gz")
    return snapshot


def rules(session: Any, **settings: Any) -> list[str]:
    return [finding.rule for finding in lint_session(session, LintSettings(**settings))]


def one(session: Any, **settings: Any) -> Finding:
    (finding,) = lint_session(session, LintSettings(**settings))
    return finding


# --- defects real programs make ------------------------------------------------------------------


@CONTENT
def test_a_tool_called_in_a_loop_is_a_repeated_call_and_its_turns_are_wasted(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(*[call("lookup", {"city": "Paris"})] * 3, Reply(content="Sunny."))
    assert loop_agent(llm) == "Sunny."
    finding = one(saved(traced))
    assert (finding.rule, finding.name, finding.run) == ("AT101", "repeated-tool-call", 1)
    assert finding.paths == ("1.2", "2.2", "3.2")
    assert len(finding.span_ids) == 3
    assert "lookup called 3 times" in finding.message
    # The model was asked twice for nothing: turns 2 and 3, 11 + 7 tokens each (the server's).
    assert finding.wasted.tokens == 36
    assert finding.wasted.cost_usd is not None and finding.wasted.cost_usd > 0
    assert rules(saved(traced), repeat_min_calls=4) == []  # a threshold, set
    assert rules(saved(traced), ignore=("repeated-tool-call",)) == []
    # A session already read (what the views read) is linted as its file is.
    assert lint_session(load_fullest(saved(traced))) == [finding]


@CONTENT
def test_the_same_failing_call_again_is_a_repeated_failure(traced: Traced, llm: LLMServer) -> None:
    llm.reset(*[call("charge", {"amount": 5})] * 2, Reply(content="The card is declined."))
    loop_agent(llm)
    finding = one(saved(traced))
    assert (finding.rule, finding.paths) == ("AT102", ("1.2", "2.2"))
    assert "ValueError: card declined" in finding.message
    assert finding.wasted.tokens == 18


@CONTENT
def test_two_calls_in_turn_are_ping_pong(traced: Traced, llm: LLMServer) -> None:
    a, b = call("lookup", {"city": "Paris"}), call("convert", {"celsius": 20})
    llm.reset(a, b, a, b, Reply(content="20 C in Paris."))
    loop_agent(llm)
    finding = one(saved(traced))
    assert (finding.rule, finding.paths) == ("AT103", ("1.2", "2.2", "3.2", "4.2"))
    assert finding.wasted.tokens == 2 * 18  # asking for the second A and B
    assert rules(saved(traced), pingpong_min_cycles=3) == []


@CONTENT
def test_a_tool_polling_a_status_that_never_changes_is_polling_without_progress(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(call("wait_for", {"job": "j1"}), Reply(content="Still pending."))
    loop_agent(llm)
    finding = one(saved(traced))
    assert (finding.rule, finding.paths) == ("AT104", ("1.3", "1.4", "1.5", "1.6"))
    assert finding.wasted.tokens is None and finding.wasted.cost_usd is None  # no model asked


def storm(traced: Traced, llm: LLMServer) -> Path:
    """A program that asks again at once, the same request, until it is answered: 4 failures
    then an answer, attempts 1 to 5 of one logical call."""
    llm.reset(*[failed(500)] * 4, Reply(content="At last."))

    @agenttrace.agent("Stormy")
    def run() -> str:
        while True:
            try:
                return str(litellm.completion(**http(llm)).choices[0].message.content)
            except litellm.exceptions.InternalServerError:
                continue

    assert run() == "At last."
    return saved(traced)


@CONTENT
def test_a_call_of_five_attempts_is_a_retry_storm(traced: Traced, llm: LLMServer) -> None:
    # Backoff is read from the times: set aside here (its own test makes its times).
    finding = one(storm(traced, llm), min_backoff_ms=0)
    assert (finding.rule, finding.paths) == ("AT201", ("1.1", "1.2", "1.3", "1.4", "1.5"))
    assert "5 attempts (4 failed" in finding.message
    # The failures reported no usage: a provider bills no request it refused.
    assert (finding.wasted.tokens, finding.wasted.cost_usd) == (0, 0)


@CONTENT
def test_retries_sent_at_once_have_no_backoff_and_spaced_ones_do(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    source = storm(traced, llm)

    def spaced(gap_ns: int) -> Callable[[dict[str, Any]], None]:
        def edit(document: dict[str, Any]) -> None:
            ops = document["runs"][0]["turns"][0]["ops"]
            for before, after in itertools.pairwise(ops):
                length = after["span"]["endTimeUnixNano"] - after["span"]["startTimeUnixNano"]
                after["span"]["startTimeUnixNano"] = before["span"]["endTimeUnixNano"] + gap_ns
                after["span"]["endTimeUnixNano"] = after["span"]["startTimeUnixNano"] + length

        return edit

    hasty = seeded(source, tmp_path / "hasty", spaced(0))
    finding = one(hasty, max_attempts=5)
    assert (finding.rule, finding.paths) == ("AT202", ("1.1", "1.2", "1.3", "1.4", "1.5"))
    assert "4 attempt(s)" in finding.message
    assert rules(seeded(source, tmp_path / "patient", spaced(10**9)), max_attempts=5) == []


@CONTENT
def test_asking_the_model_again_with_nothing_new_is_an_idle_turn(
    traced: Traced, llm: LLMServer
) -> None:
    llm.reset(Reply(content="Let me think."), Reply(content="Still thinking."), Reply(content="42"))

    @agenttrace.agent("Ponderer")
    def run() -> None:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "The answer?"}]
        for _ in range(3):
            reply = litellm.completion(**http(llm, messages=messages)).choices[0].message
            messages.append({"role": "assistant", "content": reply.content})

    run()
    finding = one(saved(traced))
    assert (finding.rule, finding.paths) == ("AT203", ("2", "3"))
    assert finding.wasted.tokens == 36


@CONTENT
def test_input_past_a_share_of_the_model_s_window_is_said(traced: Traced, llm: LLMServer) -> None:
    usage = {"prompt_tokens": 120_000, "completion_tokens": 7, "total_tokens": 120_007}
    llm.reset(Reply(content="Done.", usage=usage))

    @agenttrace.agent("Reader")
    def run() -> None:
        litellm.completion(**http(llm))

    run()
    finding = one(saved(traced))  # gpt-4o-mini: 128,000 tokens in litellm's offline map
    assert (finding.rule, finding.paths) == ("AT204", ("1.1",))
    assert "120,000 tokens of gpt-4o-mini's 128,000-token window" in finding.message
    assert rules(saved(traced), window_share=0.95) == []
    assert rules(saved(traced), window_share=0.95, context_window=100_000) == ["AT204"]


# --- defects seeded in a clean recorded file -----------------------------------------------------


def seeded(source: Path, directory: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """``source`` edited by ``edit``, alone in ``directory`` under its own name."""
    document = json.loads(gzip.decompress(source.read_bytes()))
    edit(document)
    directory.mkdir(parents=True)
    target = directory / source.name
    target.write_bytes(gzip.compress(json.dumps(document).encode()))
    return target


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run whose tool runs a sub-agent: the model asks for ``delegate``, whose sub-agent asks
    the model once, then answers."""
    from opentelemetry.sdk.trace import TracerProvider

    directory = tmp_path_factory.mktemp("clean")
    llm = LLMServer().start()
    agenttrace.use_session(None)
    tracing = agenttrace.init(
        tracer_provider=TracerProvider(),
        console="quiet",
        capture_content=True,
        sessions_dir=directory / "sessions",
        billing_file=directory / "ledger.jsonl",
    )
    try:
        llm.reset(
            call("delegate", {"task": "Find Paris"}),
            Reply(content="Paris."),
            Reply(content="Done."),
        )
        assert loop_agent(llm) == "Done."
        tracing.force_flush()
    finally:
        tracing.shutdown()
        agenttrace.use_session(None)
        llm.stop()
    (snapshot,) = (directory / "sessions").glob("*.json.gz")
    return snapshot


def test_the_clean_run_with_a_sub_agent_has_no_finding(clean: Path) -> None:
    assert lint_session(clean) == []


def _first_run(document: dict[str, Any]) -> dict[str, Any]:
    run: dict[str, Any] = document["runs"][0]
    return run


def _delegate(document: dict[str, Any]) -> dict[str, Any]:
    op: dict[str, Any] = _first_run(document)["turns"][0]["ops"][1]
    assert op["name"] == "delegate"
    return op


def _never_ended(document: dict[str, Any]) -> None:
    op = _first_run(document)["turns"][1]["ops"][0]
    for key in ("endedAt", "status", "latencyMs"):
        op.pop(key)
    op["accounting"] = []


def _orphan(document: dict[str, Any]) -> None:
    # A sub-agent's run that no tool call of the session holds: as a run of another process
    # whose caller's files are gone.
    sub_agent = {"parent_trace_id": "ab" * 16, "parent_call_path": "Boss", "tool_name": "ask"}
    _first_run(document)["attributes"]["ingress"] = {"source": "sub-agent", "sub_agent": sub_agent}


def _other_trace(document: dict[str, Any]) -> None:
    _delegate(document)["childSession"]["traceId"] = "f" * 32


def _free(document: dict[str, Any]) -> None:
    _first_run(document)["turns"][0]["ops"][0]["accounting"][0]["costUsd"] = 0


def _in_doubt(document: dict[str, Any]) -> None:
    # The call's outcome is gone from the journal, as when a kill struck while it ran.
    document["journal"] = [
        line
        for line in document["journal"]
        if not (line.get("name") == "delegate" and line.get("state") == "done")
    ]


SEEDED: dict[str, tuple[Callable[[dict[str, Any]], None], str, tuple[str, ...]]] = {
    "an op that never ended": (_never_ended, "AT301", ("2.1",)),
    "a sub-agent run that is a root": (_orphan, "AT302", ("0",)),
    "a sub-agent in another trace": (_other_trace, "AT303", ("1.2:1", "1.2")),
    "a priced model shown as $0": (_free, "AT401", ("1.1",)),
    "a tool call left in doubt": (_in_doubt, "AT402", ("1.2",)),
}


@pytest.mark.parametrize("defect", list(SEEDED))
def test_a_seeded_defect_is_found_and_nothing_else(
    clean: Path, tmp_path: Path, defect: str
) -> None:
    edit, rule, paths = SEEDED[defect]
    finding = one(seeded(clean, tmp_path / "seeded", edit))
    assert (finding.rule, finding.paths) == (rule, paths)


def test_a_joined_run_is_an_orphan_only_when_it_names_this_session(
    clean: Path, tmp_path: Path
) -> None:
    """A process started from a carrier that recorded into another sessions directory made a
    session of its own, its caller in another session: no orphan. One naming this session,
    left a root, lost its caller."""

    def joined(session_id: str) -> Callable[[dict[str, Any]], None]:
        def edit(document: dict[str, Any]) -> None:
            block = {"session_id": session_id, "parent_txn_id": "0123456789abcdef"}
            block["parent_path"] = "1.2"
            _first_run(document)["attributes"]["ingress"] = {"source": "joined", "joined": block}

        return edit

    elsewhere = seeded(clean, tmp_path / "elsewhere", joined("0123456789abcdef"))
    assert lint_session(elsewhere) == []
    here = seeded(clean, tmp_path / "here", joined(clean.name[: -len(".json.gz")]))
    finding = one(here)
    assert (finding.rule, finding.paths) == ("AT302", ("0",))


# --- clean sessions ------------------------------------------------------------------------------


def test_the_cafe_demo_has_no_finding(tmp_path: Path) -> None:
    snapshot, stream = record_demo_here(tmp_path)
    assert lint_session(snapshot) == []
    assert lint_session(stream) == []  # the pair read from either file


# --- the command ---------------------------------------------------------------------------------


def lint_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``agenttrace lint ARGS`` in this process: (exit status, stdout, stderr)."""
    try:
        main.main(["lint", *args], prog_name="agenttrace")
        status = 0
    except SystemExit as exited:
        status = int(exited.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


@CONTENT
def test_the_command_prints_a_line_per_finding_and_exits_1(
    traced: Traced, llm: LLMServer, capsys: pytest.CaptureFixture[str]
) -> None:
    llm.reset(*[call("lookup", {"city": "Paris"})] * 3, Reply(content="Sunny."))
    loop_agent(llm)
    session = saved(traced)
    status, out, _ = lint_cli(capsys, str(session))
    assert status == 1
    line, summary = out.splitlines()
    assert line.startswith("run 1  AT101 repeated-tool-call  lookup called 3 times")
    assert "(wasted 36 tokens, $" in line
    assert summary.startswith("1 finding(s); wasted 36 tokens, $")

    status, out, _ = lint_cli(
        capsys, session.name[: -len(".json.gz")], "--json", "--sessions-dir", str(session.parent)
    )
    assert status == 1
    document = json.loads(out)
    assert (document["format"], document["version"]) == ("agenttrace.lint", 1)
    assert document["session_id"] == session.name[: -len(".json.gz")]
    (finding,) = document["findings"]
    assert set(finding) == {"rule", "name", "message", "run", "paths", "span_ids", "wasted"}
    assert finding["wasted"]["tokens"] == 36 == document["total"]["wasted_tokens"]
    assert document["settings"]["repeat_min_calls"] == 3

    status, out, _ = lint_cli(capsys, str(session), "--set", "repeat_min_calls=4")
    assert (status, out) == (0, "no finding\n")


def test_the_command_refuses_bad_input_in_one_line(
    clean: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "junk.json.gz").write_bytes(b"not gzip")
    for args in (
        [str(tmp_path / "junk.json.gz")],
        [str(tmp_path / "missing.json.gz")],
        [str(clean), "--set", "no_such_setting=1"],
        [str(clean), "--set", "max_attempts=many"],
    ):
        status, out, err = lint_cli(capsys, *args)
        assert (status, out) == (2, ""), args
        assert len(err.splitlines()) == 1 and err.startswith("agenttrace: error: "), err
