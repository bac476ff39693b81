"""Size caps: cut before scanning, idempotent at any depth, a 20 MB result cut on a real span."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agenttrace
from agenttrace import semconv as sc
from agenttrace._internal.caps import capped_json, truncate_utf8, utf8_size
from agenttrace._internal.redact import (
    REDACTED,
    SCAN_MARGIN,
    cap_text,
    recorded_json,
    redacted_copy,
    remember_secret,
)

from .conftest import Traced, attrs

# Text that exercises the scanners as well as the cut: URL pieces, quotes, escapes, secret
# names, a marker-like tail, and characters of every UTF-8 length.
_PIECES = st.sampled_from(
    [
        "?key=",
        "&x=1",
        "#token=",
        "https://u:p@h/",
        '"password": "',
        '\\"',
        "\\",
        '"',
        "sk-",
        "Bearer ",
        "…[truncated, 12 bytes]",
        "…[+3 chars]",
        "é",
        "€",
        "😀",
        " ",
    ]
)
TEXT = st.lists(st.one_of(_PIECES, st.text(max_size=20)), max_size=40).map("".join)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | TEXT,
    lambda inner: (
        st.lists(inner, max_size=6)
        | st.dictionaries(st.sampled_from(["a", "password", "url", "x-api-key", "b"]), inner)
        | inner.map(json.dumps)
    ),  # JSON inside a string, as tool-call arguments travel
    max_leaves=20,
)
CAPS = st.integers(min_value=40, max_value=400)


@given(TEXT, CAPS)
def test_a_cut_text_fits_and_cutting_it_again_changes_nothing(text: str, cap: int) -> None:
    cut = truncate_utf8(text, cap)
    assert utf8_size(cut) <= cap
    assert truncate_utf8(cut, cap) == cut
    if utf8_size(text) <= cap:
        assert cut == text


@given(TEXT, CAPS)
def test_recorded_text_recorded_again_is_unchanged(text: str, cap: int) -> None:
    recorded = cap_text(text, cap)
    assert utf8_size(recorded) <= cap
    assert cap_text(recorded, cap) == recorded


@settings(max_examples=200)
@given(JSON, CAPS)
def test_recorded_json_recorded_again_is_unchanged(value: Any, cap: int) -> None:
    """What the exports and the console do with a recorded payload: record it again."""
    _, recorded = recorded_json(value, cap)
    assert utf8_size(recorded) <= cap
    assert recorded_json(recorded, cap)[1] == recorded  # as a string attribute
    if not isinstance(value, str):
        parsed = json.loads(recorded)  # still JSON
        if not isinstance(parsed, str):  # (the last resort: the JSON cut, as one string)
            assert recorded_json(parsed, cap)[1] == recorded  # as the value it stands for
    assert redacted_copy({"payload": recorded}, cap) == {"payload": recorded}


def test_a_smaller_cap_keeps_the_original_size() -> None:
    once = truncate_utf8("x" * 1000, 200)
    twice = truncate_utf8(once, 100)
    assert once.endswith("…[truncated, 1000 bytes]") and twice.endswith("…[truncated, 1000 bytes]")
    assert utf8_size(twice) <= 100 and twice.startswith("xxx")
    shortened = json.loads(capped_json({"a": "y" * 1000}, 300))["a"]
    again = json.loads(capped_json({"a": shortened}, 120))["a"]
    assert shortened.endswith(f"…[+{1000 - len(shortened.split('…')[0])} chars]")
    assert again.endswith(f"…[+{1000 - len(again.split('…')[0])} chars]")


def test_json_too_big_even_shortened_becomes_one_string_that_fits() -> None:
    value = [f"item {i}" for i in range(5000)]
    text = capped_json(value, 500)
    assert utf8_size(text) <= 500
    assert isinstance(json.loads(text), str) and "…[truncated, " in json.loads(text)
    assert capped_json(json.loads(text), 500) == text  # capped again: unchanged
    assert recorded_json(text, 500)[1] == text  # recorded as text: unchanged


def test_a_secret_the_cut_goes_through_is_replaced_whole() -> None:
    """Cut first and scan after, and the half a cut leaves of a known secret is no longer
    recognised: the margin scanned past the cap sees it whole."""
    secret = "canary-remembered-value-0123456789-abcdef"
    remember_secret(secret)
    cap = 200
    marker = "…[truncated, 100000 bytes]"
    budget = cap - utf8_size(marker)
    # The cut goes 8 characters into the secret, whose end is past the cap.
    text = "a" * (budget - 8) + secret + "b" * (100_000 - budget + 8 - len(secret))
    assert utf8_size(text) == 100_000 and budget - 8 + len(secret) > cap
    recorded = cap_text(text, cap)
    assert recorded == "a" * (budget - 8) + REDACTED[:8] + marker
    assert len(secret) < SCAN_MARGIN


MB20 = 20_000_000


@pytest.mark.console("trace")
@pytest.mark.init(capture_content=True, max_payload_bytes=4096)
def test_a_20_mb_tool_result_is_cut_to_the_cap(traced: Traced) -> None:
    url = "https://files.example.com/big?key=sEcReT-20mb-canary&x=1"
    head = f"fetched {url}\n"
    big = head + "z" * (MB20 - len(head) - len(url)) + url  # a secret far past the cap too

    @agenttrace.tool
    def read_file(path: str) -> str:
        return big

    document = {"path": "/big.json", "content": big, "password": "hunter2-canary"}

    @agenttrace.tool
    def read_json(path: str) -> dict[str, Any]:
        return document

    @agenttrace.agent(name="Reader")
    def run() -> None:
        with agenttrace.turn():
            read_file("/big")
            read_json("/big.json")

    run()
    text = attrs(traced.one("execute_tool read_file"))
    result = str(text[sc.GEN_AI_TOOL_CALL_RESULT])
    assert text[sc.TOOL_CHARS_OUT] == MB20
    assert utf8_size(result) <= 4096 and result.endswith(f"…[truncated, {MB20} bytes]")
    assert result.startswith("fetched https://files.example.com/big?key=[REDACTED]&x=1\nzzz")
    structured = attrs(traced.one("execute_tool read_json"))
    recorded = str(structured[sc.GEN_AI_TOOL_CALL_RESULT])
    assert structured[sc.TOOL_CHARS_OUT] == len(json.dumps(document, ensure_ascii=False))
    assert utf8_size(recorded) <= 4096
    parsed = json.loads(recorded)
    assert parsed["path"] == "/big.json" and parsed["password"] == REDACTED
    kept = parsed["content"].split("…[+")[0]
    assert parsed["content"] == f"{kept}…[+{MB20 - len(kept)} chars]"
    assert kept.startswith("fetched https://files.example.com/big?key=[REDACTED]&x=1")
    console = traced.output()
    assert "sEcReT" not in console and "hunter2" not in console and "sEcReT" not in recorded
    for line in console.splitlines():
        assert utf8_size(line) < 4096 + 200  # the body, capped, after the line's prefix


@pytest.mark.init(max_payload_bytes=4096)
def test_a_huge_error_is_cut_before_it_is_scanned(traced: Traced, tmp_path: Path) -> None:
    @agenttrace.tool
    def download() -> None:
        raise RuntimeError("GET https://h.example/f?key=eRr-canary-77&x=1 gave " + "z" * MB20)

    @agenttrace.agent(name="Downloader")
    def run() -> None:
        download()

    with pytest.raises(RuntimeError):
        run()
    span = traced.one("execute_tool download")
    (event,) = span.events
    ledger = json.loads((tmp_path / "accounting.jsonl").read_text())
    for text in (
        span.status.description or "",
        str((event.attributes or {})["exception.message"]),
        str((event.attributes or {})["exception.stacktrace"]),
        ledger["error"],
    ):
        assert utf8_size(text) <= 4096 and "…[truncated, " in text
        assert "https://h.example/f?key=[REDACTED]&x=1 gave zzz" in text
        assert "canary" not in text


@pytest.mark.init(max_payload_bytes=64)
def test_every_string_a_span_carries_fits_the_cap_as_its_export_does(
    traced: Traced, tmp_path: Path
) -> None:
    """Names, call paths and ingress are capped on the live span exactly as an export of the
    session file caps every string it writes, so the two agree whatever their length."""
    from agenttrace.formats.session.fullest import load_fullest
    from agenttrace.views.exports import to_otlp_json
    from agenttrace.views.public import public_view

    long_name = "a-tool-with-a-name-far-longer-than-the-payload-cap-" * 3

    @agenttrace.tool(name=long_name)
    def work() -> str:
        return "done"

    @agenttrace.agent(
        name="An agent whose name is longer than the cap of sixty-four bytes",
        ingress={"source": "cli", "cli": {"cwd": "/" + "d" * 200, "argv0": "x"}},
    )
    def run() -> None:
        work()

    run()
    agenttrace.force_flush()
    live = {span.name: attrs(span) for span in traced.ours()}
    for attributes in live.values():
        for value in attributes.values():
            if isinstance(value, str):
                assert utf8_size(value) <= 64, value
    (tool_span,) = [name for name in live if name.startswith("execute_tool ")]
    tool = live[tool_span]
    assert str(tool[sc.GEN_AI_TOOL_NAME]).endswith(f"…[truncated, {len(long_name)} bytes]")
    assert utf8_size(tool_span) <= 64 and tool_span.startswith("execute_tool a-tool-with")
    (snapshot,) = (tmp_path / "sessions").glob("*.json.gz")
    exported = to_otlp_json(public_view(load_fullest(snapshot), 64))
    spans = [
        span
        for resource in exported["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    compared = 0
    for span in spans:
        strings = {
            kv["key"]: kv["value"]["stringValue"]
            for kv in span["attributes"]
            if "stringValue" in kv["value"]
        }
        sent = live[span["name"]]
        for key, value in strings.items():
            assert sent.get(key) == value, (span["name"], key)
            compared += 1
    assert compared > 10
