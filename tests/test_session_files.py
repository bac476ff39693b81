"""Reading session files back: ``read_session_file`` and ``find_session``.

Every file that is not a session of this format and version is a :class:`SessionFileError` whose
one-line message names the problem; a torn last line of a stream (a writer killed mid-line) is
skipped and reported, and nothing before it is lost. Seed 000's spelling (``content_id``,
``caused_by``, parents left implicit) reads as seed 001's.
"""

from __future__ import annotations

import contextlib
import ctypes
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agenttrace import SessionFileError
from agenttrace.formats.session.files import (
    check_session_id,
    find_session,
    read_session_file,
    snapshot_bytes,
)
from agenttrace.views.viewer import SessionViewer

from .helpers import child_env

DATA = Path(__file__).parent / "data"
EXAMPLE_1: list[dict[str, Any]] = json.loads((DATA / "seed001_examples.json").read_text())[
    "examples"
]["1"]["events"]
SEED_000_EXAMPLE_1 = DATA / "seed000_example1.jsonl"
SEED_000_EXAMPLE_2 = DATA / "seed000_example2.jsonl"
SEED_000_EXAMPLE_3 = DATA / "seed000_example3.jsonl"
SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"


def jsonl(events: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


META = {"createdAt": 1795393954000, "updatedAt": 1795393955000, "session_id": "s1"}
"""The least ``meta`` a session file has."""


def snapshot_of(events: list[dict[str, Any]], /, **payload: Any) -> bytes:
    """A gzipped session file holding ``events``, with ``payload`` overriding its head fields."""
    document = {
        "format": "agenttrace.session",
        "version": 1,
        "session_id": "s1",
        "runs": [],
        "meta": META,
        "events": events,
    }
    document.update(payload)
    return gzip.compress(json.dumps(document).encode())


def refused(path: Path) -> str:
    """The message of the ``SessionFileError`` reading ``path`` raises (checked: one line)."""
    with pytest.raises(SessionFileError) as caught:
        read_session_file(path)
    message = str(caught.value)
    assert message and "\n" not in message, repr(message)
    return message


# --- making a file unreadable, also for root ---------------------------------------------------

PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE = 1
CAP_DAC_READ_SEARCH = 2
NOBODY = 65534
PROBE = (
    "import sys\n"
    "try:\n"
    "    open(sys.argv[1], 'rb').close()\n"
    "except PermissionError:\n"
    "    print('denied')\n"
    "else:\n"
    "    print('readable')\n"
)


def _drop_read_any_file() -> Callable[[], None]:
    """A ``preexec_fn`` that takes from root (in the child only) the capabilities that let it
    read any file; it stays uid 0, so an interpreter under /root still starts."""
    libc = ctypes.CDLL(None, use_errno=True)  # loaded before the fork

    def drop() -> None:
        for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
            if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")

    return drop


def _become_nobody() -> None:
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def subprocess_env() -> dict[str, str]:
    """The test environment less OTEL_* and AGENTTRACE_*, offline for litellm."""
    return child_env()


@contextlib.contextmanager
def traversable_dir() -> Iterator[Path]:
    """A temporary directory any user can traverse (pytest's tmp_path is 0700 under root)."""
    directory = Path(tempfile.mkdtemp(prefix="agenttrace-test-"))
    directory.chmod(0o755)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def open_dir() -> Iterator[Path]:
    with traversable_dir() as directory:
        yield directory


def make_unreadable(path: Path, probe: Path | None = None) -> Callable[[], None] | None:
    """chmod 000 ``path`` and return the ``preexec_fn`` a subprocess needs for that to hold
    (``None`` when not root): opening ``probe`` (default: ``path``) is then denied. Root reads
    any file, so under root the child either loses the capabilities for that or becomes
    ``nobody``; each way is probed. Skips when neither works."""
    if os.name != "posix":
        pytest.skip("file permissions of this test are POSIX")
    path.chmod(0)
    strategies: list[Callable[[], None] | None] = [None]
    if os.geteuid() == 0:
        strategies = []
        with contextlib.suppress(OSError):
            strategies.append(_drop_read_any_file())
        strategies.append(_become_nobody)
    for preexec in strategies:
        try:
            probe = subprocess.run(
                [sys.executable, "-c", PROBE, str(probe or path)],
                preexec_fn=preexec,
                env=subprocess_env(),
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if probe.stdout.strip() == "denied":
            return preexec
    pytest.skip(
        "cannot make a file unreadable here: running as root, and a child process can neither "
        "drop CAP_DAC_OVERRIDE nor run this interpreter as nobody"
    )


# --- files that are not sessions ------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    assert "no such file" in refused(tmp_path / "nothing.events.jsonl")


def test_directory(tmp_path: Path) -> None:
    (tmp_path / "a-dir.json.gz").mkdir()
    assert "is a directory" in refused(tmp_path / "a-dir.json.gz")


def test_unreadable_file(open_dir: Path) -> None:
    path = open_dir / "locked.events.jsonl"
    path.write_text(jsonl(EXAMPLE_1))
    preexec = make_unreadable(path)
    script = (
        "import sys\n"
        "from agenttrace.formats.session.files import SessionFileError, read_session_file\n"
        "try:\n"
        "    read_session_file(sys.argv[1])\n"
        "except SessionFileError as exc:\n"
        "    print('SessionFileError:', exc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        preexec_fn=preexec,
        env=subprocess_env(),
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout
    assert lines[0] == f"SessionFileError: {path}: cannot read: Permission denied"


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("empty.json.gz", b""),
        ("empty.jsonl", b""),
        ("empty.events.jsonl", b"\n"),
        ("empty.events.jsonl", b"  \n\n\t\n"),
    ],
    ids=["empty session file", "empty, not named as a stream", "newline", "blank"],
)
def test_empty_file(tmp_path: Path, name: str, content: bytes) -> None:
    """An empty file is no session, but for a session's own event stream (tests/
    test_empty_stream.py: a process killed before its first line was whole); blank lines are
    no such stream either (agenttrace writes none)."""
    path = tmp_path / name
    path.write_bytes(content)
    assert "empty file, no events" in refused(path)


def _truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _bad_crc(data: bytes) -> bytes:
    return data[:-8] + bytes([data[-8] ^ 0xFF]) + data[-7:]


def _magic_only(data: bytes) -> bytes:
    return data[:2]


@pytest.mark.parametrize("damage", [_truncated, _bad_crc, _magic_only])
def test_truncated_or_damaged_gzip(tmp_path: Path, damage: Callable[[bytes], bytes]) -> None:
    path = tmp_path / "s1.json.gz"
    path.write_bytes(damage(snapshot_of(EXAMPLE_1)))
    assert "truncated or damaged gzip" in refused(path)


@pytest.mark.parametrize("content", [b"not json at all", b"", b'{"format": '])
def test_gzip_not_holding_json(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "s1.json.gz"
    path.write_bytes(gzip.compress(content))
    assert "gzip does not hold JSON; not an agenttrace session" in refused(path)


@pytest.mark.parametrize(
    ("document", "found"),
    [
        ({"format": "otel.trace", "version": 1, "events": []}, "format 'otel.trace'"),
        ({"version": 1, "events": []}, "no format field"),  # what it lacks, not Python's None
        ({"format": None, "version": 1, "events": []}, "no format field"),
        ([{"message_id": "msg_001"}], "a JSON array, not an object"),
        ("agenttrace.session", "a JSON string, not an object"),
    ],
    ids=["other-format", "no-format", "null-format", "list", "string"],
)
def test_json_of_another_format(tmp_path: Path, document: Any, found: str) -> None:
    path = tmp_path / "s1.json.gz"
    path.write_bytes(gzip.compress(json.dumps(document).encode()))
    assert refused(path) == f"{path}: not an agenttrace session file ({found})"


@pytest.mark.parametrize(
    ("version", "shown"),
    [(2, "version 2"), (0, "version 0"), ("1", "version '1'"), (None, "with no version")],
)
def test_other_version(tmp_path: Path, version: Any, shown: str) -> None:
    path = tmp_path / "s1.json.gz"
    path.write_bytes(snapshot_of(EXAMPLE_1, version=version))
    message = refused(path)
    assert f"session file {shown}; this agenttrace reads version 1" in message
    assert "None" not in message.removeprefix(str(path))


def test_snapshot_without_event_list(tmp_path: Path) -> None:
    path = tmp_path / "s1.json.gz"
    path.write_bytes(snapshot_of([], events={"msg_001": {}}))
    assert refused(path) == f"{path}: $.events: Expected `array`, got `object`"


NOT_EVENTS = [  # (entry, where in it, what is wrong)
    (["a", "list"], "", "Expected `object`, got `array`"),
    ("a string", "", "Expected `object`, got `str`"),
    (None, "", "Expected `object`, got `null`"),
    (
        {"event_type": "transcript_entry", "agent_id": "a", "role": "user"},
        "",
        "Object missing required field `message_id`",
    ),
    (
        {"message_id": 1, "event_type": "transcript_entry"},
        ".message_id",
        "Expected `str`, got `int`",
    ),
    (
        {"message_id": "msg_002", "event_type": "span_started"},
        ".event_type",
        "Invalid value 'span_started'",
    ),
    ({"message_id": "msg_002"}, "", "Object missing required field `event_type`"),
]


@pytest.mark.parametrize(("entry", "where", "what"), NOT_EVENTS)
def test_snapshot_entry_that_is_not_an_event(
    tmp_path: Path, entry: Any, where: str, what: str
) -> None:
    path = tmp_path / "s1.json.gz"
    path.write_bytes(snapshot_of([EXAMPLE_1[0], entry, EXAMPLE_1[1]]))
    assert refused(path) == f"{path}: $.events[1]{where}: {what}"


@pytest.mark.parametrize(("entry", "where", "what"), NOT_EVENTS)
def test_stream_entry_that_is_not_an_event(
    tmp_path: Path, entry: Any, where: str, what: str
) -> None:
    path = tmp_path / "s1.events.jsonl"
    path.write_text(jsonl([*EXAMPLE_1[:2], entry, *EXAMPLE_1[2:]]))
    assert refused(path) == f"{path}: line 3 is not a canonical event: {what} at ${where}"


@pytest.mark.parametrize(
    "content",
    [b"hello\nworld\n", b"\xff\xfe{}\n", b"root:x:0:0:root:/root:/bin/bash\n"],
    ids=["text", "not-utf8", "passwd"],
)
def test_stream_whose_first_line_is_not_json(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "other.jsonl"
    path.write_bytes(content)
    assert "not an agenttrace event stream (line 1 is not JSON)" in refused(path)


# --- torn and bad lines -------------------------------------------------------------------------


def test_torn_last_line_is_skipped_and_reported(tmp_path: Path) -> None:
    torn = '{"message_id": "msg_021", "event_type": "transcript_entry", "agent_id": "agen'
    path = tmp_path / "s1.events.jsonl"
    path.write_text(jsonl(EXAMPLE_1) + torn)  # killed mid-write: no newline after it
    loaded = read_session_file(path)
    assert loaded.kind == "stream"
    assert loaded.torn == torn
    assert loaded.events == EXAMPLE_1  # every complete event before it, as written
    assert loaded.session_id == "s1"


def test_a_complete_last_line_without_newline_is_not_torn(tmp_path: Path) -> None:
    path = tmp_path / "s1.events.jsonl"
    path.write_text(jsonl(EXAMPLE_1).rstrip("\n"))
    loaded = read_session_file(path)
    assert loaded.torn is None
    assert loaded.events == EXAMPLE_1


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("s1.jsonl", '{"message_id": "msg_001", "event_'),  # not named as a session's stream
        ("s1.events.jsonl", "not a line agenttrace writes"),  # no JSON object cut short
    ],
)
def test_a_file_of_only_a_torn_line_is_an_error(tmp_path: Path, name: str, text: str) -> None:
    """A session's stream holding only a torn first line recorded nothing (tests/
    test_empty_stream.py); any other file of one line cut short is no session."""
    path = tmp_path / name
    path.write_text(text)
    assert "no complete event in the stream" in refused(path)


def test_bad_line_in_the_middle_is_an_error(tmp_path: Path) -> None:
    lines = jsonl(EXAMPLE_1).splitlines(keepends=True)
    lines[10] = '{"message_id": "msg_011", "event_type": "transc\n'  # torn, then written on
    path = tmp_path / "s1.events.jsonl"
    path.write_text("".join(lines))
    message = refused(path)
    assert message == f"{path}: line 11 is not JSON"


def test_bad_last_line_with_newline_is_an_error(tmp_path: Path) -> None:
    """Only a last line without its newline can be a write cut short."""
    path = tmp_path / "s1.events.jsonl"
    path.write_text(jsonl(EXAMPLE_1) + '{"message_id": "msg_021", "event_\n')
    assert refused(path) == f"{path}: line 21 is not JSON"


# --- round trip ---------------------------------------------------------------------------------


def root_node(session_id: str, trace_id: str, span_id: str) -> dict[str, Any]:
    """The least a run's root SessionNode holds: a run that started and has not ended."""
    return {
        "id": session_id,
        "traceId": trace_id,
        "spanId": span_id,
        "path": "0",
        "agentId": "agent_001",
        "agentName": "Agent",
        "callPath": "Agent",
        "txnId": session_id,
        "originTxnId": session_id,
        "parentTxnId": None,
        "sessionId": session_id,
        "startedAt": 1795393954000,
        "attributes": {"ingress": {"source": "cli", "cli": {"pid": 7}}},
        "turns": [],
        "span": {
            "name": "invoke_agent Agent",
            "kind": "INTERNAL",
            "traceId": trace_id,
            "spanId": span_id,
            "parentSpanId": None,
            "startTimeUnixNano": 1795393954000000000,
            "attributes": {"agenttrace.kind": "session"},
            "events": [],
        },
        "resource": {"attributes": {"service.name": "cafe"}},
        "scope": {"name": "agenttrace", "version": "0.1.0"},
        "recording": {"captureContent": False, "maxPayloadBytes": 16384},
    }


def test_snapshot_round_trip(tmp_path: Path) -> None:
    session_id = "a1b2c3d4e5f60718"
    runs = [root_node(session_id, "ab" * 16, "cd" * 8), root_node(session_id, "ef" * 16, "01" * 8)]
    # Keys of meta agenttrace does not know (an earlier file's) are carried over as they are.
    meta = {**META, "session_id": session_id, "service_name": "cafe", "note": "café ☕", "runs": 2}
    lines = [(json.dumps(e, ensure_ascii=False) + "\n").encode() for e in EXAMPLE_1]
    data = snapshot_bytes("a1b2c3d4e5f60718", runs, lines, meta)
    assert data[:2] == b"\x1f\x8b"
    path = tmp_path / "a1b2c3d4e5f60718.json.gz"
    path.write_bytes(data)
    loaded = read_session_file(path)
    assert loaded.kind == "snapshot"
    assert loaded.session_id == "a1b2c3d4e5f60718"
    assert loaded.runs == runs
    assert loaded.meta == meta
    assert loaded.events == EXAMPLE_1
    assert loaded.torn is None
    # The viewer reads the snapshot as it reads the stream.
    stream = tmp_path / "a1b2c3d4e5f60718.events.jsonl"
    stream.write_text(jsonl(EXAMPLE_1))
    assert read_session_file(stream).events == loaded.events
    jill = "agent_jill"
    assert SessionViewer(path).extract_agent_perspective(jill) == SessionViewer(
        stream
    ).extract_agent_perspective(jill)


def test_kind_is_told_by_content_not_by_name(tmp_path: Path) -> None:
    gz_named_jsonl = tmp_path / "really-a-snapshot.jsonl"
    gz_named_jsonl.write_bytes(snapshot_of(EXAMPLE_1, session_id="inner-id"))
    jsonl_named_gz = tmp_path / "really-a-stream.json.gz"
    jsonl_named_gz.write_text(jsonl(EXAMPLE_1))
    snapshot, stream = read_session_file(gz_named_jsonl), read_session_file(jsonl_named_gz)
    assert (snapshot.kind, snapshot.session_id) == ("snapshot", "inner-id")
    assert (stream.kind, stream.session_id) == ("stream", "really-a-stream")
    assert snapshot.events == stream.events == EXAMPLE_1


# --- seed 000's spelling --------------------------------------------------------------------------


def test_seed_000_example_1_reads_as_seed_001(tmp_path: Path) -> None:
    loaded = read_session_file(SEED_000_EXAMPLE_1)
    assert loaded.torn is None
    # Seed 000's piece_of_text names no agent; otherwise its Example 1 is seed 001's, field
    # for field: content_id -> substance, caused_by -> cause, and each sub-agent's creation
    # gets the message holding the `task` call that made it.
    expected = [
        {k: v for k, v in e.items() if not (e["event_type"] == "piece_of_text" and k == "agent_id")}
        for e in EXAMPLE_1
    ]
    assert loaded.events == expected
    by_id = {e["message_id"]: e for e in loaded.events}
    assert "cause" not in by_id["msg_001"]  # the root
    assert by_id["msg_004"]["cause"] == "msg_003"
    assert by_id["msg_008"]["cause"] == "msg_007"
    assert by_id["msg_012"]["cause"] == "msg_011"
    assert [by_id[m]["substance"] for m in ("msg_013", "msg_014", "msg_017", "msg_020")] == [
        "msg_012",
        "msg_012",
        "msg_015",
        "msg_018",
    ]
    assert not [e for e in loaded.events if "content_id" in e or "caused_by" in e]
    # The views agree too.
    new_stream = tmp_path / "seed001.events.jsonl"
    new_stream.write_text(jsonl(EXAMPLE_1))
    old, new = SessionViewer(SEED_000_EXAMPLE_1), SessionViewer(new_stream)
    assert old.list_agents() == new.list_agents()
    assert old.build_causality_index() == new.build_causality_index()
    assert old.trace_message_flow("msg_017") == new.trace_message_flow("msg_017")
    for agent in ("agent_root", "agent_jack", "agent_jill"):
        assert old.extract_agent_perspective(agent) == new.extract_agent_perspective(agent)
    assert old.trace_content_references("msg_012") == new.trace_content_references("msg_012")


def test_an_older_creation_gets_the_newest_open_task_call_that_asked_for_its_name() -> None:
    """Without ``cause``, a sub-agent's creation is put on the newest unanswered ``task`` call
    that asked for its name, else the newest unanswered one; answered calls never count."""
    from agenttrace.model.events import infer_causes

    def task(message: str, call: str, name: str) -> dict[str, Any]:
        arguments = json.dumps({"name": name})
        return {
            "message_id": message,
            "event_type": "transcript_entry",
            "agent_id": "agent_root",
            "role": "assistant",
            "tool_calls": [{"id": call, "function": {"name": "task", "arguments": arguments}}],
        }

    def created(message: str, name: str) -> dict[str, Any]:
        return {
            "message_id": message,
            "event_type": "agent_created",
            "agent_id": name,
            "name": name,
        }

    answer = {
        "message_id": "msg_004",
        "event_type": "transcript_entry",
        "agent_id": "agent_root",
        "role": "tool",
        "tool_call_id": "c3",
    }
    events = [
        created("msg_000", "Root"),
        task("msg_001", "c1", "Jack"),
        task("msg_002", "c2", "Jill"),
        task("msg_003", "c3", "Jill"),
        answer,  # c3 is answered: Jill's creation goes to c2
        created("msg_005", "Jill"),
        created("msg_006", "Jack"),
        created("msg_007", "Nobody"),  # no call asked for it: the newest open one (c2)
    ]
    infer_causes(events)
    assert [e.get("cause") for e in events if e["event_type"] == "agent_created"] == [
        None,
        "msg_002",
        "msg_001",
        "msg_002",
    ]


@pytest.mark.parametrize(
    ("copy", "title", "count"),
    [
        (SEED_000_EXAMPLE_1, "### Example 1: Jack and Jill Discussion", 20),
        (SEED_000_EXAMPLE_2, "### Example 2: Inner Monologue", 10),
        (SEED_000_EXAMPLE_3, "### Example 3: Hook Intervention (Resource Constraints)", 6),
    ],
)
def test_the_seed_000_copy_is_the_seed_text(copy: Path, title: str, count: int) -> None:
    seed_file = SEEDS / "000_f203a6fc91e9d152.txt"
    if not seed_file.exists():
        pytest.skip(f"the seed documents are not beside this checkout ({seed_file})")
    text = seed_file.read_text()
    lines = copy.read_text().splitlines()
    assert len(lines) == count
    example = text[text.index(title) :]
    assert example.split("```jsonl\n", 1)[1].startswith("\n".join(lines) + "\n```")


def test_seed_000_a_first_agent_that_is_not_the_root_gets_its_parent() -> None:
    """Seed 000's Examples 2 and 3 (conformance cases) start inside a session: the first agent
    the stream creates is a sub-agent, created between its parent's `task` call and that call's
    result, with the name the call asked for. Its parent is inferred as any sub-agent's is; the
    root is the agent the stream names first that no `task` call created."""
    from agenttrace.session.state import Session

    for copy, agent, call, parent in (
        (SEED_000_EXAMPLE_2, "agent_jill_inner", "msg_030", "agent_jill"),
        (SEED_000_EXAMPLE_3, "agent_resource_hook", "msg_100", "agent_root"),
    ):
        loaded = read_session_file(copy)
        created = next(e for e in loaded.events if e.get("agent_id") == agent)
        assert created["event_type"] == "agent_created"
        assert created["cause"] == call
        session = Session.from_file(loaded)
        assert session.agents[agent].parent_id == parent
        root = session.root()
        assert root is not None and root.agent_id == parent
        assert [r.agent_id for r in session.children(parent)] == [agent]
        viewer = SessionViewer(copy)
        assert viewer.build_causality_index()[created["message_id"]] == call
        # Events given directly (not a file) are read by the same rule.
        direct = SessionViewer(json.loads(line) for line in copy.read_text().splitlines())
        assert direct.build_causality_index()[created["message_id"]] == call


def _task(message: str, call: str, name: str) -> dict[str, Any]:
    arguments = json.dumps({"name": name, "system_prompt": f"You are {name}."})
    return {
        "message_id": message,
        "event_type": "transcript_entry",
        "agent_id": "agent_001",
        "role": "assistant",
        "tool_calls": [{"id": call, "function": {"name": "task", "arguments": arguments}}],
    }


def _created(message: str, agent: str, name: str, **extra: Any) -> dict[str, Any]:
    return {
        "message_id": message,
        "event_type": "agent_created",
        "agent_id": agent,
        "name": name,
        **extra,
    }


def _result(message: str, call: str, name: str) -> dict[str, Any]:
    return {
        "message_id": message,
        "event_type": "transcript_entry",
        "agent_id": "agent_001",
        "role": "tool",
        "tool_call_id": call,
        "content": f"Created subagent: {name}",
    }


def test_seed_000_parents_are_matched_by_the_name_in_the_task_call(tmp_path: Path) -> None:
    """Two `task` calls open at once: each creation goes to the call that names it, not to the
    latest one; an explicit cause is kept; a creation with no open `task` call gets none."""
    events = [
        {"message_id": "msg_001", "event_type": "agent_created", "agent_id": "agent_001"},
        _task("msg_002", "c1", "Jack"),
        _task("msg_003", "c2", "Jill"),
        _created("msg_004", "agent_002", "Jack"),
        _created("msg_005", "agent_003", "Jill"),
        _result("msg_006", "c1", "Jack"),
        _result("msg_007", "c2", "Jill"),
        _created("msg_008", "agent_004", "Stray"),
        _task("msg_009", "c3", "Inner"),
        _created("msg_010", "agent_005", "Inner", caused_by="msg_002"),
    ]
    path = tmp_path / "old.events.jsonl"
    path.write_text(jsonl(events))
    causes = {e["message_id"]: e.get("cause") for e in read_session_file(path).events}
    assert causes["msg_001"] is None
    assert causes["msg_004"] == "msg_002"
    assert causes["msg_005"] == "msg_003"
    assert causes["msg_008"] is None
    assert causes["msg_010"] == "msg_002"


# --- finding a session --------------------------------------------------------------------------


@pytest.fixture
def sessions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A sessions directory inside tmp_path, the working directory elsewhere (so relative
    references do not find files by accident)."""
    directory = tmp_path / "sessions"
    directory.mkdir()
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return directory


def test_find_session_by_id(sessions: Path) -> None:
    (sessions / "abc123.json.gz").write_bytes(snapshot_of(EXAMPLE_1))
    assert find_session("abc123", sessions) == sessions / "abc123.json.gz"
    (sessions / "abc123.events.jsonl").write_text(jsonl(EXAMPLE_1))
    assert find_session("abc123", sessions) == sessions / "abc123.events.jsonl"  # the fuller one


def test_find_session_by_path(sessions: Path, tmp_path: Path) -> None:
    path = tmp_path / "saved.events.jsonl"
    path.write_text(jsonl(EXAMPLE_1))
    assert find_session(str(path), sessions) == path
    with pytest.raises(SessionFileError, match=r"no such file$"):
        find_session(str(tmp_path / "gone.jsonl"), sessions)


def test_find_session_by_a_relative_path_with_dot_dot(sessions: Path, tmp_path: Path) -> None:
    """``agenttrace tree ../sessions/<id>.json.gz``: a path the user wrote, read as written
    (from the working directory), however many ``..`` it has."""
    (sessions / "abc123.json.gz").write_bytes(snapshot_of(EXAMPLE_1))
    found = find_session("../sessions/abc123.json.gz", sessions)
    assert found.resolve() == sessions / "abc123.json.gz"
    assert read_session_file(found).events == read_session_file(sessions / "abc123.json.gz").events
    (tmp_path / "outside.events.jsonl").write_text(jsonl(EXAMPLE_1))
    assert find_session("../sessions/../outside.events.jsonl", sessions).resolve() == (
        tmp_path / "outside.events.jsonl"
    )


def _error(reference: str, sessions: Path) -> str:
    """The one-line message for ``reference``, found and read as the CLI does."""
    with pytest.raises(SessionFileError) as caught:
        read_session_file(find_session(reference, sessions))
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_what_is_not_a_session_file_is_named(sessions: Path, tmp_path: Path) -> None:
    """Each reference that is not a session says what it is instead, never "not a session id"
    for something written as a path."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "empty.json.gz").write_bytes(b"")
    assert _error("../notes", sessions) == "../notes: is a directory, not a session file"
    assert _error("..", sessions) == "..: is a directory, not a session file"
    assert _error("../empty.json.gz", sessions) == "../empty.json.gz: empty file, no events"
    assert _error("../missing", sessions) == "../missing: no such file"
    assert _error("../sessions/abc123.json.gz", sessions) == (
        "../sessions/abc123.json.gz: no such file"
    )
    if Path("/dev/null").exists():
        assert _error("/dev/null", sessions) == (
            "/dev/null: is a character device, not a session file"
        )


def test_a_bare_name_that_is_a_directory_here_is_named(sessions: Path) -> None:
    """``tree notes``, no session ``notes`` but a directory ``notes`` in the working directory:
    the directory is what the user meant, and it is not a session file."""
    Path("notes").mkdir()
    assert _error("notes", sessions) == "notes: is a directory, not a session file"
    (sessions / "notes.events.jsonl").write_text(jsonl(EXAMPLE_1))
    assert find_session("notes", sessions) == sessions / "notes.events.jsonl"  # the id first


def test_find_session_unknown_id(sessions: Path) -> None:
    with pytest.raises(SessionFileError) as caught:
        find_session("nosuchsession", sessions)
    assert str(caught.value) == f"no session 'nosuchsession' in {sessions}"


@pytest.mark.parametrize(
    "reference", ["../x", "a/b", "../sessions/../x", "/etc/passwd-nonexistent"]
)
def test_find_session_refuses_escaping_ids(sessions: Path, tmp_path: Path, reference: str) -> None:
    """Files that an id read as ``<sessions>/<id>.events.jsonl`` would reach exist; none is
    found."""
    (tmp_path / "x.events.jsonl").write_text(jsonl(EXAMPLE_1))
    (sessions / "a").mkdir()
    (sessions / "a" / "b.events.jsonl").write_text(jsonl(EXAMPLE_1))
    with pytest.raises(SessionFileError) as caught:
        find_session(reference, sessions)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "reference",
    ["../x", "a/b", "/etc/passwd", "..", "..x", "x..y", ".hidden", "", "a b", "x" * 129],
)
def test_check_session_id_refuses(reference: str) -> None:
    with pytest.raises(SessionFileError, match="not a session id"):
        check_session_id(reference)


@pytest.mark.parametrize("reference", ["d62a5d8c4df6a918", "example1", "run-2.a_b", "x" * 128])
def test_check_session_id_accepts(reference: str) -> None:
    assert check_session_id(reference) == reference


def test_an_absolute_path_is_a_file_reference_not_an_id(sessions: Path) -> None:
    """``/etc/passwd`` names a file (the CLI takes FILE|SESSION_ID), never
    ``<sessions>//etc/passwd...``; reading it is refused, as it is not a session."""
    passwd = Path("/etc/passwd")
    if not passwd.exists():
        pytest.skip("no /etc/passwd on this machine")
    found = find_session(str(passwd), sessions)
    assert found == passwd
    assert "not an agenttrace event stream" in refused(found)


# --- damaged files that once got past the reader ------------------------------------------


@pytest.mark.parametrize("calls", ["c1", ["c1"], [{"id": "c1", "function": "task"}]])
def test_malformed_tool_calls_are_a_session_file_error(tmp_path: Path, calls: Any) -> None:
    path = tmp_path / "s1.events.jsonl"
    entry = {**EXAMPLE_1[2], "tool_calls": calls}
    path.write_text(jsonl([*EXAMPLE_1[:2], entry, *EXAMPLE_1[3:]]))
    assert "not a canonical event" in refused(path)


@pytest.mark.parametrize("kind", ["stream", "snapshot"])
def test_deeply_nested_json_is_a_session_file_error(tmp_path: Path, kind: str) -> None:
    nested = b"[" * 100_000 + b"]" * 100_000
    path = tmp_path / "s1.events.jsonl"
    if kind == "stream":
        path.write_bytes(jsonl(EXAMPLE_1[:1]).encode() + nested + b"\n")
    else:
        path.write_bytes(gzip.compress(nested))
    refused(path)
