"""The journal's line types (agenttrace.model.journal_lines): one definition that writes, reads
and validates every kind of line, in the bytes main's writer wrote."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from agenttrace._internal.times import ts_nanoseconds
from agenttrace.formats.session import schema
from agenttrace.model import journal_lines as jl

WRITTEN = Path(__file__).parent / "data" / "journal_lines_main.jsonl"
"""One line of each kind the journal writes (run start and end, an implicit run, tool and LLM
intents, done lines with a result, chunks, capped, not replayable, failed, replayed, decisions),
written by main's dict-building writer before the lines were typed; a lone surrogate and a
number past 64 bits included."""


def _lines() -> list[bytes]:
    return WRITTEN.read_bytes().splitlines(keepends=True)


@pytest.mark.parametrize("data", _lines(), ids=lambda data: json.loads(data)["event_type"])
def test_a_line_main_wrote_decodes_and_encodes_to_the_same_bytes(data: bytes) -> None:
    decoded = json.loads(data)
    line = jl.decode_line(decoded)
    assert line is not None
    assert jl.journal_bytes(line, ts_nanoseconds(decoded["ts"])) == data


def test_each_kind_of_line_is_written_by_one_builder_as_main_wrote_it() -> None:
    written = [json.loads(data) for data in _lines()]
    fp, arguments = written[0]["fingerprint"], written[2]["arguments"]
    key, llm = ("3f9c0a1b2c3d4e5f", "2.1", 1), ("3f9c0a1b2c3d4e5f", "2.2", 1)
    agent = {"agent_id": "agent_001"}
    built = [
        jl.run_line(key[0], 1, **agent, name="Shop", messages=3, arguments_fingerprint=fp,
                    process="9a1e", pid=4242),
        jl.run_line(key[0], 2, **agent, name="implicit", messages=0, implicit=True),
        jl.intent_line(key, **agent, name="charge", effect="effect", request_fingerprint=fp,
                       arguments=arguments, call_id="call_1", lease="9a1e", path="2.1"),
        jl.intent_line((key[0], "2.1/2", 1), **agent, name="charge", effect="idempotent",
                       request_fingerprint=fp, path="2.3"),
        jl.intent_line(llm, **agent, name="gpt-4o-mini", effect=None, request_fingerprint=fp,
                       kind="llm"),
        jl.done_line(key, **agent, kind="tool", name="charge", result='{"charge": "ch_1"}',
                     lease="9a1e"),
        jl.done_line(key, **agent, kind="tool", name="charge", result='"x"', capped=True,
                     replayable=False, lease="9a1e"),
        jl.done_line(llm, **agent, kind="llm", name="gpt-4o-mini", result=written[7]["result"]),
        jl.done_line((key[0], "2.2", 2), **agent, kind="llm", name="gpt-4o-mini",
                     chunks=written[8]["chunks"]),
        jl.done_line((key[0], "2.2", 3), **agent, kind="llm", name="gpt-4o-mini", capped=True),
        jl.done_line((key[0], "0", 1), **agent, kind="run", name="Shop"),
        jl.failed_line(key, **agent, kind="tool", name="charge", error="TimeoutError: slow",
                       applied="unknown", lease="9a1e"),
        jl.failed_line(key, **agent, kind="llm", name="gpt-4o-mini", error="RateLimitError",
                       applied="no"),
        jl.replayed_line(key, **agent, kind="tool", name="charge"),
        jl.decision_line(key, "done", result='{"charge": "ch_1"}',
                         evidence="seen in the dashboard"),
        jl.decision_line(key, "abandon"),
    ]  # fmt: skip
    now = ts_nanoseconds(written[0]["ts"])
    assert [jl.journal_bytes(line, now) for line in built] == _lines()


def test_the_schema_validates_with_the_same_structs() -> None:
    assert schema.Step is jl.Step and schema.StepDecision is jl.StepDecision
    lines = [json.loads(data) for data in _lines()]
    schema.check_journal(lines, 64)
    refused = {**lines[0], "lease_holder": "x"}  # a key the format does not name
    assert jl.decode_line(refused) is None
    with pytest.raises(schema.FormatError):
        schema.check_journal([refused], 64)


def test_an_llm_response_is_turned_into_data_and_capped_by_the_thread_that_encodes_it() -> None:
    class Reply(msgspec.Struct):
        text: str

    class Dumps:
        def model_dump(self, mode: str = "python") -> dict[str, object]:
            return {"content": [{"type": "thinking", "thinking": "t", "signature": "opaque"}]}

    key = ("run-1", "1.1", 1)
    line = jl.done_line(key, agent_id="a", kind="llm", name="m", result=Dumps())
    kept = json.loads(jl.response_bytes(line))
    # A thinking block's signature is kept: Anthropic refuses the block sent back without it.
    assert kept["result"] == {
        "content": [{"type": "thinking", "thinking": "t", "signature": "opaque"}]
    }
    not_data = jl.done_line(key, agent_id="a", kind="llm", name="m", result=object())
    capped = json.loads(jl.response_bytes(not_data))
    assert capped["capped"] is True and capped["result"] is None
    chunks = jl.done_line(key, agent_id="a", kind="llm", name="m", chunks=[Reply("x")])
    assert json.loads(jl.response_bytes(chunks))["chunks"] == [{"text": "x"}]


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"amount": 5, "currency": "eur"},
        {"b": [1, 2.5, None, True], "a": {"z": "é", "y": ["x" * 3000]}},
        {"when": __import__("datetime").date(2026, 1, 2)},  # data msgspec encodes in C
        {"model": object()},  # not data: counted as its str by the fingerprint
        {"note": "\ud800"},  # text with no UTF-8: msgspec refuses it
    ],
)
def test_a_tool_calls_arguments_are_serialised_once_for_its_fingerprint_and_its_intent(
    arguments: dict[str, object],
) -> None:
    from agenttrace.model import journal as j
    from agenttrace.tracing.journal.steps import journal_json, tool_request_json

    fingerprint, text = tool_request_json("charge", arguments)
    assert fingerprint == j.tool_fingerprint("charge", arguments)
    shared = j.tool_call_request("charge", arguments)[1]
    if "model" in arguments or "note" in arguments:  # each form made as before
        assert shared is None and text == journal_json(arguments)
    else:
        assert shared is not None and text == shared.decode("utf-8", "surrogatepass")
        assert json.loads(text) == json.loads(journal_json(arguments))


_TEXTS = [
    "".join(chr(code) for code in range(0x20)),  # every control character
    'quote " backslash \\ slash / del \x7f',
    "accents é, CJK 中文, emoji 😀, line and paragraph separators \u2028\u2029",
    "a lone surrogate \udc80 in it",
    "",
]


@pytest.mark.parametrize("text", _TEXTS, ids=range(len(_TEXTS)))
def test_a_line_is_encoded_as_the_streams_encoder_writes_it_whatever_its_text(text: str) -> None:
    line = jl.failed_line(
        ("run-1", "1.2", 3),
        agent_id="agent",
        kind="tool",
        name=text,
        error=text,
        applied="unknown",
        lease=None,
    )
    plain = msgspec.structs.replace(line)
    line.result = {"nested": [text, 1.5, 1 << 70, None, True]}  # spaced inside as well
    line.pid = 1 << 70  # past what msgspec encodes
    for each in (plain, line):
        data = jl.journal_bytes(each, 1_700_000_000_123_000_000)  # stamps its ts
        expected = json.dumps(
            msgspec.to_builtins(each), ensure_ascii=False, separators=(", ", ": ")
        )
        assert data == (expected + "\n").encode("utf-8", "backslashreplace")
