"""Temporary files a killed process left in the sessions directory are removed, and nothing else:
not another process's file being written right now, not a young one, not someone else's, not a
file agenttrace did not name."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import agenttrace
from agenttrace.formats.session.files import snapshot_path
from agenttrace.formats.session.leftovers import is_temporary_name, remove_leftovers

from .conftest import Traced
from .helpers import child_env

# A process in the middle of writing a session file: its temporary file exists, locked, and
# it prints that file's name; it then waits for ever (until it is killed).
MID_WRITE = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from agenttrace.formats.session.spool import atomic_file
    target = Path(sys.argv[1])
    with atomic_file(target) as handle:
        handle.write(b"half a session file")
        handle.flush()
        [temporary] = target.parent.glob("." + target.name + ".*.tmp")
        print(temporary.name, flush=True)
        time.sleep(600)
    """
)

AN_HOUR_AGO = time.time() - 3600


class MidWrite:
    """A real process stopped in the middle of ``atomic_file``."""

    def __init__(self, target: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", MID_WRITE, str(target)],
            env=child_env(),
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        self.temporary = target.parent / self.process.stdout.readline().strip()
        assert self.temporary.is_file() and is_temporary_name(self.temporary.name)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)


def test_only_what_killed_processes_left_is_removed(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    killed = MidWrite(snapshot_path(sessions, "killed"))
    killed.kill()  # its temporary file stays, unlocked
    writing = MidWrite(snapshot_path(sessions, "writing"))  # another process sharing the dir
    try:
        young = MidWrite(snapshot_path(sessions, "young"))
        young.kill()
        spool = sessions / ".agenttrace-spool-abcd_123"  # a spool killed as it was made
        spool.write_bytes(b"members")
        stream = sessions / ".s1.events.jsonl.k2j4h5l6.tmp"  # a stream being rewritten
        stream.write_bytes(b"{}\n")
        others = [
            sessions / ".notes.txt.abcdefgh.tmp",  # not a name agenttrace gives
            sessions / "s1.json.gz.abcdefgh.tmp",
            sessions / ".s1.json.gz.abc.tmp",
            sessions / ".s1.json.gz.abcdefgh.tmp.bak",
        ]
        for other in others:
            other.write_bytes(b"not ours")
        theirs = sessions / ".s2.json.gz.zzzzzzzz.tmp"  # another user's
        theirs.write_bytes(b"theirs")
        link = sessions / ".s3.json.gz.yyyyyyyy.tmp"  # a symbolic link, never followed
        link.symlink_to(others[0])
        aged = [killed.temporary, writing.temporary, spool, stream, *others, theirs]
        for path in aged:
            os.utime(path, (AN_HOUR_AGO, AN_HOUR_AGO))
        if os.geteuid() == 0:
            os.chown(theirs, 12345, 12345)
        else:
            theirs.unlink()  # cannot give a file away; the uid check is not exercised

        removed = remove_leftovers(sessions)

        assert sorted(removed) == sorted([killed.temporary, spool, stream])
        assert not killed.temporary.exists() and not spool.exists() and not stream.exists()
        assert writing.temporary.read_bytes() == b"half a session file"  # still being written
        assert young.temporary.exists()  # unlocked, but made less than a minute ago
        assert all(other.read_bytes() == b"not ours" for other in others)
        assert link.is_symlink()
        if os.geteuid() == 0:
            assert theirs.read_bytes() == b"theirs"
        assert remove_leftovers(sessions) == []
        assert remove_leftovers(sessions, min_age=0) == [young.temporary]
    finally:
        writing.kill()
    # The writer was killed in its turn: now its file is a leftover too.
    assert remove_leftovers(sessions) == [writing.temporary]


def test_a_joined_writer_s_leftover_in_a_segments_directory_is_removed(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    (sessions / "s1.w").mkdir(parents=True)
    killed = MidWrite(sessions / "s1.w" / "ab12cd34-7.json.gz")
    killed.kill()
    writing = MidWrite(sessions / "s1.w" / "ab12cd34-8.json.gz")
    try:
        segment = sessions / "s1.w" / "ab12cd34-9.events.jsonl"  # a segment itself: kept
        segment.write_bytes(b"{}\n")
        elsewhere = tmp_path / "elsewhere"  # a segments directory that is a link: not followed
        elsewhere.mkdir()
        (elsewhere / ".x.json.gz.abcdefgh.tmp").write_bytes(b"not ours")
        (sessions / "s2.w").symlink_to(elsewhere)
        for path in (killed.temporary, writing.temporary, segment, *elsewhere.iterdir()):
            os.utime(path, (AN_HOUR_AGO, AN_HOUR_AGO))
        assert remove_leftovers(sessions) == [killed.temporary]
        assert writing.temporary.exists() and segment.exists()
        assert (elsewhere / ".x.json.gz.abcdefgh.tmp").exists()
    finally:
        writing.kill()


def test_the_first_session_file_write_tidies_the_sessions_dir(traced: Traced) -> None:
    sessions = traced.handle.settings.sessions_dir
    sessions.mkdir(parents=True, exist_ok=True)
    killed = MidWrite(snapshot_path(sessions, "earlier"))
    killed.kill()
    os.utime(killed.temporary, (AN_HOUR_AGO, AN_HOUR_AGO))
    session = agenttrace.new_session("now")
    session.log_agent_created(session.allocate_agent_id(), name="Jack")
    assert killed.temporary.exists()
    traced.handle.force_flush()  # writes now.json.gz: the directory is used
    assert not killed.temporary.exists()
    assert snapshot_path(sessions, "now").is_file()


def test_a_missing_or_unreadable_directory_is_not_an_error(tmp_path: Path) -> None:
    assert remove_leftovers(tmp_path / "nowhere") == []
    afile = tmp_path / "afile"
    afile.write_text("")
    assert remove_leftovers(afile) == []


@pytest.mark.parametrize(
    "name",
    [
        ".0123abcd.json.gz.abcdefgh.tmp",
        ".run-1.v2.events.jsonl.a_b_c_d_.tmp",
        ".agenttrace-spool-12345678",
    ],
)
def test_temporary_names(name: str) -> None:
    assert is_temporary_name(name)
