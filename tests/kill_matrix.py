"""The kill matrix (issue 31 item 4): the scenario of tests/kill_scenario.py SIGKILLed at seeded
random points, resumed, and run to its end, again and again; shared by
tests/test_kill_matrix.py (a few dozen kills) and benchmarks/bench_kills.py (1,000).

Each scenario gets its own sessions directory, ledger and payment server; the scripted model
server is shared, and answers each request by its content (``respond``), so a run resumed after
any kill asks what the uninterrupted one asked and hears the same. A scenario's processes are
killed 1 to 3 times, each at a point drawn from the scenario's own seeded generator: at the
N-th write to the event stream (before or after it; the scenario kills itself there, the same
record every time) or after a random delay within the reference run's length (drawn as
fractions of the reference's writes and seconds, so a seed draws the same kills again; a write
kill lands on the same record when the reference made as many writes, 62 to 66 here, as the
background thread batches some; a delay lands at the same moment, not the same instruction).
Between
processes the driver does what a careful user does: ``agenttrace doubts`` lists the calls in
doubt, and each is resolved by asking the payment server whether its charge happened
(``--done`` with the result the tool returns if it did, ``--retry`` if not). Once the run has
ended it checks:

- no charge made twice (the payment server's count per amount);
- every ``effect`` and ``idempotent`` call charged exactly once (none lost once the run ended);
- each agent's final transcript (the last agent of each name) equal to the reference run's;
- the ledger's LLM lines against the requests the model server answered to the scenario: every
  reply the journal holds as done is billed; every attempt a kill cut short (an intent and no
  outcome) has exactly one ``interrupted`` line, written by the process that took the session
  over; and the server answered at least the attempts billed as they ended and at most those
  and the interrupted ones (counted as ``unbilled``: the ledger names them, with no cost);
- every view opens the session: ``list``, ``tree``, ``stats``, ``export`` in each format,
  ``doubts`` (which must list nothing).

A scenario that breaks one is reported with its seed and kill points: ``replay(seed, index)``
runs it again."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from agenttrace.cli import main as cli

from .helpers import ROOT
from .llm_server import LLMServer, Reply
from .payment_server import PaymentServer

EXPORT_FORMATS = ("jaeger", "otlp-json", "html", "exchanges", "std008", "atif")
CHARGED = {7: "charged 7", 11: "booked 11", 13: "charged 13", 17: "booked 17"}
"""Each amount the scenario pays, once, and what its tool returns."""
MAX_PROCESSES = 12
"""A scenario that has not ended after this many processes is stuck (reported, not waited on)."""


def _call(call_id: str, tool: str, **arguments: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": tool, "arguments": json.dumps(arguments)},
    }


def respond(body: dict[str, Any]) -> Reply:
    """The model's reply to a request of the scenario, by the request alone: the agent (its
    system prompt) and how far it is (its assistant messages). A final answer names a digest of
    what it was sent, so a transcript that differs anywhere differs in its last reply too."""
    messages = body.get("messages") or []
    system = str(messages[0].get("content")) if messages else ""
    name = system.removeprefix("You are ").split(".")[0]
    asked = sum(1 for message in messages if message.get("role") == "assistant")
    pause = {"delay": 0.02} if not body.get("stream") else {"chunk_delay": 0.005}
    if asked == 0 and name == "Root":
        calls = [
            _call("call_r1", "till"),
            _call("call_r2", "price", item="tea"),
            _call("call_r3", "delegate", name="Scout", task="Pay 7 for the tea and book 11."),
            _call("call_r4", "delegate", name="Clerk", task="Pay 13 and book the room for 17."),
        ]
        return Reply(content="", tool_calls=calls, **pause)
    if asked == 0 and name == "Scout":
        calls = [_call("call_s1", "charge", amount=7), _call("call_s2", "book", amount=11)]
        return Reply(content="", tool_calls=calls, **pause)
    if asked == 0 and name == "Clerk":
        calls = [
            _call("call_c1", "charge", amount=13),
            _call("call_c2", "book", amount=17),
            _call("call_c3", "till"),
        ]
        return Reply(content="", tool_calls=calls, **pause)
    sent = json.dumps(messages, sort_keys=True).encode()
    return Reply(content=f"{name} is done ({hashlib.sha256(sent).hexdigest()[:12]})", **pause)


@dataclasses.dataclass
class Reference:
    """The uninterrupted run: its length from ``go`` to its end, its stream writes, transcripts."""

    seconds: float
    writes: int
    transcripts: dict[str, list[dict[str, Any]]]
    answered: int


@dataclasses.dataclass
class Scenario:
    """One scenario of the matrix: what was done to it and what was found."""

    seed: int
    index: int
    kills: list[str] = dataclasses.field(default_factory=list)
    """Each kill that landed, as ``process N: write W before`` or ``process N: 0.412 s``."""
    processes: int = 0
    resolved: list[str] = dataclasses.field(default_factory=list)
    """Each decision taken on a call in doubt: ``label tool: done|retry``."""
    duplicates: int = 0
    unbilled: int = 0
    """LLM attempts a kill cut short, each on the ledger as ``interrupted`` (no cost: the
    server may have answered and billed it, or not)."""
    answered: int = 0
    """Replies the model server answered to the scenario's processes."""
    problems: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def describe(self) -> str:
        """One line to find it again by: seed, index, kill points and what went wrong."""
        return (
            f"seed {self.seed} scenario {self.index} (replay(seed={self.seed}, index={self.index}))"
            f", kills: {'; '.join(self.kills) or 'none'}, resolved: {self.resolved}"
            f": {' | '.join(self.problems)}"
        )


@dataclasses.dataclass
class Summary:
    """What a whole matrix found."""

    scenarios: list[Scenario]
    seconds: float
    reference: Reference

    @property
    def kills(self) -> int:
        return sum(len(s.kills) for s in self.scenarios)

    @property
    def resumes(self) -> int:
        return sum(s.processes - 1 for s in self.scenarios)

    @property
    def duplicates(self) -> int:
        return sum(s.duplicates for s in self.scenarios)

    @property
    def answered(self) -> int:
        return sum(s.answered for s in self.scenarios)

    @property
    def unbilled(self) -> int:
        return sum(s.unbilled for s in self.scenarios)

    @property
    def doubts(self) -> int:
        return sum(len(s.resolved) for s in self.scenarios)

    @property
    def failed(self) -> list[Scenario]:
        return [s for s in self.scenarios if s.problems]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENTTRACE_"))}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHONPATH=str(ROOT))
    return env


def _cli(*args: str) -> tuple[int, str]:
    """An ``agenttrace`` command, run in this process by click: its exit status and its standard
    output, or on failure all it printed (click's ``output`` mixes in standard error, where a
    warning may land: ``doubts --json``'s output must be the JSON alone)."""
    result = CliRunner().invoke(cli, list(args), catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return 1, f"{type(result.exception).__name__}: {result.exception}"
    return result.exit_code, result.stdout if result.exit_code == 0 else result.output


class Forks:
    """``python -m tests.kill_scenario --forks``: the scenario's processes, forked one at a time
    from a process that imported litellm and agenttrace once (a new interpreter spends seconds,
    on a busy 2-core machine 20, importing them: more than the scenario runs)."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.kill_scenario", "--forks"],
            cwd=ROOT,
            env=_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._messages.put(json.loads(line))
        self._messages.put(None)

    def start(self, argv: list[str], env: dict[str, str], stderr: Path) -> int:
        """Fork a process of the scenario; its pid."""
        assert self._process.stdin is not None
        request = {"argv": argv, "env": env, "stderr": str(stderr)}
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        message = self.next(None)
        assert message is not None and "pid" in message, message
        return int(message["pid"])

    def next(self, timeout: float | None) -> dict[str, Any] | None:
        """The next message of the forks (``None``: ``timeout`` seconds passed first). A hang
        guard of 300 s stands for no timeout: a scenario's process never takes that long."""
        try:
            message = self._messages.get(timeout=300 if timeout is None else timeout)
        except queue.Empty:
            if timeout is None:
                raise TimeoutError("the scenario's process said nothing for 300 s") from None
            return None
        if message is None:
            raise RuntimeError("tests.kill_scenario --forks ended")
        return message

    def close(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(timeout=480)


class KillMatrix:
    """The servers and a working directory for a matrix seeded by ``seed``."""

    def __init__(self, workdir: Path, seed: int) -> None:
        self.workdir, self.seed = workdir, seed
        self.llm = LLMServer().start()
        self.llm.responder = lambda request: respond(request.body)
        self._forks = Forks()
        self._reference: Reference | None = None

    def close(self) -> None:
        self._forks.close()
        self.llm.stop()

    def __enter__(self) -> KillMatrix:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- one process ----------------------------------------------------------------------------

    def _process(
        self, sessions: Path, payments: PaymentServer, kill: tuple[str, Any] | None, **env: str
    ) -> tuple[int, float, dict[str, Any]]:
        """Run the scenario's next process; ``kill`` ("write", (n, after)) or ("delay", s).
        Returns its exit status, its seconds from ``go`` to its end, and its JSON report."""
        extra = dict(env)
        if kill is not None and kill[0] == "write":
            extra.update(
                KILL_AT_WRITE=str(kill[1][0]), KILL_WHEN="after" if kill[1][1] else "before"
            )
        sessions.parent.mkdir(parents=True, exist_ok=True)
        stderr = sessions.parent / "stderr.txt"
        pid = self._forks.start([str(sessions), self.llm.api_base, payments.url], extra, stderr)
        started = time.monotonic()
        out: list[str] = []
        status: int | None = None
        while status is None:
            timeout = None
            if out and out[-1] == "go" and kill is not None and kill[0] == "delay":
                timeout = max(0.0, started + kill[1] - time.monotonic())
            message = self._forks.next(timeout)
            if message is None:  # the delay is up: the kill
                os.kill(pid, signal.SIGKILL)
                kill = None
            elif "out" in message:
                out.append(message["out"])
                if message["out"] == "go":
                    started = time.monotonic()
            else:
                status = int(message["status"])
        seconds = time.monotonic() - started
        report: dict[str, Any] = {"stderr": stderr.read_text(errors="replace")[-2000:]}
        lines = [line for line in out if line.startswith("{")]
        if lines:
            report.update(json.loads(lines[-1]))
        return status, seconds, report

    def _settle(self) -> None:
        """Wait until the model server has finished with every request it received (its count
        of answers is final), however long a killed client's half-sent reply takes."""
        deadline = time.monotonic() + 120
        while self.llm.handled < len(self.llm.requests) and time.monotonic() < deadline:
            time.sleep(0.01)

    # --- the reference --------------------------------------------------------------------------

    def reference(self) -> Reference:
        """The scenario run once, never killed (made on first use)."""
        if self._reference is None:
            directory = self.workdir / "reference"
            sessions = directory / "sessions"
            payments = PaymentServer().start()
            before = self.llm.answered
            try:
                status, seconds, report = self._process(sessions, payments, None, COUNT_WRITES="1")
            finally:
                payments.stop()
            assert status == 0 and report.get("ended"), report
            self._settle()
            self._reference = Reference(
                seconds, int(report["writes"]), transcripts(sessions), self.llm.answered - before
            )
        return self._reference

    # --- one scenario ---------------------------------------------------------------------------

    def scenario(self, index: int) -> Scenario:
        """Scenario ``index`` of this matrix: killed, resumed until it ends, then checked."""
        reference = self.reference()
        rng = random.Random(f"{self.seed}:{index}")
        found = Scenario(self.seed, index)
        started = time.monotonic()
        directory = self.workdir / f"s{index}"
        shutil.rmtree(directory, ignore_errors=True)
        sessions = directory / "sessions"
        payments = PaymentServer().start()
        self._settle()
        answered_before = self.llm.answered
        try:
            planned = rng.randint(1, 3)
            ended = False
            while not ended and found.processes < MAX_PROCESSES:
                kill: tuple[str, Any] | None = None
                if len(found.kills) < planned:
                    # Fractions of the reference's writes and length: the same draws whatever
                    # the machine measured this time, so a seed gives the same kills again.
                    if rng.random() < 0.5:
                        at = 1 + int(rng.random() * reference.writes)
                        kill = ("write", (at, rng.random() < 0.5))
                    else:
                        kill = ("delay", round(rng.random() * reference.seconds, 3))
                self._resolve_doubts(sessions, payments, found)
                found.processes += 1
                status, _, report = self._process(sessions, payments, kill)
                if status == -signal.SIGKILL:
                    where = (
                        f"write {kill[1][0]} {'after' if kill[1][1] else 'before'}"
                        if kill is not None and kill[0] == "write"
                        else f"{kill[1] if kill else '?'} s"
                    )
                    found.kills.append(f"process {found.processes}: {where}")
                elif status == 0 and report.get("ended"):
                    ended = True
                elif status != 3:  # 3: stopped at calls in doubt, resolved before the next
                    found.problems.append(f"process {found.processes} exited {status}: {report}")
                    break
            if not ended and not found.problems:
                found.problems.append(f"not ended after {found.processes} processes")
            self._settle()
            self._check(sessions, payments, found, self.llm.answered - answered_before, ended)
        finally:
            payments.stop()
        found.seconds = time.monotonic() - started
        if not found.problems:
            shutil.rmtree(directory, ignore_errors=True)
        return found

    def _resolve_doubts(self, sessions: Path, payments: PaymentServer, found: Scenario) -> None:
        """What a careful user does after a kill: for each call ``doubts`` lists, ask the
        payment server whether its charge happened, and say so with ``resolve``."""
        streams = sorted(sessions.glob("*.events.jsonl"))
        if not streams:
            return
        status, out = _cli("doubts", str(streams[0]), "--json")
        if status != 0:
            found.problems.append(f"doubts exited {status}: {out.strip()}")
            return
        for doubt in json.loads(out):
            amount = json.loads(doubt["arguments"]).get("amount")
            made = any(c["amount"] == amount for c in payments.charges)
            label = doubt["step"]
            if made and amount in CHARGED:
                result = sessions.parent / f"result-{label}.json"
                result.write_text(json.dumps(CHARGED[amount]))
                args = ["--done", str(result), "--evidence", "the payment server has the charge"]
            elif amount is None:  # a read: nothing happened that could happen twice
                args = ["--retry", "--evidence", "it reads, it changes nothing"]
            else:
                args = ["--retry", "--evidence", "the payment server has no such charge"]
            status, out = _cli("resolve", str(streams[0]), label, *args)
            if status != 0:
                found.problems.append(f"resolve {label} exited {status}: {out.strip()}")
            found.resolved.append(f"{label} {doubt['tool']}({amount}): {args[0][2:]}")

    # --- the invariants -------------------------------------------------------------------------

    def _check(
        self, sessions: Path, payments: PaymentServer, found: Scenario, answered: int, ended: bool
    ) -> None:
        counts = Counter(charge["amount"] for charge in payments.charges)
        found.duplicates = sum(n - 1 for n in counts.values() if n > 1)
        if found.duplicates:
            found.problems.append(f"charged twice: {dict(counts)}")
        if not ended:
            return
        lost = [amount for amount in CHARGED if counts[amount] == 0]
        if lost:
            found.problems.append(f"never charged: {lost}")
        expected = self.reference().transcripts
        got = transcripts(sessions)
        for name in sorted(set(expected) | set(got)):
            if got.get(name) != expected.get(name):
                differs = _difference(expected.get(name), got.get(name))
                found.problems.append(f"transcript of {name} differs: {differs}")
        found.problems.extend(_billing(sessions, found, answered))
        found.problems.extend(views(sessions))


def _billing(sessions: Path, found: Scenario, answered: int) -> list[str]:
    """The ledger against the journal and the model server. Every LLM attempt that ended was
    billed as it ended (ok or failed), every reply the journal holds as ``done`` among them.
    Every attempt a kill left with an intent and no outcome in the journal either ended and was
    billed before the kill beat its outcome line (written by the background thread after the
    ledger's), or was cut short: then it has exactly one ``interrupted`` line, written by the
    process that took the session over. The server answered each attempt billed as it ended,
    and any number of the interrupted ones (a request killed before it was sent, or before the
    answer, looks the same in the journal): ``paid <= answered <= paid + interrupted``. The
    interrupted lines are the scenario's ``unbilled``."""
    from collections import Counter

    from agenttrace.formats.session.files import read_session_file
    from agenttrace.model.journal import Journal

    ledger = sessions.parent / "accounting.jsonl"
    lines = ledger.read_text().splitlines() if ledger.exists() else []
    llm = [entry for line in lines if line.strip() and (entry := json.loads(line))["type"] == "llm"]
    cut_lines = [entry for entry in llm if entry["status"] == "interrupted"]
    paid = len(llm) - len(cut_lines)
    (stream,) = sessions.glob("*.events.jsonl")
    steps = [
        s for s in Journal(read_session_file(stream).journal).steps.values() if s.kind == "llm"
    ]
    done = sum(1 for step in steps if step.state == "done")
    ended = sum(1 for step in steps if step.state in ("done", "failed"))
    cut = {step.key for step in steps if step.state == "intent"}
    billed = Counter((e["originTxnId"], e["path"], e["attempt"]) for e in cut_lines)
    found.unbilled, found.answered = len(cut_lines), answered
    problems = []
    if paid < done:
        problems.append(f"ledger has {paid} LLM calls, the journal {done} replies done")
    if not paid <= answered <= paid + len(cut_lines):
        problems.append(
            f"ledger has {paid} LLM calls billed as they ended and {len(cut_lines)} "
            f"interrupted, the model server answered {answered}"
        )
    # Billed as they ended, their journal outcome lost to the kill: the rest of the intents
    # with no outcome were cut short, and each has its interrupted line.
    outcome_lost = paid - ended
    if outcome_lost + len(cut_lines) != len(cut):
        problems.append(
            f"{len(cut)} LLM attempts have no outcome in the journal: {outcome_lost} were billed "
            f"as they ended, {len(cut_lines)} as interrupted"
        )
    for key, count in sorted(billed.items()):
        if key not in cut:
            problems.append(f"ledger bills {key} as interrupted; the journal has its outcome")
        elif count != 1:
            problems.append(f"interrupted LLM attempt {key} has {count} ledger lines")
    return problems


def transcripts(sessions: Path) -> dict[str, list[dict[str, Any]]]:
    """Each agent's final transcript as a resume restores it (its resets applied), by name: the
    last agent of each name, since a re-entered run creates its sub-agents again (the ones it
    made absent are left empty, and passed over)."""
    from agenttrace.session.state import Session

    (stream,) = sessions.glob("*.events.jsonl")
    found: dict[str, list[dict[str, Any]]] = {}
    for record in Session.load(stream).agents.values():
        messages = record.messages()
        if not messages:
            # A sub-agent the killed run created in a call that ran again: the re-entry empties
            # it (its id is never reused) and the run creates it anew under a new id.
            continue
        found[_name(messages)] = [_comparable(message) for message in messages]
    return found


def _name(messages: list[Any]) -> str:
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "system":
            return str(message.get("content")).removeprefix("You are ").split(".")[0]
    return "?"


def _comparable(message: Any) -> dict[str, Any]:
    keep = ("role", "content", "tool_calls", "tool_call_id")
    return {
        key: message.get(key)
        for key in keep
        if isinstance(message, dict) and message.get(key) is not None
    }


def _difference(expected: list[Any] | None, got: list[Any] | None) -> str:
    if expected is None or got is None:
        return f"expected {expected is not None}, got {got is not None}"
    for i, (a, b) in enumerate(zip(expected, got, strict=False)):
        if a != b:
            return f"message {i}: expected {a}, got {b}"
    extra = (got[len(expected) :] or expected[len(got) :])[:1]
    return f"{len(expected)} messages expected, {len(got)} got (the first apart: {extra})"


def views(sessions: Path) -> list[str]:
    """Every view opened on the session; a problem for each that fails."""
    (stream,) = sessions.glob("*.events.jsonl")
    session = str(stream)
    commands = [
        ["list", "--sessions-dir", str(sessions), "--json"],
        ["tree", session],
        ["stats", session, "--json"],
        ["doubts", session, "--json"],
        *(
            ["export", session, "--format", form, "-o", str(sessions.parent / f"export.{form}")]
            for form in EXPORT_FORMATS
        ),
    ]
    problems = []
    for command in commands:
        status, out = _cli(*command)
        if status != 0:
            problems.append(
                f"{' '.join(command[:1] + command[2:4])} exited {status}: {out.strip()[:300]}"
            )
        elif command[0] == "doubts" and json.loads(out) != []:
            problems.append(f"doubts still lists {out.strip()}")
    return problems


def run(workdir: Path, seed: int, kills: int, progress: Any = None) -> Summary:
    """Scenarios of the matrix seeded by ``seed`` until ``kills`` kills have landed."""
    started = time.monotonic()
    scenarios: list[Scenario] = []
    with KillMatrix(workdir, seed) as matrix:
        reference = matrix.reference()
        while sum(len(s.kills) for s in scenarios) < kills:
            scenarios.append(matrix.scenario(len(scenarios)))
            if progress is not None:
                progress(scenarios[-1])
    return Summary(scenarios, time.monotonic() - started, reference)


def replay(seed: int, index: int, workdir: Path | None = None) -> Scenario:
    """Scenario ``index`` of the matrix seeded by ``seed`` again (its kills drawn the same)."""
    import tempfile

    with KillMatrix(workdir or Path(tempfile.mkdtemp(prefix="kill-matrix-")), seed) as matrix:
        return matrix.scenario(index)
