"""Files written by earlier releases still load: every reader, view, command and resume takes the
sessions the first and the previous release wrote (tests/data/releases/, README there), as the
same format version 1, and the published schema accepts them.

The first release kept no spans in its nodes (no ``span``, no ``resource``/``scope``/
``recording`` on a run's root) and no ``callPath`` in accounting entries; the previous release
wrote what this one writes but for an op's sub-agent runs, which both kept under
``childSessions`` and the first again under ``childSession``. docs/session-file.md, "Files of
earlier releases", lists it.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

import agenttrace
from agenttrace import SessionFileError
from agenttrace.cli import main
from agenttrace.formats.session.files import read_session_file, snapshot_path, stream_path
from agenttrace.formats.session.optree import children, hosted_sessions
from agenttrace.formats.session.schema_file import published_schema
from examples.cafe import SCRIPTS, run_resumed
from examples.scripted_model import ScriptedModel

from .conftest import Traced
from .helpers import ROOT, child_env

RELEASES = ROOT / "tests" / "data" / "releases"
FIRST = "first-b85ec2f"
PREVIOUS = "previous-619d4d5"


@dataclass(frozen=True)
class Kind:
    """What one kind of recorded session holds, whichever release wrote it."""

    runs: int
    llm_ok: int
    llm_failed: int
    tool_calls: int
    agents: dict[str, int]
    """Agent name -> LLM attempts that succeeded."""
    dialog: str
    """``--agents`` of ``agenttrace dialog``."""
    perspective: str
    """The agent of ``agenttrace perspective``."""
    said: str
    """A line the dialog shows."""
    heard: str
    """A line the perspective shows."""


JACK_HEARD = "[Heard]: [Jack]: Hi, I'm Jack. *extends hand*"
KINDS = {
    "cafe": Kind(1, 6, 0, 3, {"Agent": 4, "Jack": 1, "Jill": 1}, "Jack,Jill", "Jill",
                 "Jill: *smiles* Hello Jack, I'm Jill.", JACK_HEARD),
    "cafe-resumed": Kind(2, 10, 0, 4, {"Agent": 6, "Jack": 2, "Jill": 2}, "Jack,Jill", "Jill",
                         "Jill: Tea, please. Earl grey.", JACK_HEARD),
    "features": Kind(2, 5, 2, 5, {"Features": 3, "Helper": 2, "Failing": 0}, "Features,Helper",
                     "Features", "(Features) Weather?", "[Heard]: Weather?"),
}  # fmt: skip


@dataclass(frozen=True)
class Recorded:
    """One session a release wrote."""

    release: str
    kind: Kind
    directory: Path

    @property
    def snapshot(self) -> Path:
        (path,) = self.directory.glob("*.json.gz")
        return path

    @property
    def stream(self) -> Path:
        (path,) = self.directory.glob("*.events.jsonl")
        return path

    @property
    def session_id(self) -> str:
        return self.snapshot.name.removesuffix(".json.gz")

    def document(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(gzip.decompress(self.snapshot.read_bytes()))
        return document

    def lines(self, path: Path) -> list[dict[str, Any]]:
        return [json.loads(line) for line in path.read_text("utf-8").splitlines()]

    def copy_to(self, sessions: Path) -> Path:
        """The session's two files copied into ``sessions``: the copy of its session file."""
        sessions.mkdir(parents=True, exist_ok=True)
        for path in (self.snapshot, self.stream):
            shutil.copyfile(path, sessions / path.name)
        return sessions / self.snapshot.name


RECORDED = [
    Recorded(release, KINDS[kind], RELEASES / release / kind)
    for release in (FIRST, PREVIOUS)
    for kind in KINDS
]


def recorded(*kinds: str) -> Any:
    """Parametrize a test over the recorded sessions (of ``kinds``, or all)."""
    return pytest.mark.parametrize(
        "session",
        [
            pytest.param(r, id=r.directory.relative_to(RELEASES).as_posix())
            for r in RECORDED
            if not kinds or r.directory.name in kinds
        ],
    )


def test_every_release_and_kind_is_there() -> None:
    for session in RECORDED:
        assert session.snapshot.stat().st_size > 0 and session.stream.stat().st_size > 0
        assert (session.directory / "accounting.jsonl").stat().st_size > 0


def test_the_first_release_wrote_the_older_form() -> None:
    """What the superset in the schema is for: without it these files are refused (the
    previous release's have every field)."""
    for session in RECORDED:
        document = session.document()
        nodes = list(_nodes(document["runs"]))
        first = session.release == FIRST
        assert all(("span" in node) != first for node, _ in nodes), session
        assert all(("resource" in run) != first for run in document["runs"]), session
        entries = [e for node, _ in nodes for e in node.get("accounting", [])]
        assert entries and all(("callPath" in e) != first for e in entries), session


def test_the_releases_wrote_an_ops_first_sub_agent_run_twice() -> None:
    """Both releases kept an op's sub-agent runs under ``childSessions`` and its first again
    under ``childSession``; readers take ``childSessions``, so each run counts once (the
    kinds' totals in the tests below)."""
    for session in RECORDED:
        nodes = [node for node, _ in _nodes(session.document()["runs"])]
        hosts = [node for node in nodes if "childSession" in node or "childSessions" in node]
        assert hosts, session
        assert all(op["childSession"] == op["childSessions"][0] for op in hosts), session


# --- reading --------------------------------------------------------------------------------


@recorded()
def test_the_session_file_reads_as_written(session: Recorded) -> None:
    loaded = read_session_file(session.snapshot)
    assert loaded.kind == "snapshot" and loaded.session_id == session.session_id
    assert loaded.runs == session.document()["runs"]
    assert len(loaded.runs) == session.kind.runs
    assert loaded.events == session.lines(session.stream)


@recorded()
def test_the_stream_alone_reads(session: Recorded, tmp_path: Path) -> None:
    alone = tmp_path / session.stream.name
    shutil.copyfile(session.stream, alone)
    loaded = read_session_file(alone)
    assert loaded.kind == "stream" and loaded.session_id == session.session_id
    assert loaded.events == session.lines(session.stream) and loaded.events


@recorded()
def test_the_published_schema_accepts_what_the_release_wrote(session: Recorded) -> None:
    schema = published_schema()
    jsonschema.validate(session.document(), schema, jsonschema.Draft202012Validator)
    for definition, path in (
        ("Event", session.stream),
        ("AccountingEntry", session.directory / "accounting.jsonl"),
    ):
        validator = jsonschema.Draft202012Validator({**schema, "$ref": f"#/$defs/{definition}"})
        for line in session.lines(path):
            assert list(validator.iter_errors(line)) == [], (definition, line)


def test_a_root_keeps_all_of_its_span_fields_or_none(tmp_path: Path) -> None:
    """The superset is per run: a root of the current form missing one of them is refused, and
    so is one of the first release's form with one of them added."""
    (current,) = (r for r in RECORDED if r.release == PREVIOUS and r.directory.name == "cafe")
    (older,) = (r for r in RECORDED if r.release == FIRST and r.directory.name == "cafe")
    cases = [
        (current, lambda run: run.pop("recording"), "`span` without `recording`"),
        (older, lambda run: run.__setitem__("scope", {"name": "agenttrace", "version": "0"}),
         "`scope` without `span`"),
    ]  # fmt: skip
    for session, change, what in cases:
        document = session.document()
        change(document["runs"][0])
        path = tmp_path / session.snapshot.name
        path.write_bytes(gzip.compress(json.dumps(document).encode()))
        with pytest.raises(SessionFileError) as caught:
            read_session_file(path)
        assert str(caught.value) == f"{path}: $.runs[0]: {what}"
        validator = jsonschema.Draft202012Validator(published_schema())
        assert list(validator.iter_errors(document)), what


# --- views and commands ---------------------------------------------------------------------


def cli(*args: str) -> str:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip(), args
    return result.stdout


@recorded()
def test_tree_shows_every_run_and_node(session: Recorded) -> None:
    lines = cli("tree", str(session.snapshot)).splitlines()
    assert sum(line.startswith("run ") for line in lines) == session.kind.runs
    document = session.document()
    for node, _ in _nodes(document["runs"]):
        assert any(f" {node['path']} " in f" {line} " for line in lines), node["path"]
    assert cli("tree", str(session.stream)) == "\n".join(lines) + "\n"  # the file beside it


@recorded()
def test_stats_total_the_whole_tree(session: Recorded) -> None:
    totals = json.loads(cli("stats", str(session.snapshot), "--json"))
    kind = session.kind
    assert totals["runs"] == kind.runs
    total = totals["total"]
    assert (total["llm_attempts_ok"], total["llm_attempts_failed"], total["tool_calls"]) == (
        kind.llm_ok, kind.llm_failed, kind.tool_calls,
    )  # fmt: skip
    assert {a["name"]: a["llm_attempts_ok"] for a in totals["by_agent"]} == kind.agents
    assert total["input_tokens"] > 0 and total["output_tokens"] > 0
    assert total["cost_usd_known"] > 0  # cost_usd is None where some call had no price
    text = cli("stats", str(session.snapshot))
    assert f"{kind.runs} run(s)" in text and "by agent" in text and "by model" in text


@recorded()
def test_dialog_and_perspective(session: Recorded) -> None:
    kind = session.kind
    dialog = cli("dialog", str(session.snapshot), "--agents", kind.dialog).splitlines()
    assert kind.said in dialog
    assert kind.heard in cli("perspective", str(session.snapshot), kind.perspective).splitlines()


@recorded()
def test_exports_have_every_node_as_a_span_under_its_parent(session: Recorded) -> None:
    """The first release's nodes kept no span: the export rebuilds them from the tree, with the
    ids the release wrote, each under its parent; the previous release's are as recorded."""
    document = session.document()
    expected = {_span_id(node): _span_id(parent) if parent else None for node, parent in
                _nodes(document["runs"])}  # fmt: skip
    otlp = json.loads(cli("export", str(session.snapshot), "--format", "otlp-json"))
    spans = [
        span
        for resource in otlp["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    assert {s["spanId"]: s.get("parentSpanId") for s in spans} == expected
    assert {s["traceId"] for s in spans} == {run["traceId"] for run in document["runs"]}
    jaeger = json.loads(cli("export", str(session.snapshot), "--format", "jaeger"))
    assert sorted(s["spanID"] for t in jaeger["data"] for s in t["spans"]) == sorted(expected)
    page = cli("export", str(session.snapshot), "--format", "html")
    assert page.lstrip().lower().startswith("<!doctype html") and session.session_id in page


# --- resume ---------------------------------------------------------------------------------


@recorded()
def test_resume_appends_a_run_that_reads_back(
    session: Recorded, traced: Traced, tmp_path: Path
) -> None:
    path = session.copy_to(tmp_path / "sessions")  # the traced fixture's sessions directory
    before = read_session_file(path)
    restored = agenttrace.resume(path)
    assert restored.session_id == session.session_id

    logged: list[str] = []

    @agenttrace.agent(name="Later")
    def later() -> None:
        with agenttrace.tool("note", arguments={"n": 1}) as call:
            call.set_result("noted")
        entry = {"role": "user", "content": "Later?"}
        logged.append(restored.log_transcript_entry("agent_001", entry))

    later()
    traced.handle.force_flush()
    (message_id,) = logged
    assert snapshot_path(tmp_path / "sessions", session.session_id) == path
    after = read_session_file(path)
    assert after.runs[: len(before.runs)] == before.runs
    assert len(after.runs) == len(before.runs) + 1
    new = after.runs[-1]
    assert new["agentName"] == "Later" and new["turns"][0]["ops"][0]["name"] == "note"
    previous = before.runs[-1]["traceId"]
    assert new["attributes"]["agenttrace.resumed_from"] == previous
    assert new["span"]["links"][0]["traceId"] == previous
    assert after.events[: len(before.events)] == before.events
    ids = [e["message_id"] for e in after.events]  # the counter ran on: no id reused
    assert ids == [f"msg_{i:03d}" for i in range(1, len(ids) + 1)]
    assert message_id in ids[len(before.events) :]
    stream = read_session_file(stream_path(tmp_path / "sessions", session.session_id))
    assert stream.events == after.events
    # The file now mixes the release's runs with one of this version's: still the format.
    document = json.loads(gzip.decompress(path.read_bytes()))
    jsonschema.validate(document, published_schema(), jsonschema.Draft202012Validator)
    assert "Later" in cli("tree", str(path))


@recorded("cafe", "cafe-resumed")
def test_the_cafe_resumes_with_its_agents(
    session: Recorded, traced: Traced, tmp_path: Path
) -> None:
    """The demo's own agents rebuilt from the release's session (``load_session`` with the
    demo's ``Agent.revive``, as ``examples.cafe.run_resumed`` does): they carry on the
    conversation the release recorded."""
    path = session.copy_to(tmp_path / "sessions")
    before = read_session_file(path)
    with ScriptedModel(SCRIPTS) as model:
        options = {"api_key": "offline-test-key", "api_base": model.api_base}
        answer, resumed = asyncio.run(run_resumed(str(path), "Coffee?", options))
    traced.handle.force_flush()
    assert answer == "Jack and Jill have answered."
    jack = resumed.revivify("agent_002")
    assert jack.transcript[0]["content"] == "You work in HR..."
    assert "Hi, I'm Jack. *extends hand*" in [e.get("content") for e in jack.transcript]
    after = read_session_file(path)
    assert len(after.runs) == len(before.runs) + 1
    ids = [e["message_id"] for e in after.events]
    assert ids == [f"msg_{i:03d}" for i in range(1, len(ids) + 1)]
    totals = json.loads(cli("stats", str(path), "--json"))
    assert totals["runs"] == session.kind.runs + 1


@pytest.mark.e2e
@pytest.mark.parametrize("release", [FIRST, PREVIOUS])
def test_agenttrace_resume_continues_a_release_demo(release: str, tmp_path: Path) -> None:
    """``agenttrace resume SESSION --agent examples.cafe:rebuild``, as a user runs it, on the
    session the release's demo wrote."""
    session = next(r for r in RECORDED if r.release == release and r.directory.name == "cafe")
    path = session.copy_to(tmp_path / "sessions")
    result = subprocess.run(
        [
            *(sys.executable, "-m", "agenttrace.cli", "resume", str(path)),
            *("--agent", "examples.cafe:rebuild", "--prompt", "What will you order?"),
        ],
        env=child_env(AGENTTRACE_BILLING_FILE=str(tmp_path / "accounting.jsonl")),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert result.returncode == 0, result.stderr
    after = read_session_file(path)
    assert len(after.runs) == 2
    dialog = cli("dialog", str(path), "--agents", "Jack,Jill")
    assert "Jill: Tea, please. Earl grey." in dialog


# --- helpers --------------------------------------------------------------------------------


def _nodes(
    runs: list[Mapping[str, Any]],
) -> Iterator[tuple[Mapping[str, Any], Mapping[str, Any] | None]]:
    """Every node of ``runs`` with its parent node (``None`` for a run's root)."""
    pending: list[tuple[Mapping[str, Any], Mapping[str, Any] | None]] = [
        (run, None) for run in runs
    ]
    while pending:
        node, parent = pending.pop()
        yield node, parent
        for key in ("turns", "ops"):
            pending.extend((child, node) for child in children(node, key))
        pending.extend((child, node) for child in hosted_sessions(node))


def _span_id(node: Mapping[str, Any]) -> str:
    """The id of the node's span: a session's spanId, a turn's id, an op's opId."""
    value = node.get("spanId") or (node.get("opId") if "opId" in node else node.get("id"))
    assert isinstance(value, str)
    return value
