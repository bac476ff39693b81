"""Readers merge the writers' lines in causal order when the writers ran on hosts whose clocks
disagree (docs/design/cross-process.md, "Clocks of other hosts"; issue 35, item 2).

A real session with two joined writers (a spawn pool's worker and a subprocess,
``tests/test_session_writers.py``) is recorded on this machine; its segments are then rewritten
to what another host would have written: every time in them moved by a clock 5 s behind or
ahead, and their ``clock`` unlike their ``parent_clock``. The merge must put each sub-agent's
lines inside the op that started it, and change no ``ts``; a child of one clock (or of a file of
an earlier version, without clock ids) merges by ``ts`` as before.
"""

from __future__ import annotations

import gzip
import hashlib
import heapq
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import agenttrace
from agenttrace._internal.times import ms_iso, ts_ms
from agenttrace.formats.session.clocks import Placement, offsets
from agenttrace.formats.session.files import LoadedFile
from agenttrace.formats.session.fullest import load_pair, load_writers
from agenttrace.tracing import travel
from tests.conftest import Traced
from tests.test_session_writers import CHILD, _record

_TIMES = ("startedAt", "endedAt", "timestamp")
"""The ms times of a session file's nodes and accounting entries."""


def _shifted(value: Any, ms: int) -> Any:
    """``value`` (a line or a session document) with every time in it ``ms`` later."""
    if isinstance(value, list):
        return [_shifted(each, ms) for each in value]
    if not isinstance(value, dict):
        return value
    moved: dict[str, Any] = {}
    for key, each in value.items():
        if key == "ts" and isinstance(each, str) and ts_ms(each) is not None:
            moved[key] = ms_iso(ts_ms(each) + ms)  # type: ignore[operator]
        elif key in _TIMES and isinstance(each, int):
            moved[key] = each + ms
        else:
            moved[key] = _shifted(each, ms)
    return moved


def _as_if_on(
    sessions: Path, session_id: str, parent_path: str, ms: int, clocks: Callable[[dict], None]
) -> str:
    """Rewrite the segment whose run was started by op ``parent_path`` as a host whose clock is
    ``ms`` off would have written it, ``clocks`` setting its runs' ``ingress.joined`` clock
    ids; its writer id."""
    for snapshot in (sessions / f"{session_id}.w").glob("*.json.gz"):
        document = json.loads(gzip.decompress(snapshot.read_bytes()))
        [run] = document["runs"]
        joined = run["attributes"]["ingress"]["joined"]
        if joined["parent_path"] != parent_path:
            continue
        document = _shifted(document, ms)
        clocks(document["runs"][0]["attributes"]["ingress"]["joined"])
        snapshot.write_bytes(gzip.compress(json.dumps(document).encode()))
        stream = snapshot.with_name(snapshot.name.replace(".json.gz", ".events.jsonl"))
        lines = [_shifted(json.loads(line), ms) for line in stream.read_text().splitlines()]
        stream.write_text("".join(json.dumps(line) + "\n" for line in lines))
        return str(joined["writer_id"])
    raise AssertionError(f"no segment joined {parent_path}")


def _another_host(joined: dict[str, Any]) -> None:
    """A host of its own for each segment (their clocks are apart in opposite directions)."""
    assert joined["clock"] == joined["parent_clock"] == travel.clock_id()  # as recorded
    joined["clock"] = hashlib.sha256(joined["writer_id"].encode()).hexdigest()[:16]


def _one_host(joined: dict[str, Any]) -> None:
    assert joined["clock"] == joined["parent_clock"]


def _earlier_version(joined: dict[str, Any]) -> None:
    del joined["clock"], joined["parent_clock"]


def _record_on_hosts(
    traced: Traced, tmp_path: Path, clocks: Callable[[dict], None], tides: int, winds: int
) -> tuple[LoadedFile, str, str, dict[str, list[tuple[Any, ...]]]]:
    """The session recorded, its pool worker's segment (topic tides, under op 1.1) moved by
    ``tides`` ms, its subprocess's (winds, op 1.2) by ``winds``: the merged picture, the two
    writers' ids, and the pictures of its files merged by ``ts`` alone (as before clocks)."""
    sessions, session_id = _record(traced, tmp_path)
    pool = _as_if_on(sessions, session_id, "1.1", tides, clocks)
    shell = _as_if_on(sessions, session_id, "1.2", winds, clocks)
    loaded, _ = load_pair(sessions / f"{session_id}.json.gz")
    (own, _), segments = load_writers(sessions / f"{session_id}.json.gz")
    pictures = [own, *(segment for segment, _ in segments)]
    by_ts = {
        stream: [
            _identity(line)
            for line in heapq.merge(*(getattr(p, stream) for p in pictures), key=_ts)
        ]
        for stream in ("events", "accounted")
    }
    return loaded, pool, shell, by_ts


def _ts(line: dict[str, Any]) -> str:
    return str(line.get("ts", ""))


def _identity(line: dict[str, Any]) -> tuple[Any, ...]:
    return (line.get("message_id"), line.get("span_id"), line["ts"])


def _unchanged(loaded: LoadedFile, by_ts: dict[str, list[tuple[Any, ...]]]) -> None:
    """The events and ``op_accounted`` lines in the order of their ``ts``, as before clocks."""
    assert [_identity(line) for line in loaded.events] == by_ts["events"]
    assert [_identity(line) for line in loaded.accounted] == by_ts["accounted"]


def _index(lines: list[dict[str, Any]], found: Callable[[dict[str, Any]], bool]) -> list[int]:
    return [i for i, line in enumerate(lines) if found(line)]


def _of(writer: str) -> Callable[[dict[str, Any]], bool]:
    """A joined writer's line: its ids carry its writer id (a journal line: its agent's)."""
    return lambda line: f"_{writer}_" in str(line.get("message_id") or line.get("agent_id"))


def _step(label: str, state: str) -> Callable[[dict[str, Any]], bool]:
    return lambda line: line.get("step") == label and line.get("state") == state


def test_a_writer_on_a_host_of_another_clock_merges_inside_the_op_that_started_it(
    traced: Traced, tmp_path: Path
) -> None:
    loaded, pool, shell, by_ts = _record_on_hosts(traced, tmp_path, _another_host, -5000, 5000)
    assert [_identity(line) for line in loaded.events] != by_ts["events"]  # by ts: wrong
    journal, events, accounted = loaded.journal, loaded.events, loaded.accounted
    # What the hosts wrote is what the picture shows: the pool worker's lines 5 s before the
    # op that started it began, the subprocess's 5 s after its op ended.
    [tides_intent] = [line for line in journal if _step("1.1", "intent")(line)]
    [winds_done] = [line for line in journal if _step("1.2", "done")(line)]
    assert all(line["ts"] < tides_intent["ts"] for line in journal if _of(pool)(line))
    assert all(line["ts"] > winds_done["ts"] for line in journal if _of(shell)(line))
    # Merged in causal order all the same: each sub-agent's journal lines inside its op's.
    for label, writer in (("1.1", pool), ("1.2", shell)):
        [intent] = _index(journal, _step(label, "intent"))
        [done] = _index(journal, _step(label, "done"))
        child = _index(journal, _of(writer))
        assert len(child) == 2 and intent < min(child) and max(child) < done  # its tool call
    # Its op_accounted line before its op's, after the op before.
    assert [line["path"] for line in accounted] == ["1.1.1.1", "1.1", "1.2.1.1", "1.2"]
    # Its events after the boss asked, before it answered; each writer's in its file's order.
    boss = [i for i, e in enumerate(events) if e.get("role") in ("user", "assistant")]
    asked, answered = boss[0], boss[-1]
    tides, winds = _index(events, _of(pool)), _index(events, _of(shell))
    assert asked < min(tides) and max(tides) < min(winds) and max(winds) < answered
    for writer in (pool, shell):
        ids = [e["message_id"] for e in events if _of(writer)(e)]
        assert ids == sorted(ids) and len(ids) == 4


def test_a_writer_of_the_same_clock_merges_by_ts_even_when_it_outlived_its_op(
    traced: Traced, tmp_path: Path
) -> None:
    """A fire-and-forget child (its lines after its op's end) on the parent's clock: the ``ts``
    say what happened, and order it as before."""
    loaded, pool, _, by_ts = _record_on_hosts(traced, tmp_path, _one_host, 5000, 0)
    _unchanged(loaded, by_ts)
    journal = loaded.journal
    [done] = _index(journal, _step("1.1", "done"))
    assert min(_index(journal, _of(pool))) > done  # where its ts put it: after its op


def test_a_file_of_an_earlier_version_without_clock_ids_merges_by_ts(
    traced: Traced, tmp_path: Path
) -> None:
    loaded, pool, _, by_ts = _record_on_hosts(traced, tmp_path, _earlier_version, -5000, 5000)
    _unchanged(loaded, by_ts)
    [intent] = _index(loaded.journal, _step("1.1", "intent"))
    assert max(_index(loaded.journal, _of(pool))) < intent  # as its ts say: one clock assumed


# --- the offsets, on numbers (what a run's times can be) ----------------------------------------


def _placement(writer: int, host: int, op: tuple[int, int | None], run: tuple[int, int]) -> Any:
    clocks = {"clock": f"{writer:016x}", "parent_clock": f"{host:016x}"}
    joined_run = {
        "startedAt": run[0],
        "endedAt": run[1],
        "attributes": {"ingress": {"joined": clocks}},
    }
    started, ended = op
    return Placement(writer, joined_run, host, {"startedAt": started, "endedAt": ended})


def test_offsets_compose_down_a_chain_of_hosts_and_bind_only_the_start_of_a_longer_run() -> None:
    # Writer 1 (another host) ran 100..200 under an op of 1000..2000: moved 926 (its start just
    # inside the op's, and the margin); writer 2 (a third host) ran 0..50 under writer 1's op
    # 150..180, 1076..1106 once writer 1 is moved: it cannot fit (it outlived the op), so its
    # start is bound: moved 1077.
    chain = [_placement(1, 0, (1000, 2000), (100, 200)), _placement(2, 1, (150, 180), (0, 50))]
    assert offsets(3, chain, [[], [100, 200], [0, 50]]) == [0, 926, 1077]
    chain[1].op["endedAt"] = 300  # room for it: its start bound by the op's, as writer 1's
    assert offsets(3, chain, [[], [100, 200], [0, 50]]) == [0, 926, 1102]
    chain[1].op["startedAt"] = -5000  # 0 fits in the window: left as written
    assert offsets(3, chain, [[], [100, 200], [0, 50]])[2] == 0
    # A window that holds 0: the times are left as they are.
    assert offsets(2, [_placement(1, 0, (1000, 2000), (1100, 1200))], [[], []]) == [0, 0]
    # A run longer than its op (fire-and-forget): only its start is bound.
    longer = [_placement(1, 0, (1000, 1010), (0, 500))]
    assert offsets(2, longer, [[], [0, 500]]) == [0, 1001]
    # An op still running (no end): only its start is bound.
    assert offsets(2, [_placement(1, 0, (1000, None), (0, 5))], [[], [0]]) == [0, 1026]


def test_writers_of_one_clock_share_the_offset_that_fits_all_their_runs() -> None:
    # Two writers on one other host, started by ops 1000..1200 and 2000..2200: alone, the first
    # would move 1026, the second 1036; one clock, one offset, in both windows.
    first = _placement(1, 0, (1000, 1200), (0, 50))
    second = _placement(2, 0, (2000, 2200), (990, 1060))
    assert offsets(3, [first, second], [[], [0, 50], [990, 1060]]) == [0, 1026, 1036]
    for each in (first, second):
        each.run["attributes"]["ingress"]["joined"]["clock"] = "9" * 16
    assert offsets(3, [first, second], [[], [0, 50], [990, 1060]]) == [0, 1036, 1036]


# --- end to end: a child with a host name of its own and a clock 5 s behind --------------------


def _libfaketime() -> str | None:
    """Debian's libfaketime (``make faketime`` installs it), if this machine has it."""
    for path in sorted(Path("/usr/lib").glob("*/faketime/libfaketime.so.1")):
        return str(path)
    return None


def _unshare_allowed() -> bool:
    """Whether this process may make a UTS namespace (a host name of the child's own): root,
    or a user namespace allowed."""
    try:
        done = subprocess.run(["unshare", "--uts", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def test_a_child_on_another_host_5_s_behind_merges_inside_its_op(
    traced: Traced, tmp_path: Path
) -> None:
    """A real other host, as far as agenttrace can tell: ``unshare --uts`` gives the child a
    host name of its own (so another clock id) and libfaketime (``FAKETIME=-5s``) a clock 5 s
    behind. Every time the child wrote is its own; the reader orders it by the op."""
    library = _libfaketime()
    if library is None:
        pytest.skip("libfaketime is not installed (make faketime: apt-get install faketime)")
    if not _unshare_allowed():
        pytest.skip("unshare --uts is not permitted here (needs root or user namespaces)")
    sessions = tmp_path / "sessions"
    session_id = agenttrace.current_session().session_id

    @agenttrace.tool(name="shell")
    def shell(topic: str) -> str:
        env = {**agenttrace.subprocess_env(), "LD_PRELOAD": library, "FAKETIME": "-5s"}
        script = 'hostname "agenttrace-skew-$$" && exec "$@"'
        args = (str(sessions), topic)
        done = subprocess.run(
            ["unshare", "--uts", "sh", "-c", script, "sh", sys.executable, str(CHILD), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=480,
            check=True,
        )
        return done.stdout.strip()

    @agenttrace.agent("boss")
    def boss() -> str:
        return shell("winds")

    assert boss() == "notes on winds"
    traced.handle.force_flush()
    [snapshot] = (sessions / f"{session_id}.w").glob("*.json.gz")
    [run] = json.loads(gzip.decompress(snapshot.read_bytes()))["runs"]
    joined = run["attributes"]["ingress"]["joined"]
    assert joined["parent_clock"] == travel.clock_id() != joined["clock"]
    writer = joined["writer_id"]
    loaded, _ = load_pair(sessions / f"{session_id}.json.gz")
    journal = loaded.journal
    [intent] = _index(journal, _step("1.1", "intent"))
    [done] = _index(journal, _step("1.1", "done"))
    child = _index(journal, _of(writer))
    # As the child wrote them: before its op began, by the parent's clock.
    assert all(journal[i]["ts"] < journal[intent]["ts"] for i in child)
    assert len(child) == 2 and intent < min(child) and max(child) < done
    events = _index(loaded.events, _of(writer))
    assert events == list(range(min(events), max(events) + 1))  # its own, in its file's order
    assert os.environ.get("FAKETIME") is None  # the test's own clock was never moved
