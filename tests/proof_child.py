"""The other processes of tests/test_one_session_proof.py: a spawn pool's worker and a
subprocess, each with a tracer provider of its own exporting every span to the file the test
reads (``tests/travel_child.py``), recording into the sessions directory it is given (and
shipping to the store ``AGENTTRACE_SESSIONS_URL`` names, inherited from the root).

Imported, :func:`set_up` is the pool's initializer and ``writers_child.pool_task`` its task
(the researcher sub-agent; on the topic ``die`` its tool kills the process). Run as a script
(``python tests/proof_child.py SPANS SESSIONS TOPIC``) it is the subprocess a tool starts with
``agenttrace.subprocess_env()``.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # run as a script: the repository's root on the path, for tests.*
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import agenttrace
from tests import writers_child
from tests.travel_child import FileSpanExporter


def set_up(spans: str, sessions: str) -> None:
    """agenttrace on a provider of the process's own exporting to ``spans``, recording into
    ``sessions``."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(spans)))
    agenttrace.init(
        tracer_provider=provider,
        console="quiet",
        sessions_dir=sessions,
        billing_file=os.path.join(sessions, "accounting.jsonl"),
    )


if __name__ == "__main__":
    set_up(sys.argv[1], sys.argv[2])
    print(writers_child.researcher(sys.argv[3]))
    agenttrace.shutdown()
