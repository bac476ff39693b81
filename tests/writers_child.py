"""The other side of tests/test_session_writers.py: a real process that records into the
sessions directory it is given and runs a sub-agent that logs a transcript.

Run as a script (``python tests/writers_child.py SESSIONS TOPIC``) it is a subprocess started
with ``agenttrace.subprocess_env()``; imported, :func:`set_up` is a process pool's initializer
and :func:`pool_task` the task submitted to it.
"""

from __future__ import annotations

import os
import sys

from opentelemetry.sdk.trace import TracerProvider

import agenttrace


def set_up(sessions: str) -> None:
    """agenttrace on a provider of the process's own, recording into ``sessions``."""
    agenttrace.init(
        tracer_provider=TracerProvider(),
        console="quiet",
        sessions_dir=sessions,
        billing_file=os.path.join(sessions, "accounting.jsonl"),
    )


@agenttrace.tool
def look_up(topic: str) -> str:
    """A tool the researcher calls, so its run has an op of its own; on the topic ``die``, the
    process is killed in it (no handler, no flush: what a kill leaves)."""
    if topic == "die":
        os._exit(9)
    return f"notes on {topic}"


@agenttrace.agent("researcher")
def researcher(topic: str) -> str:
    """The sub-agent that runs in the other process: an agent of the registry with a
    transcript (what it was asked, what it found)."""
    session = agenttrace.current_session()
    agent = session.allocate_agent_id()
    session.log_agent_created(agent, name=f"researcher-{topic}")
    session.log_transcript_entry(agent, {"role": "user", "content": f"research {topic}"})
    found = look_up(topic)
    session.log_transcript_entry(agent, {"role": "assistant", "content": found})
    return found


def pool_task(topic: str) -> tuple[str, int]:
    """What a pool runs: the researcher, and the worker's pid."""
    return researcher(topic), os.getpid()


if __name__ == "__main__":
    set_up(sys.argv[1])
    print(researcher(sys.argv[2]))
    agenttrace.shutdown()
