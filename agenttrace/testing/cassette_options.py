"""What the pytest plugin calls for LLM cassettes (docs/how-to/cassettes.md): the command-line
option ``--agent-cassette-mode``, the ``agent_cassette`` marker, and :func:`cassette_for`, the
cassette a test's marker and the option ask for.

A test marked ``@pytest.mark.agent_cassette("name", mode="once")`` uses the cassette
``cassettes/<test module>/<name>.session.json.gz`` beside its test file (the name defaults to
the test's own, parameters included). ``--agent-cassette-mode`` overrides every marker's mode:
``none`` makes any call a cassette does not answer fail its test, ``all`` records them all again.
Only a conftest or the plugin imports this module, so pytest is there. The ``agenttrace`` pytest
plugin (``pytest_agenttrace``) is the one source of the option and the marker's text (it may
import nothing of agenttrace when loaded, so they cannot live here) and calls
:func:`cassette_for` from its fixture; the other two are for a conftest that runs without it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agenttrace.testing.cassettes import CassetteMode, UseCassette, use_cassette
from pytest_agenttrace import CASSETTE_MARKER_LINE, add_cassette_option

OPTION = "--agent-cassette-mode"
MARKER = "agent_cassette"
MARKER_LINE = CASSETTE_MARKER_LINE
"""The marker's line for ``config.addinivalue_line("markers", MARKER_LINE)``."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-\[\]]")


def add_cassette_options(parser: Any) -> None:
    """Register ``--agent-cassette-mode=once|none|new_episodes|all`` on a pytest ``Parser``
    (from ``pytest_addoption``). Registering it twice (the plugin's and a conftest's) is
    harmless: the second does nothing."""
    add_cassette_option(parser.getgroup("agenttrace"))


def register_cassette_marker(config: Any) -> None:
    """Declare the ``agent_cassette`` marker on a pytest ``Config`` (from ``pytest_configure``),
    so ``--strict-markers`` takes it."""
    config.addinivalue_line("markers", MARKER_LINE)


def cassette_for(request: Any) -> UseCassette | None:
    """The cassette the test of a pytest ``FixtureRequest`` asks for with its ``agent_cassette``
    marker, in the mode ``--agent-cassette-mode`` gives, else the marker's (``once`` by
    default), to enter around the test; ``None`` for a test without the marker."""
    marker = request.node.get_closest_marker(MARKER)
    if marker is None:
        return None
    if len(marker.args) > 1:
        raise TypeError(f"@pytest.mark.{MARKER} takes one name, not {marker.args!r}")
    unknown = set(marker.kwargs) - {"name", "mode", "redact"}
    if unknown:
        raise TypeError(f"@pytest.mark.{MARKER}: unknown argument(s) {sorted(unknown)}")
    name = marker.args[0] if marker.args else marker.kwargs.get("name")
    if name is None:
        name = _UNSAFE.sub("_", request.node.name)
    option = request.config.getoption("agent_cassette_mode", default=None)
    mode: CassetteMode = option or marker.kwargs.get("mode", "once")
    return use_cassette(
        name,
        mode,
        directory=cassette_directory(request),
        redact=marker.kwargs.get("redact", True),
    )


def cassette_directory(request: Any) -> Path:
    """Where a test's cassettes live: ``cassettes/<test module>`` beside its test file."""
    path = Path(request.node.path)
    return path.parent / "cassettes" / path.stem
