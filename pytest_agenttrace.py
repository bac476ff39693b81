"""agenttrace's pytest plugin (the ``pytest11`` entry point ``agenttrace``): the ``agent_trace``
fixture, which runs a test's agent code under agenttrace and gives what it captured, answers
its calls from a cassette when the test is marked ``agent_cassette``, and lints its session
after the test when ``--agenttrace-lint`` asks (docs/how-to/testing.md).

Loading it does nothing but declare the fixture, its markers and options. It is a module of its
own, outside the ``agenttrace`` package, because pytest loads plugins before any conftest:
importing anything under ``agenttrace`` would import the package (the OpenTelemetry SDK, and
settings read from the environment at import) before a conftest could set that environment up.
That is also why the cassette option and marker are declared here: this module is their one
source, which ``agenttrace.testing.cassette_options`` imports for a conftest that runs without
the plugin (the modes are ``agenttrace.testing.cassettes.CASSETTE_MODES``' too, which
tests/test_pytest_plugin_glue.py checks). agenttrace is imported by the first test that asks for
the fixture, not before. Set-up and tear-down are in one place,
``agenttrace.testing.capture.capturing``.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from agenttrace.testing.captured import CapturedRun

MARKER = "agent_trace"
CASSETTE_MARKER_LINE = (
    "agent_cassette(name=None, mode='once', redact=True): answer the test's LLM and tool calls "
    "from cassettes/<test module>/<name>.session.json.gz beside the test file, recording it "
    "by mode (once, none, new_episodes, all); --agent-cassette-mode overrides the mode"
)
"""The ``agent_cassette`` marker's line for ``config.addinivalue_line("markers", ...)``."""
CASSETTE_MODES = ("once", "none", "new_episodes", "all")
"""``agenttrace.testing.cassettes.CASSETTE_MODES``, which cannot be imported here (a test
checks they are equal)."""
LINT_MODES = ("off", "warn", "error")
"""``--agenttrace-lint``: lint no session, warn with the findings, or fail the test on them."""

_CALL_ERROR = pytest.StashKey[BaseException]()
"""What a test's call raised, for its fixture's tear-down: a cassette records no failed test."""


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--agent-cassette-mode``, ``--agenttrace-lint``, ``--agenttrace-lint-set`` and their
    ini options."""
    group = parser.getgroup("agenttrace")
    add_cassette_option(group)
    group.addoption(
        "--agenttrace-lint",
        action="store",
        dest="agenttrace_lint",
        default=None,
        choices=LINT_MODES,
        help="lint the session of each test that used agent_trace: warn lists the findings "
        "in a warning, error fails the test (default: the agenttrace_lint ini option, else off)",
    )
    group.addoption(
        "--agenttrace-lint-set",
        action="append",
        dest="agenttrace_lint_set",
        default=[],
        metavar="NAME=VALUE",
        help="a lint threshold (docs/lint.md, Settings), after the agenttrace_lint_set ini "
        "option's; repeatable",
    )
    parser.addini("agenttrace_lint", "off, warn or error: as --agenttrace-lint", default="off")
    parser.addini(
        "agenttrace_lint_set",
        "lint thresholds, NAME=VALUE a line: as --agenttrace-lint-set",
        type="linelist",
        default=[],
    )


def add_cassette_option(group: pytest.OptionGroup) -> None:
    """Register ``--agent-cassette-mode=once|none|new_episodes|all`` in an option group.
    Registering it twice (the plugin's and a conftest's) is harmless: the second does
    nothing."""
    try:
        group.addoption(
            "--agent-cassette-mode",
            action="store",
            dest="agent_cassette_mode",
            default=None,
            choices=CASSETTE_MODES,
            help="record mode of every agent_cassette marker: none fails any call a cassette "
            "does not answer, all records them again (default: each marker's, else once)",
        )
    except ValueError as exc:  # pytest's "option names {...} already added"
        if "already added" not in str(exc):
            raise


def pytest_configure(config: pytest.Config) -> None:
    """Declare the markers, so ``--strict-markers`` takes them, and check the lint options."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}(**init_arguments): agenttrace.init arguments for the agent_trace fixture",
    )
    config.addinivalue_line("markers", CASSETTE_MARKER_LINE)
    if lint_mode(config) not in LINT_MODES:
        raise pytest.UsageError(
            f"agenttrace_lint = {lint_mode(config)!r}: expected one of {', '.join(LINT_MODES)}"
        )
    if lint_assignments(config):  # asked for: agenttrace is imported to check them, not before
        from agenttrace.views.lint import LintSettingError, LintSettings

        try:
            LintSettings().updated(lint_assignments(config))
        except LintSettingError as exc:
            raise pytest.UsageError(f"--agenttrace-lint-set: {exc}") from None


def lint_mode(config: pytest.Config) -> str:
    """``--agenttrace-lint``, else the ``agenttrace_lint`` ini option."""
    option = config.getoption("agenttrace_lint", default=None)
    return str(option or config.getini("agenttrace_lint") or "off").strip()


def lint_assignments(config: pytest.Config) -> list[str]:
    """The lint thresholds: the ini option's, then the command line's (which win)."""
    ini = [str(line) for line in config.getini("agenttrace_lint_set")]
    return ini + list(config.getoption("agenttrace_lint_set", default=None) or [])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep what the test's call raised, for ``agent_trace``'s tear-down, which runs after."""
    report = yield
    if call.when == "call" and call.excinfo is not None and report.failed:
        item.stash[_CALL_ERROR] = call.excinfo.value
    return report


def session_name(node_name: str) -> str:
    """A session id from a test's name: its letters, digits, ``.``, ``_`` and ``-``, the rest
    ``_`` (``test_weather[Paris]`` -> ``test_weather_Paris_``), 128 at most."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", node_name).replace("..", "_")
    return (name if name[:1].isalnum() else f"t{name}")[:128]


@pytest.fixture
def agent_trace(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CapturedRun]:
    """agenttrace on a provider of the test's own, an in-memory exporter, a temporary sessions
    directory and ledger, quiet, content on spans; yields the
    :class:`~agenttrace.testing.captured.CapturedRun` and shuts it all down after the test.
    ``@pytest.mark.agent_trace(**init_arguments)`` passes arguments to ``agenttrace.init``;
    ``@pytest.mark.agent_cassette`` answers the test's calls from a cassette (or records it);
    ``--agenttrace-lint`` lints the session after the test."""
    from agenttrace.testing.capture import capturing
    from agenttrace.testing.cassette_options import cassette_for
    from agenttrace.testing.lint_gate import lint_gate

    marker = request.node.get_closest_marker(MARKER)
    arguments = dict(marker.kwargs) if marker is not None else {}
    directory = tmp_path_factory.mktemp("agent_trace")
    context = capturing(
        directory,
        session_name(request.node.name),
        cassette=cassette_for(request),
        lint=lint_gate(lint_mode(request.config), lint_assignments(request.config)),
        **arguments,
    )
    yield context.__enter__()
    error = request.node.stash.get(_CALL_ERROR, None)
    if error is None:
        context.__exit__(None, None, None)
        return
    # The test failed: its cassette saves nothing, and a call the cassette did not answer says
    # so (CassetteMismatch); the test's own error is reported once, by its call.
    try:
        context.__exit__(type(error), error, error.__traceback__)
    except BaseException as raised:
        if raised is not error:
            raise
