"""The ``agenttrace`` command, run as a user runs it: ``dialog``, ``perspective``, ``resume``.

Bad input of any kind gets exactly one stderr line ``agenttrace: error: ...`` and exit status 2,
never a traceback. Subprocesses get the test environment less OTEL_* and AGENTTRACE_*, an
offline litellm cost map, and session and billing paths inside the test's tmp dir.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agenttrace.formats.session.files import read_session_file, snapshot_bytes
from agenttrace.model.events import MESSAGE_PREFIX, id_number
from agenttrace.views.viewer import SessionViewer, format_dialog

from .fork_server import Forks
from .helpers import canonical_events, child_env, record_demo
from .llm_server import LLMServer, Reply
from .test_session_files import (
    EXAMPLE_1,
    META,
    SEED_000_EXAMPLE_1,
    jsonl,
    make_unreadable,
    traversable_dir,
)

ROOT = Path(__file__).resolve().parent.parent
CAFE = "examples.cafe:rebuild"
"""The cafe example's agent factory, importable from the checkout (ROOT as the working dir)."""
SCRIPT = Path(sys.executable).parent / "agenttrace"
AGENTTRACE = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "agenttrace.cli"]

EXAMPLE_1_DIALOG = """\
(Jack's instructions) You work in HR...
(Jill's instructions) You are an aspiring author...
(agent_root) You meet in a cafe. Introduce yourselves.
Jack: Hi, I'm Jack. *extends hand*
Jill: *smiles* Hello Jack, I'm Jill.
"""
JILL_PERSPECTIVE = """\
[System]: You are an aspiring author...
[Heard]: You meet in a cafe. Introduce yourselves.
[Heard]: [Jack]: Hi, I'm Jack. *extends hand*
[Said]: *smiles* Hello Jack, I'm Jill.
"""
ROOT_PERSPECTIVE_START = (
    "[Heard]: Create Jack and Jill for a cafe discussion\n"
    '[Action]: task({"name": "Jack", "system_prompt": "You work in HR..."})\n'
    "[Received]: Created subagent: Jack\n"
)

pytestmark = pytest.mark.e2e  # runs whole programs as a user does: make test, not make check


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    """No OTEL_*/AGENTTRACE_* from the parent; default sessions dir and billing file in tmp
    (the default sessions dir stays empty, so an id is found only through --sessions-dir)."""
    env = child_env()
    env.update(
        AGENTTRACE_RAISE_INTERNAL_ERRORS="1",
        AGENTTRACE_SESSIONS_DIR=str(tmp_path / "default-sessions"),
        AGENTTRACE_BILLING_FILE=str(tmp_path / "accounting.jsonl"),
        **extra,
    )
    return env


def agenttrace(
    tmp_path: Path,
    *args: str,
    cwd: Path | None = None,
    preexec_fn: Callable[[], None] | None = None,
    timeout: float = 480,
    **env: str,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*AGENTTRACE, *args],
        env=env_for(tmp_path, **env),
        cwd=cwd or tmp_path,
        preexec_fn=preexec_fn,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def forked_agenttrace(
    forks: Forks, tmp_path: Path, *args: str, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """:func:`agenttrace`, the command's entry point forked from ``forks``
    (:func:`cli_fork_server`) instead of a new interpreter."""
    command = "agenttrace.cli:main"
    return forks.run(command, list(args), env_for(tmp_path, **env), cwd or tmp_path, AGENTTRACE[-1])


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The message of a bad-input failure: exit 2, one stderr line, no traceback, no output."""
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("agenttrace: error: "), lines[0]
    assert result.stdout == ""
    return lines[0][len("agenttrace: error: ") :]


@pytest.fixture
def open_dir() -> Iterator[Path]:
    with traversable_dir() as directory:
        yield directory


@pytest.fixture
def example_1(tmp_path: Path) -> Path:
    """Seed 001's Example 1 as an event stream in tmp_path/sessions."""
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    path = sessions / "example1.events.jsonl"
    path.write_text(jsonl(EXAMPLE_1))
    return path


# --- reading a session ----------------------------------------------------------------------------


def _as_path(path: Path) -> list[str]:
    return [str(path)]


def _as_id(path: Path) -> list[str]:
    return ["example1", "--sessions-dir", str(path.parent)]


def _as_snapshot(path: Path) -> list[str]:
    snapshot = path.with_name("example1.json.gz")
    meta = {**META, "session_id": "example1"}
    snapshot.write_bytes(snapshot_bytes("example1", [], path.read_bytes().splitlines(), meta))
    path.unlink()
    return ["example1", "--sessions-dir", str(path.parent)]


READ_AS = pytest.mark.parametrize("reference", [_as_path, _as_id, _as_snapshot])


@READ_AS
def test_dialog_of_example_1(
    tmp_path: Path, example_1: Path, reference: Callable[[Path], list[str]]
) -> None:
    result = agenttrace(tmp_path, "dialog", *reference(example_1), "--agents", "Jack,Jill")
    out = ok(result)
    assert result.stderr == ""
    assert out == EXAMPLE_1_DIALOG
    lines = out.splitlines()
    prompt = "(agent_root) You meet in a cafe. Introduce yourselves."
    jack = "Jack: Hi, I'm Jack. *extends hand*"
    jill = "Jill: *smiles* Hello Jack, I'm Jill."
    # Heard by both, relayed to each other: each is shown once, in the order it was said.
    assert [lines.count(line) for line in (prompt, jack, jill)] == [1, 1, 1]
    assert lines.index(prompt) < lines.index(jack) < lines.index(jill)
    assert not [line for line in lines if line.startswith("(Jill) [Jack]") or "[Jill]:" in line]


EXAMPLE_1_WHOLE_DIALOG = """\
(agent_root) Create Jack and Jill for a cafe discussion
(Jack's instructions) You work in HR...
(agent_root's tool task returned) Created subagent: Jack
(Jill's instructions) You are an aspiring author...
(agent_root's tool task returned) Created subagent: Jill
(agent_root) You meet in a cafe. Introduce yourselves.
Jack: Hi, I'm Jack. *extends hand*
(agent_root's tool discuss returned) Hi, I'm Jack. *extends hand*
Jill: *smiles* Hello Jack, I'm Jill.
(agent_root's tool discuss returned) *smiles* Hello Jack, I'm Jill.
"""


@READ_AS
def test_dialog_without_agents_is_every_agents(
    tmp_path: Path, example_1: Path, reference: Callable[[Path], list[str]]
) -> None:
    """No --agents: the dialog of every agent, the root's tool results among it, each labelled
    as what its tool returned (by the name its call gave), never as the root agent speaking."""
    args = reference(example_1)
    result = agenttrace(tmp_path, "dialog", *args)
    out = ok(result)
    assert result.stderr == ""
    assert out == EXAMPLE_1_WHOLE_DIALOG
    assert not [line for line in out.splitlines() if line.startswith("agent_root: ")]
    everyone = ["--agents", "agent_root,Jack,Jill"]
    assert ok(agenttrace(tmp_path, "dialog", *args, *everyone)) == out


def test_a_tool_result_whose_call_is_unknown_is_still_a_tool_result(tmp_path: Path) -> None:
    """A result answering no call of its agent (a stream cut before the call, a framework's
    file) is labelled a tool result all the same, not the agent's words, and shows no None."""
    lost = {**EXAMPLE_1[5], "tool_call_id": "c9"}
    path = tmp_path / "lost-call.events.jsonl"
    path.write_text(jsonl([*EXAMPLE_1[:5], lost, *EXAMPLE_1[6:]]))
    out = ok(agenttrace(tmp_path, "dialog", str(path))).splitlines()
    assert "(agent_root's tool result) Created subagent: Jack" in out
    assert "(agent_root's tool task returned) Created subagent: Jill" in out
    assert not [line for line in out if "None" in line or line.startswith("agent_root: ")]
    # Events built by hand (the Python API takes them unchecked): a call naming no tool.
    unnamed = {**EXAMPLE_1[2], "tool_calls": [{"id": "c1", "function": {"arguments": "{}"}}]}
    viewer = SessionViewer([*EXAMPLE_1[:2], unnamed, *EXAMPLE_1[3:]])
    perspective = viewer.extract_agent_perspective("agent_root").splitlines()
    assert perspective[1] == "[Action]: ?({})"  # not None({})
    assert (
        "(agent_root's tool result) Created subagent: Jack"
        in format_dialog(viewer.extract_dialog(viewer.list_agents())).splitlines()
    )


def test_dialog_takes_ids_and_spaces(tmp_path: Path, example_1: Path) -> None:
    out = ok(agenttrace(tmp_path, "dialog", str(example_1), "--agents", " agent_jill , Jack ,"))
    assert out == EXAMPLE_1_DIALOG


@READ_AS
def test_perspective_of_jill(
    tmp_path: Path, example_1: Path, reference: Callable[[Path], list[str]]
) -> None:
    out = ok(agenttrace(tmp_path, "perspective", *reference(example_1), "Jill"))
    assert out == JILL_PERSPECTIVE


def test_perspective_by_agent_id_and_of_the_root(tmp_path: Path, example_1: Path) -> None:
    assert ok(agenttrace(tmp_path, "perspective", str(example_1), "agent_jill")) == (
        JILL_PERSPECTIVE
    )
    root = ok(agenttrace(tmp_path, "perspective", str(example_1), "agent_root"))
    assert root.startswith(ROOT_PERSPECTIVE_START)
    assert root.endswith("[Received]: *smiles* Hello Jack, I'm Jill.\n")


def test_seed_000_spelling_reads_the_same(tmp_path: Path, example_1: Path) -> None:
    old = ok(agenttrace(tmp_path, "perspective", str(SEED_000_EXAMPLE_1), "Jill"))
    assert old == JILL_PERSPECTIVE
    dialog = ok(agenttrace(tmp_path, "dialog", str(SEED_000_EXAMPLE_1), "--agents", "Jack,Jill"))
    # Seed 000's piece_of_text names no agent, so the prompt has no speaker there.
    assert dialog == EXAMPLE_1_DIALOG.replace("(agent_root)", "(?)")


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["-h"],
        ["dialog", "--help"],
        ["perspective", "--help"],
        ["resume", "--help"],
    ],
)
def test_help(tmp_path: Path, args: list[str]) -> None:
    result = agenttrace(tmp_path, *args)
    out = ok(result)
    assert out.startswith("Usage: ")
    assert result.stderr == ""
    if args[0] in ("--help", "-h"):
        for command in ("dialog", "perspective", "resume"):
            assert f"  {command} " in out
    else:
        assert "--sessions-dir" in out
    if args[0] == "resume":  # the factory protocol is documented where it is used
        for words in ("--agent MODULE:FACTORY", "FACTORY(record, session)", "harken(PROMPT)"):
            assert words in out


def test_help_as_a_module(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agenttrace.cli", "--help"],
        env=env_for(tmp_path),
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert "dialog" in ok(result)


# --- bad input ------------------------------------------------------------------------------------


# Each bad input: (arguments, a regular expression the whole error message must match).


def _missing(tmp_path: Path) -> tuple[list[str], str]:
    path = tmp_path / "missing.events.jsonl"
    return [str(path)], re.escape(f"{path}: no such file")


def _unknown_id(tmp_path: Path) -> tuple[list[str], str]:
    sessions = tmp_path / "sessions"
    return ["nosuchsession", "--sessions-dir", str(sessions)], re.escape(
        f"no session 'nosuchsession' in {sessions}"
    )


def _escape(tmp_path: Path) -> tuple[list[str], str]:
    # <sessions>/../escape.events.jsonl is a real session: an id must not reach it. Refused
    # as an id, or taken as the path ../escape (from <sessions>), which does not exist.
    (tmp_path / "escape.events.jsonl").write_text(jsonl(EXAMPLE_1))
    return ["../escape", "--sessions-dir", str(tmp_path / "sessions")], (
        r"not a session id: '\.\./escape'|\.\./escape: no such file"
    )


def _dotted_id(tmp_path: Path) -> tuple[list[str], str]:
    return ["..escape", "--sessions-dir", str(tmp_path / "sessions")], re.escape(
        "not a session id: '..escape'"
    )


def _directory(tmp_path: Path) -> tuple[list[str], str]:
    path = tmp_path / "a-directory.json.gz"
    path.mkdir()
    return [str(path)], re.escape(f"{path}: is a directory, not a session file")


def _file(name: str, content: bytes, message: str) -> Callable[[Path], tuple[list[str], str]]:
    def make(tmp_path: Path) -> tuple[list[str], str]:
        path = tmp_path / name
        path.write_bytes(content)
        return [str(path)], re.escape(f"{path}: {message}")

    make.__name__ = name
    return make


GOOD_SNAPSHOT = snapshot_bytes("s1", [], [json.dumps(e).encode() for e in EXAMPLE_1], META)


def _snapshot(**fields: Any) -> bytes:
    document = {"format": "agenttrace.session", "version": 1, "events": EXAMPLE_1, **fields}
    return gzip.compress(json.dumps(document).encode())


RANDOM_BYTES = random.Random(32).randbytes(600)
"""Random bytes, not gzip's magic first, with a newline in them (a first line that is no JSON)."""
assert RANDOM_BYTES[:2] != b"\x1f\x8b" and b"\n" in RANDOM_BYTES[:-1]

BAD_INPUTS = [
    _missing,
    _unknown_id,
    _escape,
    _dotted_id,
    _directory,
    _file("empty.json.gz", b"", "empty file, no events"),  # a stream empty recorded nothing
    _file(
        "truncated.json.gz",
        GOOD_SNAPSHOT[: len(GOOD_SNAPSHOT) // 2],
        "truncated or damaged gzip (the gzip stream ends before its end marker)",
    ),
    _file(
        "other-format.json.gz",
        _snapshot(format="otel.trace"),
        "not an agenttrace session file (format 'otel.trace')",
    ),
    _file(
        "no-format.json.gz",
        _snapshot(format=None),
        "not an agenttrace session file (no format field)",
    ),
    # Named as a session file, holding neither gzip nor events: said of what it was meant to
    # be, not as the event stream the reader tried it as next.
    _file(
        "random.json.gz",
        RANDOM_BYTES,
        "not an agenttrace session file (neither gzip nor an event stream)",
    ),
    _file(
        "random-one-line.json.gz",
        RANDOM_BYTES.replace(b"\n", b" "),
        "not an agenttrace session file (neither gzip nor an event stream)",
    ),
    _file(
        "other-version.json.gz",
        _snapshot(version=2),
        "session file version 2; this agenttrace reads version 1",
    ),
    _file(
        "not-json.json.gz",
        gzip.compress(b"<html>"),
        "gzip does not hold JSON; not an agenttrace session",
    ),
    _file(
        "bad-middle.events.jsonl",
        b"".join(
            b"not json\n" if i == 4 else json.dumps(e).encode() + b"\n"
            for i, e in enumerate(EXAMPLE_1)
        ),
        "line 5 is not JSON",
    ),
    _file(
        "not-events.jsonl",
        b'{"traceId": "ab", "spanId": "cd"}\n',
        "line 1 is not a canonical event: Object missing required field `event_type` at $",
    ),
]


@pytest.mark.parametrize("command", ["dialog", "perspective", "resume"])
@pytest.mark.parametrize("bad", BAD_INPUTS, ids=[b.__name__.strip("_") for b in BAD_INPUTS])
def test_bad_input(
    tmp_path: Path, command: str, bad: Callable[[Path], tuple[list[str], str]]
) -> None:
    (tmp_path / "sessions").mkdir()
    reference, pattern = bad(tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    extra = {
        "dialog": ["--agents", "Jack,Jill"],
        "perspective": ["Jill"],
        "resume": ["--prompt", "What will you order?"],
    }[command]
    result = agenttrace(
        tmp_path, command, reference[0], *extra, *reference[1:], cwd=tmp_path / "sessions"
    )
    message = one_error_line(result)
    assert re.fullmatch(pattern, message), message
    # Nothing was written, nothing was changed.
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("command", ["dialog", "perspective", "resume"])
def test_unreadable_file(open_dir: Path, tmp_path: Path, command: str) -> None:
    path = open_dir / "locked.events.jsonl"
    path.write_text(jsonl(EXAMPLE_1))
    preexec = make_unreadable(path)
    extra = {
        "dialog": ["--agents", "Jack,Jill"],
        "perspective": ["Jill"],
        "resume": ["--prompt", "What will you order?"],
    }[command]
    result = agenttrace(tmp_path, command, str(path), *extra, cwd=open_dir, preexec_fn=preexec)
    assert one_error_line(result) == f"{path}: cannot read: Permission denied"


@pytest.mark.parametrize("name", ["x.events.jsonl", "x"])
def test_file_in_a_directory_that_cannot_be_searched(
    open_dir: Path, tmp_path: Path, name: str
) -> None:
    closed = open_dir / "closed"
    closed.mkdir()
    (closed / "x.events.jsonl").write_text(jsonl(EXAMPLE_1))
    try:
        preexec = make_unreadable(closed, probe=closed / "x.events.jsonl")
        result = agenttrace(
            tmp_path,
            "dialog",
            str(closed / name),
            "--agents",
            "Jack",
            cwd=open_dir,
            preexec_fn=preexec,
        )
    finally:
        closed.chmod(0o755)  # so that the directory can be removed by any user
    assert "Permission denied" in one_error_line(result)


def test_unknown_agent(tmp_path: Path, example_1: Path) -> None:
    agents = "agent_root (agent_root), Jack (agent_jack), Jill (agent_jill)"
    result = agenttrace(tmp_path, "dialog", str(example_1), "--agents", "Jack,Bob")
    assert one_error_line(result) == f"no agent 'Bob' in the session (agents: {agents})"
    result = agenttrace(
        tmp_path, "perspective", "example1", "Bob", "--sessions-dir", str(example_1.parent)
    )
    assert one_error_line(result) == f"no agent 'Bob' in the session (agents: {agents})"


def test_torn_last_line_is_not_bad_input(tmp_path: Path, example_1: Path) -> None:
    with example_1.open("a") as stream:
        stream.write('{"message_id": "msg_021", "event_type": "transcr')
    assert ok(agenttrace(tmp_path, "perspective", str(example_1), "Jill")) == JILL_PERSPECTIVE


# --- damaged files that pass a first look are still bad input --------------------------------


def _tool_calls_not_objects(tmp_path: Path) -> Path:
    path = tmp_path / "calls.events.jsonl"
    path.write_text(jsonl([*EXAMPLE_1[:2], {**EXAMPLE_1[2], "tool_calls": "c1"}, *EXAMPLE_1[3:]]))
    return path


def _agent_without_id(tmp_path: Path) -> Path:
    path = tmp_path / "no-agent-id.events.jsonl"
    created = {k: v for k, v in EXAMPLE_1[3].items() if k != "agent_id"}
    path.write_text(jsonl([*EXAMPLE_1[:3], created, *EXAMPLE_1[4:]]))
    return path


def _deeply_nested(tmp_path: Path) -> Path:
    path = tmp_path / "nested.events.jsonl"
    path.write_bytes(jsonl(EXAMPLE_1[:1]).encode() + b"[" * 100_000 + b"]" * 100_000 + b"\n")
    return path


@pytest.mark.parametrize(
    "damaged",
    [
        _tool_calls_not_objects,
        _agent_without_id,
        _deeply_nested,
    ],
)
@pytest.mark.parametrize("command", ["dialog", "perspective"])
def test_damaged_event_is_bad_input(
    tmp_path: Path, command: str, damaged: Callable[[Path], Path]
) -> None:
    path = damaged(tmp_path)
    extra = ["--agents", "Jack,Jill"] if command == "dialog" else ["Jill"]
    one_error_line(agenttrace(tmp_path, command, str(path), *extra))


# --- end to end: the demo, resumed ------------------------------------------------------------


def _message_numbers(events: list[dict[str, Any]]) -> list[int]:
    numbers = [id_number(e["message_id"], MESSAGE_PREFIX) for e in events]
    assert None not in numbers
    return numbers  # type: ignore[return-value]


def test_cafe_demo_then_resume(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    demo = subprocess.run(
        [sys.executable, "examples/cafe.py", "--sessions-dir", str(sessions)],
        cwd=ROOT,
        env=env_for(tmp_path, AGENTTRACE_CONSOLE="quiet"),
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert "Answer: Jack and Jill have met in the cafe" in ok(demo)
    (stream,) = sessions.glob("*.events.jsonl")
    session_id = stream.name[: -len(".events.jsonl")]
    snapshot = sessions / f"{session_id}.json.gz"
    old_bytes = stream.read_bytes()
    old = canonical_events(stream)
    assert len(read_session_file(snapshot).runs) == 1
    dialog_before = ok(
        agenttrace(
            tmp_path, "dialog", session_id, "--agents", "Jack,Jill", "--sessions-dir", str(sessions)
        )
    )

    prompt = "What will you order?"
    resumed = agenttrace(
        tmp_path,
        "resume",
        session_id,
        "--prompt",
        prompt,
        "--agent",
        CAFE,
        "--sessions-dir",
        str(sessions),
        cwd=ROOT,
        timeout=480,
    )
    out = ok(resumed)
    # Written where the id was found, nowhere else.
    assert f"event stream: {stream}\n" in out and f"session file: {snapshot}\n" in out
    assert sorted(p.name for p in sessions.iterdir()) == sorted([stream.name, snapshot.name])
    assert not (tmp_path / "default-sessions").exists()

    # The stream gained events after the old ones, which are untouched.
    new_bytes = stream.read_bytes()
    assert new_bytes.startswith(old_bytes)
    events = canonical_events(stream)
    new = events[len(old) :]
    assert new, "resume added no events"
    # Message ids run on from the last old one, none reused.
    old_numbers, new_numbers = _message_numbers(old), _message_numbers(new)
    assert old_numbers == list(range(1, len(old) + 1))
    assert new_numbers == list(range(max(old_numbers) + 1, max(old_numbers) + 1 + len(new)))
    assert len({e["message_id"] for e in events}) == len(events)
    assert new[0]["content"] == prompt and new[0]["agent_id"] == "agent_001"
    assert f"New messages {new[0]['message_id']}..{new[-1]['message_id']}, 3 agents" in out
    # The same three agents: no new agent, no new agent id.
    assert {e["agent_id"] for e in events} == {"agent_001", "agent_002", "agent_003"}
    assert not [e for e in new if e["event_type"] == "agent_created"]
    # The session file has both runs, and every event of the stream.
    loaded = read_session_file(snapshot)
    assert loaded.session_id == session_id
    assert len(loaded.runs) == 2
    assert [e["message_id"] for e in loaded.events] == [e["message_id"] for e in events]

    # The dialog: what it said before, then the new prompt and Jack's and Jill's new lines.
    dialog = ok(
        agenttrace(
            tmp_path, "dialog", session_id, "--agents", "Jack,Jill", "--sessions-dir", str(sessions)
        )
    )
    assert dialog.startswith(dialog_before)
    names = {"agent_002": "Jack", "agent_003": "Jill"}
    said = [
        f"{names[e['agent_id']]}: {e['content']}"
        for e in new
        if e["agent_id"] in names and e.get("role") == "assistant" and e.get("content")
    ]
    assert {line.split(":")[0] for line in said} == {"Jack", "Jill"}
    assert dialog[len(dialog_before) :].splitlines() == [f"(Agent) {prompt}", *said]


# --- resume: any agent a factory rebuilds, beside the file, or refused ------------------------

FACTORIES = '''\
"""Agent factories for `agenttrace resume`, as a user's module holds them."""
import agenttrace


class Echo:
    """A root agent of one's own: heard with @hears, answering without a model, sync."""

    def __init__(self, record):
        self.agent_id, self.name = record.agent_id, record.name
        self.transcript = record.messages()
        self.subagents = {}

    @agenttrace.hears
    def harken(self, text):
        self.transcript.append({"role": "user", "content": str(text)})

    def response(self):
        return f"{self.agent_id} with {sorted(self.subagents)} has {len(self.transcript)} entries"


def rebuild(record, session):
    return Echo(record)


def raises(record, session):
    raise ValueError("cannot rebuild " + record.agent_id + "\\n  (the model is gone)")


def record_itself(record, session):
    return record


NOT_CALLABLE = 42
'''


@pytest.fixture
def code(tmp_path: Path) -> Path:
    """A user's code beside the sessions: ``factories.py`` and a module that fails on import."""
    directory = tmp_path / "code"
    directory.mkdir()
    (directory / "factories.py").write_text(FACTORIES)
    (directory / "fails_on_import.py").write_text('raise RuntimeError("no settings")\n')
    return directory


@pytest.fixture(scope="module")
def demo_session(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The cafe demo's (stream, session file), recorded once: tests resume copies of them."""
    snapshot, stream = record_demo(tmp_path_factory.mktemp("demo"), AGENTTRACE_CONSOLE="quiet")
    return stream, snapshot


def _copy(files: tuple[Path, ...], directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    copies = [directory / f.name for f in files]
    for original, copy in zip(files, copies, strict=True):
        copy.write_bytes(original.read_bytes())
    return copies


def test_resume_any_agent_a_factory_rebuilds(tmp_path: Path, example_1: Path, code: Path) -> None:
    # Seed 001's Example 1 continued by agents of the user's own class, from the user's cwd.
    result = agenttrace(
        tmp_path, "resume", "example1", "--prompt", "Hello?", "--agent", "factories:rebuild",
        "--sessions-dir", str(example_1.parent), cwd=code,
    )  # fmt: skip
    out = ok(result)
    # The root got its sub-agents by name, heard the prompt after its 8 entries, and answered.
    assert "Answer: agent_root with ['Jack', 'Jill'] has 9 entries\n" in out
    assert "New messages msg_021..msg_021, 3 agents, agent counter at 0\n" in out
    events = [json.loads(line) for line in example_1.read_text().splitlines()]
    assert events[: len(EXAMPLE_1)] == EXAMPLE_1
    (heard,) = events[len(EXAMPLE_1) :]
    assert (heard["message_id"], heard["agent_id"], heard["content"]) == (
        "msg_021",
        "agent_root",
        "Hello?",
    )
    assert read_session_file(example_1.with_name("example1.json.gz")).events == events


def test_resume_writes_beside_the_file_it_was_given(
    tmp_path: Path, demo_session: tuple[Path, Path]
) -> None:
    # The demo's session moved out of the sessions directory, resumed by its file's path.
    originals = [f.read_bytes() for f in demo_session]
    stream, snapshot = _copy(demo_session, tmp_path / "moved" / "here")
    old_stream = stream.read_bytes()
    result = agenttrace(
        tmp_path, "resume", str(snapshot), "--prompt", "Tea?", "--agent", CAFE,
        "--sessions-dir", str(tmp_path / "sessions"), cwd=ROOT, timeout=480,
    )  # fmt: skip
    out = ok(result)
    assert "Answer: Jack and Jill have answered." in out
    assert f"event stream: {stream}\n" in out and f"session file: {snapshot}\n" in out
    # Both files beside it went on; nothing was written anywhere else.
    new_stream = stream.read_bytes()
    assert new_stream.startswith(old_stream) and len(new_stream) > len(old_stream)
    loaded = read_session_file(snapshot)
    assert len(loaded.runs) == 2
    assert loaded.events == canonical_events(stream)
    assert sorted(p.name for p in stream.parent.iterdir()) == sorted([stream.name, snapshot.name])
    assert [f.read_bytes() for f in demo_session] == originals
    assert not (tmp_path / "sessions").exists() and not (tmp_path / "default-sessions").exists()


def test_resume_on_another_model(
    tmp_path: Path, demo_session: tuple[Path, Path], llm: LLMServer
) -> None:
    # Found by id in the sessions directory of the environment, and continued there on a model
    # the session never used (the local server answers for it).
    stream, _ = _copy(demo_session, tmp_path / "default-sessions")
    session_id = stream.name.removesuffix(".events.jsonl")
    llm.reset(Reply(content="A cortado, please."))
    result = agenttrace(
        tmp_path, "resume", session_id, "--prompt", "Coffee?", "--agent", CAFE,
        "--model", "openai/gpt-4o-mini", cwd=ROOT,
        OPENAI_API_BASE=llm.api_base, OPENAI_API_KEY="sk-local-test",
    )  # fmt: skip
    out = ok(result)
    assert "Answer: A cortado, please." in out
    assert [r.body["model"] for r in llm.requests] == ["gpt-4o-mini"]
    assert llm.requests[0].body["messages"][-1] == {"role": "user", "content": "Coffee?"}
    assert f"event stream: {stream}\n" in out
    (line,) = (tmp_path / "accounting.jsonl").read_text().splitlines()
    assert json.loads(line)["model"].endswith("gpt-4o-mini")


def test_resume_bills_the_run_to_the_billing_file_it_is_given(
    tmp_path: Path, demo_session: tuple[Path, Path]
) -> None:
    # --billing-file wins over AGENTTRACE_BILLING_FILE (which env_for sets), for this run only.
    _, snapshot = _copy(demo_session, tmp_path / "sessions")
    ledger = tmp_path / "billing" / "cafe.jsonl"
    result = agenttrace(
        tmp_path, "resume", str(snapshot), "--prompt", "Tea?", "--agent", CAFE,
        "--billing-file", str(ledger), cwd=ROOT, timeout=480,
    )  # fmt: skip
    assert "Answer: Jack and Jill have answered." in ok(result)
    lines = [json.loads(line) for line in ledger.read_text().splitlines()]
    # Every op of the resumed run, and only those: the demo's own run was billed before.
    run_origin = read_session_file(snapshot).runs[-1]["originTxnId"]
    assert lines and {line["originTxnId"] for line in lines} == {run_origin}
    assert {line["type"] for line in lines} == {"llm", "tool"}
    assert not (tmp_path / "accounting.jsonl").exists()
    assert ledger.stat().st_mode & 0o777 == 0o600


def test_resume_refuses_a_billing_file_it_cannot_append_to(
    tmp_path: Path, demo_session: tuple[Path, Path]
) -> None:
    _, snapshot = _copy(demo_session, tmp_path / "sessions")
    before = snapshot.read_bytes()
    (tmp_path / "taken").write_text("a file, where the ledger's directory would be\n")
    result = agenttrace(
        tmp_path, "resume", str(snapshot), "--prompt", "Tea?", "--agent", CAFE,
        "--billing-file", str(tmp_path / "taken" / "ledger.jsonl"), cwd=ROOT,
    )  # fmt: skip
    message = one_error_line(result)
    assert message.startswith(f"--billing-file {tmp_path / 'taken' / 'ledger.jsonl'}: cannot")
    assert snapshot.read_bytes() == before  # refused before the run started


def test_a_resumed_run_that_fails_is_one_line_and_exit_1(
    tmp_path: Path, demo_session: tuple[Path, Path], llm: LLMServer
) -> None:
    stream, snapshot = _copy(demo_session, tmp_path / "sessions")
    llm.reset(Reply(status=401, error_message="invalid api key"))
    result = agenttrace(
        tmp_path, "resume", stream.name.removesuffix(".events.jsonl"), "--prompt", "Coffee?",
        "--agent", CAFE, "--model", "openai/gpt-4o-mini", "--sessions-dir", str(stream.parent),
        cwd=ROOT,
        OPENAI_API_BASE=llm.api_base, OPENAI_API_KEY="sk-local-test",
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    # The console's lines for the failed attempt and run (as for any run), then why it stopped.
    *console, line = result.stderr.splitlines()
    assert console and all(c.startswith("[txn:") for c in console), console
    assert line.startswith("agenttrace: error: the resumed run failed: AuthenticationError: ")
    # The failed run is saved: the prompt it heard, and its opTree.
    loaded = read_session_file(snapshot)
    assert len(loaded.runs) == 2 and loaded.meta["result"]["success"] is False
    assert loaded.events[-1]["content"] == "Coffee?"


# What cannot be continued: (--agent arguments, "root" or "code" as the working directory, the
# whole error message; {cwd} stands for the working directory).
REFUSALS = {
    "no_agent": (
        [],
        "root",
        "resume needs --agent MODULE:FACTORY, the function that rebuilds the session's agents "
        "(agenttrace resume --help)",
    ),
    "a_file_not_a_module": (
        ["--agent", "examples/cafe.py:rebuild"],
        "root",
        "--agent 'examples/cafe.py:rebuild' is not MODULE:FACTORY (a dotted module name, a "
        "colon, a callable in it: examples.cafe:rebuild)",
    ),
    "no_factory_named": (
        ["--agent", "examples.cafe"],
        "root",
        "--agent 'examples.cafe' is not MODULE:FACTORY (a dotted module name, a colon, a "
        "callable in it: examples.cafe:rebuild)",
    ),
    "no_such_module": (
        ["--agent", "factories_elsewhere:rebuild"],
        "code",
        "--agent factories_elsewhere:rebuild: no module 'factories_elsewhere' in {cwd} or the "
        "installed packages",
    ),
    "module_fails_on_import": (
        ["--agent", "fails_on_import:rebuild"],
        "code",
        "--agent fails_on_import:rebuild: importing fails_on_import failed: RuntimeError: "
        "no settings",
    ),
    "no_such_factory": (
        ["--agent", "examples.cafe:revive"],
        "root",
        "--agent examples.cafe:revive: examples.cafe has no 'revive'",
    ),
    "not_callable": (
        ["--agent", "factories:NOT_CALLABLE"],
        "code",
        "--agent factories:NOT_CALLABLE: NOT_CALLABLE is not callable (type int)",
    ),
    "factory_raises": (
        ["--agent", "factories:raises"],
        "code",
        "--agent factories:raises failed on agent_root: ValueError: cannot rebuild agent_root "
        "(the model is gone)",
    ),
    "root_takes_no_prompt": (
        ["--agent", "factories:record_itself"],
        "code",
        "the root agent agent_root that --agent factories:record_itself rebuilt (type "
        "AgentRecord) cannot take a prompt: it has no harken() and no response()",
    ),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_resume_refuses_what_it_cannot_continue(
    tmp_path: Path, example_1: Path, code: Path, case: str
) -> None:
    agent, where, message = REFUSALS[case]
    cwd = ROOT if where == "root" else code
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    result = agenttrace(
        tmp_path, "resume", str(example_1), "--prompt", "Hello?", *agent, cwd=cwd,
        PYTHONDONTWRITEBYTECODE="1",
    )  # fmt: skip
    assert one_error_line(result) == message.format(cwd=cwd)
    # Nothing was written, nothing was changed.
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_resume_refuses_a_session_without_a_root_agent(tmp_path: Path) -> None:
    # Jack and Jill alone: both were created by a tool call of a root the file does not have.
    path = tmp_path / "orphans.events.jsonl"
    path.write_text(jsonl([e for e in EXAMPLE_1 if e["agent_id"] in ("agent_jack", "agent_jill")]))
    before = path.read_bytes()
    result = agenttrace(
        tmp_path, "resume", str(path), "--prompt", "Hello?", "--agent", CAFE, cwd=ROOT
    )
    assert one_error_line(result) == f"{path}: the session has no root agent"
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["orphans.events.jsonl"]
