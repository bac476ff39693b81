"""Every log lands on its op (issue 38, item 1; seed 002, Key Shape, Open Gap 1, Acceptance 8):
the lines the console prints at an op's end (its summary, its failure) are log entries on the
op in the session file whatever the console prints, and agenttrace's own warnings about an op
(a tool result the journal cannot keep, a ledger it cannot write) are log entries on that op,
which ``agenttrace tree``, serve's flat ``logs`` and the exports show where they happened.

Real runs: decorators, litellm against the local LLM server, the files read back as written.
"""

from __future__ import annotations

import gzip
import logging
from pathlib import Path
from typing import Any

import litellm
import msgspec
import pytest

import agenttrace
from agenttrace._internal import errors as internal_errors
from agenttrace.formats.session.files import read_session_file, snapshot_path
from agenttrace.formats.session.schema import MAX_NODE_LOGS, LogEntry
from agenttrace.views.live import read_live, session_document

from .conftest import Traced
from .helpers import agenttrace_command
from .llm_server import LLMServer
from .test_trace_fields import ops_of, valid

MODEL = "openai/gpt-4o-mini"
SECRET = "abc.def-ghi_jkl"


def chat(llm: LLMServer) -> Any:
    return litellm.completion(
        model=MODEL,
        messages=[{"role": "user", "content": "hi"}],
        api_base=llm.api_base,
        api_key="sk-agenttrace-test-key-0001",
        max_retries=0,
    )


def snapshot(tmp_path: Path, session: agenttrace.Session) -> Path:
    return snapshot_path(tmp_path / "sessions", session.session_id)


def snapshot_text(tmp_path: Path, session: agenttrace.Session) -> str:
    return gzip.decompress(snapshot(tmp_path, session).read_bytes()).decode()


def the_run(traced: Traced, tmp_path: Path, session: agenttrace.Session) -> dict[str, Any]:
    traced.handle.force_flush()
    (run,) = read_session_file(snapshot(tmp_path, session)).runs
    return dict(run)


def op_named(run: dict[str, Any], name: str) -> dict[str, Any]:
    (op,) = [op for op in ops_of(run) if op["name"] == name]
    return op


def lines(node: dict[str, Any]) -> list[str]:
    return [f"{log['level']} {log['message']}" for log in node.get("logs", [])]


def shop(llm: LLMServer) -> None:
    """An agent that asks the model, runs a tool that works and one that fails."""

    @agenttrace.tool
    def look_up(item: str) -> str:
        return f"{item}: in stock"

    @agenttrace.tool
    def pay(amount: int) -> str:
        raise ValueError(f"card declined for {amount}, Authorization: Bearer {SECRET}")

    @agenttrace.agent("Shop")
    def run() -> None:
        chat(llm)
        look_up("tea")
        with pytest.raises(ValueError):
            pay(3)

    run()


def test_the_consoles_lines_are_on_their_ops_with_the_console_quiet(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    session = agenttrace.new_session()
    shop(llm)
    assert "VRB" not in traced.output()  # quiet: the summaries are not printed...
    run = the_run(traced, tmp_path, session)
    attempt, look_up, pay = (op_named(run, name) for name in ("gpt-4o-mini", "look_up", "pay"))
    # ...and the session file has them all the same, on the op each is about.
    (summary,) = lines(attempt)
    assert summary.startswith("VRB ok ") and ", attempt 1, tokens in " in summary, summary
    (done,) = lines(look_up)
    # In: {"item": "tea"}; out: its result.
    assert done.startswith("VRB ok ") and done.endswith("ms, chars in 15 out 13"), done
    (failure,) = lines(pay)
    assert failure.startswith("WRN failed (ValueError) after ")
    # Redacted as the console's lines are.
    assert failure.endswith(": card declined for 3, Authorization: Bearer [REDACTED]"), failure
    assert SECRET not in snapshot_text(tmp_path, session)
    assert lines(run) == [lines(run)[0]] and lines(run)[0].startswith("VRB agent run ok ")
    for op in (attempt, look_up, pay):
        (entry,) = op["logs"]
        assert entry["source"] == "end"
        assert entry["path"] == op["path"]
        assert entry["ts"] == op["endedAt"]
        assert (entry["originTxnId"], entry["txnId"], entry["parentTxnId"]) == (
            run["txnId"],
            run["txnId"],
            None,
        )
        msgspec.convert(entry, LogEntry)
        assert valid("LogEntry", entry) == []


@pytest.mark.console("verbose")
def test_the_op_keeps_the_very_lines_a_verbose_console_prints(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    session = agenttrace.new_session()
    shop(llm)
    printed = traced.output().splitlines()
    run = the_run(traced, tmp_path, session)
    for op in ops_of(run):
        # The console's line for the op: txn, path, kind/id, then what the op keeps.
        mine = [line for line in printed if f"] {op['path']} " in line]
        assert [line.split(": ", 1)[1] for line in mine] == lines(op), (mine, op["logs"])


def test_a_tool_result_the_journal_cannot_keep_is_a_warning_on_its_op(
    traced: Traced,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
) -> None:
    monkeypatch.setattr(internal_errors, "raise_internal_errors", False)
    internal_errors.reset_reported()
    session = agenttrace.new_session()
    loop: list[Any] = []
    loop.append(loop)  # no JSON holds it: the journal cannot write how the call ended

    @agenttrace.tool
    def knot() -> list[Any]:
        return loop

    @agenttrace.agent("Knotter")
    def run() -> None:
        assert knot() is loop

    with caplog.at_level(logging.WARNING, logger="agenttrace"):
        run()
    run_ = the_run(traced, tmp_path, session)
    op = op_named(run_, "knot")
    ours = [log for log in op["logs"] if log.get("source") == "agenttrace"]
    assert ours, op["logs"]
    # The journal could not write how it ended, nor the span record its result: both on it.
    assert [log["message"].split(",")[0] for log in ours] == [
        "agenttrace: internal error in step journal",
        "agenttrace: internal error in tool span",
    ]
    for log in ours:
        assert log["level"] == "WRN" and log["path"] == op["path"]
        assert log["txnId"] == run_["txnId"]
        assert valid("LogEntry", log) == []
    assert not [log for log in run_.get("logs", []) if log.get("source") == "agenttrace"]
    # The Python logger still has them.
    logged = [record.getMessage() for record in caplog.records]
    assert [message for message in logged if "internal error in" in message] == [
        log["message"] for log in ours
    ]


def test_a_ledger_that_cannot_be_written_is_a_warning_on_the_op_and_in_the_tree(
    traced: Traced, llm: LLMServer, tmp_path: Path
) -> None:
    (tmp_path / "accounting.jsonl").mkdir()  # the billing file cannot be opened
    session = agenttrace.new_session()

    @agenttrace.agent("Buyer")
    def run() -> None:
        chat(llm)

    run()
    run_ = the_run(traced, tmp_path, session)
    attempt = op_named(run_, "gpt-4o-mini")
    (warning,) = [log for log in attempt["logs"] if log.get("source") == "agenttrace"]
    assert warning["level"] == "WRN" and warning["path"] == attempt["path"]
    assert warning["message"].startswith("agenttrace: cannot write the billing ledger ")
    # agenttrace tree shows it under the attempt; serve's flat list has it.
    shown = agenttrace_command("tree", str(snapshot(tmp_path, session)))
    assert shown.returncode == 0, shown.stderr
    tree = shown.stdout.splitlines()
    (at,) = [i for i, line in enumerate(tree) if f"{attempt['path']} llm gpt-4o-mini" in line]
    assert "WRN agenttrace: cannot write the billing ledger" in tree[at + 1]
    flat = session_document(read_live(tmp_path / "sessions", session.session_id))["logs"]
    assert warning["message"] in [log["message"] for log in flat]


def test_a_node_keeps_at_most_its_cap_of_log_entries(traced: Traced, tmp_path: Path) -> None:
    session = agenttrace.new_session()

    @agenttrace.tool
    def chatty() -> None:
        for number in range(MAX_NODE_LOGS + 5):
            agenttrace.log("VRB", f"line {number}")

    @agenttrace.agent("Talker")
    def run() -> None:
        chatty()

    run()
    logs = op_named(the_run(traced, tmp_path, session), "chatty")["logs"]
    assert len(logs) == MAX_NODE_LOGS
    assert logs[-2]["message"] == f"line {MAX_NODE_LOGS - 2}"
    # The last place counts what was not kept: 6 lines and the op's own summary.
    assert logs[-1]["dropped"] == 7
    assert logs[-1]["level"] == "WRN" and "7 more log entries" in logs[-1]["message"]
