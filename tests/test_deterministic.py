"""``agenttrace.deterministic()`` (issue 36 item 5; docs/design/replay.md, "Deterministic
values"): an agent that draws random numbers, uuid4s and wall-clock times inside it is recorded,
then replayed offline, and draws the same ones (the request that carries them is the recorded
one, so a strict replay serves it); what it reads outside the block, and what agenttrace and
litellm read for themselves, is never a recorded value."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import litellm
import pytest

import agenttrace

from .conftest import Traced
from .helpers import ROOT
from .llm_server import LLMServer, Reply
from .test_litellm import http
from .test_replay import source_lines, text, transcripts

Draws = tuple[float, int, str, float, int]


def draws() -> Draws:
    """What the agent reads from the world: two random draws, a uuid4 and the clock twice."""
    return random.random(), random.randint(1, 10**9), str(uuid.uuid4()), time.time(), time.time_ns()


def dice_agent(llm: LLMServer) -> Any:
    """Dice draws inside deterministic(), asks the model with what it drew (so a replay that
    drew anything else would diverge at the request), draws again, then draws outside it."""

    @agenttrace.agent("Dice")
    def dice(prompt: str) -> dict[str, Any]:
        with agenttrace.deterministic():
            before = draws()
            messages = [{"role": "user", "content": f"{prompt}: {before}"}]
            reply = text(litellm.completion(**http(llm, messages=messages)), False)
            after = draws()
        outside = draws()
        return {"before": before, "after": after, "reply": reply, "outside": outside}

    return dice


def value_lines(tmp_path: Path, session: agenttrace.Session) -> list[dict[str, Any]]:
    return [line for line in source_lines(tmp_path, session) if line["kind"] == "value"]


def test_a_replay_draws_what_the_recording_drew_and_nothing_else_is_recorded(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    dice = dice_agent(llm)
    llm.reset(Reply(content="Seven."))
    recorded = dice("roll")
    source = agenttrace.current_session()
    traced.handle.force_flush()
    ended_ns = time.time_ns()
    # Only the agent's own reads, numbered at its label in the order it made them: not the
    # span times, journal stamps or HTTP client's clock reads made around the LLM call.
    lines = value_lines(tmp_path, source)
    assert [(line["step"], line["name"]) for line in lines] == [
        ("0~1", "seed"),
        ("0~2", "uuid4"),
        ("0~3", "time"),
        ("0~4", "time_ns"),
        ("0~5", "uuid4"),
        ("0~6", "time"),
        ("0~7", "time_ns"),
    ]
    assert lines[1]["result"] == recorded["before"][2] and lines[1]["state"] == "done"

    llm.reset(Reply(content="never asked"))
    with agenttrace.replaying(source.session_id, offline=True) as replay:
        replayed = dice("roll")
    assert llm.requests == []
    assert replayed["before"] == recorded["before"] and replayed["after"] == recorded["after"]
    assert replayed["reply"] == "Seven."
    assert transcripts(replay.session) == transcripts(source)
    # The LLM attempt and the 7 values, each served; nothing ran live.
    assert replay.report.clean and replay.report.served == 8
    # Outside the block: the world's values, not the recording's.
    now, then = replayed["outside"], recorded["outside"]
    assert now[2] != then[2] and now[3] > then[3] and now[4] > then[4]
    assert now[:2] != then[:2]  # random reseeded from entropy when the block was left
    # The replay's spans start now: their times are agenttrace's reads, never recorded values.
    started = [s.start_time for s in traced.ours() if s.start_time and s.start_time > ended_ns]
    assert len(started) >= 3  # the replay's run, turn and LLM attempt
    # The replay session journals each served value as replayed, at its own run's keys.
    served = [line for line in value_lines(tmp_path, replay.session) if line["state"] == "replayed"]
    assert len(served) == 7 and {line["run"] for line in served} != {lines[0]["run"]}


def test_until_a_label_serves_the_values_read_before_it_and_reads_the_rest_live(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    dice = dice_agent(llm)
    llm.reset(Reply(content="Seven."))
    recorded = dice("roll")
    source = agenttrace.current_session()
    traced.handle.force_flush()
    (asked,) = {line["step"] for line in source_lines(tmp_path, source) if line["kind"] == "llm"}
    llm.reset(Reply(content="Eight."))
    with agenttrace.replaying(source.session_id, until=asked) as replay:
        forked = dice("roll")
    # The seed and the reads before the LLM call are the recording's: the request is the same.
    assert forked["before"] == recorded["before"] and len(llm.requests) == 1
    assert forked["reply"] == "Eight." and forked["after"][2] != recorded["after"][2]
    assert replay.report.served == 4
    assert [n.label for n in replay.report.live] == [asked, "0~5", "0~6", "0~7"]


def test_a_read_the_recording_has_no_value_for_runs_live_and_is_reported(
    traced: Traced, tmp_path: Path
) -> None:
    extra: list[bool] = []

    @agenttrace.agent("Ids")
    def ids() -> list[str]:
        with agenttrace.deterministic(seed=5):
            return [str(uuid.uuid4()) for _ in range(2 + len(extra))]

    first = ids()
    source = agenttrace.current_session()
    traced.handle.force_flush()
    extra.append(True)  # the code changed since: it reads one more
    with agenttrace.replaying(source.session_id, offline=True) as replay:
        again = ids()
    assert again[:2] == first and again[2] not in first
    assert replay.report.served == 2 and not replay.report.clean
    (live,) = replay.report.live
    assert (live.label, live.kind, live.name, live.why) == (
        "0~3",
        "value",
        "uuid4",
        "no recorded value",
    )


GATES: dict[int, threading.Event] = {}


@agenttrace.tool(effect="pure")
def stamp(item: int) -> tuple[str, float]:
    """A pure tool: never journaled, so a replay runs it live, and its reads are served."""
    GATES[item].set()  # the next task may start its call: labels follow the items' order
    return str(uuid.uuid4()), time.time()


def test_reads_in_pool_threads_are_numbered_at_each_tasks_own_label(
    traced: Traced, tmp_path: Path
) -> None:
    @agenttrace.agent("Stamper")
    @agenttrace.deterministic()
    def stamper() -> list[tuple[str, float]]:
        GATES.clear()
        GATES.update({item: threading.Event() for item in range(-1, 4)})
        GATES[-1].set()

        def task(item: int) -> tuple[str, float]:
            GATES[item - 1].wait(5)  # started in order, run at once
            return stamp(item)

        with agenttrace.turn(), agenttrace.ContextThreadPoolExecutor(4) as pool:
            return list(pool.map(task, range(4)))

    recorded = stamper()
    source = agenttrace.current_session()
    traced.handle.force_flush()
    steps = [(line["step"], line["name"]) for line in value_lines(tmp_path, source)]
    assert steps[0] == ("0~1", "seed")
    # Each call's two reads at its own op's label, however the threads interleaved them.
    by_op = sorted(steps[1:])
    assert by_op == [
        (f"1.{op}~{n}", name) for op in range(1, 5) for n, name in ((1, "uuid4"), (2, "time"))
    ]
    with agenttrace.replaying(source.session_id, offline=True) as replay:
        replayed = stamper()
    assert replayed == recorded and len({uid for uid, _ in recorded}) == 4
    assert replay.report.clean and replay.report.served == 9


@pytest.mark.init(journal=False)
def test_with_the_journal_off_it_seeds_random_and_records_nothing(
    traced: Traced, tmp_path: Path
) -> None:
    @agenttrace.agent("Unjournaled")
    @agenttrace.deterministic(seed=42)
    def unjournaled() -> tuple[list[float], str]:
        return [random.random() for _ in range(3)], str(uuid.uuid4())

    drawn, made = unjournaled()
    expected = random.Random(42)
    assert drawn == [expected.random() for _ in range(3)]
    assert uuid.UUID(made).version == 4
    session = agenttrace.current_session()
    traced.handle.force_flush()
    assert source_lines(tmp_path, session) == []  # no step at all: nor a value


def test_outside_a_run_it_seeds_random_and_reads_pass_through() -> None:
    agenttrace.use_session(None)
    with agenttrace.deterministic(seed=42):
        drawn = [random.random() for _ in range(3)]
        ids = {uuid.uuid4() for _ in range(3)}
        before = time.time_ns()
        clock = time.time()
    expected = random.Random(42)
    assert drawn == [expected.random() for _ in range(3)]
    assert len(ids) == 3 and all(u.version == 4 for u in ids)
    assert before <= time.time_ns() and abs(clock - time.time()) < 3600


def test_a_decorated_coroutine_runs_inside_its_block() -> None:
    @agenttrace.deterministic(seed=9)
    async def draw() -> float:
        await asyncio.sleep(0)
        return random.random()

    assert asyncio.run(draw()) == random.Random(9).random()
    assert draw.__name__ == "draw"


def test_a_seed_that_is_not_an_int_is_refused() -> None:
    try:
        agenttrace.deterministic(seed="7")  # type: ignore[arg-type]
    except TypeError as error:
        assert "agenttrace.deterministic: seed must be an int or None" in str(error)
    else:
        raise AssertionError("a str seed was taken")


def deterministic_child(sessions: Path, mode: str) -> dict[str, Any]:
    """``tests/deterministic_child.py`` in a process of its own: its JSON line."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.deterministic_child", str(sessions), mode],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert done.stdout.strip(), done.stderr
    said: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return said


def test_a_resume_that_re_enters_the_run_gets_its_values_back(tmp_path: Path) -> None:
    """The killed run read a uuid and booked it: re-entered, it reads the same uuid, so its
    booking is the journal's (answered, not run again) instead of another request."""
    sessions = tmp_path / "sessions"
    ticket = deterministic_child(sessions, "run")["ticket"]
    resumed = deterministic_child(sessions, "resume")
    assert resumed["booked"] == []
    assert resumed["answer"].startswith(f"booked {ticket}; then ")
