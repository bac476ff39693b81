"""A scripted agent for the live viewer's tests (tests/test_serve.py), run in the test's own
process or as a process of its own:

    python -m tests.live_agent SESSIONS_DIR GATE_FILE

A ``Boss`` agent asks its model (an ``@agenttrace.llm`` function that answers from a script:
no network), then calls its ``delegate`` tool, which runs a ``Worker`` sub-agent. The Worker
asks its model once, then calls its ``read_pages`` tool, which blocks until ``GATE_FILE``
exists (a test creates it once it has seen the Worker and that call running: a call that hangs,
which has logged nothing but its journal's intent); then the Worker asks a second time and
ends. The tool's argument and the Boss's last reply hold markup and a script, which every view
must show as text.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import agenttrace

HOSTILE = (
    "<script>document.documentElement.setAttribute('data-pwned','1')</script>"
    "<img src=x onerror=\"document.documentElement.setAttribute('data-pwned','2')\">"
)
"""The Boss's final reply: markup that would run if a page took it for HTML."""
TITLE = "<img src=x onerror=\"document.documentElement.setAttribute('data-pwned','3')\">"
"""The argument of the Worker's blocking tool call: markup too."""
BLOCKING_CALL = "1.2.1.2"
"""The path label of the Worker's ``read_pages`` call, which runs until the gate opens."""
WORKER_TOKENS = ((30, 7), (40, 9))
"""The Worker's two attempts: (input, output) tokens."""
GATE_POLL_S = 0.05
GATE_DEADLINE_S = 120.0
"""How long the Worker waits for its gate before it fails (never reached when a test works)."""


def _reply(text: str, tokens: tuple[int, int]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-live",
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": tokens[0],
            "completion_tokens": tokens[1],
            "total_tokens": sum(tokens),
        },
    }


@agenttrace.llm(model="openai/gpt-4o-mini")
def chat(messages: list[dict[str, Any]], text: str, tokens: tuple[int, int]) -> dict[str, Any]:
    """The scripted model: answers ``text`` with ``tokens``."""
    return _reply(text, tokens)


def run(gate: Callable[[], None]) -> str:
    """The Boss's run; ``gate`` is called while the Worker runs, between its two attempts, in
    the body of its ``read_pages`` tool call."""

    @agenttrace.tool
    def read_pages(title: str) -> int:
        gate()
        return 12

    @agenttrace.agent("Worker")
    def worker() -> str:
        chat([{"role": "user", "content": "Count the pages."}], "Counting.", WORKER_TOKENS[0])
        read_pages(TITLE)
        answer = chat([{"role": "user", "content": "And now?"}], "12 pages.", WORKER_TOKENS[1])
        return str(answer["choices"][0]["message"]["content"])

    @agenttrace.tool
    def delegate() -> str:
        return worker()

    @agenttrace.agent("Boss")
    def boss() -> str:
        chat([{"role": "user", "content": "How long is the book?"}], "Asking.", (11, 3))
        delegate()
        return str(chat([{"role": "user", "content": "Say it."}], HOSTILE, (12, 5)))

    return boss()


def wait_for(path: Path) -> Callable[[], None]:
    """A gate that returns once ``path`` exists."""

    def gate() -> None:
        deadline = time.monotonic() + GATE_DEADLINE_S
        while not path.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{path} never appeared")
            time.sleep(GATE_POLL_S)

    return gate


def main(sessions: Path, gate_file: Path) -> None:
    handle = agenttrace.init(
        sessions_dir=sessions, console="quiet", billing_file=sessions.parent / "ledger.jsonl"
    )
    session = agenttrace.new_session()
    print(session.session_id, flush=True)
    try:
        run(wait_for(gate_file))
    finally:
        handle.shutdown()
    print("done", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
