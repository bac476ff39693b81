"""A session as an ATIF trajectory (the Agent Trajectory Interchange Format, Harbor's RFC 0001):
``agenttrace export SESSION --format atif``.

One trajectory per session: the root agent's steps, every run of the session in order. Each
sub-agent run is a trajectory of its own, embedded in the trajectory of the agent whose tool
call ran it (``subagent_trajectories``, ATIF v1.7) and referenced from that call's observation
(``subagent_trajectory_ref``, by ``trajectory_id``: the run's txn id).

ATIF has step timestamps but no runs and no durations; they go into its ``extra`` fields, so a
reader (``agenttrace.formats.atif.reader``) gets them back: a trajectory's ``extra.runs`` lists
each run (``txn_id``, ``first_step``, ``started_at``, ``latency_ms``, ``success``, ``error``),
an agent step's ``extra`` and a tool call's ``extra`` the ``started_at`` and ``latency_ms`` of
the LLM attempt and of the tool call.

Steps follow the agent's transcript (docs/events.md): a system or user entry is a ``system`` or
``user`` step; an assistant entry an ``agent`` step with its tool calls, the model and the
metrics (tokens, cost) of the LLM attempt that produced it; a tool result goes into the
observation of the step that asked for it. A tool the agent ran without a model asking (a plain
function) is an agent step of its own with ``llm_call_count: 0``. What the agent heard between
its runs (from other agents) opens its next run.

The ``atif`` package (the ``[atif]`` extra, Python 3.11 or later) builds and validates the
document; without it :func:`atif_trajectory` raises :class:`AtifUnavailable`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from agenttrace._internal.extras import install_hint
from agenttrace._internal.times import ms_iso, ts_ms, ts_nanoseconds
from agenttrace._version import __version__
from agenttrace.formats.content import content_text
from agenttrace.formats.session.files import LoadedFile, SessionFileError
from agenttrace.formats.session.optree import children, finite_number, hosted_sessions
from agenttrace.formats.std008.writer import unique
from agenttrace.model.resets import as_it_happened

SCHEMA_VERSION = "ATIF-v1.7"
"""The version written: the first with embedded sub-agent trajectories."""
UNKNOWN_VERSION = "unknown"
"""``agent.version``: the version of the user's agent, which agenttrace does not know."""


class AtifUnavailable(RuntimeError):
    """The ``atif`` package is not installed (or cannot be on this Python)."""


def atif_models() -> Any:
    """The ``atif`` package, imported on first use: it is an optional extra."""
    try:
        import atif
    except ImportError:
        raise AtifUnavailable(
            f"ATIF needs the atif package (Python 3.11 or later): {install_hint('atif')}"
        ) from None
    return atif


def atif_trajectory(loaded: LoadedFile) -> dict[str, Any]:
    """``loaded`` as an ATIF trajectory (a JSON object) validated by the ``atif`` package's
    models, as it is: an export redacts it first (``agenttrace.views.exports.atif.to_atif``).
    :class:`SessionFileError` for a file with no opTree (an event stream alone)."""
    models = atif_models()
    if not any(isinstance(run, Mapping) for run in loaded.runs):
        raise SessionFileError(f"{loaded.path}: no opTree in it, nothing to export")
    document = _Exporter(loaded.runs, loaded.events, loaded.session_id).trajectory()
    trajectory = models.Trajectory.model_validate(document)
    result: dict[str, Any] = trajectory.to_json_dict(exclude_none=True)
    return result


@dataclass
class _Run:
    node: Mapping[str, Any]
    spans: set[str] = field(default_factory=set)
    llm: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    """LLM ops by span id (an assistant entry names the span it was logged in)."""
    tools: list[Mapping[str, Any]] = field(default_factory=list)
    children: list[tuple[Mapping[str, Any], _Run]] = field(default_factory=list)
    """(the op that ran it, the run) for every sub-agent run inside this one."""
    entries: list[Mapping[str, Any]] = field(default_factory=list)
    key: str = ""
    """Its ``trajectory_id``: its txn id, told apart if a damaged file repeats one."""

    @property
    def agent_id(self) -> str:
        value = self.node.get("agentId")
        return value if isinstance(value, str) else "agent"

    @property
    def txn_id(self) -> str:
        value = self.node.get("txnId") or self.node.get("id")
        return value if isinstance(value, str) else self.agent_id

    @property
    def started(self) -> int:
        value = self.node.get("startedAt")
        return value if isinstance(value, int) and not isinstance(value, bool) else 0


class _Exporter:
    def __init__(
        self, runs: list[dict[str, Any]], events: list[dict[str, Any]], session_id: str | None
    ) -> None:
        self.session_id = session_id
        self.roots = [self._walk(run) for run in runs if isinstance(run, Mapping)]
        self.models: dict[str, str] = {}
        self._assign(events)
        taken: set[str] = set()
        for run in self._all():
            run.key = unique(run.txn_id, taken)

    def _walk(self, node: Mapping[str, Any]) -> _Run:
        run = _Run(node)
        run.spans.update(_ids(node, "spanId"))
        for turn in children(node, "turns"):
            run.spans.update(_ids(turn, "id"))
            for op in children(turn, "ops"):
                ids = _ids(op, "opId")
                run.spans.update(ids)
                if op.get("kind") == "llm" and not any(hosted_sessions(op)):
                    run.llm.update(dict.fromkeys(ids, op))
                else:
                    run.tools.append(op)
                for child in hosted_sessions(op):
                    run.children.append((op, self._walk(child)))
        return run

    def _all(self) -> Iterator[_Run]:
        pending = list(reversed(self.roots))
        while pending:
            run = pending.pop()
            yield run
            pending.extend(child for _, child in reversed(run.children))

    def _assign(self, events: list[dict[str, Any]]) -> None:
        """Give every transcript entry to the run of its agent it belongs to: the run whose
        spans it was logged in, else (heard from others in between) the agent's next run."""
        runs_of: dict[str, list[_Run]] = {}
        by_span: dict[str, _Run] = {}
        for run in self._all():
            runs_of.setdefault(run.agent_id, []).append(run)
            by_span.update(dict.fromkeys(run.spans, run))
        for runs in runs_of.values():
            runs.sort(key=lambda run: run.started)
        for event in as_it_happened(events):
            agent = event.get("agent_id")
            if event.get("event_type") == "agent_created" and isinstance(agent, str):
                model = event.get("language_model")
                if isinstance(model, str):
                    self.models.setdefault(agent, model)
            if event.get("event_type") != "transcript_entry" or not isinstance(agent, str):
                continue
            owner = by_span.get(str(event.get("span_id")))
            if owner is None or owner.agent_id != agent:
                when = ts_nanoseconds(str(event.get("ts")))
                ms = when // 1_000_000 if when is not None else None
                later = [r for r in runs_of.get(agent, ()) if ms is None or r.started >= ms]
                owner = later[0] if later else None
            if owner is not None:
                owner.entries.append(event)

    # -- the trajectory ---------------------------------------------------------------------

    def trajectory(self) -> dict[str, Any]:
        document = self._trajectory(self.roots)
        document["schema_version"] = SCHEMA_VERSION
        if self.session_id:
            document["session_id"] = self.session_id
        return document

    def _trajectory(self, runs: list[_Run]) -> dict[str, Any]:
        first = runs[0]
        name = first.node.get("agentName")
        agent: dict[str, Any] = {
            "name": name if isinstance(name, str) and name else first.agent_id,
            "version": UNKNOWN_VERSION,
            "extra": {"agent_id": first.agent_id, "recorded_by": f"agenttrace {__version__}"},
        }
        model = self._model(first)
        if model:
            agent["model_name"] = model
        steps: list[dict[str, Any]] = []
        embedded: list[dict[str, Any]] = []
        bounds: list[dict[str, Any]] = []
        for run in runs:
            bounds.append(_run_bounds(run, len(steps) + 1))
            steps.extend(self._steps(run, embedded))
        for number, step in enumerate(steps, 1):
            step["step_id"] = number
        document: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "trajectory_id": first.key,
            "agent": agent,
            "steps": steps,
            "extra": {"runs": bounds},
        }
        if self.session_id:
            document["session_id"] = self.session_id
        metrics = _final_metrics(steps)
        if metrics:
            document["final_metrics"] = metrics
        if embedded:
            document["subagent_trajectories"] = embedded
        return document

    def _model(self, run: _Run) -> str | None:
        attributes = run.node.get("attributes")
        model = (
            attributes.get("agenttrace.agent.model") if isinstance(attributes, Mapping) else None
        )
        return model if isinstance(model, str) else self.models.get(run.agent_id)

    def _steps(self, run: _Run, embedded: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The steps of one run, and its sub-agent runs' trajectories into ``embedded``."""
        items: list[tuple[int, int, dict[str, Any]]] = []
        asked: dict[str, dict[str, Any]] = {}  # tool call id -> the agent step that asked
        results: list[tuple[int, Mapping[str, Any]]] = []
        for order, entry in enumerate(run.entries):
            when = ts_ms(entry.get("ts")) or run.started
            role = entry.get("role")
            if role == "tool":
                results.append((when, entry))
                continue
            step = self._entry_step(run, entry, role)
            if step is None:
                continue
            for call in step.get("tool_calls", ()):
                asked.setdefault(call["tool_call_id"], step)
            items.append((when, order, step))
        for when, entry in results:
            call_id = entry.get("tool_call_id")
            step = asked.get(call_id) if isinstance(call_id, str) else None
            result: dict[str, Any] = {"content": content_text(entry.get("content"))}
            if step is None:  # a result for no call of this run: a system event
                orphan: dict[str, Any] = {
                    "source": "system",
                    "message": "",
                    "timestamp": ms_iso(when),
                }
                orphan["observation"] = {"results": [result]}
                items.append((when, len(items), orphan))
                continue
            result["source_call_id"] = str(call_id)
            step.setdefault("observation", {"results": []})["results"].append(result)
        for op in run.tools:
            call_id = _attribute(op, "gen_ai.tool.call.id")
            step = asked.get(call_id) if isinstance(call_id, str) else None
            if step is None:  # a tool run without a model asking for it
                call_id = call_id if isinstance(call_id, str) else f"tool-{op.get('path')}"
                step = {
                    "source": "agent",
                    "message": "",
                    "llm_call_count": 0,
                    "tool_calls": [_tool_call(call_id, op.get("name"), _arguments_of(op))],
                }
                response = op.get("response")
                if isinstance(response, Mapping) and isinstance(response.get("payload"), str):
                    step["observation"] = {
                        "results": [{"source_call_id": call_id, "content": response["payload"]}]
                    }
                started = op.get("startedAt")
                step["timestamp"] = ms_iso(started if isinstance(started, int) else run.started)
                items.append((ts_ms(step["timestamp"]) or run.started, len(items), step))
                asked[call_id] = step
            timed = _timing(op)
            for call in step["tool_calls"] if timed else ():
                if call["tool_call_id"] == call_id:
                    call["extra"] = timed
            hosted = [child for host, child in run.children if host is op]
            if not hosted:
                continue
            refs = []
            for child in hosted:
                embedded.append(self._trajectory([child]))
                refs.append({"trajectory_id": child.key, "session_id": self.session_id})
            observation = step.setdefault("observation", {"results": []})
            mine = [r for r in observation["results"] if r.get("source_call_id") == call_id]
            if mine:
                mine[0]["subagent_trajectory_ref"] = refs
            else:
                observation["results"].append(
                    {"source_call_id": call_id, "subagent_trajectory_ref": refs}
                )
        items.sort(key=lambda item: (item[0], item[1]))
        return [step for _, _, step in items]

    def _entry_step(self, run: _Run, entry: Mapping[str, Any], role: Any) -> dict[str, Any] | None:
        message = _message(entry.get("content"))
        step: dict[str, Any] = {"timestamp": ms_iso(ts_ms(entry.get("ts")) or run.started)}
        if role in ("system", "user"):
            step.update(source=role, message=message)
            return step
        if role != "assistant":
            return None
        step.update(source="agent", message=message)
        calls = entry.get("tool_calls")
        if isinstance(calls, list) and calls:
            step["tool_calls"] = [
                _tool_call(
                    str(call["id"]) if isinstance(call.get("id"), str) else f"call-{index}",
                    _dig(call, "function", "name"),
                    _arguments(_dig(call, "function", "arguments")),
                )
                for index, call in enumerate(calls)
                if isinstance(call, Mapping)
            ]
        op = run.llm.get(str(entry.get("span_id")))
        if op is not None:
            accounting = list(children(op, "accounting"))
            entry_record = accounting[-1] if accounting else {}
            model = entry_record.get("actualModel") or entry_record.get("model") or op.get("name")
            if isinstance(model, str) and model:
                step["model_name"] = model
            metrics = _metrics(entry_record)
            if metrics:
                step["metrics"] = metrics
            timed = _timing(op)
            if timed:
                step["extra"] = timed  # the LLM attempt's: ATIF has no duration of its own
        return step


# --- small helpers ------------------------------------------------------------------------------


def _run_bounds(run: _Run, first_step: int) -> dict[str, Any]:
    """Where a run starts among its trajectory's steps, and when and how it ran: a
    trajectory's ``extra.runs``, so a reader tells its runs apart again."""
    bounds: dict[str, Any] = {"txn_id": run.key, "first_step": first_step}
    bounds.update(_timing(run.node))
    success = run.node.get("success")
    if isinstance(success, bool):
        bounds["success"] = success
    error = run.node.get("error")
    if isinstance(error, str):
        bounds["error"] = error
    return bounds


def _timing(node: Mapping[str, Any]) -> dict[str, Any]:
    """``started_at`` and ``latency_ms`` of a run or op, as far as it has them."""
    timing: dict[str, Any] = {}
    started = node.get("startedAt")
    if isinstance(started, int) and not isinstance(started, bool):
        timing["started_at"] = ms_iso(started)
        latency = finite_number(node.get("latencyMs"))
        if latency is not None and latency >= 0:
            timing["latency_ms"] = latency
    return timing


def _ids(node: Mapping[str, Any], key: str) -> set[str]:
    found = {node.get(key), _dig(node, "span", "spanId")}
    return {value for value in found if isinstance(value, str)}


def _dig(value: Any, *keys: str) -> Any:
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _attribute(node: Mapping[str, Any], key: str) -> Any:
    attributes = _dig(node, "span", "attributes")
    return attributes.get(key) if isinstance(attributes, Mapping) else None


def _message(content: Any) -> Any:
    """An entry's content as an ATIF message: text (parts that are not text as their
    placeholders, as the views show them)."""
    return "" if content is None else content_text(content)


def _arguments(text: Any) -> dict[str, Any]:
    """A tool call's arguments as ATIF has them: a JSON object (text that is not one is kept
    under ``arguments``)."""
    if isinstance(text, Mapping):
        return dict(text)
    if not isinstance(text, str) or not text:
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return {"arguments": text}
    return value if isinstance(value, dict) else {"arguments": text}


def _arguments_of(op: Mapping[str, Any]) -> dict[str, Any]:
    request = op.get("request")
    return _arguments(request.get("payload") if isinstance(request, Mapping) else None)


def _tool_call(call_id: str, name: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "tool_call_id": call_id,
        "function_name": name if isinstance(name, str) and name else "tool",
        "arguments": arguments,
    }


def _metrics(entry: Mapping[str, Any]) -> dict[str, Any]:
    tokens = entry.get("tokens")
    metrics: dict[str, Any] = {}
    if isinstance(tokens, Mapping):
        for key, name in (
            ("inputTokens", "prompt_tokens"),
            ("outputTokens", "completion_tokens"),
            ("cacheReadInputTokens", "cached_tokens"),
        ):
            value = tokens.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                metrics[name] = value
    cost = finite_number(entry.get("costUsd"))
    if cost is not None:
        metrics["cost_usd"] = cost
    return metrics


def _final_metrics(steps: list[dict[str, Any]]) -> dict[str, Any]:
    totals: dict[str, Any] = {}
    for step in steps:
        for key, total in (
            ("prompt_tokens", "total_prompt_tokens"),
            ("completion_tokens", "total_completion_tokens"),
            ("cached_tokens", "total_cached_tokens"),
            ("cost_usd", "total_cost_usd"),
        ):
            value = step.get("metrics", {}).get(key)
            if value is not None:
                totals[total] = totals.get(total, 0) + value
    if "total_cost_usd" in totals:
        totals["total_cost_usd"] = round(totals["total_cost_usd"], 10)
    totals["total_steps"] = len(steps)
    return totals
