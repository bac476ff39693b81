"""The example project of issue 37 item 6 (examples/testing_project/): its own tests, run with
pytest as its developer runs them, pass on their checked-in cassettes with no model server and
every network connection of the process refused, and leave the cassettes as they were."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

from .helpers import ROOT, child_env

PROJECT = ROOT / "examples" / "testing_project"

REFUSE = """
import socket

_connect = socket.socket.connect


def _refused(self, address):
    if self.family == getattr(socket, "AF_UNIX", None):
        return _connect(self, address)
    raise ConnectionRefusedError(f"the network is off in this test: {address!r}")


socket.socket.connect = _refused
socket.socket.connect_ex = lambda self, address: _refused(self, address) or 0
"""
"""A ``sitecustomize`` that refuses every connection but a Unix socket's, from the start."""


def test_the_example_project_passes_offline_on_its_cassettes(tmp_path: Path) -> None:
    cassettes = sorted((PROJECT / "tests" / "cassettes").rglob("*.session.json.gz"))
    assert cassettes, "the example project's cassettes are checked in"
    before = {path: path.read_bytes() for path in cassettes}
    (tmp_path / "sitecustomize.py").write_text(REFUSE, encoding="utf-8")
    env = child_env(PYTHONPATH=f"{tmp_path}:{ROOT}", PYTHONDONTWRITEBYTECODE="1")
    env.pop("TRIP_RECORD", None)  # the project's conftest starts no model without it
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "--agent-cassette-mode=none",
            "--agenttrace-lint=error",
            "--basetemp",
            str(tmp_path / "t"),
        ],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-2000:]
    assert " passed" in ran.stdout and "failed" not in ran.stdout and "error" not in ran.stdout
    assert {path: path.read_bytes() for path in cassettes} == before


def test_the_checked_in_cassettes_say_nothing_of_the_machine_they_were_recorded_on() -> None:
    cassettes = sorted((PROJECT / "tests" / "cassettes").rglob("*.session.json.gz"))
    assert cassettes
    for path in cassettes:
        text = gzip.decompress(path.read_bytes()).decode()
        # The ingress's working directory, program path and pid, and the journal's pids.
        for key in ('"cwd"', '"argv0"', '"pid"', "ingress.cli."):
            assert key not in text, (path.name, key)
        assert '"source":"cli"' in text
