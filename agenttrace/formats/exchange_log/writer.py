"""The Claude Agent SDK's exchange log (docs/how-to/exports.md, "The exchange log"): one JSONL
line an exchange.

Give :class:`ExchangeLogger` every message the SDK yields (``log``) and every user input before it
goes to the SDK (``log_user_input``); it writes ``session_start`` when the session's first
``init`` arrives, an ``exchange`` line when the exchange's ``result`` arrives, and
``session_end`` at ``close()`` (:mod:`agenttrace.formats.exchange_log.lines` has the format).

Exchanges and the counters of the real CLI (claude-agent-sdk 0.2.187, its CLI 2.1.330):

- every exchange starts with a new ``init`` message; the log's ``session_start`` is written once
  per session, from the first;
- a result's ``usage``, ``duration_ms`` and ``num_turns`` are the exchange's own, but
  ``total_cost_usd`` and ``duration_api_ms`` are running totals of the session, so an exchange
  line gets its share: the difference from the previous result of the session. An ``init``
  without ``claude_code_version`` (the format's own examples, hand-made dicts) means the values are
  taken as the exchange's own;
- ``resume=`` keeps the session id, and the CLI restores the session's running totals (saved in
  its transcript) in the resumed process: its first result's cost includes every earlier
  exchange. The same logger knows the last totals it saw; a new logger (a new program, or a web
  request that resumes the session) takes the earlier share from the session's earlier logs in
  the same directory (:func:`~agenttrace.formats.exchange_log.files.earlier_totals`). A total lower
  than the last one means the counter started again (a resumed process whose predecessor was
  killed before saving): the total is then the share.

Each line is written with one ``write`` as its exchange ends, so a crash loses at most the
exchange in progress. ``close()`` (call it in a ``finally``, or use the logger as a context
manager) writes that exchange too if it began, with ``stats`` ``null``, then ``session_end``,
once. A message that is not an SDK message is refused with one
:class:`~agenttrace.formats.session.files.SessionFileError` line and changes nothing. A file that
cannot be written (a full disk) does not stop the program: its lines wait in memory and are
written at the next line or at ``close()``, with one warning each way.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import msgspec

from agenttrace._internal.config import ReadLimits
from agenttrace._internal.errors import report_internal_error
from agenttrace.formats.exchange_log import lines as lines
from agenttrace.formats.exchange_log.files import create_log, earlier_totals
from agenttrace.formats.exchange_log.messages import (
    Assistant,
    Init,
    Result,
    Text,
    ToolResult,
    ToolUse,
    Usage,
    User,
    blocks_of,
    read_message,
)
from agenttrace.formats.session.files import SessionFileError, check_session_id

logger = logging.getLogger("agenttrace")

DEFAULT_SESSIONS_DIR = "sessions"
"""The exchange log's default: ``./sessions``, relative to the working directory at construction."""


@dataclass
class _Input:
    text: str
    at: float


@dataclass
class _Session:
    """One SDK session's log, as far as it got."""

    session_id: str | None
    init: Init | None = None
    running_totals: bool = False
    """The latest ``init`` came from the real CLI: cost and API time are running totals."""
    model: str | None = None
    path: Path | None = None
    fd: int | None = None
    started: bool = False
    totals: lines.Totals = field(default_factory=lines.Totals)
    messages: list[msgspec.Raw] = field(default_factory=list)
    """The exchange in progress: its messages, encoded as they arrived."""
    first_at: float | None = None
    last_end: float | None = None
    seen: tuple[float | None, float | None] | None = None
    """The running totals (cost, API ms) of the session's last result, once there was one."""
    pending: list[bytes] = field(default_factory=list)
    """Lines not written yet: the file could not be created or written."""
    failing: bool = False


class ExchangeLogger:
    """The exchange log's session logger: ``log(message)`` for every SDK message,
    ``log_user_input(text)`` before each input goes to the SDK, ``close()`` at the end.

    ``sessions_dir`` (default ``./sessions``) is where the logs go, one file per session:
    ``YYYYMMDD_HHMMSS_<first 8 of the session id>.jsonl``. Messages are the SDK's objects
    (``claude_agent_sdk.types``), lines of the CLI's ``stream-json`` output (``str`` or
    ``bytes``), or dicts of that shape. Safe to share between threads. As a context manager it
    closes itself on the way out, error or not::

        with agenttrace.ExchangeLogger(sessions_dir="sessions") as log:
            log.log_user_input(prompt)
            async for message in query(prompt=prompt, options=options):
                log.log(message)
    """

    def __init__(self, sessions_dir: str | os.PathLike[str] = DEFAULT_SESSIONS_DIR) -> None:
        self._directory = Path(sessions_dir).absolute()
        self._limits = ReadLimits.from_env()
        self._lock = threading.Lock()
        self._inputs: deque[_Input] = deque()
        self._session: _Session | None = None
        self._closed = False

    @property
    def path(self) -> Path | None:
        """The log file of the current session, once it has one."""
        return self._session.path if self._session else None

    @property
    def session_id(self) -> str | None:
        """The SDK session id of the current session, once a message has named it."""
        return self._session.session_id if self._session else None

    def log_user_input(self, text: str) -> None:
        """Record the user's input: the next exchange's ``user_input``. Call it right before
        the input goes to the SDK; inputs given ahead of their exchanges wait in order."""
        if not isinstance(text, str):
            raise TypeError(f"user input is text, not {type(text).__name__}")
        with self._lock:
            self._check_open()
            self._inputs.append(_Input(text, time.time()))

    def log(self, message: Any) -> None:
        """Record one message from the SDK. The exchange's line is written when its ``result``
        arrives. Messages the log does not use (stream events, task progress) are ignored; one
        that is not an SDK message raises :class:`SessionFileError` and changes nothing."""
        checked = read_message(message, self._limits)
        if checked is None:
            return
        with self._lock:
            self._check_open()
            now = time.time()
            try:
                if isinstance(checked, Init):
                    self._on_init(checked, now)
                elif isinstance(checked, Assistant):
                    self._on_assistant(checked, now)
                elif isinstance(checked, User):
                    self._on_user(checked, now)
                elif isinstance(checked, Result):
                    self._on_result(checked, now)
            except SessionFileError:
                raise  # the message's fault: the caller hears of it
            except Exception as exc:  # ours: the program runs on (re-raised under the tests)
                report_internal_error("ExchangeLogger.log", exc)

    def close(self) -> None:
        """Write the exchange in progress, if any (``stats`` ``null``), and ``session_end``.
        Only the first call does anything; call it in a ``finally``. ``log`` and
        ``log_user_input`` raise ``ValueError`` after it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._session is not None:
                try:
                    self._end(self._session, time.time(), closing=True)
                except Exception as exc:  # ours: never in the way of the program's own error
                    report_internal_error("ExchangeLogger.close", exc)

    def __enter__(self) -> ExchangeLogger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # --- messages -------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("the exchange log is closed")

    def _on_init(self, init: Init, now: float) -> None:
        session = self._session_for(init.session_id, now)
        if session.init is None:
            session.init = init
        session.running_totals = init.claude_code_version is not None
        if not session.started:
            self._write(session, None, now)  # session_start, now

    def _on_assistant(self, message: Assistant, now: float) -> None:
        blocks = blocks_of(message.message.content)
        ts = lines.timestamp(now)
        parent = message.parent_tool_use_id
        entries: list[dict[str, Any]] = []
        for block in blocks:
            if isinstance(block, Text):
                entries.append(lines.text_message(block.text, ts, parent))
            elif isinstance(block, ToolUse):
                entries.append(
                    lines.tool_use_message(block.id, block.name, block.input, ts, parent)
                )
            elif isinstance(block, ToolResult):
                entries.append(_result_entry(block, ts, parent))
        encoded = _encoded(entries)
        session = self._session_for(message.session_id, now)
        session.model = session.model or message.message.model
        for block in blocks:
            if isinstance(block, ToolUse):
                session.totals.tool(block.name)
        self._add(session, encoded, now)

    def _on_user(self, message: User, now: float) -> None:
        content = message.message.content
        if isinstance(content, str):
            return  # the user's own text (a replayed prompt, a sub-agent's): not a message here
        ts = lines.timestamp(now)
        entries = [
            _result_entry(block, ts, message.parent_tool_use_id)
            for block in blocks_of(content)
            if isinstance(block, ToolResult)
        ]
        encoded = _encoded(entries)
        self._add(self._session_for(message.session_id, now), encoded, now)

    def _on_result(self, result: Result, now: float) -> None:
        session = self._session_for(result.session_id, now)
        stats = self._stats(session, result)
        kind = (result.origin or {}).get("kind")
        # A turn the session started on its own (a task notification) answers no user input.
        taken = self._inputs.popleft() if self._inputs and kind in (None, "human") else None
        error = None
        if result.is_error:
            error = result.result or "; ".join(result.errors or ()) or result.subtype
        self._exchange(session, taken, stats, now, error)

    def _stats(self, session: _Session, result: Result) -> lines.Stats:
        usage = result.usage or Usage()
        cost, api_ms = result.total_cost_usd, result.duration_api_ms
        if session.running_totals:
            seen = session.seen
            if seen is None:
                seen = self._earlier_totals(session)
            session.seen = (
                cost if cost is not None else seen[0],
                api_ms if api_ms is not None else seen[1],
            )
            cost, api_ms = _share(cost, seen[0]), _share(api_ms, seen[1])
        return lines.Stats(
            num_turns=result.num_turns,
            duration_ms=result.duration_ms,
            duration_api_ms=api_ms,
            tokens_in=usage.input_tokens or 0,
            tokens_out=usage.output_tokens or 0,
            cache_creation=usage.cache_creation_input_tokens or 0,
            cache_read=usage.cache_read_input_tokens or 0,
            cost_usd=cost,
        )

    def _earlier_totals(self, session: _Session) -> tuple[float, float]:
        """What the session's earlier logs account for of its running totals (a resumed
        session's CLI starts from them)."""
        assert session.session_id is not None  # a result names its session
        try:
            return earlier_totals(self._directory, session.session_id, session.path, self._limits)
        except OSError as exc:
            logger.warning(
                "agenttrace: exchange log: cannot read the earlier logs of session %s in %s (%s); "
                "its first exchange here counts the cost and API time of every earlier one",
                session.session_id,
                self._directory,
                exc.strerror or exc,
            )
            return 0.0, 0.0

    # --- sessions and exchanges -----------------------------------------------------------

    def _session_for(self, session_id: str | None, now: float) -> _Session:
        """The session a message belongs to; a message naming another session ends the
        current one (a new ``query()``). The id is checked before anything changes."""
        if session_id is not None:
            check_session_id(session_id)
        session = self._session
        if session is not None and session_id in (None, session.session_id):
            return session
        if session is not None and session.session_id is None:
            session.session_id = session_id  # messages before the first that named it
            return session
        if session is not None:
            self._end(session, now, closing=False)
        self._session = _Session(session_id)
        return self._session

    def _add(self, session: _Session, encoded: list[msgspec.Raw], now: float) -> None:
        if encoded:
            session.messages.extend(encoded)
            if session.first_at is None:
                session.first_at = now

    def _exchange(
        self,
        session: _Session,
        taken: _Input | None,
        stats: lines.Stats | None,
        now: float,
        error: str | None = None,
    ) -> None:
        """Write the exchange in progress, with ``taken`` as its input (``stats`` ``None`` for
        one that never got its result)."""
        starts = [session.first_at] if session.first_at is not None else []
        if taken is not None:  # an input given ahead waited for the exchange before it
            starts.append(max(taken.at, session.last_end or taken.at))
        session.totals.add(stats)
        line = lines.exchange(
            session.session_id or "",
            session.totals.exchanges,
            ts_start=lines.timestamp(min(starts, default=now)),
            ts_end=lines.timestamp(now),
            user_input=taken.text if taken else None,
            messages=session.messages,
            stats=stats,
            error=error,
        )
        session.messages = []
        session.first_at = None
        session.last_end = now
        self._write(session, line, now)

    def _end(self, session: _Session, now: float, *, closing: bool) -> None:
        """Write what the session still holds, then ``session_end``, and close its file. At
        ``close()`` every input still waiting is written too, as an exchange that never ended."""
        if session.messages:
            self._exchange(session, self._inputs.popleft() if self._inputs else None, None, now)
        while closing and self._inputs:
            self._exchange(session, self._inputs.popleft(), None, now)
        if session.started or session.pending or session.totals.exchanges:
            self._write(
                session,
                session.totals.session_end(session.session_id or "", lines.timestamp(now)),
                now,
            )
        if session.pending:
            logger.warning(
                "agenttrace: exchange log: %d line(s) of session %s could not be written%s",
                len(session.pending),
                session.session_id,
                f" to {session.path}" if session.path else " (no session id was ever given)",
            )
        if session.fd is not None:
            os.close(session.fd)
            session.fd = None

    # --- the file -------------------------------------------------------------------------

    def _write(self, session: _Session, line: dict[str, Any] | None, now: float) -> None:
        """Queue ``line`` (after ``session_start`` if the session has none yet) and write
        whatever waits."""
        if not session.started:
            session.started = True
            session.pending.append(self._start_line(session, now))
        if line is not None:
            session.pending.append(lines.encode(line) + b"\n")
        self._flush(session, now)

    def _start_line(self, session: _Session, now: float) -> bytes:
        init = session.init
        line = lines.session_start(
            session.session_id or "",
            lines.timestamp(now),
            model=init.model if init and init.model else session.model,
            cwd=init.cwd if init else None,
            tools=init.tools if init else None,
            permission_mode=init.permission_mode if init else None,
        )
        return lines.encode(line) + b"\n"

    def _flush(self, session: _Session, now: float) -> None:
        if session.session_id is None:
            return  # no name for the file yet: the lines wait for a message that gives one
        try:
            if session.fd is None:
                session.path, session.fd = create_log(self._directory, session.session_id, now)
            while session.pending:
                _write_whole(session.fd, session.pending[0])
                session.pending.pop(0)
        except (OSError, SessionFileError) as exc:
            if not session.failing:
                session.failing = True
                logger.warning(
                    "agenttrace: exchange log: cannot write %s: %s; its lines wait in memory",
                    session.path or self._directory,
                    getattr(exc, "strerror", None) or exc,
                )
            return
        if session.failing:
            session.failing = False
            logger.warning("agenttrace: exchange log: %s is written again", session.path)


def _share(total: float | None, before: float | None) -> float | None:
    """An exchange's share of a running total: what it added since ``before``. A total below
    ``before`` is a counter that started again: all of it is the exchange's."""
    if total is None or before is None:
        return total
    share = total - before if total >= before else total
    # Milliseconds stay whole numbers: 53 - 43.0 is written 10, as the CLI writes its own.
    return int(share) if isinstance(total, int) and float(before).is_integer() else share


def _result_entry(block: ToolResult, ts: str, parent: str | None) -> dict[str, Any]:
    return lines.result_message(
        block.tool_use_id, bool(block.is_error), _output_text(block.content), ts, parent
    )


def _output_text(content: str | list[Any] | None) -> str:
    """A tool result's content as the exchange log's ``output`` text: text parts joined by newlines,
    a part of another kind (an image) as ``[image]``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content:
        if (
            isinstance(part, dict)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        ):
            parts.append(part["text"])
        elif isinstance(part, dict) and isinstance(part.get("type"), str):
            parts.append(f"[{part['type']}]")
        else:
            parts.append(lines.encode(part).decode("utf-8", "replace"))
    return "\n".join(parts)


def _encoded(entries: list[dict[str, Any]]) -> list[msgspec.Raw]:
    """Each message as JSON now: a value JSON cannot hold is refused while it is still the
    caller's message, not when its exchange is written."""
    encoded: list[msgspec.Raw] = []
    for entry in entries:
        try:
            encoded.append(msgspec.Raw(lines.encode(entry)))
        except (TypeError, ValueError, OverflowError, RecursionError) as exc:
            raise SessionFileError(f"not a Claude Agent SDK message: {exc}") from None
    return encoded


def _write_whole(fd: int, data: bytes) -> None:
    """``data`` appended whole, or nothing: a write that fails half-way is taken back, so the
    file always ends in a whole line."""
    start = os.fstat(fd).st_size
    written = 0
    try:
        while written < len(data):
            written += os.write(fd, data[written:])
    except OSError:
        if written:
            os.ftruncate(fd, start)
        raise
