"""Resuming an interrupted run re-enters it (issue 22 item 3): the run's code is called again
from its start, and each tool step it reaches is handled by what the journal says became of it
and by the resume policy (docs/journal.md, "Re-entry"). The processes are real: an agent paying
through the payment server on 127.0.0.1 is killed with SIGKILL, then resumed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from msgspec import to_builtins

import agenttrace
from agenttrace.formats.session.fullest import load_fullest
from agenttrace.model import journal as j
from agenttrace.model import journal_lines as jl
from agenttrace.model.reentry import Reentry, check_policy
from agenttrace.model.rewind import rewind_transcripts, undo_rewind
from agenttrace.model.unanswered import INTERRUPTED_RESULT
from agenttrace.session.reentry_match import why_not
from agenttrace.tracing.run_arguments import arguments_fingerprint

from .conftest import Traced
from .fork_server import Forks
from .helpers import (
    ROOT,
    killed_then_resumed_shop,
    llm_entries,
    run_journal_child,
    shop_fork_server,
)
from .llm_server import LLMServer, Reply
from .payment_server import PaymentServer
from .test_cli import agenttrace as run_cli
from .test_cli import ok, one_error_line
from .test_llm_steps import rearm
from .test_steps_journal import journal_lines

RUN = "0123456789abcdef"
FP = "sha256:" + "1" * 64
OTHER_FP = "sha256:" + "2" * 64


def child(
    tmp_path: Path, payments: PaymentServer, effect: str, kill: str, mode: str = "run"
) -> subprocess.CompletedProcess[str]:
    """The shop agent (tests/journal_child.py) with its session and its ledger in ``tmp_path``."""
    billing = str(tmp_path / "ledger.jsonl")
    return run_journal_child(
        tmp_path / "sessions", payments.url, effect, kill, mode, AGENTTRACE_BILLING_FILE=billing
    )


def killed_then_resumed(
    tmp_path: Path, effect: str, kill: str, mode: str = "resume", between: Any = None
) -> tuple[dict[str, Any], PaymentServer]:
    """Run the shop agent until it kills itself, then resume and re-enter it; what the
    resumed process reported, and the payment server (stopped)."""
    payments = PaymentServer().start()
    try:
        first = child(tmp_path, payments, effect, kill)
        assert first.returncode == -9, first.stderr
        if between is not None:
            between()
        resumed = child(tmp_path, payments, effect, kill, mode)
        assert resumed.returncode == 0, resumed.stderr
    finally:
        payments.stop()
    return json.loads(resumed.stdout.splitlines()[-1]), payments


def billed(tmp_path: Path, tool: str) -> int:
    lines = (tmp_path / "ledger.jsonl").read_text().splitlines()
    return sum(1 for line in lines if json.loads(line).get("command") == tool)


@pytest.mark.e2e
def test_an_effect_in_doubt_stops_the_resume_naming_the_call(tmp_path: Path) -> None:
    report, payments = killed_then_resumed(tmp_path, "effect", "inside")
    assert len(payments.charges) == 1  # never charged again
    assert report["in_doubt"] == [["1.2", "charge"]]
    assert 'charge({"amount":5})' in report["error"]
    assert report["bodies"] == []  # the read before it was done: answered from the journal
    assert report["replayed"] == ["execute_tool balance"]
    assert billed(tmp_path, "balance") == 1  # the replayed call bills nothing new
    # Stopped there, the run is still the interrupted one: decided, a resume re-enters it.
    (stream,) = (tmp_path / "sessions").glob("*.events.jsonl")
    journal = j.Journal(json.loads(line) for line in stream.read_text().splitlines())
    interrupted = journal.interrupted_run()
    assert interrupted is not None and interrupted.key[2] == 2


@pytest.mark.e2e
def test_an_idempotent_call_in_doubt_runs_again_with_the_same_key(tmp_path: Path) -> None:
    report, payments = killed_then_resumed(tmp_path, "idempotent", "inside")
    assert report["answer"] == "ch_1"  # the server answered the second send with the first
    assert report["bodies"] == ["charge"]
    (made,) = payments.charges  # one charge per logical call
    assert made["key"].startswith("at-")


@pytest.mark.e2e
def test_a_read_call_in_doubt_runs_again(tmp_path: Path) -> None:
    report, payments = killed_then_resumed(tmp_path, "read", "inside")
    assert report["bodies"] == ["charge"] and report["answer"] == "ch_2"
    assert len(payments.charges) == 2  # what a call declared read costs if it was not


@pytest.mark.e2e
def test_a_done_call_is_answered_from_the_journal(tmp_path: Path) -> None:
    report, payments = killed_then_resumed(tmp_path, "effect", "after_done")
    assert report == {
        "answer": "ch_1",
        "bodies": [],
        "replayed": ["execute_tool balance", "execute_tool charge"],
    }
    assert len(payments.charges) == 1
    assert billed(tmp_path, "charge") == 1
    (stream,) = (tmp_path / "sessions").glob("*.events.jsonl")
    lines = [json.loads(line) for line in stream.read_text().splitlines()]
    replayed = [line["name"] for line in lines if line.get("state") == "replayed"]
    assert replayed == ["balance", "charge"]  # the stream says so too


@pytest.mark.e2e
def test_a_verifier_decides_a_call_in_doubt(tmp_path: Path) -> None:
    report, payments = killed_then_resumed(tmp_path, "effect", "inside", "verify")
    assert report["answer"] == "ch_1" and report["bodies"] == []
    assert len(payments.charges) == 1


@pytest.mark.e2e
def test_resolve_done_then_resume_does_not_call_the_body(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    result = tmp_path / "result.json"
    result.write_text('"ch_seen_in_dashboard"')

    def resolve() -> None:
        (stream,) = sessions.glob("*.events.jsonl")
        ok(run_cli(tmp_path, "resolve", str(stream), "1.2", "--done", str(result)))

    report, payments = killed_then_resumed(tmp_path, "effect", "inside", between=resolve)
    assert report["answer"] == "ch_seen_in_dashboard" and report["bodies"] == []
    assert len(payments.charges) == 1


# --- the decision table, on journals written by hand ---------------------------------------------


def reentry(*lines: dict[str, Any], policy: dict[str, str] | None = None) -> Reentry:
    journal = j.Journal(lines)
    return Reentry(RUN, 2, journal, check_policy(policy))


def intent(label: str, effect: str, attempt: int = 1, fp: str = FP) -> dict[str, Any]:
    return to_builtins(jl.intent_line(
        (RUN, label, attempt), agent_id="agent_001", name="pay", effect=effect,
        request_fingerprint=fp, arguments='{"n": 1}',
    ))  # fmt: skip


def test_the_plan_for_each_state_and_class() -> None:
    done = to_builtins(
        jl.done_line((RUN, "1.1", 1), agent_id="agent_001", kind="tool", name="pay", result="7")
    )
    failed_no = to_builtins(
        jl.failed_line(
            (RUN, "1.1", 1), agent_id="agent_001", kind="tool", name="pay", error="x", applied="no"
        )
    )
    failed_unknown = {**failed_no, "applied": "unknown"}
    assert reentry(intent("1.1", "effect"), done).plan("1.1", "pay", FP).result == 7
    assert reentry(intent("1.1", "effect"), failed_no).plan("1.1", "pay", FP).attempt == 2
    assert reentry(intent("1.1", "effect"), failed_unknown).plan("1.1", "pay", FP).what == "verify"
    assert reentry(intent("1.1", "effect")).plan("1.1", "pay", FP).what == "verify"
    assert reentry(intent("1.1", "idempotent")).plan("1.1", "pay", FP).what == "run"
    assert reentry(intent("1.1", "read")).plan("1.1", "pay", FP).what == "run"
    assert reentry().plan("1.1", "pay", FP).what == "run"  # never reached before
    # Overridden: an effect in doubt runs again (the user's choice, in so many words).
    assert (
        reentry(intent("1.1", "effect"), policy={"effect": "retry"}).plan("1.1", "pay", FP).what
        == "run"
    )
    assert (
        reentry(intent("1.1", "idempotent"), policy={"idempotent": "stop"})
        .plan("1.1", "pay", FP)
        .what
        == "stop"
    )
    # Another question at that place: the journal does not answer it, but a doubt still stops.
    assert reentry(intent("1.1", "effect"), done).plan("1.1", "pay", OTHER_FP).what == "run"
    assert reentry(intent("1.1", "effect")).plan("1.1", "pay", OTHER_FP).what == "stop"
    # The latest attempt counts: a re-entry that ran it again and saw it done.
    again = to_builtins(
        jl.done_line((RUN, "1.1", 2), agent_id="agent_001", kind="tool", name="pay", result="8")
    )
    assert (
        reentry(intent("1.1", "idempotent"), intent("1.1", "idempotent", 2), again)
        .plan("1.1", "pay", FP)
        .result
        == 8
    )


def test_parallel_calls_that_start_in_another_order_find_their_own_steps() -> None:
    five, six = j.tool_fingerprint("pay", {"n": 5}), j.tool_fingerprint("pay", {"n": 6})
    done = to_builtins(
        jl.done_line((RUN, "1.1", 1), agent_id="agent_001", kind="tool", name="pay", result="1")
    )
    lines = (intent("1.1", "effect", fp=five), done, intent("1.2", "effect", fp=six))
    again = reentry(*lines)
    six_first = again.plan("1.1", "pay", six)  # the call in doubt, now started first
    assert (six_first.what, six_first.label) == ("verify", "1.2")
    five_next = again.plan("1.2", "pay", five)
    assert (five_next.what, five_next.result, five_next.label) == ("replay", 1, "1.1")
    # By the model's call id, when the call has one.
    with_ids = [{**line, "call_id": f"call_{line['step']}"} for line in lines]
    by_id = reentry(*with_ids).plan("1.1", "pay", None, call_id="call_1.2")
    assert (by_id.what, by_id.label) == ("verify", "1.2")


def test_decisions_are_applied() -> None:
    for decision, what in (
        ("done", "replay"), ("not_applied", "run"), ("retry", "run"), ("abandon", "abandon")
    ):  # fmt: skip
        line = to_builtins(jl.decision_line((RUN, "1.1", 1), decision, result='{"ok": true}'))  # type: ignore[arg-type]
        plan = reentry(intent("1.1", "effect"), line).plan("1.1", "pay", FP)
        assert plan.what == what, decision
    assert plan.result is None
    line = to_builtins(
        jl.decision_line((RUN, "1.1", 1), "done", result="not json: the text itself")
    )
    assert reentry(intent("1.1", "effect"), line).plan("1.1", "pay", FP).result == (
        "not json: the text itself"
    )


def test_a_policy_names_what_it_refuses() -> None:
    with pytest.raises(ValueError, match="'costly' is not an effect class"):
        check_policy({"costly": "retry"})
    with pytest.raises(ValueError, match="effect: 'maybe' is not one of retry, verify, stop"):
        check_policy({"effect": "maybe"})


# --- LLM steps ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shop_forks() -> Iterator[Forks]:
    """tests/llm_reentry_child.py's runs (two a test), forked from one interpreter that
    imported what it imports, in its order."""
    with shop_fork_server("litellm") as forks:
        yield forks


@pytest.mark.e2e
@pytest.mark.parametrize("shape", ["tool", "stream"])
def test_a_recorded_reply_is_not_asked_for_again(
    tmp_path: Path, llm_server: LLMServer, shop_forks: Forks, shape: str
) -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "charge", "arguments": '{"amount": 5}'},
    }
    first = Reply(content="", tool_calls=[call]) if shape == "tool" else Reply(content="On it!")
    llm_server.reset(first, Reply(content="never sent: the kill comes first"))
    report, charges = killed_then_resumed_shop(
        "llm_reentry_child",
        tmp_path,
        llm_server.api_base,
        shape,
        lambda: len(llm_server.requests),
        lambda: llm_server.reset(Reply(content="Thank you!")),
        shop_forks,
    )
    assert report["answer"] == "Thank you!"
    assert len(llm_server.requests) == 1  # only the reply the killed run never got
    if shape == "stream":
        assert report["said"] == "On it!" and report["chunks"] >= 2  # replayed chunk by chunk
    else:  # the model's tool call, from the journal, has the same id and arguments
        sent = llm_server.requests[0].body["messages"]
        assert sent[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "ch_1"}
    (made,) = charges  # the idempotent charge, sent again with its key, made once
    assert made["key"].startswith("at-")
    assert llm_entries(tmp_path) == 2  # none for the replay
    # The views count what was bought, as the ledger does: the replayed reply is not a third
    # attempt of unknown price, and the tree says it was answered from the journal.
    (stream,) = (tmp_path / "sessions").glob("*.events.jsonl")
    total = json.loads(ok(run_cli(tmp_path, "stats", str(stream), "--json")))["total"]
    assert (total["llm_attempts_ok"], total["llm_attempts_cost_unknown"]) == (2, 0)
    assert total["cost_usd"] is not None
    tree = ok(run_cli(tmp_path, "tree", str(stream)))
    assert "1.1 llm gpt-4o-mini ok" in tree and "replayed" in tree and "cost unknown" not in tree


# --- the command line ------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("effect", ["idempotent", "effect"])
def test_resume_without_a_prompt_re_enters_the_killed_run(tmp_path: Path, effect: str) -> None:
    payments = PaymentServer().start()
    sessions = tmp_path / "sessions"
    env = {"PAYMENTS_URL": payments.url, "CHARGE_EFFECT": effect}
    try:
        killed = subprocess.run(
            [sys.executable, "-m", "tests.reentry_agent", str(sessions)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), "KILL_INSIDE": "1", **env},
            capture_output=True,
            text=True,
            timeout=480,
        )
        assert killed.returncode == -9, killed.stderr
        (stream,) = sessions.glob("*.events.jsonl")
        agent = ("--agent", "tests.reentry_agent:rebuild")
        resumed = run_cli(tmp_path, "resume", str(stream), *agent, cwd=ROOT, **env)
        again = run_cli(tmp_path, "resume", str(stream), *agent, cwd=ROOT, **env)
    finally:
        payments.stop()
    assert len(payments.charges) == 1
    if effect == "idempotent":
        assert "Answer: paid ch_1" in ok(resumed)
        message = one_error_line(again)  # the run ended: nothing left to re-enter
        assert "its last run was not interrupted" in message and "--prompt" in message
    else:
        assert resumed.returncode == 1, resumed.stderr
        assert "1 tool call in doubt, not run again: 1.1 charge(" in resumed.stderr
        assert again.returncode == 1  # still interrupted: stopped again, until it is decided


def test_resume_without_a_prompt_refuses_a_run_called_with_arguments(tmp_path: Path) -> None:
    payments = PaymentServer().start()
    sessions = tmp_path / "sessions"
    env = {"PAYMENTS_URL": payments.url, "CHARGE_EFFECT": "idempotent"}
    try:
        killed = subprocess.run(
            [sys.executable, "-m", "tests.reentry_agent", str(sessions)],
            cwd=ROOT,
            env={
                **os.environ,
                "PYTHONPATH": str(ROOT),
                "KILL_INSIDE": "1",
                "WITH_ARGUMENT": "1",
                **env,
            },
            capture_output=True,
            text=True,
            timeout=480,
        )
        assert killed.returncode == -9, killed.stderr
        (stream,) = sessions.glob("*.events.jsonl")
        before = stream.read_bytes()
        agent = ("--agent", "tests.reentry_agent:rebuild")
        refused = run_cli(tmp_path, "resume", str(stream), *agent, cwd=ROOT, **env)
    finally:
        payments.stop()
    message = one_error_line(refused)  # response() would be a new run, not the killed one
    assert "its interrupted run was called with arguments" in message and "--prompt" in message
    assert len(payments.charges) == 1 and stream.read_bytes() == before  # nothing ran


# --- tools as with-blocks --------------------------------------------------------------------


@pytest.mark.parametrize(("effect", "reruns"), [("idempotent", True), ("effect", False)])
def test_a_with_block_the_journal_cannot_skip_runs_again_or_is_refused(
    traced: Traced, tmp_path: Path, effect: str, reruns: bool
) -> None:
    ran: list[str] = []

    @agenttrace.agent("Shop")
    def shop() -> None:
        with agenttrace.tool("charge", arguments={"amount": 5}, effect=effect) as call:
            ran.append("block")
            call.set_result("ch_1")

    shop()
    traced.handle.force_flush()
    rearm(tmp_path)
    if reruns:
        shop()
        assert ran == ["block", "block"]
        traced.handle.force_flush()
        attempts = [(line["state"], line["attempt"]) for line in journal_lines(tmp_path)]
        assert attempts[-2:] == [("intent", 2), ("done", 2)]
    else:
        with pytest.raises(agenttrace.InDoubtToolCall, match=r"1\.1 charge"):
            shop()
        assert ran == ["block"]  # the block did not run again


def test_transcripts_are_set_back_to_where_the_run_started_and_the_events_say_so() -> None:
    session = agenttrace.Session("rewound")
    agent = session.allocate_agent_id()
    session.log_agent_created(agent, name="Shop", initial=[{"role": "system", "content": "Be"}])
    session.log_transcript_entry(agent, {"role": "user", "content": "Pay 5."})
    started = session.message_counter  # the interrupted run starts here
    session.log_transcript_entry(agent, {"role": "assistant", "content": "Paying."})
    later = session.allocate_agent_id()  # a sub-agent the run created
    session.log_agent_created(later, cause=None, name="Helper")
    rewind_transcripts(session, list(session.events), started)
    contents = [entry["content"] for entry in session.agents[agent].transcript]
    assert contents == ["Be", "Pay 5."]
    replayed = agenttrace.Session("rewound")
    replayed.restore(list(session.events), raw_lines=None)  # what the stream will say
    assert [entry["content"] for entry in replayed.agents[agent].transcript] == contents
    assert later in session.agents  # left as it is


# --- which run a resume re-enters ------------------------------------------------------------


def _match_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


MATCH_PRELOAD = [
    "litellm",
    "opentelemetry.sdk.trace",
    "opentelemetry.sdk.trace.export",
    "opentelemetry.sdk.trace.export.in_memory_span_exporter",
    "agenttrace",
]
"""What tests/resume_match_child.py imports, in its order."""


def match_fork_server() -> Forks:
    """A fork server for tests/resume_match_child.py's runs (:func:`_match_child`)."""
    return Forks(MATCH_PRELOAD, _match_env(), ROOT)


@pytest.fixture(scope="module")
def match_forks() -> Iterator[Forks]:
    """tests/resume_match_child.py's runs (five a test), forked from one interpreter that
    imported what it imports, in its order: litellm's import takes a new one seconds."""
    started = match_fork_server()
    yield started
    started.close()


def _match_child(
    forks: Forks,
    sessions: Path,
    llm_server: LLMServer,
    payments: PaymentServer,
    mode: str,
    *question: str,
) -> subprocess.CompletedProcess[str]:
    """``python -m tests.resume_match_child SESSIONS API_BASE PAYMENTS MODE *QUESTION``
    (forked), to its end."""
    argv = [str(sessions), llm_server.api_base, payments.url, mode, *question]
    out, err = sessions.parent / f"{mode}-stdout.txt", sessions.parent / f"{mode}-stderr.txt"
    forks.start("tests.resume_match_child", argv, _match_env(), ROOT, out, err)
    code = forks.wait()
    return subprocess.CompletedProcess(argv, code, out.read_text(), err.read_text())


def _reported(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _dropped(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "is not re-entered" in line]


@pytest.mark.e2e
def test_a_resume_re_enters_only_a_call_with_the_killed_runs_arguments(
    tmp_path: Path, llm_server: LLMServer, match_forks: Forks
) -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "charge", "arguments": '{"amount": 5}'},
    }
    llm_server.reset(Reply(content="", tool_calls=[call]))
    payments = PaymentServer().start()
    killed_dir = tmp_path / "killed"
    try:
        killed = _match_child(match_forks, killed_dir, llm_server, payments, "run")
        assert killed.returncode == -9, killed.stderr
        copies = {mode: tmp_path / mode for mode in ("same", "other", "fresh", "bare")}
        for copy in copies.values():
            shutil.copytree(killed_dir, copy)
        outcomes: dict[str, tuple[dict[str, Any], list[Any], str]] = {}
        for mode, sessions in copies.items():
            llm_server.reset(Reply(content=f"answer to {mode}"))
            question = () if mode == "same" else ("Is the tea green?",)
            done = _match_child(match_forks, sessions, llm_server, payments, mode, *question)
            sent = [request.body["messages"] for request in llm_server.requests]
            outcomes[mode] = (_reported(done), sent, done.stderr)
    finally:
        payments.stop()
    assert len(payments.charges) == 1  # the killed run's charge; its key made it once again

    same, sent, stderr = outcomes["same"]
    assert same["reenters"] == ["invoke_agent Shop"] and not _dropped(stderr)
    assert len(sent) == 1 and sent[0][-1]["role"] == "tool"  # the reply came from the journal
    (saved,) = copies["same"].glob("*.json.gz")
    runs = load_fullest(saved).runs  # the tree says which run it re-enters, from its start
    reentered = [run["attributes"].get("agenttrace.reenters") for run in runs]
    assert reentered == [None, runs[0]["txnId"]]

    other, sent, stderr = outcomes["other"]
    assert other["armed"] and other["reenters"] == []
    assert sent == [[{"role": "user", "content": "Is the tea green?"}]]  # asked, not replayed
    (line,) = _dropped(stderr)
    assert line.startswith("INFO ") and "'Shop', has other arguments" in line
    assert "call Shop with the same arguments" in line
    # The run found the transcript as the killed run left it, its unanswered call answered.
    assert other["at_start"] == [
        ["user", "Pay 5 for the tea."],
        ["assistant", ""],
        ["tool", INTERRUPTED_RESULT],
    ]

    fresh, _, stderr = outcomes["fresh"]  # exactly as a resume that was told not to re-enter
    assert not fresh["armed"] and not _dropped(stderr)
    assert fresh["at_start"] == other["at_start"]
    assert fresh["transcript"][-1] == ["assistant", "answer to fresh"]
    assert fresh["transcript"][:-1] == other["transcript"][:-1]

    bare, sent, stderr = outcomes["bare"]
    assert bare["reenters"] == [] and sent == [[{"role": "user", "content": "Is the tea green?"}]]
    (line,) = _dropped(stderr)
    assert "is an implicit run" in line
    assert bare["at_start"][:3] == other["at_start"]  # the Shop agent's, put back


@pytest.mark.e2e
def test_an_interrupted_implicit_run_is_not_re_entered(
    tmp_path: Path, llm_server: LLMServer, match_forks: Forks
) -> None:
    sessions = tmp_path / "sessions"
    payments = PaymentServer().start()
    try:
        llm_server.reset(Reply(content="first"))
        killed = _match_child(match_forks, sessions, llm_server, payments, "bare-run", "Hello?")
        assert killed.returncode == -9, killed.stderr
        llm_server.reset(Reply(content="second"))
        resumed = _reported(
            _match_child(match_forks, sessions, llm_server, payments, "bare", "Hello?")
        )
    finally:
        payments.stop()
    assert resumed["answer"] == "second" and not resumed["armed"]  # asked again, not replayed
    assert len(llm_server.requests) == 1
    runs = [line for line in journal_lines(tmp_path, runs=True) if line["kind"] == "run"]
    assert [line.get("implicit") for line in runs if line["state"] == "intent"] == [True, True]
    assert len({line["run"] for line in runs}) == 2  # a new run, not the killed one again


def test_undoing_a_rewind_puts_the_transcripts_back_with_what_was_heard_since() -> None:
    session = agenttrace.Session("undone")
    agent = session.allocate_agent_id()
    session.log_agent_created(agent, name="Shop", initial=[{"role": "system", "content": "Be"}])
    session.log_transcript_entry(agent, {"role": "user", "content": "Pay 5."})
    started = session.message_counter
    session.log_transcript_entry(agent, {"role": "assistant", "content": "Paying."})
    rewound = rewind_transcripts(session, list(session.events), started)
    session.log_transcript_entry(agent, {"role": "user", "content": "Is the tea green?"})
    undo_rewind(session, rewound)
    contents = [entry["content"] for entry in session.agents[agent].transcript]
    assert contents == ["Be", "Pay 5.", "Paying.", "Is the tea green?"]
    replayed = agenttrace.Session("undone")
    replayed.restore(list(session.events), raw_lines=None)
    assert [entry["content"] for entry in replayed.agents[agent].transcript] == contents


def test_only_the_same_entry_point_with_the_same_arguments_and_no_new_input_re_enters() -> None:
    session = agenttrace.Session("matched")
    agent = session.allocate_agent_id()
    session.log_agent_created(agent, name="Shop")
    armed = Reentry(RUN, 2, j.Journal(), check_policy(None), name="Shop", fingerprint=FP)
    armed.rewound = rewind_transcripts(session, list(session.events), session.message_counter)
    assert why_not(session, armed, "Shop", FP, implicit=False) is None
    assert why_not(session, armed, "Till", FP, implicit=False) == "is 'Till'"
    assert why_not(session, armed, "Shop", OTHER_FP, implicit=False) == "has other arguments"
    assert "implicit run" in str(why_not(session, armed, "svc", None, implicit=True))
    session.log_transcript_entry(agent, {"role": "user", "content": "Is the tea green?"})
    assert "heard since the resume" in str(why_not(session, armed, "Shop", FP, implicit=False))
    # A journal of an earlier release has no fingerprint: the next run re-enters, as then.
    earlier = Reentry(RUN, 2, j.Journal(), check_policy(None), name="Shop")
    assert why_not(session, earlier, "Till", OTHER_FP, implicit=True) is None


class _Client:
    """Not data: an argument that counts as its kind."""


def test_a_runs_arguments_fingerprint_counts_data_and_the_kind_of_other_objects() -> None:
    same = arguments_fingerprint((("Pay 5.", _Client()), {"amount": 5}))
    assert same == arguments_fingerprint((("Pay 5.", _Client()), {"amount": 5}))
    assert same != arguments_fingerprint((("Pay 6.", _Client()), {"amount": 5}))
    assert same != arguments_fingerprint((("Pay 5.", _Client()), {"amount": 6}))
    assert arguments_fingerprint(None) == arguments_fingerprint(((), {}))


def test_a_method_runs_line_fingerprints_its_arguments_not_its_agent(
    traced: Traced, tmp_path: Path
) -> None:
    class Clerk:
        name = "Clerk"

        @agenttrace.agent
        def serve(self, question: str) -> str:
            return question

    Clerk().serve("Tea?")
    Clerk().serve("Tea?")
    Clerk().serve("Coffee?")
    traced.handle.force_flush()
    runs = [line for line in journal_lines(tmp_path, runs=True) if line["state"] == "intent"]
    assert [line["name"] for line in runs] == ["Clerk"] * 3
    prints = [line["fingerprint"] for line in runs]
    assert prints[0] == prints[1] == arguments_fingerprint((("Tea?",), {})) != prints[2]
    assert all("Tea" not in json.dumps(line) for line in runs)  # the digest, not the question


def test_a_done_decisions_result_is_the_files_json_else_its_text() -> None:
    """What ``resolve --done FILE`` hands back, as the README says: the file's JSON, else its
    text as it is (``echo ch_1 > FILE`` keeps its newline)."""
    from agenttrace.model.reentry import decided_result

    assert decided_result('"ch_1"\n') == "ch_1"
    assert decided_result('{"id": 1}') == {"id": 1}
    assert decided_result("ch_1\n") == "ch_1\n"
