"""The Claude Code CLI's own transcript of a session: where it is, and what it says that the
SDK's messages do not.

The CLI appends every message of a session to ``<config>/projects/<cwd>/<session id>.jsonl``
(``<config>`` is ``CLAUDE_CONFIG_DIR``, else ``$HOME/.claude``; ``<cwd>`` the working directory
with every character but letters and digits made ``-``), and a sub-agent's to
``<session id>/subagents/agent-<task id>.jsonl`` beside it. Its assistant entries carry the
message's **final** usage (the SDK's ``AssistantMessage.usage`` has the output count of
``message_start``, 1), its stop reason, and a sub-agent's text, which the SDK does not yield.
A ``cost-state`` line, written when a CLI process ends, holds the session's running totals (cost
and API time), which a resumed session's results go on counting from.

The file is the CLI's and may be anything by the time it is read: it is opened as a regular
file only, read from where the last read stopped, at most :data:`MAX_READ` bytes at a time, only
whole lines, and a line that is not the JSON expected is skipped.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agenttrace._internal.times import iso_nanoseconds
from agenttrace.formats.safe_open import open_regular

MAX_READ = 64 << 20
"""Bytes read from a transcript at one time (the rest waits for the next read)."""
MAX_LINE = 16 << 20
"""A longer line is skipped unparsed (a huge tool result: it holds no usage)."""
COST_TAIL = 4 << 20
"""How far from its end a transcript that already exists is searched for its ``cost-state``."""
MAX_PROJECTS = 10_000
"""Project directories looked through for a session whose directory is not where expected."""

_SESSION_ID = re.compile(r"^[0-9A-Za-z][0-9A-Za-z-]{0,127}$")
"""A session id that can name a file (the CLI's are UUIDs)."""
_TASK_ID = re.compile(r"^[0-9A-Za-z_-]{1,128}$")
_NOT_ALNUM = re.compile(r"[^a-zA-Z0-9]")
_SANITIZED_MAX = 200  # longer names get a hash suffix the CLI computes with Bun.hash


@dataclasses.dataclass
class AssistantEntry:
    """One assistant entry: the content blocks of a message it holds (the CLI writes one block
    per entry), with the message's final usage."""

    message_id: str
    blocks: list[Mapping[str, Any]]
    usage: Mapping[str, Any] | None
    stop_reason: str | None
    model: str | None
    ts_ns: int | None


@dataclasses.dataclass
class ToolResult:
    """One ``tool_result`` block of a user entry."""

    tool_use_id: str
    content: Any
    is_error: bool


@dataclasses.dataclass
class UserEntry:
    """A user entry (a prompt, or tool results): when it was written, and its tool results."""

    ts_ns: int | None
    results: list[ToolResult]


@dataclasses.dataclass
class CostState:
    """The session's running totals when a CLI process ended."""

    total_cost_usd: float | None
    total_api_ms: float | None


Entry = AssistantEntry | UserEntry | CostState


def config_dir(env: Mapping[str, str]) -> Path:
    """The CLI's configuration directory for a process run with ``env`` over ours."""
    configured = env.get("CLAUDE_CONFIG_DIR") or os.environ.get("CLAUDE_CONFIG_DIR")
    if configured:
        return Path(configured)
    home = env.get("HOME") or os.environ.get("HOME")
    return (Path(home) if home else Path.home()) / ".claude"


def session_file(config: Path, cwd: str | None, session_id: str) -> Path | None:
    """The transcript of ``session_id`` (``None``: an id that cannot name a file, or none)."""
    if not _SESSION_ID.match(session_id):
        return None
    projects = config / "projects"
    name = f"{session_id}.jsonl"
    if cwd:
        sanitized = _NOT_ALNUM.sub("-", cwd)
        if len(sanitized) <= _SANITIZED_MAX:
            candidate = projects / sanitized / name
            if candidate.is_file():
                return candidate
    try:
        with os.scandir(projects) as entries:
            for count, entry in enumerate(entries):
                if count >= MAX_PROJECTS:
                    break
                candidate = Path(entry.path) / name
                if entry.is_dir() and candidate.is_file():
                    return candidate
    except OSError:
        pass
    return None


def subagent_file(session: Path, task_id: str) -> Path | None:
    """The transcript of the sub-agent of ``task_id`` in the session whose file is ``session``."""
    if not _TASK_ID.match(task_id):
        return None
    return session.with_suffix("") / "subagents" / f"agent-{task_id}.jsonl"


class TranscriptReader:
    """Reads a transcript file as it grows: each :meth:`read` returns the entries added since."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.failed = False
        """True once the file could not be read (it is not tried again)."""

    def skip_to_end(self) -> CostState | None:
        """Start reading at the file's current end; returns the last ``cost-state`` before it
        (the totals a resumed session counts on from)."""
        try:
            fd = open_regular(self.path)
        except OSError:
            return None
        try:
            size = os.fstat(fd).st_size
            start = max(0, size - COST_TAIL)
            data = os.pread(fd, size - start, start)
        except OSError:
            return None
        finally:
            os.close(fd)
        self.offset = start + len(data)
        last: CostState | None = None
        for line in data.split(b"\n"):
            if b'"cost-state"' in line:
                entry = _parse(line)
                if isinstance(entry, CostState):
                    last = entry
        return last

    def read(self) -> list[Entry]:
        """The whole lines added since the last read (at most :data:`MAX_READ` bytes of them)."""
        if self.failed:
            return []
        try:
            fd = open_regular(self.path)
        except FileNotFoundError:
            return []  # not written yet
        except OSError:
            self.failed = True
            return []
        try:
            size = os.fstat(fd).st_size
            if size < self.offset:  # rewritten under us: read it again from its start
                self.offset = 0
            data = os.pread(fd, min(size - self.offset, MAX_READ), self.offset)
        except OSError:
            self.failed = True
            return []
        finally:
            os.close(fd)
        end = data.rfind(b"\n")
        if end < 0:
            if len(data) >= MAX_READ:  # one line longer than a read: skip it
                self.offset += len(data)
            return []
        self.offset += end + 1
        entries: list[Entry] = []
        for line in data[:end].split(b"\n"):
            if len(line) > MAX_LINE:
                continue
            entry = _parse(line)
            if entry is not None:
                entries.append(entry)
        return entries


def _parse(line: bytes) -> Entry | None:
    """The entry a line holds, if it is one of those read here (anything else: ``None``)."""
    if not line.strip():
        return None
    try:
        value = json.loads(line)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    kind = value.get("type")
    if kind == "assistant":
        message = value.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("id"), str):
            return None
        content = message.get("content")
        blocks: list[Mapping[str, Any]] = (
            [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        )
        usage = message.get("usage")
        stop = message.get("stop_reason")
        model = message.get("model")
        return AssistantEntry(
            message["id"],
            blocks,
            usage if isinstance(usage, dict) else None,
            stop if isinstance(stop, str) else None,
            model if isinstance(model, str) else None,
            iso_nanoseconds(value.get("timestamp")),
        )
    if kind == "user":
        message = value.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        results = [
            ToolResult(block["tool_use_id"], block.get("content"), block.get("is_error") is True)
            for block in (content if isinstance(content, list) else ())
            if isinstance(block, dict)
            and block.get("type") == "tool_result"
            and isinstance(block.get("tool_use_id"), str)
        ]
        return UserEntry(iso_nanoseconds(value.get("timestamp")), results)
    if kind == "cost-state":
        return CostState(_number(value.get("totalCostUSD")), _number(value.get("totalAPIDuration")))
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
