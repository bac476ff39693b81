"""The Claude Agent SDK's messages, read from whatever form they come in, and checked.

A message reaches the exchange log (:mod:`agenttrace.formats.exchange_log.writer`) in one of three
forms: the SDK's own objects (``claude_agent_sdk.types``: ``SystemMessage``, ``AssistantMessage``,
...), a line of the CLI's ``stream-json`` output (the same JSON the SDK parses them from), or a
plain dict of that shape (the exchange log's examples). All three become the wire form first, then
one of the structs below, validated with msgspec: a message that is not what it claims to be is
refused with one :class:`~agenttrace.formats.session.files.SessionFileError` line saying what and
where (``not a Claude Agent SDK message: Expected `int`, got `str` - at `$.duration_ms```).

Message types the log does not use (stream events, rate-limit events, task progress, system
messages other than ``init``) are recognised and ignored, as the SDK itself skips types it does
not know. The SDK is not imported: its objects are known by their class names, so this module
works (and stays in the ``formats`` layer) whether or not the SDK is installed.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Annotated, Any, TypeVar

import msgspec

from agenttrace._internal.config import ReadLimits
from agenttrace.formats.session.files import SessionFileError
from agenttrace.formats.session.schema import depth_error

Count = Annotated[int, msgspec.Meta(ge=0)]
Amount = Count | Annotated[float, msgspec.Meta(ge=0)]
"""A non-negative number, an ``int`` kept as one (``6901``, not ``6901.0``, as the exchange log
writes it); finiteness is checked after."""


class _Wire(msgspec.Struct, kw_only=True, gc=False):
    """A wire message: unknown fields are ignored (the CLI adds fields in every release)."""


class Init(_Wire, kw_only=True):
    """``{"type": "system", "subtype": "init", ...}``: the session's metadata, sent by the CLI at
    the start of every exchange."""

    session_id: str
    model: str | None = None
    cwd: str | None = None
    tools: list[str] | None = None
    permission_mode: str | None = msgspec.field(default=None, name="permissionMode")
    claude_code_version: str | None = None


class AssistantBody(_Wire, kw_only=True):
    content: list[Any]
    model: str | None = None
    id: str | None = None


class Assistant(_Wire, kw_only=True):
    """``{"type": "assistant", "message": {"content": [...]}}``: one or more content blocks."""

    message: AssistantBody
    session_id: str | None = None
    parent_tool_use_id: str | None = None


class UserBody(_Wire, kw_only=True):
    content: str | list[Any]


class User(_Wire, kw_only=True):
    """``{"type": "user", "message": {"content": ...}}``: tool results, or a user's text."""

    message: UserBody
    session_id: str | None = None
    parent_tool_use_id: str | None = None


class Usage(_Wire, kw_only=True):
    input_tokens: Count | None = None
    output_tokens: Count | None = None
    cache_creation_input_tokens: Count | None = None
    cache_read_input_tokens: Count | None = None


class Result(_Wire, kw_only=True):
    """``{"type": "result", ...}``: the end of an exchange, with its statistics."""

    subtype: str
    is_error: bool
    duration_ms: Amount
    duration_api_ms: Amount | None = None
    num_turns: Count
    session_id: str
    total_cost_usd: Amount | None = None
    usage: Usage | None = None
    result: str | None = None
    errors: list[str] | None = None
    origin: dict[str, Any] | None = None


class Text(_Wire, kw_only=True):
    text: str


class ToolUse(_Wire, kw_only=True):
    id: str
    name: str
    input: Any = None


class ToolResult(_Wire, kw_only=True):
    tool_use_id: str
    content: str | list[Any] | None = None
    is_error: bool | None = None


Message = Init | Assistant | User | Result
Block = Text | ToolUse | ToolResult

_MESSAGE_TYPES: dict[str, type[Message]] = {
    "assistant": Assistant,
    "user": User,
    "result": Result,
}
_BLOCK_TYPES: dict[str, type[Block]] = {
    "text": Text,
    "tool_use": ToolUse,
    "tool_result": ToolResult,
}
_IGNORED_OBJECTS = frozenset(
    {"StreamEvent", "RateLimitEvent", "ConversationResetMessage", "HookEventMessage"}
)
"""SDK classes that are messages but say nothing the exchange log records."""


def read_message(message: Any, limits: ReadLimits | None = None) -> Message | None:
    """``message`` (an SDK object, a JSON line as ``str`` or ``bytes``, or a dict) as a checked
    struct; ``None`` for a message the exchange log does not use. Anything else raises
    :class:`SessionFileError` with one line saying why; nothing is changed by a refusal."""
    limits = limits or ReadLimits.from_env()
    if isinstance(message, str | bytes | bytearray):
        wire = _decode_line(message, limits.line_bytes)
        if wire is None:
            return None
    elif isinstance(message, dict):
        wire = message
    else:
        wire = _wire_of_object(message)
        if wire is None:
            return None
    problem = depth_error(wire, limits.nesting_depth)
    if problem is not None:
        raise _refused(f"{problem.what} at {problem.where}")
    return _checked(wire)


def blocks_of(content: list[Any]) -> list[Block]:
    """The content blocks the exchange log records, checked (thinking, images and server tool
    blocks are left out)."""
    blocks: list[Block] = []
    for index, block in enumerate(content):
        if not isinstance(block, dict):
            raise _refused(f"content block {index} is {type(block).__name__}, not an object")
        kind = _BLOCK_TYPES.get(block.get("type"))  # type: ignore[arg-type]
        if kind is not None:
            blocks.append(_convert(block, kind, f"$.message.content[{index}]"))
    return blocks


def _checked(wire: dict[str, Any]) -> Message | None:
    kind = wire.get("type")
    if not isinstance(kind, str):
        raise _refused('it has no "type" (a string: "system", "assistant", "user", "result", ...)')
    if kind == "system":
        return _convert(wire, Init, "$") if wire.get("subtype") == "init" else None
    struct = _MESSAGE_TYPES.get(kind)
    if struct is None:
        return None  # stream_event, rate_limit_event, ...: not part of the log
    checked = _convert(wire, struct, "$")
    if isinstance(checked, Result):
        _check_finite(checked)
    return checked


_T = TypeVar("_T")


def _convert(value: dict[str, Any], struct: type[_T], where: str) -> _T:
    try:
        return msgspec.convert(value, struct, strict=True)
    except msgspec.ValidationError as exc:
        what = str(exc).replace("`$", f"`{where}", 1) if where != "$" else str(exc)
        raise _refused(what) from None


def _check_finite(result: Result) -> None:
    for name in ("duration_ms", "duration_api_ms", "total_cost_usd"):
        value = getattr(result, name)
        if value is not None and not math.isfinite(value):
            raise _refused(f"Expected a finite number - at `$.{name}`")


def _decode_line(line: str | bytes | bytearray, max_bytes: int) -> dict[str, Any] | None:
    """A ``stream-json`` line as a dict (``None`` for a blank line)."""
    if len(line) > max_bytes:  # characters or bytes: either way past the cap is refused
        raise _refused(
            f"a line of {len(line)} bytes, more than {max_bytes} (AGENTTRACE_MAX_LINE_BYTES)"
        )
    if not line.strip():
        return None
    try:
        value = msgspec.json.decode(line)
    except msgspec.DecodeError as exc:
        try:  # a lone surrogate's escape, which msgspec refuses and JSON allows
            value = json.loads(line, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            raise _refused(f"not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise _refused(f"a JSON {type(value).__name__}, not an object")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _wire_of_object(message: object) -> dict[str, Any] | None:
    """The wire form of an SDK message object (``claude_agent_sdk.types``), known by class."""
    names = {cls.__name__ for cls in type(message).__mro__}
    if not dataclasses.is_dataclass(message) or isinstance(message, type):
        raise _refused(f"got {type(message).__name__}")
    if "SystemMessage" in names:
        data = getattr(message, "data", None)
        subtype = getattr(message, "subtype", None)
        if subtype != "init":
            return None
        return {**data, "type": "system", "subtype": "init"} if isinstance(data, dict) else {}
    if "AssistantMessage" in names:
        return {
            "type": "assistant",
            "session_id": getattr(message, "session_id", None),
            "parent_tool_use_id": getattr(message, "parent_tool_use_id", None),
            "message": {
                "content": _blocks_wire(getattr(message, "content", None)),
                "model": getattr(message, "model", None),
                "id": getattr(message, "message_id", None),
            },
        }
    if "UserMessage" in names:
        content = getattr(message, "content", None)
        return {
            "type": "user",
            "parent_tool_use_id": getattr(message, "parent_tool_use_id", None),
            "message": {"content": content if isinstance(content, str) else _blocks_wire(content)},
        }
    if "ResultMessage" in names:
        fields = (
            "subtype",
            "is_error",
            "duration_ms",
            "duration_api_ms",
            "num_turns",
            "session_id",
            "total_cost_usd",
            "usage",
            "result",
            "errors",
            "origin",
        )
        return {"type": "result", **{name: getattr(message, name, None) for name in fields}}
    if names & _IGNORED_OBJECTS:
        return None
    raise _refused(f"got {type(message).__name__}")


def _blocks_wire(blocks: Any) -> Any:
    """SDK content blocks as wire dicts (``TextBlock`` as ``{"type": "text", ...}``)."""
    if not isinstance(blocks, list):
        return blocks  # refused by the struct, with the path
    wire: list[Any] = []
    for block in blocks:
        names = {cls.__name__ for cls in type(block).__mro__}
        if "TextBlock" in names:
            wire.append({"type": "text", "text": block.text})
        elif "ToolUseBlock" in names:
            wire.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
            )
        elif "ToolResultBlock" in names:
            wire.append(
                {
                    "type": "tool_result",
                    "tool_use_id": block.tool_use_id,
                    "content": block.content,
                    "is_error": block.is_error,
                }
            )
        elif dataclasses.is_dataclass(block):
            wire.append({"type": type(block).__name__})  # thinking, server tools: not logged
        else:
            wire.append(block)
    return wire


def _refused(what: str) -> SessionFileError:
    return SessionFileError(f"not a Claude Agent SDK message: {what}")
