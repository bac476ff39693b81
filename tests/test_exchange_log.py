"""``agenttrace.ExchangeLogger``: seed 004's exchange log, for the Claude Agent SDK.

Seed 004's example lines are conformance cases: fed the seed's messages (in each form the logger
takes: dicts, ``stream-json`` lines, bytes, the SDK's own objects), the logger writes the seed's
``session_start`` and ``exchange`` lines field for field, timestamps aside, and its aggregation
gives the seed's ``session_end``. Then what the real SDK does (tests marked e2e, driving the
bundled Claude Code CLI against a scripted Anthropic server on loopback): running totals turned
into shares, a second exchange in streaming mode, ``resume=``, a tool error, an error result, the
CLI's ``stream-json`` lines. And what must not go wrong: a process killed mid-session, an error
in the caller's loop, hostile input.
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
import os
import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import agenttrace
from agenttrace import ExchangeLogger, SessionFileError
from agenttrace.formats.exchange_log.files import create_log

from . import anthropic_server as api
from . import test_full_disk
from .helpers import child_env

try:
    import claude_agent_sdk as sdk
except ImportError:  # the [claude-agent-sdk] extra: the tests of the real SDK skip without it
    sdk = None

DATA = json.loads((Path(__file__).parent / "data" / "seed004_examples.json").read_text())
SEED_LINES: dict[str, dict[str, Any]] = DATA["lines"]
SEED_ID = SEED_LINES["session_start"]["session_id"]
TIMES = ("ts", "ts_start", "ts_end")
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
FILE_NAME = re.compile(r"^\d{8}_\d{6}_[A-Za-z0-9_.-]{1,8}(_\d+)?\.jsonl$")


def read_log(path: Path | None) -> list[dict[str, Any]]:
    assert path is not None
    data = path.read_text()
    assert data.endswith("\n")
    return [json.loads(line) for line in data.splitlines()]


def only_log(directory: Path) -> Path:
    (path,) = directory.glob("*.jsonl")
    return path


def without_times(line: dict[str, Any]) -> dict[str, Any]:
    """``line`` with its timestamps (and its messages') checked for form, then left out."""
    for key in TIMES:
        if key in line:
            assert TS.match(line[key]), (key, line[key])
    stripped = {k: v for k, v in line.items() if k not in TIMES}
    if isinstance(stripped.get("messages"), list):
        stripped["messages"] = [without_times(m) for m in stripped["messages"]]
    return stripped


def init(session_id: str = SEED_ID, **extra: Any) -> dict[str, Any]:
    return {**DATA["messages"][0], "session_id": session_id, **extra}


def text(value: str, parent: str | None = None, session_id: str = SEED_ID) -> dict[str, Any]:
    return {
        "type": "assistant",
        "session_id": session_id,
        "parent_tool_use_id": parent,
        "message": {"model": "m", "content": [{"type": "text", "text": value}]},
    }


def call(call_id: str, name: str, arguments: Any, parent: str | None = None) -> dict[str, Any]:
    block = {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
    return {"type": "assistant", "parent_tool_use_id": parent, "message": {"content": [block]}}


def answer(call_id: str, output: Any, is_error: bool | None = None) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": output}
    if is_error is not None:
        block["is_error"] = is_error
    return {"type": "user", "message": {"role": "user", "content": [block]}}


def result(
    cost: float | None = 0.001,
    api_ms: int = 100,
    duration_ms: int = 200,
    tokens: tuple[int, int, int, int] = (1, 2, 3, 4),
    session_id: str = SEED_ID,
    **extra: Any,
) -> dict[str, Any]:
    tokens_in, tokens_out, cache_creation, cache_read = tokens
    return {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "duration_ms": duration_ms,
        "duration_api_ms": api_ms,
        "num_turns": 1,
        "session_id": session_id,
        "total_cost_usd": cost,
        "usage": {
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "cache_creation_input_tokens": cache_creation,
            "cache_read_input_tokens": cache_read,
        },
        **extra,
    }


# --- the forms a message comes in --------------------------------------------------------------


def as_sdk_object(wire: dict[str, Any]) -> Any:
    """``wire`` as the SDK's own object (``claude_agent_sdk.types``), built here by hand."""
    types = pytest.importorskip("claude_agent_sdk.types")
    kind = wire["type"]
    if kind == "system":
        return types.SystemMessage(subtype=wire["subtype"], data=wire)
    if kind in ("assistant", "user"):
        body = wire["message"]
        blocks = []
        for block in body["content"]:
            if block["type"] == "text":
                blocks.append(types.TextBlock(text=block["text"]))
            elif block["type"] == "tool_use":
                blocks.append(types.ToolUseBlock(block["id"], block["name"], block["input"]))
            else:
                blocks.append(
                    types.ToolResultBlock(
                        block["tool_use_id"], block.get("content"), block.get("is_error")
                    )
                )
        if kind == "user":
            return types.UserMessage(
                content=blocks, parent_tool_use_id=wire.get("parent_tool_use_id")
            )
        return types.AssistantMessage(
            content=blocks,
            model=body.get("model", "claude-haiku-4-5-20251001"),
            parent_tool_use_id=wire.get("parent_tool_use_id"),
            usage=body.get("usage"),
            message_id=body.get("id"),
            session_id=wire.get("session_id"),
        )
    fields = ("duration_ms", "duration_api_ms", "is_error", "num_turns", "session_id")
    return types.ResultMessage(
        subtype=wire["subtype"],
        **{name: wire[name] for name in fields},
        total_cost_usd=wire.get("total_cost_usd"),
        usage=wire.get("usage"),
        result=wire.get("result"),
    )


FORMS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "dict": copy.deepcopy,
    "stream-json line": json.dumps,
    "bytes": lambda wire: json.dumps(wire).encode(),
    "sdk object": as_sdk_object,
}


# --- seed 004, field for field ------------------------------------------------------------------


@pytest.mark.parametrize("form", FORMS)
def test_the_seeds_poem_exchange_field_for_field(tmp_path: Path, form: str) -> None:
    to_form = FORMS[form]
    first, *rest = DATA["messages"]
    with ExchangeLogger(sessions_dir=tmp_path) as log:
        log.log(to_form(first))
        log.log_user_input(DATA["user_input"])
        for message in rest:
            log.log(to_form(message))
    assert log.path == only_log(tmp_path)
    assert FILE_NAME.match(log.path.name) and log.path.name.endswith("_1f320356.jsonl")
    assert log.path.stat().st_mode & 0o777 == 0o600
    start, exchange, end = read_log(log.path)
    assert without_times(start) == without_times(SEED_LINES["session_start"])
    assert without_times(exchange) == without_times(SEED_LINES["exchange"])
    assert without_times(end) == {
        "type": "session_end",
        "session_id": SEED_ID,
        "total_exchanges": 1,
        "total_duration_ms": 6901,
        "total_duration_api_ms": 14317,
        "total_cost_usd": 0.004965,
        "total_tokens": {"input": 9, "output": 444, "cache_creation": 11903, "cache_read": 11530},
        "tools_used": {"Write": 1},
    }
    assert start["ts"] <= exchange["ts_start"] <= exchange["ts_end"] <= end["ts"]


def test_session_end_aggregates_as_the_seed_says(tmp_path: Path) -> None:
    """The seed's session_end (3 exchanges): durations and cost summed, tokens of the last
    exchange only, tools counted over all."""
    first, *rest = DATA["messages"]
    with ExchangeLogger(sessions_dir=tmp_path) as log:
        log.log(first)
        log.log_user_input(DATA["user_input"])
        for message in rest:  # 6901 ms, 14317 ms of API, $0.004965, Write
            log.log(message)
        log.log(init())
        log.log_user_input("look around")
        log.log(call("t2", "Bash", {"command": "ls"}))
        log.log(answer("t2", "poem.md"))
        log.log(call("t3", "Read", {"file_path": "poem.md"}))
        log.log(answer("t3", "# A Poem..."))
        log.log(result(cost=0.003, api_ms=10000, duration_ms=5000, tokens=(7, 300, 1000, 20000)))
        log.log(init())
        log.log_user_input("once more")
        for number, name in enumerate(("Bash", "Bash", "Write")):
            log.log(call(f"t{4 + number}", name, {}))
            log.log(answer(f"t{4 + number}", "ok"))
        log.log(
            result(cost=0.00488, api_ms=11163, duration_ms=6349, tokens=(25, 1250, 23500, 45600))
        )
    lines = read_log(log.path)
    assert [line["type"] for line in lines] == ["session_start"] + ["exchange"] * 3 + [
        "session_end"
    ]
    assert [line["exchange"] for line in lines[1:4]] == [1, 2, 3]
    assert without_times(lines[-1]) == without_times(SEED_LINES["session_end"])


def test_a_session_start_is_written_once_however_many_inits_arrive(tmp_path: Path) -> None:
    with ExchangeLogger(sessions_dir=tmp_path) as log:
        for number in range(3):
            log.log(init(claude_code_version="2.1.330"))
            log.log_user_input(f"input {number}")
            log.log(text(f"reply {number}"))
            log.log(result(cost=0.001 * (number + 1), api_ms=100 * (number + 1)))
    lines = read_log(log.path)
    assert [line["type"] for line in lines] == ["session_start"] + ["exchange"] * 3 + [
        "session_end"
    ]
    assert [line["user_input"] for line in lines[1:4]] == ["input 0", "input 1", "input 2"]


# --- the counters -----------------------------------------------------------------------------


def test_running_totals_become_each_exchanges_share(tmp_path: Path) -> None:
    """The real CLI (its init names claude_code_version) reports cost and API time as running
    totals: the issue's numbers, $0.56 then $0.560024 for an exchange of one token each way."""
    with ExchangeLogger(sessions_dir=tmp_path) as log:
        log.log(init(claude_code_version="2.1.330"))
        log.log(text("first"))
        log.log(result(cost=0.56, api_ms=14317))
        log.log(init(claude_code_version="2.1.330"))
        log.log(text("second"))
        log.log(result(cost=0.560024, api_ms=16000, tokens=(1, 1, 0, 0)))
    _, first, second, end = read_log(log.path)
    assert first["stats"]["cost_usd"] == 0.56 and first["stats"]["duration_api_ms"] == 14317
    assert second["stats"]["cost_usd"] == 2.4e-05
    assert second["stats"]["duration_api_ms"] == 1683
    assert end["total_cost_usd"] == 0.560024 and end["total_duration_api_ms"] == 16000
    assert end["total_tokens"] == {"input": 1, "output": 1, "cache_creation": 0, "cache_read": 0}


def test_without_claude_code_version_values_are_the_exchanges_own(tmp_path: Path) -> None:
    with ExchangeLogger(sessions_dir=tmp_path) as log:
        log.log(init())
        log.log(result(cost=0.56, api_ms=14317))
        log.log(result(cost=0.560024, api_ms=16000))
    _, first, second, end = read_log(log.path)
    assert (first["stats"]["cost_usd"], second["stats"]["cost_usd"]) == (0.56, 0.560024)
    assert end["total_cost_usd"] == 1.120024 and end["total_duration_api_ms"] == 30317


def test_a_counter_that_starts_again_is_the_exchanges_own(tmp_path: Path) -> None:
    """A resumed CLI whose predecessor was killed before it saved its totals counts from less
    than the logger last saw: the total is the share, never a negative one."""
    with ExchangeLogger(sessions_dir=tmp_path) as log:
        log.log(init(claude_code_version="2.1.330"))
        log.log(result(cost=0.5, api_ms=1000))
        log.log(result(cost=0.25, api_ms=400))
    _, _, second, _ = read_log(log.path)
    assert second["stats"]["cost_usd"] == 0.25 and second["stats"]["duration_api_ms"] == 400


def test_a_resumed_session_takes_what_its_earlier_logs_account_for(tmp_path: Path) -> None:
    """A new logger (a web request with ``resume=``) meets running totals that include the
    exchanges an earlier logger of the session wrote: those are not counted again."""
    with ExchangeLogger(sessions_dir=tmp_path) as log:
        log.log(init(claude_code_version="2.1.330"))
        log.log(result(cost=0.002724, api_ms=49))
    earlier = log.path
    with ExchangeLogger(sessions_dir=tmp_path) as later:
        later.log(init(claude_code_version="2.1.330"))
        later.log(result(cost=0.004086, api_ms=77))
        later.log(result(cost=0.00681, api_ms=100))
    assert later.path != earlier and earlier is not None and later.path is not None
    _, first, second, end = read_log(later.path)
    assert first["stats"]["cost_usd"] == 0.001362 and first["stats"]["duration_api_ms"] == 28
    assert second["stats"]["cost_usd"] == 0.002724 and second["stats"]["duration_api_ms"] == 23
    assert end["total_cost_usd"] == 0.004086
    ends = [read_log(path)[-1] for path in (earlier, later.path)]
    assert math.isclose(sum(e["total_cost_usd"] for e in ends), 0.00681)


# --- exchanges and sessions -------------------------------------------------------------------


def test_sub_agent_messages_carry_the_call_that_ran_them(tmp_path: Path) -> None:
    with ExchangeLogger(sessions_dir=tmp_path) as log:
        log.log(init())
        log.log_user_input("delegate")
        log.log(call("agent_1", "Agent", {"prompt": "write a poem"}))
        log.log(text("I'll write it.", parent="agent_1"))
        log.log(call("w1", "Write", {"file_path": "poem.md"}, parent="agent_1"))
        sub_result = answer("w1", [{"type": "text", "text": "File created"}, {"type": "image"}])
        log.log({**sub_result, "parent_tool_use_id": "agent_1"})
        log.log(answer("agent_1", [{"type": "text", "text": "Done"}]))
        log.log(result())
    _, exchange, end = read_log(log.path)
    messages = exchange["messages"]
    assert [m.get("parent_tool_use_id") for m in messages] == [
        None,
        "agent_1",
        "agent_1",
        "agent_1",
        None,
    ]
    assert "parent_tool_use_id" not in messages[0] and "parent_tool_use_id" not in messages[-1]
    assert messages[3]["output"] == "File created\n[image]" and messages[4]["output"] == "Done"
    assert end["tools_used"] == {"Agent": 1, "Write": 1}


def test_inputs_given_ahead_wait_for_their_exchanges(tmp_path: Path) -> None:
    """Seed 004's web route logs every input before the first result: each exchange takes the
    next one, and a turn the session started itself (a task notification) takes none."""
    with ExchangeLogger(sessions_dir=tmp_path) as log:
        log.log_user_input("first")
        log.log_user_input("second")
        log.log(init())
        log.log(text("one"))
        log.log(result())
        log.log(text("a background task finished"))
        log.log(result(origin={"kind": "task-notification"}))
        log.log(text("two"))
        log.log(result())
    exchanges = read_log(log.path)[1:-1]
    assert [e["user_input"] for e in exchanges] == ["first", None, "second"]
    assert [e["messages"][0]["text"] for e in exchanges] == [
        "one",
        "a background task finished",
        "two",
    ]


def test_a_new_session_id_ends_the_session_and_starts_a_new_log(tmp_path: Path) -> None:
    other = "8a9e4f21-0000-4000-8000-000000000000"
    with ExchangeLogger(sessions_dir=tmp_path) as log:
        log.log(init())
        log.log(result())
        log.log_user_input("a new query")
        log.log(init(session_id=other))
        log.log(text("new", session_id=other))
        log.log(result(session_id=other))
    first, second = sorted(
        tmp_path.glob("*.jsonl"), key=lambda p: p.name.endswith("_8a9e4f21.jsonl")
    )
    assert [line["type"] for line in read_log(first)] == [
        "session_start",
        "exchange",
        "session_end",
    ]
    lines = read_log(second)
    assert [line["type"] for line in lines] == ["session_start", "exchange", "session_end"]
    assert {line["session_id"] for line in lines} == {other} and log.path == second
    assert lines[1]["user_input"] == "a new query"


def test_an_error_result_is_an_exchange_with_its_error(tmp_path: Path) -> None:
    with ExchangeLogger(sessions_dir=tmp_path) as log:
        log.log(init())
        log.log_user_input("too much")
        log.log(result(cost=0, is_error=True, result="Prompt is too long"))
        log.log(result(is_error=True, subtype="error_max_turns", result=None))
    _, failed, limited, _ = read_log(log.path)
    assert failed["error"] == "Prompt is too long" and failed["stats"]["cost_usd"] == 0
    assert limited["error"] == "error_max_turns"


def test_messages_before_any_session_id_are_written_once_one_names_it(tmp_path: Path) -> None:
    """Seed 004's tool messages carry no session id: before the result names the session they
    wait, and the session_start takes the model the assistant's message named."""
    with ExchangeLogger(sessions_dir=tmp_path) as log:
        log.log(call("t1", "Write", {}))
        log.log(answer("t1", "ok"))
        assert log.path is None and not list(tmp_path.iterdir())
        log.log(result())
    start, exchange, _ = read_log(log.path)
    assert start["session_id"] == SEED_ID and start["model"] is None and start["cwd"] is None
    assert [m["type"] for m in exchange["messages"]] == ["tool_use", "result"]


# --- crashes and errors ------------------------------------------------------------------------


def test_close_after_an_error_writes_the_exchange_in_progress_and_session_end_once(
    tmp_path: Path,
) -> None:
    log = ExchangeLogger(sessions_dir=tmp_path)
    with pytest.raises(RuntimeError, match="the loop broke"), log:
        log.log(init())
        log.log_user_input("write a poem")
        log.log(call("t1", "Write", {"file_path": "poem.md"}))
        log.log_user_input("and another")
        raise RuntimeError("the loop broke")
    written = log.path.read_bytes() if log.path else b""
    log.close()
    assert log.path is not None and log.path.read_bytes() == written
    _, unfinished, never_started, end = read_log(log.path)
    assert unfinished["user_input"] == "write a poem" and unfinished["stats"] is None
    assert [m["name"] for m in unfinished["messages"]] == ["Write"]
    assert never_started["user_input"] == "and another" and never_started["messages"] == []
    assert end["total_exchanges"] == 2 and end["tools_used"] == {"Write": 1}
    with pytest.raises(ValueError, match="closed"):
        log.log(text("late"))


CHILD = textwrap.dedent(
    """
    import json, sys
    from agenttrace import ExchangeLogger
    messages = json.loads(sys.argv[2])
    log = ExchangeLogger(sessions_dir=sys.argv[1])
    log.log_user_input("first")
    for message in messages:
        log.log(message)
    log.log_user_input("second")
    log.log(messages[1])  # the second exchange starts, and never ends
    print(log.path, flush=True)
    sys.stdin.read()  # until killed
    """
)


@pytest.mark.e2e
def test_a_killed_process_loses_at_most_the_exchange_in_progress(tmp_path: Path) -> None:
    messages = [init(), text("one"), call("t1", "Write", {}), answer("t1", "ok"), result()]
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path), json.dumps(messages)],
        env=child_env(PYTHONPATH=str(Path(__file__).resolve().parent.parent)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        path = Path(child.stdout.readline().strip())  # type: ignore[union-attr]
        assert path.name, child.stderr.read()  # type: ignore[union-attr]
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=480)
    lines = read_log(path)  # whole lines only, the last one ending in a newline
    assert [line["type"] for line in lines] == ["session_start", "exchange"]
    assert lines[1]["user_input"] == "first" and len(lines[1]["messages"]) == 3


small_disk = test_full_disk.small_disk  # a real tmpfs, filled up and freed (root only)


def test_a_full_disk_loses_no_line(
    small_disk: test_full_disk.Disk, caplog: pytest.LogCaptureFixture
) -> None:
    """Lines that cannot be written wait in memory, in order, and are written once there is
    room again; the program goes on, told once when writing fails and once when it works."""
    sessions = small_disk.path / "sessions"
    with ExchangeLogger(sessions_dir=sessions) as log:
        log.log(init())
        small_disk.fill()
        for number in range(3):
            log.log_user_input(f"input {number}")
            log.log(text("x" * 5000))  # more than the slack of a page
            log.log(result())
        assert len(read_log(log.path)) == 1  # session_start only: the disk is full
        small_disk.free()
        log.log(result())
    lines = read_log(log.path)
    assert [line["type"] for line in lines] == ["session_start"] + ["exchange"] * 4 + [
        "session_end"
    ]
    assert [line["user_input"] for line in lines[1:4]] == ["input 0", "input 1", "input 2"]
    warnings = [r.getMessage() for r in caplog.records if "exchange log" in r.getMessage()]
    assert len(warnings) == 2, warnings
    assert "cannot write" in warnings[0] and "No space left" in warnings[0]
    assert "written again" in warnings[1]


# --- hostile input -------------------------------------------------------------------------------


class Opaque:
    pass


def deep(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


HOSTILE: dict[str, Any] = {
    "not JSON": "{not json",
    "torn line": json.dumps(result())[:40],
    "a JSON array": b"[1, 2]",
    "no type": {"session_id": SEED_ID},
    "content not a list": {"type": "assistant", "message": {"content": "text"}},
    "text not a string": {
        "type": "assistant",
        "message": {"content": [{"type": "text", "text": 5}]},
    },
    "a duration as text": result(duration_ms="5"),
    "a negative count": result(tokens=(-1, 0, 0, 0)),
    "a boolean count": {**result(), "num_turns": True},
    "NaN as a duration": {**result(), "duration_ms": math.nan},
    "an infinite cost": {**result(), "total_cost_usd": math.inf},
    "a NaN line": '{"type": "result", "duration_ms": NaN}',
    "an object in a tool's input": call("t9", "Write", {"file": Opaque()}),
    "nesting past the limit": call("t9", "Write", {"deep": deep(300)}),
    "a number": 42,
    "some object": Opaque(),
    "a class": Opaque,
}


@pytest.mark.parametrize("case", HOSTILE)
def test_bad_input_is_one_clear_error_and_loses_nothing(tmp_path: Path, case: str) -> None:
    with ExchangeLogger(sessions_dir=tmp_path) as log:
        log.log(init())
        log.log_user_input("write a poem")
        log.log(text("before"))
        with pytest.raises(SessionFileError) as refused:
            log.log(HOSTILE[case])
        message = str(refused.value)
        assert "\n" not in message and message.startswith("not a Claude Agent SDK message: ")
        log.log(text("after"))
        log.log(result())
    _, exchange, end = read_log(log.path)
    assert [m["text"] for m in exchange["messages"]] == ["before", "after"]
    assert exchange["user_input"] == "write a poem" and end["total_exchanges"] == 1


def test_a_line_past_the_line_cap_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTTRACE_MAX_LINE_BYTES", "4096")
    with ExchangeLogger(sessions_dir=tmp_path) as log:
        log.log(init())
        with pytest.raises(SessionFileError, match="AGENTTRACE_MAX_LINE_BYTES"):
            log.log(json.dumps(text("x" * 5000)))
        log.log(json.dumps(text("x" * 3000)))
        log.log(result())
    assert len(read_log(log.path)[1]["messages"]) == 1


@pytest.mark.parametrize(
    "session_id", ["../../outside", "/etc/passwd", "a/b", "x" * 200, "..", "id\n", ""]
)
def test_a_session_id_that_is_not_a_plain_name_names_no_file(
    tmp_path: Path, session_id: str
) -> None:
    sessions = tmp_path / "sessions"
    with ExchangeLogger(sessions_dir=sessions) as log:
        with pytest.raises(SessionFileError, match="not a session id"):
            log.log(init(session_id=session_id))
        with pytest.raises(SessionFileError, match="not a session id"):
            log.log(result(session_id=session_id))
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # not even the directory


def test_user_input_must_be_text(tmp_path: Path) -> None:
    with ExchangeLogger(sessions_dir=tmp_path) as log, pytest.raises(TypeError):
        log.log_user_input(b"bytes")  # type: ignore[arg-type]


def test_a_planted_symlink_is_never_written_through(tmp_path: Path) -> None:
    """A link in the sessions directory under the name the next log would take: the log takes
    the next free name instead, and the link's target is untouched."""
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me\n")
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    when = 1762504532.0  # 2025-11-07 08:35:32 UTC
    (sessions / "20251107_083532_1f320356.jsonl").symlink_to(outside)
    path, fd = create_log(sessions, SEED_ID, when)
    os.close(fd)
    assert path.name == "20251107_083532_1f320356_2.jsonl"
    assert outside.read_text() == "keep me\n"


def test_the_logger_is_public() -> None:
    assert "ExchangeLogger" in agenttrace.__all__ and agenttrace.ExchangeLogger is ExchangeLogger
    assert ExchangeLogger.__doc__ and ExchangeLogger.log.__doc__


# --- the real SDK, its CLI and a scripted server --------------------------------------------------

CLI = Path(sdk.__file__).parent / "_bundled" / "claude" if sdk else Path("claude")


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    started = api.AnthropicServer().start()
    yield started
    started.stop()


@pytest.fixture
def claude(tmp_path: Path, server: Any) -> dict[str, Any]:
    """Where the CLI runs: a work directory, and its HOME and TMPDIR in the test's directory."""
    if sdk is None or not CLI.exists():
        pytest.skip(f"the SDK's bundled Claude Code CLI is not installed ({CLI})")
    server.reset()
    home, work, tmp = tmp_path / "home", tmp_path / "work", tmp_path / "tmp"
    for directory in (home, work, tmp):
        directory.mkdir()
    env = {**server.env(), "HOME": str(home), "TMPDIR": str(tmp)}
    return {"env": env, "work": work, "sessions": tmp_path / "sessions"}


def options(claude: dict[str, Any], **extra: Any) -> Any:
    return sdk.ClaudeAgentOptions(
        permission_mode="acceptEdits", cwd=claude["work"], env=claude["env"], **extra
    )


async def logged(log: ExchangeLogger, prompt: Any, opts: Any) -> list[Any]:
    """Every message ``query`` yields, each given to ``log`` first, as in the seed's loop."""
    received = []
    async for message in sdk.query(prompt=prompt, options=opts):
        log.log(message)
        received.append(message)
    return received


def results_of(messages: list[Any]) -> list[Any]:
    return [m for m in messages if isinstance(m, sdk.ResultMessage)]


USAGE = [
    {
        "input_tokens": 3,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 50,
        "output_tokens": 42,
    },
    {
        "input_tokens": 5,
        "cache_creation_input_tokens": 7,
        "cache_read_input_tokens": 150,
        "output_tokens": 9,
    },
]


ACCEPT = ("--permission-mode", "acceptEdits")


def poem_script(work: Path) -> list[Any]:
    write = api.tool_use("Write", {"file_path": str(work / "poem.md"), "content": "# A Poem\n"})
    return [
        api.Reply([api.text("I'll write a poem to poem.md."), write], usage=USAGE[0]),
        api.Reply([api.text("Done: the poem is in poem.md.")], usage=USAGE[1]),
    ]


@pytest.mark.e2e
async def test_the_real_sdks_poem_exchange(server: Any, claude: dict[str, Any]) -> None:
    server.reset(*poem_script(claude["work"]))
    with ExchangeLogger(sessions_dir=claude["sessions"]) as log:
        prompt = "write a poem to poem.md"
        log.log_user_input(prompt)
        received = await logged(log, prompt, options(claude))
    assert (claude["work"] / "poem.md").read_text() == "# A Poem\n"
    (done,) = results_of(received)
    (init_message,) = [
        m for m in received if isinstance(m, sdk.SystemMessage) and m.subtype == "init"
    ]
    start, exchange, end = read_log(only_log(claude["sessions"]))
    assert without_times(start) == {
        "type": "session_start",
        "session_id": done.session_id,
        "model": init_message.data["model"],
        "cwd": str(claude["work"]),
        "tools_available": init_message.data["tools"],
        "permission_mode": "acceptEdits",
    }
    assert "Write" in start["tools_available"]
    call_id = server.sent[0].tool_ids[0]
    assert without_times(exchange) == {
        "type": "exchange",
        "session_id": done.session_id,
        "exchange": 1,
        "user_input": prompt,
        "messages": [
            {"source": "assistant", "type": "text", "text": "I'll write a poem to poem.md."},
            {
                "source": "assistant",
                "type": "tool_use",
                "tool_use_id": call_id,
                "name": "Write",
                "input": {"file_path": str(claude["work"] / "poem.md"), "content": "# A Poem\n"},
            },
            {
                "source": "tool",
                "type": "result",
                "tool_use_id": call_id,
                "is_error": False,
                "output": exchange["messages"][2]["output"],
            },
            {"source": "assistant", "type": "text", "text": "Done: the poem is in poem.md."},
        ],
        "stats": {
            "num_turns": 2,
            "duration_ms": done.duration_ms,
            "duration_api_ms": done.duration_api_ms,
            "tokens_in": 8,
            "tokens_out": 51,
            "cache_creation": 107,
            "cache_read": 200,
            "cost_usd": done.total_cost_usd,
        },
    }
    assert "File created" in exchange["messages"][2]["output"]
    assert end["total_cost_usd"] == done.total_cost_usd and end["tools_used"] == {"Write": 1}
    assert end["total_tokens"] == {
        "input": 8,
        "output": 51,
        "cache_creation": 107,
        "cache_read": 200,
    }


async def inputs(
    log: ExchangeLogger, prompts: list[str], answered: asyncio.Event
) -> AsyncIterator[dict[str, Any]]:
    """Seed 004's ``generateMessages``: each input logged, then sent once the last is answered."""
    for number, prompt in enumerate(prompts):
        if number:
            await answered.wait()
            answered.clear()
        log.log_user_input(prompt)
        yield {
            "type": "user",
            "message": {"role": "user", "content": prompt},
            "parent_tool_use_id": None,
            "session_id": "",
        }


async def streamed(log: ExchangeLogger, prompts: list[str], opts: Any) -> list[Any]:
    answered = asyncio.Event()
    received = []
    async for message in sdk.query(prompt=inputs(log, prompts, answered), options=opts):
        log.log(message)
        received.append(message)
        if isinstance(message, sdk.ResultMessage):
            answered.set()
    return received


@pytest.mark.e2e
async def test_two_exchanges_in_streaming_mode_log_each_ones_share(
    server: Any, claude: dict[str, Any]
) -> None:
    """Each exchange starts with a new init; cost and API time are running totals: the lines
    carry each exchange's share, the session_end the session's totals. The second exchange's
    tool fails (a file that does not exist)."""
    missing = str(claude["work"] / "missing.txt")
    server.reset(
        *poem_script(claude["work"]),
        api.Reply([api.tool_use("Read", {"file_path": missing})], usage=USAGE[1]),
        api.Reply([api.text("There is no such file.")], usage=USAGE[0]),
    )
    with ExchangeLogger(sessions_dir=claude["sessions"]) as log:
        prompts = ["write a poem", "read missing.txt"]
        received = await streamed(log, prompts, options(claude))
    first, second = results_of(received)
    inits = [m for m in received if isinstance(m, sdk.SystemMessage) and m.subtype == "init"]
    assert len(inits) == 2  # one per exchange
    assert second.total_cost_usd > first.total_cost_usd  # a running total
    lines = read_log(only_log(claude["sessions"]))
    assert [line["type"] for line in lines] == [
        "session_start",
        "exchange",
        "exchange",
        "session_end",
    ]
    _, one, two, end = lines
    assert [one["user_input"], two["user_input"]] == ["write a poem", "read missing.txt"]
    assert one["stats"]["cost_usd"] == first.total_cost_usd
    assert two["stats"]["cost_usd"] == round(second.total_cost_usd - first.total_cost_usd, 12)
    assert one["stats"]["duration_api_ms"] == first.duration_api_ms
    assert two["stats"]["duration_api_ms"] == second.duration_api_ms - first.duration_api_ms
    assert two["stats"]["tokens_in"] == 8 and two["stats"]["tokens_out"] == 51
    assert math.isclose(end["total_cost_usd"], second.total_cost_usd)
    assert end["total_duration_api_ms"] == second.duration_api_ms
    assert end["total_duration_ms"] == first.duration_ms + second.duration_ms
    assert end["total_tokens"]["input"] == 8 and end["tools_used"] == {"Write": 1, "Read": 1}
    failed = [m for m in two["messages"] if m["type"] == "result"]
    assert len(failed) == 1 and failed[0]["is_error"] is True


@pytest.mark.e2e
async def test_resume_carries_the_running_totals_over(server: Any, claude: dict[str, Any]) -> None:
    """What ``resume=`` does to the counters: the session id stays, and the resumed CLI starts
    from the session's running totals (it saves them in its transcript), so its first result's
    cost includes the earlier exchange. A new logger of the resumed session logs only the new
    share; together the two logs add up to the session's total."""
    same = api.Reply([api.text("Hello!")], usage=USAGE[0])
    server.reset(same, same)
    with ExchangeLogger(sessions_dir=claude["sessions"]) as log:
        log.log_user_input("hello")
        (earlier,) = results_of(await logged(log, "hello", options(claude)))
    with ExchangeLogger(sessions_dir=claude["sessions"]) as resumed_log:
        resumed_log.log_user_input("hello again")
        opts = options(claude, resume=earlier.session_id)
        (resumed,) = results_of(await logged(resumed_log, "hello again", opts))
    assert resumed.session_id == earlier.session_id
    assert math.isclose(resumed.total_cost_usd, 2 * earlier.total_cost_usd)  # carried over
    assert resumed.duration_api_ms >= earlier.duration_api_ms
    assert log.path != resumed_log.path and log.path and resumed_log.path
    _, exchange, _ = read_log(resumed_log.path)
    assert math.isclose(exchange["stats"]["cost_usd"], earlier.total_cost_usd)
    api_ms = resumed.duration_api_ms - earlier.duration_api_ms
    assert exchange["stats"]["duration_api_ms"] == api_ms
    ends = [read_log(path)[-1] for path in (log.path, resumed_log.path)]
    assert math.isclose(sum(e["total_cost_usd"] for e in ends), resumed.total_cost_usd)


@pytest.mark.e2e
async def test_an_sdk_error_result_is_logged_before_the_sdk_raises(
    server: Any, claude: dict[str, Any]
) -> None:
    server.reset(api.Reply(status=400, error_message="prompt is too long"))
    received: list[Any] = []

    async def run() -> None:
        log = ExchangeLogger(sessions_dir=claude["sessions"])
        try:
            log.log_user_input("too much")
            async for message in sdk.query(prompt="too much", options=options(claude)):
                log.log(message)
                received.append(message)
        finally:
            log.close()

    with pytest.raises(Exception) as raised:  # whichever the SDK raises
        await run()
    assert "too long" in str(raised.value).lower()
    (failed,) = results_of(received)
    assert failed.is_error
    _, exchange, end = read_log(only_log(claude["sessions"]))
    assert exchange["error"] == failed.result and exchange["user_input"] == "too much"
    assert exchange["stats"]["cost_usd"] == failed.total_cost_usd
    assert end["total_exchanges"] == 1


@pytest.mark.e2e
def test_the_clis_stream_json_lines_log_as_its_sdk_objects_do(
    server: Any, claude: dict[str, Any]
) -> None:
    """The CLI's own ``stream-json`` output, line by line as bytes, gives the log the SDK's
    objects parsed from the same lines give (timestamps aside)."""
    from claude_agent_sdk._internal.message_parser import parse_message

    server.reset(*poem_script(claude["work"]))
    run = subprocess.run(
        [str(CLI), "-p", "write a poem", "--output-format", "stream-json", "--verbose", *ACCEPT],
        cwd=claude["work"],
        env={**child_env(), **claude["env"]},
        capture_output=True,
        timeout=480,
    )
    assert run.returncode == 0, run.stderr
    raw = [line for line in run.stdout.splitlines() if line.strip()]
    as_lines, as_objects = claude["sessions"] / "lines", claude["sessions"] / "objects"
    with (
        ExchangeLogger(sessions_dir=as_lines) as log,
        ExchangeLogger(sessions_dir=as_objects) as twin,
    ):
        log.log_user_input("write a poem")
        twin.log_user_input("write a poem")
        for line in raw:
            log.log(line)
            parsed = parse_message(json.loads(line))
            if parsed is not None:
                twin.log(parsed)
    lines = [without_times(line) for line in read_log(only_log(as_lines))]
    assert lines == [without_times(line) for line in read_log(only_log(as_objects))]
    assert [m["type"] for m in lines[1]["messages"]] == ["text", "tool_use", "result", "text"]
    assert lines[1]["stats"]["tokens_out"] == 51
