"""Hostile sessions on the command line: every command, as a user runs it.

What is not a regular file (a FIFO, ``/dev/zero`` behind a link, a directory, a socket), a file
past a limit, and a SESSION or a session file's ``session_id`` that would lead out of the
sessions directory: each gets one line and exit status 2, promptly (a timeout fails the test
instead of hanging it), with nothing written outside the sessions directory.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenttrace._internal.config import MIB

from .test_cli import FACTORIES, agenttrace, env_for, one_error_line
from .test_hostile_paths import Watch, planted, short, snapshot_bytes_with
from .test_read_limits import gzip_bomb
from .test_session_files import EXAMPLE_1, jsonl

pytestmark = pytest.mark.e2e

COMMANDS = {
    "dialog": ["--agents", "Jack,Jill"],
    "perspective": ["Jill"],
    "tree": [],
    "stats": [],
    "export": ["--format", "html"],
    "lint": [],
    "resume": ["--prompt", "Tea?", "--agent", "factories:rebuild"],
}
"""Every command that reads a SESSION, with the arguments it needs besides."""

PROMPT = 30
"""Seconds a refusal may take at most: far more than it takes, far less than forever."""


@pytest.fixture
def code(tmp_path: Path) -> Path:
    """A user's agent factory (its root logs what it hears), importable from this directory."""
    directory = tmp_path / "code"
    directory.mkdir()
    (directory / "factories.py").write_text(FACTORIES)
    return directory


def run(tmp_path: Path, command: str, session: str, *more: str, **env: str) -> str:
    """``agenttrace COMMAND SESSION ...``: the message of its one error line (exit 2)."""
    result = agenttrace(
        tmp_path, command, session, *COMMANDS[command], *more, cwd=tmp_path / "code",
        timeout=PROMPT, **env,
    )  # fmt: skip
    return one_error_line(result)


# --- not a regular file ---------------------------------------------------------------------------


@pytest.fixture
def odd_files(tmp_path: Path, code: Path) -> Iterator[dict[str, tuple[Path, str]]]:
    """kind -> (path, what the error says it is), a socket listening meanwhile."""
    fifo = tmp_path / "pipe.events.jsonl"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.json.gz"
    zero.symlink_to("/dev/zero")
    directory = tmp_path / "dir.events.jsonl"
    directory.mkdir()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        cwd = Path.cwd()
        os.chdir(tmp_path)  # a relative name: socket paths are limited to ~100 bytes
        try:
            server.bind("sock.events.jsonl")
        finally:
            os.chdir(cwd)
        server.listen(1)
        yield {
            "fifo": (fifo, "a FIFO"),
            "dev-zero": (zero, "a character device"),
            "directory": (directory, "a directory"),
            "socket": (tmp_path / "sock.events.jsonl", "a socket"),
        }


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory", "socket"])
@pytest.mark.parametrize("command", COMMANDS)
def test_what_is_not_a_regular_file_is_refused_at_once(
    tmp_path: Path, odd_files: dict[str, tuple[Path, str]], command: str, kind: str
) -> None:
    path, what = odd_files[kind]
    assert run(tmp_path, command, str(path)) == f"{path}: is {what}, not a session file"


@pytest.mark.parametrize("command", COMMANDS)
def test_a_fifo_found_by_id_is_refused_at_once(tmp_path: Path, code: Path, command: str) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    fifo = sessions / "piped.events.jsonl"
    os.mkfifo(fifo)
    message = run(tmp_path, command, "piped", "--sessions-dir", str(sessions))
    assert message == f"{fifo}: is a FIFO, not a session file"


# --- limits ---------------------------------------------------------------------------------------

RSS_PROBE = (
    "import sys\n"
    "from agenttrace.cli import main\n"
    "try:\n"
    "    main()\n"
    "finally:\n"
    "    peak = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')]\n"
    "    print('maxrss', peak[0], file=sys.__stdout__)\n"
)
"""Runs a command and prints its peak RSS in KiB: VmHWM, this process image's own high-water
mark. (``getrusage``'s ``ru_maxrss`` keeps the parent's peak across fork and exec on Linux,
so under a large pytest process it measured pytest.)"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM from /proc")
def test_a_gzip_bomb_is_refused_in_bounded_memory(tmp_path: Path, code: Path) -> None:
    """1 GiB of zeros in about 1 MB, read by ``agenttrace tree`` with the cap at 64 MiB: one
    line naming the limit, and the process's peak RSS far below what the bomb expands to."""
    bomb = tmp_path / "bomb.json.gz"
    gzip_bomb(bomb, 1024)
    result = subprocess.run(
        [sys.executable, "-c", RSS_PROBE, "tree", str(bomb)],
        env=env_for(tmp_path, AGENTTRACE_MAX_DECOMPRESSED_BYTES=str(64 * MIB)),
        cwd=code,
        capture_output=True,
        text=True,
        timeout=PROMPT,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"agenttrace: error: {bomb}: decompresses to more than 64 MiB, the limit; to read it, "
        f"raise AGENTTRACE_MAX_DECOMPRESSED_BYTES (now {64 * MIB})\n"
    )
    label, kib = result.stdout.split()
    assert label == "maxrss"
    assert int(kib) * 1024 < 320 * MIB, f"peak RSS {int(kib) // 1024} MiB"


@pytest.mark.parametrize("command", COMMANDS)
def test_an_overlong_line_is_refused(tmp_path: Path, code: Path, command: str) -> None:
    stream = tmp_path / "long.events.jsonl"
    stream.write_text(jsonl(EXAMPLE_1))
    message = run(tmp_path, command, str(stream), AGENTTRACE_MAX_LINE_BYTES="100")
    assert message == (
        f"{stream}: line 1 is more than 100 bytes, the limit; to read it, raise "
        "AGENTTRACE_MAX_LINE_BYTES (now 100)"
    )


# --- nothing written outside the sessions directory ---------------------------------------------

REFERENCES = [
    "../escaped",
    "a/../../escaped",
    "..",
    "a/b",
    "/abs-escaped",
    "escaped\n",
    "x" * 5000,
    "a\u2215b",
]
"""SESSION arguments that would lead out of the sessions directory (NUL cannot be in argv)."""


@pytest.fixture
def sessions(tmp_path: Path, code: Path) -> Path:
    """tmp_path/a/b/sessions, with a real session where ``../escaped`` and
    ``../../escaped`` would lead."""
    directory = tmp_path / "a" / "b" / "sessions"
    directory.mkdir(parents=True)
    for escaped in (tmp_path / "a" / "b", tmp_path / "a"):
        (escaped / "escaped.events.jsonl").write_text(jsonl(EXAMPLE_1))
    return directory


@pytest.mark.parametrize("reference", REFERENCES, ids=short)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_session_argument_that_leaves_the_directory(
    tmp_path: Path, sessions: Path, command: str, reference: str
) -> None:
    watch = Watch(tmp_path, sessions, reference)
    run(tmp_path, command, reference, "--sessions-dir", str(sessions))
    assert watch.changed() == []


PLANTED = [
    "../escaped",
    "../../../escaped/deeper/x",
    "/abs-escaped",
    "a/b",
    "escaped\n",
    "x" * 300,
    "a\u2215b",
]


@pytest.mark.parametrize("field", ["session_id", "meta.session_id"])
@pytest.mark.parametrize("session_id", PLANTED, ids=short)
def test_resume_refuses_a_planted_session_id(
    tmp_path: Path, sessions: Path, field: str, session_id: str
) -> None:
    """``agenttrace resume FILE`` writes beside FILE under the id FILE gives: one that is not a
    plain name is refused before the run, and nothing is written anywhere."""
    path = planted(sessions, field, session_id)
    watch = Watch(tmp_path, sessions, session_id)
    message = run(tmp_path, "resume", str(path))
    # Refused by the schema's pattern for ids, or by the check before an id names a file.
    assert message.startswith(f"{path}: "), message
    assert "session id" in message or "session_id" in message, message
    assert watch.changed() == []


def test_resume_of_a_plain_planted_id_writes_inside(tmp_path: Path, sessions: Path) -> None:
    """The counterpart, so the test above can fail: the run happens and writes its files."""
    path = planted(sessions, "session_id", "plain-id")
    watch = Watch(tmp_path, sessions)
    result = agenttrace(
        tmp_path, "resume", str(path), *COMMANDS["resume"], cwd=tmp_path / "code", timeout=480
    )
    assert result.returncode == 0, result.stderr
    assert watch.changed() == []
    assert (sessions / "plain-id.events.jsonl").exists()
    assert (sessions / "plain-id.json.gz").exists()


@pytest.mark.parametrize("which", ["events.jsonl", "json.gz"])
def test_resume_refuses_a_file_name_linked_out(tmp_path: Path, sessions: Path, which: str) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"precious\nno newline")
    path = sessions / "planted.json.gz"
    path.write_bytes(snapshot_bytes_with(session_id="victim", meta={"session_id": "victim"}))
    link = sessions / f"victim.{which}"
    link.symlink_to(outside)
    watch = Watch(tmp_path, sessions)
    assert run(tmp_path, "resume", str(path)) == (
        f"{link}: is a symlink that leads out of {sessions}; not writing the session there"
    )
    assert watch.changed() == []
    assert outside.read_bytes() == b"precious\nno newline"


def test_the_views_refuse_a_file_with_a_planted_id(tmp_path: Path, sessions: Path) -> None:
    """A session id that is not a plain name breaks the published schema: a view of such a file
    is refused in one line (exit 2), and nothing is written."""
    path = planted(sessions, "session_id", "../escaped")
    watch = Watch(tmp_path, sessions)
    result = agenttrace(tmp_path, "dialog", str(path), *COMMANDS["dialog"], timeout=PROMPT)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"agenttrace: error: {path}: $.meta.session_id: Expected a session or txn id (a plain "
        "file-name stem)\n"
    )
    assert watch.changed() == []
