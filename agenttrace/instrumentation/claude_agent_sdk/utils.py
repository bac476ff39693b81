"""Shared by the Claude Agent SDK instrumentation: its state, attribute names, and readers of
the SDK's content blocks that need no import of the SDK."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any, Protocol

WHERE = "claude_agent_sdk instrumentation"

_logger = logging.getLogger("agenttrace")
_told: set[str] = set()


def unplaced(reason: str) -> None:
    """A tool call the step journal could not take before the CLI ran it (``reason``): said
    once per reason, as a warning (the call runs; a kill during it leaves no step to doubt)."""
    if reason not in _told:
        _told.add(reason)
        _logger.warning(
            "agenttrace: a Claude Agent SDK tool call was not journaled before it ran: %s", reason
        )


PRE_TOOL_USE = "PreToolUse"
"""The hook event agenttrace's hook answers (:mod:`.hooks`)."""


def deny(reason: str) -> dict[str, Any]:
    """A ``PreToolUse`` hook's denial: the CLI does not run the call, and the model gets
    ``reason`` as the call's (error) result."""
    return {
        "hookSpecificOutput": {
            "hookEventName": PRE_TOOL_USE,
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


DEFAULT_AGENT_NAME = "claude-code"
"""The name of the main agent's runs when ``instrument(agent_name=...)`` gives none."""

PROVIDER = "anthropic"

# --- attributes of an exchange's run span (the SDK's own figures) -------------------------------
SESSION_ID = "claude_agent_sdk.session_id"
"""The SDK's session id (also ``gen_ai.conversation.id``): what ``resume=`` takes."""
CWD = "claude_agent_sdk.cwd"
PERMISSION_MODE = "claude_agent_sdk.permission_mode"
CLI_VERSION = "claude_agent_sdk.claude_code_version"
RESULT_SUBTYPE = "claude_agent_sdk.result.subtype"
NUM_TURNS = "claude_agent_sdk.num_turns"
DURATION_MS = "claude_agent_sdk.duration_ms"
DURATION_API_MS = "claude_agent_sdk.duration_api_ms"
"""This exchange's API time: the difference of the SDK's running totals."""
TOTAL_COST_USD = "claude_agent_sdk.total_cost_usd"
"""The session's running total as the SDK reported it (``agenttrace.cost.usd``: the share)."""
TOTAL_DURATION_API_MS = "claude_agent_sdk.total_duration_api_ms"
STOP_REASON = "claude_agent_sdk.stop_reason"
TERMINAL_REASON = "claude_agent_sdk.terminal_reason"
API_ERROR_STATUS = "claude_agent_sdk.api_error_status"
USER_INPUT = "claude_agent_sdk.user_input"
"""What the user sent to start the exchange (capped, redacted; with content capture only)."""
TASK_ID = "claude_agent_sdk.task_id"
"""A sub-agent's task id (its transcript is ``subagents/agent-<task id>.jsonl``)."""
BACKGROUND = "claude_agent_sdk.background"
"""True on a sub-agent that ran in the background (the ``Agent`` tool returned at once)."""
OUTPUT_FINAL = "claude_agent_sdk.output_tokens_final"
"""False on a chat span whose final output count could not be had
(docs/how-to/claude-agent-sdk.md)."""

MCP_PREFIX = "mcp__"
"""How the name of a tool from an MCP server starts: ``mcp__<server>__<tool>``."""


def mcp_server_of(tool_name: str) -> str | None:
    """The MCP server a tool of this name came from (``mcp__github__list_issues``: ``github``;
    a server's name has no double underscore), ``None`` for the CLI's own tools."""
    if not tool_name.startswith(MCP_PREFIX):
        return None
    server, separator, tool = tool_name[len(MCP_PREFIX) :].partition("__")
    return server if separator and server and tool else None


SUBAGENT_TOOLS = frozenset({"Agent", "Task"})
"""The tool that runs a sub-agent: ``Agent`` (the init message still lists it as ``Task``)."""
TERMINAL_TASK = frozenset({"completed", "failed", "stopped", "killed"})


class MessageLog(Protocol):
    """What ``exchange_log`` feeds: every SDK message, and what the user sent."""

    def log(self, message: Any) -> None:
        """Take one SDK message."""
        ...

    def log_user_input(self, text: str) -> None:
        """Take the text the user sent (before the messages it causes)."""
        ...

    def close(self) -> None:
        """The SDK session ended."""
        ...


class Settings:
    """How the instrumentation was asked to behave (``instrument(...)`` keywords)."""

    __slots__ = ("agent_name", "exchange_log")

    def __init__(self) -> None:
        self.agent_name = DEFAULT_AGENT_NAME
        self.exchange_log: Callable[[], MessageLog] | None = None


class State:
    """What the modules of the instrumentation share: one instance, :data:`state`."""

    __slots__ = ("enabled", "patches", "settings")

    def __init__(self) -> None:
        self.enabled = False
        self.patches: list[tuple[Any, str, Any]] = []  # (owner, attribute, our FunctionWrapper)
        self.settings = Settings()


state = State()

resuming: ContextVar[object | None] = ContextVar("agenttrace_claude_resuming", default=None)
"""The ``ClaudeAgent`` (:mod:`.resume`) whose ``response()`` is running, if any: the sessions it
opens continue its agent."""


def resuming_owner() -> object | None:
    """The rebuilt agent whose exchange is running, if any (its agent goes on)."""
    return resuming.get()


def field(obj: Any, name: str) -> Any:
    """``obj.name`` or ``obj[name]`` (``None`` when absent): blocks are dataclasses or dicts."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def block_type(block: Any) -> str | None:
    """``text``, ``thinking``, ``tool_use``, ``tool_result`` (or another type) of a block."""
    if isinstance(block, Mapping):
        kind = block.get("type")
        return kind if isinstance(kind, str) else None
    name = type(block).__name__
    return {
        "TextBlock": "text",
        "ThinkingBlock": "thinking",
        "ToolUseBlock": "tool_use",
        "ToolResultBlock": "tool_result",
        "ServerToolUseBlock": "server_tool_use",
        "ServerToolResultBlock": "server_tool_result",
    }.get(name)


def block_dict(block: Any) -> dict[str, Any] | None:
    """A content block as the API's JSON shape (for recorded output messages)."""
    kind = block_type(block)
    if kind == "text":
        return {"type": "text", "text": field(block, "text")}
    if kind == "thinking":
        return {"type": "thinking", "thinking": field(block, "thinking")}
    if kind == "tool_use":
        return {
            "type": "tool_use",
            "id": field(block, "id"),
            "name": field(block, "name"),
            "input": field(block, "input"),
        }
    return None


def result_text(content: Any) -> str:
    """A tool result's content as text: a string as it is, text parts joined, other parts
    (images) named by their type."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping):
                text = part.get("text")
                parts.append(text if isinstance(text, str) else f"[{part.get('type')}]")
            else:
                parts.append(str(part))
        return "\n".join(parts)
    return json.dumps(content, default=str)


def user_text(message: Any) -> str | None:
    """The text of a user message dict the program sends (``{"type": "user", "message": {...}}``),
    or of a plain string prompt."""
    if isinstance(message, str):
        return message
    if not isinstance(message, Mapping):
        return None
    inner = message.get("message")
    content = inner.get("content") if isinstance(inner, Mapping) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            str(part["text"])
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        ]
        return "\n".join(texts) if texts else None
    return None


_ERROR_CATEGORIES = {
    "authentication_failed": "auth",
    "billing_error": "quota",
    "rate_limit": "quota",
    "invalid_request": "invalid",
    "server_error": "model",
    "unknown": "model",
}


def error_category(error: Any) -> str:
    """agenttrace's failure category for an ``AssistantMessage.error`` value."""
    return _ERROR_CATEGORIES.get(error, "model") if isinstance(error, str) else "model"


def number(value: Any) -> float | None:
    """A finite count or amount, else ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    result = float(value)
    return result if result == result and abs(result) != float("inf") else None
