"""LLM cassettes (issue 37 item 2; docs/how-to/cassettes.md): a decorated agent's litellm calls
(one plain, one streamed) and its tool call, made to a scripted model on 127.0.0.1 of the test's
own, are recorded into a cassette once and answered from it with the model stopped and every
socket refused, byte for byte and chunk for chunk; each record mode does what vcrpy's does at
the level of calls; secrets are redacted in the file; an empty stream is never saved; the
cassette is a session file that ``agenttrace tree`` and ``agenttrace replay`` open."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import litellm
import pytest
from click.testing import CliRunner

import agenttrace
from agenttrace.cli import main
from agenttrace.model.events import MESSAGE_PREFIX, id_number
from agenttrace.testing.cassettes import (
    CassetteError,
    CassetteMismatch,
    cassette_path,
    use_cassette,
)
from agenttrace.testing.span_tree import build_tree

from . import replay_agent
from .conftest import Traced
from .helpers import ROOT
from .llm_server import JsonHandler, LLMServer, LoopbackServer, Reply
from .test_cli import agenttrace as run_cli
from .test_cli import ok
from .test_litellm import http

pytest_plugins = ["pytester"]

FAKE_KEY = "sk-cassette-fake-key-0123456789abcdef"
"""An API key shaped like OpenAI's: passed to litellm and said in a prompt."""
CARD = "tok-card-4242-never-saved"
"""A tool argument under a secret-named key (``card_token``), which the program adds to the
arguments the model asked for (a secret the model says comes back redacted from a replay, and
the program would send something else: docs/how-to/cassettes.md, "Secrets")."""
CHARGES: list[int] = []


@agenttrace.tool(effect="effect")
def charge(amount: int, card_token: str) -> dict[str, Any]:
    CHARGES.append(amount)
    return {"charge": f"ch_{len(CHARGES)}", "amount": amount}


def shop_agent(
    server: LLMServer, prompt: str = "two teas", more: bool = False, fewer: bool = False
) -> Any:
    """Shop asks the model, which asks for a charge; charges; then asks again, streamed
    (``more``: and once more, a call the first recording does not have; ``fewer``: it stops
    after the charge, without asking again). Returns each reply as litellm's JSON, the
    stream's chunk by chunk."""

    @agenttrace.agent("Shop")
    def shop() -> dict[str, Any]:
        messages: list[Any] = [{"role": "user", "content": f"{prompt}; my key is {FAKE_KEY}"}]
        first = litellm.completion(**http(server, messages=messages, api_key=FAKE_KEY))
        call = first.choices[0].message.tool_calls[0]
        paid = charge(**json.loads(call.function.arguments), card_token=CARD)
        if fewer:
            return {"first": first.model_dump_json(), "paid": paid}
        messages += [
            first.choices[0].message.model_dump(),
            {"role": "tool", "tool_call_id": call.id, "content": json.dumps(paid)},
        ]
        asked = http(server, messages=messages, api_key=FAKE_KEY, stream=True)
        stream = litellm.completion(**asked)
        chunks = [chunk.model_dump_json() for chunk in stream]
        out = {"first": first.model_dump_json(), "chunks": chunks, "paid": paid}
        if more:
            messages.append({"role": "user", "content": "and a cake"})
            out["more"] = litellm.completion(**http(server, messages=messages)).model_dump_json()
        return out

    return shop


def script(last: str = "Paid: two teas, thank you.") -> list[Reply]:
    arguments = json.dumps({"amount": 5})
    function = {"name": "charge", "arguments": arguments}
    call = {"id": "call_1", "type": "function", "function": function}
    return [Reply(content="", tool_calls=[call]), Reply(content=last), Reply(content="A cake.")]


@pytest.fixture
def model() -> Iterator[LLMServer]:
    """A scripted model of the test's own, which the test stops to prove nothing reaches it."""
    server = LLMServer().start()
    server.reset(*script())
    yield server
    server.stop()


def record(tmp_path: Path, model: LLMServer, **options: Any) -> tuple[dict[str, Any], Path]:
    """Run Shop inside a cassette that does not exist yet (mode ``once``): its output, and the
    cassette it recorded."""
    CHARGES.clear()
    with use_cassette("shop", directory=tmp_path / "cassettes", **options) as cassette:
        assert cassette.recording and cassette.report is None
        live = shop_agent(model)()
    assert len(model.requests) == 2 and CHARGES == [5]
    assert cassette.path.is_file()
    return live, cassette.path


def said(chunks: list[str]) -> str:
    """The text a stream's chunks (litellm's JSON) delivered."""
    deltas = [json.loads(chunk)["choices"] for chunk in chunks]
    return "".join(c[0]["delta"].get("content") or "" for c in deltas if c)


def text(path: Path) -> str:
    return gzip.decompress(path.read_bytes()).decode()


def test_once_records_then_replays_offline_byte_for_byte_and_chunk_for_chunk(
    traced: Traced, tmp_path: Path, model: LLMServer
) -> None:
    live, path = record(tmp_path, model)
    assert path == tmp_path / "cassettes" / "shop.session.json.gz"
    assert len(live["chunks"]) > 3  # a stream of several chunks, each compared below
    assert said(live["chunks"]) == "Paid: two teas, thank you."
    recorded = path.read_bytes()
    model.stop()  # nothing to answer now; and every socket is refused in the block
    with use_cassette("shop", directory=tmp_path / "cassettes") as cassette:
        assert not cassette.recording
        assert agenttrace.current_session() is cassette.session
        replayed = shop_agent(model)()
    assert replayed == live  # the replies' JSON, and the stream's, chunk for chunk
    assert CHARGES == [5]  # the tool was answered from the cassette, not run
    assert cassette.report is not None and cassette.report.clean
    assert cassette.report.served == 3  # two LLM attempts and the tool call
    assert path.read_bytes() == recorded  # a replay leaves the cassette as it was


def test_secrets_are_redacted_in_the_cassette_not_in_the_recording(
    traced: Traced, tmp_path: Path, model: LLMServer
) -> None:
    _, path = record(tmp_path, model, redact=["two teas"])
    sessions = tmp_path / "sessions"
    recorded = "".join(gzip.decompress(f.read_bytes()).decode() for f in sessions.glob("*.json.gz"))
    # The recorded session keeps what was said (the key in the prompt, the card in the tool's
    # arguments): the cassette made from it does not.
    assert FAKE_KEY in recorded and CARD in recorded and "two teas" in recorded
    saved = text(path)
    assert FAKE_KEY not in saved and CARD not in saved and "two teas" not in saved
    assert "[REDACTED]" in saved
    # Redaction keeps the fingerprints: the cassette still answers the run.
    model.stop()
    with use_cassette(path) as cassette:
        shop_agent(model)()
    assert cassette.report is not None and cassette.report.served == 3


def test_none_fails_a_call_the_cassette_does_not_answer_naming_its_step(
    traced: Traced, tmp_path: Path, model: LLMServer
) -> None:
    missing = "no such cassette, and mode 'none' records nothing"
    with (
        pytest.raises(CassetteError, match=missing),
        use_cassette("shop", "none", directory=tmp_path / "cassettes"),
    ):
        raise AssertionError("never entered")
    _, path = record(tmp_path, model)
    model.stop()
    with pytest.raises(CassetteMismatch) as raised, use_cassette(path, "none"):
        shop_agent(model, prompt="three teas")()
    error = raised.value
    assert error.divergence is not None and error.divergence.kind == "llm"
    assert "replay diverged at 1.1: llm" in str(error) and str(path) in str(error)
    assert "three teas" in str(error)  # the field that differs, as it is asked now
    # A call past the recording fails too, even where the program catches what it raised.
    with (
        pytest.raises(CassetteMismatch, match="this llm call is new"),
        use_cassette(path, "none"),
        contextlib.suppress(Exception),
    ):
        shop_agent(model, more=True)()


def test_a_strict_replay_that_makes_fewer_calls_than_recorded_fails_naming_the_first(
    traced: Traced, tmp_path: Path, model: LLMServer
) -> None:
    """Every call the test made was answered, but the recording holds one more it never
    made: the code changed, and a strict cassette that passed would test nothing of it."""
    live, path = record(tmp_path, model)
    model.stop()
    with (
        pytest.raises(CassetteMismatch, match=r"holds 1 call\(s\) the test never made") as raised,
        use_cassette(path, "none"),
    ):
        replayed = shop_agent(model, fewer=True)()
        assert replayed == {"first": live["first"], "paid": live["paid"]}  # each one served
    first_unasked = "the first llm 'gpt-4o-mini' at 2.1"
    assert first_unasked in str(raised.value) and str(path) in str(raised.value)
    # A replay through the API says so in its report, in any mode.
    with agenttrace.replaying(path, mode="lenient", every_run=True, offline=True) as replay:
        shop_agent(model, fewer=True)()
    assert replay.report.clean and replay.report.served == 2
    assert [(n.label, n.kind) for n in replay.report.unasked] == [("2.1", "llm")]
    assert "1 recorded call(s) never asked" in replay.report.lines()


def test_new_episodes_replays_what_matches_and_adds_the_new_call(
    traced: Traced, tmp_path: Path, model: LLMServer
) -> None:
    live, path = record(tmp_path, model)
    model.reset(Reply(content="A cake."))
    with use_cassette(path, "new_episodes") as cassette:
        grown = shop_agent(model, more=True)()
    assert len(model.requests) == 1 and CHARGES == [5]  # only the new call ran live
    assert cassette.report is not None and cassette.report.served == 3
    assert {k: grown[k] for k in live} == live
    model.stop()
    with use_cassette(path, "none") as again:
        assert shop_agent(model, more=True)() == grown
    assert again.report is not None and again.report.clean and again.report.served == 4
    assert "replay_of" not in json.loads(text(path))["meta"]


def test_all_records_again_and_overwrites(traced: Traced, tmp_path: Path, model: LLMServer) -> None:
    _, path = record(tmp_path, model)
    model.reset(*script(last="Paid again."))
    with use_cassette(path, "all") as cassette:
        assert cassette.recording
        shop_agent(model)()
    assert len(model.requests) == 2 and CHARGES == [5, 5]
    model.stop()
    with use_cassette(path, "none"):
        out = shop_agent(model)()
    assert said(out["chunks"]) == "Paid again."


LOOKED_UP: list[str] = []


@agenttrace.tool(effect="read")
def look_up(city: str) -> dict[str, Any]:
    LOOKED_UP.append(city)
    return {"city": city, "weather": f"sunny in {city}"}


def desk_agent(server: LLMServer) -> Any:
    """Desk asks the model about a question, which asks for a look-up; looks it up."""

    @agenttrace.agent("Desk")
    def desk(question: str) -> dict[str, Any]:
        messages = [{"role": "user", "content": question}]
        asked = litellm.completion(**http(server, messages=messages))
        call = asked.choices[0].message.tool_calls[0]
        found = look_up(**json.loads(call.function.arguments))
        return {"reply": asked.model_dump_json(), "found": found}

    return desk


def look_up_reply(city: str) -> Reply:
    function = {"name": "look_up", "arguments": json.dumps({"city": city})}
    call = {"id": f"call_{city}", "type": "function", "function": function}
    return Reply(content="", tool_calls=[call])


PARIS, ROME = "What is the weather in Paris?", "And in Rome?"


def record_two_runs(traced: Traced, tmp_path: Path, model: LLMServer) -> tuple[list[Any], Path]:
    """Desk asked two questions (two decorated runs) in one cassette, recorded: their
    outputs, and the cassette."""
    LOOKED_UP.clear()
    model.reset(look_up_reply("Paris"), look_up_reply("Rome"))
    with use_cassette("desk", directory=tmp_path / "cassettes") as cassette:
        desk = desk_agent(model)
        live = [desk(PARIS), desk(ROME)]
    assert cassette.recording and len(model.requests) == 2 and LOOKED_UP == ["Paris", "Rome"]
    return live, cassette.path


def tree(traced: Traced) -> list[dict[str, Any]]:
    """The normal form of every root the test traced since the last call, in start order."""
    roots = [root.normal() for root in build_tree(traced.spans())]
    traced.exporter.clear()
    return roots


def test_a_cassette_records_and_replays_several_runs_each_from_its_own(
    traced: Traced, tmp_path: Path, model: LLMServer
) -> None:
    live, path = record_two_runs(traced, tmp_path, model)
    recorded = tree(traced)
    assert [root["name"] for root in recorded] == ["invoke_agent Desk"] * 2
    model.stop()
    with use_cassette(path, "none") as cassette:
        desk = desk_agent(model)
        assert [desk(PARIS), desk(ROME)] == live
    assert LOOKED_UP == ["Paris", "Rome"]  # both look-ups answered from the cassette
    assert cassette.report is not None and cassette.report.clean
    assert cassette.report.served == 4  # each run's LLM call and tool call
    assert tree(traced) == recorded
    # Every id the replay allocates is past each recorded run's (the second's too): an id a
    # copy from a served body keeps names no event of the replay's own.
    held = [number(e) for e in json.loads(text(path))["events"]]
    restored = cassette.session.restored_count
    assert min(number(e) for e in cassette.session.events[restored:]) > max(held)


def number(event: dict[str, Any]) -> int:
    found = id_number(event["message_id"], MESSAGE_PREFIX)
    assert found is not None
    return found


def test_a_strict_replay_of_fewer_or_more_runs_than_recorded_fails_naming_the_cassette(
    traced: Traced, tmp_path: Path, model: LLMServer
) -> None:
    live, path = record_two_runs(traced, tmp_path, model)
    model.stop()
    with (
        pytest.raises(CassetteMismatch, match=r"holds 2 runs and the test started 1") as fewer,
        use_cassette(path, "none"),
    ):
        assert desk_agent(model)(PARIS) == live[0]  # served: only the second run is missing
    assert str(path) in str(fewer.value) and "mode 'all'" in str(fewer.value)
    with (
        pytest.raises(CassetteMismatch, match=r"diverged at 0: run 'Desk'.*holds 2 run") as more,
        use_cassette(path, "none"),
    ):
        desk = desk_agent(model)
        desk(PARIS), desk(ROME), desk("And in Oslo?")
    assert str(path) in str(more.value) and "--agent-cassette-mode=all" in str(more.value)
    assert LOOKED_UP == ["Paris", "Rome"]


def test_new_episodes_runs_a_changed_run_live_and_replays_the_next_from_its_own(
    traced: Traced, tmp_path: Path, model: LLMServer
) -> None:
    live, path = record_two_runs(traced, tmp_path, model)
    model.reset(look_up_reply("Lyon"))
    lyon = "What is the weather in Lyon?"
    with use_cassette(path, "new_episodes") as cassette:
        desk = desk_agent(model)
        grown = [desk(lyon), desk(ROME)]
    assert len(model.requests) == 1 and LOOKED_UP == ["Paris", "Rome", "Lyon"]
    assert grown[1] == live[1]  # the second run, served from its own recorded run
    report = cassette.report
    assert report is not None and report.served == 2 and report.divergence is not None
    assert report.divergence.kind == "run"
    model.stop()
    with use_cassette(path, "none") as again:  # saved with the live run in place of the first
        desk = desk_agent(model)
        assert [desk(lyon), desk(ROME)] == grown
    assert again.report is not None and again.report.clean and again.report.served == 4


class _EmptyStream(JsonHandler):
    """A chat stream that delivers no chunk: ``data: [DONE]`` and nothing else."""

    def do_POST(self) -> None:
        self.read_json()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


def test_an_empty_stream_is_refused_and_nothing_is_saved(traced: Traced, tmp_path: Path) -> None:
    server = LoopbackServer(_EmptyStream).start()
    server.api_base = f"{server.base_url}/v1"  # type: ignore[attr-defined]

    @agenttrace.agent("Quiet")
    def quiet() -> list[Any]:
        return list(litellm.completion(**http(server, stream=True)))  # type: ignore[arg-type]

    try:
        with (
            pytest.raises(CassetteError, match=r"streamed no chunk.*never recorded"),
            use_cassette("quiet", directory=tmp_path) as cassette,
        ):
            quiet()
    finally:
        server.stop()
    assert not cassette.path.exists()


def test_a_recording_a_replay_could_not_answer_is_refused(
    traced: Traced, tmp_path: Path, model: LLMServer
) -> None:
    @agenttrace.agent("Clerk")
    def clerk() -> str:
        return "ok"

    for block, why in [
        (lambda: litellm.completion(**http(model)), "LLM calls outside any decorated run"),
        (lambda: None, "ran no decorated run to record"),
    ]:
        with pytest.raises(CassetteError, match=why), use_cassette("refused", directory=tmp_path):
            block()
        assert not (tmp_path / "refused.session.json.gz").exists()


def test_a_cassette_keeps_no_local_detail_and_opens_in_every_view(
    traced: Traced, tmp_path: Path, model: LLMServer
) -> None:
    _, path = record(tmp_path, model)
    recorded = "".join(text(f) for f in (tmp_path / "sessions").glob("*.json.gz"))
    saved = text(path)
    # The recording says where it ran (its ingress: pid, program, working directory); the
    # cassette, checked into a repository, does not.
    for local in (os.getcwd(), sys.argv[0], f'"pid":{os.getpid()}'):
        assert local in recorded
        assert local not in saved
    assert '"source":"cli"' in saved
    views = [["tree"], ["dialog"], ["stats"], ["lint"], ["doubts"]]
    for form in ("otlp-json", "exchanges"):
        views.append(["export", "--format", form, "-o", str(tmp_path / form)])
    for view in views:
        shown = CliRunner().invoke(main, [*view, str(path)], catch_exceptions=False)
        assert shown.exit_code == 0, (view, shown.output)
    tree = CliRunner().invoke(main, ["tree", str(path)], catch_exceptions=False)
    assert "Shop" in tree.output and "charge" in tree.output and "gpt-4o-mini" in tree.output


@pytest.mark.e2e  # the command in a process of its own, as a user runs it
def test_agenttrace_replay_replays_a_cassette_offline(
    traced: Traced, tmp_path: Path, model: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPLAY_LLM_BASE", model.api_base)
    model.reset(Reply(content="One tea."), Reply(content="Here it is."))
    with use_cassette("replay-agent", directory=tmp_path) as cassette:
        assert replay_agent.shop() == "Here it is."
    model.stop()
    args = ("replay", str(cassette.path), "--agent", "tests.replay_agent:rebuild", "--offline")
    out = ok(run_cli(tmp_path, *args, cwd=ROOT, REPLAY_LLM_BASE=model.api_base))
    assert "Answer: Here it is." in out
    assert "3 step(s) served from the recording, 0 run live" in out


def test_names_paths_and_a_damaged_cassette(tmp_path: Path) -> None:
    assert cassette_path("a-b_c[1]", None) == Path("cassettes/a-b_c[1].session.json.gz")
    assert cassette_path("x/y.json.gz", "d") == Path("d/x/y.json.gz")
    assert cassette_path(Path("/abs/c.json.gz"), "d") == Path("/abs/c.json.gz")
    with pytest.raises(ValueError, match="must be letters"):
        cassette_path("no spaces", None)
    with pytest.raises(ValueError, match="mode must be one of"):
        use_cassette("x", "sometimes")  # type: ignore[arg-type]
    damaged = tmp_path / "damaged.session.json.gz"
    damaged.write_bytes(gzip.compress(b'{"format": "agenttrace.session"'))
    with pytest.raises(CassetteError, match="cannot be replayed"), use_cassette(damaged, "none"):
        raise AssertionError("never entered")


CONFTEST = """
import pytest
from agenttrace.testing.cassette_options import (
    add_cassette_options, cassette_for, register_cassette_marker,
)

def pytest_addoption(parser):
    add_cassette_options(parser)
    add_cassette_options(parser)  # twice (the plugin's and a conftest's) does no harm

def pytest_configure(config):
    register_cassette_marker(config)

@pytest.fixture
def context(request):
    return cassette_for(request)

@pytest.fixture
def cassette(context):
    with context as used:
        yield used
"""

TESTS = """
import pytest

@pytest.mark.agent_cassette("named", mode="all")
def test_named(context, request):
    assert context.path == request.path.parent / "cassettes" / "test_it" / "named.session.json.gz"
    print("MODE", context.mode)

@pytest.mark.agent_cassette
@pytest.mark.parametrize("n", [1])
def test_default_name(context, n):
    assert context.path.name == "test_default_name[1].session.json.gz"
    assert context.mode in ("once", "none")

def test_unmarked(context):
    assert context is None

@pytest.mark.agent_cassette("missing")
def test_entered(cassette):
    pass
"""


def test_cassette_for_reads_the_marker_and_the_option_overrides_its_mode(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_it=TESTS)
    result = pytester.runpytest("-p", "no:randomly", "-s", "--strict-markers", "-k", "not entered")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*MODE all*"])
    # The option overrides every marker's mode: "none" needs the cassette, and fails the test
    # that has none, saying so.
    result = pytester.runpytest("-p", "no:randomly", "-s", "--agent-cassette-mode=none")
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(["*MODE none*", "*missing.session.json.gz: no such cassette*"])
