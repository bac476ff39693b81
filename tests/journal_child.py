"""A process for the step journal's crash, crash-point and re-entry tests: a shop agent that
reads the payment server's charges (``balance``, a ``read`` tool) and then pays through it
(``charge``, a tool of the effect class given), killed with SIGKILL at the kill point given:

- ``before_intent``: the charge has started, its intent is not on disk yet (the journal's
  ``begin_tool_step`` is about to run);
- ``before_body``: its intent is on disk, its body has not run (nothing charged);
- ``inside``: in its body, after the charge;
- ``after_body``: its body returned, its outcome is not journaled yet (``end_tool_step`` is
  about to run);
- ``after_done``: once the charge's outcome is on disk (flushed by the background);
- ``never``: not killed.

The two points inside agenttrace are reached by wrapping the journal's two functions where the
tool decorator calls them, in this process only: the kill lands exactly there, every time. A
``pure`` tool never calls them (it journals nothing): its points are the same moments of the
call, reached through the functions it does call there (its op started, its op about to end).

    python -m tests.journal_child SESSIONS_DIR PAYMENTS_URL EFFECT KILL_POINT [run|resume|verify]

``resume`` as the mode resumes the session the killed process left and calls the agent again
(re-entering the killed run); it prints what happened as one JSON line: the answer or the
in-doubt calls, the tool bodies that ran and the spans answered from the journal. ``verify``
does the same with a verifier on ``charge`` that asks the payment server."""

from __future__ import annotations

import json
import os
import signal
import sys
import urllib.request
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agenttrace
from agenttrace.tracing import decorators

KILL_POINTS = ("before_intent", "before_body", "inside", "after_body", "after_done", "never")


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def kill_before(name: str) -> None:
    """SIGKILL when the tool decorator calls the journal's function ``name`` for ``charge``."""
    original = getattr(decorators, name)

    def killing(scope: Any, *args: Any, **kwargs: Any) -> Any:
        if scope.name == "charge":
            die()
        return original(scope, *args, **kwargs)

    setattr(decorators, name, killing)


def kill_after(name: str) -> None:
    """SIGKILL once the tool decorator's call of ``name`` has returned ``charge``'s scope."""
    original = getattr(decorators, name)

    def killing(*args: Any, **kwargs: Any) -> Any:
        scope = original(*args, **kwargs)
        if scope.name == "charge":
            die()
        return scope

    setattr(decorators, name, killing)


def main() -> None:
    sessions, payments_url, effect, point = sys.argv[1:5]
    mode = sys.argv[5] if len(sys.argv) > 5 else "run"
    if point not in KILL_POINTS:
        sys.exit(f"journal_child: unknown kill point {point!r}")
    kill = point if mode == "run" else "never"  # a resumed process runs to its end
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agenttrace.init(sessions_dir=Path(sessions), console="quiet", tracer_provider=provider)
    if kill == "before_intent":
        kill_after("start_op") if effect == "pure" else kill_before("begin_tool_step")
    elif kill == "after_body":
        kill_before("finish" if effect == "pure" else "end_tool_step")
    bodies: list[str] = []

    def charges() -> list[dict[str, Any]]:
        with urllib.request.urlopen(payments_url + "/charges", timeout=30) as answer:
            made: list[dict[str, Any]] = json.loads(answer.read())["charges"]
            return made

    def verify(amount: int) -> agenttrace.Verdict:
        made = [charge for charge in charges() if charge["amount"] == amount]
        return agenttrace.Verdict.done(made[0]["charge"]) if made else agenttrace.Verdict.unknown()

    @agenttrace.tool(effect="read")
    def balance() -> int:
        bodies.append("balance")
        return len(charges())

    @agenttrace.tool(effect=effect, verify=verify if mode == "verify" else None)
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
    def shop() -> str:
        balance()
        if mode == "run":
            # The read's outcome on disk before the charge (the background writes it soon, a
            # kill may come sooner): what is in doubt after the kill is the charge alone.
            agenttrace.force_flush()
        paid = charge(5)
        if kill == "after_done":  # once its outcome is on disk
            agenttrace.force_flush()
            die()
        return paid

    if mode == "run":
        shop()
    else:
        # The stream, or the session file alone when the stream is gone.
        found = [*Path(sessions).glob("*.events.jsonl")] or [*Path(sessions).glob("*.json.gz")]
        agenttrace.resume(found[0])
        out: dict[str, Any] = {}
        try:
            out["answer"] = shop()
        except agenttrace.InDoubtToolCall as exc:
            out["in_doubt"] = [(step.key[1], step.name) for step in exc.calls]
            out["error"] = str(exc)
        agenttrace.force_flush()
        out["bodies"] = bodies
        out["replayed"] = [
            span.name
            for span in exporter.get_finished_spans()
            if (span.attributes or {}).get("agenttrace.replayed")
        ]
        print(json.dumps(out))
    agenttrace.shutdown()


if __name__ == "__main__":
    main()
