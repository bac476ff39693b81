"""Programs run as ``python -m MODULE ARGS...`` runs them, each forked from one interpreter that
imported their heavy dependencies once: a new interpreter spends seconds importing litellm (on
a busy 2-core machine over 10), more than the test programs run.

``python -m tests.fork_server MODULE...`` imports each ``MODULE`` (in that order: the order the
programs import them), then reads one JSON line per program on its standard input:
``{"module": M, "argv": [...], "env": {...}, "cwd": DIR, "stdout": PATH, "stderr": PATH}``
(and ``"prog"``: the ``argv[0]`` of a console script).
It forks; the child takes that environment, working directory and command line, writes its
standard output and error to those files, and runs ``M`` as ``__main__`` as ``-m`` does (the
program's own module is never imported ahead: its classes are ``__main__``'s, as in a process
of its own), or, for ``M`` written ``module:function``, exits with what ``function()`` returns
as a console script does (``agenttrace.cli:main`` is the ``agenttrace`` command), or, for
``M`` a ``.py`` file, runs it as ``python M`` does (its folder first on ``sys.path``); then it ends
as an interpreter ends (``atexit`` handlers run, streams flushed). The
server answers with JSON lines: ``{"pid": N}`` once the child runs, ``{"status": S}`` when it
has ended (``-9``: SIGKILLed). One program at a time.

:class:`Forks` is the tests' side, :class:`Forked` a program it started as a test that used
:class:`subprocess.Popen` sees it."""

from __future__ import annotations

import importlib
import json
import os
import runpy
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def _say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _become(request: dict[str, Any]) -> None:
    """In the child: the program's environment, directory, streams and command line, then the
    program (its SystemExit, or any exception, ends the interpreter as ``python -m`` would)."""
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    nothing = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nothing, 0)
    os.close(nothing)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's stdin, for its whole life
    module, _, function = request["module"].partition(":")
    sys.argv = [request.get("prog") or module, *request["argv"]]
    if function:
        sys.exit(getattr(importlib.import_module(module), function)())
    if module.endswith(".py"):
        sys.path[0] = str(Path(module).parent)
        runpy.run_path(module, run_name="__main__")
    else:
        runpy.run_module(module, run_name="__main__", alter_sys=True)


def serve() -> bool:
    """Fork a child per request until standard input ends: False in the server, True in each
    child once its program has returned (it then ends as an interpreter does)."""
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _become(request)
            return True
        _say({"pid": pid})
        _, code = os.waitpid(pid, 0)
        _say({"status": os.waitstatus_to_exitcode(code)})
    return False


class Forks:
    """A fork server (``python -m tests.fork_server``) with ``preload`` imported, started in
    ``cwd`` with ``env`` (what its imports read of the environment, they read from this)."""

    def __init__(self, preload: list[str], env: dict[str, str], cwd: Path) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.fork_server", *preload],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._running: int | None = None
        """The pid of the program started and not yet waited for."""
        self._outputs = Path(tempfile.mkdtemp(prefix="forks-"))
        """Where :meth:`run` has its programs write their standard output and error."""

    def _next(self) -> dict[str, Any]:
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        assert line, f"the fork server ended ({self._process.wait()})"
        message: dict[str, Any] = json.loads(line)
        return message

    def start(
        self,
        module: str,
        argv: list[str],
        env: dict[str, str],
        cwd: Path,
        out: Path,
        err: Path,
        prog: str = "",
    ) -> int:
        """Start ``python -m module *argv`` (forked; ``module:function`` a console script
        named ``prog``; ``FILE.py`` ``python FILE.py``), its standard output to ``out`` and its
        error to ``err`` (files, or a FIFO the caller then opens): its pid. :meth:`wait` for it
        before the next."""
        self._end_running()  # a failed test's, never waited for: the next test starts clean
        assert self._process.stdin is not None
        request = {"module": module, "argv": argv, "env": env, "cwd": str(cwd), "prog": prog}
        request.update(stdout=str(out), stderr=str(err))
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        self._running = int(self._next()["pid"])
        return self._running

    def popen(
        self, module: str, argv: list[str], env: dict[str, str], cwd: Path, out: Path, err: Path
    ) -> Forked:
        """:meth:`start`, as a :class:`Forked` (what a test that used Popen uses of it)."""
        return Forked(self, self.start(module, argv, env, cwd, out, err), out, err)

    def run(
        self, module: str, argv: list[str], env: dict[str, str], cwd: Path, prog: str = ""
    ) -> subprocess.CompletedProcess[str]:
        """:meth:`start` and :meth:`wait`: the program's end as ``subprocess.run(...,
        capture_output=True, text=True)`` gives it (``returncode`` -9: SIGKILLed)."""
        out, err = self._outputs / "stdout.txt", self._outputs / "stderr.txt"
        self.start(module, argv, env, cwd, out, err, prog)
        code = self.wait()
        command = [prog or module, *argv]
        return subprocess.CompletedProcess(command, code, out.read_text(), err.read_text())

    def wait(self) -> int:
        """The exit status of the program started last (``-9``: SIGKILLed)."""
        status = int(self._next()["status"])
        self._running = None
        return status

    def _end_running(self) -> None:
        """SIGKILL the program started and not waited for, if any, and wait for it."""
        if self._running is not None:
            os.kill(self._running, signal.SIGKILL)
            self.wait()

    def __enter__(self) -> Forks:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """End the server, and the program it runs if a failed test left one running (the
        server waits for it, and a writer that loops until killed never ends)."""
        self._end_running()
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(timeout=480)
        assert self._process.stdout is not None
        self._process.stdout.close()
        shutil.rmtree(self._outputs, ignore_errors=True)


class Forked:
    """A program :class:`Forks` started, with what tests use of a :class:`subprocess.Popen`:
    ``pid``, ``returncode``, :meth:`communicate`, :meth:`poll`, :meth:`kill`."""

    def __init__(self, forks: Forks, pid: int, out: Path, err: Path) -> None:
        self._forks, self.pid, self._out, self._err = forks, pid, out, err
        self.returncode: int | None = None

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Wait for the program's end: its standard output and error. ``timeout`` is not
        enforced (pytest-timeout is the hang guard): the server answers only once it ended."""
        if self.returncode is None:
            self.returncode = self._forks.wait()
        return self._out.read_text(), self._err.read_text()

    def poll(self) -> int | None:
        """The exit status once :meth:`communicate` has seen the end, else None."""
        return self.returncode

    def kill(self) -> None:
        """SIGKILL the program if it has not been seen to end."""
        if self.returncode is None:
            os.kill(self.pid, signal.SIGKILL)


if __name__ == "__main__":
    for name in sys.argv[1:]:
        importlib.import_module(name)
    if serve():
        sys.exit(0)  # the child's program returned: exit as its interpreter would
