"""A process for tests/test_key_per_request.py: a shop agent that books ``AMOUNT`` through an
idempotent ``book`` tool and is SIGKILLed where asked:

- ``after_book``: once the booking's outcome is on disk, before the run ends;
- ``inside``: in ``book``'s body (its intent on disk, no outcome);
- ``never``: not killed.

    python -m tests.key_child SESSIONS_DIR AMOUNT KILL [resume]

``resume`` resumes the session the killed process left first. It prints the answer as one JSON
line, with the idempotency key each body that ran was given."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import agenttrace


def main() -> None:
    sessions, amount, kill = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    agenttrace.init(sessions_dir=sessions, console="quiet")
    ran: list[tuple[int, str | None]] = []

    @agenttrace.tool(effect="idempotent")
    def book(amount: int) -> str:
        ran.append((amount, agenttrace.idempotency_key()))
        if kill == "inside":
            os.kill(os.getpid(), signal.SIGKILL)
        return f"booked {amount}"

    @agenttrace.agent("Shop")
    def shop() -> str:
        answer = book(amount)
        if kill == "after_book":
            agenttrace.force_flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return answer

    if sys.argv[4:] == ["resume"]:
        (stream,) = sessions.glob("*.events.jsonl")
        agenttrace.resume(stream)
    print(json.dumps({"answer": shop(), "ran": ran}))
    agenttrace.shutdown()


if __name__ == "__main__":
    main()
