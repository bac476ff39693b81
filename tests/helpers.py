"""Small things many tests share."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .fork_server import Forks


def in_forked_child(work: Callable[[], Any]) -> str:
    """``repr(work())`` as a forked child of this process computed it (the child ends with
    ``os._exit``: no exit hook, no flush of the parent's buffers, runs there)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            os.write(write, repr(work()).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        report = pipe.read()
    os.waitpid(pid, 0)
    return report


def child_env(**overrides: str) -> dict[str, str]:
    """The environment for a process a test starts, as a user's would be: the suite's own
    ``OTEL_*`` and ``AGENTTRACE_*`` settings left out, litellm offline, no bytecode written,
    then ``overrides``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENTTRACE_"))}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    # No __pycache__ in the folders a test watches for what a command wrote, whatever the
    # suite's own environment says (the hostile-file tests failed where it was not set).
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(overrides)
    return env


ROOT = Path(__file__).resolve().parent.parent


def python_says(code: str, timeout: float = 480) -> subprocess.CompletedProcess[str]:
    """``python -c CODE`` run in a fresh interpreter from the checkout, in :func:`child_env`,
    its output captured as text: what a module does when a new process first imports it."""
    return subprocess.run(
        [sys.executable, "-c", code],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def agenttrace_command(
    *args: str, timeout: float = 480, **env: str
) -> subprocess.CompletedProcess[str]:
    """``agenttrace ARGS`` run as a user runs it (``python -m agenttrace.cli``, from the
    checkout, in :func:`child_env` with ``env``), its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "agenttrace.cli", *args],
        env=child_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


CLI_PRELOAD = [
    "click",
    "agenttrace",
    "rich.console",
    "rich.table",
    "agenttrace.formats.session.fullest",
    "agenttrace.views.account",
    "agenttrace.views.doubts",
    "agenttrace.views.exports",
    "agenttrace.views.listing",
    "agenttrace.views.tree",
    "agenttrace.views.viewer",
]
"""What the ``agenttrace`` command imports to read a session: what its module imports, then
what its view commands import when they run. Not ``agenttrace.cli`` itself: a forked
``python -m agenttrace.cli`` runs it as ``__main__`` as that does, and finding it imported
already it would warn on stderr (which the tests count the lines of)."""


def cli_fork_server() -> Forks:
    """A fork server for :func:`tests.test_cli.forked_agenttrace`: what the command and its
    views import, imported once (a new interpreter spends a second or more on it, longer than a
    view of a small session takes)."""
    return Forks(CLI_PRELOAD, child_env(), ROOT)


def shop_fork_server(sdk: str) -> Forks:
    """A fork server for tests/shop_child.py's programs on ``sdk`` (``litellm``, ``openai``,
    ``anthropic``): the SDK imported, then agenttrace through the shop, in the order the program
    imports them (a new interpreter spends seconds on them, more than the run)."""
    return Forks([sdk, "tests.shop_child"], _repo_env(), ROOT)


def _repo_env(**env: str) -> dict[str, str]:
    """This process's environment, the repository importable, litellm offline; ``env`` added."""
    return {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True", **env}


JOURNAL_PRELOAD = [
    "opentelemetry.sdk.trace",
    "opentelemetry.sdk.trace.export",
    "opentelemetry.sdk.trace.export.in_memory_span_exporter",
    "agenttrace",
    "agenttrace.tracing.decorators",
]
"""What tests/journal_child.py imports, in its order (itself excepted: it runs as ``__main__``)."""


def journal_fork_server() -> Forks:
    """A fork server for :func:`run_journal_child`'s ``forks``: a new interpreter spends a
    second or two importing agenttrace and OpenTelemetry, longer than the child's run, and the
    crash-point matrix runs it some sixty times."""
    return Forks(JOURNAL_PRELOAD, _repo_env(), ROOT)


def run_journal_child(
    sessions: Path,
    payments_url: str,
    effect: str,
    kill: str,
    mode: str = "run",
    *,
    forks: Forks | None = None,
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """The shop agent of ``tests/journal_child.py`` in a process of its own, its session going to
    ``sessions``, paying through the payment server at ``payments_url`` with a ``charge`` tool of
    the ``effect`` class, SIGKILLed at the ``kill`` point (``mode`` "run"), or resuming the
    killed session and re-entering its run (``mode`` "resume" or "verify"); ``env`` is added to
    this process's environment. With ``forks`` (:func:`journal_fork_server`) the process is
    forked from it instead of being a new interpreter."""
    arguments = [str(sessions), payments_url, effect, kill, mode]
    if forks is not None:
        return forks.run("tests.journal_child", arguments, _repo_env(**env), ROOT)
    return subprocess.run(
        [sys.executable, "-m", "tests.journal_child", *arguments],
        cwd=ROOT,
        env=_repo_env(**env),
        capture_output=True,
        text=True,
        timeout=480,
    )


def killed_then_resumed_shop(
    child: str,
    tmp_path: Path,
    model_url: str,
    shape: str,
    asked: Callable[[], int],
    answer_next: Callable[[], None],
    forks: Forks | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run the shop agent of ``tests/{child}.py`` (tests/shop_child.py's: it asks the model at
    ``model_url`` for the ``shape`` of exchange and pays through a payment server started here)
    until it kills itself inside the payment, having asked the model once (``asked()``: the
    requests the model server got); then ``answer_next()`` scripts the model's next reply and
    the agent resumes and re-enters its run. Its session goes to ``tmp_path/sessions``, its
    ledger to ``tmp_path/ledger.jsonl``. The resumed process's report, and the charges made.
    With ``forks`` (a fork server that imported what the child imports) both processes are
    forked from it instead of each starting a new interpreter."""
    from .payment_server import PaymentServer

    payments = PaymentServer().start()
    sessions = str(tmp_path / "sessions")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env["AGENTTRACE_BILLING_FILE"] = str(tmp_path / "ledger.jsonl")

    def agent(mode: str) -> subprocess.CompletedProcess[str]:
        if forks is not None:
            argv = [sessions, model_url, payments.url, shape, mode]
            out, err = tmp_path / f"{mode}-stdout.txt", tmp_path / f"{mode}-stderr.txt"
            forks.start(f"tests.{child}", argv, env, ROOT, out, err)
            code = forks.wait()
            return subprocess.CompletedProcess(argv, code, out.read_text(), err.read_text())
        return subprocess.run(
            [sys.executable, "-m", f"tests.{child}", sessions, model_url, payments.url, shape,
             mode],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=480,
        )  # fmt: skip

    try:
        killed = agent("run")
        assert killed.returncode == -9, killed.stderr
        assert asked() == 1
        answer_next()
        resumed = agent("resume")
        assert resumed.returncode == 0, resumed.stderr
    finally:
        payments.stop()
    return json.loads(resumed.stdout.splitlines()[-1]), payments.charges


def llm_entries(tmp_path: Path) -> int:
    """How many LLM attempts the ledger at ``tmp_path/ledger.jsonl`` bills."""
    ledger = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    return sum(1 for entry in ledger if entry.get("type") == "llm")


def subtrees(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The opTree nodes right under ``node`` (as objects to change in place): its turns, ops
    and sub-agent runs, which an op has under ``childSession`` when it hosted one and under
    ``childSessions`` when it hosted several (files of earlier releases: both keys, the first
    run under each)."""
    for key in ("turns", "ops", "childSessions"):
        yield from node.get(key) or []
    if isinstance(node.get("childSession"), dict):
        yield node["childSession"]


NOT_EVENTS = ("op_accounted", "step", "step_decision")
"""The stream's lines that are no canonical event: each op's accounting, the step journal."""


def is_event_line(line: bytes) -> bool:
    """Whether a stream line (bytes, as written: ``event_type`` first or ``message_id`` first)
    is a canonical event."""
    head = line[:40]
    return not any(f'"event_type": "{kind}"'.encode() in head for kind in NOT_EVENTS)


def canonical_events(stream: Path) -> list[dict[str, Any]]:
    """The canonical events of an event stream, in order: its lines less the ``op_accounted``
    lines (each op's accounting) and the step journal's, which are no events."""
    lines = [json.loads(line) for line in stream.read_bytes().splitlines() if line.strip()]
    return [line for line in lines if line.get("event_type") not in NOT_EVENTS]


def run_demo(
    sessions: Path, cwd: Path | None = None, **overrides: str
) -> subprocess.CompletedProcess[str]:
    """``examples/cafe.py`` as a user runs it, its session going to ``sessions``, from the
    working directory ``cwd`` (default: this process's)."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "cafe.py"), "--sessions-dir", str(sessions)],
        cwd=cwd,
        env=child_env(**overrides),
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert result.returncode == 0, result.stderr
    return result


def record_demo(directory: Path, **overrides: str) -> tuple[Path, Path]:
    """Run the cafe demo (:func:`run_demo`) with its sessions in ``directory/sessions`` and its
    ledger in ``directory/accounting.jsonl``; returns its (session file, event stream)."""
    sessions = directory / "sessions"
    run_demo(sessions, AGENTTRACE_BILLING_FILE=str(directory / "accounting.jsonl"), **overrides)
    (snapshot,) = sessions.glob("*.json.gz")
    (stream,) = sessions.glob("*.events.jsonl")
    return snapshot, stream


def record_demo_here(directory: Path, scripts: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """:func:`record_demo` in this process, which has litellm imported already (a child process
    spends seconds importing it again): the cafe scenario recorded as ``make demo`` records it,
    under its service name and with content on the spans, on a provider of its own, offline on
    the scripted model (answering ``scripts``, by default the demo's). Returns its (session
    file, event stream)."""
    import asyncio

    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider

    import agenttrace
    from examples.cafe import SCRIPTS, run_first
    from examples.scripted_model import ScriptedModel

    sessions = directory / "sessions"
    agenttrace.use_session(None)
    tracing = agenttrace.init(
        tracer_provider=TracerProvider(resource=Resource.create({SERVICE_NAME: "agenttrace-demo"})),
        console="quiet",
        capture_content=True,
        sessions_dir=sessions,
        billing_file=directory / "accounting.jsonl",
    )
    try:
        agenttrace.new_session()
        with ScriptedModel(SCRIPTS if scripts is None else scripts) as model:
            asyncio.run(run_first({"api_key": "offline-test-key", "api_base": model.api_base}))
        tracing.force_flush()
    finally:
        tracing.shutdown()
        agenttrace.use_session(None)
    (snapshot,) = sessions.glob("*.json.gz")
    (stream,) = sessions.glob("*.events.jsonl")
    return snapshot, stream


def run_chain(depth: int) -> None:
    """A run hosting a chain of ``depth`` nested sub-agents (agent -> tool -> sub-agent -> tool
    -> ...), each agent calling a tool first; the deepest is named ``Deepest``."""
    import agenttrace  # here: tests/fuzz/make_seeds.py imports this module outside the suite

    @agenttrace.tool
    def note(text: str) -> str:
        return text.upper()

    @agenttrace.tool
    def delegate(level: int) -> None:
        run_level(level)

    def run_level(level: int) -> None:
        @agenttrace.agent("Deepest" if level == 0 else f"A{level}")
        def run() -> None:
            note("the same few words at every level of the chain")
            if level:
                delegate(level - 1)

        run()

    run_level(depth)


def log_records() -> Any:
    """An in-memory exporter of the log records emitted from now on through the application's
    logger provider. OpenTelemetry lets a process set that provider once: the first caller
    sets an SDK one, the next ones add their exporter to it."""
    from opentelemetry import _logs
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

    exporter = InMemoryLogRecordExporter()
    provider = _logs.get_logger_provider()
    if not isinstance(provider, LoggerProvider):
        provider = LoggerProvider()
        _logs.set_logger_provider(provider)
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    return exporter
