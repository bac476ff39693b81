"""Replay (issue 36 items 1 and 4; docs/design/replay.md): a finished run runs again from its
journal into a new session. A run of a shop agent (LLM calls through litellm to the scripted
model on 127.0.0.1, a tool that charges, a sub-agent asked inside a tool call) is recorded,
then replayed with every socket refused: its transcripts come back the same and nothing is
billed; a prompt edited before a step diverges there (strict: ReplayDivergence; lenient: live
from there, billed only those); a tool that raised runs again live."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
from collections.abc import AsyncIterator, Generator
from pathlib import Path
from typing import Any

import litellm
import pytest

import agenttrace

from . import replay_agent
from .conftest import Traced
from .helpers import ROOT
from .llm_server import LLMServer, Reply
from .test_cli import agenttrace as run_cli
from .test_cli import ok, one_error_line
from .test_litellm import http

CHARGES: list[int] = []
FLAKY: list[str] = []


@agenttrace.tool(effect="effect")
def charge(amount: int) -> str:
    CHARGES.append(amount)
    return f"ch_{len(CHARGES)}"


@agenttrace.tool(effect="read")
def stock(item: str) -> int:
    FLAKY.append(item)
    if len(FLAKY) == 1:
        raise RuntimeError("the stock service is down")
    return 3


def text(reply: Any, stream: bool) -> str:
    if stream:
        return "".join(c.choices[0].delta.content or "" for c in reply if c.choices)
    return str(reply.choices[0].message.content)


async def atext(reply: Any, stream: bool) -> str:
    if stream:
        return "".join([c.choices[0].delta.content or "" async for c in reply if c.choices])
    return str(reply.choices[0].message.content)


def shop_agent(
    llm: LLMServer,
    stream: bool = False,
    is_async: bool = False,
    edited: bool = False,
    edited_first: bool = False,
) -> Any:
    """The recorded program: Shop asks the model, asks Barista (a sub-agent, inside a tool
    call), charges, and asks the model again (``edited``: the program changed since, its last
    prompt says more; ``edited_first``: its first prompt does, before Barista is asked)."""

    @agenttrace.agent("Barista")
    def barista(question: str) -> str:
        messages = [{"role": "user", "content": question}]
        return text(litellm.completion(**http(llm, messages=messages)), False)

    @agenttrace.tool(effect="read")
    def ask_barista(question: str) -> str:
        return barista(question)

    def ask(messages: list[dict[str, Any]]) -> str:
        if is_async:

            async def go() -> str:
                reply = await litellm.acompletion(**http(llm, messages=messages, stream=stream))
                return await atext(reply, stream)

            return asyncio.run(go())
        return text(litellm.completion(**http(llm, messages=messages, stream=stream)), stream)

    @agenttrace.agent("Shop")
    def shop(prompt: str) -> str:
        messages = [{"role": "user", "content": prompt + (", quickly" if edited_first else "")}]
        first = ask(messages)
        advice = ask_barista("which tea?")
        paid = charge(5)
        messages += [
            {"role": "assistant", "content": first},
            {"role": "user", "content": f"{advice}; paid {paid}" + (", kindly" if edited else "")},
        ]
        return ask(messages)

    return shop


def script() -> list[Reply]:
    return [
        Reply(content="Let me ask the barista."),
        Reply(content="Green tea."),
        Reply(content="Here is your green tea."),
    ]


def session_file(traced: Traced, tmp_path: Path, session_id: str) -> dict[str, Any]:
    traced.handle.force_flush()
    path = tmp_path / "sessions" / f"{session_id}.json.gz"
    return json.loads(gzip.decompress(path.read_bytes()))  # type: ignore[no-any-return]


def transcripts(session: agenttrace.Session) -> dict[str, list[tuple[Any, ...]]]:
    """Each agent's transcript by name, as what was said (ids aside)."""
    return {
        str(record.name): [
            (e.get("role"), e.get("content"), json.dumps(e.get("tool_calls"), sort_keys=True))
            for e in record.transcript
        ]
        for record in session.agents.values()
    }


def ledger(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "accounting.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def record(traced: Traced, llm: LLMServer, shop: Any) -> agenttrace.Session:
    """Run ``shop`` once live, in a session of its own; that session."""
    CHARGES.clear()
    llm.reset(*script())
    assert shop("a tea, please") == "Here is your green tea."
    assert len(llm.requests) == 3 and CHARGES == [5]
    source = agenttrace.current_session()
    traced.handle.force_flush()
    return source


@pytest.mark.parametrize(
    ("stream", "is_async"),
    [(False, False), (True, False), (True, True)],
    ids=["plain", "stream-sync", "stream-async"],
)
def test_an_offline_replay_gives_every_transcript_back_and_bills_nothing(
    traced: Traced, tmp_path: Path, llm: LLMServer, stream: bool, is_async: bool
) -> None:
    shop = shop_agent(llm, stream, is_async)
    source = record(traced, llm, shop)
    billed = ledger(tmp_path)
    llm.reset(Reply(content="never asked"))
    with agenttrace.replaying(source.session_id, offline=True) as replay:
        assert agenttrace.current_session() is replay.session
        assert replay.session.session_id != source.session_id
        assert shop("a tea, please") == "Here is your green tea."
    assert llm.requests == [] and CHARGES == [5]  # no model asked, no tool run again
    # Shop's 2 LLM attempts and 2 tool calls: Barista's call is inside ask_barista's body,
    # which is not run again (what it logged is in the replay session from the start).
    assert replay.report.clean and replay.report.served == 4
    said = transcripts(source)
    assert len(said["Shop"]) >= 4 and len(said["Barista"]) == 2  # what is compared is there
    assert transcripts(replay.session) == said
    assert ledger(tmp_path) == billed  # nothing billed
    # The replayed spans say so; the ledger keeps the original cost on the original run only.
    replayed = [s for s in traced.ours() if (s.attributes or {}).get("agenttrace.replayed")]
    assert len(replayed) == 4
    # The replay session's files name their source.
    meta = session_file(traced, tmp_path, replay.session.session_id)["meta"]
    assert meta["replay_of"]["session"] == source.session_id
    assert meta["replay_of"]["mode"] == "strict"
    runs = [line["run"] for line in source_lines(tmp_path, source) if line["kind"] == "run"]
    assert meta["replay_of"]["run"] == runs[0]


def session_file_path(tmp_path: Path, session: agenttrace.Session) -> Path:
    return tmp_path / "sessions" / f"{session.session_id}.json.gz"


def source_lines(tmp_path: Path, source: agenttrace.Session) -> list[dict[str, Any]]:
    path = tmp_path / "sessions" / f"{source.session_id}.events.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [line for line in lines if line.get("event_type") == "step"]


def labels(tmp_path: Path, source: agenttrace.Session) -> dict[str, str]:
    """The source run's step labels by tool or model name (the last of each)."""
    return {
        line["name"]: line["step"]
        for line in source_lines(tmp_path, source)
        if line["kind"] != "run" and line["state"] == "intent"
    }


def test_an_edited_prompt_diverges_at_its_step_under_strict(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    source = record(traced, llm, shop_agent(llm))
    last_llm = [
        line["step"]
        for line in source_lines(tmp_path, source)
        if line["kind"] == "llm" and line["state"] == "intent" and ":" not in line["step"]
    ][-1]
    billed = ledger(tmp_path)
    llm.reset()
    edited = shop_agent(llm, edited=True)
    with (
        agenttrace.replaying(source.session_id, offline=True) as replay,
        pytest.raises(agenttrace.ReplayDivergence) as raised,
    ):
        edited("a tea, please")
    error = raised.value
    assert (error.label, error.kind) == (last_llm, "llm")
    assert error.recorded_name == error.name and error.fingerprint != error.recorded_fingerprint
    # The field that changed, as the recording has it and as it is asked now.
    assert any(str(f.now).endswith(", kindly") for f in error.fields), error.fields
    assert last_llm in str(error)
    assert replay.report.served == 3 and replay.report.divergence is not None
    assert llm.requests == [] and CHARGES == [5]
    # Nothing billed: the attempt that diverged ends failed, with no cost (nothing was sent).
    (stopped,) = ledger(tmp_path)[len(billed) :]
    assert (stopped["status"], stopped["costUsd"], stopped["path"]) == ("failed", None, last_llm)


def test_lenient_runs_live_from_the_divergence_and_bills_only_that(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    source = record(traced, llm, shop_agent(llm))
    billed = ledger(tmp_path)
    llm.reset(Reply(content="Your tea, kindly."))
    with agenttrace.replaying(source.session_id, mode="lenient") as replay:
        assert shop_agent(llm, edited=True)("a tea, please") == "Your tea, kindly."
    assert len(llm.requests) == 1 and CHARGES == [5]  # only the edited step was asked
    assert replay.report.served == 3
    divergence = replay.report.divergence
    assert divergence is not None and divergence.kind == "llm"
    assert [n.label for n in replay.report.live] == [divergence.label]
    new = ledger(tmp_path)[len(billed) :]
    assert len(new) == 1  # billed: the one live call, nothing served


def test_a_tool_that_raised_runs_again_live(traced: Traced, tmp_path: Path, llm: LLMServer) -> None:
    @agenttrace.agent("Stocker")
    def stocker() -> int:
        with contextlib.suppress(RuntimeError):
            stock("tea")
        return stock("tea")

    FLAKY.clear()
    assert stocker() == 3 and len(FLAKY) == 2
    source = agenttrace.current_session()
    traced.handle.force_flush()
    with agenttrace.replaying(source.session_id, offline=True) as replay:
        assert stocker() == 3
    assert len(FLAKY) == 3  # the call that raised ran again (and did not raise this time)
    assert replay.report.served == 1
    (live,) = replay.report.live
    assert live.name == "stock" and "the stock service is down" in live.why


def test_until_a_label_serves_what_came_before_and_runs_the_rest_live(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    shop = shop_agent(llm)
    source = record(traced, llm, shop)
    at = labels(tmp_path, source)["charge"]
    llm.reset(Reply(content="Here is your green tea."))
    with agenttrace.replaying(source.session_id, until=at) as replay:
        assert shop("a tea, please") == "Here is your green tea."
    assert CHARGES == [5, 5] and len(llm.requests) == 1  # the charge and the last call: live
    assert replay.report.served == 2
    assert replay.report.live[0].label == at
    meta = session_file(traced, tmp_path, replay.session.session_id)["meta"]
    assert meta["replay_of"]["until"] == at


def test_offline_refuses_a_live_call(traced: Traced, tmp_path: Path, llm: LLMServer) -> None:
    source = record(traced, llm, shop_agent(llm))
    llm.reset()
    with (
        agenttrace.replaying(source.session_id, mode="lenient", offline=True),
        pytest.raises(litellm.InternalServerError, match="Connection error"),
    ):
        shop_agent(llm, edited=True)("a tea, please")
    assert llm.requests == []
    # The block is left: connections work again.
    llm.reset(Reply(content="back online"))
    assert text(litellm.completion(**http(llm)), False) == "back online"


def test_a_replay_of_another_run_is_refused_under_strict(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    shop = shop_agent(llm)
    source = record(traced, llm, shop)
    llm.reset()
    with (
        agenttrace.replaying(source.session_id, offline=True),
        pytest.raises(agenttrace.ReplayDivergence, match="at 0: run 'Shop'"),
    ):
        shop("a coffee, please")
    assert llm.requests == []


def test_a_run_is_picked_by_its_number_as_tree_prints_it(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    shop = shop_agent(llm)
    source = record(traced, llm, shop)  # run 1
    record(traced, llm, shop)  # run 2, in the same session
    assert agenttrace.current_session() is source
    llm.reset(Reply(content="never asked"))
    origins = []
    for number in (1, 2):
        with agenttrace.replaying(source.session_id, run=number, offline=True) as replay:
            assert shop("a tea, please") == "Here is your green tea."
        origins.append(replay.session.meta["replay_of"]["run"])
    assert llm.requests == []
    assert len(set(origins)) == 2  # each its own source run


def test_what_cannot_be_replayed_is_refused_before_anything_runs(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    source = record(traced, llm, shop_agent(llm))
    with pytest.raises(ValueError, match=r"no step at '9\.9'"):
        agenttrace.replaying(source.session_id, until="9.9").__enter__()
    with pytest.raises(ValueError, match="no run 3"):
        agenttrace.replaying(source.session_id, run=3).__enter__()
    with pytest.raises(ValueError, match="as tree prints it"):  # numbered from 1, as tree's
        agenttrace.replaying(source.session_id, run=0).__enter__()
    with pytest.raises(ValueError, match="mode"):
        agenttrace.replaying(source.session_id, mode="loose").__enter__()  # type: ignore[arg-type]
    assert agenttrace.current_session() is source  # left as it was


def test_the_cli_replays_offline_and_reports_a_divergence_in_one_line(
    traced: Traced, tmp_path: Path, llm: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPLAY_LLM_BASE", llm.api_base)
    llm.reset(Reply(content="One tea."), Reply(content="Here it is."))
    assert replay_agent.shop() == "Here it is."
    source = agenttrace.current_session().session_id
    traced.handle.force_flush()
    billed = ledger(tmp_path)
    llm.reset()
    sessions = str(tmp_path / "sessions")
    args = ("replay", source, "--agent", "tests.replay_agent:rebuild", "--sessions-dir", sessions)
    out = ok(run_cli(tmp_path, *args, "--offline", cwd=ROOT, REPLAY_LLM_BASE=llm.api_base))
    assert "Answer: Here it is." in out
    assert "3 step(s) served from the recording, 0 run live" in out
    assert f"(of {source}, run {source})" in out
    assert llm.requests == [] and ledger(tmp_path) == billed
    diverged = run_cli(
        tmp_path, *args, "--offline", cwd=ROOT, REPLAY_LLM_BASE=llm.api_base, REPLAY_PROMPT="a pie"
    )
    assert diverged.returncode == 1 and "Traceback" not in diverged.stderr
    *_, line = diverged.stderr.splitlines()  # after the console's lines: the error, once
    assert line.startswith("agenttrace: error: ")
    assert "replay diverged at 1.1: llm 'gpt-4o-mini'" in line
    assert '"a tea, please" -> "a pie"' in line
    assert "no run 7" in one_error_line(run_cli(tmp_path, *args, "--run", "7", cwd=ROOT))


def test_stats_over_a_run_and_its_replay_count_each_real_call_once(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    shop = shop_agent(llm)
    source = record(traced, llm, shop)
    llm.reset(Reply(content="Your tea, kindly."))
    with agenttrace.replaying(source.session_id, mode="lenient") as replay:
        shop_agent(llm, edited=True)("a tea, please")
    traced.handle.force_flush()
    sessions = str(tmp_path / "sessions")

    def stats(session_id: str) -> dict[str, Any]:
        out = ok(run_cli(tmp_path, "stats", session_id, "--json", "--sessions-dir", sessions))
        return json.loads(out)  # type: ignore[no-any-return]

    original = stats(source.session_id)["total"]
    replayed = stats(replay.session.session_id)["total"]
    # Shop's two LLM calls and Barista's one, two tool calls: each real call counted once,
    # in the run that made it; the replay counts its one live call only.
    assert (original["llm_attempts_ok"], original["tool_calls"]) == (3, 2)
    assert (replayed["llm_attempts_ok"], replayed["tool_calls"]) == (1, 0)
    assert replayed["cost_usd_known"] < original["cost_usd_known"]


WEIGHED: list[int] = []
GATES: dict[int, Any] = {}


@agenttrace.tool(effect="read")
def weigh(item: int) -> dict[str, int]:
    GATES[item].wait(5)  # released in an order the test shuffles: completion order varies
    WEIGHED.append(item)
    return {"item": item, "grams": 100 + item}


def test_eight_concurrent_tool_calls_replay_identically_in_any_completion_order(
    traced: Traced, tmp_path: Path
) -> None:
    import random
    import threading

    shuffles = random.Random(36)

    @agenttrace.agent("Scale")
    def scale() -> list[dict[str, int]]:
        GATES.update({item: threading.Event() for item in range(8)})
        order = list(range(8))
        shuffles.shuffle(order)
        with agenttrace.turn(), agenttrace.ContextThreadPoolExecutor(8) as pool:
            # Started in a shuffled order (so each call's label differs from run to run), and
            # released in another.
            futures = {item: pool.submit(weigh, item) for item in order}
            for item in reversed(order):
                GATES[item].set()
            return [futures[item].result() for item in range(8)]

    WEIGHED.clear()
    recorded = scale()
    assert sorted(WEIGHED) == list(range(8))
    source = agenttrace.current_session()
    traced.handle.force_flush()
    for _ in range(50):
        # Each call finds its own step by its request, whatever label its start got this time.
        with agenttrace.replaying(source.session_id, offline=True) as replay:
            assert scale() == recorded
        assert replay.report.clean and replay.report.served == 8
    assert len(WEIGHED) == 8  # no body ran again


def test_the_cafe_demo_replays_offline_every_transcript_byte_for_byte(
    traced: Traced, tmp_path: Path
) -> None:
    """The demo's multi-agent run (a root that creates Jack and Jill with tool calls and has
    them discuss inside a streamed tool call) replayed with every socket refused, its model
    stopped: each agent's transcript comes back byte for byte, in the replay session and in
    its saved file."""
    from examples import cafe
    from examples.scripted_model import ScriptedModel

    with ScriptedModel(cafe.SCRIPTS) as model:
        options = {"api_key": "offline-test-key", "api_base": model.api_base}
        recorded = asyncio.run(cafe.run_first(options))
    source = agenttrace.current_session()
    traced.handle.force_flush()
    billed = ledger(tmp_path)
    assert len(billed) >= 7  # the root's 4 attempts and the speakers' (the test is not vacuous)

    def revive(record: agenttrace.AgentRecord, _: agenttrace.Session) -> cafe.Agent:
        return cafe.Agent.revive(record, options)  # the model's address: closed, and refused

    with agenttrace.replaying(source.session_id, offline=True, agent_factory=revive) as replay:
        assert asyncio.run(replay.root.response()) == recorded
    assert replay.report.clean, replay.report.lines()
    assert ledger(tmp_path) == billed  # nothing billed again

    def said(session: agenttrace.Session) -> dict[str, bytes]:
        """Each agent's transcript as its messages (what was said; message ids and times are
        the replay session's own), as bytes."""
        return {
            aid: json.dumps(record.messages(), sort_keys=True).encode()
            for aid, record in session.agents.items()
        }

    assert len(said(source)) == 3 and said(replay.session) == said(source)
    # Jack and Jill, copied as their served calls were, are the root's, as in the source (their
    # cause: the replay's entry holding the call that created them).
    parents = {r.name: r.parent_id for r in source.agents.values()}
    assert parents["Jack"] == parents["Jill"] == source.root().agent_id  # type: ignore[union-attr]
    assert {r.name: r.parent_id for r in replay.session.agents.values()} == parents
    assert sum(len(record.transcript) for record in source.agents.values()) >= 16
    # And as the saved files have them: the replay session's file is the source's state.
    traced.handle.force_flush()
    saved = agenttrace.load_session(session_file_path(tmp_path, replay.session), revive)[1]
    assert said(saved) == said(source)


STREAMED: list[str] = []


@agenttrace.tool(effect="read")
def menu(kind: str) -> Generator[str, None, int]:
    """A generator tool: its items were its results, and it returns how many."""
    STREAMED.append(kind)
    yield f"{kind}: green"
    yield f"{kind}: black"
    return 2


@agenttrace.tool(effect="read")
async def specials(day: str) -> AsyncIterator[dict[str, str]]:
    STREAMED.append(day)
    for name in ("scone", "pie"):
        yield {"day": day, "name": name}


def test_a_generator_tool_is_replayed_item_by_item_with_its_return_value(
    traced: Traced, tmp_path: Path
) -> None:
    """A generator tool's items are its results: the journal keeps them (and a sync
    generator's return value), and a replay yields them again without running its body."""

    @agenttrace.agent("Menu")
    def read_menu() -> tuple[list[str], int, list[dict[str, str]]]:
        teas = menu("tea")
        items = []
        while True:
            try:
                items.append(next(teas))
            except StopIteration as stop:
                count = stop.value
                break

        async def listed() -> list[dict[str, str]]:
            return [special async for special in specials("monday")]

        return items, count, asyncio.run(listed())

    STREAMED.clear()
    recorded = read_menu()
    assert recorded == (
        ["tea: green", "tea: black"],
        2,
        [{"day": "monday", "name": "scone"}, {"day": "monday", "name": "pie"}],
    )
    source = agenttrace.current_session()
    traced.handle.force_flush()
    with agenttrace.replaying(source.session_id, offline=True) as replay:
        assert read_menu() == recorded
    assert replay.report.clean and replay.report.served == 2
    assert STREAMED == ["tea", "monday"]  # neither body ran again


def test_a_clean_replay_diffs_as_the_same_run_as_its_source(
    traced: Traced, tmp_path: Path, llm: LLMServer
) -> None:
    """``agenttrace diff SOURCE REPLAY`` after a clean replay: no divergence. The tool call
    whose body ran Barista is answered from the recording in the replay, so Barista does not
    run there: that is not another structure."""
    shop = shop_agent(llm)
    source = record(traced, llm, shop)
    with agenttrace.replaying(source.session_id, offline=True) as replay:
        shop("a tea, please")
    assert replay.report.clean
    traced.handle.force_flush()
    diff = agenttrace.diff_runs(
        session_file_path(tmp_path, source), session_file_path(tmp_path, replay.session)
    )
    assert diff.first_divergence is None, diff.first_divergence
    assert diff.only_in_a == diff.only_in_b == []
    assert len(diff.steps) >= 5  # the run, its turn, two LLM calls and two tool calls


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_streamed_reply_replays_chunk_for_chunk(
    traced: Traced, llm: LLMServer, is_async: bool
) -> None:
    """What the program read from a stream, chunk by chunk (each delta and finish reason, in
    order), is what the replay gives it, sync and async, with the model not asked."""

    def chunks(reply: Any) -> list[tuple[Any, Any]]:
        return [
            (c.choices[0].delta.content, c.choices[0].finish_reason) for c in reply if c.choices
        ]

    @agenttrace.agent("Teller")
    def teller() -> list[tuple[Any, Any]]:
        request = http(llm, messages=[{"role": "user", "content": "a story"}], stream=True)
        if not is_async:
            return chunks(litellm.completion(**request))

        async def read() -> list[tuple[Any, Any]]:
            reply = await litellm.acompletion(**request)
            return [
                (c.choices[0].delta.content, c.choices[0].finish_reason)
                async for c in reply
                if c.choices
            ]

        return asyncio.run(read())

    llm.reset(Reply(content="Once upon a time, there was a cup of green tea."))
    recorded = teller()
    assert len([content for content, _ in recorded if content]) >= 3  # a stream, not one piece
    source = agenttrace.current_session()
    traced.handle.force_flush()
    llm.reset(Reply(content="never asked"))
    with agenttrace.replaying(source.session_id, offline=True) as replay:
        assert teller() == recorded
    assert replay.report.clean and replay.report.served == 1 and llm.requests == []
