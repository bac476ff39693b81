"""Message content as a person reads it: the one rendering every view of a transcript uses.

A message's ``content`` is whatever the agent sent: a string, or a list of parts in the
OpenAI or Anthropic shape (``[{"type": "text", "text": ...}, {"type": "image_url", ...}]``),
sometimes a dict. The event stream keeps it verbatim (it is the agent's state); ``dialog``,
``perspective`` and the HTML page show it through :func:`content_text`, never as a Python repr.
The HTML page renders content in its script (``page/page.js``, ``contentText``) by the same
rules, so the page and the command line show the same text.

Rules: a string as it is; ``None`` as nothing; a list part by part, joined by newlines (parts
are blocks); text parts as their text; images, audio, video and files as a placeholder
(``[image]``, ``[file report.pdf]``), never their bytes; a tool call as ``[tool call NAME]``; a
tool result as ``[tool result]`` and its content; reasoning as ``[thinking]``; any other typed
part as ``[TYPE]``; anything else (a dict without a type, a number) as compact JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_TEXT_TYPES = frozenset({"text", "input_text", "output_text"})
_PLACEHOLDERS = {
    "image": "image",
    "image_url": "image",
    "input_image": "image",
    "audio": "audio",
    "input_audio": "audio",
    "video": "video",
    "video_url": "video",
    "file": "file",
    "input_file": "file",
    "document": "file",
}
_TOOL_CALLS = frozenset({"tool_use", "server_tool_use", "function_call", "tool_call"})
_TOOL_RESULTS = frozenset({"tool_result", "function_call_output", "tool_call_output"})
_THINKING = frozenset({"thinking", "redacted_thinking", "reasoning"})
_MAX_TYPE = 40
"""A part's type is shown as ``[TYPE]`` only up to this many characters (it comes from a file)."""


def content_text(content: Any) -> str:
    """``content`` (a message's, a tool result's) as text for a person to read."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_part_text(part) for part in content)
    if isinstance(content, Mapping):
        return _part_text(content)
    return compact_json(content)


def _part_text(part: Any) -> str:
    if not isinstance(part, Mapping):
        return content_text(part)
    kind = part.get("type")
    if not isinstance(kind, str):
        return compact_json(part)
    if kind in _TEXT_TYPES and isinstance(part.get("text"), str):
        return str(part["text"])
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return str(part["refusal"])
    if kind in _PLACEHOLDERS:
        file_name = _file_name(part)
        placeholder = _PLACEHOLDERS[kind]
        return f"[{placeholder} {file_name}]" if file_name else f"[{placeholder}]"
    if kind in _TOOL_CALLS:
        name = part.get("name")
        return f"[tool call {name}]" if isinstance(name, str) and name else "[tool call]"
    if kind in _TOOL_RESULTS:
        result = content_text(part.get("content", part.get("output")))
        return f"[tool result] {result}" if result else "[tool result]"
    if kind in _THINKING:
        return "[thinking]"
    return f"[{kind[:_MAX_TYPE]}]"


def _file_name(part: Mapping[str, Any]) -> str:
    """The file name a file part carries (``{"file": {"filename": ...}}`` or its own), if any."""
    inner = part.get("file")
    for holder in (inner if isinstance(inner, Mapping) else {}, part):
        name = holder.get("filename")
        if isinstance(name, str) and name:
            return name
    return ""


def compact_json(value: Any) -> str:
    """``value`` as compact JSON, as the page's ``JSON.stringify`` writes it (``str()`` for what
    JSON lacks)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except ValueError:  # a circular structure: only a live value can be one
        return str(value)
