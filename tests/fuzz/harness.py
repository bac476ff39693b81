"""Feeds one file to every reader, view, export and command, and says what went wrong (what
``agenttrace serve`` reads and sends of a session too, without its HTTP layer).

The only acceptable outcomes: the library returns, or raises ``SessionFileError`` with a
one-line message; a command exits 0, or exits 2 with exactly one line on stderr (``list``
exits 0: a damaged file is a row). Anything else (a traceback, another exit status, a second
line) is a failure, and so are a case that runs past its deadline, a case whose memory peak is
out of proportion to its input, and a file written outside the case's own directory.

Time is judged on the code, not on the machine. The deadline counts CPU time
(``ITIMER_VIRTUAL``), not wall time: a shared, slow machine makes a case wait, never spend. It is
taken on a pass without tracemalloc (which multiplies a case's cost some five to six times), with
a wide margin over what the dearest case costs on this machine kind (see :data:`CPU_DEADLINE_S`);
memory is measured on a second pass of the same case, which only a hang can fail on time
(:data:`HANG_GUARD_S`). Large crafted files are judged by how their cost grows with their size
(tests/fuzz/test_regressions.py), not by a deadline. ``faulthandler`` stands behind it all in wall
time, for a hang in C code that never returns to Python to be interrupted.
"""

from __future__ import annotations

import faulthandler
import json
import os
import resource
import shutil
import signal
import sys
import time
import traceback
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from click.testing import CliRunner

import agenttrace
from agenttrace.cli import main as cli_main
from agenttrace.formats.session.files import LoadedFile, SessionFileError, read_session_file
from agenttrace.formats.session.fullest import load_fullest
from agenttrace.formats.session.totals import session_stats
from agenttrace.formats.std008.rules import validate
from agenttrace.session.restore import load_session, resume
from agenttrace.session.state import use_session
from agenttrace.views.doubts import doubts, read_journal
from agenttrace.views.exports import (
    exchanges_jsonl,
    to_html,
    to_jaeger,
    to_otlp_json,
    to_std008,
)
from agenttrace.views.exports.atif import to_atif
from agenttrace.views.lint import lint_session, text_lines
from agenttrace.views.live import read_live, session_document
from agenttrace.views.tree import render_optree
from agenttrace.views.viewer import SessionViewer, format_dialog

from .mutate import decompressed_size

CPU_DEADLINE_S = 20.0
"""CPU seconds one case may take, all targets together, without tracemalloc. Measured on this
machine kind (2 cores, Python 3.11; the fuzz suite prints its dearest case): the dearest of the
5,000+ mutated, generated and regression cases cost 0.79-1.17 s in the runs measured (busy and
idle), so this is a margin of some 17x, enough for a CPU several times slower; a loop
that never ends, or cost that explodes with a case's size, still trips it."""
HANG_GUARD_S = 300.0
"""CPU seconds after which a pass that is not judged on time (the memory pass, under
tracemalloc; a crafted file judged by its growth) is stopped: a hang, not slowness."""
WALL_DEADLINE_S = 300.0
"""Wall seconds after which faulthandler dumps every thread and ends the process."""
RESIDENT_GROWTH = 512 << 20
"""No case may raise the process's peak resident set by more than this: a blow-up in a case
that tracemalloc does not measure, or in memory it does not see (C allocations)."""
MEMORY_BASE = 24 << 20
MEMORY_PER_BYTE = 120
"""A case's allocations may peak at ``MEMORY_BASE`` + ``MEMORY_PER_BYTE`` x the bytes of its
input once decompressed (what the readers parse): the seeds peak at about a quarter of that."""

FACTORY = "tests.fuzz.factory:rebuild"
"""The agent factory ``agenttrace resume`` is given (see tests/fuzz/factory.py)."""
RESOLVED = "3.2"
"""The step ``agenttrace resolve`` decides: the killed demo's ``discuss`` call, in doubt."""


TALLY: Counter[str] = Counter()
"""Cases run in this test session, by kind (``mutated``, ``generated``, ``regression``), and
how many of them read as sessions: printed at the end of the run (tests/fuzz/conftest.py)."""
DEAREST: list[tuple[float, str]] = [(0.0, "")]
"""The CPU seconds of the dearest case judged by :data:`CPU_DEADLINE_S` in this test session,
and its file's name: printed at the end of the run, the figure that deadline is set from."""


class CaseTimeout(BaseException):
    """A case used up its CPU deadline (a BaseException: no ``except Exception`` stops it)."""


@dataclass
class Failure:
    target: str
    detail: str


@dataclass
class Report:
    """What one case did: failures, and the memory its targets peaked at."""

    failures: list[Failure] = field(default_factory=list)
    peak: int = 0
    limit: int = 0
    readable: bool = False
    """Whether the file read as a session (so it reached every view, not just the reader)."""
    exits: dict[str, int] = field(default_factory=dict)
    """Each command's exit status, by its arguments before the file."""
    cpu: float = 0.0
    """CPU seconds the timed pass took (every target, without tracemalloc)."""


_expired: list[bool] = [False]
"""Set when the deadline fires: the exception can land where Python only prints it (a
destructor, a callback), and the case must still count as having run out of time."""
_deadline: list[float] = [CPU_DEADLINE_S]
"""The deadline of the pass running now, for the timeout's message."""


def _on_deadline(signum: int, frame: Any) -> None:
    _expired[0] = True
    raise CaseTimeout(f"used more than {_deadline[0]:.0f} s of CPU")


@contextmanager
def guarded() -> Iterator[None]:
    """Run cases with the CPU deadline's handler installed; restores everything after."""
    previous = signal.signal(signal.SIGVTALRM, _on_deadline)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)
        faulthandler.cancel_dump_traceback_later()
        if tracemalloc.is_tracing():
            tracemalloc.stop()


def _max_resident() -> int:
    """The process's peak resident set so far, in bytes (Linux counts it in KiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


class Harness:
    """Runs cases under ``workdir``: each in a directory of its own two levels down (so an id
    that climbs out of it lands where it is seen), removed after it."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.cases_dir = workdir / "cases" / "of"
        self.cases_dir.mkdir(parents=True, exist_ok=True)
        self.runner = CliRunner()
        self.cases = 0
        self.passes = 0
        """Passes run (a measured case runs two), each in a directory of its own."""
        self.agents: list[str] | None = None
        self.found: list[tuple[str, list[Failure]]] = []
        """(what the case was, its failures) of every case that failed."""

    def case(
        self,
        kind: str,
        name: str,
        data: bytes,
        how: str,
        sibling: tuple[str, bytes] | None = None,
        *,
        measure: bool = True,
        deadline: float | None = CPU_DEADLINE_S,
    ) -> Report:
        """:meth:`run`, counted in :data:`TALLY` under ``kind``; a failing input is kept in
        ``workdir/failed`` (to become a regression case) and listed in :attr:`found`."""
        report = self.run(name, data, sibling, measure=measure, deadline=deadline)
        TALLY[kind] += 1
        TALLY["readable"] += report.readable
        if report.failures:
            TALLY["failed"] += 1
            kept = self.workdir / "failed" / f"{len(self.found) + 1:03d}-{name}"
            kept.parent.mkdir(exist_ok=True)
            kept.write_bytes(data)
            self.found.append((f"{how}\n(the file: {kept})", report.failures))
        return report

    def verdict(self, limit: int = 4) -> str:
        """The failures so far, for an assertion message: the first few in full."""
        parts = [f"{len(self.found)} of {self.cases} cases failed"]
        for how, failures in self.found[:limit]:
            for failure in failures[:3]:
                parts.append(f"--- {how}\n[{failure.target}]\n{failure.detail}")
        return "\n".join(parts)

    def run(
        self,
        name: str,
        data: bytes,
        sibling: tuple[str, bytes] | None = None,
        *,
        measure: bool = True,
        deadline: float | None = CPU_DEADLINE_S,
    ) -> Report:
        """Every target on the file ``name`` holding ``data`` (``sibling`` beside it).

        The timed pass runs without tracemalloc, under ``deadline`` CPU seconds (``None``: only
        :data:`HANG_GUARD_S`, for a case judged otherwise), and gives :attr:`Report.cpu`.
        ``measure``: if that pass found nothing wrong, run the case again, from a fresh
        directory, with tracemalloc tracing its allocations (which makes it some five times
        dearer, so the suite measures a share of its cases; the resident-set guard watches
        all), judged on memory and stopped only by the hang guard.
        """
        self.cases += 1
        report = Report(limit=MEMORY_BASE + MEMORY_PER_BYTE * decompressed_size(data))
        self._pass(name, data, sibling, report, deadline, trace_memory=False)
        if deadline is not None and report.cpu > DEAREST[0][0] and not report.failures:
            DEAREST[0] = (report.cpu, name)
        if measure and not report.failures:
            self._pass(name, data, sibling, report, None, trace_memory=True)
        return report

    def _pass(
        self,
        name: str,
        data: bytes,
        sibling: tuple[str, bytes] | None,
        report: Report,
        deadline: float | None,
        *,
        trace_memory: bool,
    ) -> None:
        """One pass of every target over the case, in a directory of its own, under
        ``deadline`` CPU seconds (``None``: the hang guard)."""
        limit = HANG_GUARD_S if deadline is None else deadline
        self.passes += 1
        directory = self.cases_dir / f"case{self.passes}"
        directory.mkdir()
        path = directory / name
        path.write_bytes(data)
        if sibling is not None:
            (directory / sibling[0]).write_bytes(sibling[1])
        outside = _listing(self.workdir, directory)
        if trace_memory:
            tracemalloc.start()
            start = tracemalloc.get_traced_memory()[0]
        resident = _max_resident()
        faulthandler.dump_traceback_later(WALL_DEADLINE_S, exit=True)
        _expired[0] = False
        _deadline[0] = limit
        began = time.process_time()
        signal.setitimer(signal.ITIMER_VIRTUAL, limit)
        try:
            self._library(path, report)
            self._commands(path, report)
        except CaseTimeout as exc:
            report.failures.append(Failure("deadline", str(exc) + "\n" + traceback.format_exc()))
        finally:
            signal.setitimer(signal.ITIMER_VIRTUAL, 0)
            faulthandler.cancel_dump_traceback_later()
            use_session(None)
            agenttrace.shutdown()
        if not trace_memory:
            report.cpu = time.process_time() - began
        if _expired[0] and not any(f.target == "deadline" for f in report.failures):
            report.failures.append(Failure("deadline", f"used more than {limit:.0f} s of CPU"))
        if trace_memory:
            report.peak = tracemalloc.get_traced_memory()[1] - start
            tracemalloc.stop()
            if report.peak > report.limit:
                report.failures.append(
                    Failure("memory", f"peak {report.peak} bytes, bound {report.limit}")
                )
        grown = _max_resident() - resident
        if grown > RESIDENT_GROWTH:
            report.failures.append(
                Failure("memory", f"the process grew by {grown} bytes in one case")
            )
        if _listing(self.workdir, directory) != outside:
            report.failures.append(Failure("paths", "a file was written outside the case"))
        shutil.rmtree(directory)

    # -- the library ------------------------------------------------------------------------

    def _library(self, path: Path, report: Report) -> None:
        loaded = _call(report, "read_session_file", lambda: read_session_file(path))
        # The readers that take a path read every file, a refused one too (one line each);
        # they write nothing, so the commands after them find the case as it was made.
        _call(report, "load_fullest", lambda: load_fullest(path))
        _call(report, "SessionViewer(path)", lambda: SessionViewer(path))
        _call(report, "serve", lambda: _served(path))
        _call(report, "doubts", lambda: _doubts(path))
        if loaded is None:
            return
        report.readable = True
        _call(report, "resume", lambda: _resumed(path))
        _call(report, "load_session", lambda: load_session(path, _factory))
        _call(report, "SessionViewer", lambda: _viewed(loaded))
        _call(report, "stats", lambda: json.dumps(session_stats(loaded.runs)))
        _call(report, "tree", lambda: render_optree(loaded.runs))
        _call(report, "to_jaeger", lambda: json.dumps(to_jaeger(loaded)))
        _call(report, "to_otlp_json", lambda: json.dumps(to_otlp_json(loaded)))
        _call(report, "to_html", lambda: to_html(loaded).encode())
        _call(report, "exchanges_jsonl", lambda: exchanges_jsonl(loaded).encode())
        _call(report, "to_std008", lambda: _std008(loaded))
        _call(report, "to_atif", lambda: json.dumps(to_atif(loaded)))
        _call(report, "lint", lambda: text_lines(lint_session(loaded)))
        self.agents = _agent_names(loaded)

    # -- the commands -----------------------------------------------------------------------

    def _commands(self, path: Path, report: Report) -> None:
        agents = self.agents or ["Jack", "Jill"]
        self.agents = None
        file = str(path)
        directory = str(path.parent)
        commands: list[list[str]] = [
            ["tree", file],
            ["stats", file],
            ["stats", "--json", file],
            ["dialog", file, "--agents", ",".join(agents[:3])],
            ["perspective", file, agents[-1]],
            ["export", "--format", "jaeger", file],
            ["export", "--format", "otlp-json", file],
            ["export", "--format", "html", file],
            ["export", "--format", "exchanges", file],
            ["export", "--format", "std008", file],
            ["export", "--format", "atif", file],
            # Before resume, which writes beside the file: the directory holds the case alone.
            ["list", "--json", "--sessions-dir", directory],
            ["doubts", file],
            ["doubts", "--json", file],
            ["lint", "--json", file],
            # The killed demo's call in doubt (tests/fuzz/seeds/crashed.*), decided before the
            # resume re-enters its run; elsewhere most often no call in doubt there (exit 2).
            ["resolve", file, RESOLVED, "--not-applied"],
            ["resume", file, "--prompt", "Coffee?", "--agent", FACTORY],
        ]
        for args in commands:
            # Resumed without tracing: the run must not set this process's tracer provider.
            env = {"OTEL_SDK_DISABLED": "true"} if args[0] == "resume" else None
            result = self.runner.invoke(cli_main, args, env=env, catch_exceptions=True)
            report.exits[" ".join(a for a in args if a not in (file, directory))] = result.exit_code
            problem = _command_problem(result)
            if problem is None and args[0] == "list":
                problem = _listing_problem(result)
            if problem is not None:
                report.failures.append(Failure(f"agenttrace {' '.join(args[:3])}", problem))


def _call(report: Report, target: str, function: Callable[[], Any]) -> Any:
    """``function()``; a failure in ``report`` unless it returned or raised a one-line
    ``SessionFileError``."""
    try:
        return function()
    except SessionFileError as exc:
        if "\n" in str(exc) or not str(exc):
            report.failures.append(Failure(target, f"SessionFileError not one line: {exc!r}"))
    except (CaseTimeout, KeyboardInterrupt):
        raise
    except BaseException:  # anything else is what the fuzz suite looks for
        report.failures.append(Failure(target, traceback.format_exc()))
    return None


def _command_problem(result: Any) -> str | None:
    stderr = result.stderr
    if result.exit_code == 0 and result.exception is None:
        return None
    if (
        result.exit_code == 1
        and isinstance(result.exception, SystemExit)
        and not stderr
        and result.stdout.lstrip("{ \n").startswith('"format": "agenttrace.lint"')
    ):
        return None  # agenttrace lint --json found something (docs/lint.md): not a failure
    lines = stderr.splitlines()
    if (
        result.exit_code == 2
        and isinstance(result.exception, SystemExit)
        and len(lines) == 1
        and lines[0].startswith("agenttrace: error: ")
    ):
        return None
    if result.exc_info is not None and not isinstance(result.exception, SystemExit):
        return "".join(traceback.format_exception(*result.exc_info))
    return f"exit {result.exit_code}, stderr {stderr!r}"


def _listing_problem(result: Any) -> str | None:
    """What is wrong with ``agenttrace list --json`` over a case's directory: it must exit 0
    with a JSON list whatever the file holds (a damaged file is a row, not an error)."""
    if result.exit_code != 0:
        return f"exit {result.exit_code} (a damaged file is a row), stderr {result.stderr!r}"
    try:
        rows = json.loads(result.stdout)
    except ValueError as exc:
        return f"--json printed no JSON: {exc}"
    return None if isinstance(rows, list) else f"--json printed {type(rows).__name__}, no list"


def _std008(loaded: LoadedFile) -> None:
    """The STD-008 export, which must be a valid document whatever the file held."""
    problems = validate(to_std008(loaded))
    if problems:
        raise AssertionError(f"the STD-008 export is invalid: {problems}")


def _resumed(path: Path) -> None:
    session = resume(path, sessions_dir=path.parent)
    session.root()
    for number, (agent_id, name) in enumerate(session.list_agents().items()):
        record = session.revivify(agent_id)
        record.messages()
        if number < 20:  # each call scans every agent
            session.children(agent_id)
        if name:
            session.agent_named(name)
    session.event_lines()
    session.allocate_agent_id()


def _factory(record: agenttrace.AgentRecord, session: agenttrace.Session) -> Any:
    from .factory import rebuild

    return rebuild(record, session)


def _served(path: Path) -> None:
    """What ``agenttrace serve`` reads and sends of the session (``GET /api/runs/ID/tree``):
    the session's files by its id, with the calls in flight, as the page's JSON."""
    session_id = path.name.removesuffix(".json.gz").removesuffix(".events.jsonl")
    json.dumps(session_document(read_live(path.parent, session_id)))


def _doubts(path: Path) -> None:
    """The step journal as ``agenttrace doubts`` reads it: its calls in doubt, and every
    step's outcome."""
    json.dumps([doubt.as_json() for doubt in doubts(path)])
    for step in read_journal(path).steps.values():
        _ = step.outcome


def _viewed(loaded: LoadedFile) -> None:
    viewer = SessionViewer(loaded.events)
    agents = viewer.list_agents()
    ids = viewer.agent_ids([*agents, *agents.values()])
    format_dialog(viewer.extract_dialog(ids))
    for agent_id in agents:
        viewer.get_transcript(agent_id)
        viewer.extract_agent_perspective(agent_id)
    viewer.build_causality_index()
    for event in loaded.events[-3:]:
        message = event.get("message_id")
        if isinstance(message, str):
            viewer.trace_message_flow(message)
            viewer.trace_content_references(message)


def _agent_names(loaded: LoadedFile) -> list[str] | None:
    try:
        names = list(SessionViewer(loaded.events).list_agents().values())
    except Exception:  # the viewer's own failure is reported by _viewed
        return None
    return [n for n in names if isinstance(n, str) and n and "," not in n] or None


def _listing(root: Path, case: Path) -> set[str]:
    """Every file and directory under ``root`` but those in ``case``, so a write that escaped
    the case's directory is seen."""
    inside = str(case) + os.sep
    return {
        os.path.join(top, name)
        for top, directories, names in os.walk(root)
        for name in [*directories, *names]
        if not os.path.join(top, name).startswith(inside) and os.path.join(top, name) != str(case)
    }
