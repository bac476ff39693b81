"""agenttrace's pytest plugin (the ``pytest11`` entry point ``agenttrace``): the ``agent_trace``
fixture, which runs a test's agent code under agenttrace and gives what it captured
(docs/how-to/testing.md).

Loading it does nothing but register the fixture and its marker. It is a module of its own,
outside the ``agenttrace`` package, because pytest loads plugins before any conftest: importing
anything under ``agenttrace`` would import the package (the OpenTelemetry SDK, and settings
read from the environment at import) before a conftest could set that environment up.
agenttrace is imported by the first test that asks for the fixture, not before. Set-up and
tear-down are in one place, ``agenttrace.testing.capture.capturing``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from agenttrace.testing.captured import CapturedRun

MARKER = "agent_trace"


def pytest_configure(config: pytest.Config) -> None:
    """Declare the marker, so ``--strict-markers`` takes it."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}(**init_arguments): agenttrace.init arguments for the agent_trace fixture",
    )


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
    ``@pytest.mark.agent_trace(**init_arguments)`` passes arguments to ``agenttrace.init``."""
    from agenttrace.testing.capture import capturing

    marker = request.node.get_closest_marker(MARKER)
    arguments = dict(marker.kwargs) if marker is not None else {}
    directory = tmp_path_factory.mktemp("agent_trace")
    with capturing(directory, session_name(request.node.name), **arguments) as captured:
        yield captured
