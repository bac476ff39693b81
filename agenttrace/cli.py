"""The ``agenttrace`` command: resume a session, and read one.

Every command takes a session file, an event stream, or a session id (looked up in the sessions
directory). Anything that is not a readable session gets one line on stderr and exit status 2,
never a traceback. Built on click (already a dependency of litellm): subcommands, ``--help``,
and usage errors that exit 2.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib.util
import inspect
import logging
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from agenttrace._internal.escapes import escaped
from agenttrace._internal.extras import install_hint
from agenttrace.formats.session.files import (
    SNAPSHOT_SUFFIX,
    LoadedFile,
    SessionFileError,
    find_session,
    read_session_file,
    sibling_path,
    snapshot_path,
    stream_path,
)

if TYPE_CHECKING:
    from agenttrace.views.listing import Listing

EXIT_BAD_INPUT = 2
EXIT_RUN_FAILED = 1
PROGRESS_THRESHOLD = 8 << 20
"""Files above this many bytes get a progress bar while they are read (on a terminal only)."""


def _refusal(error: BaseException) -> str:
    """A refusal's one line as a command says it: a store lease held elsewhere is taken over
    with ``--force`` here (the API's message says ``force=True``)."""
    from agenttrace.formats.stores.lease import LeaseHeld as StoreLeaseHeld

    return error.for_command() if isinstance(error, StoreLeaseHeld) else str(error)


def fail(message: str, status: int = EXIT_BAD_INPUT) -> NoReturn:
    """One line on stderr, exit status 2 (bad input) unless told otherwise."""
    # A file name can hold a newline or a terminal escape: shown escaped, the line stays one.
    message = escaped(message)
    if status == EXIT_BAD_INPUT:
        _warnings.discard()  # bad input is one line: the error says what matters
    else:
        _warnings.flush()
    click.echo(f"agenttrace: error: {message}", err=True)
    sys.exit(status)


class _Warnings(logging.Handler):
    """agenttrace's warnings while a command runs (a torn last line skipped, a damaged session
    file): shown on stderr, one line each, when the command succeeds or fails after its input
    was read (``flush``); left out when the input is refused, whose error is the one line."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = " ".join(record.getMessage().split())
        except Exception:  # a message that cannot be formatted: logging's own rule, skip it
            return
        self.lines.append(escaped(text))

    def flush(self) -> None:
        lines, self.lines = self.lines, []
        for line in lines:
            click.echo(line, err=True)

    def discard(self) -> None:
        self.lines = []


_warnings = _Warnings()


verbose_option = click.option(
    "--verbose", "console", flag_value="verbose", help="A console line per LLM call and tool call."
)
"""``--verbose``: the console's line per LLM call and tool call (resume, replay, fork)."""


def source_run_options(function: Any) -> Any:
    """``--agent MODULE:FACTORY`` and ``--run N``: the factory that rebuilds a recorded
    session's agents and which of its runs runs again (``replay``, ``fork``)."""
    function = click.option(
        "--run",
        "run_index",
        type=click.IntRange(min=1),
        default=None,
        help="Which run, numbered as tree prints them [default: the last that ended].",
    )(function)
    return click.option("--agent", "factory_name", metavar="MODULE:FACTORY", required=True)(
        function
    )


def sessions_dir_option(function: Any) -> Any:
    """``--sessions-dir`` and ``--sessions-url`` (the latter kept aside: :func:`sessions_url`)."""
    function = click.option(
        "--sessions-url",
        envvar="AGENTTRACE_SESSIONS_URL",
        default=None,
        expose_value=False,
        callback=_keep_sessions_url,
        help="The session store sessions are taken from, by id (file:///path, "
        "s3://bucket/prefix, postgresql://...; docs/how-to/session-stores.md) "
        "[default: AGENTTRACE_SESSIONS_URL, else the sessions directory].",
    )(function)
    return click.option(
        "--sessions-dir",
        type=click.Path(file_okay=False, path_type=Path),
        envvar="AGENTTRACE_SESSIONS_DIR",
        default=None,
        help="Where sessions are looked up by id [default: ~/.agenttrace/sessions].",
    )(function)


def _keep_sessions_url(context: click.Context, _: Any, value: str | None) -> None:
    context.meta["agenttrace.sessions_url"] = (value or "").strip() or None


def sessions_url() -> str | None:
    """The session store the command takes sessions from (``--sessions-url``), if any."""
    context = click.get_current_context(silent=True)
    return None if context is None else context.meta.get("agenttrace.sessions_url")


def _names_an_id(reference: str) -> bool:
    """Whether a FILE|SESSION_ID argument is a session id (not a file the user named)."""
    if os.sep in reference or "/" in reference or Path(reference).exists():
        return False
    return not reference.endswith((SNAPSHOT_SUFFIX, ".events.jsonl", ".json"))


def resolve(reference: str, sessions_dir: Path | None) -> Path:
    """The file a FILE|SESSION_ID argument names (exit 2 with a reason if none): with a
    session store, an id is the store's session, rebuilt in its cache directory."""
    from agenttrace._internal.config import Settings

    url = sessions_url()
    if url is not None and _names_an_id(reference):
        return _from_store(url, reference)
    directory = sessions_dir or Settings.resolve().sessions_dir
    try:
        return find_session(reference, directory)
    except SessionFileError as exc:
        fail(str(exc))


def _from_store(url: str, session_id: str) -> Path:
    """The session ``session_id`` of the store at ``url``, rebuilt in its cache (exit 2 with
    one line if the URL, the store or the session is not one)."""
    from agenttrace.views.stored import stored_sessions

    try:
        with stored_sessions(url) as stored:
            return stored.fetch(session_id)
    except SessionFileError as exc:  # a StoreError too
        fail(str(exc))


class _Group(click.Group):
    """Usage errors as one line too (click's own are several: usage, hint, error)."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        _writable_output()
        logger = logging.getLogger("agenttrace")
        # Held while the command runs (see _Warnings), unless the program logs them itself.
        deferred = not logger.handlers and not logging.getLogger().handlers
        if deferred:
            _warnings.discard()
            logger.addHandler(_warnings)
        try:
            result = super().main(*args, **kwargs)
            _warnings.flush()
            return result
        except click.exceptions.Abort:
            fail("aborted")
        except click.UsageError as exc:
            fail(exc.format_message())
        except click.ClickException as exc:
            fail(exc.format_message())
        except RecursionError:
            # A file whose values nest deeper than Python's stack goes (the JSON reader takes
            # what its own stack allows, the views then walk it): bad input like any other.
            fail("the session's values are nested too deeply to read")
        finally:
            if deferred:
                logger.removeHandler(_warnings)


def _writable_output() -> None:
    """Text a session holds that no encoding can write (a lone surrogate: ``"\\ud800"`` is
    valid JSON) goes to stdout and stderr as its ``\\u`` escape, instead of failing the write."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="agenttrace-otel")
def main() -> None:
    """agenttrace: trace LLM agents, and resume and read their sessions."""


RESUME_HELP = """Continue SESSION (a file or id): rebuild its agents with the factory --agent
names, give the root agent PROMPT and run it. Every agent keeps its transcript, and message and
agent ids run on. The run's events and session file are written beside the file given, or in
the sessions directory the id was found in.

--agent MODULE:FACTORY: MODULE is imported with the current directory first on sys.path, so a
checkout's modules are found as well as installed ones: --agent examples.cafe:rebuild continues
`make demo`'s session from a checkout, --agent myproject.agents:rebuild your own.

FACTORY is agenttrace.load_session's agent factory: FACTORY(record, session) is called for
every agent of the session, root first, with its agenttrace.AgentRecord (agent_id, name,
language_model, messages()) and the restored agenttrace.Session, and returns your agent object
as the session left it, with record.agent_id as its agent_id. It must not create an agent (an
@agent_class constructor logs a new one). Sub-agents go into their parent's .subagents dict, by
name.

The root takes PROMPT through the agent interface of docs/responsibility.md: harken(PROMPT),
then response(), whose result is the answer; either may be async.

The resume holds the session's lease (SESSION.lease beside its files) until it ends, as every
process that writes a session does (a program that records it with init() from its first
record): while another process holds it, a resume fails at once with one line naming the holder
(and saying it looks hung when it is alive but its heartbeat stopped). A lease whose holder died
is taken over; --force takes it from a live holder that is stuck, or another host's. A session
in a store (--sessions-url) is resumed under its lease in the store too (host:pid, for
AGENTTRACE_LEASE_TTL seconds, renewed): another host holding it refuses the resume until its
lease expires, or --force.

Without --prompt, the run a crash interrupted is re-entered (docs/journal.md): the agents are
rebuilt as that run found them and the root's response() runs it again from its start; each
LLM reply and tool result the step journal holds is served from it, and a tool call left in
doubt is run again or not by its effect class (a call that may have had an effect stops the
run with the calls in doubt named: agenttrace doubts, agenttrace resolve). A session whose last
run ended has nothing to re-enter: exit status 2.

A session that cannot be continued (missing: resume never starts one; unreadable, no root
agent, no --agent, a factory that cannot be imported or raises, a root without harken or
response) gets one line on stderr and exit status 2, before the run starts; a run that fails
ends with one such line and exit status 1.
"""


@main.command(help=RESUME_HELP)
@click.argument("session")
@click.option(
    "--prompt",
    default=None,
    help="The new user message for the root agent: a new run. Without it, the run a crash "
    "interrupted is re-entered (see above).",
)
@click.option(
    "--agent",
    "factory_name",
    metavar="MODULE:FACTORY",
    default=None,
    help="The agent factory that rebuilds the session's agents (see above).",
)
@click.option(
    "--model",
    default=None,
    help="Run every agent on this litellm model instead of the one its record names "
    "(the factory sees it as record.language_model).",
)
@sessions_dir_option
@click.option(
    "--billing-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The billing ledger the run's LLM calls and tool calls are appended to "
    "[default: AGENTTRACE_BILLING_FILE, else ~/.agenttrace/accounting.jsonl].",
)
@verbose_option
@click.option(
    "--trace", "console", flag_value="trace", help="Also the request and response bodies."
)
@click.option(
    "--force",
    is_flag=True,
    help="Take the session's lease from a process that is stuck, or that another host's lease "
    "file names (only if that process no longer writes the session).",
)
def resume(
    session: str,
    prompt: str | None,
    factory_name: str | None,
    model: str | None,
    sessions_dir: Path | None,
    billing_file: Path | None,
    console: str | None,
    force: bool,
) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    url = sessions_url()
    if url is not None and _names_an_id(session):
        # Into the sessions directory, not the cache: the run goes on writing there, and its
        # shipper goes on from what the store holds.
        path = _into_sessions_dir(url, session, sessions_dir)
    else:
        path = resolve(session, sessions_dir)
    try:
        read_session_file(path)
    except SessionFileError as exc:
        # A damaged session file with its stream beside it resumes from the stream (the file
        # kept aside: agenttrace.formats.session.damaged); anything else is refused now.
        stream = sibling_path(path)
        if not path.name.endswith(".json.gz") or stream is None or not stream.is_file():
            fail(str(exc))
    if not factory_name:
        fail(
            "resume needs --agent MODULE:FACTORY, the function that rebuilds the session's "
            "agents (agenttrace resume --help)"
        )
    module_name, attribute = _split_factory_name(factory_name)
    if billing_file is not None:
        _check_appendable(billing_file)

    import agenttrace
    from agenttrace.formats.session.lease import LeaseError

    # Beside the file: the run appends to its stream and rewrites its session file.
    directory = path.absolute().parent
    tracing = agenttrace.init(
        console=console,  # type: ignore[arg-type]
        sessions_dir=directory,
        sessions_url=url,
        billing_file=billing_file,
    )
    factory = _import_factory(factory_name, module_name, attribute)
    building: list[agenttrace.AgentRecord] = []

    def build(record: agenttrace.AgentRecord, restored: agenttrace.Session) -> Any:
        if model:
            record = dataclasses.replace(record, language_model=model)
        building.append(record)
        try:
            return factory(record, restored)
        except Exception as exc:  # the user's code: reported as one line, not a traceback
            raise _FactoryFailed(f"--agent {factory_name} failed on {record.agent_id}") from exc

    try:
        # A store's session by its id: load_session takes its lease in the store before it
        # reads it again (LeaseHeld while another host holds it; --force takes it over).
        reference = session if url is not None and _names_an_id(session) else path
        root, restored = agenttrace.load_session(
            reference, build, force=force, reenter=prompt is None
        )
    except (SessionFileError, LeaseError) as exc:
        fail(_refusal(exc))
    except _FactoryFailed as exc:
        fail(f"{exc}: {_one_line(exc.__cause__)}")
    if prompt is None and restored.reentry is None:
        fail(
            f"{path}: its last run was not interrupted (or was an implicit run, LLM calls outside "
            "any decorated run, which is never re-entered), so there is nothing to re-enter: "
            "give --prompt for a new run"
        )
    if prompt is None and not _reenters_without_arguments(restored):
        fail(
            f"{path}: its interrupted run was called with arguments, and resume calls "
            "response() with none, so it would be a new run: re-enter it from Python "
            "(agenttrace.resume, then the same call), or give --prompt for a new run"
        )
    wanted = ("harken", "response") if prompt is not None else ("response",)
    missing = [m for m in wanted if not callable(getattr(root, m, None))]
    if missing:
        fail(
            f"the root agent {building[0].agent_id} that --agent {factory_name} rebuilt "
            f"(type {type(root).__name__}) cannot take a prompt: it has no "
            + " and no ".join(f"{m}()" for m in missing)
        )
    try:
        if prompt is not None:
            _call(root.harken, prompt)
        answer = _call(root.response)  # without a prompt: the interrupted run, from its start
    except Exception as exc:
        tracing.shutdown()  # the failed run is saved too
        fail(f"the resumed run failed: {_one_line(exc)}", EXIT_RUN_FAILED)
    tracing.force_flush()
    new = restored.events[restored.restored_count :]
    added = f"New messages {new[0]['message_id']}..{new[-1]['message_id']}" if new else "No message"
    click.echo(f"Answer: {answer}")
    click.echo(f"{added}, {len(restored.agents)} agents, agent counter at {restored.agent_counter}")
    click.echo(f"  event stream: {stream_path(directory, restored.session_id)}")
    click.echo(f"  session file: {snapshot_path(directory, restored.session_id)}")
    tracing.shutdown()


def _into_sessions_dir(url: str, session_id: str, sessions_dir: Path | None) -> Path:
    """The store's session ``session_id`` rebuilt in the sessions directory (where this host
    wrote more of it than it shipped, its own files are kept); exit 2 with one line if it
    cannot be."""
    from agenttrace._internal.config import Settings
    from agenttrace.formats.stores import open_store
    from agenttrace.formats.stores.materialize import materialize

    directory = sessions_dir or Settings.resolve().sessions_dir
    try:
        store = open_store(url)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            return materialize(store, session_id, directory, keep_longer=True)
        finally:
            store.close()
    except OSError as exc:
        fail(f"{directory}: cannot write: {exc.strerror or exc}")
    except SessionFileError as exc:  # a StoreError too
        fail(str(exc))


def _reenters_without_arguments(restored: Any) -> bool:
    """Whether the interrupted run ``restored`` re-enters is re-entered by a call with no
    arguments, as ``resume`` makes it (a journal of an earlier release keeps no fingerprint of
    them: its run is re-entered by any call)."""
    from agenttrace.tracing.run_arguments import arguments_fingerprint

    reentry = restored.reentry
    expected = reentry.fingerprint if reentry is not None else None
    return expected is None or expected == arguments_fingerprint(None)


def _check_appendable(path: Path) -> None:
    """Exit 2 now, before the run starts, if ``--billing-file`` cannot be appended to (the
    ledger would otherwise keep the run's lines in memory and warn at exit)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Non-blocking: a FIFO nobody reads is refused (ENXIO), not waited on forever.
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NONBLOCK", 0)
        os.close(os.open(path, flags, 0o600))
    except OSError as exc:
        fail(f"--billing-file {path}: cannot append to it: {exc.strerror or exc}")


_FACTORY_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def _split_factory_name(name: str) -> tuple[str, str]:
    """(module, attribute path) of ``--agent MODULE:FACTORY`` (exit 2 if it is not one)."""
    if not _FACTORY_NAME.match(name):
        fail(
            f"--agent {name!r} is not MODULE:FACTORY (a dotted module name, a colon, a "
            "callable in it: examples.cafe:rebuild)"
        )
    module_name, _, attribute = name.partition(":")
    return module_name, attribute


def _import_factory(name: str, module_name: str, attribute: str) -> Callable[..., Any]:
    """The callable ``--agent`` names, imported with the current directory first on sys.path
    (as ``python -m`` has it); exit 2 with the reason when it cannot be had."""
    import importlib

    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        found: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            fail(f"--agent {name}: no module {module_name!r} in {here} or the installed packages")
        fail(f"--agent {name}: importing {module_name} failed: {_one_line(exc)}")
    except Exception as exc:  # the user's module failed while it was imported
        fail(f"--agent {name}: importing {module_name} failed: {_one_line(exc)}")
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            fail(f"--agent {name}: {module_name} has no {attribute!r}")
    if not callable(found):
        fail(f"--agent {name}: {attribute} is not callable (type {type(found).__name__})")
    return found  # type: ignore[no-any-return]


def _call(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)``, awaited when it gives an awaitable (an async agent method)."""
    result = function(*args)
    if inspect.isawaitable(result):

        async def wait() -> Any:
            return await result

        return asyncio.run(wait())
    return result


class _FactoryFailed(Exception):
    """The ``--agent`` factory raised (the exception is the cause)."""


REPLAY_HELP = """Run a recorded run of SESSION (a file or id) again from its journal, into a
new session (docs/design/replay.md): --agent rebuilds the agents as they were when that run
started, the root agent's response() runs it again, and each LLM call and tool call the
recording answers is served from it (nothing is sent, run or billed). At the end, what could
not be replayed is listed.

--strict (the default) stops at the first call the recording does not answer, with a
field-level diff of the two requests (exit status 1); --lenient runs that call and every later
one live. --until LABEL runs LABEL and everything after it live. --offline refuses every
network connection while the run replays. A session, run or label that cannot be replayed gets
one line on stderr and exit status 2.
"""


@main.command(help=REPLAY_HELP)
@click.argument("session")
@source_run_options
@click.option("--until", default=None, metavar="LABEL", help="Run LABEL and after it live.")
@click.option("--strict/--lenient", default=True, help="What a divergence does (see above).")
@click.option("--offline", is_flag=True, help="Refuse every network connection.")
@sessions_dir_option
@verbose_option
def replay(
    session: str,
    factory_name: str,
    run_index: int | None,
    until: str | None,
    strict: bool,
    offline: bool,
    sessions_dir: Path | None,
    console: str | None,
) -> None:
    import agenttrace

    run_again(
        session,
        factory_name,
        sessions_dir,
        console,
        lambda path, build: agenttrace.replaying(
            path,
            run=run_index,
            until=until,
            mode="strict" if strict else "lenient",
            offline=offline,
            agent_factory=build,
        ),
    )


def run_again(
    session: str,
    factory_name: str,
    sessions_dir: Path | None,
    console: str | None,
    block: Callable[[Path, Callable[..., Any]], contextlib.AbstractContextManager[Any]],
) -> None:
    """What ``replay`` and ``fork`` do: trace beside the source's files, import ``--agent``'s
    factory, enter ``block(path, factory)`` (``agenttrace.replaying``'s or ``forking``'s),
    run the rebuilt root's ``response()`` in it, and print the answer and the report. Errors
    are one line, exit 2; a divergence or a failed run exit 1."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    path = resolve(session, sessions_dir)
    module_name, attribute = _split_factory_name(factory_name)

    import agenttrace

    # Beside the source's files (a store's session: shipped to the store as well).
    tracing = agenttrace.init(
        console=console,  # type: ignore[arg-type]
        sessions_dir=path.absolute().parent,
        sessions_url=sessions_url(),
    )
    factory = _import_factory(factory_name, module_name, attribute)

    def build(record: agenttrace.AgentRecord, restored: agenttrace.Session) -> Any:
        try:
            return factory(record, restored)
        except Exception as exc:  # the user's code: reported as one line, not a traceback
            raise _FactoryFailed(f"--agent {factory_name} failed on {record.agent_id}") from exc

    replaying = block(path, build)
    try:
        started = replaying.__enter__()
    except (SessionFileError, ValueError) as exc:
        fail(str(exc))
    except _FactoryFailed as exc:
        fail(f"{exc}: {_one_line(exc.__cause__)}")
    try:
        with contextlib.ExitStack() as stack:
            stack.push(replaying)
            if not callable(getattr(started.root, "response", None)):
                fail(
                    f"the root agent that --agent {factory_name} rebuilt (type "
                    f"{type(started.root).__name__}) has no response() to run it again"
                )
            answer = _call(started.root.response)
    except agenttrace.ReplayDivergence as exc:
        _replay_report(started, tracing)
        fail(str(exc), EXIT_RUN_FAILED)
    except Exception as exc:
        _replay_report(started, tracing)
        fail(f"the replayed run failed: {_one_line(exc)}", EXIT_RUN_FAILED)
    click.echo(f"Answer: {answer}")
    _replay_report(started, tracing)


FORK_HELP = """Fork a recorded run of SESSION (a file or id) at LABEL, into a new session
(docs/design/replay.md, "Fork"): --agent rebuilds the agents as they were when that run
started, the root agent's response() runs it again, every step before LABEL is served from the
recording and LABEL and every later step run live, each LLM call with the overrides: --model M
instead of the program's model, --system-prompt FILE as its system prompt, --set key=value a
request keyword (the value read as JSON, else as a string: --set temperature=0.2). The new
session's file names its source; its root span links to the source run's.

A call before LABEL the recording does not answer stops the fork with a field-level diff (exit
status 1). A session, run or label that cannot be forked, or a bad override, gets one line on
stderr and exit status 2.
"""

MAX_SYSTEM_PROMPT_BYTES = 1 << 20
"""The largest --system-prompt FILE read (a system prompt, not a data set)."""


@main.command(help=FORK_HELP)
@click.argument("session")
@click.option("--at", "label", required=True, metavar="LABEL", help="Run LABEL and after it live.")
@source_run_options
@click.option("--model", default=None, metavar="M", help="The model the live LLM calls ask.")
@click.option(
    "--system-prompt",
    "prompt_file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    metavar="FILE",
    help="The live LLM calls' system message (UTF-8 text).",
)
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="A request keyword of the live LLM calls (repeatable).",
)
@click.option("--offline", is_flag=True, help="Refuse every network connection.")
@sessions_dir_option
@verbose_option
def fork(
    session: str,
    label: str,
    factory_name: str,
    run_index: int | None,
    model: str | None,
    prompt_file: Path | None,
    settings: tuple[str, ...],
    offline: bool,
    sessions_dir: Path | None,
    console: str | None,
) -> None:
    from agenttrace.model.fork import parse_setting

    given: dict[str, Any] = {}
    for setting in settings:
        try:
            key, value = parse_setting(setting)
        except ValueError as exc:
            fail(str(exc).replace("settings: ", f"--set {setting}: ", 1))
        given[key] = value
    system_prompt = _system_prompt(prompt_file) if prompt_file is not None else None

    import agenttrace

    run_again(
        session,
        factory_name,
        sessions_dir,
        console,
        lambda path, build: agenttrace.forking(
            path,
            at=label,
            run=run_index,
            model=model,
            system_prompt=system_prompt,
            settings=given,
            offline=offline,
            agent_factory=build,
        ),
    )


def _system_prompt(path: Path) -> str:
    """The text of ``--system-prompt FILE`` (exit 2 if it cannot be read, is over
    :data:`MAX_SYSTEM_PROMPT_BYTES` or is not UTF-8)."""
    try:
        if not path.is_file():  # a FIFO would block the read, a device never end it
            fail(f"--system-prompt {path}: no such file (or not a regular one)")
        with path.open("rb") as file:
            data = file.read(MAX_SYSTEM_PROMPT_BYTES + 1)  # bounded: only what is needed
    except OSError as exc:
        fail(f"--system-prompt {path}: cannot read it: {exc.strerror or exc}")
    if len(data) > MAX_SYSTEM_PROMPT_BYTES:
        fail(f"--system-prompt {path}: over {MAX_SYSTEM_PROMPT_BYTES} bytes; not a system prompt")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        fail(f"--system-prompt {path}: not UTF-8 text (byte {exc.start})")


def _replay_report(replayed: Any, tracing: Any) -> None:
    """What the replay served and could not, and where its session is; its files written."""
    tracing.force_flush()
    for line in replayed.report.lines():
        click.echo(line)
    fork = replayed.fork
    what, at = ("Fork", f", at {fork.label}") if fork is not None else ("Replay", "")
    click.echo(
        f"{what} session {replayed.session.session_id} (of {replayed.source}, run "
        f"{replayed.run}{at})"
    )
    tracing.shutdown()


def _one_line(exc: BaseException | None) -> str:
    """An exception as one line: its type and its message, whitespace folded."""
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


@main.command()
@click.argument("session")
@click.option(
    "--agents",
    default=None,
    help="Comma-separated agent names or ids, e.g. Jack,Jill [default: every agent].",
)
@sessions_dir_option
def dialog(session: str, agents: str | None, sessions_dir: Path | None) -> None:
    """The distinct messages exchanged between AGENTS (every agent of SESSION without
    --agents), each once (grouped by substance); a tool's result is labelled as what the tool
    returned: (Host's tool ask_expert returned) Coffee."""
    from agenttrace.views.viewer import format_dialog

    viewer = _viewer(session, sessions_dir)
    if agents is None:
        ids = list(viewer.list_agents())
    else:
        names = [a.strip() for a in agents.split(",") if a.strip()]
        if not names:
            fail("--agents names no agent (give names or ids, e.g. Jack,Jill)")
        try:
            ids = viewer.agent_ids(names)
        except KeyError as exc:
            fail(f"no agent {exc.args[0]!r} in the session (agents: {_agent_list(viewer)})")
    click.echo(format_dialog(viewer.extract_dialog(ids)))


@main.command()
@click.argument("session")
@click.argument("agent")
@sessions_dir_option
def perspective(session: str, agent: str, sessions_dir: Path | None) -> None:
    """What AGENT (a name or id) heard, did, said and received."""
    viewer = _viewer(session, sessions_dir)
    try:
        (agent_id,) = viewer.agent_ids([agent])
    except KeyError:
        fail(f"no agent {agent!r} in the session (agents: {_agent_list(viewer)})")
    click.echo(viewer.extract_agent_perspective(agent_id))


@main.command()
@click.argument("session")
@click.option(
    "--follow",
    is_flag=True,
    help="Follow a running session: the tree is drawn again as its files change, each "
    "running node with how long it has run, until its runs end (or Ctrl-C).",
)
@sessions_dir_option
def tree(session: str, follow: bool, sessions_dir: Path | None) -> None:
    """The opTree of every run of SESSION as a text tree: path label, kind, name, status,
    tokens, cost, latency; sub-agents indented under the tool call that ran them."""
    needs_rich("tree")
    from agenttrace.views.tree import optree_tree

    if follow:
        path = resolve(session, sessions_dir)
        url = sessions_url()
        if url is not None and _names_an_id(session):  # the cache follows the store
            from agenttrace.views.stored import StoredSessions, follow_store

            follow_store(StoredSessions(url), only=session)
        _follow_tree(path)
        return
    loaded = shown(session, sessions_dir, events=False)
    if loaded is None:
        return
    runs = runs_of(loaded)
    _console().print(optree_tree(runs), markup=False, soft_wrap=True)


FOLLOW_POLL_S = 0.25
"""How often ``tree --follow`` looks at the session's files (two ``stat`` calls)."""
FOLLOW_STATUS_S = 2.0
"""How often it reads them anyway, to see a process that is gone."""


def _follow_tree(path: Path) -> None:
    """``tree --follow``: the live tree of the session ``path`` is a file of, in place on a
    terminal (rich's live display), until the session is no longer running or Ctrl-C."""
    import time

    from rich.live import Live
    from rich.text import Text

    from agenttrace.formats.session.files import SNAPSHOT_SUFFIX, STREAM_SUFFIX
    from agenttrace.views.live import files_state, read_live
    from agenttrace.views.tree import optree_tree

    name = path.name
    suffix = next((s for s in (STREAM_SUFFIX, SNAPSHOT_SUFFIX) if name.endswith(s)), None)
    if suffix is None:
        fail(f"{path}: --follow takes a session's .events.jsonl or .json.gz file, or its id")
    directory, session_id = path.parent, name[: -len(suffix)]

    def drawing(live: Any) -> Any:
        now = int(time.time() * 1000)
        if not live.loaded.runs:
            return Text(f"session {session_id}: {live.status}, no run yet")
        return optree_tree(live.loaded.runs, running_at=now if live.running else None)

    try:
        live = read_live(directory, session_id)
    except SessionFileError as exc:
        fail(str(exc))
    console = _console()
    with Live(drawing(live), console=console, auto_refresh=False) as display:
        read_at = time.monotonic()
        try:
            while live.running:
                time.sleep(FOLLOW_POLL_S)
                # Files that did not change can still end: a process killed is interrupted.
                stale = time.monotonic() - read_at > FOLLOW_STATUS_S
                if stale or files_state(directory, session_id) != live.state:
                    read_at = time.monotonic()
                    try:
                        live = read_live(directory, session_id)
                    except SessionFileError:
                        continue  # caught between two writes: the next look reads it
                display.update(drawing(live), refresh=True)
        except KeyboardInterrupt:
            pass  # the tree as it was last drawn stays on the screen
    if not console.is_terminal:
        # Not on a terminal, rich prints the last drawing without ending its line: the status
        # would be glued to the last node's ("... in progresssession ...: interrupted").
        console.line()
    console.print(f"session {session_id}: {live.status}", markup=False)


@main.command()
@click.argument("session")
@click.option("--json", "as_json", is_flag=True, help="Print the totals as JSON, for scripts.")
@sessions_dir_option
def stats(session: str, as_json: bool, sessions_dir: Path | None) -> None:
    """Totals over SESSION's whole tree, sub-agents included, by agent and by model: tokens
    in/out/cache, cost, LLM attempts ok/failed/interrupted (in flight when a kill struck: no
    tokens or cost known, the provider may have billed them), tool calls, wall time. A call
    whose model has no price in litellm's map makes the cost unknown ("at least $X (N calls
    of unknown cost)"; in --json, cost_usd null, cost_usd_known and
    llm_attempts_cost_unknown), never $0."""
    import json

    from agenttrace.formats.session.totals import session_stats

    # A session that recorded nothing totals nothing: --json gives its zeros, for scripts.
    loaded = shown(session, sessions_dir, events=False, say=not as_json)
    if loaded is None and not as_json:
        return
    totals = session_stats([] if loaded is None else runs_of(loaded))
    if as_json:
        click.echo(json.dumps(totals, indent=2))
        return
    needs_rich("stats")  # the tables; --json needs nothing more
    _print_stats(totals)


def _print_stats(totals: dict[str, Any]) -> None:
    from rich.table import Table
    from rich.text import Text

    from agenttrace.formats.session.totals import cost_text

    columns = (
        ("in", "input_tokens"),
        ("out", "output_tokens"),
        ("cache r", "cache_read_tokens"),
        ("cache w", "cache_write_tokens"),
        ("cost", "cost_usd"),
        ("llm ok", "llm_attempts_ok"),
        ("llm failed", "llm_attempts_failed"),
        ("llm interrupted", "llm_attempts_interrupted"),
        ("tools", "tool_calls"),
    )
    console = _console()
    console.print(
        f"{totals['runs']} run(s), wall time {totals['wall_time_ms'] / 1000:.2f} s", markup=False
    )
    for title, rows, key in (
        ("by agent", totals["by_agent"], "agent"),
        ("by model", totals["by_model"], "model"),
        ("total", [{"total": "all", **totals["total"]}], "total"),
    ):
        table = Table(title=title, title_justify="left")
        table.add_column(key)
        for heading, _ in columns:
            table.add_column(heading, justify="right")
        if key == "agent":
            table.add_column("wall s", justify="right")
        for row in rows:
            label = f"{row.get('name') or '-'} ({row['agent_id']})" if key == "agent" else row[key]
            # Cost in words: an unknown price is never shown as $0 (views.stats.cost_text).
            cells = [
                cost_text(row) if field == "cost_usd" else _cell(row.get(field, 0))
                for _, field in columns
            ]
            if key == "agent":
                cells.append(f"{row.get('wall_time_ms', 0) / 1000:.2f}")
            table.add_row(Text(str(label)), *cells)  # a name is text, not rich markup
        console.print(table)


def needs_rich(command: str) -> None:
    """Exit 2 with one line naming the extra if rich (the ``[cli]`` extra) is not installed."""
    if importlib.util.find_spec("rich") is None:
        fail(f"`agenttrace {command}` draws with rich: {install_hint('cli')}")


def _console() -> Any:
    """A rich console for stdout: the terminal's width, or a wide page when piped to a file."""
    from rich.console import Console

    return Console(highlight=False, width=None if sys.stdout.isatty() else 160)


def _cell(value: Any) -> str:
    return f"{value:.6f}" if isinstance(value, float) else str(value)


def load(reference: str, sessions_dir: Path | None) -> LoadedFile:
    """Read the session a CLI argument names, with a progress bar on a terminal for big files
    (when rich, the ``[cli]`` extra, is installed); a ``*.json`` document of another format
    (STD-008, ATIF) is read as the session it describes."""
    from agenttrace.formats.documents import is_document, read_document

    path = resolve(reference, sessions_dir)
    if is_document(path):  # a STD-008 session or ATIF trajectory: read as a session
        try:
            return read_document(path)
        except SessionFileError as exc:
            fail(str(exc))
    try:
        size = path.stat().st_size
    except OSError as exc:
        fail(f"{path}: cannot read: {exc.strerror or exc}")
    from agenttrace.views.account import read_account

    if importlib.util.find_spec("rich") is None:
        try:
            return read_account(path).loaded
        except SessionFileError as exc:
            fail(str(exc))
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

    shown = sys.stderr.isatty() and size > PROGRESS_THRESHOLD
    with Progress(
        TextColumn("reading {task.description}"),
        BarColumn(),
        DownloadColumn(),
        console=Console(stderr=True),  # never on stdout: it may be an export piped to a file
        transient=True,
        disable=not shown,
    ) as progress:
        task = progress.add_task(path.name, total=size)
        try:
            # The session's account (the one every view gives): the fullest picture of its
            # files, each call a kill cut short in it, its runs settled.
            return read_account(
                path, lambda done, total: progress.update(task, completed=done)
            ).loaded
        except SessionFileError as exc:
            fail(str(exc))


def recorded(
    reference: str,
    sessions_dir: Path | None,
    *,
    say: bool = True,
    err: bool = False,
    then: str = "",
) -> LoadedFile | None:
    """:func:`load`; ``None`` for a session that recorded nothing (its stream holds no whole
    line: its process was killed, or its disk was full, before the first was written), which
    is no error: a line says so (with ``say``; on stderr with ``err``; ``then`` added to it),
    for exit status 0."""
    loaded = load(reference, sessions_dir)
    if not loaded.recorded_nothing:
        return loaded
    if say:
        click.echo(escaped(_nothing_recorded(loaded) + then), err=err)
    return None


def _nothing_recorded(loaded: LoadedFile) -> str:
    """What the views say of a session that recorded nothing."""
    name = loaded.session_id or str(loaded.path)
    why = " (its event stream holds no whole line)" if loaded.kind == "stream" else ""
    return f"session {name} recorded nothing: no event, no run{why}"


def shown(
    reference: str,
    sessions_dir: Path | None,
    *,
    events: bool = True,
    runs: bool = True,
    say: bool = True,
) -> LoadedFile | None:
    """:func:`recorded`, as it may be printed: the redaction policy every output follows
    (secrets replaced, strings capped as on the spans), so ``perspective`` shows what the HTML
    export shows (``agenttrace.views.public``); the part a command does not show is left out.
    ``None`` for a session that recorded nothing (said so with ``say``)."""
    from agenttrace.views.public import public_view

    loaded = recorded(reference, sessions_dir, say=say)
    return None if loaded is None else public_view(loaded, events=events, runs=runs)


def runs_of(loaded: LoadedFile) -> list[dict[str, Any]]:
    """The opTrees of the session's runs (exit 2 with a reason when it holds none)."""
    if not loaded.runs:
        damaged = _damaged_session_file(loaded)
        if damaged is not None:
            # The opTree was to come from the session file; its stream, read instead, has
            # none. Said of the session file, the one at fault, whichever of the two was named.
            fail(f"{damaged}; the event stream beside it, {loaded.path}, holds no opTree")
        hint = (
            "an event stream: give its .json.gz session file"
            if loaded.kind == "stream"
            else "the session file records no run"
        )
        fail(f"{loaded.path}: no opTree in it ({hint})")
    return loaded.runs


def _damaged_session_file(loaded: LoadedFile) -> str | None:
    """Why the session file beside the stream ``loaded`` was read from cannot be read (the
    reader's one-line error, naming it), or ``None`` when there is none or it reads."""
    sibling = sibling_path(loaded.path) if loaded.kind == "stream" else None
    if sibling is None or not sibling.name.endswith(SNAPSHOT_SUFFIX) or not sibling.exists():
        return None
    try:
        read_session_file(sibling)
    except SessionFileError as exc:
        return str(exc)
    return None


LIST_HELP = """The sessions in the sessions directory, most recently written first: id, when
it started (UTC), agents, runs, status, tokens (in + out, sub-agents included) and cost. Only
the sessions shown are read.

Status: ended or failed (the session file is up to date and its last run ended, or failed),
running (else, when the process of the last run still runs on this machine, as its journal
line or its session file names it; when no process is known, when the event stream was written
in the last 10 minutes), interrupted (neither: killed or crashed mid-run), damaged (a file of
the session cannot be read: a row, with the reason, not an error). Runs, tokens and cost are
what `stats` says: every op that ended, from the stream and the session file.
"""


@main.command("list", help=LIST_HELP)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per session, for scripts.")
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="Show this many sessions (0: all of them).",
)
@sessions_dir_option
def list_(as_json: bool, limit: int, sessions_dir: Path | None) -> None:
    import json

    from agenttrace._internal.config import Settings
    from agenttrace.views.listing import list_sessions

    directory = _store_directory() or sessions_dir or Settings.resolve().sessions_dir
    try:
        listing = list_sessions(directory, limit or None)
    except OSError as exc:
        fail(f"{directory}: cannot list: {exc.strerror or exc}")
    if as_json:
        click.echo(json.dumps([row.as_json() for row in listing.rows], indent=2))
        return
    needs_rich("list")  # the table; --json needs nothing more
    _print_listing(listing, sessions_url())


def _store_directory(follow: bool = False) -> Path | None:
    """With a session store, the cache directory every session of it is rebuilt in (exit 2
    with one line if it cannot be); ``follow``: and kept up to date while the command runs
    (``serve``), on a thread. None without a store."""
    url = sessions_url()
    if url is None:
        return None
    from agenttrace.views.stored import StoredSessions, follow_store

    stored = StoredSessions(url)
    try:
        stored.fetch_all()
    except SessionFileError as exc:  # a StoreError too
        stored.close()
        fail(str(exc))
    if follow:
        follow_store(stored)
    else:
        stored.close()
    return stored.directory


def _print_listing(listing: Listing, url: str | None = None) -> None:
    """The table of ``listing``, titled by its directory (by ``url``, the store's, when the
    directory is the store's cache)."""
    from rich.table import Table
    from rich.text import Text

    from agenttrace._internal.times import iso_seconds

    console = _console()
    # A directory's name, like a file's, can hold a newline or a terminal escape.
    directory = escaped(url or str(listing.directory))
    if not listing.rows:
        console.print(Text(f"no sessions in {directory}"))
        return
    table = Table(title=Text(f"sessions in {directory}"), title_justify="left")
    for heading in ("id", "started (UTC)", "agents", "runs", "status", "tokens", "cost"):
        numbers = heading in ("agents", "runs", "tokens", "cost")
        table.add_column(heading, justify="right" if numbers else "left")
    for row in listing.rows:
        started = iso_seconds(row.started_ms)
        table.add_row(
            row.session_id,
            started.replace("T", " ").rstrip("Z") if started else "-",
            *(_cell(value) if value is not None else "-" for value in (row.agents, row.runs)),
            row.status,
            _cell(row.tokens) if row.tokens is not None else "-",
            row.cost,
        )
    console.print(table)
    for row in listing.rows:
        if row.error:  # the reader's reason, one line (names in it escaped)
            console.print(Text(f"{row.session_id}: {row.error}"), soft_wrap=True)
    if listing.total > len(listing.rows):
        shown = f"{len(listing.rows)} of {listing.total} sessions shown (--limit 0: all)"
        console.print(shown, markup=False)


SERVE_HELP = """A local web page that lists the sessions of the sessions directory (newest
first, running ones marked, agents, tokens, cost) and follows one as it runs: its opTree
with expand/collapse, the dialog and each agent's perspective, updated within a second as
events are written (server-sent events), each running call with how long it has run. It reads
only the files agenttrace writes, so it follows any process, and files of earlier releases.
JSON: GET /api/runs and /api/runs/ID/tree (docs/serve.md).

Safe by default: it listens on 127.0.0.1 only, and every request needs the token (random
unless --token gives one), sent as "Authorization: Bearer TOKEN" or by the link printed at
start, whose page keeps it in a cookie. Session content is shown as text only, under a
Content-Security-Policy that runs no inline script. Needs the [serve] extra.
"""


@main.command(help=SERVE_HELP)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="The address to listen on; anything but loopback lets other machines ask (the "
    "token still guards every request).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8377,
    show_default=True,
    help="The port (0: any free one).",
)
@click.option(
    "--token",
    envvar="AGENTTRACE_SERVE_TOKEN",
    default=None,
    help="The bearer token (or AGENTTRACE_SERVE_TOKEN, which other users cannot read in the "
    "process list) [default: a random one].",
)
@sessions_dir_option
def serve(host: str, port: int, token: str | None, sessions_dir: Path | None) -> None:
    missing = [
        name
        for name in ("starlette", "uvicorn", "sse_starlette")
        if importlib.util.find_spec(name) is None
    ]
    if missing:
        fail(f"`agenttrace serve` needs {', '.join(missing)}: {install_hint('serve')}")
    import secrets
    import socket

    import uvicorn

    from agenttrace._internal.config import Settings
    from agenttrace.views.serve.app import create_app

    if token is not None and not token.strip():
        fail("--token is empty: give a secret, or leave it out for a random one")
    token = token or secrets.token_urlsafe(24)
    directory = _store_directory(follow=True) or sessions_dir or Settings.resolve().sessions_dir
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(128)  # a request sent once the link is printed waits for the app
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    bound = listener.getsockname()[1]
    shown_host = f"[{host}]" if ":" in host else host
    url = sessions_url()
    if url is not None:
        from agenttrace.formats.stores import store_identity

        # The store's identity, not the URL: it may hold a password.
        click.echo(f"agenttrace serve: sessions in {store_identity(url) or 'the store'}")
    else:
        click.echo(f"agenttrace serve: sessions in {directory}")
    click.echo(f"open http://{shown_host}:{bound}/?token={token}", nl=True)
    if not _loopback(host):
        click.echo(
            f"agenttrace: warning: listening on {host}, not loopback: anyone who can reach "
            "this port and knows the token can read every session",
            err=True,
        )
    sys.stdout.flush()
    config = uvicorn.Config(create_app(directory, token), log_level="warning", lifespan="off")
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: uvicorn has stopped serving
        uvicorn.Server(config).run(sockets=[listener])


def _loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


FORMATS = ("jaeger", "otlp-json", "html", "exchanges", "std008", "atif")
DOCUMENT_FORMATS = ("std008",)
"""Formats whose -o may name a directory, where the file gets the format's own name."""


@main.command()
@click.argument("session")
@click.option(
    "--format", "format_", type=click.Choice(FORMATS), required=True, help="What to write."
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="File (else stdout); for std008 a directory too, where the file is named as STD-008 "
    "section 2.1 says ({date}-{sequence}-{task-summary}-multi.json).",
)
@sessions_dir_option
def export(session: str, format_: str, output: Path | None, sessions_dir: Path | None) -> None:
    """Export SESSION for others to see: a file Jaeger's UI loads through its JSON upload
    (jaeger), OTLP JSON (otlp-json), one self-contained HTML page with the opTree, the
    dialog and each agent's perspective (html), the Claude Agent SDK's exchange log, a JSON line
    per root run between session_start and session_end (exchanges), a STD-008 multi-agent
    session document (std008), or an ATIF trajectory with each sub-agent's embedded (atif;
    needs the [atif] extra, Python 3.11+). Secrets are redacted, as on the spans."""
    import json

    from agenttrace.views.exports import (
        exchanges_jsonl,
        to_html,
        to_jaeger,
        to_otlp_json,
        to_std008,
    )
    from agenttrace.views.exports.atif import AtifUnavailable, to_atif

    # The exports apply the redaction policy themselves (agenttrace.views.public).
    # On stderr: stdout may be the export's, piped.
    loaded = recorded(session, sessions_dir, err=True, then="; nothing to export, none written")
    if loaded is None:
        return
    if format_ != "html":
        runs_of(loaded)  # spans come from the opTree: without one there is nothing to export
    if output is not None and output.is_dir() and format_ not in DOCUMENT_FORMATS:
        fail(f"{output}: is a directory (only --format {'/'.join(DOCUMENT_FORMATS)} names files)")
    if format_ == "html":
        text = to_html(loaded)
    elif format_ == "exchanges":
        text = exchanges_jsonl(loaded)
    elif format_ == "std008":
        if output is not None and output.is_dir():
            _write_document(loaded, output)
            return
        text = json.dumps(to_std008(loaded), ensure_ascii=False, indent=2)
    elif format_ == "atif":
        try:
            text = json.dumps(to_atif(loaded), ensure_ascii=False, indent=2)
        except AtifUnavailable as exc:
            fail(str(exc))
    else:
        document = to_jaeger(loaded) if format_ == "jaeger" else to_otlp_json(loaded)
        text = json.dumps(document, ensure_ascii=False)
    if not text.endswith("\n"):
        text += "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8", errors="backslashreplace")
    except OSError as exc:
        fail(f"{output}: cannot write: {exc.strerror or exc}")
    click.echo(f"wrote {output}", err=True)


def _write_document(loaded: LoadedFile, directory: Path) -> None:
    """Write a STD-008 document into ``directory`` under its section 2.1 name."""
    from agenttrace.views.exports.std008 import write_std008

    try:
        path = write_std008(loaded, directory)
    except OSError as exc:
        fail(f"{directory}: cannot write: {exc.strerror or exc}")
    click.echo(f"wrote {path}", err=True)


VALIDATE_HELP = """Check FILE, a STD-008 multi-agent session document or its
single-agent form: its format (required fields, types, enums, ISO 8601 times; the JSON Schema
agenttrace ships, std008.schema.json) and the consistency checks of STD-008's section 6.2,
with its messages, one problem a line on stdout. An ATIF trajectory (one with an ATIF
schema_version) is checked by the atif package's models instead (the [atif] extra).

Section 6.2 names the tool that starts a sub-agent Task. By default any call that carries
subagent_info counts as one (agenttrace's sessions run sub-agents from tools of any name, and
sub-agents from their own tools), so agenttrace's exports validate; --strict applies
STD-008's rules to the letter: only calls named Task, in the session's own tool_calls.

Exit status 0: valid; 1: invalid; 2: FILE cannot be read or is not JSON.
"""


@main.command(help=VALIDATE_HELP)
@click.argument("file")
@click.option("--strict", is_flag=True, help="Apply section 6.2's Task rules to the letter.")
def validate(file: str, strict: bool) -> None:
    from agenttrace._internal.config import ReadLimits
    from agenttrace.formats.documents import kind_of, read_json
    from agenttrace.formats.std008.rules import validate as problems

    limits = ReadLimits.from_env()
    try:
        document = read_json(file, limits)
    except SessionFileError as exc:
        fail(str(exc))
    if kind_of(document) == "atif":
        _validate_atif(file, document)
        return
    errors = problems(document, strict=strict, max_depth=limits.nesting_depth)
    for error in errors:
        click.echo(escaped(error))
    if errors:
        sys.exit(EXIT_RUN_FAILED)
    collaboration = document.get("collaboration") or {}
    mode = collaboration.get("mode", "single")
    counts = f"{len(document.get('sub_sessions') or [])} sub-session(s), "
    counts += f"{len(document.get('messages') or [])} message(s)"
    click.echo(f"{file}: valid STD-008 document ({mode}, {counts})")


def _validate_atif(file: str, document: Any) -> None:
    """``agenttrace validate`` of an ATIF trajectory: the atif package's models judge it."""
    from agenttrace.formats.atif.writer import AtifUnavailable, atif_models

    try:
        models = atif_models()
    except AtifUnavailable as exc:
        fail(str(exc))
    import pydantic

    try:
        trajectory = models.Trajectory.model_validate(document)
    except pydantic.ValidationError as exc:
        for error in exc.errors():
            where = "$" + "".join(
                f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.get("loc", ())
            )
            line = f"{where}: {' '.join(str(error.get('msg', '')).split())}"
            click.echo(escaped(line))
        sys.exit(EXIT_RUN_FAILED)
    embedded = len(trajectory.subagent_trajectories or ())
    click.echo(
        f"{file}: valid ATIF trajectory ({trajectory.schema_version}, "
        f"{len(trajectory.steps)} step(s), {embedded} embedded sub-agent trajectory(ies))"
    )


DOUBTS_HELP = """List the tool calls of SESSION (a file or id) left in doubt: a run was killed
after the call started and before its outcome was recorded, so nothing says whether its effect
happened (docs/journal.md). Each with its run, step label, tool, effect class and arguments
(redacted). Decide each with `agenttrace resolve`.
"""


@main.command(help=DOUBTS_HELP)
@click.argument("session")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per call, for scripts.")
@sessions_dir_option
def doubts(session: str, as_json: bool, sessions_dir: Path | None) -> None:
    import json

    from agenttrace.formats.session.fullest import load_fullest
    from agenttrace.views.doubts import doubts_of

    path = resolve(session, sessions_dir)
    try:
        loaded = load_fullest(path)
    except SessionFileError as exc:
        fail(str(exc))
    found = doubts_of(loaded)
    if as_json:
        click.echo(json.dumps([doubt.as_json() for doubt in found], indent=2))
        return
    if not found:
        nothing = f" ({_nothing_recorded(loaded)})" if loaded.recorded_nothing else ""
        click.echo(escaped(f"no call in doubt{nothing}"))
        return
    for doubt in found:
        line = (
            f"{doubt.label}  {doubt.tool} ({doubt.effect})  run {doubt.run}"
            f"  arguments: {doubt.arguments if doubt.arguments is not None else '-'}"
        )
        click.echo(escaped(line))


LINT_HELP = """Find the defects SESSION's trace shows (a file or an id): the same tool call
in a loop, the same failing call again, two calls in turn (A-B-A-B), polling without progress,
a retry storm, retries with no backoff, the model asked again with nothing new, input near the
context window, steps that never ended, orphan runs, a sub-agent outside its caller's trace, an
unpriced model shown as $0, a tool call left in doubt (docs/lint.md).

A line per finding (its run, rule id and name, what happened where, and the tokens and cost it
wasted, ? where unknown), then the total. --json prints one JSON object (docs/lint.md).
--set NAME=VALUE changes a threshold (repeatable: --set max_attempts=5 --set ignore=AT204).

Exit status 0 with no finding, 1 with findings, 2 when SESSION cannot be read or a --set is
not a setting (one line on stderr).
"""


@main.command(help=LINT_HELP)
@click.argument("session")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON, for scripts.")
@click.option(
    "--set",
    "assignments",
    multiple=True,
    metavar="NAME=VALUE",
    help="Change a rule's threshold (docs/lint.md, Settings).",
)
@sessions_dir_option
def lint(
    session: str, as_json: bool, assignments: tuple[str, ...], sessions_dir: Path | None
) -> None:
    import json

    from agenttrace.views.lint import (
        LintSettingError,
        LintSettings,
        json_document,
        lint_session,
        text_lines,
    )

    try:
        settings = LintSettings().updated(assignments)
    except LintSettingError as exc:
        fail(f"--set {exc}")
    from agenttrace.formats.session.fullest import load_fullest

    path = resolve(session, sessions_dir)
    try:
        loaded = load_fullest(path)  # as doubts reads it: both files, both journals
        findings = lint_session(loaded, settings)
    except SessionFileError as exc:
        fail(str(exc))
    if as_json:
        click.echo(json.dumps(json_document(findings, loaded.session_id, settings), indent=2))
    else:
        for line in text_lines(findings):
            click.echo(escaped(line))
    if findings:
        _warnings.flush()
        sys.exit(EXIT_RUN_FAILED)


RESOLVE_HELP = """Decide what became of the in-doubt call at LABEL (a step label that
`agenttrace doubts SESSION` lists): --done RESULT_FILE (it happened: the file holds what the tool
would have returned, as JSON or as text), --not-applied (it did not happen: a resume runs it),
--retry (run it again whatever happened), or --abandon (a resume raises AbandonedToolCall from
the call). The decision is journaled; the next resume applies it. Takes the session's lease:
it fails while a resume, or the program that records the session, holds it.
"""


@main.command("resolve", help=RESOLVE_HELP)
@click.argument("session")
@click.argument("label")
@click.option(
    "--done", "result_file", type=click.Path(dir_okay=False, path_type=Path), default=None
)
@click.option("--not-applied", "not_applied", is_flag=True)
@click.option("--retry", is_flag=True)
@click.option("--abandon", is_flag=True)
@click.option("--evidence", help="Why you decided so (kept with the decision).")
@click.option("--run", "run_id", help="The run, when several left a call in doubt at LABEL.")
@click.option(
    "--force",
    is_flag=True,
    help="Take the session's lease from a process that is stuck, or that another host's lease "
    "file names (only if that process no longer writes the session).",
)
@sessions_dir_option
def resolve_(
    session: str,
    label: str,
    result_file: Path | None,
    not_applied: bool,
    retry: bool,
    abandon: bool,
    evidence: str | None,
    run_id: str | None,
    force: bool,
    sessions_dir: Path | None,
) -> None:
    from agenttrace.formats.session.lease import LeaseError
    from agenttrace.model.journal_lines import Decisions
    from agenttrace.views.doubts import ResolveError
    from agenttrace.views.doubts import resolve as journal_decision

    given: tuple[tuple[Decisions, bool], ...] = (
        ("done", result_file is not None),
        ("not_applied", not_applied),
        ("retry", retry),
        ("abandon", abandon),
    )
    chosen = [decision for decision, asked in given if asked]
    if len(chosen) != 1:
        fail("give one of --done RESULT_FILE, --not-applied, --retry, --abandon")
    path = resolve(session, sessions_dir)
    try:
        step = journal_decision(
            path,
            label,
            chosen[0],
            result_file=result_file,
            evidence=evidence,
            run=run_id,
            force=force,
        )
    except (ResolveError, LeaseError, SessionFileError) as exc:
        fail(str(exc))
    url = sessions_url()
    if url is not None and _names_an_id(session):
        _ship_decision(url, session, force)
    click.echo(f"{label} ({step.name}): {chosen[0].replace('_', ' ')}, journaled")


def _ship_decision(url: str, session_id: str, force: bool) -> None:
    """The decision ``resolve`` appended to the cached copy of a store's session: shipped to
    the store as its stream's next chunk, under the session's lease there (exit 2 with one
    line if the store refuses it, or another host holds the lease)."""
    from agenttrace.formats.session.lease import LeaseError
    from agenttrace.views.stored import stored_sessions

    try:
        with stored_sessions(url) as stored:
            stored.ship(session_id, force=force)
    except (SessionFileError, LeaseError) as exc:  # a StoreError too
        fail(f"{_refusal(exc)}; the decision is not in the store: run resolve again")


SCRIPTED_MODEL_HELP = """A scripted LLM on 127.0.0.1, to try an agent offline: it speaks
Anthropic's Messages API and OpenAI's Chat Completions API (streamed or not, text and tool
calls, with token usage), so litellm, the OpenAI SDK and the Anthropic SDK can be pointed at
it. Serves until Ctrl-C, after printing the base URL each client takes.

--script names a JSON file mapping a system prompt ("" for any other) to the list of replies
of a conversation, in order: {"text": "..."} or {"tool": NAME, "input": {...}}
(docs/how-to/offline-model.md). Without it, every request is answered "You said: " and the
last user message.
"""


@main.command("scripted-model", help=SCRIPTED_MODEL_HELP)
@click.option(
    "--script",
    "script_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The replies, as JSON [default: echo the last user message].",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="The port on 127.0.0.1 (0: any free one).",
)
def scripted_model(script_file: Path | None, port: int) -> None:
    from agenttrace.testing import ScriptedModel, ScriptError, load_script

    try:
        scripts = load_script(script_file) if script_file is not None else None
    except ScriptError as exc:
        fail(str(exc))
    try:
        model = ScriptedModel(scripts, port=port)
    except OSError as exc:
        fail(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}")
    base = model.api_base
    click.echo(f"agenttrace scripted-model: listening on {base} (Ctrl-C stops it)")
    click.echo(f"  litellm:   api_base={base!r}, api_key='offline' (openai/... or anthropic/...)")
    click.echo(f"  OpenAI:    OPENAI_BASE_URL={model.openai_base_url}")
    click.echo(f"  Anthropic: ANTHROPIC_BASE_URL={base}")
    sys.stdout.flush()  # read by whoever started it (a pipe is block-buffered)
    with contextlib.suppress(KeyboardInterrupt):
        model.serve_forever()
    model.close()


DIFF_HELP = """Compare run A and run B step by step. A and B are sessions (a file or an id)
with :RUN for run RUN as `agenttrace tree` numbers it ("run 1: ..."), the last run without;
they may be one session (`agenttrace diff s:1 s:2`).

The steps (agent runs, turns, LLM attempts, tool calls, sub-agents at any depth) are paired by
path label, and where labels disagree (one run inserted a step, so later labels shift) by the
longest common subsequence of (kind, name) among each parent's steps, so one inserted step
leaves the rest paired. Each pair is compared: an LLM attempt's request (its model, parameters
and the messages the recording kept; the step journal's fingerprint of the whole request for
what is kept nowhere, such as the tools offered) and response, a tool call's arguments and
result (the step journal's, else the op's), each step's status. Ids and times a provider makes
up on each call are left out.

Printed: the first divergence in run order (request, response, tool_arguments, tool_result,
status, or structure: a step in one run only, or of another kind or name), both labels and a
field-level diff there (JSON paths with both values, a long text as a unified diff; secrets
replaced, values capped); every step with its token, cost and latency deltas (B minus A); the
steps in one run only; the totals. --json prints the same as one JSON object
(docs/how-to/replay-diff.md). --html FILE writes it as one self-contained page too (no network,
no script): run A left, run B right, a row per step, the first divergence marked and linked
from a banner at the top, with its field-level diff.

Exit status 0 when the runs did the same, 1 when they differ (as diff(1)), 2 when a session
cannot be read or has no such run, or the --html FILE cannot be written (one line on stderr).
"""


@main.command(help=DIFF_HELP)
@click.argument("a")
@click.argument("b")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON, for scripts.")
@click.option(
    "--html",
    "html_file",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="Also write the comparison to this file as one HTML page, runs side by side.",
)
@sessions_dir_option
def diff(a: str, b: str, as_json: bool, html_file: Path | None, sessions_dir: Path | None) -> None:
    import json

    from agenttrace.views.diff.runs import diff_loaded, split_run

    sides = []
    for reference in (a, b):
        try:
            name, run = split_run(reference)
        except SessionFileError as exc:
            fail(str(exc))
        sides.append((load(name, sessions_dir), run, name))
    try:
        result = diff_loaded(sides[0], sides[1])
    except SessionFileError as exc:
        fail(str(exc))
    if html_file is not None:  # first: a file that cannot be written is the one line printed
        _write_diff_page(result, html_file)
    if as_json:
        click.echo(json.dumps(result.as_json(), indent=2))
    elif importlib.util.find_spec("rich") is not None:
        from agenttrace.views.diff.render import print_diff

        print_diff(result, _console())
    else:  # without the [cli] extra: the same report in plain columns
        from agenttrace.views.diff.render import diff_lines

        click.echo("\n".join(diff_lines(result)))
    if not result.same:
        _warnings.flush()
        sys.exit(EXIT_RUN_FAILED)


def _write_diff_page(result: Any, path: Path) -> None:
    """``agenttrace diff --html``: the page written to ``path``, said on stderr (stdout is the
    report's); a path that cannot be written is bad input."""
    from agenttrace.views.diff.html import to_html

    if path.is_dir():
        fail(f"{path}: is a directory")
    try:
        path.write_text(to_html(result), encoding="utf-8")
    except OSError as exc:
        fail(f"{path}: cannot write: {exc.strerror or exc}")
    click.echo(f"wrote {path}", err=True)


def _viewer(reference: str, sessions_dir: Path | None) -> Any:
    from agenttrace.views.public import public_agent_names, public_view
    from agenttrace.views.viewer import SessionViewer

    loaded = load(reference, sessions_dir)
    # The runs only for the names they give agents the events leave unnamed (a root agent):
    # one name for it in every view.
    names = public_agent_names(loaded)
    return SessionViewer(public_view(loaded, events=True, runs=False).events, names)


def _agent_list(viewer: Any) -> str:
    return ", ".join(f"{name} ({agent_id})" for agent_id, name in viewer.list_agents().items())


if __name__ == "__main__":  # python -m agenttrace.cli
    main()
