"""agenttrace: OpenTelemetry tracing for LLM agents.

Decorate agent code (``agent``, ``turn``, ``tool``, ``llm``), call ``init()``, and every agent
run, turn, LLM attempt, tool call and sub-agent becomes a nested span carrying the opTree fields;
litellm calls are traced without any change to them. Under ``init()`` alone the litellm calls of
each agent make one run (``agenttrace.tracing.implicit``); ``with agenttrace.run(name):`` draws a
run's boundary yourself.
"""

from __future__ import annotations

from agenttrace._version import __version__
from agenttrace.formats.exchange_log.writer import ExchangeLogger
from agenttrace.formats.session.files import SessionFileError
from agenttrace.formats.session.lease import LeaseError, LeaseHeld
from agenttrace.model.events import LoggedString
from agenttrace.model.paths import format_label, parse_label
from agenttrace.model.reentry import (
    AbandonedToolCall,
    InDoubtToolCall,
    UnanswerableToolCall,
    Verdict,
)
from agenttrace.model.replay import ReplayDivergence, ReplayReport
from agenttrace.sdk.process_pool import ProcessPoolExecutor
from agenttrace.sdk.setup import (
    Tracing,
    force_flush,
    init,
    instrument_claude_agent_sdk,
    instrument_smolagents,
    on_optree,
    shutdown,
)
from agenttrace.session.forking import forking
from agenttrace.session.replay import Replay, replaying
from agenttrace.session.restore import load_session, resume
from agenttrace.session.state import AgentRecord, Session, current_session, new_session, use_session
from agenttrace.tracing.decorators import Handle, agent, llm, run, tool, turn
from agenttrace.tracing.deterministic import deterministic
from agenttrace.tracing.env_carrier import subprocess_env
from agenttrace.tracing.http_carrier import http_headers
from agenttrace.tracing.instrument import (
    instrument_agent,
    instrument_tool,
    uninstrument_agent,
    uninstrument_tool,
)
from agenttrace.tracing.journal.steps import idempotency_key
from agenttrace.tracing.logs import log, thinking
from agenttrace.tracing.propagation import ContextThreadPoolExecutor, bind_context
from agenttrace.tracing.transcripts import agent_class, hears, piece_of_text
from agenttrace.tracing.travel import extract, inject
from agenttrace.views.diff import diff_runs
from agenttrace.views.viewer import SessionViewer

__all__ = [
    "AbandonedToolCall",
    "AgentRecord",
    "ContextThreadPoolExecutor",
    "ExchangeLogger",
    "Handle",
    "InDoubtToolCall",
    "LeaseError",
    "LeaseHeld",
    "LoggedString",
    "ProcessPoolExecutor",
    "Replay",
    "ReplayDivergence",
    "ReplayReport",
    "Session",
    "SessionFileError",
    "SessionViewer",
    "Tracing",
    "UnanswerableToolCall",
    "Verdict",
    "__version__",
    "agent",
    "agent_class",
    "bind_context",
    "current_session",
    "deterministic",
    "diff_runs",
    "extract",
    "force_flush",
    "forking",
    "format_label",
    "hears",
    "http_headers",
    "idempotency_key",
    "init",
    "inject",
    "instrument_agent",
    "instrument_claude_agent_sdk",
    "instrument_smolagents",
    "instrument_tool",
    "llm",
    "load_session",
    "log",
    "new_session",
    "on_optree",
    "parse_label",
    "piece_of_text",
    "replaying",
    "resume",
    "run",
    "shutdown",
    "subprocess_env",
    "thinking",
    "tool",
    "turn",
    "uninstrument_agent",
    "uninstrument_tool",
    "use_session",
]
