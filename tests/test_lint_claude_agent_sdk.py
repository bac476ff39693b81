"""Trace lint finds nothing in a Claude Agent SDK session with a sub-agent (the scenario of
tests/test_claude_agent_sdk.py: the real SDK and its CLI against the scripted Anthropic server
on 127.0.0.1), e2e as those tests are (docs/lint.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agenttrace.views.lint import lint_session

from .anthropic_server import AnthropicServer
from .conftest import Traced
from .test_claude_agent_sdk import (  # noqa: F401  (its fixtures, used by name)
    anthropic_server,
    claude,
    collect,
    model,
    options,
    query,
    run,
    subagent_script,
    work,
)
from .test_lint import saved

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def test_a_claude_agent_sdk_run_with_a_sub_agent_has_no_finding(
    claude: None,  # noqa: F811  (the fixtures of tests/test_claude_agent_sdk.py)
    traced: Traced,
    model: AnthropicServer,  # noqa: F811
    work: Path,  # noqa: F811
) -> None:
    model.reset(*subagent_script(work, background=False))
    run(collect(query(prompt="delegate the notes", options=options(model, work))))
    assert (work / "notes.md").read_text() == "notes\n"
    assert lint_session(saved(traced)) == []
