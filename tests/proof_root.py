"""The root process of tests/test_one_session_proof.py: the ``boss`` agent, whose tools hand
its work to other processes, all of one session.

    python -m tests.proof_root SPANS SESSIONS

``fan_out`` runs the ``researcher`` sub-agent in a spawn worker of an
``agenttrace.ProcessPoolExecutor`` (``tests/proof_child.py``); ``shell`` runs it in a
subprocess started with ``agenttrace.subprocess_env()``; ``ask`` calls the ``research`` tool of
an MCP server over stdio (``tests/mcp_tool_server.py``, the ``mcp`` SDK's ``MCPServer``),
started for the call; the last ``fan_out``, on the topic ``die``, has the worker killed in its
sub-agent's tool call (``os._exit``: no handler, no flush). Every process exports its spans to
``SPANS`` and records into ``SESSIONS``; the store ``AGENTTRACE_SESSIONS_URL`` names gets what
each ships. Prints the boss's answer, the session's id and its pid.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import sys
from concurrent.futures.process import BrokenProcessPool

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import agenttrace
from tests import proof_child, writers_child
from tests.travel_child import FileSpanExporter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(spans: str, sessions: str) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(spans)))
    agenttrace.init(
        tracer_provider=provider,
        console="quiet",
        sessions_dir=sessions,
        billing_file=os.path.join(sessions, "accounting.jsonl"),
    )
    pool = agenttrace.ProcessPoolExecutor(
        max_workers=1,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=proof_child.set_up,
        initargs=(spans, sessions),
    )

    @agenttrace.tool(name="fan_out")
    def fan_out(topic: str) -> str:
        try:
            return str(pool.submit(writers_child.pool_task, topic).result(60)[0])
        except BrokenProcessPool:  # the worker was killed in the task
            return f"lost {topic}"

    @agenttrace.tool(name="shell")
    def shell(topic: str) -> str:
        import subprocess

        done = subprocess.run(
            [sys.executable, proof_child.__file__, spans, sessions, topic],
            env=agenttrace.subprocess_env(),
            capture_output=True,
            text=True,
            timeout=480,
            check=True,
        )
        return done.stdout.strip()

    @agenttrace.tool(name="ask")
    def ask(x: int) -> str:
        return asyncio.run(_call_mcp(spans, sessions, x))

    @agenttrace.agent("boss")
    def boss() -> str:
        session = agenttrace.current_session()
        agent = session.allocate_agent_id()
        session.log_agent_created(agent, name="boss-agent")
        session.log_transcript_entry(agent, {"role": "user", "content": "find out"})
        found = [fan_out("tides"), shell("winds"), ask(21), fan_out("die")]
        session.log_transcript_entry(agent, {"role": "assistant", "content": "; ".join(found)})
        return "; ".join(found)

    with pool:
        print(boss(), flush=True)
    print(agenttrace.current_session().session_id, flush=True)
    print(os.getpid(), flush=True)
    agenttrace.shutdown()


async def _call_mcp(spans: str, sessions: str, x: int) -> str:
    """The server's ``research`` tool over stdio, the server started for the call."""
    import mcp
    from mcp.client import stdio

    env = {**os.environ, "PYTHONPATH": ROOT}
    parameters = stdio.StdioServerParameters(
        command=sys.executable,
        args=["-m", "tests.mcp_tool_server", spans, sessions, "stdio"],
        env=env,
        cwd=ROOT,
    )
    async with (
        stdio.stdio_client(parameters) as (read, write),
        mcp.ClientSession(read, write) as session,
    ):
        await session.initialize()
        result = await session.call_tool("research", {"x": x})
        assert not result.is_error, result
        return str(result.content[0].text)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
