"""The one outage buffer the appending file sinks share (recorder/outage.py): what a failing
write refused waits, in order per target, and is written again once writing works."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

from agenttrace.recorder.outage import OutageBuffer


class _File:
    """A real file whose writes fail while ``full`` is set (as a full disk's do)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.full = False

    def append(self, data: bytes) -> None:
        if self.full:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        with open(self.path, "ab") as handle:
            handle.write(data)


def test_refused_lines_wait_in_order_per_target_and_are_written_once_space_comes_back(
    tmp_path: Path,
) -> None:
    recovered: list[int] = []
    buffer = OutageBuffer(threading.Lock(), recovered.append, retry_interval=3600)
    a, b = _File(tmp_path / "a"), _File(tmp_path / "b")
    assert buffer.put("a", b"1\n", 1, a.append) is False
    a.full = True
    assert buffer.put("a", b"2\n", 1, a.append) is True  # the outage starts: said once
    a.full = False
    # Behind what waits, even though this write would work now: order is kept.
    assert buffer.put("a", b"3\n", 1, a.append) is False
    assert buffer.put("b", b"x\n", 1, b.append) is False  # another target is not held up
    assert (tmp_path / "a").read_bytes() == b"1\n"
    assert buffer.counts == {"a": 2} and buffer.waits("a") and not buffer.waits("b")
    assert buffer.flush() is True
    assert (tmp_path / "a").read_bytes() == b"1\n2\n3\n"
    assert (tmp_path / "b").read_bytes() == b"x\n"
    assert recovered == [2] and not buffer


def test_what_cannot_be_written_by_exit_is_handed_over_and_a_bound_drops_the_rest(
    tmp_path: Path,
) -> None:
    buffer = OutageBuffer(threading.Lock(), lambda written: None, max_bytes=4)
    ledger = _File(tmp_path / "ledger")
    ledger.full = True
    buffer.put(None, b"1\n", 1, ledger.append)
    buffer.put(None, b"2\n", 1, ledger.append)
    buffer.put(None, b"3\n", 1, ledger.append)  # past 4 bytes: dropped, counted
    assert buffer.flush() is False
    assert buffer.give_up() == {None: 2} and buffer.dropped == 1
    assert not buffer and not (tmp_path / "ledger").exists()
