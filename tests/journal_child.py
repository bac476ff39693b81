"""A process for the step journal's crash tests: an agent whose ``charge`` tool pays through the
payment server given on the command line, then kills itself with SIGKILL where told:
``inside`` (in the body, after the charge), ``after`` (once the call returned and its outcome is
written), or ``never``."""

from __future__ import annotations

import json
import os
import signal
import sys
import urllib.request
from pathlib import Path

import agenttrace


def main() -> None:
    sessions, payments_url, effect, kill = sys.argv[1:5]
    agenttrace.init(sessions_dir=Path(sessions), console="quiet")

    @agenttrace.tool(effect=effect)
    def charge(amount: int) -> str:
        request = urllib.request.Request(
            payments_url + "/charge", data=json.dumps({"amount": amount}).encode(), method="POST"
        )
        key = agenttrace.idempotency_key()
        if effect == "idempotent" and key:
            request.add_header("Idempotency-Key", key)
        with urllib.request.urlopen(request, timeout=30) as answer:
            charged = json.loads(answer.read())
        if kill == "inside":
            os.kill(os.getpid(), signal.SIGKILL)
        return str(charged["charge"])

    @agenttrace.agent("Shop")
    def shop() -> None:
        charge(5)
        if kill == "after":  # once its outcome is on disk (the background wrote it)
            agenttrace.force_flush()
            os.kill(os.getpid(), signal.SIGKILL)

    shop()
    agenttrace.shutdown()


if __name__ == "__main__":
    main()
