"""A process for tests/test_interrupted_billing.py: an agent that asks the model (the test's
tests/llm_server.py) once and answers with its reply. The test SIGKILLs it while the server
holds its request (``run``); ``resume`` resumes the session and runs the agent again (its run
re-entered: the model is asked again); ``take-over`` resumes it and records nothing more;
``replied-killed`` runs the agent and SIGKILLs itself the moment the model's reply is back
(its journal ``done`` line, which agenttrace's background thread writes after the ledger's,
may not be on disk yet); ``take-over-killed`` resumes it, and SIGKILLs itself at its first
write to the event stream (the interrupted calls' lines, after their ledger lines);
``billed-killed`` runs the agent and SIGKILLs itself where its LLM call's ledger line would be
written, its ``op_accounted`` line already in the stream. Sessions go
to ``sessions``, the billing ledger to ``ledger``."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import litellm

import agenttrace
from agenttrace.formats.session import files


def main() -> None:
    sessions, ledger, api_base, mode = sys.argv[1:5]
    if mode == "billed-killed":
        from agenttrace.recorder.ledger import LedgerSink

        def unbilled(self: LedgerSink, records: object) -> None:
            os.kill(os.getpid(), signal.SIGKILL)

        # Before init: the recorder binds each sink's ``consume`` as the sink is added.
        LedgerSink.consume = unbilled  # type: ignore[method-assign]
    agenttrace.init(sessions_dir=Path(sessions), billing_file=Path(ledger), console="quiet")

    @agenttrace.agent("Asker")
    def ask() -> str:
        reply = litellm.completion(
            model="openai/gpt-4o-mini",
            messages=[{"role": "user", "content": "Say hello."}],
            api_base=api_base,
            api_key="sk-test",
        )
        if mode == "replied-killed":
            os.kill(os.getpid(), signal.SIGKILL)
        return str(reply.choices[0].message.content)

    if mode == "take-over-killed":

        def killed(self: files.StreamAppender, line: bytes) -> None:
            os.kill(os.getpid(), signal.SIGKILL)

        files.StreamAppender.append = killed  # type: ignore[method-assign]
    if mode.startswith("take-over") or mode == "resume":
        (stream,) = Path(sessions).glob("*.events.jsonl")
        agenttrace.resume(stream)
    if mode in ("run", "resume", "replied-killed", "billed-killed"):
        print(json.dumps({"answer": ask()}))
    agenttrace.shutdown()


if __name__ == "__main__":
    main()
