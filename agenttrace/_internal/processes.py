"""Whether the process that started a run still runs on this machine (``agenttrace list``).

A run records the pid of its process (its ingress, ``cli.pid``). A pid alone can mislead: the
process may have died and its number gone to a later one. Where the system says when a process
started (Linux's ``/proc``), a process that started after the run did is not the run's.
"""

from __future__ import annotations

import os

PID_MAX = 1 << 22
"""The largest pid any Linux allows (``pid_max``'s ceiling); a recorded pid above it, or below
1, is not a process (``kill(0)`` and ``kill(-1)`` would mean groups, not a process)."""

_CLOCK_SLACK_MS = 2000
"""``/proc/stat``'s boot time is in whole seconds: a process that started this much after the
run did may still be its own."""


def process_alive(pid: object, started_ms: object) -> bool | None:
    """True if process ``pid`` exists here and did not start after ``started_ms`` (ms since the
    epoch, when the run started); False if it does not; None if ``pid`` is not a process id,
    or where this cannot be told without harm (not POSIX: Windows' ``os.kill`` ends the process
    instead of probing it)."""
    if os.name != "posix" or type(pid) is not int or not 0 < pid <= PID_MAX:
        return None
    try:
        os.kill(pid, 0)  # signal 0: nothing is sent, only whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    except OSError:
        return False
    began = process_start_ms(pid)
    # A process that started after the run did is a later one that got the number.
    return began is None or type(started_ms) is not int or began <= started_ms + _CLOCK_SLACK_MS


def process_start_ms(pid: int) -> int | None:
    """When process ``pid`` started, in ms since the epoch (None where ``/proc`` cannot say)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read(4096)
        with open("/proc/stat", "rb") as handle:
            system = handle.read(1 << 16)
        ticks = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None
    # Field 22 is the start time in clock ticks after boot; the command name before it (in
    # parentheses) may hold spaces and parentheses, so fields are counted from its last ')'.
    fields = stat[stat.rfind(b")") + 2 :].split()
    boot = next(
        (line.split()[1] for line in system.splitlines() if line.startswith(b"btime ")), b""
    )
    try:
        return int(boot) * 1000 + int(fields[19]) * 1000 // ticks
    except (IndexError, ValueError, ZeroDivisionError):
        return None
