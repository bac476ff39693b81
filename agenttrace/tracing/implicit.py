"""Implicit agent runs: under ``init()`` alone, the LLM calls of one agent make one run.

An LLM call made outside any agenttrace scope (a *bare* call: no ``@agent``, ``@turn``, ``@tool``
or ``with agenttrace.run(...)`` around it) goes into an *implicit run*, an ``invoke_agent`` span
agenttrace opens itself (``agenttrace.implicit=true``). Which run, by these rules, in order:

1. **Next turn.** The call continues an open run, as its next turn, if its messages extend that
   run's last request: the same first message, and the last message of that request still at
   its position (what an agent loop sends after appending the reply and the tool results; the
   history delta on the span is then just what was appended). The innermost such run wins; the
   runs nested in it have ended (their work returned, since it asks again).
2. **Sub-agent.** Otherwise it is a new agent (a new agent id, its own transcript). It nests,
   as a sub-agent under the current turn of the innermost open run (hosted by an op named
   after the tool call of that run's last reply that started it, when that can be told: see
   :func:`_tool_call_for`), if that run's work is still
   going on around it: the run was opened in another thread or asyncio task that handed this
   work over (``asyncio.gather``, a thread pool: the context came with it), or the call is made
   deeper in the call stack than that run's last call (from inside a tool or helper that agent's
   loop called). A reply that asked for tool calls is not a sign: agents end on one too (a
   ``final_answer`` tool), and the next agent would be taken for their sub-agent.
3. **New run.** Otherwise that run's work has ended, and so has the run; rule 2 is tried with
   the run around it, and with none left the call opens a new root run: a new trace, linked to
   the previous one.

An embedding call joins the innermost open run (a run whose only calls so far were embeddings
takes the first chat call as its next turn); with none open it opens one.

Open runs live in the context (:data:`~agenttrace._internal.context.implicit_run_var`): each
asyncio task and each thread has its own, and a task or a thread started while a run is open
(thread propagation carries it) sees that run as the one around it. Nothing holds a frame: the
stack is read for its depth only (frames cannot be weakly referenced, and holding one keeps its
locals alive).

A run ends when its agent's work is known to have ended, always through a call of agenttrace's
(never a timer): rule 1 or rule 3 in its thread or task, the end of the asyncio task it was
opened in, the next bare LLM call anywhere after the thread it was opened in ended (the thread's
end only marks it: code run while a thread is torn down must stay trivial),
``agenttrace.force_flush()`` (runs with no LLM call in flight) or ``shutdown()``. It
ends at the end of its last call (or of its last sub-agent), failed if its last call failed,
with a run nested in it ending first. A call that is still running (the program's call into
litellm, or a stream not yet read to its end) keeps its run open until it ends.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

from agenttrace import semconv as sc
from agenttrace._internal.context import implicit_run_var
from agenttrace._internal.errors import report_internal_error
from agenttrace._internal.runtime import runtime
from agenttrace.model.events import message_fields
from agenttrace.session.state import current_session
from agenttrace.tracing.agents import register_agent
from agenttrace.tracing.scopes import SessionScope, finish, make_current, start_session

__all__ = ["ImplicitRun", "current_run", "end_runs", "place_call"]

WHERE = "implicit agent run"

_OPEN, _CLOSING, _ENDED = 0, 1, 2

Place = tuple[int, int]
"""(thread id, id of the asyncio task or 0): where a run's calls are made."""

RequestPrint = tuple[int, int, int]
"""A chat request as rule 1 compares it: (message count, hash of the first message, hash of the
last), so nothing of the content is kept."""


class ImplicitRun:
    """One implicit agent run: its session scope, where it nests, and what ends it."""

    __slots__ = (
        "__weakref__",
        "children",
        "depth",
        "error",
        "holds",
        "last_end_ns",
        "parent",
        "place",
        "request",
        "session",
        "state",
    )

    def __init__(self, session: SessionScope, parent: ImplicitRun | None, place: Place) -> None:
        self.session: SessionScope | None = session
        """Its ``invoke_agent`` scope (``None`` once ended)."""
        self.parent = parent
        self.children: list[ImplicitRun] = []
        """Its sub-agents' runs that have not ended."""
        self.place = place
        self.depth = 0
        """The stack depth of its last call made in its own place."""
        self.request: RequestPrint | None = None
        """Its last chat request (``None``: none yet)."""
        self.holds = 0
        """Its calls still running (the program's calls into litellm and attempts in flight)."""
        self.last_end_ns = session.started_ns
        self.error: BaseException | None = None
        """What its last call failed with (``None``: it succeeded)."""
        self.state = _OPEN

    @property
    def is_open(self) -> bool:
        """Not ended, nor asked to end: calls may still join it."""
        return self.state == _OPEN

    def hold(self) -> None:
        """A call of this run starts running (the run stays open until :meth:`release`)."""
        with _lock:
            self.holds += 1

    def release(self, ended_ns: int | None = None) -> None:
        """That call stopped running (an attempt: its span ended at ``ended_ns``)."""
        with _lock:
            self.holds = max(0, self.holds - 1)
            if ended_ns is not None:
                self.last_end_ns = max(self.last_end_ns, ended_ns)
            ended: list[ImplicitRun] = []
            _end_if_idle(self, ended)
            _finish_all(ended)

    def call_ended(self, error: BaseException | None) -> None:
        """The program's call into litellm returned: the run ends failed if this was its last
        call and ``error`` left litellm."""
        self.error = error


_lock = threading.RLock()
_open_runs: set[ImplicitRun] = set()
_orphans: deque[list[ImplicitRun]] = deque()
"""The runs opened by threads that have ended, to end at the next call of ours."""


class _ThreadRuns:
    """The runs a thread opened outside asyncio tasks; when the thread ends, its locals go and
    this with them, which hands the runs to :data:`_orphans`."""

    __slots__ = ("__weakref__", "kept", "runs")

    def __init__(self) -> None:
        self.runs: list[ImplicitRun] = []
        self.kept = 8
        # Inline in the collector's thread: a deque append takes no lock (the runs end later).
        weakref.finalize(self, _orphans.append, self.runs)

    def add(self, run: ImplicitRun) -> None:
        runs = self.runs
        runs.append(run)
        if len(runs) > 2 * self.kept:  # amortised: a thread opens runs without end
            runs[:] = [r for r in runs if r.state != _ENDED]
            self.kept = max(8, len(runs))


_per_thread = threading.local()


# --- placing a bare call -------------------------------------------------------------------------


def place_call(messages: Any, *, chat: bool, model: str | None) -> ImplicitRun:
    """The implicit run a bare LLM call goes into, by the rules of the module docstring (runs
    whose work has ended are ended, a new one is opened if needed), held for the call (the
    caller releases it when the call returns)."""
    here = _place()
    depth = call_depth()
    request = request_print(messages) if chat else None
    with _lock:
        ended: list[ImplicitRun] = []
        _end_orphans(ended)
        innermost = _open_in_chain(implicit_run_var.get())
        try:
            run = _choose(innermost, here, chat, messages, ended)
        finally:
            _finish_all(ended)
        opened = run is None
        if run is None:
            parent = _parent_for_new(innermost, here, depth, ended)
            _finish_all(ended)
            run = _open(parent, here, model, messages if chat else None)
        if chat or opened:
            if run.place == here:
                run.depth = depth
            run.request = request
        run.holds += 1  # before the lock is let go: a flush in another thread must not end it
    if implicit_run_var.get() is not run:
        implicit_run_var.set(run)
    return run


def current_run() -> ImplicitRun | None:
    """The innermost open implicit run of this context, if any."""
    return _open_in_chain(implicit_run_var.get())


def _choose(
    innermost: ImplicitRun | None,
    here: Place,
    chat: bool,
    messages: Any,
    ended: list[ImplicitRun],
) -> ImplicitRun | None:
    """Rule 1 (and where an embedding goes): the open run this call continues, if any."""
    if not chat:
        return innermost
    run = innermost
    while run is not None:
        if (run.request is None and run.place == here) or _extends(run.request, messages):
            for child in list(run.children):
                _close(child, ended)
            return run
        run = _open_in_chain(run.parent)
    return None


def _parent_for_new(
    innermost: ImplicitRun | None, here: Place, depth: int, ended: list[ImplicitRun]
) -> ImplicitRun | None:
    """Rules 2 and 3: the run a new agent's run nests in (``None``: a root run); the runs whose
    work has ended on the way are ended."""
    run = innermost
    while run is not None:
        if run.place != here or depth > run.depth:
            return run
        _close(run, ended)
        run = _open_in_chain(run.parent)
    return None


def _open(
    parent: ImplicitRun | None, here: Place, model: str | None, messages: Any = None
) -> ImplicitRun:
    """Open a new agent's run: a root run, or a sub-agent of ``parent`` under its current turn,
    hosted by an op named after the tool call of ``parent``'s reply that started it (found from
    the sub-agent's first request, ``messages``), else after the service."""
    name = runtime.settings.service_name
    if parent is None or parent.session is None:
        agent_id = register_agent(current_session(), name=name, language_model=model)
        session = start_session(name, agent_id=agent_id, model=model, implicit=True)
        parent = None
    else:
        host = parent.session
        record = host.run.session
        agent_id = record.allocate_agent_id()
        # Created by the parent's work since its last reply: that reply is its cause.
        record.log_agent_created(
            agent_id, cause=_last_reply(host), name=name, language_model=model, at=host
        )
        call = _tool_call_for(host, messages)
        undo = make_current(host)
        try:
            session = start_session(
                name,
                agent_id=agent_id,
                model=model,
                implicit=True,
                host_name=call[1] if call is not None else None,
                host_attributes={sc.GEN_AI_TOOL_CALL_ID: call[0]} if call is not None else None,
            )
        finally:
            undo()
    run = ImplicitRun(session, parent, here)
    if parent is not None:
        parent.children.append(run)
    _open_runs.add(run)
    task = _current_task()
    if task is not None:
        # The task's end is the end of its agents' work.
        task.add_done_callback(functools.partial(_task_done, run))
    else:  # and the thread's end, once a call of ours sees it
        watch = getattr(_per_thread, "runs", None)
        if watch is None:
            watch = _per_thread.runs = _ThreadRuns()
        watch.add(run)
    return run


def _tool_call_for(host: SessionScope, messages: Any) -> tuple[str, str, str, str | None] | None:
    """The tool call of ``host``'s last reply that a sub-agent whose first request is
    ``messages`` runs in (claimed, so a second sub-agent gets another): the only call not yet
    claimed, else the one whose arguments hold the sub-agent's task (its last user message),
    else the oldest when all have one name. ``None`` when that cannot be told."""
    turn = host.auto_turn
    if turn is None:
        return None
    calls = turn.unclaimed_tool_calls()
    if not calls:
        return None
    chosen = calls[0] if len(calls) == 1 else None
    task = _task_text(messages)
    if chosen is None and task:
        spelled = {task, json.dumps(task)[1:-1], json.dumps(task, ensure_ascii=False)[1:-1]}
        holding = [call for call in calls if any(text in call[2] for text in spelled)]
        chosen = holding[0] if holding else None
    if chosen is None and len({call[1] for call in calls}) == 1:
        chosen = calls[0]
    if chosen is None:
        return None
    return turn.claim_tool_call(chosen[1], chosen[0])


def _task_text(messages: Any) -> str | None:
    """The text of the last user message of a request, if it has one."""
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        return None
    for message in reversed(messages):
        try:
            fields = message if isinstance(message, Mapping) else message_fields(message)
        except Exception:  # a message object that will not be read
            continue
        role = fields.get("role")
        if (role.value if isinstance(role, Enum) else role) != "user":
            continue
        content = fields.get("content")
        if isinstance(content, str):
            return content or None
        if isinstance(content, Sequence):
            texts = [p.get("text") for p in content if isinstance(p, Mapping)]
            return next((text for text in texts if isinstance(text, str) and text), None)
        return None
    return None


def _last_reply(session: SessionScope) -> str | None:
    """The message id of the agent's last transcript entry, if it is its reply."""
    record = session.run.session.agents.get(session.agent_id)
    if record is None or not record.transcript:
        return None
    last = record.transcript[-1]
    message_id = last.get("message_id")
    return message_id if last.get("role") == "assistant" and isinstance(message_id, str) else None


def _open_in_chain(run: ImplicitRun | None) -> ImplicitRun | None:
    while run is not None and run.state != _OPEN:
        run = run.parent
    return run


# --- ending runs ---------------------------------------------------------------------------------


def _close(run: ImplicitRun, ended: list[ImplicitRun], force: bool = False) -> None:
    """Ask ``run`` and its sub-agents' runs to end: each ends as soon as nothing of it runs
    (``force``: now); those that end are appended to ``ended``, inner ones first."""
    if run.state == _ENDED:
        return
    run.state = _CLOSING
    for child in list(run.children):
        _close(child, ended, force)
    if force and run.holds:
        run.holds = 0
        run.last_end_ns = max(run.last_end_ns, time.time_ns())
    _end_if_idle(run, ended)


def _end_if_idle(run: ImplicitRun, ended: list[ImplicitRun]) -> None:
    if run.state != _CLOSING or run.holds or run.children:
        return
    run.state = _ENDED
    _open_runs.discard(run)
    ended.append(run)
    parent = run.parent
    if parent is not None:
        parent.children.remove(run)
        parent.last_end_ns = max(parent.last_end_ns, run.last_end_ns)
        _end_if_idle(parent, ended)


def _finish_all(ended: list[ImplicitRun]) -> None:
    """End the spans of the runs ended (in order), each at the end of its last call."""
    while ended:
        run = ended.pop(0)
        session, run.session = run.session, None
        if session is None:
            continue
        try:
            finish(session, run.error, ended_ns=run.last_end_ns)
        except Exception as exc:
            report_internal_error(WHERE, exc)


def _end_orphans(ended: list[ImplicitRun]) -> None:
    """Ask the runs of threads that have ended to end (under the lock)."""
    while _orphans:
        for run in _orphans.popleft():
            _close(run, ended)


def _task_done(run: ImplicitRun, task: object) -> None:
    with _lock:
        ended: list[ImplicitRun] = []
        _close(run, ended)
        _finish_all(ended)


def end_runs(*, idle_only: bool = False) -> None:
    """End the open implicit runs: those with no call running (``idle_only``, for
    ``force_flush``), or all of them now (``shutdown``)."""
    with _lock:
        ended: list[ImplicitRun] = []
        _end_orphans(ended)
        for run in sorted(_open_runs, key=_depth_in_tree, reverse=True):
            if run.state == _ENDED or (idle_only and _busy(run)):
                continue
            _close(run, ended, force=not idle_only)
        _finish_all(ended)


def _busy(run: ImplicitRun) -> bool:
    return bool(run.holds) or any(_busy(child) for child in run.children)


def _depth_in_tree(run: ImplicitRun) -> int:
    depth = 0
    parent = run.parent
    while parent is not None:
        depth += 1
        parent = parent.parent
    return depth


# --- where a call is made, and what it asks -------------------------------------------------------


def _current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no event loop running in this thread
        return None


def _place() -> Place:
    task = _current_task()
    return threading.get_ident(), id(task) if task is not None else 0


_OWN_MODULES = ("agenttrace.", "wrapt.")


def call_depth() -> int:
    """How many frames deep the program's call into litellm is (agenttrace's own frames and
    wrapt's, between it and here, are not counted: their number depends on the entry point)."""
    frame = sys._getframe(1)
    while frame is not None and str(frame.f_globals.get("__name__", "")).startswith(_OWN_MODULES):
        frame = frame.f_back  # type: ignore[assignment]
    depth = 0
    while frame is not None:
        depth += 1
        frame = frame.f_back  # type: ignore[assignment]
    return depth


def request_print(messages: Any) -> RequestPrint | None:
    """What rule 1 keeps of a chat request (``None``: not a list of messages)."""
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)) or not messages:
        return None
    return len(messages), message_hash(messages[0]), message_hash(messages[-1])


def _extends(previous: RequestPrint | None, messages: Any) -> bool:
    """The request ``messages`` extends the one ``previous`` was taken of (or repeats it)."""
    if previous is None or not isinstance(messages, Sequence) or isinstance(messages, str):
        return False
    count, first, last = previous
    return (
        len(messages) >= count
        and message_hash(messages[0]) == first
        and message_hash(messages[count - 1]) == last
    )


def message_hash(message: Any) -> int:
    """A message's role, text and tool call id, hashed: equal for the same message rebuilt by a
    framework (a dict again, an enum role, ``cache_control`` marks added to its parts)."""
    try:
        fields = message if isinstance(message, Mapping) else message_fields(message)
        role = fields.get("role")
        if isinstance(role, Enum):
            role = role.value
        return hash((str(role), _text(fields.get("content")), str(fields.get("tool_call_id"))))
    except Exception:  # a message object that will not be read: only equal to itself
        return id(message)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, (bytes, bytearray)):
        return "\x00".join(_part_text(part) for part in content)
    return repr(content)


def _part_text(part: Any) -> str:
    if isinstance(part, Mapping):
        text = part.get("text")
        if isinstance(text, str):
            return text
        return repr(sorted((str(k), repr(v)) for k, v in part.items() if k != "cache_control"))
    return repr(part)
