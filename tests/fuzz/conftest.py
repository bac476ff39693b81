"""The fuzz suite's tally at the end of the run: how many cases, how many read as sessions, and
that none failed (the README quotes these figures)."""

from __future__ import annotations

from typing import Any

from .harness import DEAREST, TALLY


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    files = sum(TALLY[kind] for kind in ("mutated", "generated", "regression"))
    if not files and not TALLY["event lists"]:
        return
    kinds = ", ".join(f"{TALLY[k]} {k}" for k in ("mutated", "generated", "regression") if TALLY[k])
    terminalreporter.write_line(
        f"fuzz: {files} files ({kinds}) through every reader, view and command, "
        f"{TALLY['readable']} of them read as sessions; {TALLY['event lists']} event lists "
        f"straight to the views; {TALLY['failed']} failed"
    )
    cpu, name = DEAREST[0]
    if name:
        terminalreporter.write_line(
            f"fuzz: the dearest case under the CPU deadline took {cpu:.2f} s of CPU ({name})"
        )
