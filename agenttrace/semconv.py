"""Every span, attribute and event name agenttrace puts on the wire.

OpenTelemetry GenAI semantic conventions (``gen_ai.*``) are used where they have a name; everything
else lives under ``agenttrace.*``. No other module spells one of these strings.
"""

from __future__ import annotations

from typing import Final

# --- span names (GenAI conventions: "{operation} {target}") -------------------------------------
SPAN_SESSION: Final = "invoke_agent {name}"
SPAN_TURN: Final = "turn {index}"
SPAN_LLM: Final = "chat {model}"
SPAN_EMBEDDING: Final = "embeddings {model}"
SPAN_TOOL: Final = "execute_tool {name}"

# --- gen_ai.* ----------------------------------------------------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
"""``invoke_agent`` (sessions), ``chat``/``embeddings`` (LLM spans), ``execute_tool`` (tools)."""
OP_INVOKE_AGENT: Final = "invoke_agent"
OP_CHAT: Final = "chat"
OP_EMBEDDINGS: Final = "embeddings"
OP_EXECUTE_TOOL: Final = "execute_tool"

GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_AGENT_ID: Final = "gen_ai.agent.id"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_REQUEST_STREAM: Final = "gen_ai.request.stream"
GEN_AI_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
"""Seconds from the request to the first streamed chunk (GenAI conventions use seconds)."""
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
"""All input tokens, cache reads and cache writes included (OpenAI-style totals)."""
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
"""JSON: the messages that are new since this agent's previous LLM call (capped)."""
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"
"""On ``gen_ai.client.token.usage``: ``input`` or ``output``."""
ERROR_TYPE: Final = "error.type"
"""LLM failures: one of ``ERROR_CATEGORIES``; tool failures: the exception's class name."""

# --- GenAI events (log records) -------------------------------------------------------------
EVENT_INFERENCE_DETAILS: Final = "gen_ai.client.inference.operation.details"
"""An LLM call's input and output messages as a log event (content capture ``EVENT_ONLY`` or
``SPAN_AND_EVENT``), parented to its span."""

# --- GenAI client metrics ------------------------------------------------------------------
METRIC_TOKEN_USAGE: Final = "gen_ai.client.token.usage"
METRIC_OPERATION_DURATION: Final = "gen_ai.client.operation.duration"

# --- OpenInference (read by Arize Phoenix and other OpenInference viewers) ------------------
OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
"""``AGENT`` (agent runs), ``CHAIN`` (turns), ``LLM`` (attempts), ``TOOL`` (tool calls)."""
OI_AGENT: Final = "AGENT"
OI_CHAIN: Final = "CHAIN"
OI_LLM: Final = "LLM"
OI_TOOL: Final = "TOOL"
OI_EMBEDDING: Final = "EMBEDDING"
LLM_MODEL_NAME: Final = "llm.model_name"
LLM_PROVIDER: Final = "llm.provider"
LLM_TOKEN_COUNT_PROMPT: Final = "llm.token_count.prompt"
LLM_TOKEN_COUNT_COMPLETION: Final = "llm.token_count.completion"
LLM_TOKEN_COUNT_TOTAL: Final = "llm.token_count.total"
TOOL_NAME: Final = "tool.name"

# --- agenttrace.* on every span of ours ---------------------------------------------------------
KIND: Final = "agenttrace.kind"
"""``session``, ``turn``, ``llm`` or ``tool``; a tool that runs a sub-agent turns ``session``."""
KIND_SESSION: Final = "session"
KIND_TURN: Final = "turn"
KIND_LLM: Final = "llm"
KIND_TOOL: Final = "tool"
PATH: Final = "agenttrace.path"
"""The opTree path label, bijective with the node's position (see ``agenttrace.model.paths``)."""
TXN_ID: Final = "agenttrace.txn.id"
TXN_ORIGIN: Final = "agenttrace.txn.origin"
TXN_PARENT: Final = "agenttrace.txn.parent"
AGENT_ID: Final = "agenttrace.agent.id"
STATUS: Final = "agenttrace.status"
STATUS_OK: Final = "ok"
STATUS_FAILED: Final = "failed"
LATENCY_MS: Final = "agenttrace.latency_ms"

# --- session spans ------------------------------------------------------------------------------
CALL_PATH: Final = "agenttrace.call_path"
SESSION_ID: Final = "agenttrace.session.id"
AGENT_MODEL: Final = "agenttrace.agent.model"
INGRESS_SOURCE: Final = "agenttrace.ingress.source"
"""``cli``, ``api``, ``web``, ``slack`` or ``sub-agent`` (ingress: docs/session-file.md)."""
INGRESS_PREFIX: Final = "agenttrace.ingress."
"""Ingress details are flattened below this prefix, e.g. ``agenttrace.ingress.cli.pid``."""
RESUMED_FROM: Final = "agenttrace.resumed_from"
INGRESS_JOINED: Final = "joined"
"""The ingress source of a root run started from a carrier (``agenttrace.tracing.travel``)."""
REENTERS: Final = "agenttrace.reenters"
"""On a root run that re-enters an interrupted one: that run's origin txn id."""
REPLAYED: Final = "agenttrace.replayed"
"""True on a step a re-entered run was answered for from the journal: it did not run again."""
FORK_SESSION: Final = "agenttrace.fork.session"
"""On a fork's root run (``agenttrace.forking``): the source session's id."""
FORK_RUN: Final = "agenttrace.fork.run"
"""On a fork's root run: the source run's origin txn id."""
FORK_LABEL: Final = "agenttrace.fork.label"
"""On a fork's root run: the label it branches at (it and every later step ran live)."""
FORK_MODEL: Final = "agenttrace.fork.model"
"""On a fork's root run: the model its live LLM calls were sent to, when it overrides it."""
IMPLICIT: Final = "agenttrace.implicit"
"""True on a span agenttrace opened on its own: an auto turn, a session for a bare LLM call."""
AGENT_ROLE: Final = "agenttrace.agent.role"
"""What the agent is for (``@agent(role=...)``): ``architect``, ``developer`` or ``reviewer``,
STD-008's agent types."""
TASK_ID: Final = "agenttrace.task.id"
"""A sub-agent run's task id and priority, as an imported STD-008 document gave them."""
TASK_PRIORITY: Final = "agenttrace.task.priority"
IMPORT_FORMAT: Final = "agenttrace.import.format"
"""On the resource of a session read from another format's document: ``std008``, ``atif``."""
TASK_TITLE: Final = "agenttrace.task.title"
"""On a run's root: the title of the session's task, as an imported STD-008 document gave it
(``task_title``)."""
IMPORT_SUMMARY: Final = "agenttrace.import.summary"
"""On a run's root: the summary an imported STD-008 document gave, as JSON text (its figures are
the document's own, kept for its export)."""
IMPORT_COLLABORATION: Final = "agenttrace.import.collaboration"
"""On a run's root: the ``collaboration`` an imported STD-008 document gave (its pattern, its
agents as it identified them), as JSON text."""
IMPORT_AGENT: Final = "agenttrace.import.agent"
"""On a run of an imported STD-008 document: its agent as the document identified it (the
orchestrator, a sub-session's ``agent``), as JSON text."""
IMPORT_UNREAD: Final = "agenttrace.import.unread"
"""On the root, a call or a sub-agent run of an imported STD-008 document: the keys of the
document, call or sub-session that agenttrace maps nowhere else (a status in the document's own
words, a call's ``input`` and ``output`` as they were, keys STD-008 does not name), as a JSON
object's text."""
IMPORT_SUBAGENT_INFO: Final = "agenttrace.import.subagent_info"
"""On a call of an imported STD-008 document: its ``subagent_info`` but the links to
sub-sessions (which the export makes from the runs), as a JSON object's text."""
IMPORT_INDEX: Final = "agenttrace.import.index"
"""On a sub-agent run of an imported STD-008 document: where its sub-session was in the
document's ``sub_sessions`` (0-based)."""
IMPORT_ABSENT: Final = "agenttrace.import.absent"
"""On the root, a call or a sub-agent run of an imported STD-008 document: the keys the export
would write that the document, call or sub-session did not have (a ``duration_ms``: the latency
is then end minus start), so the export leaves them out too."""

# --- turn spans ---------------------------------------------------------------------------------
TURN_INDEX: Final = "agenttrace.turn.index"

# --- llm spans ----------------------------------------------------------------------------------
ATTEMPT: Final = "agenttrace.attempt"
COST_USD: Final = "agenttrace.cost.usd"
COST_UPSTREAM_USD: Final = "agenttrace.cost.upstream_usd"
"""What the provider that served the call charged the gateway, where the response says it
(OpenRouter's ``usage.cost_details.upstream_inference_cost``): the ledger's
``upstreamInferenceCostUsd``."""
MOCKED: Final = "agenttrace.mocked"
"""True on an LLM attempt no model answered: litellm made the reply up from the call's
``mock_response`` (or ``mock_tool_calls``), sending nothing. Its cost is 0, whatever the model's
price; the ledger's ``mocked``."""
RESPONSE_PROVIDER: Final = "agenttrace.response.provider"
"""The provider that actually served the call, where the response says it: the one OpenRouter
names in its response's ``provider`` field (as it spells it: ``Anthropic``), or the provider of
the litellm Router deployment that answered. The ledger's ``actualProvider``."""
INPUT_MESSAGES_SKIPPED: Final = "agenttrace.input.messages_skipped"
"""How many leading history messages were left off ``gen_ai.input.messages`` (already recorded):
the request up to and including the agent's previous reply."""
INPUT_AFTER: Final = "agenttrace.input.after"
"""The message id of the last message left off ``gen_ai.input.messages`` (the agent's previous
reply, a ``transcript_entry`` of the event stream); absent when none was."""
INPUT_REWRITTEN: Final = "agenttrace.input.rewritten"
"""True when the request did not extend the agent's logged transcript (its history was
rewritten: a window, a compaction): a ``transcript_reset`` follows in the event stream, which
says what the request was. ``gen_ai.input.messages`` holds what follows the agent's previous
reply if the request still ends with it (``agenttrace.input.after`` names it), else the whole
request."""
USAGE_ESTIMATED: Final = "agenttrace.usage.estimated"
"""True when the provider reported no tokens (a stream without usage) and litellm counted them."""
STREAM_ABANDONED: Final = "agenttrace.stream.abandoned"
"""True when the caller closed or dropped a stream before its end."""
REQUEST_MESSAGES: Final = "agenttrace.request.messages"
"""Number of messages in the request (the whole history, not the delta)."""
REQUEST_REPLY_MESSAGE: Final = "agenttrace.request.reply_message_id"
"""Saved state only, never on a span: the message id of the ``transcript_entry`` an LLM
attempt's response became; its request is the agent's transcript just before it (the op node's
``replyMessageId``, read by ``agenttrace.formats.session.requests``)."""
REQUEST_INSTRUCTIONS: Final = "agenttrace.request.instructions"
"""Saved state only, never on a span: the system messages a request sent ahead of its agent's
transcript, as recorded (redacted, capped JSON; the op node's ``instructions``)."""
REQUEST_PROMPTS: Final = "agenttrace.request.prompts"
"""Saved state only, never on a span: the system and user messages of the whole request of a
turn's first LLM attempt, as recorded (redacted, capped JSON; the turn node's ``prompts``)."""
REQUEST_FINAL_TURN: Final = "agenttrace.request.final_turn"
"""True when an LLM request offers the model no tool to call (no tools, or ``tool_choice``
``none``): the model can only answer, so the request is its agent's final turn; False when it
offers tools (the request node's ``isFinalTurn``, docs/events.md)."""
RESPONSE_FINAL_ANSWER: Final = "agenttrace.response.final_answer"
"""True when an LLM response asks for no tool call: it is the agent's answer, which ends its
loop; False when it asks for tool calls (the response node's ``isFinalAnswer``)."""

# --- tool spans ---------------------------------------------------------------------------------
TOOL_CHARS_IN: Final = "agenttrace.tool.chars_in"
TOOL_CHARS_OUT: Final = "agenttrace.tool.chars_out"
TOOL_PROVIDER: Final = "agenttrace.tool.provider"
"""Who provides the tool (``@tool(provider=...)``; an MCP tool's server): the ledger's
``providerLabel``, which is the tool's name when no provider is known."""
TOOL_MCP_SERVER: Final = "agenttrace.tool.mcp_server"
"""The MCP server a tool came from (the Claude Agent SDK's ``mcp__<server>__<tool>`` names): the
ledger's ``mcpServer``."""
MCP_METHOD_NAME: Final = "mcp.method.name"
"""On a tool op that called an MCP server's tool (the GenAI conventions for MCP): ``tools/call``."""
NETWORK_TRANSPORT: Final = "network.transport"
"""On a tool op that called an MCP server's tool: ``pipe`` (stdio) or ``tcp`` (HTTP)."""
TOOL_CATEGORY: Final = "agenttrace.tool.category"
"""What kind of tool (``@tool(category=...)``): STD-008's ``perception``, ``action``,
``interaction``, ..."""
SUBAGENT_TOOL_USES: Final = "agenttrace.subagent.tool_uses"
"""On a tool that ran sub-agents, imported from a document: the tool uses its
``subagent_info`` counted (more than the calls it lists, at times)."""
SUBAGENT_TOKENS_USED: Final = "agenttrace.subagent.tokens_used"
"""Likewise, the tokens its ``subagent_info`` counted."""

# --- span events --------------------------------------------------------------------------------
EVENT_LOG: Final = "agenttrace.log"
EVENT_REASONING: Final = "agenttrace.reasoning"
EVENT_IMPORTED_MESSAGE: Final = "agenttrace.import.message"
"""A span event on the run an imported STD-008 message is about (its sub-session, else the
root), at the message's time: the message as the document gave it."""
IMPORT_MESSAGE: Final = "agenttrace.import.message.envelope"
"""The message but its payload, as JSON text."""
IMPORT_MESSAGE_PAYLOAD: Final = "agenttrace.import.message.payload"
"""The message's payload, as JSON text."""
IMPORT_MESSAGE_INDEX: Final = "agenttrace.import.message.index"
"""Where the message was in the document's ``messages`` (0-based)."""
LOG_LEVEL: Final = "agenttrace.log.level"
LOG_MESSAGE: Final = "agenttrace.log.message"
LOG_DETAILS: Final = "agenttrace.log.details"
LOG_SOURCE: Final = "agenttrace.log.source"
"""Who made a log that ``agenttrace.log`` did not: ``agenttrace`` (its own warning about the
node); the opTree keeps it as the entry's ``source``."""
REASONING_TEXT: Final = "agenttrace.reasoning.text"

EVENT_CANONICAL: Final = "agenttrace.event"
"""A canonical event (agent_created, transcript_entry, transcript_reset, piece_of_text;
docs/events.md) on a span."""
EVENT_MESSAGE_ID: Final = "agenttrace.event.message_id"
EVENT_TYPE: Final = "agenttrace.event.type"
EVENT_AGENT_ID: Final = "agenttrace.event.agent_id"
EVENT_ROLE: Final = "agenttrace.event.role"
EVENT_NAME: Final = "agenttrace.event.name"
EVENT_LANGUAGE_MODEL: Final = "agenttrace.event.language_model"
EVENT_TOOL_CALL_ID: Final = "agenttrace.event.tool_call_id"
EVENT_SUBSTANCE: Final = "agenttrace.event.substance"
EVENT_CAUSE: Final = "agenttrace.event.cause"
EVENT_KEPT: Final = "agenttrace.event.kept"
"""A ``transcript_reset``'s ``kept``: how many leading entries of the transcript stay."""
EVENT_REUSED: Final = "agenttrace.event.reused"
"""A ``transcript_reset``'s ``reused`` as JSON text: the runs of earlier entries it refers to
(message ids) and the counts of new entries between them (docs/events.md)."""
EVENT_CONTENT: Final = "agenttrace.event.content"
"""The event's content, capped and redacted (the stream keeps it whole)."""
EVENT_CONTENT_CHARS: Final = "agenttrace.event.content_chars"
EVENT_TOOL_CALLS: Final = "agenttrace.event.tool_calls"
EVENT_FIELD_ATTRIBUTES: Final = (
    ("message_id", EVENT_MESSAGE_ID),
    ("event_type", EVENT_TYPE),
    ("agent_id", EVENT_AGENT_ID),
    ("role", EVENT_ROLE),
    ("name", EVENT_NAME),
    ("language_model", EVENT_LANGUAGE_MODEL),
    ("tool_call_id", EVENT_TOOL_CALL_ID),
    ("substance", EVENT_SUBSTANCE),
    ("cause", EVENT_CAUSE),
    ("kept", EVENT_KEPT),
    ("path", PATH),
)
"""Canonical-event field -> its attribute on the span event (content and tool calls aside)."""

LEVELS: Final = ("VRB", "WRN", "ERR", "TRC", "THK", "FIN")
"""Log levels: verbose, warning, error, trace, thinking, final (docs/session-file.md)."""

ERROR_CATEGORIES: Final = ("auth", "quota", "network", "model", "timeout", "invalid")

# --- baggage: agenttrace's identity carried to another process (agenttrace.tracing.travel) ------
BAGGAGE_SESSION_ID: Final = "agenttrace.session.id"
BAGGAGE_TXN_ID: Final = "agenttrace.txn.id"
"""The txn id of the run the handing-over scope belongs to."""
BAGGAGE_TXN_ORIGIN: Final = "agenttrace.txn.origin"
BAGGAGE_PATH: Final = "agenttrace.path"
"""The handing-over scope's path label."""
BAGGAGE_WRITER_ID: Final = "agenttrace.writer.id"
"""The process (writer) that handed the work over."""
BAGGAGE_CLOCK: Final = "agenttrace.clock"
"""The handing-over process's clock id (``agenttrace.tracing.travel.clock_id``): readers order a
joined writer's lines against its parent's as one clock's, or fit them into the op's window."""
BAGGAGE_STORE: Final = "agenttrace.store"
"""The session store the handing-over process ships its sessions to, as
``agenttrace.formats.stores.store_identity`` names it (no credentials, no query): a process on
another host that ships to the same store joins the session as a writer."""
