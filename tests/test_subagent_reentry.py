"""Re-entry is faithful at every kill point, sub-agents included (issue 31 item 2): a run whose
root agent creates sub-agents (tests/subagent_reentry_agent.py) is SIGKILLed at each point of a
sub-agent's work, resumed with ``agenttrace resume`` (each call it stops at in doubt decided
``--retry``), and every request the model server receives after the kill is the request an
uninterrupted run sends at the same step, byte for byte as canonical JSON, for every agent.

The model server answers by what is asked (the agent, by its system prompt, and how many replies
it has had), so both runs get the same replies whatever the resume answers from the journal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .fork_server import Forks
from .helpers import ROOT, child_env
from .llm_server import LLMServer, Reply, Request
from .payment_server import PaymentServer
from .test_cli import AGENTTRACE, env_for

pytestmark = pytest.mark.e2e

Key = tuple[str, int]
"""(the agent, how many replies it had had): one step of one agent's conversation."""


def _call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"id": call_id, "type": "function", "function": function}


SCRIPT: dict[Key, Reply] = {
    ("Boss", 0): Reply(content="", tool_calls=[_call("c_search", "search", query="tea")]),
    ("Boss", 1): Reply(content="", tool_calls=[_call("c_consult", "consult", question="Good?")]),
    ("Boss", 2): Reply(content="", tool_calls=[_call("c_pay", "pay", amount=5)]),
    ("Boss", 3): Reply(content="Paid for a good tea."),
    ("Expert", 0): Reply(content="", tool_calls=[_call("e_lookup", "lookup", topic="tea")]),
    ("Expert", 1): Reply(content="The tea is good."),
    ("Critic", 0): Reply(content="Agreed: good."),
    ("Specialist", 0): Reply(content="Green, first flush."),
}
TWICE: dict[Key, Reply] = {
    **SCRIPT,
    ("Boss", 2): Reply(content="", tool_calls=[_call("c_again", "consult", question="Cheap?")]),
    ("Boss", 3): SCRIPT[("Boss", 2)],
    ("Boss", 4): SCRIPT[("Boss", 3)],
    ("Expert", 2): Reply(content="It is cheap."),
}
"""``twice``: Boss consults the Expert a second time, which hears it after all it heard first."""


def key_of(body: dict[str, Any]) -> Key:
    messages = body.get("messages") or []
    system = messages[0].get("content", "") if messages else ""
    agent = str(system).removeprefix("You are ").rstrip(".")
    return agent, sum(1 for message in messages if message.get("role") == "assistant")


def canonical(body: dict[str, Any]) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def without_provider_fields(body: str) -> str:
    """A request's canonical JSON without litellm's ``provider_specific_fields`` on its
    messages. An agent that keeps a reply's ``model_dump()`` sends them back with its history;
    an agent rebuilt from the session has the fields a transcript entry keeps (role, content,
    tool calls, tool call id, name: docs/events.md), so a sub-agent rebuilt for a re-entry and
    told something new sends its history without them: the one difference left."""
    request = json.loads(body)
    for message in request.get("messages") or []:
        message.pop("provider_specific_fields", None)
    return canonical(request)


class Model:
    """The scripted model on tests/llm_server.py: answers by :data:`SCRIPT`; the request at
    ``hold`` is held (never answered) and :attr:`held` set when it arrives."""

    def __init__(self, server: LLMServer, shape: str, hold: Key | None = None) -> None:
        self.server, self.hold = server, hold
        self.script = TWICE if shape == "twice" else SCRIPT
        self.held = threading.Event()
        self.gate = threading.Event()  # never set: the process is killed while it waits
        server.reset()
        server.responder = self.answer

    def answer(self, request: Request) -> Reply:
        key = key_of(request.body)
        if key == self.hold:
            self.held.set()
            return Reply(gate=self.gate)
        return self.script.get(key, Reply(content=f"unscripted {key}"))

    def requests(self) -> dict[Key, list[str]]:
        sent: dict[Key, list[str]] = {}
        for request in self.server.requests:
            sent.setdefault(key_of(request.body), []).append(canonical(request.body))
        return sent


@pytest.fixture(scope="module")
def server() -> Iterator[LLMServer]:
    started = LLMServer().start()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def forks() -> Iterator[Forks]:
    """The agent's runs and ``agenttrace resume``, forked from one interpreter that imported
    what the agent imports (in its order): litellm's import alone takes a new interpreter
    seconds, each case runs the agent and resumes it twice or more."""
    env = child_env(PYTHONPATH=str(ROOT), AGENTTRACE_RAISE_INTERNAL_ERRORS="1")
    started = Forks(["litellm", "agenttrace", "tests.payment_server"], env, ROOT)
    yield started
    started.close()


def _env(tmp_path: Path, payments: PaymentServer, api_base: str, shape: str, **extra: str) -> Any:
    return env_for(
        tmp_path,
        LLM_API_BASE=api_base,
        PAYMENTS_URL=payments.url,
        SHAPE=shape,
        PYTHONPATH=str(ROOT),
        **extra,
    )


def run_agent(
    forks: Forks,
    tmp_path: Path,
    model: Model,
    payments: PaymentServer,
    shape: str,
    kill_at: str = "",
) -> tuple[int, str, str]:
    """Boss's run (``python -m tests.subagent_reentry_agent``) in a process of its own,
    SIGKILLed when the held request arrives, or at ``kill_at`` by itself: its exit status,
    standard output and error."""
    env = _env(tmp_path, payments, model.server.api_base, shape, KILL_AT=kill_at)
    tmp_path.mkdir(parents=True, exist_ok=True)
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    module = "tests.subagent_reentry_agent"
    pid = forks.start(module, [str(tmp_path / "s")], env, ROOT, out, err)
    try:
        if model.hold is not None:
            assert model.held.wait(timeout=300), "the held request never came"
    finally:
        if model.hold is not None:
            os.kill(pid, signal.SIGKILL)  # inside the LLM call (or a hang ended)
        code = forks.wait()
    return code, out.read_text(), err.read_text()


def resume(forks: Forks, tmp_path: Path, env: dict[str, str], stream: Path) -> tuple[int, str, str]:
    """``agenttrace resume STREAM --agent tests.subagent_reentry_agent:rebuild`` (the command's
    entry point, forked: the factory's litellm is imported already): its exit status,
    standard output and error."""
    out, err = tmp_path / "resume-stdout.txt", tmp_path / "resume-stderr.txt"
    args = ["resume", str(stream), "--agent", "tests.subagent_reentry_agent:rebuild"]
    forks.start("agenttrace.cli:main", args, env, ROOT, out, err, prog=AGENTTRACE[-1])
    return forks.wait(), out.read_text(), err.read_text()


def resume_until_done(
    forks: Forks, tmp_path: Path, model: Model, payments: PaymentServer, shape: str
) -> tuple[str, list[list[str]]]:
    """``agenttrace resume`` until the run ends, deciding each call it stopped at in doubt
    with ``resolve --retry``: the answer, and the labels decided at each stop."""
    env = _env(tmp_path, payments, model.server.api_base, shape)
    (stream,) = (tmp_path / "s").glob("*.events.jsonl")
    decided: list[list[str]] = []

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*AGENTTRACE, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )

    for _ in range(4):
        code, out, err = resume(forks, tmp_path, env, stream)
        if code == 0:
            first = out.splitlines()[0]
            return first.removeprefix("Answer: "), decided
        assert code == 1 and "in doubt" in err, err
        doubts = json.loads(cli("doubts", str(stream), "--json").stdout)
        labels = [doubt["step"] for doubt in doubts]
        assert labels, err
        for label in labels:
            done = cli("resolve", str(stream), label, "--retry")
            assert done.returncode == 0, done.stderr
        decided.append(labels)
    raise AssertionError("the resumed run never ended")


Reference = tuple[str, dict[Key, list[str]]]
"""What an uninterrupted run answers, and the requests it sends."""


def reference(forks: Forks, tmp_path: Path, server: LLMServer, shape: str) -> Reference:
    """An uninterrupted run of ``shape``: what it answers, and the requests it sends."""
    model = Model(server, shape)
    payments = PaymentServer().start()
    try:
        code, out, err = run_agent(forks, tmp_path / "reference", model, payments, shape)
    finally:
        payments.stop()
    assert code == 0, err
    sent = model.requests()
    assert all(len(bodies) == 1 for bodies in sent.values()), sent
    return out.strip(), sent


@pytest.fixture(scope="module")
def references(
    forks: Forks, server: LLMServer, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], Reference]:
    """The uninterrupted run of each shape, made once (the first time a case asks for it) and
    shared by the shape's cases: the model answers by what is asked, so every uninterrupted
    run of a shape sends the same requests, and each case's kill and resume have directories
    of their own."""
    made: dict[str, Reference] = {}

    def of(shape: str) -> Reference:
        if shape not in made:
            made[shape] = reference(forks, tmp_path_factory.mktemp(shape), server, shape)
        return made[shape]

    return of


KILLS = {
    "one": [
        ("Expert", 0, ""),  # inside the Expert's first LLM call
        ("Expert", 1, ""),  # inside its second
        (None, None, "before_expert_llm"),
        (None, None, "between_expert_calls"),
        ("Boss", 2, ""),  # inside the root's LLM call after the Expert returned
        (None, None, "inside_pay"),
    ],
    "two": [("Critic", 0, ""), ("Expert", 1, "")],
    "nested": [("Specialist", 0, ""), ("Expert", 1, "")],
    "twice": [("Expert", 2, "")],  # inside the second consultation
}
CASES = [(shape, *kill) for shape, kills in KILLS.items() for kill in kills]


@pytest.mark.parametrize(("shape", "agent", "replies", "kill_at"), CASES)
def test_every_request_after_a_resume_is_the_uninterrupted_runs(
    tmp_path: Path,
    server: LLMServer,
    forks: Forks,
    references: Callable[[str], Reference],
    shape: str,
    agent: str | None,
    replies: int | None,
    kill_at: str,
) -> None:
    answer, expected = references(shape)
    hold = (agent, replies) if agent is not None and replies is not None else None
    model = Model(server, shape, hold)
    payments = PaymentServer().start()
    try:
        code, _, err = run_agent(forks, tmp_path / "killed", model, payments, shape, kill_at)
        assert code == -9, err
        server.reset()
        model = Model(server, shape)
        resumed, _ = resume_until_done(forks, tmp_path / "killed", model, payments, shape)
    finally:
        payments.stop()
    assert resumed == answer
    sent = model.requests()
    assert sent, "the resume sent nothing"
    for key, bodies in sent.items():
        assert key in expected, f"{key}: a request the uninterrupted run never sent"
        for body in bodies:
            want = {expected[key][0]}
            if shape == "twice" and key == ("Expert", 2):
                # Rebuilt (the first consultation answered from the journal), or made again by
                # the re-entry (its end was not on disk when the kill came: it ran again).
                want.add(without_provider_fields(expected[key][0]))
            assert body in want, f"{key}: the request differs"
    assert max(key for key in expected if key[0] == "Boss") in sent  # it went on to its end
