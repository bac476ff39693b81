"""The multi-agent scenario the kill matrix (tests/kill_matrix.py) SIGKILLs at random points and
resumes until it ends: deterministic, so that every run that reaches its end leaves the same
transcripts as the one never killed.

    python -m tests.kill_scenario SESSIONS_DIR API_BASE PAYMENTS_URL
    python -m tests.kill_scenario --forks   # forks each process: see forks()

The root agent asks the model (not streamed) and gets four tool calls, which it runs at once on
a thread pool: ``till`` (``read``: it asks the payment server), ``price`` (``pure``) and two
``delegate`` calls, each of which creates a sub-agent (depth 2) that hears a task and runs:

- Scout, asynchronous: a streamed call whose reply asks for ``charge`` (``effect``) and ``book``
  (``idempotent``, with its idempotency key), run as two asyncio tasks, then a plain call;
- Clerk: a plain call asking for ``charge``, ``book`` and ``till``, run on threads, then a
  streamed call.

The root then streams its final answer. Tool results are fixed by their arguments (``charged
7``), never by what the servers numbered, so transcripts compare across sessions.

The first process of a session runs the scenario from the start; any later one resumes the
session the last one left (``agenttrace.resume``, the root rebuilt from its record) and
re-enters its interrupted run, or starts the run if the kill came before it started, or does
nothing if it had ended. It prints
``go`` once it is about to start the agents (the driver's kill delay counts from there) and, at
its end, one JSON line: ``{"ended": true}``, or ``{"in_doubt": [[label, tool], ...]}`` with
exit status 3 when a re-entry stopped at calls in doubt. ``KILL_AT_WRITE=N`` kills the process
with SIGKILL just before (``KILL_WHEN=before``, the default) or just after (``after``) its N-th
write to the event stream: a kill at a reproducible record. ``COUNT_WRITES=1`` prints the
number of stream writes at the end (the driver's range for N)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import litellm

import agenttrace
from agenttrace.formats.session import files
from agenttrace.formats.session.files import read_session_file
from agenttrace.model.journal import Journal

MODEL = "openai/gpt-4o-mini"
QUESTION = "Buy the tea and book the room for the team."
SYSTEM = {
    "Root": "You are Root. You plan and delegate.",
    "Scout": "You are Scout. You pay for the tea.",
    "Clerk": "You are Clerk. You book the room.",
}
_options: dict[str, Any] = {}
_payments = ""


def _function(tool: str, **properties: str) -> dict[str, Any]:
    schema = {key: {"type": kind} for key, kind in properties.items()}
    return {
        "type": "function",
        "function": {"name": tool, "parameters": {"type": "object", "properties": schema}},
    }


ROOT_TOOLS = [
    _function("till"),
    _function("price", item="string"),
    _function("delegate", name="string", task="string"),
]
WORKER_TOOLS = [
    _function("charge", amount="integer"),
    _function("book", amount="integer"),
    _function("till"),
]


# --- the tools ----------------------------------------------------------------------------------


def _post(amount: int, key: str | None) -> None:
    request = urllib.request.Request(
        _payments + "/charge", data=json.dumps({"amount": amount}).encode(), method="POST"
    )
    if key:
        request.add_header("Idempotency-Key", key)
    with urllib.request.urlopen(request, timeout=480) as answer:
        answer.read()


@agenttrace.tool(effect="read")
def till() -> str:
    """Whether the payment server takes payments (it reads, changes nothing)."""
    with urllib.request.urlopen(_payments + "/charges", timeout=480) as answer:
        answer.read()
    return "the till is open"


@agenttrace.tool(effect="pure")
def price(item: str) -> str:
    """A price computed from its argument alone."""
    return f"{item} costs {len(item) + 3}"


@agenttrace.tool(effect="effect")
def charge(amount: int) -> str:
    """Charge the card: no idempotency key, so a second call charges twice."""
    _post(amount, None)
    return f"charged {amount}"


@agenttrace.tool(effect="idempotent")
def book(amount: int) -> str:
    """Pay a booking with the call's idempotency key: the server books it once."""
    _post(amount, agenttrace.idempotency_key())
    return f"booked {amount}"


# A tool that only hosts a sub-agent has no effect of its own: the sub-agent's tool calls are
# journaled one by one, so running ``delegate`` again on a re-entry repeats none of them.
@agenttrace.tool(effect="pure")
def delegate(name: str, task: str) -> str:
    """Create the sub-agent ``name``, tell it ``task`` and return what it answers."""
    worker = Agent(name, SYSTEM[name])
    worker.harken(task)
    if name == "Scout":
        return asyncio.run(worker.aresponse())
    return worker.response()


TOOLS = {"till": till, "price": price, "charge": charge, "book": book, "delegate": delegate}


async def _atool(name: str, arguments: str) -> str:
    return await asyncio.to_thread(TOOLS[name], **json.loads(arguments or "{}"))


# --- the agents ---------------------------------------------------------------------------------


def _assistant(message: Any) -> dict[str, Any]:
    """A reply as a transcript entry: the same shape streamed or not."""
    entry: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
    if message.tool_calls:
        entry["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments},
            }
            for call in message.tool_calls
        ]
    return entry


def _streamed(chunks: list[Any], messages: list[dict[str, Any]]) -> Any:
    built = litellm.stream_chunk_builder(chunks, messages=messages)
    return built.choices[0].message


@agenttrace.agent_class
class Agent:
    """An agent with a transcript: Root, or a sub-agent (Scout, Clerk)."""

    def __init__(self, name: str, system_prompt: str) -> None:
        self.name = name
        self.language_model = MODEL
        self.agent_id: str | None = None
        self.transcript: list[dict[str, Any]] = [{"role": "system", "content": system_prompt}]

    @classmethod
    def revive(cls, record: agenttrace.AgentRecord, session: agenttrace.Session) -> Agent:
        """The agent as the session left it (nothing logged)."""
        agent = cls.__new__(cls)
        agent.name, agent.agent_id = record.name or "Root", record.agent_id
        agent.language_model, agent.transcript = MODEL, record.messages()
        return agent

    @agenttrace.hears
    def harken(self, text: str) -> None:
        self.transcript.append({"role": "user", "content": str(text)})

    def _answer(self, calls: list[dict[str, Any]], results: list[str]) -> None:
        for call, result in zip(calls, results, strict=True):
            self.transcript.append({"role": "tool", "tool_call_id": call["id"], "content": result})

    @agenttrace.agent
    def response(self) -> str:
        """Root and Clerk: a plain call, its tool calls on threads, then a streamed call."""
        tools = ROOT_TOOLS if self.name == "Root" else WORKER_TOOLS
        reply = litellm.completion(messages=self.transcript, tools=tools, **_options)
        entry = _assistant(reply.choices[0].message)
        self.transcript.append(entry)
        calls = entry.get("tool_calls", [])
        with ThreadPoolExecutor(max_workers=4) as pool:
            futures = [
                pool.submit(TOOLS[c["function"]["name"]], **json.loads(c["function"]["arguments"]))
                for c in calls
            ]
            results = [future.result() for future in futures]
        self._answer(calls, results)
        chunks = list(litellm.completion(messages=self.transcript, stream=True, **_options))
        final = _assistant(_streamed(chunks, self.transcript))
        self.transcript.append(final)
        return str(final["content"])

    @agenttrace.agent
    async def aresponse(self) -> str:
        """Scout: a streamed call, its tool calls as asyncio tasks, then a plain call."""
        stream = await litellm.acompletion(
            messages=self.transcript, tools=WORKER_TOOLS, stream=True, **_options
        )
        chunks = [chunk async for chunk in stream]
        entry = _assistant(_streamed(chunks, self.transcript))
        self.transcript.append(entry)
        calls = entry.get("tool_calls", [])
        tasks = [
            asyncio.create_task(_atool(c["function"]["name"], c["function"]["arguments"]))
            for c in calls
        ]
        self._answer(calls, list(await asyncio.gather(*tasks)))
        reply = await litellm.acompletion(messages=self.transcript, **_options)
        final = _assistant(reply.choices[0].message)
        self.transcript.append(final)
        return str(final["content"])


# --- the kill hook ------------------------------------------------------------------------------


def _kill_at_write(n: int, after: bool) -> None:
    """SIGKILL this process at its ``n``-th write to the event stream (before or after it)."""
    original = files.StreamAppender.append
    count = 0
    lock = threading.Lock()

    def append(self: files.StreamAppender, line: bytes) -> None:
        nonlocal count
        with lock:
            count += 1
            reached = count == n
        if reached and not after:
            os.kill(os.getpid(), signal.SIGKILL)
        original(self, line)
        if reached:
            os.kill(os.getpid(), signal.SIGKILL)

    files.StreamAppender.append = append  # type: ignore[method-assign]


def _count_writes() -> list[int]:
    original = files.StreamAppender.append
    counted = [0]
    lock = threading.Lock()

    def append(self: files.StreamAppender, line: bytes) -> None:
        with lock:
            counted[0] += 1
        original(self, line)

    files.StreamAppender.append = append  # type: ignore[method-assign]
    return counted


# --- the process --------------------------------------------------------------------------------


def _start() -> int:
    root = Agent("Root", SYSTEM["Root"])
    root.harken(QUESTION)
    print("go", flush=True)
    root.response()
    return 0


def _resume(stream: Path) -> int:
    journal = Journal(read_session_file(stream).journal)
    ran = any(step.kind == "run" for step in journal.steps.values())
    if ran and journal.interrupted_run() is None:
        print("go", flush=True)
        return 0  # the run had ended: nothing left to do
    session = agenttrace.resume(stream)  # and arms the re-entry of an interrupted run
    record = session.root()
    if record is None:  # killed in the middle of the root's creation: the resume left it out
        return _start()
    root = Agent.revive(record, session)
    if not any(entry.get("content") == QUESTION for entry in root.transcript):
        root.harken(QUESTION)  # killed before the root heard its question
    print("go", flush=True)
    root.response()
    return 0


def main(argv: list[str]) -> int:
    """One process of the scenario (``argv``: SESSIONS_DIR API_BASE PAYMENTS_URL); its status."""
    global _payments
    sessions, api_base, _payments = argv[:3]
    _options.update(model=MODEL, api_base=api_base, api_key="sk-kill-matrix")
    counted = _count_writes() if os.environ.get("COUNT_WRITES") == "1" else None
    if kill_at := os.environ.get("KILL_AT_WRITE"):
        _kill_at_write(int(kill_at), os.environ.get("KILL_WHEN") == "after")
    agenttrace.init(
        sessions_dir=Path(sessions),
        console="quiet",
        billing_file=Path(sessions).parent / "accounting.jsonl",
    )
    found = sorted(Path(sessions).glob("*.events.jsonl"))
    out: dict[str, Any] = {}
    status = 0
    try:
        status = _resume(found[0]) if found else _start()
        out["ended"] = True
    except agenttrace.InDoubtToolCall as exc:
        out["in_doubt"] = [[step.key[1], step.name] for step in exc.calls]
        status = 3
    agenttrace.shutdown()
    if counted is not None:
        out["writes"] = counted[0]
    print(json.dumps(out), flush=True)
    return status


def forks() -> None:
    """Fork each process of the scenario from this one, which has imported litellm and
    agenttrace once (a new interpreter spends seconds on that, far longer than the scenario
    runs; agenttrace is not initialised here, so each child starts as a fresh program would).

    Reads one JSON line per process on stdin: ``{"argv": [...], "env": {...}, "stderr":
    PATH}``; answers on stdout with JSON lines: ``{"pid": N}`` once it runs, ``{"out": LINE}``
    for each line it prints, ``{"status": S}`` when it ends (``-9``: SIGKILLed)."""
    for command in sys.stdin:
        request = json.loads(command)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            status = 1
            try:
                os.dup2(write, 1)
                errors = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                os.dup2(errors, 2)
                nothing = os.open(os.devnull, os.O_RDONLY)
                os.dup2(nothing, 0)
                os.environ.update(request["env"])
                status = main(request["argv"])
            except SystemExit as exc:
                status = exc.code if isinstance(exc.code, int) else 1
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(status)
        os.close(write)
        _say({"pid": pid})
        with os.fdopen(read, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                _say({"out": line.rstrip("\n")})
        _, code = os.waitpid(pid, 0)
        _say({"status": os.waitstatus_to_exitcode(code)})


def _say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1:] == ["--forks"]:
        forks()
    else:
        sys.exit(main(sys.argv[1:]))
