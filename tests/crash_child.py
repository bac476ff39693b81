"""A child process for tests/test_crash.py: the cafe demo killed half-way, as a user meets it.

    python -m tests.crash_child first SESSIONS_DIR [jill]  # the cafe's first run, killed

``first`` runs the cafe scenario (examples/cafe.py) against the scripted model at
``$CRASH_API_BASE`` with its ledger at ``$AGENTTRACE_BILLING_FILE``, and kills itself with
SIGKILL at the moment the root agent is about to run the ``discuss`` tool the model asked for:
after three LLM attempts and two tool calls ended, with the model's ``tool_calls`` in the
root's transcript and no tool result for them. Nothing is flushed or shut down first: whatever
is on disk then is what a crash leaves. It prints ``killing`` just before. With ``jill`` it is
killed later, inside ``discuss``: once Jack has answered (and the session file was written by a
``force_flush``, with the run unfinished) and Jill has answered too.

:func:`rebuild` is the agent factory ``agenttrace resume --agent tests.crash_child:rebuild``
takes: the cafe's agents, on the scripted model at ``$CRASH_API_BASE``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import agenttrace
from examples import cafe

KEY = "offline-crash-key"


def _options() -> dict[str, Any]:
    return {"api_base": os.environ["CRASH_API_BASE"], "api_key": KEY}


def rebuild(record: agenttrace.AgentRecord, session: agenttrace.Session) -> cafe.Agent:
    """The agent ``record`` describes, as the session left it, on the scripted model."""
    return cafe.Agent.revive(record, _options())


def first(sessions: Path, at: str = "discuss") -> None:
    agenttrace.init(sessions_dir=sessions, console="quiet")
    if at == "jill":
        _kill_after_jill()
    else:
        _kill_at_discuss()
    asyncio.run(cafe.run_first(_options()))
    print("not killed", flush=True)


def _kill_after_jill() -> None:
    """Jack's turn in ``discuss`` ends and the session file is written (a snapshot with the run
    unfinished); Jill answers, and the process is killed before ``discuss`` goes on."""
    response = cafe.Agent.response

    async def then_kill(self: cafe.Agent, max_turns: int | None = None) -> str | None:
        said = await response(self, max_turns)
        if self.name == "Jack":
            agenttrace.force_flush()
        elif self.name == "Jill":
            print("killing", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        return said

    cafe.Agent.response = then_kill  # type: ignore[method-assign]


def _kill_at_discuss() -> None:
    run_tool = cafe.Agent.run_tool

    async def killed_at_discuss(
        self: cafe.Agent, call_id: str, name: str, arguments: str | None
    ) -> None:
        if name == "discuss":
            print("killing", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        await run_tool(self, call_id, name, arguments)

    cafe.Agent.run_tool = killed_at_discuss  # type: ignore[method-assign]


if __name__ == "__main__":
    command, directory, *at = sys.argv[1:]
    if command != "first":
        sys.exit(f"unknown command {command!r}")
    first(Path(directory), *at)
