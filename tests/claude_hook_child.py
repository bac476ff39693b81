"""A Claude Agent SDK program in a process of its own, for tests/test_claude_agent_sdk_hook.py.

``first``: one exchange whose ``Bash`` call the scripted model asks for; the call's body makes
its side effect and then kills this process with SIGKILL (its pid is in ``WORK/pid``), so the
call is left in doubt. ``resume``: resumes the session the killed process left (re-entering
its interrupted run) and sends the SDK session one more prompt; prints, as one JSON line, the
tool results the CLI gave the model in that exchange. ``resume-busy``: the same, with the loop
held after the exchange's first message until the CLI has the hook's denial.

argv: MODE SESSIONS_DIR WORK ENV_JSON [STREAM SDK_SESSION_ID]
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, SystemMessage, UserMessage, query

import agenttrace


async def denied(home: Path, session_id: str) -> None:
    """Wait until the CLI's transcript of ``session_id`` holds agenttrace's denial: the CLI
    asked the hook and went on while the program's loop was held."""
    for _ in range(1200):
        for path in (home / ".claude" / "projects").glob(f"*/{session_id}.jsonl"):
            if "agenttrace resolve" in path.read_text(errors="replace"):
                return
        await asyncio.sleep(0.05)
    raise AssertionError("the CLI never got agenttrace's denial")


async def exchange(prompt: str, options: ClaudeAgentOptions, busy: bool) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    async for message in query(prompt=prompt, options=options):
        if isinstance(message, SystemMessage) and message.subtype == "init":
            session_id = message.data["session_id"]
            print(json.dumps({"sdk_session": session_id}), flush=True)
            if busy:  # the loop is held: the hook decides a call the program has not received
                await denied(Path(options.env["HOME"]), session_id)
        if isinstance(message, UserMessage) and isinstance(message.content, list):
            for block in message.content:
                content = getattr(block, "content", None)
                if getattr(block, "tool_use_id", None):
                    results.append({"content": content, "is_error": block.is_error})  # type: ignore[attr-defined]
    return results


def main() -> None:
    mode, sessions, work, env = sys.argv[1:5]
    agenttrace.init(sessions_dir=Path(sessions), console="quiet")
    resume_id = None
    if mode.startswith("resume"):
        agenttrace.resume(Path(sys.argv[5]))
        resume_id = sys.argv[6]
    agenttrace.instrument_claude_agent_sdk()
    (Path(work) / "pid").write_text(str(os.getpid()))
    print(json.dumps({"session": agenttrace.current_session().session_id}), flush=True)
    options = ClaudeAgentOptions(
        permission_mode="acceptEdits",
        allowed_tools=["Bash"],
        cwd=work,
        env=json.loads(env),
        resume=resume_id,
    )
    prompt = "charge" if mode == "first" else "go on"
    results = asyncio.run(exchange(prompt, options, busy=mode == "resume-busy"))
    print(json.dumps({"results": results}), flush=True)
    agenttrace.shutdown()


if __name__ == "__main__":
    main()
