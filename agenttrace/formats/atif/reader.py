"""An ATIF trajectory (Harbor's Agent Trajectory Interchange Format) as a session: the import
behind ``agenttrace tree``, ``stats``, ``dialog`` and ``export`` of an ATIF ``*.json`` file.

The ``atif`` package's models validate the document first (the ``[atif]`` extra, Python 3.11
or later; without it such a file is refused in one line saying so). Then each trajectory is an
agent run: a system or user step is an entry of the agent's transcript; an agent step is an LLM
attempt (its own turn, with the step's tokens and cost; none when ``llm_call_count`` is 0) whose
answer and tool calls enter the transcript, each tool call an op with its observation as the
result. An embedded sub-agent trajectory a call refers to (``subagent_trajectory_ref`` by
``trajectory_id``) is a sub-agent run under that call's op; one no call refers to gets an op of
its own. A reference by ``trajectory_path`` is not followed: a document names no file to open.

ATIF has no runs and no durations. agenttrace's export writes them into ``extra`` fields
(``agenttrace.formats.atif.writer``): a trajectory's ``extra.runs`` splits its steps into runs
(each with its txn id, start, latency and outcome), an agent step's and a tool call's ``extra``
give the ``started_at`` and ``latency_ms`` of the LLM attempt and the tool call. Where a document
has none of them (another tool wrote it), every op ends when it starts and the trajectory is one
run, ending at its last step.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agenttrace import semconv as sc
from agenttrace._internal.config import ReadLimits
from agenttrace._internal.extras import install_hint
from agenttrace._internal.times import clamp_ms, iso_ms
from agenttrace.formats.imported import Builder, Node, json_text, plain_id
from agenttrace.formats.session.files import LoadedFile, SessionFileError
from agenttrace.formats.session.optree import finite_number

LEVELS_PER_SUB_AGENT = 8
"""As for STD-008: sub-agent trajectories may nest ``AGENTTRACE_MAX_NESTING_DEPTH // 8``
deep."""


def read_atif(document: Any, path: Path, limits: ReadLimits | None = None) -> LoadedFile:
    """``document`` (decoded JSON from ``path``) as a session; :class:`SessionFileError` if it
    is not an ATIF trajectory or the ``atif`` package is missing."""
    limits = ReadLimits.from_env() if limits is None else limits
    try:
        import atif
        import pydantic
    except ImportError:
        raise SessionFileError(
            f"{path}: an ATIF trajectory; reading one needs the atif package (Python 3.11 or "
            f"later): {install_hint('atif')}"
        ) from None
    try:
        trajectory = atif.Trajectory.model_validate(document)
    except pydantic.ValidationError as exc:
        raise SessionFileError(f"{path}: not an ATIF trajectory: {_first_error(exc)}") from None
    except RecursionError:
        raise SessionFileError(f"{path}: nested too deeply to read") from None
    max_depth = max(1, limits.nesting_depth // LEVELS_PER_SUB_AGENT)
    return _Reader(trajectory, path, max_depth).read()


def _first_error(exc: Any) -> str:
    """The first problem pydantic found, as ``$.steps[2].source: what`` on one line."""
    errors = exc.errors()
    if not errors:
        return " ".join(str(exc).split())
    error = errors[0]
    where = "$" + "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.get("loc", ())
    )
    message = " ".join(str(error.get("msg", "")).split())
    text = f"{where}: {message}"
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)[:300]


class _Reader:
    def __init__(self, trajectory: Any, path: Path, max_depth: int) -> None:
        self.trajectory = trajectory
        self.path = path
        self.max_depth = max_depth
        key = trajectory.session_id or trajectory.trajectory_id
        self.session_id = plain_id(key, f"atif:{key}")
        self.builder = Builder(self.session_id, "atif", self._first_time(trajectory) or 0)

    @staticmethod
    def _first_time(trajectory: Any) -> int | None:
        for step in trajectory.steps:
            when = iso_ms(step.timestamp)
            if when is not None:
                return when
        return None

    def read(self) -> LoadedFile:
        trajectory = self.trajectory
        agent_id, name, model = self._agent(trajectory)
        embedded = {sub.trajectory_id: sub for sub in trajectory.subagent_trajectories or ()}
        used: set[str] = set()
        roots: list[Node] = []
        parts = _runs(trajectory)
        for number, (bounds, steps) in enumerate(parts, 1):
            start, latency = _timing(bounds)
            if start is None:
                start = next(filter(None, (iso_ms(step.timestamp) for step in steps)), None)
            if start is None:
                start = roots[-1].data.get("endedAt", roots[-1].started_ms) if roots else None
            root = self.builder.root(agent_id, name, {}, model, bounds.get("txn_id"), start)
            if not roots:
                self.builder.created(root, root.started_ms, agent_id, name, model)
            ended = self._steps(
                root, trajectory, root.started_ms, 1, steps, embedded, used, number == len(parts)
            )
            if latency is not None:
                ended = clamp_ms(root.started_ms + latency)
            self.builder.end_run(root, ended, latency, _run_error(bounds))
            roots.append(root)
        return self.builder.loaded(self.path, *roots)

    @staticmethod
    def _agent(trajectory: Any) -> tuple[str, str, str | None]:
        agent = trajectory.agent
        extra = agent.extra or {}
        agent_id = extra.get("agent_id")
        if not isinstance(agent_id, str) or not agent_id:
            agent_id = agent.name or "agent"
        return agent_id, agent.name or agent_id, agent.model_name

    def _steps(
        self,
        run: Node,
        trajectory: Any,
        now: int,
        depth: int,
        steps: list[Any] | None = None,
        embedded: Mapping[str, Any] | None = None,
        used: set[str] | None = None,
        last: bool = True,
    ) -> int:
        """``trajectory``'s steps (``steps``: those of one of its runs) as ``run``'s transcript
        and ops; the time of the last. ``embedded`` and ``used``: its sub-agent trajectories,
        and those a call referred to so far, across its runs; those no call refers to get ops
        of their own in its ``last`` run."""
        builder = self.builder
        if embedded is None:
            embedded = {sub.trajectory_id: sub for sub in trajectory.subagent_trajectories or ()}
        used = set() if used is None else used
        model = trajectory.agent.model_name
        for step in trajectory.steps if steps is None else steps:
            now = iso_ms(step.timestamp) or now
            content = _content(step.message)
            if step.source in ("system", "user"):
                builder.event(
                    run,
                    now,
                    event_type="transcript_entry",
                    agent_id=run.agent_id,
                    role=step.source,
                    content=content,
                )
                self._observations(run, step, {}, now)
                continue
            calls = [
                {
                    "id": call.tool_call_id,
                    "function": {
                        "name": call.function_name,
                        "arguments": json.dumps(call.arguments, ensure_ascii=False),
                    },
                }
                for call in step.tool_calls or ()
            ]
            speaker = run
            asked = step.llm_call_count != 0  # 0: the agent ran the tools itself, no model
            if asked:
                metrics = step.metrics
                tokens = {
                    "input": metrics.prompt_tokens if metrics else None,
                    "output": metrics.completion_tokens if metrics else None,
                    "cache_read": metrics.cached_tokens if metrics else None,
                }
                cost = metrics.cost_usd if metrics else None
                started, latency = _timing(step.extra)
                speaker = builder.llm(
                    run,
                    step.model_name or model or "unknown",
                    now if started is None else started,
                    tokens,
                    cost,
                    latency or 0,
                )
            if content or (calls and asked):
                builder.event(
                    speaker,
                    now,
                    event_type="transcript_entry",
                    agent_id=run.agent_id,
                    role="assistant",
                    content=content or None,
                    tool_calls=calls if calls and asked else None,
                )
            ops: dict[str, Node] = {}
            latencies: dict[str, float] = {}
            for call in step.tool_calls or ():
                started, latency = _timing(call.extra)
                ops[call.tool_call_id] = builder.op(
                    run,
                    call.function_name,
                    now if started is None else started,
                    json.dumps(call.arguments, ensure_ascii=False),
                    {sc.GEN_AI_TOOL_CALL_ID: call.tool_call_id},
                )
                if latency is not None:
                    latencies[call.tool_call_id] = latency
            now = self._observations(run, step, ops, now, embedded, used, depth, asked, latencies)
        for trajectory_id, sub in embedded.items() if last else ():
            if trajectory_id not in used:  # referred to by no call: an op of its own
                _, name, _ = self._agent(sub)
                op = builder.op(run, name, now, None, {sc.IMPLICIT: True})
                now = max(now, self._sub(op, run, sub, depth))
                builder.end_op(op, now, None, None, None)
        return now

    def _observations(
        self,
        run: Node,
        step: Any,
        ops: Mapping[str, Node],
        now: int,
        embedded: Mapping[str, Any] | None = None,
        used: set[str] | None = None,
        depth: int = 1,
        asked: bool = True,
        latencies: Mapping[str, float] | None = None,
    ) -> int:
        """The step's observation: each result a tool entry of its call (with the sub-agent
        runs it refers to; no entry for a tool no model asked for: it answers no call); ends
        the step's ops (after their ``latencies`` where known, else at once). The time the last
        of them ended."""
        builder = self.builder
        results: dict[str, list[str]] = {}
        latencies = latencies or {}
        ended = {
            call_id: clamp_ms(op.started_ms + latencies[call_id]) if call_id in latencies else now
            for call_id, op in ops.items()
        }
        for result in step.observation.results if step.observation else ():
            call_id = result.source_call_id
            op = ops.get(call_id) if call_id is not None else None
            for ref in result.subagent_trajectory_ref or ():
                sub = (embedded or {}).get(ref.trajectory_id)
                if op is None or sub is None or ref.trajectory_id in (used or set()):
                    continue
                if used is not None:
                    used.add(ref.trajectory_id)
                ended[call_id] = max(ended[call_id], self._sub(op, run, sub, depth))
            if result.content is None:
                continue
            content = _content(result.content)
            if op is not None:
                results.setdefault(call_id, []).append(json_text(content))
                if not asked:
                    continue
            builder.event(
                op or run,
                now,
                event_type="transcript_entry",
                agent_id=run.agent_id,
                role="tool",
                content=content,
                tool_call_id=call_id,
            )
        for call_id, op in ops.items():
            texts = results.get(call_id)
            text = "\n".join(texts) if texts else None
            builder.end_op(op, ended[call_id], latencies.get(call_id), None, text)
        return max([now, *ended.values()])

    def _sub(self, op: Node, parent: Node, trajectory: Any, depth: int) -> int:
        if depth >= self.max_depth:
            raise SessionFileError(
                f"{self.path}: sub-agent trajectories nested more than {self.max_depth} levels "
                "deep (AGENTTRACE_MAX_NESTING_DEPTH)"
            )
        agent_id, name, model = self._agent(trajectory)
        bounds = _runs(trajectory)[0][0]  # a sub-agent run is a trajectory of its own
        start, latency = _timing(bounds)
        if start is None:
            start = self._first_time(trajectory) or op.started_ms
        child = self.builder.child(op, parent, agent_id, name, trajectory.trajectory_id, start, {})
        self.builder.created(op, start, agent_id, name, model)
        ended = self._steps(child, trajectory, start, depth + 1)
        if latency is not None:
            ended = clamp_ms(child.started_ms + latency)
        self.builder.end_run(child, ended, latency, _run_error(bounds))
        return ended


def _runs(trajectory: Any) -> list[tuple[Mapping[str, Any], list[Any]]]:
    """The trajectory's runs, each with its steps: as its ``extra.runs`` (agenttrace's export)
    splits them, or one run of every step when it has none or they do not fit its steps (first
    steps from 1, in order, and no more runs than steps and one: an empty run is possible, a
    flood of them is not)."""
    steps = list(trajectory.steps)
    extra = trajectory.extra
    bounds = extra.get("runs") if isinstance(extra, Mapping) else None
    if not isinstance(bounds, list) or not 0 < len(bounds) <= len(steps) + 1:
        return [({}, steps)]
    if not all(isinstance(run, Mapping) for run in bounds):
        return [({}, steps)]
    firsts = [run.get("first_step") for run in bounds]
    if not all(type(first) is int for first in firsts) or firsts[0] != 1:
        return [({}, steps)]
    ends = [*firsts[1:], len(steps) + 1]
    if any(end < first for first, end in zip(firsts, ends, strict=True)):
        return [({}, steps)]
    return [
        (run, steps[first - 1 : end - 1])
        for run, first, end in zip(bounds, firsts, ends, strict=True)
    ]


def _timing(extra: Any) -> tuple[int | None, float | None]:
    """``started_at`` (ms since the epoch) and ``latency_ms`` of an ``extra`` object; None for
    either that is missing, not an ISO time, or not a finite duration of at least 0."""
    if not isinstance(extra, Mapping):
        return None, None
    latency = finite_number(extra.get("latency_ms"))
    if latency is not None and latency < 0:
        latency = None
    return iso_ms(extra.get("started_at")), latency


def _run_error(bounds: Mapping[str, Any]) -> str | None:
    """Why a run failed, as its ``extra.runs`` entry says (None: it did not)."""
    error = bounds.get("error")
    if isinstance(error, str):
        return error
    return "failed (the trajectory does not say why)" if bounds.get("success") is False else None


def _content(message: Any) -> Any:
    """A step's message or a result's content as a transcript entry's content: text as it
    is, a list of content parts as a list of objects."""
    if isinstance(message, str) or message is None:
        return message
    return [part.model_dump(mode="json", exclude_none=True) for part in message]
