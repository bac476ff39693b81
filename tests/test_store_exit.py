"""A program that ships its sessions to a store and exits without ``shutdown()``: ``init``'s
exit hook ships the last of the session, so the store alone (no local files) shows the run
ended and no call in doubt, for every store kind, in the program and in a process it starts
that joins the session (docs/how-to/session-stores.md).

Everything is real: the stores on their servers (tests/store_servers.py), the programs in
processes of their own, read back by the command line from the store's URL alone.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from agenttrace.formats.session.fullest import load_pair
from agenttrace.formats.session.optree import hosted_sessions, session_ops
from agenttrace.formats.stores import open_store
from agenttrace.formats.stores.materialize import materialize
from tests.helpers import agenttrace_command, child_env

from .store_servers import (
    S3_BUCKET,
    STORES,
    aws_environment,
    moto_endpoint,
    postgres_schema,
    postgres_server,
    stop_store_servers,
)

ROOT = Path(__file__).resolve().parent.parent

# The program: records a run whose tool starts a process that joins the session (as a process
# on another host does: a sessions directory of its own, the store in common); neither calls
# shutdown().
PROGRAM = textwrap.dedent(
    """
    import subprocess
    import sys

    import agenttrace

    sessions, url, role = sys.argv[1:4]
    agenttrace.init(console="quiet", sessions_dir=sessions, sessions_url=url)


    @agenttrace.tool(name="look_up")
    def look_up(topic):
        if role == "parent":
            env = agenttrace.subprocess_env()
            env.pop("AGENTTRACE_JOIN_SESSIONS_DIR")
            subprocess.run(
                [sys.executable, __file__, sessions + "-child", url, "child"],
                env=env,
                check=True,
                stdout=subprocess.DEVNULL,
                timeout=480,
            )
        return f"notes on {topic}"


    @agenttrace.agent("clerk" if role == "parent" else "researcher")
    def clerk():
        return look_up("tides")


    clerk()
    print(agenttrace.current_session().session_id)
    """
)


@pytest.fixture(scope="session", autouse=True)
def store_servers() -> Iterator[None]:
    """Stop the servers these tests started (each on first use) when the session ends."""
    yield
    stop_store_servers()


@contextlib.contextmanager
def _store_url(kind: str, tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """A fresh store of ``kind`` as a user names it: its URL and the environment it needs.
    PostgreSQL's URL has its password in it (as the how-to allows; no ``PGPASSWORD``)."""
    if kind == "local":
        yield (tmp_path / "store").as_uri(), {}
    elif kind == "s3":
        url = f"s3://{S3_BUCKET}/{tmp_path.name}-exit"
        yield url, aws_environment(moto_endpoint())
    else:
        with postgres_schema() as url:
            assert f":{postgres_server().password}@" in url
            yield url, {}


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return agenttrace_command(*args, timeout=480, **env)


@pytest.mark.parametrize("kind", sorted(STORES))
def test_a_program_that_exits_without_shutdown_leaves_its_session_whole_in_the_store(
    kind: str, tmp_path: Path
) -> None:
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    with _store_url(kind, tmp_path) as (url, env):
        ran = subprocess.run(
            [sys.executable, str(program), str(tmp_path / "sessions"), url, "parent"],
            env=child_env(**env),
            capture_output=True,
            text=True,
            timeout=480,
            cwd=ROOT,
        )
        assert ran.returncode == 0, ran.stderr
        assert "agenttrace" not in ran.stderr  # no warning: everything was shipped
        session_id = ran.stdout.strip()
        # The store alone: the commands from its URL, with an empty sessions directory.
        empty = tmp_path / "empty"
        empty.mkdir()
        reading = {
            **env,
            "AGENTTRACE_SESSIONS_DIR": str(empty),
            "AGENTTRACE_SESSIONS_URL": url,
            "XDG_CACHE_HOME": str(tmp_path / "cache"),
        }
        listed = _cli("list", "--json", **reading)
        assert listed.returncode == 0, listed.stderr
        [row] = json.loads(listed.stdout)
        assert (row["session_id"], row["status"]) == (session_id, "ended")
        doubts = _cli("doubts", session_id, "--json", **reading)
        assert doubts.returncode == 0, doubts.stderr
        assert json.loads(doubts.stdout) == []
        # The joined process's part is in the store too, under the tool that started it.
        with pytest.MonkeyPatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            store = open_store(url)
            try:
                materialize(store, session_id, tmp_path / "rebuilt")
            finally:
                store.close()
        loaded, up_to_date = load_pair(tmp_path / "rebuilt" / f"{session_id}.json.gz")
        assert up_to_date
        [root] = loaded.runs
        [op] = session_ops(root)
        [joined] = hosted_sessions(op)
        assert (op["name"], joined["agentName"]) == ("look_up", "researcher")
        # Both runs ended, in the store's copy too: the parent's and the joined process's.
        ended = [(run["success"], run["endedAt"] > 0) for run in (root, joined)]
        assert ended == [(True, True)] * 2


# A store opened and written at exit, after the interpreter stopped every thread pool: a new
# client, a new connection, the endpoint's host name resolved (aiohttp resolves through the
# event loop's default executor) as a long-running program's last shipment may need.
AT_EXIT = textwrap.dedent(
    """
    import atexit
    import sys

    from agenttrace.formats.stores import open_store

    open_store(sys.argv[1]).close()  # the store's loop is made, and its executor used


    def write():
        store = open_store(sys.argv[1])
        try:
            store.append("0123456789abcdef", "main/events/000001-0000000000", b"{}\\n")
        finally:
            store.close()
        print("written")


    atexit.register(write)
    """
)


def test_an_s3_store_is_reached_by_host_name_at_the_interpreters_exit(tmp_path: Path) -> None:
    program = tmp_path / "at_exit.py"
    program.write_text(AT_EXIT)
    endpoint = moto_endpoint().replace("127.0.0.1", "localhost")
    url = f"s3://{S3_BUCKET}/{tmp_path.name}-at-exit"
    env = aws_environment(endpoint)
    ran = subprocess.run(
        [sys.executable, str(program), url],
        env=child_env(**env),
        capture_output=True,
        text=True,
        timeout=480,
        cwd=ROOT,
    )
    assert (ran.returncode, ran.stdout) == (0, "written\n"), ran.stderr
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        store = open_store(url)
        try:
            assert [s.name for s in store.segments("0123456789abcdef")] == [
                "main/events/000001-0000000000"
            ]
        finally:
            store.close()
