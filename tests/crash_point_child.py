"""A process for the crash-point matrix (tests/test_crash_points.py): an agent whose ``charge`` tool
pays through the payment server given on the command line, killed with SIGKILL at the crash point
given:

- ``before_intent``: the call has started, its intent is not on disk yet (the journal's
  ``begin_tool_step`` is about to run);
- ``before_body``: its intent is on disk, its body has not run (nothing charged);
- ``inside``: in its body, after the charge;
- ``after_body``: its body returned, its outcome is not journaled yet (``end_tool_step`` is
  about to run);
- ``after_done``: once the call's outcome is on disk (flushed by the background);
- ``never``: not killed.

The two points inside agenttrace are reached by wrapping the journal's two functions where the
tool decorator calls them, in this process only: the kill lands exactly there, every time."""

from __future__ import annotations

import json
import os
import signal
import sys
import urllib.request
from pathlib import Path
from typing import Any

import agenttrace
from agenttrace.tracing import decorators


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def kill_before(name: str) -> None:
    """SIGKILL when the tool decorator calls the journal's function ``name``."""
    original = getattr(decorators, name)

    def killing(*args: Any, **kwargs: Any) -> Any:
        die()
        return original(*args, **kwargs)

    setattr(decorators, name, killing)


def main() -> None:
    sessions, payments_url, effect, point = sys.argv[1:5]
    resuming = len(sys.argv) > 5 and sys.argv[5] == "resume"
    kill = "never" if resuming else point
    agenttrace.init(sessions_dir=Path(sessions), console="quiet")
    if kill == "before_intent":
        kill_before("begin_tool_step")
    elif kill == "after_body":
        kill_before("end_tool_step")
    bodies: list[str] = []

    @agenttrace.tool(effect=effect)
    def charge(amount: int) -> str:
        bodies.append("charge")
        if kill == "before_body":
            die()
        request = urllib.request.Request(
            payments_url + "/charge", data=json.dumps({"amount": amount}).encode(), method="POST"
        )
        key = agenttrace.idempotency_key()
        if effect == "idempotent" and key:
            request.add_header("Idempotency-Key", key)
        with urllib.request.urlopen(request, timeout=30) as answer:
            charged = json.loads(answer.read())
        if kill == "inside":
            die()
        return str(charged["charge"])

    @agenttrace.agent("Shop")
    def shop() -> None:
        charge(5)
        if kill == "after_done":  # once its outcome is on disk (the background wrote it)
            agenttrace.force_flush()
            die()

    if not resuming:
        shop()
        agenttrace.shutdown()
        return
    # The killed process's session, resumed: the run it was in is re-entered.
    (stream,) = Path(sessions).glob("*.events.jsonl")
    agenttrace.resume(stream)
    out: dict[str, Any] = {"in_doubt": []}
    try:
        shop()
    except agenttrace.InDoubtToolCall as exc:
        out["in_doubt"] = [(step.key[1], step.name) for step in exc.calls]
    out["bodies"] = bodies
    agenttrace.shutdown()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
