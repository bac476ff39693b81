"""A child process for tests/test_faults.py: agent code writing a session while things go wrong.

    python fault_writer.py loop  SESSIONS_DIR SESSION_ID SEED        # log events until killed
    python fault_writer.py count SESSIONS_DIR SESSION_ID SEED N      # log N events, shut down
    python fault_writer.py agent SESSIONS_DIR SESSION_ID             # a traced agent run
    python fault_writer.py resume SESSIONS_DIR REFERENCE             # resume, report, log nothing
    python fault_writer.py outage SESSIONS_DIR SESSION_ID N          # N events, wait, N more
    python fault_writer.py create SESSIONS_DIR SESSION_ID            # agents with 8 MB prompts

``loop`` and ``count`` resume the session from its stream when the stream exists (and print
``resumed <message counter> <agent counter>``), else start it (``new``; a stream without a
whole event is reported on stderr as ``unresumable``); then they print ``go``
and log a random mix of ``agent_created`` (most with one or two first entries, a system prompt
up to 70 KB, logged with it in one write) and ``transcript_entry`` events, short and multi-KB,
ASCII and not (``count``: single events only, so it logs exactly N). ``loop`` prints
``ack <message id>...`` once each ``log_*`` call has returned: those events were logged, and a
kill must not lose them. ``count`` ends with one JSON line: the
message and agent ids it logged.

``create`` starts (or resumes) the session like ``loop``, creates a root agent if it has none,
then creates agents with an 8 MB system prompt and a short first user message until killed (an
8 MB write is long enough for a kill to land in it), printing ``ack`` lines like ``loop``.

``outage`` runs N traced agent runs (each a tool call and events, one agent created with its
system prompt), prints ``paused <events>`` and waits for a line on stdin (the test frees the
disk meanwhile); then waits, logging nothing, until the stream has every event or 60 s passed
(it prints ``caught up`` or ``behind``), runs N more and shuts down, printing ``done <events>``.

``agent`` logs events directly, runs a traced agent that makes a traced tool call, logs more,
and prints what it did on stdout; ``agenttrace.shutdown()`` then writes the session file.

``resume`` resumes a session by id or path as a user would and prints one JSON line: the
restored counters, message ids and agent ids (it logs nothing, so the files stay as they are).

The process never reaches the network: connections anywhere but the loopback are refused.
"""

from __future__ import annotations

import ipaddress
import json
import random
import socket
import sys
import time
from pathlib import Path
from typing import Any


def _refuse_the_network() -> None:
    """Only loopback (and Unix) sockets: a test child must never reach the internet."""

    def local(address: Any) -> bool:
        if not isinstance(address, tuple):
            return True  # AF_UNIX path
        host = str(address[0])
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host.split("%")[0]).is_loopback
        except ValueError:
            return False

    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex
    original_getaddrinfo = socket.getaddrinfo

    def connect(self: socket.socket, address: Any) -> None:
        if not local(address):
            raise OSError(f"fault_writer: network access refused ({address!r})")
        original_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if not local(address):
            raise OSError(f"fault_writer: network access refused ({address!r})")
        return original_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in (None, "localhost") and not local((host, 0)):
            raise OSError(f"fault_writer: name lookup refused ({host!r})")
        return original_getaddrinfo(host, *args, **kwargs)

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = getaddrinfo


_refuse_the_network()

import agenttrace  # noqa: E402
from agenttrace.formats.session.files import stream_path  # noqa: E402
from agenttrace.model import events as ev  # noqa: E402

ALPHABET = 'abcdefghij KLMNOP 0123 .,;:!?"\\/\t\n\r é ü ß Ω ж 漢字 かな 🙂 🚀 \u2028 \u00a0'


def text(rng: random.Random) -> str:
    """Content of a varied length: empty, short, a few KB, or tens of KB, mostly not ASCII."""
    size = rng.choices(
        (0, 1, 7, 40, 120, 600, 2_500, 4_100, 9_000, 70_000),
        weights=(3, 3, 10, 20, 20, 20, 8, 8, 4, 1),
    )[0]
    head = rng.choice(("", "Ünïcødé ", "漢字 ", "🙂 ", "plain "))
    body = "".join(rng.choice(ALPHABET) for _ in range(min(size, 64)))
    return (head + body * (size // max(1, len(body)) + 1))[:size]


def start(sessions: Path, session_id: str) -> agenttrace.Session:
    agenttrace.init(
        sessions_dir=sessions, billing_file=Path.cwd() / "accounting.jsonl", console="quiet"
    )
    path = stream_path(sessions, session_id)
    if path.exists():
        try:
            session = agenttrace.resume(path)
        except agenttrace.SessionFileError as exc:
            # Killed before its first event was whole: nothing to resume, the session starts.
            print("unresumable", exc, file=sys.stderr, flush=True)
        else:
            assert agenttrace.current_session() is session
            print("resumed", session.message_counter, session.agent_counter, flush=True)
            return session
    session = agenttrace.new_session(session_id)
    print("new", flush=True)
    return session


def log_one(
    session: agenttrace.Session, rng: random.Random, mine: list[str], groups: bool = True
) -> tuple[list[str], str]:
    """Log one event, or an agent's creation with its first entries (if ``groups``): (their
    message ids, the new agent id or "")."""
    if not mine or rng.random() < 0.15:
        agent_id = session.allocate_agent_id()
        mine.append(agent_id)
        name = rng.choice(("Jack", "Jill", "Ωmega", "探索者", "🙂bot", "x" * 300))
        first = [{"role": "system", "content": "You are " + name + ". " + text(rng)}]
        first.append({"role": "user", "content": text(rng)})
        initial = first[: rng.choice((0, 1, 1, 2))] if groups else []
        message = session.log_agent_created(agent_id, name=name, initial=initial)
        number = ev.id_number(message, ev.MESSAGE_PREFIX) or 0
        return [ev.message_id(number + n) for n in range(len(initial) + 1)], agent_id
    role = rng.choice(("user", "assistant", "system", "tool"))
    entry: dict[str, Any] = {"role": role, "content": text(rng)}
    if role == "tool":
        entry["tool_call_id"] = f"call_{rng.randrange(10**6)}"
    return [session.log_transcript_entry(rng.choice(mine), entry)], ""


def loop(sessions: Path, session_id: str, seed: int, count: int | None) -> None:
    rng = random.Random(seed)
    session = start(sessions, session_id)
    mine = list(session.agents)[-3:]
    logged: list[str] = []
    created: list[str] = []
    print("go", flush=True)
    while count is None or len(logged) < count:
        messages, agent = log_one(session, rng, mine, groups=count is None)
        if count is None:
            print("ack", *messages, flush=True)
        logged.extend(messages)
        if agent:
            created.append(agent)
    agenttrace.shutdown()
    print(json.dumps({"messages": logged, "agents": created}), flush=True)


def agent_run(sessions: Path, session_id: str) -> None:
    agenttrace.init(
        sessions_dir=sessions, billing_file=Path.cwd() / "accounting.jsonl", console="quiet"
    )
    session = agenttrace.new_session(session_id)

    @agenttrace.tool
    def lookup(query: str) -> str:
        return f"found {query.upper()}"

    @agenttrace.agent(name="Worker")
    def work(question: str) -> str:
        worker = session.agent_named("Worker")
        assert worker is not None
        session.log_transcript_entry(worker.agent_id, {"role": "user", "content": question})
        found = lookup(question)
        print("tool said:", found, flush=True)
        answer = f"{found}, thanks"
        # No model here: the agent logs what it says itself (agenttrace logs only replies).
        session.log_transcript_entry(worker.agent_id, {"role": "assistant", "content": answer})
        return answer

    helper = session.allocate_agent_id()
    session.log_agent_created(helper, name="Helper")
    for number in range(5):
        content = f"note {number}: ünïcødé 漢字 🙂 " + "x" * (3000 * number)
        session.log_transcript_entry(helper, {"role": "user", "content": content})
    answer = work("where is the cafe?")
    print("agent said:", answer, flush=True)
    session.log_transcript_entry(helper, {"role": "assistant", "content": "bye"})
    agenttrace.shutdown()
    print("events:", json.dumps([event["message_id"] for event in session.events]), flush=True)
    print("agents:", json.dumps(sorted(session.agents)), flush=True)
    print("done", flush=True)


def resume_only(sessions: Path, reference: str) -> None:
    agenttrace.init(
        sessions_dir=sessions, billing_file=Path.cwd() / "accounting.jsonl", console="quiet"
    )
    session = agenttrace.resume(reference)
    assert agenttrace.current_session() is session
    report = {
        "message_counter": session.message_counter,
        "agent_counter": session.agent_counter,
        "messages": [event["message_id"] for event in session.events],
        "agents": sorted(session.agents),
        "first_roles": {
            agent_id: [entry.get("role") for entry in record.transcript[:2]]
            for agent_id, record in session.agents.items()
        },
        "root": root.agent_id if (root := session.root()) is not None else None,
        "resumed_from": session.resumed_from,
    }
    agenttrace.shutdown()
    print(json.dumps(report), flush=True)


def outage(sessions: Path, session_id: str, runs: int) -> None:
    agenttrace.init(
        sessions_dir=sessions, billing_file=Path.cwd() / "accounting.jsonl", console="quiet"
    )
    session = agenttrace.new_session(session_id)
    rng = random.Random(runs)

    @agenttrace.tool
    def look_up(query: str) -> str:
        return query.upper()

    def run_some(start: int) -> None:
        for number in range(start, start + runs):
            with agenttrace.agent(f"Worker{number}"):
                agent_id = session.allocate_agent_id()
                prompt = {"role": "system", "content": f"You are worker {number}. {text(rng)}"}
                session.log_agent_created(agent_id, name=f"Worker{number}", initial=[prompt])
                for _ in range(3):
                    entry = {"role": "user", "content": text(rng)}
                    session.log_transcript_entry(agent_id, entry)
                look_up(f"question {number}")

    run_some(0)
    # Every writer tries now, while the disk is full (the session file's writes are coalesced:
    # without this, whether one was tried yet would depend on its timer).
    agenttrace.force_flush()
    print("paused", len(session.events), flush=True)
    sys.stdin.readline()
    stream = stream_path(sessions, session_id)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the retry timer writes what waits, nothing else needed
        if stream.exists() and _event_lines(stream) == len(session.events):
            print("caught up", flush=True)
            break
        time.sleep(0.05)
    else:
        print("behind", flush=True)
    run_some(runs)
    agenttrace.shutdown()
    print("done", len(session.events), flush=True)


def _event_lines(stream: Path) -> int:
    """How many whole lines of ``stream`` are events (its op_accounted and journal lines are
    none)."""
    lines = stream.read_bytes().split(b"\n")[:-1]
    return sum(
        not line.startswith((b'{"event_type": "op_accounted"', b'{"event_type": "step'))
        for line in lines
    )


def create(sessions: Path, session_id: str) -> None:
    session = start(sessions, session_id)
    if session.root() is None:
        boss = session.allocate_agent_id()
        session.log_agent_created(boss, name="Boss")
    prompt = "You are Jill. Fetch a pail of water. " + "Ω" * (4 << 20)  # 8 MB of UTF-8
    print("go", flush=True)
    while True:
        agent_id = session.allocate_agent_id()
        initial = [{"role": "system", "content": prompt}, {"role": "user", "content": "Go."}]
        message = session.log_agent_created(agent_id, name="Jill", initial=initial)
        number = ev.id_number(message, ev.MESSAGE_PREFIX) or 0
        print("ack", *(ev.message_id(number + n) for n in range(3)), flush=True)


def main(argv: list[str]) -> int:
    mode, sessions, session_id = argv[0], Path(argv[1]), argv[2]
    if mode == "loop":
        loop(sessions, session_id, int(argv[3]), None)
    elif mode == "count":
        loop(sessions, session_id, int(argv[3]), int(argv[4]))
    elif mode == "agent":
        agent_run(sessions, session_id)
    elif mode == "resume":
        resume_only(sessions, session_id)
    elif mode == "create":
        create(sessions, session_id)
    elif mode == "outage":
        outage(sessions, session_id, int(argv[3]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
