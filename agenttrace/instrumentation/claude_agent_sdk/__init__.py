"""The Claude Agent SDK (``claude-agent-sdk``), patched with wrapt: each exchange an agent run.

With no change to the program's loop and nothing added to what it receives:

- each exchange (user input → the SDK's turns → its ``ResultMessage``) is an ``invoke_agent``
  run span named after the agent (``instrument(agent_name=...)``, default ``claude-code``),
  ``gen_ai.conversation.id`` the SDK's session id, with the exchange's own share of the
  session's cost and API time, its duration and turns;
- each assistant message id is one ``chat {model}`` LLM attempt: its blocks merged, its usage
  with cache reads and writes and the final output count; a request the CLI retried is a
  failed attempt before it;
- each ``tool_use`` → ``tool_result`` is an ``execute_tool {name}`` span with the call id, input,
  result and ``is_error``, and a step of the journal by its effect class (:mod:`.effects`),
  its intent written before the CLI runs the tool (:mod:`.hooks`);
  the ``Agent`` (formerly ``Task``) tool's sub-agent is a session nested under its span, to any
  depth; thinking blocks are recorded as thinking;
- the agents' transcripts go to the canonical event stream and session file as for any agent,
  and ``agenttrace resume`` hands the SDK session id back (:mod:`.resume`).

The modules, each importing only those before it: :mod:`.utils`, :mod:`.effects` (a tool
call's effect class), :mod:`.claims` (calls the hook journaled before the program received
them), :mod:`.transcript` (the CLI's own transcript: final usage, a sub-agent's
text), :mod:`.messages` (one message id's
span), :mod:`.agents` (an agent's run and its tool calls), :mod:`.tracker` (one SDK session,
message by message), :mod:`.hooks` (the ``PreToolUse`` hook: a call's intent on disk before
the CLI runs it), :mod:`.patch` (the wrappers), :mod:`.instrumentor` (patching and undoing,
``configure``), :mod:`.resume` and this package, which only exports.
"""

from __future__ import annotations

from agenttrace.instrumentation.claude_agent_sdk.instrumentor import (
    ClaudeAgentSDKInstrumentor,
    configure,
    instrument_when_imported,
)
from agenttrace.instrumentation.claude_agent_sdk.resume import rebuild

__all__ = [
    "ClaudeAgentSDKInstrumentor",
    "configure",
    "instrument_when_imported",
    "rebuild",
]
