"""Trace fields on every flat entry (issue 38, item 4; seed 002, Open Gap 4): each accounting
entry (a ledger line, an op's ``accounting``, an ``op_accounted`` line) and each log entry
names its agent run's parent run, ``parentTxnId``, so a ledger line or a log read on its own
(the ledger file, serve's flat ``logs`` and ``accounting``) says where it belongs.

Real runs: the cafe demo on the scripted model (a root agent whose tool runs two sub-agents),
and a root whose tool runs a sub-agent that logs; the files are read back as written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import msgspec

import agenttrace
from agenttrace.formats.session.files import read_session_file, snapshot_path, stream_path
from agenttrace.formats.session.optree import hosted_sessions
from agenttrace.formats.session.schema import AccountingEntry, LogEntry
from agenttrace.formats.session.schema_file import published_schema
from agenttrace.views.live import read_live, session_document
from examples.cafe import SCRIPTS, run_first
from examples.scripted_model import ScriptedModel

from .conftest import Traced
from .test_ledger_fields import TOOL_ENTRY


def ledger(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "accounting.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def valid(definition: str, entry: dict[str, Any]) -> list[str]:
    """What the published schema says is wrong with ``entry`` as a ``definition``."""
    validator = jsonschema.Draft202012Validator(
        {"$defs": published_schema()["$defs"], "$ref": f"#/$defs/{definition}"}
    )
    return [error.message for error in validator.iter_errors(entry)]


async def record_cafe(traced: Traced) -> agenttrace.Session:
    """The cafe demo's first run on the scripted model, in a session of its own, its lines
    written (the ledger, the stream, the session file)."""
    session = agenttrace.new_session()
    with ScriptedModel(SCRIPTS) as model:
        await run_first({"api_key": "offline-test-key", "api_base": model.api_base})
    traced.handle.force_flush()
    return session


def ops_of(run: dict[str, Any]) -> list[dict[str, Any]]:
    """Every op under ``run``, its sub-agents' too."""
    found = []
    for turn in run["turns"]:
        for op in turn["ops"]:
            found.append(op)
            for child in hosted_sessions(op):
                found += ops_of(dict(child))
    return found


async def test_every_ledger_line_names_the_run_whose_tool_call_ran_its_run(
    traced: Traced, tmp_path: Path
) -> None:
    session = await record_cafe(traced)
    lines = ledger(tmp_path)
    assert all("parentTxnId" in line for line in lines), lines
    (root_txn,) = {line["txnId"] for line in lines if line["callPath"] == "Agent"}
    by_agent = {(line["callPath"], line["parentTxnId"]) for line in lines}
    # The root's own ops: no parent run; Jack's and Jill's: the root's run, whose tool ran them.
    assert by_agent == {("Agent", None), ("Agent/Jack", root_txn), ("Agent/Jill", root_txn)}
    for line in lines:
        msgspec.convert(line, AccountingEntry)
        assert valid("AccountingEntry", line) == []
    # The session file's entries and the stream's op_accounted lines are the same entries.
    sessions = tmp_path / "sessions"
    (run,) = read_session_file(snapshot_path(sessions, session.session_id)).runs
    in_tree = [entry for op in ops_of(run) for entry in op["accounting"]]
    assert sorted(map(json.dumps, in_tree)) == sorted(map(json.dumps, lines))
    accounted = read_session_file(stream_path(sessions, session.session_id)).accounted
    assert sorted(json.dumps(e["accounting"]) for e in accounted) == sorted(map(json.dumps, lines))


def test_every_log_names_its_run_and_the_run_above_it(traced: Traced, tmp_path: Path) -> None:
    session = agenttrace.new_session()

    @agenttrace.tool
    def ask(question: str) -> str:
        with agenttrace.agent("Helper"):
            agenttrace.log("VRB", "the helper looks it up", question=question)
            with agenttrace.tool("lookup"):
                agenttrace.log("WRN", "the index is stale")
        return "42"

    @agenttrace.agent("Boss")
    def boss() -> str:
        agenttrace.log("VRB", "the boss asks")
        return ask("what is six times seven")

    assert boss() == "42"
    traced.handle.force_flush()
    sessions = tmp_path / "sessions"
    (run,) = read_session_file(snapshot_path(sessions, session.session_id)).runs
    helper = run["turns"][0]["ops"][0]["childSession"]
    logs = [
        *run.get("logs", []),
        *[log for turn in run["turns"] for log in turn.get("logs", [])],
        *[log for op in ops_of(run) for log in op["logs"]],
        *helper.get("logs", []),
        *[log for turn in helper["turns"] for log in turn.get("logs", [])],
    ]
    ids = sorted(
        (log["message"], log["originTxnId"], log["txnId"], log["parentTxnId"])
        for log in logs
        if "source" not in log  # the agenttrace.log calls (the ends' lines: tests/test_op_logs.py)
    )
    origin = run["txnId"]
    assert ids == [
        ("the boss asks", origin, origin, None),
        ("the helper looks it up", origin, helper["txnId"], origin),
        ("the index is stale", origin, helper["txnId"], origin),
    ]
    for log in logs:
        msgspec.convert(log, LogEntry)
        assert valid("LogEntry", log) == []
    # serve's flat lists (GET /api/runs/{id}/tree): each entry says whose it is on its own.
    document = session_document(read_live(sessions, session.session_id))
    flat = {(log["message"], log["txnId"], log["parentTxnId"]) for log in document["logs"]}
    assert ("the index is stale", helper["txnId"], origin) in flat
    assert {(e["command"], e["parentTxnId"]) for e in document["accounting"]} == {
        ("lookup", origin),
        ("ask", None),
    }


def test_entries_of_earlier_releases_without_the_fields_still_read() -> None:
    log = {"ts": 1795393954351, "level": "VRB", "message": "hi", "path": "1.1"}
    msgspec.convert(log, LogEntry)
    assert valid("LogEntry", log) == []
    entry = {key: value for key, value in TOOL_ENTRY.items() if key != "callPath"}
    msgspec.convert(entry, AccountingEntry)
    assert valid("AccountingEntry", entry) == []
    # Entries of this release, with them, read too.
    txn = {"originTxnId": "91397038ebfdb98b", "txnId": "0123456789abcdef"}
    for new in ({**entry, "parentTxnId": None}, {**log, **txn, "parentTxnId": "91397038ebfdb98b"}):
        definition = "AccountingEntry" if "type" in new else "LogEntry"
        msgspec.convert(new, AccountingEntry if "type" in new else LogEntry)
        assert valid(definition, new) == []
    # And a parent that is no txn id is refused, by the reader and by the published schema.
    for bad in ({**entry, "parentTxnId": "../x"}, {**log, "parentTxnId": 7}):
        definition = "AccountingEntry" if "type" in bad else "LogEntry"
        assert valid(definition, bad) != []
