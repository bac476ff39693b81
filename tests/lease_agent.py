"""An agent factory for ``agenttrace resume --agent tests.lease_agent:rebuild``, for the lease
tests: the rebuilt root agent, given its prompt, says so through the FIFO ``LEASE_AGENT_READY``
names (its pid) and then waits until a line comes through the FIFO ``LEASE_AGENT_GO`` names, so
a test knows, without sleeping, that this resume holds the session while it runs."""

from __future__ import annotations

import os
from typing import Any


class Waiting:
    """A root agent that waits for the test before it answers."""

    def __init__(self, record: Any) -> None:
        self.agent_id = record.agent_id

    def harken(self, prompt: str) -> None:
        with open(os.environ["LEASE_AGENT_READY"], "w") as ready:
            ready.write(f"{os.getpid()}\n")
        with open(os.environ["LEASE_AGENT_GO"]) as go:
            go.readline()

    def response(self) -> str:
        return "resumed"


def rebuild(record: Any, session: Any) -> Waiting:
    return Waiting(record)
