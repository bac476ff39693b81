"""Any agenttrace session as an exchange log (docs/how-to/exports.md, "The exchange log"): one
``exchange`` line
per root run.

The lines are those :class:`~agenttrace.ExchangeLogger` writes for the Claude Agent SDK
(:mod:`agenttrace.formats.exchange_log.lines`), so a litellm agent's session reads the same way:

- ``session_start``: the session id, when its first run started, the root agent's model and the
  working directory of its ingress (``cwd`` of a run started from the command line).
  ``tools_available`` and ``permission_mode`` are ``null``: a session file records the tools
  that were called, not those that could have been;
- one ``exchange`` per root run, in order: ``user_input`` is what the root agent heard for the
  run (its ``user`` entries), ``messages`` its replies and tool calls (``text``, ``tool_use``)
  and the tools' results (``result``, ``is_error`` when the tool call failed), with those of
  sub-agents carrying ``parent_tool_use_id``, the call that ran them. ``stats`` add up the run's
  whole tree: its turns, its wall time, the time of its LLM attempts (``duration_api_ms``), their
  tokens and cost. ``tokens_in`` counts input tokens other than cache reads and writes, as the
  Anthropic API (and the exchange log's format) count them; a cost litellm could not price makes
  ``cost_usd`` ``null``, never 0. A run that failed carries ``error``; one that never ended has
  ``ts_end`` and ``stats`` ``null``;
- ``session_end`` aggregates them as the exchange log's format says, ``tools_used`` counting the
tool calls of the   whole tree by name.

Content is redacted and capped like every export (:func:`agenttrace.views.public.public_view`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from agenttrace.formats.content import content_text
from agenttrace.formats.exchange_log import lines as lines
from agenttrace.formats.session.files import LoadedFile
from agenttrace.formats.session.optree import children, finite_number, hosted_sessions, session_ops
from agenttrace.formats.session.totals import session_stats
from agenttrace.model.events import TRANSCRIPT_ENTRY
from agenttrace.model.resets import as_it_happened

_ISO_SECONDS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
_CALL_ID = "gen_ai.tool.call.id"


def exchange_lines(loaded: LoadedFile) -> list[dict[str, Any]]:
    """The session's lines in the exchange log's format, as they are (an export redacts them
    first: ``agenttrace.views.exports.to_exchanges``): ``session_start``, an ``exchange`` per
    root run, ``session_end``; a file without runs (an event stream) gives the two session
    lines and no exchange."""
    runs = [run for run in loaded.runs if isinstance(run, Mapping)]
    session_id = _session_id(loaded, runs)
    first = runs[0] if runs else {}
    result = [
        lines.session_start(
            session_id,
            _time(first.get("startedAt"))
            or lines.timestamp(_seconds(loaded.meta.get("createdAt"))),
            model=_text(_mapping(first.get("attributes")).get("agenttrace.agent.model")),
            cwd=_text(_mapping(_mapping(_ingress(first)).get("cli")).get("cwd")),
            tools=None,
            permission_mode=None,
        )
    ]
    totals = lines.Totals()
    for run, events in zip(runs, _events_by_run(loaded.events, runs), strict=True):
        result.append(_exchange(session_id, run, events, totals))
    ended = [run.get("endedAt") for run in runs]
    end = _time(ended[-1]) if ended else None
    result.append(totals.session_end(session_id, end or lines.timestamp(_updated(loaded))))
    return result


def _exchange(
    session_id: str, run: Mapping[str, Any], events: list[Mapping[str, Any]], totals: lines.Totals
) -> dict[str, Any]:
    root = run.get("agentId")
    hosts = dict(_hosting_calls(run))
    failed = {call for call, status in _tool_calls(run) if status == "failed"}
    heard: list[str] = []
    messages: list[dict[str, Any]] = []
    for event in as_it_happened(events):
        if event.get("event_type") != TRANSCRIPT_ENTRY:
            continue
        agent, role = event.get("agent_id"), event.get("role")
        if agent == root and role == "user":
            heard.append(content_text(event.get("content")))
            continue
        parent = None if agent == root else hosts.get(str(agent))
        messages.extend(_messages(event, role, parent, failed))
    for op in _tool_ops(run):
        totals.tool(str(op.get("name")))
    stats = _stats(run) if finite_number(run.get("endedAt")) is not None else None
    totals.add(stats)
    return lines.exchange(
        session_id,
        totals.exchanges,
        ts_start=_time(run.get("startedAt")) or "",
        ts_end=_time(run.get("endedAt")) if stats else None,
        user_input="\n".join(heard) if heard else None,
        messages=messages,
        stats=stats,
        error=(_text(run.get("error")) or "failed") if run.get("success") is False else None,
    )


def _messages(
    event: Mapping[str, Any], role: Any, parent: str | None, failed: set[str]
) -> Iterator[dict[str, Any]]:
    ts = _event_time(event.get("ts"))
    if role == "assistant":
        text = content_text(event.get("content"))
        if text:
            yield lines.text_message(text, ts, parent)
        for call in children(event, "tool_calls"):
            function = _mapping(call.get("function"))
            yield lines.tool_use_message(
                str(call.get("id")),
                str(function.get("name")),
                _arguments(function.get("arguments")),
                ts,
                parent,
            )
    elif role == "tool":
        call_id = str(event.get("tool_call_id"))
        output = content_text(event.get("content"))
        yield lines.result_message(call_id, call_id in failed, output, ts, parent)


def _stats(run: Mapping[str, Any]) -> lines.Stats:
    total = session_stats([run])["total"]
    cache_read, cache_write = total["cache_read_tokens"], total["cache_write_tokens"]
    api_ms = sum(
        finite_number(op.get("latencyMs")) or 0.0 for op in _all_ops(run) if op.get("kind") == "llm"
    )
    return lines.Stats(
        num_turns=sum(1 for _ in children(run, "turns")),
        duration_ms=round(finite_number(run.get("latencyMs")) or 0.0),
        # Finite latencies can still add up to an infinity (an edited file): none is known then.
        duration_api_ms=round(api_ms) if math.isfinite(api_ms) else 0,
        tokens_in=max(0, total["input_tokens"] - cache_read - cache_write),
        tokens_out=total["output_tokens"],
        cache_creation=cache_write,
        cache_read=cache_read,
        cost_usd=total["cost_usd"],
    )


def _events_by_run(
    events: Iterable[Mapping[str, Any]], runs: Sequence[Mapping[str, Any]]
) -> list[list[Mapping[str, Any]]]:
    """Each run's events: those of its trace, and before them those logged outside any run
    since the previous run's (the root agent hears its prompt before its run starts)."""
    index = {run.get("traceId"): number for number, run in enumerate(runs)}
    assigned: list[list[Mapping[str, Any]]] = [[] for _ in runs]
    waiting: list[Mapping[str, Any]] = []
    for event in events:
        number = index.get(event.get("trace_id"))
        if number is None:
            waiting.append(event)
            continue
        assigned[number].extend(waiting)
        waiting = []
        assigned[number].append(event)
    return assigned


def _sessions(node: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield node
    for op in session_ops(node):
        for child in hosted_sessions(op):
            yield from _sessions(child)


def _all_ops(run: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for session in _sessions(run):
        yield from session_ops(session)


def _tool_ops(run: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    return (op for op in _all_ops(run) if op.get("kind") in ("tool", "session"))


def _tool_calls(run: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """(call id, status) of each tool call whose span recorded its call id."""
    for op in _tool_ops(run):
        call = _mapping(_mapping(op.get("span")).get("attributes")).get(_CALL_ID)
        if isinstance(call, str):
            yield call, op.get("status")


def _hosting_calls(run: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(sub-agent id, the call id of the tool call that ran it), to any depth."""
    for session in _sessions(run):
        for op in session_ops(session):
            call = _mapping(_mapping(op.get("span")).get("attributes")).get(_CALL_ID)
            if not isinstance(call, str):
                continue
            for child in hosted_sessions(op):
                yield str(child.get("agentId")), call


def _arguments(arguments: Any) -> Any:
    """A tool call's arguments as the model meant them: its JSON text parsed, else as is."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except (ValueError, RecursionError):
            return arguments
    return arguments


def _session_id(loaded: LoadedFile, runs: Sequence[Mapping[str, Any]]) -> str:
    for candidate in (
        loaded.session_id,
        loaded.meta.get("session_id"),
        *(run.get("sessionId") for run in runs),
    ):
        if isinstance(candidate, str) and candidate:
            return candidate
    return ""


def _ingress(run: Mapping[str, Any]) -> Any:
    return _mapping(run.get("attributes")).get("ingress")


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _seconds(value: Any) -> float | None:
    """A time in ms as a node records it, in seconds (``None`` if it is not a number)."""
    number = finite_number(value)
    return None if number is None else number / 1000


def _time(value: Any) -> str | None:
    """A node's time (ms since the epoch) as the exchange log's timestamp."""
    seconds = _seconds(value)
    if seconds is None or not 0 <= seconds < 253402300800:  # before the year 10000
        return None
    return lines.timestamp(seconds)


def _updated(loaded: LoadedFile) -> float | None:
    return _seconds(loaded.meta.get("updatedAt"))


def _event_time(value: Any) -> str:
    """An event's ``ts`` (``2026-11-23T00:32:34.350Z``) to the second, as the exchange log
    writes."""
    if isinstance(value, str) and _ISO_SECONDS.match(value):
        return value[:19] + "Z"
    return ""
