"""A plain ``init()`` agent for the writer-lease tests (issue 31 item 1): it takes no lease of
its own making (no ``resume``, no ``load_session``), and pays through the payment server
``PAYMENTS_URL`` names with an ``idempotent`` ``charge`` tool that, once the payment went
through, says so through the FIFO ``WRITER_AGENT_READY`` names (its pid and session id) and
then waits, inside the call, until a line comes through the FIFO ``WRITER_AGENT_GO`` names: a
test knows, without sleeping, that the call is running.

    python -m tests.writer_agent SESSIONS_DIR

prints ``paid ch_N`` once the run ended. ``rebuild`` is the factory ``agenttrace resume
--agent tests.writer_agent:rebuild`` rebuilds the root with: without a prompt its
``response()`` runs the shop again (re-entering a killed run; its charge, sent again with the
same idempotency key, is answered with the first one), with one it answers ``resumed``. Without
the FIFOs in its environment (a resume) the charge does not wait. ``WRITER_AGENT_FORK=1``: the
charge forks a worker that waits for a signal, and says its pid after the session id."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import agenttrace

from .payment_server import post_charge


@agenttrace.tool(effect="idempotent")
def charge(amount: int) -> str:
    charged = post_charge(os.environ["PAYMENTS_URL"], amount, agenttrace.idempotency_key())
    ready = os.environ.get("WRITER_AGENT_READY")
    if ready:
        forked = ""
        if os.environ.get("WRITER_AGENT_FORK") == "1":  # a worker that outlives the agent
            worker = os.fork()
            if worker == 0:
                while True:
                    signal.pause()  # until the test kills it
            forked = f" {worker}"
        with open(ready, "w") as said:
            said.write(f"{os.getpid()} {agenttrace.current_session().session_id}{forked}\n")
        with open(os.environ["WRITER_AGENT_GO"]) as go:
            go.readline()
    return str(charged["charge"])


@agenttrace.agent("Shop")
def shop() -> str:
    return "paid " + charge(5)


class Root:
    """The root agent as a resume rebuilds it."""

    def __init__(self) -> None:
        self.prompt: str | None = None

    def harken(self, prompt: str) -> None:
        self.prompt = prompt

    def response(self) -> str:
        return "resumed" if self.prompt is not None else shop()


def rebuild(record: agenttrace.AgentRecord, session: agenttrace.Session) -> Any:
    return Root()


if __name__ == "__main__":
    agenttrace.init(sessions_dir=Path(sys.argv[1]), console="quiet")
    print(shop(), flush=True)
