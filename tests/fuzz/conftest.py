"""The fuzz suite's tally at the end of the run: how many cases, how many read as sessions, and
that none failed (the README quotes these figures). In one process it is printed here; an xdist
worker hands it to the controller, which adds the workers' up (tests/conftest.py)."""

from __future__ import annotations

from typing import Any

from .harness import DEAREST, TALLY
from .tally import KEY, handed_over, summary_lines


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output[KEY] = handed_over(TALLY, DEAREST[0])


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    for line in summary_lines(TALLY, DEAREST[0]):
        terminalreporter.write_line(line)
