"""An agent for ``agenttrace resume FILE --agent tests.reentry_agent:rebuild`` with no prompt:
its run pays through the payment server ``PAYMENTS_URL`` names with a ``charge`` tool of the
effect class ``CHARGE_EFFECT`` names.

``python -m tests.reentry_agent SESSIONS_DIR`` runs it once and kills itself with SIGKILL in the
charge's body, after the charge (``WITH_ARGUMENT=1``: its run is called with an argument);
``rebuild`` is the factory the resume rebuilds its root with, and the root's ``response()``
runs the same run again (re-entering it)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import agenttrace

from .payment_server import post_charge

KILL = os.environ.get("KILL_INSIDE") == "1"


@agenttrace.tool(effect=os.environ.get("CHARGE_EFFECT", "effect"))
def charge(amount: int) -> str:
    charged = post_charge(os.environ["PAYMENTS_URL"], amount, agenttrace.idempotency_key())
    if KILL:
        os.kill(os.getpid(), signal.SIGKILL)
    return str(charged["charge"])


@agenttrace.agent("Shop")
def shop(amount: int = 5) -> str:
    return "paid " + charge(amount)


class Root:
    """The root agent as the resume rebuilds it: its run is ``shop``."""

    def response(self) -> str:
        return shop()


def rebuild(record: agenttrace.AgentRecord, session: agenttrace.Session) -> Any:
    return Root()


if __name__ == "__main__":
    agenttrace.init(sessions_dir=Path(sys.argv[1]), console="quiet")
    if os.environ.get("WITH_ARGUMENT") == "1":  # a run resume's response() cannot call again
        shop(5)
    else:
        shop()
