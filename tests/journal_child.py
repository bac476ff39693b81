"""A process for the step journal's crash and re-entry tests: an agent that reads the payment
server's charges (a ``read`` tool) and then pays through it (a ``charge`` tool of the effect
class given), and kills itself with SIGKILL where told: ``inside`` (in the charge's body, after
the charge), ``after`` (once the call returned and its outcome is written), or ``never``.

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


def main() -> None:
    sessions, payments_url, effect, kill = sys.argv[1:5]
    mode = sys.argv[5] if len(sys.argv) > 5 else "run"
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agenttrace.init(sessions_dir=Path(sessions), console="quiet", tracer_provider=provider)
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
        request = urllib.request.Request(
            payments_url + "/charge", data=json.dumps({"amount": amount}).encode(), method="POST"
        )
        key = agenttrace.idempotency_key()
        if effect == "idempotent" and key:
            request.add_header("Idempotency-Key", key)
        with urllib.request.urlopen(request, timeout=30) as answer:
            charged = json.loads(answer.read())
        if kill == "inside" and mode == "run":
            os.kill(os.getpid(), signal.SIGKILL)
        return str(charged["charge"])

    @agenttrace.agent("Shop")
    def shop() -> str:
        balance()
        if mode == "run":
            # The read's outcome on disk before the charge (the background writes it soon, a
            # kill may come sooner): what is in doubt after the kill is the charge alone.
            agenttrace.force_flush()
        paid = charge(5)
        if kill == "after" and mode == "run":  # once its outcome is on disk
            agenttrace.force_flush()
            os.kill(os.getpid(), signal.SIGKILL)
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
