"""The billing ledger: one line per LLM attempt and tool call of a run's whole tree."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import re
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agenttrace
from agenttrace import semconv as sc
from agenttrace._internal.redact import remember_secret
from agenttrace.recorder.ledger import append_lines
from examples.cafe import SCRIPTS, run_first
from examples.scripted_model import ScriptedModel

from .conftest import Traced
from .helpers import child_env


def ledger(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "accounting.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def test_a_run_bills_every_attempt_and_tool_call_sub_agents_included(
    traced: Traced, tmp_path: Path
) -> None:
    agenttrace.new_session()
    with ScriptedModel(SCRIPTS) as model:
        await run_first({"api_key": "offline-test-key", "api_base": model.api_base})
    traced.handle.force_flush()
    records = ledger(tmp_path)
    assert [r["type"] for r in records].count("llm") == 6
    assert [r["type"] for r in records].count("tool") == 3
    origins = {r["originTxnId"] for r in records}
    assert len(origins) == 1
    jill = next(r for r in records if r["path"] == "3.2:2.1.1")
    assert jill["agentId"] == "agent_003" and jill["callPath"] == "Agent/Jill"
    assert jill["provider"] == "anthropic" and jill["model"] == "claude-sonnet-4-5-20250929"
    assert jill["tokens"]["inputTokens"] > 0 and jill["costUsd"] > 0
    assert jill["status"] == "ok" and jill["latency"] > 0 and jill["timestamp"] > 0
    discuss = next(r for r in records if r["path"] == "3.2")
    assert discuss["providerLabel"] == "discuss"
    assert discuss["charactersIn"] > 0 and discuss["charactersOut"] > 0
    assert discuss["callPath"] == "Agent"


def test_a_failed_run_is_billed_with_its_errors(traced: Traced, tmp_path: Path) -> None:
    @agenttrace.tool
    def broken() -> None:
        raise RuntimeError("the tool broke")

    @agenttrace.agent("Failing")
    def run() -> None:
        broken()

    with pytest.raises(RuntimeError):
        run()
    traced.handle.force_flush()
    (record,) = ledger(tmp_path)
    assert record["status"] == "failed" and record["type"] == "tool"
    assert record["error"] == "RuntimeError: the tool broke"
    assert record["errorType"] == "RuntimeError"


def test_the_names_a_ledger_line_carries_leave_the_process_scrubbed_as_the_span_s_do(
    traced: Traced, tmp_path: Path
) -> None:
    # The outcome is filled from typed values, not read back from the span's (outbound)
    # attributes: the names it carries must be made outbound on their own.
    canary = "sk-ledger-canary-4f1e2d"
    remember_secret(canary)

    @agenttrace.tool(f"lookup {canary}", provider=f"tools-{canary}")
    def lookup() -> str:
        return "found"

    @agenttrace.agent("Scrubbed")
    def run() -> None:
        lookup()

    run()
    traced.handle.force_flush()
    (record,) = ledger(tmp_path)
    assert canary not in json.dumps(record)
    assert record["providerLabel"] == "tools-[REDACTED]"


@contextlib.contextmanager
def worker_held(traced: Traced) -> Iterator[None]:
    """agenttrace's background worker kept busy for the block: only the caller's thread can
    write what is written in it."""
    started, release = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        release.wait(60)

    processor = traced.handle.processor
    assert processor is not None
    processor.schedule(0.0, hold)
    assert started.wait(60)
    try:
        yield
    finally:
        release.set()


def accounted_paths(tmp_path: Path) -> list[str]:
    """The paths of the stream's ``op_accounted`` lines, in order."""
    (stream,) = (tmp_path / "sessions").glob("*.events.jsonl")
    lines = [json.loads(line) for line in stream.read_bytes().splitlines()]
    return [line["path"] for line in lines if line["event_type"] == "op_accounted"]


def test_a_paid_tool_call_is_billed_before_it_returns(traced: Traced, tmp_path: Path) -> None:
    """A tool whose span carries a cost is billed in the caller's thread, as an LLM attempt is;
    a free one waits for the worker, or for the next paid op, which writes it first."""
    agenttrace.new_session()
    with agenttrace.agent("Shopper"):
        with agenttrace.tool("search", arguments={"q": "cats"}):
            pass  # on disk once the stream exists: the run's first event opened it
        traced.handle.force_flush()
        with worker_held(traced):
            with agenttrace.tool("browse", arguments={"page": 1}):
                pass
            assert [r["providerLabel"] for r in ledger(tmp_path)] == ["search"]
            with agenttrace.tool("buy", arguments={"item": "cat food"}) as call:
                call.set_attribute(sc.COST_USD, 0.25)
            # Before the worker could: the free call that ended first, then the paid one.
            assert [r["providerLabel"] for r in ledger(tmp_path)] == ["search", "browse", "buy"]
            assert accounted_paths(tmp_path) == ["1.1", "1.2", "1.3"]
        traced.handle.force_flush()
    traced.handle.force_flush()
    assert [r["providerLabel"] for r in ledger(tmp_path)] == ["search", "browse", "buy"]
    assert accounted_paths(tmp_path) == ["1.1", "1.2", "1.3"]


def test_a_forked_child_does_not_write_what_its_parent_left_to_write(
    traced: Traced, tmp_path: Path
) -> None:
    """A free tool call's accounting waits for the parent's worker; a child forked meanwhile
    bills only its own ops, so the parent's line is in the ledger once."""
    agenttrace.new_session()
    with agenttrace.agent("Parent"), worker_held(traced):
        with agenttrace.tool("browse", arguments={"page": 1}):
            pass
        pid = os.fork()
        if pid == 0:  # the child: a paid op writes what waits before its own line
            with agenttrace.tool("buy", arguments={}) as call:
                call.set_attribute(sc.COST_USD, 0.25)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    traced.handle.force_flush()
    assert sorted(r["providerLabel"] for r in ledger(tmp_path)) == ["browse", "buy"]


def test_a_run_stopped_by_exit_is_billed_at_shutdown(tmp_path: Path) -> None:
    code = textwrap.dedent(
        f"""
        import agenttrace
        agenttrace.init(billing_file={str(tmp_path / "accounting.jsonl")!r},
                        sessions_dir={str(tmp_path / "sessions")!r}, instrument_litellm=False)
        with agenttrace.agent("Stopped"), agenttrace.tool("half_done"):
            pass
        run = agenttrace.agent("Unfinished")
        run.__enter__()  # still running when the interpreter exits
        with agenttrace.tool("done_before_exit"):
            pass
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    labels = sorted(r["providerLabel"] for r in ledger(tmp_path))
    assert labels == ["done_before_exit", "half_done"]


def test_appends_from_two_processes_never_interleave(tmp_path: Path) -> None:
    path = tmp_path / "accounting.jsonl"
    code = textwrap.dedent(
        f"""
        import json, sys
        from pathlib import Path
        from agenttrace.recorder.ledger import append_lines
        who = sys.argv[1]
        for batch in range(60):
            lines = [json.dumps({{"who": who, "batch": batch, "i": i, "pad": "x" * 9000}})
                     for i in range(8)]
            append_lines(Path({str(path)!r}), lines)
        """
    )
    writers = [subprocess.Popen([sys.executable, "-c", code, name]) for name in ("first", "second")]
    assert [w.wait(timeout=480) for w in writers] == [0, 0]
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 2 * 60 * 8
    # Each run's lines stay together: a batch is never split by the other process's lines.
    for start in range(0, len(rows), 8):
        batch = rows[start : start + 8]
        assert len({(r["who"], r["batch"]) for r in batch}) == 1
        assert [r["i"] for r in batch] == list(range(8))


def test_an_unwritable_ledger_warns_once_and_at_exit_and_the_agent_runs_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(OSError):
        append_lines(blocker / "accounting.jsonl", ["{}"])
    code = textwrap.dedent(
        f"""
        import agenttrace
        agenttrace.init(billing_file={str(blocker / "ledger.jsonl")!r},
                        sessions_dir={str(tmp_path / "sessions")!r}, instrument_litellm=False)
        for _ in range(3):
            with agenttrace.agent("Runner"), agenttrace.tool("step"):
                pass
        print("finished")
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout == "finished\n"
    warnings = result.stderr.splitlines()
    assert len(warnings) == 2, result.stderr
    assert warnings[0].startswith("agenttrace: cannot write the billing ledger ")
    # Free tool calls: the worker writes what ended by then, 1 to 3 of them, in one write.
    assert re.search(r": ([123]) accounting records? waits? in memory", warnings[0])
    assert warnings[0].endswith("The agent keeps running.")
    assert warnings[1].startswith("agenttrace: could not write the billing ledger ")
    assert warnings[1].endswith("before exit (File exists): 3 accounting records are not in it")


@pytest.mark.parametrize(
    "torn",
    [
        b'{"n": 3, "pad": "xx',  # a record cut off
        b'{"n": 3, "name": "\xc3',  # in the middle of a UTF-8 character
        b'{"n": 3, "pad": "' + b"x" * 200_000,  # longer than a block read back at a time
    ],
)
@pytest.mark.parametrize("before", [0, 3])
def test_a_torn_last_line_is_cut_off_before_appending(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, torn: bytes, before: int
) -> None:
    """What a process killed mid-append leaves (a last line without its end) is cut off, under
    the lock, before the next append: the next record never merges into it."""
    path = tmp_path / "accounting.jsonl"
    path.write_bytes(b"".join(b'{"n": %d}\n' % n for n in range(before)) + torn)
    append_lines(path, [json.dumps({"n": 4}), json.dumps({"n": 5})])
    assert [row["n"] for row in ledger(tmp_path)] == [*range(before), 4, 5]
    [warning] = [r.getMessage() for r in caplog.records]
    assert f"ended in a torn line ({len(torn)} bytes" in warning
    append_lines(path, [json.dumps({"n": 6})])  # a whole file: nothing more to say
    assert len(caplog.records) == 1


KILLED_APPENDER = """
import json, sys
from pathlib import Path
from agenttrace.recorder.ledger import append_lines
pad = json.dumps("x" * (8 << 20))  # made once: most of each loop is then the write itself
print("go", flush=True)
for n in range(10_000):
    append_lines(Path(sys.argv[1]), ['{"n": %d, "pad": %s}' % (n, pad)])
"""


@pytest.mark.e2e
def test_a_ledger_torn_by_sigkill_reads_whole_after_the_next_append(tmp_path: Path) -> None:
    """Processes appending 8 MB records are SIGKILLed at random moments (a kill lands in the
    write about one time in three here) until one leaves a torn line (or 40 kills); after each
    kill another process appends, and every line of the ledger is a whole record."""
    seed = int(os.environ.get("FAULT_SEED") or random.randrange(2**32))
    rng = random.Random(seed)
    torn = kills = 0
    for _ in range(40):
        path = tmp_path / f"ledger{kills}.jsonl"
        child = subprocess.Popen(
            [sys.executable, "-c", KILLED_APPENDER, str(path)],
            env=child_env(),
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None and child.stdout.readline() == "go\n"
        time.sleep(rng.uniform(0.0, 0.3))
        child.kill()
        child.wait(timeout=30)
        kills += 1
        left = path.read_bytes() if path.exists() else b""
        torn += bool(left) and not left.endswith(b"\n")
        append_lines(path, [json.dumps({"n": "after"})])
        rows = [json.loads(line) for line in path.read_bytes().splitlines()]
        assert rows[-1] == {"n": "after"}
        assert [row["n"] for row in rows[:-1]] == list(range(len(rows) - 1))
        path.unlink()
        if torn:
            break
    print(f"FAULT_SEED={seed}: {kills} kills of a ledger appender, {torn} left a torn line")
    assert torn, f"FAULT_SEED={seed}: no kill of {kills} landed in a write"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_opens_the_ledger_for_itself(tmp_path: Path) -> None:
    """The ledger stays open between appends; a forked child must not share that open file
    (its flock would then not keep the parent out): it opens its own, and both lines land."""
    from agenttrace.recorder.ledger import _LedgerFile

    path = tmp_path / "accounting.jsonl"
    ledger = _LedgerFile(path)
    ledger.append(b'{"n": "parent"}\n')
    pid = os.fork()
    if pid == 0:  # the child: its copy of the descriptor was dropped at fork
        code = 0 if ledger._fd == -1 else 3
        try:
            ledger.append(b'{"n": "child"}\n')
        except OSError:
            code = 4
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    ledger.append(b'{"n": "parent again"}\n')
    assert [json.loads(line)["n"] for line in path.read_bytes().splitlines()] == [
        "parent", "child", "parent again",
    ]  # fmt: skip


def test_the_open_ledger_cuts_a_torn_line_another_process_left(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Kept open between appends, the ledger still sees a torn line another process's crash
    left after its last append, and cuts it off before the next line (one warning)."""
    from agenttrace.recorder.ledger import _LedgerFile

    path = tmp_path / "accounting.jsonl"
    ledger = _LedgerFile(path)
    ledger.append(b'{"n": 1}\n')
    with path.open("ab") as other:  # another process, killed in the middle of its line
        other.write(b'{"n": "to')
    caplog.set_level(logging.WARNING, logger="agenttrace")
    ledger.append(b'{"n": 2}\n')
    assert [json.loads(line)["n"] for line in path.read_bytes().splitlines()] == [1, 2]
    assert len([m for m in caplog.messages if "torn line" in m]) == 1
