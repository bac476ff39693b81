"""Restoring a session from its files: ``resume`` (an existing session, made current) and
``load_session`` (start or resume in one call, the agents rebuilt as your own objects)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from agenttrace._internal.checks import (
    check_callable,
    check_choice,
    check_flag,
    check_mapping,
    check_path,
)
from agenttrace._internal.runtime import runtime
from agenttrace.formats.session.files import (
    SessionFileError,
    check_session_files,
    find_or_name_session,
    find_session,
    session_home,
)
from agenttrace.formats.session.fullest import load_writers
from agenttrace.formats.session.rebuilt import mark_interrupted
from agenttrace.formats.session.unfinished import without_unfinished
from agenttrace.formats.stores.lease import StoreLease
from agenttrace.model import events as ev
from agenttrace.model.journal import Journal
from agenttrace.model.reentry import InDoubtAction, arm_reentry, check_policy
from agenttrace.model.unanswered import POLICIES, UnansweredPolicy, close_unanswered_calls
from agenttrace.session.from_store import fetch_to_resume
from agenttrace.session.interrupted_calls import account_interrupted
from agenttrace.session.leases import file_session_id, held_here
from agenttrace.session.leases import hold as hold_lease
from agenttrace.session.leases import take as take_lease
from agenttrace.session.reentry_match import say_unanswered
from agenttrace.session.state import AgentRecord, Session, new_session, use_session
from agenttrace.session.store_leases import let_go as let_go_stored
from agenttrace.session.store_leases import of as stored_lease

logger = logging.getLogger("agenttrace")


def resume(
    path_or_id: str | Path,
    sessions_dir: str | Path | None = None,
    *,
    unanswered_tool_calls: UnansweredPolicy = "reply",
    force: bool = False,
    reenter: bool = True,
    policy: Mapping[str, str] | None = None,
) -> Session:
    """Restore a session from its gzipped file or event stream (or its id in ``sessions_dir``)
    and make it current: the next agent run appends to it, with no id reused, and its root span
    links to the previous run's trace.

    If the session's last run was interrupted (its process was killed) and ``reenter`` (the
    default), the next root run re-enters it (docs/journal.md) if it is a call of the same
    entry point with the same arguments: every agent's transcript is set back now to where that
    run started, so calling the run's entry point again runs it from its start, and each step
    the journal holds is handled by ``policy`` (what to do with a tool call in doubt, per effect
    class, over ``agenttrace.model.reentry.DEFAULT_POLICY``). A next run that is another one
    (another entry point or other arguments, an implicit run, or one after a message an agent
    heard since the resume) is a new run: the transcripts are put back as the interrupted run
    left them before it starts, and an INFO line says why. An interrupted implicit run is not
    re-entered. ``reenter=False`` leaves the interrupted run as it stopped: the next run is a
    new one.

    A session named by a path with a session file's name (``runs/chat.events.jsonl`` or
    ``runs/chat.json.gz``) outside the sessions directory goes on being written there, beside
    the file (as :func:`load_session` and ``agenttrace resume FILE`` write it), so resuming the
    path again finds every run; one named by an id, or by a file named otherwise, is written to
    init's sessions directory.

    The session's lease is taken beside its files, and where it will be written if elsewhere
    (``agenttrace.session.leases``), and held until ``shutdown()`` or the process's end:
    another process resuming it meanwhile gets :class:`LeaseHeld`, as this call does while
    another holds it (:class:`LeaseError` where no lease file can be made). ``force`` takes the
    lease over from a holder that is stuck, or that another host's lease file names.

    LLM calls the killed process had in flight are put on the billing ledger (and the event
    stream) once, as ``interrupted``, by the resume that takes the session over after ``init``
    (``agenttrace.session.interrupted_calls``): the provider may have billed them.

    Tool calls a crash left without a result are answered by ``unanswered_tool_calls``
    (``agenttrace.model.unanswered``: by default a ``tool`` entry saying the call was
    interrupted, logged now, so call ``init()`` first for it to reach the files).

    A session that recorded nothing (its stream empty, or holding only a first line a kill
    tore) starts anew under its id: an empty session, made current, as ``new_session`` makes
    one.

    Raises :class:`SessionFileError` for anything that is not a readable session, and for one
    whose files in the sessions directory could not be written safely (a symlink there under
    its file name that leads out of the directory).
    """
    api = "agenttrace.resume"
    check_path(api, "path_or_id", path_or_id, optional=False)
    check_path(api, "sessions_dir", sessions_dir)
    checked_policy = _check_options(api, unanswered_tool_calls, force, reenter, policy)
    directory = Path(sessions_dir) if sessions_dir is not None else runtime.settings.sessions_dir
    # Written where it was read when named by a path with a session file's name, as
    # load_session and `agenttrace resume FILE` write it: the next resume of the path finds all
    # of it, not the runs before this one.
    home = session_home(str(path_or_id), runtime.settings.sessions_dir)
    return _resume(
        path_or_id, directory, home, force, reenter, checked_policy, unanswered_tool_calls
    )


def _resume(
    path_or_id: str | Path,
    directory: Path,
    home: Path | None,
    force: bool,
    reenter: bool,
    checked_policy: dict[str, InDoubtAction],
    unanswered_tool_calls: UnansweredPolicy,
) -> Session:
    """:func:`resume` once its arguments are checked; ``home``: where the session is written
    when not init's sessions directory (``load_session`` of a path: ``session_home``)."""
    # From the session store, if one is set and holds it: under its lease there, taken first.
    stored = fetch_to_resume(str(path_or_id), directory, force)
    with _let_go_unless_resumed(stored):
        return _restore(
            path_or_id, directory, home, force, reenter, checked_policy, unanswered_tool_calls
        )


@contextlib.contextmanager
def _let_go_unless_resumed(stored: StoreLease | None) -> Iterator[None]:
    """The store lease ``stored`` (just taken, or held already) is let go if the resume fails,
    unless this process records the session already (its lease here is held: so is that one)."""
    try:
        yield
    except BaseException:
        if stored is not None and not held_here(stored.session_id, runtime.settings.sessions_dir):
            let_go_stored(stored.session_id)
        raise


def _restore(
    path_or_id: str | Path,
    directory: Path,
    home: Path | None,
    force: bool,
    reenter: bool,
    checked_policy: dict[str, InDoubtAction],
    unanswered_tool_calls: UnansweredPolicy,
) -> Session:
    """:func:`resume` once the session's files are here."""
    path = find_session(str(path_or_id), directory)
    # Held while the files are read, so that what is read is what the last holder left.
    named = file_session_id(path)
    # A session this process records already (resumed again) may have calls running here.
    ours = named is not None and held_here(named, path.parent)
    reading = take_lease(named, path.parent, force=force, required=0) if named else None
    try:
        # Every writer's agents are restored; this process goes on writing the first writer's
        # files only (a joined writer's segment is never written by another process).
        (own, _), writers = load_writers(path, keep_damaged=True)
        loaded, cut_short = without_unfinished(path, own)
        if reading is not None and reading.holdings and not ours and _recording():
            # Under the lease, the process that ran them gone: the LLM calls it was killed in
            # are put on the bill once (agenttrace.session.interrupted_calls).
            loaded = account_interrupted(path, loaded, runtime.settings.billing_file)
        session = Session.from_file(loaded)
        session.directory = home
        session.store_lease = stored_lease(session.session_id)  # None: not the store's
        session.restore_writers(
            [without_unfinished(segment.path, segment)[0].events for segment, _ in writers]
        )
        mark_interrupted(session.runs)  # the process that ran them is gone: they will not end
        # Where the next run will write (init's sessions directory, or the session's own):
        # refused now, not at its first event, when all agenttrace could do is warn and not save.
        check_session_files(home or runtime.settings.sessions_dir, session.session_id)
        written = _written_directory(home)
        directories = (path.parent,) if written is None else (written, path.parent)
        hold_lease(session, *directories, force=force, required=len(directories) - 1)
    finally:
        if reading is not None:
            reading.give_back()  # the session holds it now (the same lease, when the ids agree)
    session.cut_short = cut_short
    session.resumed_from = str(path)
    session.restored_count = len(session.events)
    if cut_short:
        first = cut_short[0]
        name = first.get("name")
        what = (
            f"the creation of {first.get('agent_id')}{f' ({name})' if name else ''} with "
            f"{len(cut_short) - 1} of its first entries"
            if first.get("event_type") == ev.AGENT_CREATED
            else f"{len(cut_short)} events logged together"
        )
        logger.warning(
            "agenttrace: %s ends in %s, a write cut off by a crash; the call that logged them "
            "never returned, so they are left out",
            path,
            what,
        )
    if loaded.recorded_nothing:
        # Killed before the first line of its stream was whole: nothing to restore, nothing to
        # re-enter. The session starts anew under its id; its first write cuts the torn bytes
        # off first (agenttrace.recorder.store), so they never prefix a line.
        logger.info(
            "agenttrace: %s recorded nothing (its event stream holds no whole line): session %s "
            "starts anew",
            path,
            session.session_id,
        )
        session.resumed_from = None  # nothing was resumed: the session is new, as new_session's
        use_session(session)
        return session
    journal = Journal(loaded.journal)
    if reenter and arm_reentry(
        session, journal, loaded.events, checked_policy, unanswered_tool_calls
    ):
        # The transcripts are back where the interrupted run started: it answers its own calls
        # (or, if the next run is another one, they are put back then: reentry_match).
        use_session(session)
        return session
    interrupted = journal.interrupted_run() if reenter else None
    if interrupted is not None and interrupted.implicit:
        logger.info(
            "agenttrace: session %s: its interrupted run %s was an implicit run (LLM calls "
            "outside any decorated run) and is not re-entered: the next run is a new one",
            session.session_id,
            interrupted.key[0],
        )
    say_unanswered(path, *close_unanswered_calls(session, unanswered_tool_calls))
    use_session(session)
    return session


def _check_options(
    api: str,
    unanswered_tool_calls: object,
    force: object,
    reenter: object,
    policy: Mapping[str, str] | None,
) -> dict[str, InDoubtAction]:
    """Refuse a wrong option of ``resume`` or ``load_session`` now, before a lease is taken or a
    file read; returns the policy checked (``check_policy``)."""
    check_choice(api, "unanswered_tool_calls", unanswered_tool_calls, POLICIES)
    check_flag(api, "force", force, optional=False)
    check_flag(api, "reenter", reenter, optional=False)
    check_mapping(api, "policy", policy, "a mapping of effect classes to what to do")
    return check_policy(policy)


def _recording() -> bool:
    """Whether ``init`` set agenttrace up to write files (its ledger is the one written to)."""
    return runtime.recorder is not None and not runtime.disabled


def _written_directory(home: Path | None = None) -> Path | None:
    """Where a resumed session will be written: ``home`` (its own directory, when the program
    named one), else init's sessions directory (``None`` before ``init``: nothing is
    written)."""
    if runtime.recorder is None:
        return None
    return home if home is not None else runtime.settings.sessions_dir


def _started(session_id: str, home: Path | None, force: bool) -> Session:
    """A new session ``session_id`` with its root agent logged, made current; it holds its
    lease where it will be written (as a resumed one does), so no other process starts or
    resumes it meanwhile. ``home``: where it is written, when not init's sessions directory."""
    check_session_files(home or runtime.settings.sessions_dir, session_id)
    written = _written_directory(home)
    if written is not None:  # taken before the session is made current: refused, none is
        taken = take_lease(session_id, written, force=force)
    session = new_session(session_id)
    session.directory = home  # before its first event: the recorder writes it there
    if written is not None:
        hold_lease(session, written, force=force)  # the lease just taken, shared
        taken.give_back()
    session.log_agent_created(session.allocate_agent_id())
    return session


def load_session(
    session_file: str | Path,
    agent_factory: Callable[[AgentRecord, Session], Any] | None = None,
    *,
    unanswered_tool_calls: UnansweredPolicy = "reply",
    force: bool = False,
    reenter: bool = True,
    policy: Mapping[str, str] | None = None,
) -> tuple[Any, Session]:
    """``load_session`` (docs/events.md): (root agent, session), the session made current.

    Start or resume in one call: an existing session file, stream or session id is resumed
    (:func:`resume`, which takes its lease; ``force`` as there); where there is none yet, a new
    session is started with its root agent logged, where the same call finds it next time
    (``find_or_name_session``): named by an id, in the sessions directory; named by a path
    (``"runs/chat.events.jsonl"`` or ``"runs/chat.json.gz"``), session ``chat`` with its event
    stream at ``runs/chat.events.jsonl`` and its session file beside it. So is one whose stream
    recorded nothing (a process killed before its first line was whole), in that stream. A
    session named by such a path, new or not, is written there, not in the sessions directory,
    so every later call with the path resumes all of it (as ``resume`` of the path does; a file
    named otherwise is written to the sessions directory). A missing path named otherwise
    (``chat.txt``, ``chat.jsonl``) raises :class:`SessionFileError`: the two files of a session
    find each other by these names, and the command line reads them by them.

    The path is the program's own, not untrusted input: a path outside the sessions directory is
    taken as written, and its missing parent directories are created (as the sessions directory
    is, ``0o700``), since a program that names ``runs/<date>/chat.events.jsonl`` expects the run
    to be recorded there, not a failure it could not have prevented but by a ``mkdir`` before
    every call. One that cannot be created (a file on the way, no permission) raises
    :class:`SessionFileError` naming it, now, not as a warning at the first write. Both happen
    once agenttrace records (after ``init``: before it, nothing is written). What the file holds
    stays untrusted: it is read under the same bounds and checks as any session file.

    A new session takes its lease too (after ``init``), so two processes never start the same
    session: the second gets :class:`LeaseHeld`, or, once the first has let it go, resumes
    what it wrote. A file that is not a session raises :class:`SessionFileError`.

    ``reenter`` and ``policy``: as for :func:`resume` (the agents are rebuilt as the interrupted
    run found them, when it is re-entered: a sub-agent it created is not rebuilt, unless the
    call that created it is answered from the journal, its body not run again).

    With ``agent_factory(record, session)`` the root and every sub-agent are rebuilt as your own
    agent objects (each factory result gets its sub-agents in ``.subagents`` by name, when it
    has that attribute); without it the root is an :class:`AgentRecord`.
    """
    api = "agenttrace.load_session"
    check_path(api, "session_file", session_file, optional=False)
    check_callable(api, "agent_factory", agent_factory, "a callable of (record, session)")
    checked_policy = _check_options(api, unanswered_tool_calls, force, reenter, policy)
    directory = runtime.settings.sessions_dir
    stored = fetch_to_resume(str(session_file), directory, force)  # as resume() does
    with _let_go_unless_resumed(stored):
        return _load(
            session_file,
            directory,
            agent_factory,
            force,
            reenter,
            checked_policy,
            unanswered_tool_calls,
        )


def _load(
    session_file: str | Path,
    directory: Path,
    agent_factory: Callable[[AgentRecord, Session], Any] | None,
    force: bool,
    reenter: bool,
    checked_policy: dict[str, InDoubtAction],
    unanswered_tool_calls: UnansweredPolicy,
) -> tuple[Any, Session]:
    """:func:`load_session` once the session's files are here (if the store holds them)."""
    reference = str(session_file)
    home = session_home(reference, directory)  # None: the sessions directory
    found = find_or_name_session(reference, directory, home)
    starting = None
    if isinstance(found, str) and _written_directory() is not None:
        # A new session: its lease first (LeaseHeld if another process holds it), then a second
        # look, under it: a process that started the session before has written its files by
        # the time it let the lease go, and this one resumes them instead of starting over.
        if home is not None:
            _make_home(reference, home)
        with contextlib.suppress(OSError):  # else the lease says where and why, in one line
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        starting = take_lease(found, home or directory, force=force)
    try:
        if starting is not None:
            found = find_or_name_session(reference, directory, home)
        if isinstance(found, str):
            session = _started(found, home, force)
        else:
            session = _resume(
                found, directory, home, force, reenter, checked_policy, unanswered_tool_calls
            )
    finally:
        if starting is not None:
            starting.give_back()  # the session holds it now (or let it go, on an error)
    root = session.root()
    if root is None and not session.events and not session.runs:
        # A session that recorded nothing (resume started it anew): started as a new one is,
        # with its root agent, so the next call resumes it like any other.
        session.log_agent_created(session.allocate_agent_id())
        root = session.root()
    if root is None:
        raise SessionFileError(f"{session_file}: the session has no root agent")
    if agent_factory is None:
        return root, session
    return build_agents(session, root, agent_factory), session


def _make_home(reference: str, home: Path) -> None:
    """Create the directory a new session named by the path ``reference`` is written to (and
    its missing parents, as the sessions directory is made); one that cannot be is a
    :class:`SessionFileError` naming it, in one line."""
    try:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise SessionFileError(
            f"{reference}: cannot create its directory {home}: {exc.strerror or exc}"
        ) from None
    if not home.is_dir():  # exist_ok passes a symlink to a file, on some platforms
        raise SessionFileError(f"{reference}: {home} is not a directory")


def build_agents(
    session: Session,
    root: AgentRecord,
    agent_factory: Callable[[AgentRecord, Session], Any],
    registry: Session | None = None,
) -> Any:
    """The root agent ``root`` of ``session`` and its sub-agents rebuilt by ``agent_factory``
    (``load_session``'s: each result gets its sub-agents in ``.subagents`` by name).
    ``registry``: where the agents' records are, when not ``session`` (a replay's: the agents
    as its run finds them)."""
    # A sub-agent the interrupted run created, that its re-entry creates again, did not exist
    # when the run started: rebuilt, the run's code would find it and tell it again what it
    # heard (nor is a sub-agent of it rebuilt).
    rewound = session.reentry.rewound if session.reentry is not None else None
    absent = rewound.absent if rewound is not None else frozenset()
    children: dict[str | None, list[AgentRecord]] = {}
    for record in (registry or session).agents.values():
        if record.agent_id not in absent:
            children.setdefault(record.parent_id, []).append(record)
    # Depth first, each agent before its sub-agents, without recursion: a file may nest agents
    # deeper than Python's stack, and name an agent as its own ancestor (built once, here).
    built: Any = None
    seen: set[str] = set()
    stack: list[tuple[AgentRecord, Any]] = [(root, None)]  # (record, its parent's .subagents)
    while stack:
        record, siblings = stack.pop()
        if record.agent_id in seen:
            continue
        seen.add(record.agent_id)
        agent = agent_factory(record, session)
        if record is root:
            built = agent
        if isinstance(siblings, dict) and record.name:
            siblings[record.name] = agent
        subagents = getattr(agent, "subagents", None)
        stack.extend((child, subagents) for child in reversed(children.get(record.agent_id, [])))
    return built
