"""`agenttrace tree`, `stats` and `export` on the demo's session, as a user runs them."""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from agenttrace.formats.session.files import read_session_file, snapshot_bytes

from .helpers import child_env, is_event_line, run_demo

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.e2e  # runs whole programs as a user does: make test, not make check


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agenttrace.cli", *args],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=480,
        cwd=cwd,
    )


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's session, resumed once, so it has two runs: the session file's path."""
    sessions = tmp_path_factory.mktemp("views") / "sessions"
    run_demo(sessions, AGENTTRACE_CONSOLE="quiet")
    (snapshot,) = sessions.glob("*.json.gz")
    session_id = snapshot.name.removesuffix(".json.gz")
    resumed = cli(
        "resume", session_id, "--prompt", "Coffee?", "--agent", "examples.cafe:rebuild",
        "--sessions-dir", str(sessions), cwd=ROOT,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    return snapshot


def test_tree_shows_every_run_with_sub_agents_under_their_tool_call(demo: Path) -> None:
    result = cli("tree", str(demo))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert sum(line.startswith("run ") for line in lines) == 2
    discuss = next(i for i, line in enumerate(lines) if "3.2 session discuss ok" in line)
    jill = next(i for i, line in enumerate(lines) if "3.2:2 session Jill [agent_003] ok" in line)
    indent = len(lines[discuss]) - len(lines[discuss].lstrip("│ ├└─"))
    assert jill > discuss and len(lines[jill]) - len(lines[jill].lstrip("│ ├└─")) > indent
    llm = next(line for line in lines if "3.2:2.1.1 llm" in line)
    assert "in " in llm and " out " in llm and "$0.000" in llm and "ms" in llm


def test_tree_of_a_stream_uses_the_session_file_beside_it(demo: Path) -> None:
    stream = demo.with_name(demo.name.replace(".json.gz", ".events.jsonl"))
    assert cli("tree", str(stream)).stdout == cli("tree", str(demo)).stdout


def test_tree_of_a_relative_path_with_dot_dot(demo: Path, tmp_path: Path) -> None:
    """``agenttrace tree ../sessions/<id>.json.gz``, from a directory beside the sessions: the
    file is read; a directory, an empty file, /dev/null and a missing file each say what they
    are, in one line, exit 2."""
    beside = demo.parent.parent / "beside"
    beside.mkdir(exist_ok=True)
    relative = f"../{demo.parent.name}/{demo.name}"
    result = cli("tree", relative, cwd=beside)
    assert result.returncode == 0, result.stderr
    assert result.stdout == cli("tree", str(demo)).stdout
    (tmp_path / "empty.json.gz").write_bytes(b"")
    for reference, cwd, message in (
        (f"../{demo.parent.name}", beside, "is a directory, not a session file"),
        (str(tmp_path / "empty.json.gz"), None, "empty file, no events"),
        ("/dev/null", None, "is a character device, not a session file"),
        ("../missing.json.gz", beside, "no such file"),
    ):
        result = cli("tree", reference, cwd=cwd)
        assert result.returncode == 2, result.stderr
        assert result.stderr == f"agenttrace: error: {reference}: {message}\n"


def test_stats_totals_the_whole_tree(demo: Path) -> None:
    result = cli("stats", str(demo), "--json")
    assert result.returncode == 0, result.stderr
    totals = json.loads(result.stdout)
    assert totals["runs"] == 2
    total = totals["total"]
    assert total["llm_attempts_ok"] == 10 and total["llm_attempts_failed"] == 0
    assert total["tool_calls"] == 4  # task, task, discuss; discuss again after the resume
    agents = {a["name"]: a for a in totals["by_agent"]}
    assert set(agents) == {"Agent", "Jack", "Jill"}
    assert agents["Jack"]["llm_attempts_ok"] == 2 and agents["Jack"]["tool_calls"] == 0
    assert sum(a["input_tokens"] for a in agents.values()) == total["input_tokens"]
    assert sum(a["cost_usd"] for a in agents.values()) == pytest.approx(total["cost_usd"])
    (model,) = totals["by_model"]
    assert model["model"] == "anthropic:claude-sonnet-4-5-20250929"
    assert model["input_tokens"] == total["input_tokens"] and total["cache_read_tokens"] > 0
    assert totals["wall_time_ms"] > 0
    text = cli("stats", str(demo)).stdout
    assert "by agent" in text and "Jill (agent_003)" in text and "total" in text


@pytest.mark.parametrize("form", ["jaeger", "otlp-json", "html", "exchanges"])
def test_export_to_a_file_and_to_stdout(demo: Path, tmp_path: Path, form: str) -> None:
    target = tmp_path / f"out.{form}"
    written = cli("export", str(demo), "--format", form, "-o", str(target))
    assert written.returncode == 0, written.stderr
    shown = cli("export", str(demo), "--format", form)
    assert shown.returncode == 0 and shown.stdout == target.read_text()
    if form == "html":
        assert shown.stdout.lstrip().lower().startswith("<!doctype html>")
    elif form == "exchanges":
        lines = [json.loads(line) for line in shown.stdout.splitlines()]
        assert lines[0]["type"] == "session_start" and lines[-1]["type"] == "session_end"
    else:
        document = json.loads(shown.stdout)
        traces = document["data"] if form == "jaeger" else document["resourceSpans"]
        assert len(traces) >= 1


def test_export_exchanges_has_an_exchange_per_run(demo: Path) -> None:
    """The demo resumed once: two root runs, two exchanges, the second the resume's prompt."""
    shown = cli("export", str(demo), "--format", "exchanges")
    assert shown.returncode == 0, shown.stderr
    lines = [json.loads(line) for line in shown.stdout.splitlines()]
    assert [line["type"] for line in lines] == [
        "session_start",
        "exchange",
        "exchange",
        "session_end",
    ]
    first, second, end = lines[1], lines[2], lines[3]
    assert first["user_input"] == "Create Jack and Jill for a cafe discussion"
    assert second["user_input"] == "Coffee?" and second["exchange"] == 2
    assert end["total_exchanges"] == 2
    both = (first["stats"], second["stats"])
    assert end["total_duration_ms"] == sum(s["duration_ms"] for s in both)
    assert end["total_cost_usd"] == pytest.approx(sum(s["cost_usd"] for s in both))
    assert end["total_tokens"]["output"] == second["stats"]["tokens_out"]
    totals = json.loads(cli("stats", str(demo), "--json").stdout)["total"]
    assert sum(s["tokens_out"] for s in both) == totals["output_tokens"]
    assert sum(end["tools_used"].values()) == totals["tool_calls"]


def test_bad_input_is_one_line_and_exit_2(demo: Path, tmp_path: Path) -> None:
    # A stream alone of an earlier release (no op_accounted or journal lines): no opTree can
    # be had.
    stream_only = tmp_path / "lonely.events.jsonl"
    stream = demo.with_name(demo.name.replace(".json.gz", ".events.jsonl"))
    stream_only.write_text(
        "".join(
            line + "\n" for line in stream.read_text().splitlines() if is_event_line(line.encode())
        )
    )
    for args in (
        ("tree", str(stream_only)),
        ("stats", str(stream_only)),
        ("export", str(stream_only), "--format", "jaeger"),
        ("export", str(stream_only), "--format", "exchanges"),
        ("export", str(demo), "--format", "pdf"),
        ("export", str(demo), "--format", "html", "-o", str(tmp_path / "no" / "such" / "dir")),
        ("tree", "../outside"),
        ("stats",),
    ):
        result = cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("agenttrace: error:"), (args, lines)
        assert "Traceback" not in result.stderr
    # --help for every command
    for command in ("tree", "stats", "export", "resume", "dialog", "perspective"):
        assert cli(command, "--help").returncode == 0


RANDOM_BYTES = random.Random(32).randbytes(600)
"""Bytes that are neither gzip nor an event stream (no gzip magic, a line of no JSON)."""


def _one_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("agenttrace: error: "), line
    return line.removeprefix("agenttrace: error: ")


def test_tree_of_a_bad_session_file_names_it_not_its_stream(demo: Path, tmp_path: Path) -> None:
    """``tree X.json.gz`` holding random bytes, beside ``X.events.jsonl``: whatever the stream
    read instead, the error names X.json.gz first, the file at fault, and says what is wrong
    with it; it then says what stopped the stream from standing in for it."""
    stream = demo.with_name(demo.name.replace(".json.gz", ".events.jsonl"))
    lines = stream.read_text().splitlines(keepends=True)
    not_json = tmp_path / "notjson.json.gz"
    not_json.write_bytes(RANDOM_BYTES)
    bad = "not an agenttrace session file (neither gzip nor an event stream)"
    # Beside a damaged stream: the stream was the fallback, its error comes second.
    not_json.with_name("notjson.events.jsonl").write_text("".join([*lines[:3], "{x\n", *lines[3:]]))
    message = _one_error(cli("tree", str(not_json)))
    stream_path = not_json.with_name("notjson.events.jsonl")
    assert message == (
        f"{not_json}: {bad}; the event stream beside it cannot be read either "
        f"({stream_path}: line 4 is not JSON)"
    )
    # Beside a stream with no opTree in it (an earlier release's): the session file is at
    # fault, whichever of the two was named; never "give its .json.gz", the file given.
    old = tmp_path / "old.json.gz"
    old.write_bytes(RANDOM_BYTES)
    old_stream = old.with_name("old.events.jsonl")
    old_stream.write_text("".join(line for line in lines if is_event_line(line.encode())))
    for named in (old, old_stream):
        for command in ("tree", "stats"):
            message = _one_error(cli(command, str(named)))
            assert message == (
                f"{old}: {bad}; the event stream beside it, {old_stream}, holds no opTree"
            ), (command, named)
    # Alone, the file named is the file reported on.
    alone = tmp_path / "alone.json.gz"
    alone.write_bytes(RANDOM_BYTES)
    assert _one_error(cli("tree", str(alone))) == f"{alone}: {bad}"


def test_a_progress_bar_on_a_terminal_for_a_large_file_only(tmp_path: Path) -> None:
    """Reading a large file shows a progress bar on stderr when that is a terminal; piped, or
    for a small file, nothing; stdout (the command's output) never gets any of it."""
    import pty

    big = tmp_path / "big.events.jsonl"
    lines = [
        json.dumps(
            {"message_id": "msg_001", "event_type": "agent_created", "agent_id": "agent_001"}
        )
    ]
    lines += [
        json.dumps(
            {
                "message_id": f"msg_{n:03d}",
                "event_type": "transcript_entry",
                "agent_id": "agent_001",
                "role": "user",
                "content": "lorem ipsum " * 60,
            }
        )
        for n in range(2, 14000)
    ]
    big.write_text("\n".join(lines) + "\n")
    assert big.stat().st_size > 9 << 20

    def run_on_a_terminal() -> tuple[str, str]:
        leader, follower = pty.openpty()
        env = child_env()
        output = tmp_path / "stdout.txt"
        with output.open("wb") as stdout_file:  # a file: a full pipe would block the command
            process = subprocess.Popen(
                [sys.executable, "-m", "agenttrace.cli", "perspective", str(big), "agent_001"],
                stdout=stdout_file,
                stderr=follower,
                env={**env, "COLUMNS": "100"},
            )
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert process.wait(timeout=480) == 0
        os.close(leader)
        return output.read_text(), b"".join(chunks).decode(errors="replace")

    stdout, terminal = run_on_a_terminal()
    assert "reading big.events.jsonl" in terminal
    assert stdout.startswith("[Heard]: lorem ipsum") and "reading" not in stdout
    piped = cli("perspective", str(big), "agent_001")
    assert piped.returncode == 0 and piped.stderr == ""


def test_a_damaged_optree_is_refused_in_one_line(demo: Path, tmp_path: Path) -> None:
    """A session file edited by hand or damaged is validated before any view reads it: `tree`
    and `stats` say where and what in one line and exit 2, instead of a traceback or a tree
    drawn from half of it; a file that holds no run is bad input for them too."""
    loaded = read_session_file(demo)
    lines = [(json.dumps(event) + "\n").encode() for event in loaded.events]
    runs = copy.deepcopy(loaded.runs)
    first_llm = next(op for op in runs[0]["turns"][0]["ops"] if op["kind"] == "llm")
    first_llm["accounting"][0]["tokens"]["inputTokens"] = "many"
    damaged = tmp_path / "damaged.json.gz"
    damaged.write_bytes(snapshot_bytes("damaged", runs, lines, loaded.meta))
    where = "$.runs[0].turns[0].ops[0].accounting[0].tokens.inputTokens"
    for command in ("tree", "stats"):
        result = cli(command, str(damaged))
        assert result.returncode == 2
        assert result.stderr.splitlines() == [
            f"agenttrace: error: {damaged}: {where}: Expected `int | null`, got `str`"
        ]

    no_runs = tmp_path / "no-runs.json.gz"
    no_runs.write_bytes(snapshot_bytes("no-runs", [], lines, loaded.meta))
    for command in ("tree", "stats"):
        result = cli(command, str(no_runs))
        assert result.returncode == 2
        assert result.stderr.splitlines() == [
            f"agenttrace: error: {no_runs}: no opTree in it (the session file records no run)"
        ]
