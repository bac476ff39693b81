"""A process for ``agenttrace.deterministic()``'s resume test: Booker reads a uuid4 inside
``deterministic()``, books it (an ``idempotent`` tool) and, in ``run`` mode, is killed with
SIGKILL once both are on disk; ``resume`` resumes the session and calls Booker again
(re-entering the killed run). Each mode prints one JSON line: the ticket it read (``run``), or
Booker's answer and the tool bodies that ran (``resume``).

    python -m tests.deterministic_child SESSIONS_DIR run|resume
"""

from __future__ import annotations

import json
import os
import signal
import sys
import uuid
from pathlib import Path

import agenttrace

BOOKED: list[str] = []


@agenttrace.tool(effect="idempotent")
def book(ticket: str) -> str:
    BOOKED.append(ticket)
    return f"booked {ticket}"


def main() -> None:
    sessions, mode = Path(sys.argv[1]), sys.argv[2]
    agenttrace.init(sessions_dir=sessions, console="quiet")

    @agenttrace.agent("Booker")
    @agenttrace.deterministic()
    def booker() -> str:
        ticket = str(uuid.uuid4())
        booked = book(ticket)
        if mode == "run":
            print(json.dumps({"ticket": ticket}), flush=True)
            agenttrace.force_flush()  # the value's and the booking's lines on disk
            os.kill(os.getpid(), signal.SIGKILL)
        return f"{booked}; then {uuid.uuid4()}"

    if mode == "resume":
        agenttrace.resume(next(sessions.glob("*.events.jsonl")))
    answer = booker()
    print(json.dumps({"answer": answer, "booked": BOOKED}), flush=True)


if __name__ == "__main__":
    main()
